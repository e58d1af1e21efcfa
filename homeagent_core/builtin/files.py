"""Built-in ``files``: read, write, edit, list, search, move and delete files inside a sandbox.

Every path the model gives is relative to the sandbox root (``plugin.files.dir``, default
``<data>/workspace``; ``/`` is refused). Absolute paths and ``..`` segments are refused
outright, and the resolved path (symlinks followed) must still lie inside the root, so a
symlink pointing out of the sandbox cannot be used to read or write outside it. Reads are
capped (``max_read_bytes``); images come back as content blocks the model can look at; other
binary files are described, not dumped. Writes are atomic (temporary file + rename).
"""

from __future__ import annotations

import base64
import fnmatch
import mimetypes
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from homeagent_sdk import ConfigDef, ContentBlock, SettingsRegistry, ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk._atomic import atomic_write as _atomic_write

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "files"

__all__ = ["FilesPlugin", "Sandbox", "make_plugin"]

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def _image_mime(head: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _is_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte character cut at the end is still text
    return False


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename (keeping
    the mode of the file it replaces; a new file is private)."""
    _atomic_write(path, data, mode=path.stat().st_mode & 0o7777 if path.exists() else 0o600)


class Sandbox:
    """Maps model-supplied relative paths to real paths inside ``root``; refuses escapes."""

    def __init__(self, root: Path) -> None:
        resolved = root.expanduser().resolve()
        if resolved == Path(resolved.anchor):
            raise ToolError(
                f"the files sandbox root may not be the file-system root ({resolved}); "
                "set plugin.files.dir to a folder"
            )
        resolved.mkdir(parents=True, exist_ok=True)
        self.root = resolved

    def path(self, relative: str, *, allow_root: bool = True, follow_final: bool = True) -> Path:
        """The real path of ``relative``.

        ``follow_final=False`` keeps a final symbolic link itself (to delete or move the link,
        not what it points to); its folder must still resolve inside the root.

        Raises:
            ToolError: empty, absolute, ``..``, a NUL byte, or a path that resolves outside the
                root through a symlink.
        """
        text = (relative or "").strip()
        if "\x00" in text:
            raise ToolError("path contains a NUL byte")
        if not text:
            text = "."
        if text.startswith("/") or os.path.isabs(text) or text.startswith("~"):
            raise ToolError(
                f"absolute path {relative!r} refused: paths are relative to the sandbox root, e.g. 'notes/todo.md'"
            )
        if ".." in PurePosixPath(text).parts:
            raise ToolError(f"path {relative!r} refused: '..' segments are not allowed in the sandbox")
        joined = self.root / text
        if not follow_final and joined.is_symlink():
            parent = joined.parent.resolve()
            if parent != self.root and self.root not in parent.parents:
                raise ToolError(f"path {relative!r} refused: it leads outside the sandbox through a symbolic link")
            return parent / joined.name
        target = joined.resolve()
        if target != self.root and self.root not in target.parents:
            raise ToolError(f"path {relative!r} refused: it leads outside the sandbox through a symbolic link")
        if target == self.root and not allow_root:
            raise ToolError("this operation cannot be applied to the sandbox root itself")
        return target

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."


class FilesPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="dir", type="string", default="",
            description="Sandbox root of the file tools; empty = <data>/workspace. '/' is refused.",
        ))
        registry.add(ConfigDef(
            key="max_read_bytes", type="int", default=1024 * 1024, min=1024, max=256 * 1024 * 1024,
            description="Largest file (or range) files_read returns; larger reads are refused.",
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.files_read, parallel_safe=True)
        registry.add(self.files_write)
        registry.add(self.files_edit)
        registry.add(self.files_ls, parallel_safe=True)
        registry.add(self.files_search, parallel_safe=True)
        registry.add(self.files_move)
        registry.add(self.files_delete)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self.sandbox()  # a bad root is reported at start, not at the first call

    # ------------------------------------------------------------------ helpers

    def sandbox(self) -> Sandbox:
        if self._sdk is None:
            raise ToolError("files has not started yet")
        raw = str(self._sdk.settings.get("dir") or "")
        if raw:
            return Sandbox(Path(raw))
        services = self._sdk.services
        data = Path(services.data_dir) if services is not None else self._sdk.data_dir.parent.parent
        return Sandbox(data / "workspace")

    def _max_read(self) -> int:
        assert self._sdk is not None
        return int(self._sdk.settings.get("max_read_bytes") or 1024 * 1024)

    # ------------------------------------------------------------------ tools

    def files_read(self, path: str, offset: int = 1, limit: int = 0) -> Any:
        """Read a file of the sandbox: text with line numbers, or an image as an image block.

        Args:
            path: file path relative to the sandbox root.
            offset: first line to return (1-based).
            limit: how many lines to return; 0 = to the end (subject to the size cap).
        """
        box = self.sandbox()
        target = box.path(path)
        if not target.exists():
            raise ToolError(f"{path!r} does not exist; list a folder with files_ls")
        if target.is_dir():
            raise ToolError(f"{path!r} is a folder; list it with files_ls")
        if offset < 1 or limit < 0:
            raise ToolError("offset starts at 1 and limit must be 0 (all) or more")
        cap = self._max_read()
        size = target.stat().st_size
        with target.open("rb") as fh:
            head = fh.read(8192)
        if _is_binary(head):
            mime = _image_mime(head) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if not mime.startswith("image/"):
                raise ToolError(f"{path!r} is a binary file ({mime}, {size} bytes); it cannot be shown as text")
            if size > cap:
                raise ToolError(f"image {path!r} is {size} bytes, over the read limit of {cap} bytes")
            data = base64.b64encode(target.read_bytes()).decode("ascii")
            block = ContentBlock(type="image_url", image_url={"url": f"data:{mime};base64,{data}"})
            caption = ContentBlock(type="text", text=f"{box.rel(target)} ({mime}, {size} bytes)")
            return [caption.to_dict(), block.to_dict()]
        if size > cap and limit == 0:
            raise ToolError(
                f"{path!r} is {size} bytes, over the read limit of {cap} bytes; read a range with offset and limit"
            )
        out: list[str] = []
        used = 0
        with target.open("r", encoding="utf-8", errors="replace", newline="") as fh:
            for number, line in enumerate(fh, start=1):
                if number < offset:
                    continue
                if limit and number >= offset + limit:
                    break
                entry = f"{number:6}\t{line.rstrip(chr(10)).rstrip(chr(13))}"
                used += len(entry.encode("utf-8")) + 1
                if used > cap:
                    raise ToolError(
                        f"the requested range of {path!r} is over the read limit of {cap} bytes; ask for fewer lines"
                    )
                out.append(entry)
        if not out and offset > 1:
            return f"{path!r} has fewer than {offset} lines"
        return "\n".join(out)

    def files_write(
        self,
        path: str,
        content: str,
        mode: Literal["overwrite", "append", "insert", "create"] = "overwrite",
        line: int = 0,
    ) -> str:
        """Write text to a file of the sandbox (parent folders are created).

        Args:
            path: file path relative to the sandbox root.
            content: the text to write.
            mode: overwrite (replace the file), append (add at the end), insert (before line `line`),
                create (fail if the file exists).
            line: for mode insert, the 1-based line the text is inserted before.
        """
        box = self.sandbox()
        target = box.path(path, allow_root=False)
        if target.is_dir():
            raise ToolError(f"{path!r} is a folder, not a file")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        if mode == "create":
            if target.exists():
                raise ToolError(f"{path!r} already exists; use mode 'overwrite' to replace it")
            atomic_write(target, data)
        elif mode == "overwrite":
            atomic_write(target, data)
        elif mode == "append":
            with target.open("ab") as fh:
                fh.write(data)
        else:
            if line < 1:
                raise ToolError("mode 'insert' needs line >= 1 (the line the text goes before)")
            lines = target.read_text("utf-8").splitlines(keepends=True) if target.exists() else []
            if line > len(lines) + 1:
                raise ToolError(f"line {line} is past the end of {path!r} ({len(lines)} lines)")
            insert = content if content.endswith("\n") or not content else content + "\n"
            if line > 1 and lines and not lines[line - 2].endswith("\n"):
                lines[line - 2] += "\n"
            lines.insert(line - 1, insert)
            atomic_write(target, "".join(lines).encode("utf-8"))
        return f"wrote {len(data)} bytes to {box.rel(target)} ({mode})"

    def files_edit(self, path: str, edits: list[dict[str, str]]) -> str:
        """Replace text in a file: each edit's 'old' must occur exactly once; all edits apply or none.

        Args:
            path: file path relative to the sandbox root.
            edits: objects {"old": text to find, "new": replacement}.
        """
        box = self.sandbox()
        target = box.path(path, allow_root=False)
        if not target.is_file():
            raise ToolError(f"{path!r} is not an existing file")
        if not edits:
            raise ToolError("edits is empty; give at least one {old, new} object")
        text = target.read_text("utf-8")
        for index, edit in enumerate(edits):
            if not isinstance(edit, dict) or "old" not in edit or "new" not in edit:
                raise ToolError(f"edits[{index}] needs 'old' and 'new'; nothing was changed")
            old, new = str(edit["old"]), str(edit["new"])
            if not old:
                raise ToolError(f"edits[{index}].old is empty; nothing was changed")
            count = text.count(old)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times (make it unique)"
                raise ToolError(f"edits[{index}].old {where} in {path!r}; nothing was changed")
            text = text.replace(old, new, 1)
        atomic_write(target, text.encode("utf-8"))
        return f"applied {len(edits)} edit(s) to {box.rel(target)}"

    def files_ls(self, path: str = ".", limit: int = 500) -> str:
        """List a folder of the sandbox: one entry per line, folders end with '/', files show their size.

        Args:
            path: folder relative to the sandbox root ('.' = the root).
            limit: at most this many entries.
        """
        box = self.sandbox()
        target = box.path(path)
        if not target.is_dir():
            raise ToolError(f"{path!r} is not a folder")
        if limit < 1:
            raise ToolError("limit must be at least 1")
        entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        lines = []
        for entry in entries[:limit]:
            if entry.is_symlink():
                lines.append(f"{entry.name} -> {os.readlink(entry)}")
            elif entry.is_dir():
                lines.append(f"{entry.name}/")
            else:
                lines.append(f"{entry.name}\t{entry.stat().st_size}")
        if len(entries) > limit:
            lines.append(f"... {len(entries) - limit} more entries (raise limit to see them)")
        return "\n".join(lines) if lines else f"{box.rel(target)} is empty"

    def files_search(self, pattern: str, path: str = ".", name_glob: str = "*", limit: int = 100) -> str:
        """Search text files of the sandbox for a regular expression; returns path:line: text.

        Args:
            pattern: a Python regular expression (case-sensitive; prefix (?i) to ignore case).
            path: folder to search, relative to the sandbox root.
            name_glob: only files whose name matches this glob, e.g. '*.md'.
            limit: at most this many matching lines.
        """
        box = self.sandbox()
        target = box.path(path)
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        cap = self._max_read()
        hits: list[str] = []
        files = [target] if target.is_file() else sorted(self._walk(box, target))
        for file in files:
            if not fnmatch.fnmatch(file.name, name_glob) or file.stat().st_size > cap:
                continue
            with file.open("rb") as fh:
                if _is_binary(fh.read(8192)):
                    continue
            with file.open("r", encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh, start=1):
                    if regex.search(line):
                        hits.append(f"{box.rel(file)}:{number}: {line.rstrip()[:300]}")
                        if len(hits) >= limit:
                            return "\n".join([*hits, f"... stopped at {limit} matches"])
        return "\n".join(hits) if hits else f"no match for {pattern!r}"

    @staticmethod
    def _walk(box: Sandbox, folder: Path) -> list[Path]:
        out: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                candidate = Path(dirpath) / name
                real = candidate.resolve()
                if real.is_file() and (box.root in real.parents):
                    out.append(candidate)
        return out

    def files_move(self, source: str, destination: str, overwrite: bool = False) -> str:
        """Move or rename a file or folder inside the sandbox.

        Args:
            source: existing path relative to the sandbox root.
            destination: new path relative to the sandbox root.
            overwrite: replace an existing destination file.
        """
        box = self.sandbox()
        src = box.path(source, allow_root=False, follow_final=False)
        dst = box.path(destination, allow_root=False)
        if not src.exists() and not src.is_symlink():
            raise ToolError(f"{source!r} does not exist")
        if dst.exists() and not overwrite:
            raise ToolError(f"{destination!r} already exists; pass overwrite=true to replace it")
        if dst == src or src in dst.parents:
            raise ToolError(f"cannot move {source!r} into itself")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(dst))
        return f"moved {box.rel(src)} -> {box.rel(dst)}"

    def files_delete(self, path: str, recursive: bool = False) -> str:
        """Delete a file, or a folder with recursive=true.

        Args:
            path: path relative to the sandbox root (the root itself cannot be deleted).
            recursive: needed to delete a non-empty folder.
        """
        box = self.sandbox()
        target = box.path(path, allow_root=False, follow_final=False)
        if not target.exists() and not target.is_symlink():
            raise ToolError(f"{path!r} does not exist")
        if target.is_dir() and not target.is_symlink():
            if any(target.iterdir()) and not recursive:
                raise ToolError(f"{path!r} is a non-empty folder; pass recursive=true to delete it")
            shutil.rmtree(target)
        else:
            target.unlink()
        return f"deleted {box.rel(target)}"


def make_plugin() -> FilesPlugin:
    return FilesPlugin()

