"""A flood against a real ``homeagent serve``: a full input queue is explicit backpressure everywhere.

One turn is held in flight at the loopback model, the queue (256) is filled over HTTP, and every
way in is then tried: ``POST /api/v1/chat`` and ``/v1/chat/completions`` (plain and streaming)
answer 503 with ``Retry-After``, ``homeagent ask`` exits 3 with a one-line error, and the
daemon's log has no traceback. Every accepted message is answered once the model lets go.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
from served import API_KEY, configure, fake_model, served

FLOOD = 300
CAPACITY = 256


async def test_a_flood_gets_503_with_retry_after_and_no_traceback_on_every_entry_point(tmp_path: Path):
    async with fake_model() as (model, model_url):
        data = configure(tmp_path / "data", model_url)
        async with served(data) as daemon:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=50)
            async with daemon.client(timeout=300, limits=limits) as client:
                model.gate.clear()
                first = asyncio.create_task(client.post("/api/v1/chat", json={"message": "hold the line"}))
                async with asyncio.timeout(60):
                    await model.arrived.wait()  # one turn in flight, the queue is empty

                async def send(i: int) -> httpx.Response:
                    return await client.post("/api/v1/chat", json={"message": f"flood message {i}"})

                tasks = [asyncio.create_task(send(i)) for i in range(FLOOD)]
                async with asyncio.timeout(120):
                    while True:  # the rejected ones come back at once; the accepted ones wait
                        done = [t for t in tasks if t.done()]
                        if len(done) >= FLOOD - CAPACITY:
                            break
                        await asyncio.sleep(0.05)
                rejected = [t.result() for t in tasks if t.done()]
                assert {r.status_code for r in rejected} == {503}, [r.text for r in rejected][:3]
                sample = rejected[0]
                assert int(sample.headers["Retry-After"]) >= 1
                assert "input queue is full" in sample.json()["error"]
                assert sample.json()["retry_after"] == int(sample.headers["Retry-After"])

                # OpenAI-compatible endpoint, plain and streaming: 503 before any stream starts.
                body = {"model": "homeagent", "messages": [{"role": "user", "content": "are you there?"}]}
                plain = await client.post("/v1/chat/completions", json=body)
                assert plain.status_code == 503 and int(plain.headers["Retry-After"]) >= 1
                assert "input queue is full" in plain.json()["error"]["message"]
                streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
                assert streamed.status_code == 503 and "Retry-After" in streamed.headers

                # The terminal client: a clear one-line error and exit code 3.
                ask = await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-m", "homeagent_core.cli", "ask", "--data", str(data), "hello from the shell"],
                    capture_output=True, text=True, timeout=120,
                    env={**os.environ, "PYTHONPATH": os.getcwd(), "HOMEAGENT_CLI_KEY": API_KEY},
                )
                assert ask.returncode == 3, (ask.stdout, ask.stderr)
                assert "input queue is full" in ask.stderr and "Traceback" not in ask.stderr

                model.gate.set()
                responses = [await first, *await asyncio.gather(*tasks)]
            statuses = Counter(r.status_code for r in responses)
            assert statuses == {200: CAPACITY + 1, 503: FLOOD - CAPACITY}, statuses
            answered = {r.json()["response"] for r in responses if r.status_code == 200}
            assert "echo: hold the line" in answered and len(answered) == CAPACITY + 1
            await daemon.kill9()
            assert "Traceback" not in daemon.log, daemon.log[-4000:]
            assert "input queue full" in daemon.log  # logged once, as one line
