"""The mirror file beside graph.db: used after a clean close, refused (and rewritten) when stale or damaged.

Real SQLite files and real mirror files throughout; the crash case kills a real writer process
with SIGKILL in the middle of its commits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from homeagent_core.memory.graph.store import GraphStore, mirror_file
from homeagent_sdk.types import Triple

NAMES = ["小王", "小李", "杭州", "浙江省", "Alice", "Bob", "龙井茶", "西湖"]


def fill(store: GraphStore, rounds: int = 3) -> None:
    """Relations in CSR and delta, some removed, with sentences and media, so every column has data."""
    for r in range(rounds):
        store.commit(
            [
                Triple(a, rel, b, confidence=0.5 + 0.1 * (i % 5), sentence_text=f"{a}{rel}{b}")
                for i, (a, b, rel) in enumerate(
                    (NAMES[i], NAMES[(i * 3 + r) % len(NAMES)], ["认识", "住在", "喜欢"][(i + r) % 3])
                    for i in range(len(NAMES))
                )
            ],
            session=f"s{r}",
        )
    store.commit([Triple("小王", "拍了", "西湖", media_digests=["a" * 64])], session="media")
    store.purge({"relation_type": "喜欢", "session": "s1"}, "soft")


def recall_all(store: GraphStore) -> list[object]:
    return [store.recall([name], depth=2).to_dict() for name in NAMES]


def open_store(path: Path) -> GraphStore:
    return GraphStore(path, save_mirror_from=0)


def test_a_clean_close_leaves_a_mirror_file_that_the_next_open_reads(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = open_store(path)
    fill(store)
    recalled = recall_all(store)
    rows = store.sql_snapshot()
    store.close()
    assert mirror_file.mirror_path(str(path)).exists()

    store = open_store(path)
    try:
        assert store.mirror_loaded_from == "file" and store.cache.file_refused == ""
        assert store.cache.snapshot() == rows == store.sql_snapshot()  # also checks CSR, ranks, kept rows
        assert recall_all(store) == recalled
        store.commit([Triple("小李", "认识", "Bob")])  # the loaded form takes writes like a built one
        store.delete_entity("浙江省")
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()
    store = open_store(path)  # the close wrote the file again for the new state
    try:
        assert store.mirror_loaded_from == "file"
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()


def test_small_graphs_and_memory_databases_keep_no_file(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "graph.db")  # below the default size
    fill(store, rounds=1)
    store.close()
    assert not mirror_file.mirror_path(str(tmp_path / "graph.db")).exists()
    memory = GraphStore(":memory:", save_mirror_from=0)
    fill(memory, rounds=1)
    assert memory.save_mirror() is False
    memory.close()


WRITER = textwrap.dedent(
    """
    import sys
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_sdk.types import Triple

    store = GraphStore(sys.argv[1], save_mirror_from=0)
    print("opened", store.mirror_loaded_from, flush=True)
    i = 0
    while True:
        store.commit([Triple(f"人物{i}", "认识", f"人物{i + 1}"), Triple(f"人物{i}", "住在", "杭州")], session="crash")
        if i % 7 == 3:
            store.purge({"subject_contains": f"人物{i - 2}", "relation_type": "住在"}, "hard")
        print(f"committed {i}", flush=True)
        i += 1
    """
)


async def _kill_mid_writes(path: Path, script: Path, acks_wanted: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    acks: list[str] = []
    try:
        assert proc.stdout is not None
        while len(acks) < acks_wanted:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            if not line:
                break
            acks.append(line.decode().strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL, (await proc.stderr.read()).decode() if proc.stderr else ""
    return acks


def test_after_kill_9_mid_writes_the_file_is_refused_as_stale_and_the_mirror_equals_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = open_store(path)
    fill(store)
    store.close()  # a good file for the state before the writer runs
    script = tmp_path / "writer.py"
    script.write_text(WRITER)

    acks = asyncio.run(_kill_mid_writes(path, script, 40))
    assert acks[0] == "opened file"
    committed = [int(a.split()[1]) for a in acks if a.startswith("committed ")]
    assert len(committed) >= 30

    store = open_store(path)
    try:
        assert store.mirror_loaded_from == "database"
        assert "stale" in store.cache.file_refused
        assert store.cache.snapshot() == store.sql_snapshot()
        for i in committed:  # every acknowledged commit is there
            assert store.cache.entity(f"人物{i + 1}") is not None
        if store._saver is not None:  # the background save after a load from the database
            store._saver.join(timeout=60)
        assert mirror_file.read_mirror(mirror_file.mirror_path(str(path)), store.sql.stamp())  # type: ignore[attr-defined]
    finally:
        store.close()
    store = open_store(path)
    try:
        assert store.mirror_loaded_from == "file"
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: data[:-40] + bytes(b ^ 0xFF for b in data[-40:]), "damaged"),
        (lambda data: b"not a mirror" + data[12:], "not a graph mirror file"),
        (lambda data: b"", "not a graph mirror file"),
    ],
    ids=["truncated", "flipped-bytes", "bad-magic", "empty"],
)
def test_a_damaged_file_is_refused_with_its_reason_logged_and_written_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object, reason: str
) -> None:
    path = tmp_path / "graph.db"
    store = open_store(path)
    fill(store)
    recalled = recall_all(store)
    store.close()
    saved = mirror_file.mirror_path(str(path))
    saved.write_bytes(damage(saved.read_bytes()))  # type: ignore[operator]

    with caplog.at_level(logging.WARNING, logger="homeagent_core.memory.graph.store"):
        store = open_store(path)
    try:
        assert store.mirror_loaded_from == "database"
        assert reason in store.cache.file_refused
        assert any(reason in r.getMessage() and "set aside" in r.getMessage() for r in caplog.records)
        assert store.cache.snapshot() == store.sql_snapshot()
        assert recall_all(store) == recalled
    finally:
        store.close()
    store = open_store(path)  # rebuilt: the next open reads it again
    try:
        assert store.mirror_loaded_from == "file"
        assert recall_all(store) == recalled
    finally:
        store.close()


def test_a_file_written_for_another_graph_database_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "graph.db", tmp_path / "b" / "graph.db"
    for path, rounds in ((first, 3), (second, 2)):
        store = open_store(path)
        fill(store, rounds=rounds)
        store.close()
    shutil.copy(mirror_file.mirror_path(str(first)), mirror_file.mirror_path(str(second)))
    store = open_store(second)
    try:
        assert store.mirror_loaded_from == "database"
        assert "another graph database" in store.cache.file_refused
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()
    # a copy of the database with its file is the same database: the file fits it
    shutil.copy(first, tmp_path / "copy.db")
    shutil.copy(mirror_file.mirror_path(str(first)), mirror_file.mirror_path(str(tmp_path / "copy.db")))
    store = open_store(tmp_path / "copy.db")
    try:
        assert store.mirror_loaded_from == "file"
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()


def test_a_write_by_another_program_makes_the_file_stale(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = open_store(path)
    fill(store)
    store.close()
    conn = sqlite3.connect(path)  # e.g. the sqlite3 shell: same row counts and ids, another confidence
    with conn:
        conn.execute("UPDATE relations SET confidence = 0.01 WHERE id = (SELECT min(id) FROM relations)")
    conn.close()
    store = open_store(path)
    try:
        assert store.mirror_loaded_from == "database" and "generation" in store.cache.file_refused
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()


def test_a_file_with_the_right_stamp_but_arrays_that_do_not_fit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = open_store(path)
    fill(store)
    stamp = store.sql.stamp()  # type: ignore[attr-defined]
    store.close()
    saved = mirror_file.mirror_path(str(path))
    arrays = mirror_file.read_mirror(saved, stamp)
    arrays["csr"] = arrays["csr"][:-1]  # one adjacency row short, checksums recomputed: only the fit check sees it
    mirror_file.write_mirror(saved, stamp, arrays)
    store = open_store(path)
    try:
        assert store.mirror_loaded_from == "database"
        assert "do not fit" in store.cache.file_refused
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()
