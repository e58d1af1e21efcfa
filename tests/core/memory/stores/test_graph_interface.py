"""The graph tier's interface, run against every backend (SQLite file, PostgreSQL tenant).

Each test opens a graph through ``open_graph`` (tests/core/memory/conftest.py) and checks what
:class:`~homeagent_core.memory.stores.graph.GraphSQL` promises the store above it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.stores.graph import GraphSQL
from homeagent_sdk.types import Triple


def test_each_backend_is_a_graph_database(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    store = open_graph(tmp_path / "memory" / "graph.db")
    assert GraphSQL in type(store.sql).__mro__, f"{type(store.sql).__name__} does not declare GraphSQL"
    assert store.sql.path == store.path != ""


def test_committed_rows_are_read_back_by_snapshot_mirror_and_counts(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    store = open_graph(tmp_path / "memory" / "graph.db")
    result = store.commit([Triple("小王", "住在", "杭州"), Triple("Alice", "likes", "tea")], "s1")
    assert not result.skipped
    rows = store.sql.snapshot()
    assert {e.name for e in rows["entities"].values()} == {"小王", "杭州", "Alice", "tea"}
    assert sorted(r.type for r in rows["relations"].values()) == ["likes", "住在"]
    mirror = store.sql.load_mirror()
    assert mirror.snapshot()["entities"].keys() == rows["entities"].keys()
    counts = store.sql.counts()
    assert (counts["entities"], counts["relations_active"], counts["relations_deleted"]) == (4, 2, 0)
    assert counts["relation_types"] == {"住在": 1, "likes": 1}
    assert store.sql.read(lambda conn: 1 + 1) == 2


def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    store = open_graph(tmp_path / "memory" / "graph.db")
    store.commit([Triple("小王", "住在", "杭州")])
    before = store.sql.snapshot()

    class Refused(Exception):
        pass

    def half_done(conn: object, changes: object) -> None:
        from homeagent_core.memory.graph import writes as graph_writes

        graph_writes.commit(conn, changes, [Triple("小李", "住在", "上海")], "", {}, None, lambda: 0.0)  # type: ignore[arg-type]
        raise Refused

    try:
        store.sql.transaction(half_done)
    except Refused:
        pass
    else:
        raise AssertionError("the transaction body's error was swallowed")
    assert store.sql.snapshot() == before


def test_rows_outlive_the_connection(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    path = tmp_path / "memory" / "graph.db"
    store = open_graph(path)
    store.commit([Triple("小王", "喜欢", "咖啡")])
    store.close()
    again = open_graph(path)
    assert {e.name for e in again.sql.snapshot()["entities"].values()} == {"小王", "咖啡"}
