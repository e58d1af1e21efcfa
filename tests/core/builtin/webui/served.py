"""A real ``homeagent serve`` subprocess talking to a loopback OpenAI-compatible model.

:class:`FakeChatServer` speaks the Chat Completions wire format (JSON and SSE streaming) on
127.0.0.1 and answers ``echo: <last user message>``; closing its ``gate`` holds every request
until it opens again, so a test can keep one turn in flight and fill the input queue.
:func:`served` starts the daemon over a data directory configured to use that model, with the
web UI on a free port and a known API key, and kills it (SIGKILL) on exit unless it already ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from homeagent_core.config import ConfigStore
from homeagent_core.datadir import prepare_data_dir

API_KEY = "served-test-key-0123456789"
_URL = re.compile(r"web UI on (http://\S+?)/?$")


class FakeChatServer:
    """OpenAI-compatible ``/v1/chat/completions`` answering ``echo: <last user text>``."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.received = 0
        self.arrived = asyncio.Event()

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.completions, methods=["POST"]),
            Route("/chat/completions", self.completions, methods=["POST"]),
        ])

    async def completions(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.received += 1
        self.arrived.set()
        await self.gate.wait()
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = users[-1]["content"] if users else ""
        if isinstance(last, list):
            last = "".join(p.get("text", "") for p in last if isinstance(p, dict))
        text = f"echo: {last}"
        base = {"id": "chatcmpl-1", "created": int(time.time()), "model": body.get("model", "m")}
        if not body.get("stream"):
            return Response(orjson.dumps({
                **base, "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }), media_type="application/json")

        async def frames() -> AsyncIterator[bytes]:
            steps = (({"role": "assistant", "content": ""}, None), ({"content": text}, None), ({}, "stop"))
            for delta, finish in steps:
                chunk = {**base, "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")


def configure(data: Path, model_url: str) -> Path:
    """Prepare ``data`` so the daemon's only LLM source is the loopback model."""
    data = prepare_data_dir(data)
    config = ConfigStore(data / "config.db")
    try:
        for key, value in {
            "core.llm.provider": "loopback",
            "core.llm.sources.loopback.base_url": f"{model_url}/v1",
            "core.llm.sources.loopback.model": "echo",
            "core.llm.sources.loopback.adapter": "openai",
            "core.llm.sources.loopback.api_key": "sk-loopback",
        }.items():
            config.set(key, value)
    finally:
        config.close()
    return data


@dataclass
class Served:
    """A running daemon: its process, web UI URL and everything it printed."""

    proc: asyncio.subprocess.Process
    url: str
    data: Path
    output: list[str] = field(default_factory=list)
    _reader: asyncio.Task[None] | None = None

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"X-API-Key": API_KEY}, **kwargs)

    async def kill9(self) -> None:
        """SIGKILL the daemon (no shutdown code runs) and collect the rest of its output."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await self._reader

    @property
    def log(self) -> str:
        """Everything the daemon printed plus its log file."""
        path = self.data / "log" / "homeagent.log"
        return "".join(self.output) + (path.read_text(encoding="utf-8", errors="replace") if path.exists() else "")


@contextlib.asynccontextmanager
async def served(data: Path) -> AsyncIterator[Served]:
    """``homeagent serve --data DATA --port 0`` until the block ends (then SIGKILL if still alive)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "HOMEAGENT_WEBUI_API_KEY": API_KEY,
           "HOMEAGENT_LOAD_PLUGINS": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0",
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    assert proc.stdout is not None
    output: list[str] = []
    url = ""
    try:
        async with asyncio.timeout(120):
            while not url:
                line = (await proc.stdout.readline()).decode("utf-8", "replace")
                if not line:
                    raise AssertionError("homeagent serve ended before the web UI started:\n" + "".join(output))
                output.append(line)
                match = _URL.search(line.strip())
                if match:
                    url = match.group(1)

        async def pump() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                output.append(raw.decode("utf-8", "replace"))

        daemon = Served(proc, url, data, output)
        daemon._reader = asyncio.get_running_loop().create_task(pump())
        yield daemon
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()


@contextlib.asynccontextmanager
async def fake_model() -> AsyncIterator[tuple[FakeChatServer, str]]:
    """The loopback model server (uvicorn in this event loop) and its base URL."""
    import uvicorn

    model = FakeChatServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(model.app(), lifespan="off", log_level="critical", access_log=False))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                await asyncio.sleep(0.01)  # bounded by the timeout above
        yield model, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        model.gate.set()
        server.should_exit = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await task
        sock.close()
