"""Docs and tests keep up with the hookspecs: a section and a test per hook."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from homeagent_sdk import hookspecs

ROOT = Path(__file__).resolve().parents[1]


def specs() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in vars(hookspecs).items()
        if inspect.isfunction(fn) and hasattr(fn, "homeagent_spec")
    }


def test_every_hook_has_a_docs_section_headed_by_its_signature():
    text = (ROOT / "docs" / "PLUGINS.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `([a-z_]+\([a-z_, ]*\))`", text, flags=re.M))
    expected = {f"{name}({', '.join(sig.parameters)})" for name, sig in specs().items()}
    assert expected - headings == set(), "hooks without a docs/PLUGINS.md section"
    assert headings - expected == set(), "docs sections for hooks that do not exist"


def test_every_hook_has_a_test_named_after_it():
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py"))
    missing = [name for name in specs() if not re.search(rf"def test_hook_{name}\b", source)]
    assert missing == [], f"add tests named test_hook_<name> for: {missing}"


def test_the_readme_python_examples_run_as_scripts():
    """Each Python block of the README is a valid script (no top-level ``await`` / ``async with``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    assert blocks, "the README shows no Python example"
    for block in blocks:
        compile(block, "README.md", "exec")  # a SyntaxError names the offending line


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_and_the_readme_say_how_to_put_homeagent_on_the_path():
    """The README's "Using it" calls ``homeagent`` bare; ``make run`` installs it into ``.venv/bin``."""
    planned = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert "source .venv/bin/activate" in planned.stdout
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    using = text[text.index("## Using it") :]
    assert using.index("source .venv/bin/activate") < using.index("homeagent serve")
