"""``homeagent install`` / ``homeagent uninstall``: pip, run by the interpreter that runs HomeAgent.

Python plugins are ordinary distributions with an entry point in the ``homeagent`` group, so
installing one is ``pip install`` — but into the right environment. These commands run pip
inside this very interpreter (``runpy``, as ``llm install`` does), so a plugin always lands
where ``homeagent`` will find it, whatever ``pip`` is first on ``PATH``.

A plugin that breaks the command line itself can still be removed: entry-point plugins are
loaded before any command runs, and ``HOMEAGENT_LOAD_PLUGINS=''`` loads none of them::

    HOMEAGENT_LOAD_PLUGINS='' homeagent uninstall homeagent-plugin-broken

``.hmap`` packages (out-of-process, Lua, skills) are not pip distributions: they belong to one
data directory. ``homeagent install x.hmap [--data DIR]`` installs them into that directory's
plugin folder (as ``homeagent plugins install`` does) and a daemon running there starts them at
once. Python distributions go into the environment, which every data directory shares; they
load when a daemon (re)starts.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import runpy
import sys
from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, fail, handle_errors
from homeagent_sdk._names import PROJECT_NAME
from homeagent_sdk.errors import UsageError

__all__ = [
    "install", "is_hmap", "pip_install_args", "pip_uninstall_args", "plugin_entry_points", "run_pip", "uninstall"
]

#: Distributions ``homeagent uninstall`` refuses to remove (it would remove itself).
PROTECTED = frozenset({"homeagent", "pip"})


def _canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def pip_install_args(
    packages: list[str],
    *,
    editable: str | None = None,
    upgrade: bool = False,
    force_reinstall: bool = False,
    no_cache_dir: bool = False,
    pre: bool = False,
) -> list[str]:
    """The ``pip`` argument list for ``homeagent install``.

    Raises:
        UsageError: nothing to install, or a ``.hmap`` package (not a pip distribution).
    """
    if not packages and not editable:
        raise UsageError("nothing to install: give a package name, a path, or -e PATH (e.g. homeagent-plugin-hello)")
    hmaps = [p for p in [*packages, editable or ""] if p.endswith(".hmap")]
    if hmaps:
        raise UsageError(
            f"{hmaps[0]} is a HomeAgent package, not a Python distribution: "
            f"install it with `homeagent plugins install {hmaps[0]}`"
        )
    args = ["install"]
    for flag, on in (
        ("--upgrade", upgrade),
        ("--force-reinstall", force_reinstall),
        ("--no-cache-dir", no_cache_dir),
        ("--pre", pre),
    ):
        if on:
            args.append(flag)
    if editable:
        args += ["--editable", editable]
    return args + list(packages)


def pip_uninstall_args(packages: list[str], *, yes: bool = False) -> list[str]:
    """The ``pip`` argument list for ``homeagent uninstall``.

    Raises:
        UsageError: no package given, or one that would remove HomeAgent (or pip) itself.
    """
    if not packages:
        raise UsageError("nothing to uninstall: give the distribution name, e.g. homeagent-plugin-hello")
    protected = [p for p in packages if _canonical(p) in PROTECTED]
    if protected:
        raise UsageError(
            f"refusing to uninstall {protected[0]}: it would remove HomeAgent's own installation; "
            f"use `{sys.executable} -m pip uninstall {protected[0]}` if you really mean it"
        )
    return ["uninstall", *(["--yes"] if yes else []), *packages]


def run_pip(args: list[str]) -> int:
    """Run pip with ``args`` in this interpreter; returns its exit status."""
    saved = sys.argv
    sys.argv = ["pip", *args]
    try:
        runpy.run_module("pip", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved
        importlib.invalidate_caches()
    return 0


def plugin_entry_points() -> dict[str, str]:
    """Installed plugins of the ``homeagent`` group: entry-point name -> ``"dist version"``."""
    found: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=PROJECT_NAME):
        dist = ep.dist
        found[ep.name] = f"{dist.name} {dist.version}" if dist is not None else ep.value
    return found


def is_hmap(source: str) -> bool:
    """Whether ``source`` names a HomeAgent package (a ``.hmap`` path or URL) rather than a pip requirement."""
    return source.split("?", 1)[0].split("#", 1)[0].lower().endswith(".hmap")


@handle_errors
def install(
    packages: Annotated[
        list[str] | None,
        typer.Argument(help="Distributions or paths to install (anything pip accepts), or .hmap packages."),
    ] = None,
    editable: Annotated[
        str | None, typer.Option("--editable", "-e", help="Install a project folder in editable mode.")
    ] = None,
    upgrade: Annotated[bool, typer.Option("--upgrade", "-U", help="Upgrade to the newest version.")] = False,
    force_reinstall: Annotated[bool, typer.Option("--force-reinstall", help="Reinstall even if up to date.")] = False,
    no_cache_dir: Annotated[bool, typer.Option("--no-cache-dir", help="Do not use pip's cache.")] = False,
    pre: Annotated[bool, typer.Option("--pre", help="Include pre-release versions.")] = False,
    data: DataOption = None,
) -> None:
    """Install plugins: .hmap packages into the data directory, Python distributions with pip.

    A .hmap (out-of-process, Lua or skill package; a path or an http(s) URL) goes into
    <data>/plugins/ and a daemon running on that data directory starts it at once (with
    --upgrade or --force-reinstall an installed one is replaced). Anything else is installed
    with pip into the environment HomeAgent runs in: that environment is shared by every data
    directory, and a Python plugin loads when a daemon (re)starts.
    """
    wanted = list(packages or [])
    hmaps = [p for p in wanted if is_hmap(p)]
    wheels = [p for p in wanted if not is_hmap(p)]
    if hmaps:
        _install_hmaps(hmaps, data, force=upgrade or force_reinstall)
        if not wheels and not editable:
            return
    args = pip_install_args(
        wheels,
        editable=editable,
        upgrade=upgrade,
        force_reinstall=force_reinstall,
        no_cache_dir=no_cache_dir,
        pre=pre,
    )
    before = plugin_entry_points()
    code = run_pip(args)
    if code != 0:
        raise fail(f"pip install failed (exit status {code}); see pip's output above", code)
    after = plugin_entry_points()
    added = {name: dist for name, dist in after.items() if before.get(name) != dist}
    for name, dist in sorted(added.items()):
        typer.echo(
            f"plugin {name} ({dist}) installed into the Python environment {sys.prefix}, which every data "
            "directory shares; it loads the next time homeagent starts (restart a running daemon: it cannot "
            "import Python code while running)"
        )
    if not added:
        typer.echo("no new HomeAgent plugin entry points (the packages may be libraries, or already installed)")


def _install_hmaps(sources: list[str], data: Path | None, *, force: bool) -> None:
    """Install ``.hmap`` packages into the data directory; a daemon running there starts each at once."""
    from homeagent_core.cli.plugins_install import install_hmap, report_install
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.plugins.packages import PackageError

    root = prepare_data_dir(data)
    for source in sources:
        try:
            result = install_hmap(root, source, force=force)
        except PackageError as exc:
            raise fail(str(exc)) from None
        report_install(root, result)


@handle_errors
def uninstall(
    packages: Annotated[
        list[str], typer.Argument(help="Distribution names (e.g. homeagent-plugin-hello) or installed package names.")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    data: DataOption = None,
) -> None:
    """Uninstall plugins: packages installed in the data directory, Python distributions with pip.

    A name installed in <data>/plugins/ (a .hmap package) is removed from there (a daemon
    running on the data directory stops it first); other names are uninstalled with pip from
    the environment HomeAgent runs in. If an installed Python plugin breaks the command line,
    run it as HOMEAGENT_LOAD_PLUGINS='' homeagent uninstall NAME.
    """
    from homeagent_core.cli.plugins_install import remove
    from homeagent_core.datadir import resolve_data_dir
    from homeagent_core.plugins.packages import NAME_RE

    root = resolve_data_dir(data)
    local = [p for p in packages if NAME_RE.match(p) and (root / "plugins" / p).is_dir()]
    for name in local:
        remove(name, data=root)
    packages = [p for p in packages if p not in local]
    if local and not packages:
        return
    args = pip_uninstall_args(list(packages), yes=yes)
    before = plugin_entry_points()
    code = run_pip(args)
    if code != 0:
        raise fail(f"pip uninstall failed (exit status {code}); see pip's output above", code)
    gone = sorted(name for name in before if name not in plugin_entry_points())
    for name in gone:
        typer.echo(f"plugin {name} removed")
