"""kill -9 right after a reply: the working context still shows the last turns after a restart."""

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
        model = FakeModel(["你好，小王", "记住了，是咪咪"])
        async with Agent(sys.argv[1], provider=model, load_entrypoints=False, builtins=()) as agent:
            await agent.ask("我叫小王")
            await agent.ask("我的猫叫咪咪")
            print("ANSWERED", flush=True)
            time.sleep(600)

    asyncio.run(main())
    """
)


async def test_turns_answered_just_before_a_kill_9_are_back_in_the_context(tmp_path: Path):
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

    model = FakeModel(["你的猫叫咪咪"])
    async with Agent(data, provider=model, load_entrypoints=False, builtins=()) as agent:
        events = [(e.kind, e.text) for e in agent.app.memory.context.events]
        assert events == [("user", "我叫小王"), ("agent", "你好，小王"), ("user", "我的猫叫咪咪"),
                          ("agent", "记住了，是咪咪")]
        await agent.ask("我的猫叫什么？")
    contents = [m["content"] for m in model.requests[-1]["messages"]]
    assert "我的猫叫咪咪" in contents and "记住了，是咪咪" in contents

    async with Agent(data, provider=FakeModel(["ok"]), load_entrypoints=False, builtins=()) as agent:
        texts = [e.text for e in agent.app.memory.context.events]
        assert texts.count("我的猫叫咪咪") == 1  # restored once, not again at the next start
