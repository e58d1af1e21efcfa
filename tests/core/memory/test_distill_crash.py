"""kill -9 right after a reply: the facts the user said in that turn are already in the graph."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from homeagent_core.library import Agent
from homeagent_sdk.testing import FakeModel

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from homeagent_core.library import Agent
    from homeagent_sdk.testing import FakeModel

    async def main():
        async with Agent(sys.argv[1], provider=FakeModel(["记住了"]), load_entrypoints=False, builtins=()) as agent:
            await agent.ask("我叫小王，我住在杭州")
            print("ANSWERED", flush=True)
            time.sleep(600)

    asyncio.run(main())
    """
)


async def test_facts_said_in_an_answered_turn_are_distilled_after_a_kill_9(tmp_path: Path):
    data = tmp_path / "data"
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(data),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(120):
            line = await proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.stderr is not None
    assert line.strip() == b"ANSWERED", (await proc.stderr.read()).decode()[-3000:]

    async with Agent(data, provider=FakeModel(["ok"]), load_entrypoints=False, builtins=()) as agent:
        memory = agent.app.memory
        # distilled with the turn itself, before the reply: nothing left pending, nothing lost
        assert len(memory.distiller) == 0
        assert memory.graph.cache.entity("小王") is not None and memory.graph.cache.entity("杭州") is not None
        report = await memory.distiller.adistill_once()
        assert report.records == 0 and report.triples == 0
