"""Every Python sample in ``docs/WRITING_PLUGINS.md`` runs and its tests pass.

Each ```python block becomes one test module, run by pytest in a subprocess the way a plugin
author would run it (the test kit comes from the ``pytest11`` entry point). The shell samples
are exercised by ``tests/examples/test_first_try.py`` and ``tests/core/cli/test_install.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "WRITING_PLUGINS.md"
INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings =
    error
    ignore::DeprecationWarning:jieba.*
"""


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_every_python_sample_in_the_tutorial_runs_and_passes(tmp_path: Path):
    blocks = python_blocks()
    assert len(blocks) >= 6
    project = tmp_path / "samples"
    project.mkdir()
    (project / "pytest.ini").write_text(INI, encoding="utf-8")
    for index, block in enumerate(blocks):
        assert "def test_" in block, f"sample {index} has no test: every sample must check itself"
        (project / f"test_sample_{index}.py").write_text(block, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOMEAGENT_", "PYTEST_"))}
    env.update({"HOMEAGENT_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t"), "-rA"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    for index in range(len(blocks)):
        assert f"PASSED test_sample_{index}.py::" in result.stdout, f"sample {index} ran no passing test"
