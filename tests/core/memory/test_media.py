from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import io
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.memory.media import MediaStore
from homeagent_sdk.embeddings import EmbedInput
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Chinese-CLIP built by the embedding tests' helper (loaded by path)."""
    path = Path(__file__).parents[1] / "embeddings" / "tiny_models.py"
    spec = importlib.util.spec_from_file_location("homeagent_tests_tiny_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_chinese_clip(tmp_path_factory.mktemp("media-clip") / "model")


def png(color: tuple[int, int, int], size: tuple[int, int] = (24, 24)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> MediaStore:
    s = MediaStore(tmp_path / "media", embedder=FakeEmbedder(32, image=True))
    yield s
    s.close()


async def test_put_stores_bytes_under_their_sha256_in_two_level_buckets(store: MediaStore, tmp_path: Path) -> None:
    data = png((255, 0, 0))
    rec = await store.put(data, "image/png", name="red.png")
    assert rec is not None
    digest = hashlib.sha256(data).hexdigest()
    assert rec.digest == digest and rec.size == len(data) and rec.name == "red.png"
    blob = tmp_path / "media" / "blobs" / digest[:2] / digest[2:]
    assert blob.read_bytes() == data
    assert not list((tmp_path / "media" / "blobs").rglob("*.tmp"))
    assert await store.get(digest) == data
    db = sqlite3.connect(tmp_path / "media" / "media.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT digest, mime FROM media").fetchall() == [(digest, "image/png")]


async def test_identical_bytes_are_stored_once(open_media, tmp_path: Path) -> None:
    store = open_media(tmp_path / "media", embedder=FakeEmbedder(32, image=True))
    data = png((0, 255, 0))
    recs = await asyncio.gather(*(store.put(data, "image/png") for _ in range(5)))
    assert len({r.digest for r in recs if r}) == 1
    assert len(store) == 1
    assert len([p for p in (tmp_path / "media" / "blobs").rglob("*") if p.is_file()]) == 1


async def test_every_read_rehashes_and_refuses_corrupted_bytes(store: MediaStore, tmp_path: Path) -> None:
    rec = await store.put(png((1, 2, 3)), "image/png")
    assert rec is not None
    blob = tmp_path / "media" / "blobs" / rec.digest[:2] / rec.digest[2:]
    raw = bytearray(blob.read_bytes())
    raw[-5] ^= 0xFF
    blob.write_bytes(bytes(raw))
    with pytest.raises(MemoryStoreError, match="is corrupt"):
        await store.get(rec.digest)
    blob.unlink()
    with pytest.raises(MemoryStoreError, match="has no blob"):
        await store.get(rec.digest)


async def test_short_prefixes_resolve_and_bad_ones_are_explained(store: MediaStore, tmp_path: Path) -> None:
    data = png((9, 9, 9))
    rec = await store.put(data, "image/png")
    assert rec is not None
    assert store.resolve(rec.digest[:12]) == rec.digest
    assert store.resolve("sha256:" + rec.digest[:20].upper()) == rec.digest
    assert await store.get(rec.short) == data
    with pytest.raises(MemoryStoreError, match="too short"):
        store.resolve(rec.digest[:11])
    with pytest.raises(MemoryStoreError, match="not a media digest"):
        store.resolve("not-hex-at-all")
    with pytest.raises(MemoryStoreError, match="no media with digest"):
        store.resolve("0" * 64)
    # A second digest sharing the first 12 characters (a hand-made row) makes the prefix ambiguous.
    twin = rec.digest[:12] + ("0" if rec.digest[12] != "0" else "1") + rec.digest[13:]
    db = sqlite3.connect(tmp_path / "media" / "media.db")
    with db:
        db.execute(
            "INSERT INTO media (digest, mime, size, name, created_at) VALUES (?, 'image/png', 1, '', 0)",
            (twin,),
        )
    with pytest.raises(MemoryStoreError, match="ambiguous"):
        store.resolve(rec.digest[:12])
    assert store.resolve(rec.digest[:14]) in {rec.digest, twin}
    assert store.resolve(rec.digest) == rec.digest


async def test_size_cap_empty_data_and_bad_mime_are_rejected(open_media, tmp_path: Path) -> None:
    small = open_media(tmp_path / "m", max_blob_bytes=1000)
    with pytest.raises(MemoryStoreError, match=r"1001 bytes; the per-blob limit is 1000"):
        await small.put(b"x" * 1001, "application/octet-stream")
    with pytest.raises(MemoryStoreError, match="empty media"):
        await small.put(b"", "image/png")
    with pytest.raises(MemoryStoreError, match="not a MIME type"):
        await small.put(b"abc", "png")
    assert len(small) == 0
    assert (await small.put(b"x" * 1000, "application/octet-stream")) is not None


async def test_an_image_that_is_not_an_image_is_refused_before_storing(tmp_path: Path, tiny_clip_dir: Path) -> None:
    from homeagent_core.embeddings.clip import ChineseClipProvider

    s = MediaStore(tmp_path / "m", embedder=ChineseClipProvider(str(tiny_clip_dir)))
    with pytest.raises(MemoryStoreError, match="not a readable image"):
        await s.put(b"GIF89a but not really", "image/gif")
    assert len(s) == 0
    rec = await s.put(png((200, 10, 10)), "image/png")
    assert rec is not None and rec.dimension == 16
    assert rec.vec_model == s.fingerprint
    hits = await s.search(EmbedInput.of_image(png((200, 10, 10))))
    assert hits[0][0].digest == rec.digest and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    text_hits = await s.search("红色的图片")
    assert [h[0].digest for h in text_hits] == [rec.digest]


async def test_blocks_are_found_by_their_own_vectors_also_after_a_restart(open_media, tmp_path: Path) -> None:
    embedder = FakeEmbedder(32, image=True)
    s = open_media(tmp_path / "m", embedder=embedder)
    images = [png((i * 40, 0, 0)) for i in range(5)]
    recs = [await s.put(d, "image/png") for d in images]
    s.close()
    reopened = open_media(tmp_path / "m", embedder=embedder)
    hits = await reopened.search(EmbedInput.of_image(images[3]), k=2)
    assert hits[0][0].digest == recs[3].digest  # type: ignore[union-attr]
    assert hits[0][1] == pytest.approx(1.0)
    assert len(hits) == 2


async def test_deleting_a_block_deletes_its_bytes_and_its_vector(open_media, tmp_path: Path) -> None:
    store = open_media(tmp_path / "media", embedder=FakeEmbedder(32, image=True))
    data = png((5, 5, 250))
    rec = await store.put(data, "image/png")
    assert rec is not None
    assert await store.delete(rec.short)
    assert not (tmp_path / "media" / "blobs" / rec.digest[:2] / rec.digest[2:]).exists()
    with pytest.raises(MemoryStoreError):
        await store.get(rec.digest)
    assert await store.search(EmbedInput.of_image(data)) == []
    assert await store.delete(rec.digest) is False


async def test_a_disabled_store_degrades_silently_to_text_only(tmp_path: Path) -> None:
    s = MediaStore(tmp_path / "m", embedder=FakeEmbedder(8, image=True), enabled=False)
    assert await s.put(png((1, 1, 1)), "image/png") is None
    assert await s.search("anything") == []
    assert await s.records() == [] and len(s) == 0
    assert await s.reembed_stale() == type(await s.reembed_stale())()
    assert not (tmp_path / "m").exists()
    with pytest.raises(MemoryStoreError, match="disabled"):
        await s.get("0" * 64)


async def test_vectors_from_another_space_are_ignored_until_reembedded(open_media, tmp_path: Path) -> None:
    old = FakeEmbedder(16, image=True, name="old")
    s = open_media(tmp_path / "m", embedder=old)
    images = [png((0, i * 30, 0)) for i in range(6)]
    for d in images:
        await s.put(d, "image/png")
    await s.put(b"%PDF-1.7 ...", "application/pdf")
    s.close()

    new = FakeEmbedder(24, image=True, name="new")
    s2 = open_media(tmp_path / "m", embedder=new)
    assert await s2.search(EmbedInput.of_image(images[0])) == []  # never mixes spaces
    stats = await s2.reembed_stale(batch_size=4)
    assert stats.reembedded == 6 and stats.batches == 2
    recs = await s2.records()
    assert {r.vec_model for r in recs if r.mime == "image/png"} == {new.info.fingerprint}
    assert [r.vec_model for r in recs if r.mime == "application/pdf"] == [""]
    hits = await s2.search(EmbedInput.of_image(images[2]), k=1)
    assert hits[0][1] == pytest.approx(1.0)
    again = await s2.reembed_stale()
    assert again.reembedded == 0  # resumable: finished rows are skipped


async def test_without_a_multimodal_space_images_are_kept_without_vectors(open_media, tmp_path: Path) -> None:
    s = open_media(tmp_path / "m", embedder=FakeEmbedder(8))  # text-only space
    rec = await s.put(png((3, 3, 3)), "image/png")
    assert rec is not None and rec.vec_model == "" and rec.dimension == 0
    stats = await s.reembed_stale()
    assert stats.reembedded == 0 and stats.unsupported == 0
    assert await s.search("gray") == []
    s.close()
    later = open_media(tmp_path / "m", embedder=FakeEmbedder(8, image=True, name="mm"))
    assert (await later.reembed_stale()).reembedded == 1


async def test_a_blob_left_behind_by_a_crash_is_reused(tmp_path: Path) -> None:
    data = png((7, 7, 7))
    digest = hashlib.sha256(data).hexdigest()
    blob = tmp_path / "m" / "blobs" / digest[:2] / digest[2:]
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data[:10])  # a torn write from an older crash
    (blob.parent / (blob.name + ".tmp")).write_bytes(b"junk")
    s = MediaStore(tmp_path / "m")
    rec = await s.put(data, "image/png")
    assert rec is not None and await s.get(digest) == data
    assert np.array_equal(np.frombuffer(blob.read_bytes(), np.uint8), np.frombuffer(data, np.uint8))


async def test_putting_the_same_bytes_again_heals_a_damaged_blob(store: MediaStore, tmp_path: Path) -> None:
    data = png((90, 90, 9))
    rec = await store.put(data, "image/png")
    assert rec is not None
    blob = tmp_path / "media" / "blobs" / rec.digest[:2] / rec.digest[2:]
    blob.write_bytes(b"bit rot")
    with pytest.raises(MemoryStoreError, match="corrupt"):
        await store.get(rec.short)
    again = await store.put(data, "image/png")
    assert again == rec
    assert await store.get(rec.short) == data
