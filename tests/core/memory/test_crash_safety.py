"""kill -9 a writer mid-stream; everything it acknowledged must be there after reopening."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

from homeagent_core.memory.documents import DocumentStore
from homeagent_core.memory.textlog import TextLog

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from homeagent_core.memory.documents import DocumentStore
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
    hits = await store.query("document about topic 7", 50, touch=False)
    assert hits and all("topic" in h.document.content for h in hits)
    store.close()
