"""The data directory: where everything a daemon owns lives (DESIGN §11).

``--data DIR`` or ``HOMEAGENT_HOME``; without either, the data directory of the daemon that
runs now (``homeagent serve`` notes it in ``running.json``, see :func:`running_file`), else
``~/.homeagent`` — so ``make run``, the daemon and every command agree. Created on first start with
mode 0700; a directory that cannot be created or written is a :class:`DataDirError` with the
path and the reason, never a traceback deep inside SQLite.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.errors import DataDirError

log = logging.getLogger("homeagent.datadir")

__all__ = [
    "SUBDIRS", "default_data_dir", "forget_running", "note_running", "plugin_data_dir", "prepare_data_dir",
    "resolve_data_dir", "running_data_dir", "running_file",
]

SUBDIRS = ("memory", "knowledge", "plugins", "plugin_data", "skills", "adapters", "personal", "log")


def default_data_dir() -> Path:
    """``$HOMEAGENT_HOME`` if set, else the running daemon's data directory, else ``~/.homeagent``."""
    env = os.environ.get("HOMEAGENT_HOME")
    if env:
        return Path(env).expanduser()
    return running_data_dir() or Path.home() / ".homeagent"


def running_file() -> Path:
    """Where a running daemon notes its data directory.

    ``$HOMEAGENT_RUNTIME_DIR/running.json``, else ``$XDG_RUNTIME_DIR/homeagent/running.json``,
    else ``~/.cache/homeagent/running.json``.
    """
    base = os.environ.get("HOMEAGENT_RUNTIME_DIR")
    if base:
        return Path(base).expanduser() / "running.json"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(xdg) / "homeagent" if xdg else Path.home() / ".cache" / "homeagent"
    return root / "running.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_data_dir() -> Path | None:
    """The data directory of the daemon running now, if one noted it (and is still alive)."""
    try:
        noted = json.loads(running_file().read_text(encoding="utf-8"))
        pid, data = int(noted["pid"]), Path(noted["data"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if pid > 0 and _alive(pid) and data.is_dir() else None


def note_running(root: Path) -> None:
    """Note that this process serves ``root`` (best effort: commands then fall back to the default)."""
    path = running_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, json.dumps({"pid": os.getpid(), "data": str(root)}))
    except OSError as exc:
        log.warning("could not note the running daemon in %s (%s); commands run without --data will not find it",
                    path, exc)


def forget_running(root: Path) -> None:
    """Remove the note, if it is this process's."""
    path = running_file()
    try:
        noted = json.loads(path.read_text(encoding="utf-8"))
        if noted.get("pid") == os.getpid() and noted.get("data") == str(root):
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def resolve_data_dir(data: str | os.PathLike[str] | None) -> Path:
    return (Path(data).expanduser() if data else default_data_dir()).absolute()


def prepare_data_dir(data: str | os.PathLike[str] | None) -> Path:
    """Create the data directory tree (0700) and prove it is writable; returns its path.

    Raises:
        DataDirError: it cannot be created or written (the message says which and how to fix).
    """
    root = resolve_data_dir(data)
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for sub in SUBDIRS:
            (root / sub).mkdir(exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-test-", delete=True):
            pass
    except OSError as exc:
        raise DataDirError(
            f"data directory {root} is not usable: {exc.strerror or exc}. "
            "Choose another one with --data DIR or HOMEAGENT_HOME, or fix its permissions."
        ) from None
    if not root.is_dir():
        raise DataDirError(f"data directory {root} exists but is not a directory; choose another with --data")
    return root


def plugin_data_dir(root: Path, plugin: str) -> Path:
    """``<data>/plugin_data/<plugin>/``, created on demand (0700)."""
    path = root / "plugin_data" / plugin
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
