"""Replacing a file atomically and durably: a temporary file in the same folder, fsync, rename,
fsync the folder.

A reader sees the old content or the new, never a mix, and once :func:`atomic_write` returns
(or the :func:`atomic_file` block ends) the new content survives a power cut or a ``kill -9``:
the data is on disk before the rename, and the rename is on disk before the call returns. On
an error, or an exception in the block, the temporary file is removed and the old content
stays. The one helper for this in the host, the SDK and hmapdev (it lives in the SDK because
the SDK may not import the host).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "atomic_write", "fsync_dir"]


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``folder`` durable (a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_file(
    path: str | os.PathLike[str], *, mode: int = 0o600, tmp: str | os.PathLike[str] | None = None
) -> Iterator[BinaryIO]:
    """A binary file to write; when the block ends without an exception it replaces ``path``.

    :param mode: permission bits of the new file (0600 unless given: data files are private).
    :param tmp: the temporary file's path, for callers whose readers know to skip (or whose
        start-up removes) a partial file of that name; by default a unique name
        ``.<name>.<random>.tmp`` beside ``path``, so that two writers never share one.

    Raises:
        OSError: the folder does not exist or the file cannot be written; ``path`` is unchanged.
    """
    target = Path(path)
    if tmp is None:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        staged = Path(name)
    else:
        staged = Path(tmp)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(staged, mode)
        os.replace(staged, target)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    mode: int = 0o600,
    tmp: str | os.PathLike[str] | None = None,
) -> None:
    """Replace ``path`` with ``data`` (a ``str`` is written as UTF-8); see :func:`atomic_file`.

    Raises:
        OSError: the folder does not exist or the file cannot be written; ``path`` is unchanged.
    """
    with atomic_file(path, mode=mode, tmp=tmp) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
