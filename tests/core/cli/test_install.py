"""``homeagent install`` / ``uninstall`` run pip in HomeAgent's own interpreter.

The end-to-end tests make a throw-away virtual environment that sees this checkout's packages
(through a ``.pth`` that adds the development site directory), so pip installs into the
throw-away environment and never into the one running the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from homeagent_core.cli import install_cmd
from homeagent_sdk.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]
HELLO = ROOT / "examples" / "homeagent-plugin-hello"

# The command line as users get it; adds install/uninstall when the root app does not have them yet.
CLI = textwrap.dedent(
    """
    import sys
    from homeagent_core.cli import _app, install_cmd
    names = {c.name for c in _app.app.registered_commands}
    if "install" not in names:
        _app.app.command("install")(install_cmd.install)
        _app.app.command("uninstall")(install_cmd.uninstall)
    _app.main()
    """
)


def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.command("install")(install_cmd.install)
    app.command("uninstall")(install_cmd.uninstall)
    return app


def test_install_arguments_are_passed_to_pip_in_order():
    args = install_cmd.pip_install_args(["homeagent-plugin-x", "./local"], upgrade=True, pre=True)
    assert args == ["install", "--upgrade", "--pre", "homeagent-plugin-x", "./local"]
    assert install_cmd.pip_install_args([], editable="examples/x") == ["install", "--editable", "examples/x"]


def test_install_without_packages_says_what_to_give():
    with pytest.raises(UsageError, match="nothing to install: give a package name"):
        install_cmd.pip_install_args([])
    result = CliRunner().invoke(cli_app(), ["install"])
    assert result.exit_code == 1
    assert "nothing to install" in result.output


def test_an_hmap_package_goes_into_the_plugin_folder_of_the_data_directory_given(tmp_path: Path):
    from hmapdev.build import pack_project, render_template

    render_template("lua", "echo", tmp_path / "echo")
    package = pack_project(tmp_path / "echo")
    data = tmp_path / "data"
    result = CliRunner().invoke(cli_app(), ["install", str(package), "--data", str(data)])
    assert result.exit_code == 0, result.output
    assert f"installed echo 0.1.0 into {data / 'plugins'}" in result.output
    assert f"no daemon runs on {data}" in result.output and (data / "plugins" / "echo" / "main.lua").is_file()

    missing = CliRunner().invoke(cli_app(), ["install", "dist/echo-0.1.0.hmap", "--data", str(data)])
    assert missing.exit_code == 1 and "dist/echo-0.1.0.hmap" in missing.output

    removed = CliRunner().invoke(cli_app(), ["uninstall", "echo", "--data", str(data)])
    assert removed.exit_code == 0, removed.output
    assert "removed echo" in removed.output and not (data / "plugins" / "echo").exists()


def test_uninstall_refuses_to_remove_homeagent_itself():
    result = CliRunner().invoke(cli_app(), ["uninstall", "-y", "HomeAgent"])
    assert result.exit_code == 1
    assert "refusing to uninstall HomeAgent" in result.output
    assert install_cmd.pip_uninstall_args(["homeagent-plugin-x"], yes=True) == [
        "uninstall", "--yes", "homeagent-plugin-x"
    ]


def test_plugin_entry_points_lists_the_homeagent_group_only():
    found = install_cmd.plugin_entry_points()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh virtual environment that also sees this checkout's installed packages."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=60)
    site = Path(sysconfig.get_paths(vars={"base": str(env), "platbase": str(env)})["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    dev_site = sysconfig.get_paths()["purelib"]
    (site / "_homeagent_dev.pth").write_text(f"import site; site.addsitedir({dev_site!r})\n", encoding="utf-8")
    return env


def run(
    env: Path, *args: str, data: Path, extra_env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HOMEAGENT_", "PYTHONPATH", "VIRTUAL_ENV"))}
    environ.update({"HOMEAGENT_HOME": str(data), "HF_HUB_OFFLINE": "1", "PIP_NO_INPUT": "1", **(extra_env or {})})
    return subprocess.run(
        [str(env / "bin" / "python"), *args], capture_output=True, text=True, env=environ, timeout=timeout
    )


def homeagent(env: Path, *args: str, data: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return run(env, "-c", CLI, *args, data=data, **kw)  # type: ignore[arg-type]


def listed(env: Path, data: Path) -> dict[str, dict[str, object]]:
    out = homeagent(env, "plugins", "list", "--json", data=data)
    assert out.returncode == 0, out.stderr
    return {row["name"]: row for row in json.loads(out.stdout)}


@pytest.mark.slow
def test_hello_installs_editable_is_listed_used_in_a_turn_and_uninstalls(venv: Path, tmp_path: Path):
    project = tmp_path / "homeagent-plugin-hello"  # pip writes egg-info into the tree: use a copy
    shutil.copytree(HELLO, project, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    data = tmp_path / "data"

    installed = homeagent(venv, "install", "-e", str(project), data=data)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "plugin hello (homeagent-plugin-hello 0.1.0) installed" in installed.stdout

    row = listed(venv, data)["hello"]
    assert (row["kind"], row["status"], row["distribution"]) == ("entrypoint", "loaded", "homeagent-plugin-hello")
    assert {"register_tools", "on_input", "register_commands"} <= set(row["hooks"])  # type: ignore[arg-type]
    assert row["contributions"] == {"settings": ["plugin.hello.greeting"], "tools": ["hello"]}

    greeted = homeagent(venv, "hello", "Ada", data=data)
    assert (greeted.returncode, greeted.stdout) == (0, "Hello, Ada!\n"), greeted.stderr

    turn = run(venv, "-c", textwrap.dedent(
        """
        import asyncio, sys
        from homeagent_core import Agent
        from homeagent_sdk.testing import FakeModel, ToolCallReply

        async def main():
            model = FakeModel([ToolCallReply("hello", {"name": "Ada"}), "done"])
            async with Agent(sys.argv[1], provider=model) as agent:
                print(await agent.ask("greet Ada"))
            print(model.requests[1]["messages"][-1]["content"])

        asyncio.run(main())
        """
    ), str(data), data=data)
    assert turn.returncode == 0, turn.stderr
    assert turn.stdout.splitlines()[:2] == ["done", "Hello, Ada!"]

    removed = homeagent(venv, "uninstall", "-y", "homeagent-plugin-hello", data=data)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "plugin hello removed" in removed.stdout
    assert "hello" not in listed(venv, data)


@pytest.mark.slow
def test_a_plugin_that_breaks_the_command_line_is_removed_with_load_plugins_empty(venv: Path, tmp_path: Path):
    broken = tmp_path / "homeagent-plugin-broken"
    (broken / "homeagent_plugin_broken").mkdir(parents=True)
    (broken / "homeagent_plugin_broken" / "__init__.py").write_text(
        'raise SystemExit("homeagent-plugin-broken exits on import")\n', encoding="utf-8"
    )
    (broken / "pyproject.toml").write_text(textwrap.dedent(
        """
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "homeagent-plugin-broken"
        version = "0.1.0"

        [project.entry-points.homeagent]
        broken = "homeagent_plugin_broken"

        [tool.setuptools]
        packages = ["homeagent_plugin_broken"]
        """
    ), encoding="utf-8")
    data = tmp_path / "data"
    skip_plugins = {"HOMEAGENT_LOAD_PLUGINS": ""}
    assert homeagent(venv, "install", str(broken), data=data, extra_env=skip_plugins).returncode == 0

    crashed = homeagent(venv, "--help", data=data)
    assert crashed.returncode != 0
    assert "exits on import" in crashed.stderr

    removed = homeagent(venv, "uninstall", "-y", "homeagent-plugin-broken", data=data, extra_env=skip_plugins)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert homeagent(venv, "--help", data=data).returncode == 0
