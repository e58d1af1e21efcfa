"""The media tier's interface, run against every backend (``media.db``, PostgreSQL tenant).

Each test drives a :class:`~homeagent_core.memory.stores.media.MediaIndex` directly: the rows a
media store keeps, whichever database holds them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.memory.media import SqliteMediaIndex
from homeagent_core.memory.stores.media import FullRow, MediaIndex


@pytest.fixture(params=["sqlite", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MediaIndex]:
    if request.param == "sqlite":
        opened: MediaIndex = SqliteMediaIndex(tmp_path / "media.db")
    else:
        from homeagent_core.memory.stores.postgresql.media import PgMediaIndex

        opened = PgMediaIndex(request.getfixturevalue("pg_url"), tenant=request.getfixturevalue("pg_tenant"))
    yield opened
    opened.close()


def _row(data: bytes, *, at: float, vec: bytes | None = None, space: str = "") -> FullRow:
    digest = hashlib.sha256(data).hexdigest()
    return (digest, "image/png", len(data), f"{data.decode()}.png", at, vec, 4 if vec else 0, space)


def test_each_backend_declares_the_media_interface(index: MediaIndex) -> None:
    assert MediaIndex in type(index).__mro__, f"{type(index).__name__} does not declare MediaIndex"


def test_rows_are_found_by_digest_and_prefix_listed_and_counted(index: MediaIndex) -> None:
    a, b = _row(b"red", at=1.0), _row(b"blue", at=2.0)
    index.insert(a, b"red")
    index.insert(b, b"blue")
    assert index.count() == 2
    assert index.lookup(a[0], 5) == [a[0]]
    assert index.lookup(a[0][:6], 5) == [a[0]]
    assert index.lookup("f" * 64, 5) == []
    assert index.row(a[0]) == (a[0], "image/png", 3, "red.png", 1.0, "", 0)
    assert index.row("0" * 64) is None
    assert [r[0] for r in index.page(10, 0)] == [a[0], b[0]]
    assert [r[0] for r in index.page(10, 1)] == [b[0]]
    assert [r[0] for r in index.full_rows("", 10)] == sorted([a[0], b[0]])
    assert index.blob(a[0]) in (None, b"red")  # kept only where other daemons read the bytes


def test_vectors_belong_to_their_space_and_stale_rows_are_listed(index: MediaIndex) -> None:
    a, b = _row(b"red", at=1.0), _row(b"blue", at=2.0)
    index.insert(a, b"red")
    index.insert(b, b"blue")
    vec = np.arange(4, dtype=np.float32).tobytes()
    assert index.set_vectors([(a[0], vec, 4, "space-a"), ("0" * 64, vec, 4, "space-a")]) == [a[0]]
    assert index.vectors("space-a", 4) == [(a[0], vec)]
    assert index.vectors("space-b", 4) == []
    assert index.stale("space-a") == [(b[0], "image/png", "")]
    index.delete(a[0])
    assert index.row(a[0]) is None and index.count() == 1 and index.vectors("space-a", 4) == []
