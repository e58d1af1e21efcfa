"""Wheel build hook: compile the document queries' loops (``homeagent_core/memory/documents/_native.c``).

The lexical index's BM25 loops and the dense leg's int8 scans are a plain C shared library
loaded with ctypes (no Python headers needed), built with the C compiler Python itself was
built with (``CC``, else ``cc``). Where no compiler works, the wheel is built without it and
queries score in numpy and simsimd — the same scores, slower
(``homeagent_core/memory/documents/native.py``); the build says so. ``HOMEAGENT_BUILD_NATIVE=0``
skips it on purpose.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "homeagent_core/memory/documents/_native.c"
LIBRARY = "homeagent_core/memory/documents/" + ("_native.dll" if sys.platform == "win32" else "_native.so")
# -ffp-contract=off: no fused multiply-add, so every step rounds as numpy's does
FLAGS = ["-O3", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-std=c99"]


class CustomBuildHook(BuildHookInterface):
    """Compiles the kernels next to their source, and ships it in a (platform-tagged) wheel."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("HOMEAGENT_BUILD_NATIVE", "1") == "0":
            return
        root = Path(self.root)
        source, library = root / SOURCE, root / LIBRARY
        compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        command = [*compiler, *FLAGS, "-o", str(library), str(source)]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            self.app.display_warning(
                f"homeagent: the compiled BM25 loops were not built ({' '.join(command)}): {detail.strip()}\n"
                "The lexical index will score in numpy (same results, slower)."
            )
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install imports the library from the source tree
            build_data["force_include"][str(library)] = LIBRARY
