"""The conversation log, media and knowledge on PostgreSQL while the server goes away: writes retried,
acknowledged only when durable, never applied twice (the server and relay of ``test_pg_outage``)."""

from __future__ import annotations

import threading

import psycopg
import test_pg_outage as outage
from test_pg_outage import PATIENCE, AnswerSwallower

from homeagent_core.memory.knowledge.base import KnowledgeBase
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge
from homeagent_core.memory.stores.postgresql.local import LocalPostgres
from homeagent_core.memory.stores.postgresql.textlog import PgTextLog

server = outage.server  # the module's own server (restarted here) and the relay in front of it
relay = outage.relay


def _log_contents(url: str, tenant: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT record::json->>'content' FROM ha_text_log WHERE tenant=%s ORDER BY seq",
                            (tenant,)).fetchall()
    return [r[0] for r in rows]


def test_a_log_append_whose_commit_answer_was_lost_is_acknowledged_and_stored_once(relay: AnswerSwallower) -> None:
    db = PgDatabase(relay.url(), retry_for=PATIENCE)
    log = PgTextLog(db, tenant="swallowed-log", follow=False)
    try:
        log.append("user", "the boiler was serviced in May")
        relay.armed = 1
        log.append("user", "the car needs new tyres")
        assert relay.swallowed == 1
        assert _log_contents(relay.url(), "swallowed-log") == ["the boiler was serviced in May",
                                                               "the car needs new tyres"]
        assert [r["content"] for r in log.tail(5)] == ["the boiler was serviced in May", "the car needs new tyres"]
    finally:
        log.close()
        db.close()


def test_log_appends_through_server_restarts_are_all_acknowledged_once(server: LocalPostgres) -> None:
    db = PgDatabase(server.url, retry_for=PATIENCE)
    log = PgTextLog(db, tenant="restarted-log", follow=False)
    heard: list[str] = []
    log.add_listener(lambda r: heard.append(r["content"]) if r else None)
    total = 40
    acknowledged: list[str] = []
    failures: list[BaseException] = []

    def write() -> None:
        for i in range(total):
            try:
                log.append("user", f"message {i}")
                acknowledged.append(f"message {i}")
            except BaseException as exc:  # recorded: the test fails on any, naming it
                failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for after in (8, 20):
            while len(acknowledged) < after and writer.is_alive():
                threading.Event().wait(0.01)
            server.stop()  # cuts the append in flight
            server.start()
        writer.join(timeout=PATIENCE * 3)
        assert not writer.is_alive()
        assert failures == [] and acknowledged == [f"message {i}" for i in range(total)]
        assert _log_contents(server.url, "restarted-log") == acknowledged
        assert heard == acknowledged
    finally:
        writer.join(timeout=PATIENCE * 3)
        log.close()
        db.close()


async def test_a_knowledge_entry_whose_commit_answer_was_lost_is_written_once(relay: AnswerSwallower) -> None:
    db = PgDatabase(relay.url(), retry_for=PATIENCE)
    kb = KnowledgeBase(relay.url_host, storage=PgKnowledge(db, tenant="swallowed-kb"))
    try:
        relay.armed = 1
        await kb.create("home/wifi", "homenet")
        assert relay.swallowed == 1
        with psycopg.connect(relay.url()) as conn:
            assert conn.execute("SELECT name, content FROM ha_knowledge WHERE tenant='swallowed-kb'").fetchall() == [
                ("home/wifi", "homenet")]
        assert [e.name for e in kb.list()] == ["home/wifi"]
    finally:
        kb.close()
        db.close()
