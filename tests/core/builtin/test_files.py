from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from homeagent_core.builtin.files import Sandbox
from homeagent_sdk import ToolError

FILES = "homeagent_core.builtin.files"


def _png(width: int = 2, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture
async def files(harness, tmp_path: Path):
    root = tmp_path / "box"
    h = await harness([FILES], {"plugin.files.dir": str(root), "plugin.files.max_read_bytes": 4096})
    h.root = root.resolve()
    return h


async def test_default_root_is_the_workspace_of_the_data_dir(harness):
    h = await harness([FILES])
    await h.ok("files_write", path="a.txt", content="hi")
    assert (h.app.data_dir / "workspace" / "a.txt").read_text() == "hi"


def test_the_file_system_root_is_refused_as_sandbox():
    with pytest.raises(ToolError, match="file-system root"):
        Sandbox(Path("/"))


async def test_write_read_append_insert_and_create(files):
    await files.ok("files_write", path="notes/todo.md", content="one\ntwo\n")
    await files.ok("files_write", path="notes/todo.md", content="four\n", mode="append")
    await files.ok("files_write", path="notes/todo.md", content="three", mode="insert", line=3)
    assert (files.root / "notes/todo.md").read_text() == "one\ntwo\nthree\nfour\n"
    out = await files.ok("files_read", path="notes/todo.md", offset=2, limit=2)
    assert out.splitlines() == ["     2\ttwo", "     3\tthree"]
    assert "already exists" in await files.fails("files_write", path="notes/todo.md", content="x", mode="create")
    assert "past the end" in await files.fails("files_write", path="notes/todo.md", content="x", mode="insert", line=9)
    assert "must be one of" in await files.fails("files_write", path="a", content="x", mode="truncate")


async def test_edit_applies_all_edits_or_none(files):
    await files.ok("files_write", path="f.txt", content="alpha beta beta gamma")
    edits = [{"old": "alpha", "new": "A"}, {"old": "beta", "new": "B"}]
    message = await files.fails("files_edit", path="f.txt", edits=edits)
    assert "occurs 2 times" in message and "nothing was changed" in message
    assert (files.root / "f.txt").read_text() == "alpha beta beta gamma"
    await files.ok("files_edit", path="f.txt", edits=[{"old": "alpha", "new": "A"}, {"old": "gamma", "new": "G"}])
    assert (files.root / "f.txt").read_text() == "A beta beta G"


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.txt", "a/../../b", "~/x"])
async def test_absolute_paths_and_dotdot_are_refused(files, bad):
    message = await files.fails("files_read", path=bad)
    assert "refused" in message


async def test_symlinks_leading_out_of_the_root_are_refused(files, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    files.root.mkdir(parents=True, exist_ok=True)
    (files.root / "link.txt").symlink_to(secret)
    (files.root / "outdir").symlink_to(tmp_path)
    assert "symbolic link" in await files.fails("files_read", path="link.txt")
    assert "symbolic link" in await files.fails("files_write", path="outdir/new.txt", content="x")
    assert not (tmp_path / "new.txt").exists()
    listing = await files.ok("files_search", pattern="secret")
    assert "top secret" not in listing
    await files.ok("files_delete", path="link.txt")  # the link itself may go; its target stays
    assert secret.read_text() == "top secret"


async def test_oversized_reads_are_refused_but_ranges_work(files):
    await files.ok("files_write", path="big.txt", content="".join(f"line {i}\n" for i in range(2000)))
    assert "over the read limit" in await files.fails("files_read", path="big.txt")
    assert (await files.ok("files_read", path="big.txt", offset=1500, limit=1)).endswith("line 1499")
    assert "ask for fewer lines" in await files.fails("files_read", path="big.txt", offset=1, limit=1900)


async def test_images_are_returned_as_image_blocks_and_other_binaries_are_described(files):
    files.root.mkdir(parents=True, exist_ok=True)
    png = _png()
    (files.root / "dot.png").write_bytes(png)
    blocks = json.loads(await files.ok("files_read", path="dot.png"))
    url = blocks[1]["image_url"]["url"]
    assert blocks[1]["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png
    (files.root / "blob.bin").write_bytes(os.urandom(64) + b"\x00")
    assert "binary file" in await files.fails("files_read", path="blob.bin")


async def test_ls_search_move_and_delete(files):
    await files.ok("files_write", path="docs/a.md", content="hello world\n")
    await files.ok("files_write", path="docs/b.txt", content="Hello again\n")
    listing = await files.ok("files_ls", path=".")
    assert listing.splitlines()[0] == "docs/"
    assert (await files.ok("files_ls", path="docs")).splitlines() == ["a.md\t12", "b.txt\t12"]
    assert await files.ok("files_search", pattern="(?i)hello", name_glob="*.md") == "docs/a.md:1: hello world"
    assert "invalid regular expression" in await files.fails("files_search", pattern="(")
    await files.ok("files_move", source="docs/a.md", destination="archive/a.md")
    assert (files.root / "archive/a.md").exists() and not (files.root / "docs/a.md").exists()
    assert "already exists" in await files.fails("files_move", source="docs/b.txt", destination="archive/a.md")
    assert "recursive=true" in await files.fails("files_delete", path="docs")
    await files.ok("files_delete", path="docs", recursive=True)
    assert not (files.root / "docs").exists()
    assert "sandbox root" in await files.fails("files_delete", path=".")
