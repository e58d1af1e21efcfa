"""``homeagent memory share``/``unshare`` and ``memory docs`` on a data directory (no daemon),
and the doctor's line about documents from before memory recorded who said what."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from homeagent_core.agent.people import household_owner
from homeagent_core.cli import app
from homeagent_core.memory.documents.store import DocumentStore
from homeagent_core.memory.knowledge.base import KnowledgeBase
from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, Audience

runner = CliRunner()


def run(data: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["memory", *args, "--data", str(data)])
    return result.exit_code, result.output


def _seed(data: Path) -> tuple[str, str]:
    owner = household_owner(data)
    store = DocumentStore(data / "memory" / "documents.db", owner=owner)
    doc = asyncio.run(store.add("the plumber comes on monday at nine", person="mum"))
    store.close()
    kb = KnowledgeBase(data / "knowledge", owner=owner)
    kb.create_sync("home/plumber", "plumber: 555-0101")
    kb.close()
    return doc.id, owner


def test_share_and_unshare_a_document_and_a_knowledge_entry_offline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    doc_id, owner = _seed(data)
    code, out = run(data, "docs", "plumber monday")
    assert code == 0 and doc_id in out and "mum (private)" in out
    code, out = run(data, "share", doc_id, "plumber", "--json")
    assert code == 0, out
    assert json.loads(out) == {"documents": [doc_id], "knowledge": ["home/plumber"], "unknown": []}
    store = DocumentStore(data / "memory" / "documents.db", owner=owner)
    hits = store.search("plumber monday", 3, audience=Audience(person="kid"))
    assert [(h.document.id, h.document.visibility) for h in hits] == [(doc_id, HOUSEHOLD)]
    store.close()
    kb = KnowledgeBase(data / "knowledge", owner=owner)
    assert kb.get("plumber").visibility == HOUSEHOLD
    kb.close()
    code, out = run(data, "unshare", doc_id)
    assert code == 0 and f"document {doc_id}: private to its person" in out
    store = DocumentStore(data / "memory" / "documents.db", owner=owner)
    assert store.get(doc_id).visibility == PRIVATE  # type: ignore[union-attr]
    store.close()


def test_an_unknown_id_is_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _seed(data)
    code, out = run(data, "share", "doc_nope")
    assert code != 0 and "no document or knowledge entry named doc_nope" in out and "memory docs" in out


def test_doctor_tells_how_many_documents_became_the_owners(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "memory").mkdir(parents=True)
    db = sqlite3.connect(data / "memory" / "documents.db")
    db.executescript(
        "CREATE TABLE documents (slot INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
        " title TEXT NOT NULL DEFAULT '', content TEXT NOT NULL, source TEXT NOT NULL DEFAULT '',"
        " created_at REAL NOT NULL, last_access REAL NOT NULL, access_count INTEGER NOT NULL DEFAULT 0,"
        " media_digests TEXT NOT NULL DEFAULT '[]', meta TEXT NOT NULL DEFAULT '{}', vector BLOB,"
        " vec_model TEXT NOT NULL DEFAULT '', lex BLOB NOT NULL, lex_len INTEGER NOT NULL);"
        "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    )
    db.execute("INSERT INTO documents (id, content, created_at, last_access, lex, lex_len)"
               " VALUES ('doc_a', 'old note', 1, 1, x'', 0)")
    db.commit()
    db.close()
    DocumentStore(data / "memory" / "documents.db", owner=household_owner(data)).close()  # the upgrade
    findings = json.loads(runner.invoke(app, ["doctor", "--json", "--data", str(data)]).output)
    lines = [f for f in findings if "before memory recorded who said what" in f["message"]]
    assert len(lines) == 1 and lines[0]["message"].startswith("1 document(s)")
    assert "homeagent memory share" in lines[0]["fix"]
