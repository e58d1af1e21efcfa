"""Hostile ``.hmap`` and skill archives are refused with a clear error, never an exception.

Each archive is built byte for byte the way an attacker would: a manifest nested 100k deep,
a non-UTF-8 checksum file, a member whose compression method (99, WinZip AES) or encryption
flag zipfile cannot read, zip bombs, thousands of entries.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app
from homeagent_core.plugins.packages import PackageError, install_package, validate_package
from homeagent_core.plugins.skills import SkillError, install_skill

MANIFEST = {"name": "demo", "version": "1.0.0", "entry": "main.lua"}


def package(members: dict[str, bytes | str], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def patch_member(raw: bytes, name: str, *, method: int | None = None, flag: int = 0) -> bytes:
    """Rewrite one member's compression method / general-purpose flags in both its headers."""
    out = bytearray(raw)
    encoded = name.encode()
    pos = 0
    while (pos := out.find(b"PK\x03\x04", pos)) != -1:  # local headers
        name_len = struct.unpack_from("<H", out, pos + 26)[0]
        if bytes(out[pos + 30:pos + 30 + name_len]) == encoded:
            struct.pack_into("<H", out, pos + 6, struct.unpack_from("<H", out, pos + 6)[0] | flag)
            if method is not None:
                struct.pack_into("<H", out, pos + 8, method)
        pos += 4
    pos = 0
    while (pos := out.find(b"PK\x01\x02", pos)) != -1:  # central directory
        name_len = struct.unpack_from("<H", out, pos + 28)[0]
        if bytes(out[pos + 46:pos + 46 + name_len]) == encoded:
            struct.pack_into("<H", out, pos + 8, struct.unpack_from("<H", out, pos + 8)[0] | flag)
            if method is not None:
                struct.pack_into("<H", out, pos + 10, method)
        pos += 4
    return bytes(out)


def bomb(name: str, size: int, head: bytes = b"", pad: bytes = b" ") -> bytes:
    """A package whose ``name`` inflates to ``size`` bytes (streamed, never held in memory)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        if name != "plugin.json":
            zf.writestr("plugin.json", json.dumps(MANIFEST))
        with zf.open(name, "w", force_zip64=True) as out:
            out.write(head)
            chunk = pad * (1 << 20)
            for _ in range(size >> 20):
                out.write(chunk)
        if name != "main.lua":
            zf.writestr("main.lua", "return {}")
    return buf.getvalue()


def refused(raw: bytes, message: str, tmp_path: Path) -> None:
    with pytest.raises(PackageError, match=message):
        validate_package(raw)
    with pytest.raises(PackageError, match=message):
        install_package(tmp_path, raw)
    assert not (tmp_path / "plugins" / "demo").exists()


def test_deeply_nested_manifest(tmp_path: Path) -> None:
    deep = '{"name": "demo", "version": "1", "entry": "main.lua", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    refused(package({"plugin.json": deep, "main.lua": "return {}"}), "too deeply", tmp_path)


def test_moderately_nested_manifest(tmp_path: Path) -> None:
    deep = '{"name": "demo", "version": "1", "entry": "main.lua", "x": ' + "[" * 500 + "]" * 500 + "}"
    refused(package({"plugin.json": deep, "main.lua": "return {}"}), "too deeply", tmp_path)


def test_checksums_not_utf8(tmp_path: Path) -> None:
    sums = b"\xff\xfe\x00bad"
    raw = package({"plugin.json": json.dumps(MANIFEST), "main.lua": "return {}", "checksums.sha256": sums})
    with pytest.raises(PackageError, match=r"checksums\.sha256 is not UTF-8"):
        install_package(tmp_path, raw)


def test_unsupported_compression_method(tmp_path: Path) -> None:
    raw = patch_member(package({"plugin.json": json.dumps(MANIFEST), "main.lua": "return {}"}), "main.lua", method=99)
    refused(raw, "compression method 99", tmp_path)


def test_encrypted_member(tmp_path: Path) -> None:
    raw = patch_member(package({"plugin.json": json.dumps(MANIFEST), "main.lua": "return {}"}), "main.lua", flag=1)
    refused(raw, "encrypted", tmp_path)


def test_manifest_zip_bomb(tmp_path: Path) -> None:
    head = json.dumps(MANIFEST).encode()[:-1] + b', "pad": "'
    raw = bomb("plugin.json", 32 << 20, head=head)
    assert len(raw) < 200_000
    refused(raw, "plugin.json' inflates to more than", tmp_path)


def test_member_zip_bomb(tmp_path: Path) -> None:
    raw = bomb("main.lua", 64 << 20, head=b"return {} --", pad=b"-")
    with pytest.raises(PackageError, match="times its compressed size"):
        install_package(tmp_path, raw)
    assert not (tmp_path / "plugins" / "demo").exists()


def test_too_many_entries(tmp_path: Path) -> None:
    members: dict[str, bytes | str] = {"plugin.json": json.dumps(MANIFEST), "main.lua": "return {}"}
    members.update({f"thirdpart/{i}.txt": "" for i in range(5000)})
    refused(package(members, compression=zipfile.ZIP_STORED), "entries; the limit is", tmp_path)


def test_cli_shows_the_reason_without_a_traceback(tmp_path: Path) -> None:
    deep = '{"name": "demo", "version": "1", "entry": "main.lua", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = tmp_path / "deep.hmap"
    path.write_bytes(package({"plugin.json": deep, "main.lua": "return {}"}))
    result = CliRunner().invoke(app, ["plugins", "install", str(path), "--data", str(tmp_path / "d")])
    assert result.exit_code != 0
    assert "too deeply" in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_skill_archive_with_an_unreadable_member_is_refused(tmp_path: Path) -> None:
    raw = patch_member(package({"SKILL.md": "---\nname: s\ndescription: d\n---\nbody\n", "data.txt": "x"}),
                       "data.txt", method=99)
    path = tmp_path / "s.zip"
    path.write_bytes(raw)
    with pytest.raises(SkillError, match="compression method 99"):
        install_skill(path, tmp_path / "skills")


def test_skill_zip_bomb_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("SKILL.md", "---\nname: s\ndescription: d\n---\nbody\n")
        with zf.open("big.txt", "w", force_zip64=True) as out:
            for _ in range(64):
                out.write(b"\0" * (1 << 20))
    path = tmp_path / "s.zip"
    path.write_bytes(buf.getvalue())
    with pytest.raises(SkillError, match="times its compressed size"):
        install_skill(path, tmp_path / "skills")


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (b'{"name": "demo", "version": "1", "entry": "main.lua", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
         "too deeply"),
        (b'{"name": "d\xe9mo", "version": "1", "entry": "main.lua"}', "not UTF-8"),
    ],
)
def test_hmapdev_pack_explains_a_broken_project_manifest(tmp_path: Path, manifest: bytes, message: str) -> None:
    from hmapdev.cli import app as hmapdev

    (tmp_path / "plugin.json").write_bytes(manifest)
    (tmp_path / "main.lua").write_text("return {}", encoding="utf-8")
    result = CliRunner().invoke(hmapdev, ["pack", "-C", str(tmp_path)])
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
