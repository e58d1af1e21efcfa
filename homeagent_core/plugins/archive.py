"""Reading ZIP archives that may be hostile (``.hmap`` plugin packages, skill ``.zip`` files).

Why not ``zipfile`` alone: it trusts the archive. It builds one object per central-directory
entry before anything can be checked, believes the sizes in the headers, and raises
``NotImplementedError`` (an unknown compression method), ``RuntimeError`` (an encrypted member)
or ``RecursionError``/``UnicodeDecodeError`` further up for content it hands over. Here every
refusal is an :class:`ArchiveError` whose message names the member and the rule, and sizes are
enforced on the bytes actually inflated (a bounded stream), never on what a header claims:

* at most :data:`MAX_MEMBERS` entries and a central directory of at most
  :data:`MAX_DIRECTORY_BYTES` (checked from the end record, before ``zipfile`` reads it);
* only stored or deflated members, none encrypted;
* relative paths only (no absolute or drive paths, no ``..``, no NUL), no duplicates, no
  symbolic links or other special files;
* each member at most its caller's cap, and past :data:`RATIO_FLOOR` bytes at most
  :data:`MAX_RATIO` times its compressed size (zip bombs stop within one chunk of the cap).
"""

from __future__ import annotations

import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO

__all__ = [
    "MAX_DIRECTORY_BYTES",
    "MAX_MEMBERS",
    "MAX_RATIO",
    "RATIO_FLOOR",
    "ArchiveError",
    "Budget",
    "check_members",
    "copy_member",
    "member_path",
    "open_zip",
    "read_member",
]

MAX_MEMBERS = 4096
MAX_DIRECTORY_BYTES = 4 * 1024 * 1024
MAX_RATIO = 200
RATIO_FLOOR = 1024 * 1024
MAX_NAME_CHARS = 1024
_CHUNK = 64 * 1024
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
#: What reading a broken or unsupported member raises inside ``zipfile``/``zlib``.
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, ValueError)


class ArchiveError(ValueError):
    """An archive was refused; the message names the member and the rule it broke."""


@dataclass
class Budget:
    """Bytes the whole archive may still inflate to (shared by every member read)."""

    left: int
    total: int


def open_zip(fh: BinaryIO, label: str) -> zipfile.ZipFile:
    """Open ``fh`` as a ZIP after checking its end record (entry count, directory size).

    Raises:
        ArchiveError: not a ZIP, or a central directory over the caps.
    """
    end = getattr(zipfile, "_EndRecData", None)
    try:
        record = end(fh) if end is not None else None
    except (OSError, ValueError, EOFError):
        record = None
    if record is not None:
        entries, size = int(record[4]), int(record[5])  # _ECD_ENTRIES_TOTAL, _ECD_SIZE
        if entries > MAX_MEMBERS:
            raise ArchiveError(f"{label}: holds {entries} entries; the limit is {MAX_MEMBERS}")
        if size > MAX_DIRECTORY_BYTES:
            raise ArchiveError(f"{label}: its central directory is {size} bytes; the limit is {MAX_DIRECTORY_BYTES}")
    fh.seek(0)
    try:
        return zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise ArchiveError(f"{label} is not a valid zip archive: {exc}") from None


def member_path(info: zipfile.ZipInfo) -> str:
    """The member's normalised relative path (``/``-separated, no ``.`` parts)."""
    return "/".join(p for p in PurePosixPath(info.filename.replace("\\", "/")).parts if p != ".")


def check_members(
    zf: zipfile.ZipFile, label: str, *, max_total: int, target: str = "target directory"
) -> list[zipfile.ZipInfo]:
    """Check every member's name, type, method and flags; returns the members.

    ``target`` names where the archive is unpacked (for messages).

    Raises:
        ArchiveError: the first member that breaks a rule (the message says which and why).
    """
    members = zf.infolist()
    if len(members) > MAX_MEMBERS:
        raise ArchiveError(f"{label}: holds {len(members)} entries; the limit is {MAX_MEMBERS}")
    seen: set[str] = set()
    declared = 0
    for info in members:
        name = info.filename
        if "\x00" in name or len(name) > MAX_NAME_CHARS:
            raise ArchiveError(f"{label}: member name {name[:80]!r} is invalid (NUL byte or over "
                               f"{MAX_NAME_CHARS} characters)")
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
            raise ArchiveError(f"{label}: member {name!r} has an absolute path; only relative paths are allowed")
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if ".." in parts:
            raise ArchiveError(f"{label}: member {name!r} would be written outside the {target}: it climbs out "
                               "with '..' (zip slip)")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveError(f"{label}: member {name!r} is a symbolic link; archives may not contain links")
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveError(f"{label}: member {name!r} is not a regular file or directory")
        if info.flag_bits & 0x1:
            raise ArchiveError(f"{label}: member {name!r} is encrypted; archives must not be encrypted")
        if info.compress_type not in _METHODS:
            raise ArchiveError(
                f"{label}: member {name!r} uses compression method {info.compress_type}; only "
                f"{' and '.join(_METHODS.values())} are supported (re-pack it with a standard zip tool)"
            )
        key = member_path(info)
        if key in seen:
            raise ArchiveError(f"{label}: member {name!r} appears twice")
        seen.add(key)
        declared += info.file_size
        if declared > max_total:
            raise ArchiveError(f"{label}: unpacks to more than {max_total // (1024 * 1024)} MB")
    return members


def copy_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: BinaryIO, label: str, *, limit: int, budget: Budget | None = None
) -> int:
    """Inflate one member into ``out``, counting real bytes; returns how many were written.

    Raises:
        ArchiveError: over ``limit``, over the archive's budget, a compression ratio beyond
            :data:`MAX_RATIO`, or a corrupt/unsupported member.
    """
    written = 0
    ratio_cap = MAX_RATIO * max(info.compress_size, 1)
    try:
        with zf.open(info) as src:
            while True:
                chunk = src.read(_CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                if written > limit:
                    raise ArchiveError(f"{label}: member {info.filename!r} inflates to more than {limit} bytes "
                                       "(the limit for this file)")
                if written > RATIO_FLOOR and written > ratio_cap:
                    raise ArchiveError(f"{label}: member {info.filename!r} inflates more than {MAX_RATIO} times its "
                                       "compressed size (a zip bomb?)")
                if budget is not None:
                    budget.left -= len(chunk)
                    if budget.left < 0:
                        raise ArchiveError(f"{label}: unpacks to more than {budget.total // (1024 * 1024)} MB")
                out.write(chunk)
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{label}: member {info.filename!r} cannot be read: {exc}") from None
    return written


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, *, limit: int) -> bytes:
    """The bytes of one (small) member, at most ``limit`` of them.

    Raises:
        ArchiveError: see :func:`copy_member`.
    """
    import io

    buf = io.BytesIO()
    copy_member(zf, info, buf, label, limit=limit)
    return buf.getvalue()
