"""Importing the packages and asking for --help never loads the heavy stack."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "open_clip", "sentence_transformers", "uvicorn", "mcp", "lupa", "networkx", "jieba")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_the_packages_stays_light():
    assert loaded_after("import homeagent_core, homeagent_sdk, homeagent_sdk.testing") == set()


def test_homeagent_help_stays_light():
    code = (
        "from typer.testing import CliRunner\n"
        "from homeagent_core.cli import app\n"
        "from homeagent_core.cli._app import _add_plugin_commands\n"
        "_add_plugin_commands()\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
    )
    assert loaded_after(code) == set()
