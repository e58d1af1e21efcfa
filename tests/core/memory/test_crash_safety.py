"""kill -9 a writer mid-stream; everything it acknowledged must be there after reopening."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from homeagent_core.memory.documents.store import DocumentStore
from homeagent_core.memory.textlog import TextLog
from homeagent_sdk.visibility import EVERYONE

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from homeagent_core.memory.documents.store import DocumentStore
    from homeagent_core.memory.textlog import TextLog

    async def main(root):
        log = TextLog(root + "/text", max_bytes=4096)
        store = DocumentStore(root + "/documents.db")
        i = 0
        while True:
            log.append("user", f"message {i}")
            print(f"log {i}", flush=True)
            await store.add(f"document {i} about topic {i % 13}", source="crash")
            print(f"doc {i}", flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


async def _read_acks(proc: asyncio.subprocess.Process, wanted: int) -> list[str]:
    acks: list[str] = []
    assert proc.stdout is not None
    while len(acks) < wanted:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
        if not line:
            break
        acks.append(line.decode().strip())
    return acks


async def test_acknowledged_records_survive_kill_9(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    try:
        acks = await _read_acks(proc, 120)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # anything still buffered in the pipe was acknowledged too
    assert proc.stdout is not None
    acks += [ln.strip() for ln in (await proc.stdout.read()).decode().splitlines() if ln.strip()]
    assert proc.returncode == -signal.SIGKILL
    logged = {int(a.split()[1]) for a in acks if a.startswith("log ")}
    stored = {int(a.split()[1]) for a in acks if a.startswith("doc ")}
    assert len(logged) >= 60

    log = TextLog(tmp_path / "text", max_bytes=4096)
    contents = {e.content for e in log.iter_events()}
    assert {f"message {i}" for i in logged} <= contents
    assert len(log.files()) > 1  # the writer crossed rotations
    log.close()

    store = DocumentStore(tmp_path / "documents.db")
    docs = {d.content for d in store.all()}
    assert {f"document {i} about topic {i % 13}" for i in stored} <= docs
    hits = await store.query("document about topic 7", 50, touch=False, audience=EVERYONE)
    assert hits and all("topic" in h.document.content for h in hits)
    store.close()


SNAPSHOT_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from homeagent_core.memory.documents.lexical import index as lexical
    from homeagent_core.memory.documents.lexical import snapshot as lexical_snapshot
    from homeagent_core.memory.documents.store import DocumentStore

    lexical.DELTA_MAX = 3000         # fold the delta often: a snapshot after every few inserts
    lexical_snapshot._CHUNK = 4096   # many small writes: a snapshot takes a while to write
    WORDS = "paint lake camping adoption pottery guitar marathon yoga recipe museum".split()

    async def main(root, start):
        store = DocumentStore(root + "/documents.db")
        store.snapshot_min_docs = 1
        store.snapshot_fraction = 0.0
        i = start
        while True:
            words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 6))
            await store.add(f"entry {i} {words}", source="snap")
            print(f"doc {i}", flush=True)
            i += 1

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


async def _kill_while_snapshot_is_written(proc: asyncio.subprocess.Process, partial) -> bool:
    """SIGSTOP the writer whenever a partial snapshot exists; SIGKILL it if one still does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while loop.time() < deadline and proc.returncode is None:
        if partial.exists():
            proc.send_signal(signal.SIGSTOP)
            while not _stopped(proc.pid):
                assert loop.time() < deadline, "the writer did not stop"
                await asyncio.sleep(0.0002)
            if partial.exists():
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                return True
            proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(0.0002)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    return False


async def test_kill_9_while_a_lexical_snapshot_is_written_loses_nothing(tmp_path, caplog):
    from homeagent_core.lexical.buckets import decode_many
    from homeagent_core.memory.documents.lexical.index import LexicalIndex
    from homeagent_core.memory.documents.lexical.snapshot import tmp_path as partial_path

    script = tmp_path / "writer.py"
    script.write_text(SNAPSHOT_WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    db = tmp_path / "documents.db"
    partial = partial_path(db.with_name("documents.db.lex"))
    acked: set[int] = set()
    caught = 0
    for _ in range(2):  # the second run recovers from the first kill, then is killed again
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(tmp_path), str(len(acked) and max(acked) + 1),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        acks = await _read_acks(proc, 150)
        caught += await _kill_while_snapshot_is_written(proc, partial)
        assert proc.stdout is not None
        acks += [ln.strip() for ln in (await proc.stdout.read()).decode().splitlines() if ln.strip()]
        assert proc.returncode == -signal.SIGKILL
        acked |= {int(a.split()[1]) for a in acks if a.startswith("doc ")}
    assert caught == 2, "the writer was never caught in the middle of a snapshot"
    assert partial.exists() and db.with_name("documents.db.lex").exists()

    with caplog.at_level("INFO", logger="homeagent_core.memory.documents.store"):
        store = DocumentStore(db)
    assert "removed a partial lexical snapshot" in caplog.text
    assert "rebuilding" not in caplog.text  # the previous snapshot was intact and used
    assert not partial.exists()
    contents = {d.content for d in store.all()}
    assert all(any(c.startswith(f"entry {i} ") for c in contents) for i in acked)
    # the index loaded from the snapshot plus the re-indexed tail equals a full rebuild
    rows = store._sql.db.execute("SELECT slot, lex, lex_len FROM documents ORDER BY slot").fetchall()
    terms, buckets, counts = decode_many([r[1] for r in rows])
    rebuilt = LexicalIndex.build(
        np.array([r[0] for r in rows]), terms, buckets, counts, np.array([r[2] for r in rows])
    )
    for query in ("paint the lake", "entry 42 guitar", "museum yoga recipe"):
        assert np.allclose(store._lex.scores(query), rebuilt.scores(query)[: store._lex.capacity])
    newest = max(acked)
    hits = await store.query(f"entry {newest}", 3, touch=False, audience=EVERYONE)
    assert any(h.document.content.startswith(f"entry {newest} ") for h in hits)
    store.close()
