"""The tests import the plugin from its source tree, installed or not (as ``pythonpath`` does when run alone)."""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE = str(Path(__file__).resolve().parents[1])
if _SOURCE not in sys.path:
    sys.path.insert(0, _SOURCE)
