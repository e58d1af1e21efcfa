"""Config and plugin-host costs on the hot path and at start-up.

``--json`` keys: ``config_get_us`` (one typed read), ``config_set_us`` (one validated write to
SQLite), ``host_create_ms`` (building a plugin host with the built-ins).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Row, arg_parser, emit, time_calls

from homeagent_core.config import ConfigStore
from homeagent_core.plugins.manager import create_plugin_manager


def main() -> None:
    args = arg_parser(__doc__ or "").parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = ConfigStore(Path(tmp) / "config.db")
        get = time_calls(lambda: store.get("core.agent.max_tool_turns"), repeat=20000)
        counter = iter(range(10**9))
        put = time_calls(lambda: store.set("core.agent.max_tool_turns", 1 + next(counter) % 50), repeat=500)
        store.close()
    host = time_calls(lambda: create_plugin_manager(load_entrypoints=False), repeat=50)
    rows = [
        Row.of("config.get (typed read)", get, scale=1e6, unit="µs"),
        Row.of("config.set (validated SQLite write)", put, scale=1e6, unit="µs"),
        Row.of("create_plugin_manager (built-ins)", host),
    ]
    figures = {
        "config_get_us": rows[0]["p50 (µs)"],
        "config_set_us": rows[1]["p50 (µs)"],
        "host_create_ms": rows[2]["p50 (ms)"],
    }
    emit(args, "Config and plugin host", rows, figures)


if __name__ == "__main__":
    main()
