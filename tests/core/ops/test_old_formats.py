"""Data directories written by earlier commits of this project open with today's code, every record intact.

Each fixture under ``tests/fixtures/old_formats/`` is a data directory written by that commit's
own code (``build.py``; the records are ``records.py``). Opening one must: report its old data
format before anything opens it, migrate every older store after a copy in
``backups/pre-migration/``, and answer with every record it was given.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tarfile
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core import Agent
from homeagent_core.agent.people import PeopleRegistry
from homeagent_core.builtin.reminders import ReminderStore
from homeagent_core.builtin.timer import TimerStore
from homeagent_core.builtin.webui.auth import Logins
from homeagent_core.cli import app as cli_app
from homeagent_core.cli.doctor import check_data_format
from homeagent_core.ops.formats import _RECORDED_SINCE, DATA_FORMAT, HISTORY, current_versions, inspect_data_dir
from homeagent_sdk.pairing import PairingStore
from homeagent_sdk.testing import FakeModel

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "old_formats"
sys.path.insert(0, str(FIXTURES))
import records as R  # noqa: E402

ARCHIVES = sorted(FIXTURES.glob("format-*.tar.gz"))


def unpack(archive: Path, into: Path) -> tuple[Path, dict[str, Any], int]:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    data = into / "data"
    written = json.loads((data / "written.json").read_text(encoding="utf-8"))
    return data, written, int(archive.name.split("-")[1])


def test_there_is_a_fixture_for_the_first_release_and_the_format_before_versions_were_recorded() -> None:
    formats = {int(a.name.split("-")[1]) for a in ARCHIVES}
    assert {1, _RECORDED_SINCE - 1} <= formats
    assert {a.name.split("-")[2].split(".")[0] for a in ARCHIVES if a.name.startswith("format-01-")} == {
        HISTORY[0].commit
    }


def test_the_format_history_ends_with_what_the_stores_write_today() -> None:
    assert [h.format for h in HISTORY] == list(range(1, DATA_FORMAT + 1))
    assert HISTORY[-1].stores == current_versions()


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.name.removesuffix(".tar.gz") for a in ARCHIVES])
async def test_an_old_data_directory_opens_with_every_record(archive: Path, tmp_path: Path) -> None:
    data, written, fmt = unpack(archive, tmp_path)

    # read before anything opens it: the old format, and which stores an upgrade will migrate
    before = inspect_data_dir(data)
    present = {s.store for s in before.stores}
    assert before.format is not None and before.format <= fmt, before.to_dict()
    for between in HISTORY[before.format : fmt]:  # formats that differ only in stores this directory lacks
        assert {k: v for k, v in between.stores.items() if k in present} == {
            k: v for k, v in HISTORY[fmt - 1].stores.items() if k in present
        }
    older = {s.store: s.version for s in before.stores if s.state == "older"}
    assert all(s.state in ("older", "current") for s in before.stores), before.to_dict()
    assert not any(s.recorded and s.version for s in before.stores if s.store.endswith(".db"))
    doctor = check_data_format(data)
    assert doctor[0].message.startswith(f"data format {before.format}")

    agent = Agent(data, provider=FakeModel(default="ok"), load_entrypoints=False)
    await agent.start()
    try:
        assert agent.config.get("core.agent.max_tool_turns") == written["config"]["core.agent.max_tool_turns"]
        for doc_id, (title, content) in zip(written["documents"], R.DOCUMENTS, strict=True):
            hits = await agent.documents.query(content[:12], top_k=3)
            assert hits and hits[0].id == doc_id and hits[0].title == title and hits[0].content == content
        recalled = await agent.memory.recall(["小王"])
        text = json.dumps(recalled, ensure_ascii=False)
        assert "杭州" in text and "龙井茶" in text, text
        assert ("奶奶", "生日是", "三月五日") in [
            (r.source_name, r.relation_type, r.target_name) for r in await agent.memory.relations("奶奶")
        ]
        for name, content in R.KNOWLEDGE:
            assert (await agent.knowledge.get(name)).content == content
        blob = await agent.app.memory.media.get(written["media"])
        assert blob == R.MEDIA[0]
    finally:
        await agent.aclose()

    exported = CliRunner().invoke(cli_app, ["memory", "export", "--data", str(data)])
    assert exported.exit_code == 0, exported.output
    for text, reply in R.ASKS:
        assert text in exported.output and reply in exported.output

    timers = TimerStore(data / "plugin_data" / "timer" / "timers.db")
    assert [t.message for t in timers.pending()] == [R.TIMER]
    if "pairing" in written:
        platform, account, name, code = written["pairing"]
        with closing(PairingStore(data / "plugin_data" / "onebot" / "pairing.db")) as pairing:
            request = pairing.get(platform, account)
            assert request is not None and request.code == code and request.name == name
    if "person" in written:
        people = PeopleRegistry.open(data)
        person = people.get(R.PERSON[0])
        assert person is not None and person.role == R.PERSON[1]
        people.close()
    if "reminder" in written:
        reminders = ReminderStore(data / "plugin_data" / "reminders" / "reminders.db")
        assert [r.text for r in reminders.pending()] == [R.REMINDER]
    if "login" in written:
        with closing(Logins(data / "plugin_data" / "webui" / "logins.db")) as logins:
            assert logins.check(R.LOGIN[0], 0.0, R.LOGIN[1])

    # every store is now recorded at today's version; each migrated one left a copy as it was
    after = inspect_data_dir(data)
    assert after.format == DATA_FORMAT, after.to_dict()
    assert all(s.state == "current" and s.recorded for s in after.stores), after.to_dict()
    copies = sorted((data / "backups" / "pre-migration").glob("*.db")) if older else []
    for store, version in older.items():
        if store == "conversation log":
            continue  # its records are read as they are: nothing is rewritten, nothing copied
        stem = {"graph.db": "memory-graph", "documents.db": "memory-documents",
                "timers.db": "plugin_data-timer-timers", "people.db": "people"}[store]
        [copy] = [c for c in copies if c.name.startswith(f"{stem}-v{version}-")]
        with closing(sqlite3.connect(copy)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 0  # as it was: before versions
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
