"""Schema versions of the stores (homeagent_sdk/_schema.py), on real files: a copy before
every migration, one transaction, newer files refused untouched, unversioned files dated by shape."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from homeagent_core.builtin.timer import TIMERS_SCHEMA, TimerStore
from homeagent_core.config import ConfigStore
from homeagent_core.memory.graph.schema import GRAPH_SCHEMA, MIGRATIONS
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.textlog import LOG_FORMAT, TextLog
from homeagent_sdk._schema import (
    FORMAT_FILE,
    StoreSchema,
    open_folder_format,
    open_schema,
    pre_migration_folder,
    sql_step,
)
from homeagent_sdk.errors import DataFormatError
from homeagent_sdk.pairing import PairingStore
from homeagent_sdk.types import Triple


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def user_version(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def data_dir(tmp_path: Path) -> Path:
    """A data directory as the daemon leaves it: ``config.db`` at its top."""
    root = tmp_path / "data"
    root.mkdir()
    ConfigStore(root / "config.db").close()
    return root


def old_timers(path: Path, *, channel: bool) -> None:
    """A timers.db as the first release (or the second) wrote it: no recorded version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE timers (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "fire_at REAL NOT NULL, message TEXT NOT NULL, created_at REAL NOT NULL)"
        )
        if channel:
            conn.execute("ALTER TABLE timers ADD COLUMN channel TEXT NOT NULL DEFAULT ''")
        conn.execute("INSERT INTO timers (fire_at, message, created_at) VALUES (4102444800, '喝水', 0)")


def test_a_new_file_is_created_at_the_current_version_without_a_copy(tmp_path: Path) -> None:
    root = data_dir(tmp_path)
    assert user_version(root / "config.db") == 1
    TimerStore(root / "timers.db").add(4102444800, "x")
    assert user_version(root / "timers.db") == TIMERS_SCHEMA.version == 3
    assert not pre_migration_folder(root / "timers.db").exists()


@pytest.mark.parametrize("channel", [False, True], ids=["v1", "v2"])
def test_an_unversioned_file_is_dated_by_its_shape_copied_then_migrated(tmp_path: Path, channel: bool) -> None:
    root = data_dir(tmp_path)
    path = root / "plugin_data" / "timer" / "timers.db"
    old_timers(path, channel=channel)
    before = digest(path)
    store = TimerStore(path)
    assert [t.message for t in store.pending()] == ["喝水"]
    assert user_version(path) == 3
    old = 2 if channel else 1
    [copy] = list((root / "backups" / "pre-migration").iterdir())
    assert copy.name.startswith(f"plugin_data-timer-timers-v{old}-") and copy.suffix == ".db"
    with closing(sqlite3.connect(copy)) as conn:  # the copy is the file as it was
        columns = {r[1] for r in conn.execute("PRAGMA table_info(timers)")}
        assert ("channel" in columns) is channel and "person" not in columns
        assert conn.execute("SELECT message FROM timers").fetchall() == [("喝水",)]
    assert before != digest(path)
    TimerStore(path)  # opening a current file again takes no copy
    assert len(list((root / "backups" / "pre-migration").iterdir())) == 1


def test_a_newer_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    root = data_dir(tmp_path)
    path = root / "timers.db"
    TimerStore(path).add(4102444800, "x")
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA user_version = 4")
    before = digest(path)
    with pytest.raises(DataFormatError) as err:
        TimerStore(path)
    message = str(err.value)
    assert "timers.db" in message and "format 4" in message and "reads up to 3" in message
    assert "upgrade HomeAgent or restore a backup" in message
    assert digest(path) == before and user_version(path) == 4
    assert not (root / "backups").exists()


def test_a_failing_step_rolls_everything_back_and_says_where(tmp_path: Path) -> None:
    root = data_dir(tmp_path)
    path = root / "things.db"
    v1 = StoreSchema("things.db", [sql_step("CREATE TABLE things (name TEXT)")])
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        open_schema(conn, path, v1)
        conn.execute("INSERT INTO things VALUES ('kept')")
    broken = StoreSchema("things.db", [
        *v1.steps,
        sql_step("ALTER TABLE things ADD COLUMN size INTEGER NOT NULL DEFAULT 0"),  # runs, then is undone
        sql_step("CREATE TABLE things (again TEXT)"),  # fails: the table exists
    ])
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        with pytest.raises(DataFormatError) as err:
            open_schema(conn, path, broken)
        assert {r[1] for r in conn.execute("PRAGMA table_info(things)")} == {"name"}
        assert conn.execute("SELECT name FROM things").fetchall() == [("kept",)]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        assert not conn.in_transaction
    message = str(err.value)
    assert "from format 1 to 3 failed at step 2 -> 3" in message and "already exists" in message
    assert "left as it was" in message and "pre-migration" in message
    [copy] = list((root / "backups" / "pre-migration").iterdir())
    assert copy.name.startswith("things-v1-")


def test_a_graph_from_before_user_version_reads_its_old_schema_version_table(tmp_path: Path) -> None:
    root = data_dir(tmp_path)
    path = root / "memory" / "graph.db"
    path.parent.mkdir()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for statements in MIGRATIONS[:2]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (1), (2)")
        conn.execute(
            "INSERT INTO entities (id, name, created_at, updated_at) VALUES (1, '小王', 0, 0), (2, '杭州', 0, 0)"
        )
        conn.execute(
            "INSERT INTO relations (source_id, target_id, type, created_at, updated_at) VALUES (1, 2, '住在', 0, 0)"
        )
    store = GraphStore(path)
    assert [r.target for r in store.recall(["小王"]).relations] == ["杭州"]
    store.commit([Triple("小王", "喜欢", "龙井茶")])
    store.close()
    assert user_version(path) == GRAPH_SCHEMA.version == 4
    assert [c.name[:len("memory-graph-v2-")] for c in (root / "backups" / "pre-migration").iterdir()] == [
        "memory-graph-v2-"
    ]


def test_two_processes_opening_an_old_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    root = data_dir(tmp_path)
    path = root / "timers.db"
    old_timers(path, channel=False)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            TimerStore(path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    with closing(sqlite3.connect(path)) as conn:
        assert {r[1] for r in conn.execute("PRAGMA table_info(timers)")} >= {"channel", "person"}
        assert conn.execute("SELECT count(*) FROM timers").fetchone()[0] == 1


def test_a_file_that_is_not_a_database_is_still_refused_by_its_store(tmp_path: Path) -> None:
    path = tmp_path / "pairing.db"
    path.write_bytes(b"not sqlite" * 200)
    with pytest.raises(sqlite3.DatabaseError):
        PairingStore(path)


def test_the_conversation_log_records_its_format_and_refuses_a_newer_one(tmp_path: Path) -> None:
    folder = tmp_path / "text"
    TextLog(folder).close()
    assert json.loads((folder / FORMAT_FILE).read_text()) == {"store": "conversation log", "format": LOG_FORMAT}
    (folder / FORMAT_FILE).write_text(json.dumps({"store": "conversation log", "format": LOG_FORMAT + 1}))
    with pytest.raises(DataFormatError, match=rf"format {LOG_FORMAT + 1}.*reads up to {LOG_FORMAT}.*upgrade HomeAgent"):
        TextLog(folder)
    (folder / FORMAT_FILE).write_text("garbage")
    with pytest.raises(DataFormatError, match="not a HomeAgent format record"):
        open_folder_format(folder, "conversation log", LOG_FORMAT, lambda _: 0)


def test_an_unversioned_log_folder_is_dated_by_its_records(tmp_path: Path) -> None:
    folder = tmp_path / "text"
    folder.mkdir()
    (folder / "text-20261202-000.jsonl").write_text(
        json.dumps({"id": "a", "role": "user", "content": "你好", "timestamp": 1.0, "channel": "web", "source": "web"})
        + "\n"
    )
    assert open_folder_format(folder, "conversation log", LOG_FORMAT, lambda f: __import__(
        "homeagent_core.memory.textlog", fromlist=["log_folder_shape"]).log_folder_shape(f)) == 1
    assert [r["content"] for r in TextLog(folder).iter_records()] == ["你好"]


def test_doctor_names_a_newer_store_and_still_reports_when_config_is_newer(tmp_path: Path) -> None:
    from homeagent_core.cli.doctor import check_data_format, run_checks

    root = data_dir(tmp_path)
    GraphStore(root / "memory" / "graph.db").close()
    with closing(sqlite3.connect(root / "memory" / "graph.db")) as conn:
        conn.execute("PRAGMA user_version = 9")
    findings = check_data_format(root)
    assert findings[0].status == "fail" and "newer" in findings[0].message
    [graph] = [f for f in findings if f.message.startswith("memory/graph.db")]
    assert graph.status == "fail" and f"is format 9, this HomeAgent reads up to {GRAPH_SCHEMA.version}" in graph.message
    assert graph.fix == "upgrade HomeAgent or restore a backup"

    with closing(sqlite3.connect(root / "config.db")) as conn:
        conn.execute("PRAGMA user_version = 2")
    findings = run_checks(root)  # the app cannot open config.db: the report says why instead of failing
    assert any(f.area == "data" and f.status == "fail" and "config.db" in f.message for f in findings)
    assert any(f.message.startswith("config.db is format 2") for f in findings)


def test_doctor_reports_stores_an_upgrade_will_migrate(tmp_path: Path) -> None:
    from homeagent_core.cli.doctor import check_data_format

    root = data_dir(tmp_path)
    old_timers(root / "plugin_data" / "timer" / "timers.db", channel=True)
    findings = check_data_format(root)
    [timers] = [f for f in findings if f.message.startswith("plugin_data/timer/timers.db")]
    assert timers.status == "warn" and "format 2" in timers.message and "writes 3" in timers.message
    assert "pre-migration" in timers.fix
    assert (root / "plugin_data" / "timer" / "timers.db").exists() and user_version(
        root / "plugin_data" / "timer" / "timers.db") == 0  # reading did not migrate it
