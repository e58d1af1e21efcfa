"""The data directory: where everything a daemon owns lives (DESIGN §11).

``HOMEAGENT_HOME`` or ``--data DIR`` (default ``~/.homeagent``). Created on first start with
mode 0700; a directory that cannot be created or written is a :class:`DataDirError` with the
path and the reason, never a traceback deep inside SQLite.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from homeagent_sdk.errors import DataDirError

__all__ = ["SUBDIRS", "default_data_dir", "plugin_data_dir", "prepare_data_dir", "resolve_data_dir"]

SUBDIRS = ("memory", "knowledge", "plugins", "plugin_data", "skills", "adapters", "personal", "log")


def default_data_dir() -> Path:
    """``$HOMEAGENT_HOME`` if set, else ``~/.homeagent``."""
    env = os.environ.get("HOMEAGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".homeagent"


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
