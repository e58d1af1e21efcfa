"""kill -9 inside ``doc_query``'s move from the document store to the context; nothing may be lost.

A real agent process (memory, kernel, the ``doc_query`` tool called by the model) is stopped
with SIGKILL at the exact point between the two steps of the move: just before the documents
are deleted from the store, and just after. The restarted agent must hold every document exactly
once, in the context or in the store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from homeagent_core.library import Agent
from homeagent_core.memory.documents.store import DocumentStore
from homeagent_sdk.testing import FakeModel

TOPICS = ["猫 咪咪 喜欢 晒太阳", "猫 咪咪 讨厌 洗澡", "猫 咪咪 三岁 了"]

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from homeagent_core.library import Agent
    from homeagent_core.memory.documents.store import DocumentStore
    from homeagent_sdk.testing import FakeModel, ToolCallReply

    data, when = sys.argv[1], sys.argv[2]
    original = DocumentStore.delete

    def delete(self, ids):
        ids = list(ids)
        if when == "before-delete":
            print("AT-FAULT", flush=True)
            time.sleep(600)
        count = original(self, ids)
        if when == "after-delete":
            print("AT-FAULT", flush=True)
            time.sleep(600)
        return count

    DocumentStore.delete = delete

    async def main():
        model = FakeModel([ToolCallReply("doc_query", {"query": "猫 咪咪", "top_k": 3}), "找到了"])
        async with Agent(data, provider=model, load_entrypoints=False, builtins=()) as agent:
            print("STARTED", flush=True)
            await agent.ask("我的猫叫什么？")
            print("ANSWERED", flush=True)

    asyncio.run(main())
    """
)


async def _seed(data: Path) -> list[str]:
    store = DocumentStore(data / "memory" / "documents.db")
    docs = [await store.add(text, source="context_archived", created_at=1_700_000_000.0 + i)
            for i, text in enumerate(TOPICS)]
    store.close()
    return [d.id for d in docs]


async def _run_until_fault(data: Path, when: str) -> str:
    script = data.parent / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(data), when,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    seen = []
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(120):
            while True:
                line = (await proc.stdout.readline()).decode().strip()
                if not line:
                    break
                seen.append(line)
                if line == "AT-FAULT":
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.stderr is not None
    assert "AT-FAULT" in seen, (seen, (await proc.stderr.read()).decode()[-3000:])
    assert proc.returncode == -signal.SIGKILL
    return "\n".join(seen)


@pytest.mark.parametrize("when", ["before-delete", "after-delete"])
async def test_documents_moved_by_doc_query_survive_a_kill_9_at_the_move_exactly_once(tmp_path: Path, when: str):
    data = tmp_path / "data"
    ids = await _seed(data)
    await _run_until_fault(data, when)

    async with Agent(data, provider=FakeModel(["ok"]), load_entrypoints=False, builtins=()) as agent:
        memory = agent.app.memory
        in_context = [e.meta.get("doc_id") for e in memory.context.events if e.kind == "cold_storage"]
        in_store = [d.id for d in memory.documents.all()]
        found = sorted(in_context + in_store)
        assert found == sorted(ids), f"context {in_context}, store {in_store}"
        texts = [e.input for e in memory.context.events if e.kind == "cold_storage"]
        texts += [d.content for d in memory.documents.all()]
        assert sorted(texts) == sorted(TOPICS)
