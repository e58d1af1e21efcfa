from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homeagent_core.embeddings.reembed import reembed_stale
from homeagent_sdk.embeddings import EmbedInput, InvalidEmbedInput
from homeagent_sdk.testing import FakeEmbedder


class Table:
    """Rows in a real SQLite file, as a memory layer stores them."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, text TEXT, vec BLOB, vec_model TEXT)")

    def fill(self, n: int, vec_model: str = "old") -> None:
        with self.db:
            self.db.executemany(
                "INSERT INTO t (id, text, vec, vec_model) VALUES (?, ?, NULL, ?)",
                [(i, f"第{i}条 row {i}", vec_model) for i in range(n)],
            )

    async def stale(self, fingerprint: str) -> AsyncIterator[list[tuple[Any, Any, Any]]]:
        cur = self.db.execute("SELECT id, text, vec_model FROM t WHERE vec_model IS NOT ? ORDER BY id", (fingerprint,))
        while batch := cur.fetchmany(7):
            yield batch

    def write(self, rows: list[tuple[Any, np.ndarray, str]]) -> None:
        with self.db:
            self.db.executemany(
                "UPDATE t SET vec = ?, vec_model = ? WHERE id = ?",
                [(v.astype(np.float32).tobytes(), fp, rid) for rid, v, fp in rows],
            )

    def models(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT vec_model FROM t ORDER BY id")]


async def test_stale_rows_are_reembedded_in_batches_and_written_back(tmp_path: Path) -> None:
    table = Table(tmp_path / "m.db")
    table.fill(20)
    provider = FakeEmbedder(16)
    fp = provider.info.fingerprint
    with table.db:
        table.db.execute("UPDATE t SET vec_model = ? WHERE id < 5", (fp,))
        table.db.execute("UPDATE t SET vec_model = NULL WHERE id = 7")
    stats = await reembed_stale(table.stale(fp), provider, table.write, batch_size=4)
    assert stats.reembedded == 15 and stats.batches == 4
    assert table.models() == [fp] * 20
    blob = table.db.execute("SELECT vec FROM t WHERE id = 9").fetchone()[0]
    expected = (await provider.embed_texts(["第9条 row 9"]))[0]
    assert np.allclose(np.frombuffer(blob, dtype=np.float32), expected)


async def test_rows_already_in_the_active_space_are_skipped() -> None:
    provider = FakeEmbedder(8)
    written: list[Any] = []

    async def write(rows: list[tuple[Any, np.ndarray, str]]) -> None:
        written.extend(r[0] for r in rows)

    rows = [("a", "x", provider.info.fingerprint), ("b", "y", "other"), ("c", "z", "")]
    stats = await reembed_stale(rows, provider, write)
    assert written == ["b", "c"]
    assert stats.current == 1 and stats.seen == 3


async def test_a_crash_mid_run_resumes_without_redoing_finished_rows(tmp_path: Path) -> None:
    table = Table(tmp_path / "m.db")
    table.fill(30)
    provider = FakeEmbedder(16)
    fp = provider.info.fingerprint
    calls = 0

    def crashing_write(rows: list[tuple[Any, np.ndarray, str]]) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("power cut")
        table.write(rows)

    with pytest.raises(RuntimeError, match="power cut"):
        await reembed_stale(table.stale(fp), provider, crashing_write, batch_size=5)
    assert table.models().count(fp) == 10
    provider.calls.clear()
    reopened = Table(tmp_path / "m.db")
    stats = await reembed_stale(reopened.stale(fp), provider, reopened.write, batch_size=5)
    assert stats.reembedded == 20 and stats.seen == 20
    assert sum(len(c) for c in provider.calls) == 20
    assert reopened.models() == [fp] * 30


async def test_rows_of_an_unsupported_modality_are_left_alone() -> None:
    provider = FakeEmbedder(8)  # text only
    written: list[Any] = []
    rows = [("img", EmbedInput.of_image(b"\x89PNG"), "clip"), ("txt", "你好", "clip")]
    stats = await reembed_stale(rows, provider, lambda rs: written.extend(r[0] for r in rs))
    assert written == ["txt"] and stats.unsupported == 1


class PickyEmbedder(FakeEmbedder):
    async def embed(self, inputs: list[EmbedInput]) -> np.ndarray:
        if any(i.text == "bad" for i in inputs):
            raise InvalidEmbedInput("bad row")
        return await super().embed(inputs)


async def test_an_invalid_row_does_not_stop_the_rest_of_its_batch() -> None:
    provider = PickyEmbedder(8)
    written: list[Any] = []
    rows = [(i, "bad" if i == 2 else f"ok {i}", "") for i in range(5)]
    stats = await reembed_stale(rows, provider, lambda rs: written.extend(r[0] for r in rs))
    assert written == [0, 1, 3, 4] and stats.invalid == 1
