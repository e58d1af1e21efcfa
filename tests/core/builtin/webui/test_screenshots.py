"""A test run leaves the checkout as it was: the browser tests' screenshots go to a temporary
folder, and only ``make screenshots`` (``$HOMEAGENT_SCREENSHOTS``) renders ``docs/screenshots/``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
COMMITTED = ROOT / "docs" / "screenshots"
ONE_SHOT = "tests/core/builtin/webui/test_browser_chat.py::test_navigation_fits_one_line_on_a_390px_phone"

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
    reason="chromium is not installed (apt-get install chromium)",
)


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.png"))}


def _run_browser_test(basetemp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "HOMEAGENT_SCREENSHOTS"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}", ONE_SHOT],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_browser_tests_render_into_a_temporary_folder_and_never_into_the_checkout(tmp_path: Path):
    before = _state(COMMITTED)
    result = _run_browser_test(tmp_path / "run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _state(COMMITTED) == before, "a test run rewrote docs/screenshots/"
    assert [p.name for p in (tmp_path / "run").rglob("chat-phone-390.png")] == ["chat-phone-390.png"]


def test_screenshots_go_where_homeagent_screenshots_says(tmp_path: Path):
    target = tmp_path / "rendered"
    result = _run_browser_test(tmp_path / "run", HOMEAGENT_SCREENSHOTS=str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    assert [p.name for p in target.iterdir()] == ["chat-phone-390.png"]
