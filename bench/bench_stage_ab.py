"""One stage of 10 trivial async handlers: this tree's StageRunner against earlier builds'.

The earlier runners are read from git (``--rev``, repeatable; default the first build,
72dd354), loaded beside this tree's and timed in the same process: rounds alternate between
them, each round's median is kept, and the table shows the median of the round medians and the
ratio to the first ``--rev``. Run it under each interpreter and loop you care about
(``--uvloop``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from _harness import arg_parser, emit
from bench_turn import stage_plugin

from homeagent_core.agent import stages as current
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk.types import StageContext

ROOT = Path(__file__).resolve().parent.parent
FIRST_BUILD = "72dd354"


def load_runner(rev: str, folder: Path) -> ModuleType:
    """``homeagent_core/agent/stages.py`` as it was at ``rev``, as a module of its own."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:homeagent_core/agent/stages.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"cannot read the stage runner of {rev} from git in {ROOT}: {exc}") from None
    path = folder / f"stages_{rev}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"stages_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def run(revs: list[str], rounds: int, n: int) -> dict[str, list[float]]:
    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=[stage_plugin(i) for i in range(10)])
    runners: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for rev in revs:
            runners[rev] = load_runner(rev, Path(folder)).StageRunner(host)
    runners["this tree"] = current.StageRunner(host)
    ctx = StageContext()
    medians: dict[str, list[float]] = {name: [] for name in runners}
    for runner in runners.values():
        for _ in range(n):
            await runner.run("pre_action", ctx)
    for _ in range(rounds):
        for name, runner in runners.items():
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                await runner.run("pre_action", ctx)
                samples.append(time.perf_counter() - t0)
            medians[name].append(statistics.median(samples))
    for runner in runners.values():
        runner.close()
    return medians


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--rev", action="append", help=f"an earlier build to compare with, a git revision (default {FIRST_BUILD})"
    )
    parser.add_argument("--rounds", type=int, default=20, help="alternating rounds")
    parser.add_argument("-n", type=int, default=200, help="stage runs per round")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    args = parser.parse_args()
    revs = args.rev or [FIRST_BUILD]
    if args.uvloop:
        import uvloop

        medians = uvloop.run(run(revs, args.rounds, args.n))
    else:
        medians = asyncio.run(run(revs, args.rounds, args.n))
    base = statistics.median(medians[revs[0]])
    rows = []
    figures: dict[str, Any] = {}
    for name, values in medians.items():
        p50 = statistics.median(values) * 1e6
        rows.append({"runner": name, "p50 (us)": p50, "ratio": p50 / (base * 1e6), "rounds": len(values)})
    figures["first_rev_p50_us"] = round(base * 1e6, 3)
    figures["this_p50_us"] = round(statistics.median(medians["this tree"]) * 1e6, 3)
    figures["ratio"] = round(figures["this_p50_us"] / figures["first_rev_p50_us"], 3)
    figures["python"] = sys.version.split()[0]
    figures["loop"] = "uvloop" if args.uvloop else "asyncio"
    emit(
        args,
        f"stage of 10 async handlers, {', '.join(revs)} vs this tree ({figures['python']}, {figures['loop']})",
        rows,
        figures,
    )


if __name__ == "__main__":
    main()
