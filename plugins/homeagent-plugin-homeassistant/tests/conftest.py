"""The tests import the plugin from its source tree, installed or not (as ``pythonpath`` does when run alone)."""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE = str(Path(__file__).resolve().parents[1])
if _SOURCE not in sys.path:
    sys.path.insert(0, _SOURCE)


def pytest_collection_modifyitems(config: object, items: list) -> None:  # type: ignore[type-arg]
    """Tests that start a real Home Assistant are skipped, saying why, where none is installed
    (``make ha-venv`` builds it; ``make test`` does when it can)."""
    import pytest
    from ha_server import HASS

    if HASS.exists():
        return
    reason = f"Home Assistant is not installed at {HASS}: run `make ha-venv` (or set HOMEAGENT_HA_VENV)"
    for item in items:
        if "homeassistant" in str(getattr(item, "fspath", "")) and "home" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason=reason))
