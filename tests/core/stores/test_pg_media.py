"""Media blocks on PostgreSQL: an image stored on one daemon is found and served by the others."""

from __future__ import annotations

import asyncio
import hashlib
import io
import socket
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from homeagent_core.memory.media import MediaStore
from homeagent_core.memory.stores.postgresql.media import PgMediaIndex
from homeagent_core.memory.stores.postgresql.migrate_media import migrate_media
from homeagent_sdk.embeddings import EmbedInput
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder


def png(color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), color).save(buf, "PNG")
    return buf.getvalue()


async def _until(check: Callable[[], object], *, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        await asyncio.sleep(0.02)


def _daemon(root: Path, url: str, tenant: str) -> MediaStore:
    return MediaStore(root, embedder=FakeEmbedder(16, image=True), index=PgMediaIndex(url, tenant=tenant))


async def test_an_image_stored_on_one_daemon_is_searched_and_served_on_the_other(tmp_path, pg_url, pg_tenant):
    a = _daemon(tmp_path / "a", pg_url, pg_tenant)
    b = _daemon(tmp_path / "b", pg_url, pg_tenant)
    data = png((200, 30, 30))
    rec = await a.put(data, "image/png", name="red.png")
    assert rec is not None
    await _until(lambda: b._vectors)
    hits = await b.search(EmbedInput.of_image(data), k=1)
    assert [(h[0].digest, h[0].name) for h in hits] == [(rec.digest, "red.png")]
    assert not (tmp_path / "b" / "blobs" / rec.digest[:2] / rec.digest[2:]).exists()
    assert await b.get(rec.short) == data  # fetched from the database, verified, kept as b's copy
    assert b.blob_path(rec.digest).read_bytes() == data
    assert await a.delete(rec.digest)
    await _until(lambda: not b._vectors)
    with pytest.raises(MemoryStoreError, match="no media with digest"):
        await b.info(rec.digest)
    a.close()
    b.close()


async def test_bytes_damaged_in_the_database_are_refused(tmp_path, pg_url, pg_tenant):
    a = _daemon(tmp_path / "a", pg_url, pg_tenant)
    rec = await a.put(png((1, 2, 3)), "image/png")
    assert rec is not None
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE ha_media SET data = %s WHERE tenant = %s", (b"bit rot", pg_tenant))
    b = _daemon(tmp_path / "b", pg_url, pg_tenant)
    with pytest.raises(MemoryStoreError, match="corrupt in the database"):
        await b.get(rec.digest)
    a.close()
    b.close()


def test_an_unreachable_database_names_the_url_without_the_password():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MemoryStoreError, match=r"postgresql://ha:\*\*\*@127\.0\.0\.1") as info:
        PgMediaIndex(f"postgresql://ha:topsecret@127.0.0.1:{port}/home", tenant="family")
    assert "topsecret" not in str(info.value)


async def test_media_goes_to_postgresql_and_back_with_bytes_and_vectors(tmp_path, pg_url, pg_tenant):
    data_dir = tmp_path / "data"
    local = MediaStore(data_dir / "memory" / "media", embedder=FakeEmbedder(16, image=True))
    images = [png((i * 20, 0, 0)) for i in range(7)]
    for i, image in enumerate(images):
        await local.put(image, "image/png", name=f"{i}.png")
    await local.put(b"%PDF-1.7 minutes", "application/pdf", name="minutes.pdf")
    before = [r.to_dict() for r in await local.records()]
    local.close()
    report = migrate_media("sqlite", pg_url, data_dir=data_dir, tenant=pg_tenant, batch=3)
    assert report.verified and (report.copied, report.target_count) == (8, 8)
    again = migrate_media("sqlite", pg_url, data_dir=data_dir, tenant=pg_tenant, batch=3)
    assert (again.copied, again.skipped) == (0, 8) and again.verified
    elsewhere = _daemon(tmp_path / "elsewhere", pg_url, pg_tenant)
    assert [r.to_dict() for r in await elsewhere.records()] == before
    assert (await elsewhere.search(EmbedInput.of_image(images[4]), k=1))[0][0].name == "4.png"
    elsewhere.close()
    back = tmp_path / "back"
    report = migrate_media(pg_url, "sqlite", data_dir=back, tenant=pg_tenant)
    assert report.verified and report.copied == 8
    restored = MediaStore(back / "memory" / "media", embedder=FakeEmbedder(16, image=True))
    assert [r.to_dict() for r in await restored.records()] == before
    digest = hashlib.sha256(images[2]).hexdigest()
    assert await restored.get(digest) == images[2]
    restored.close()
