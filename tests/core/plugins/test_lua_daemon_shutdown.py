"""A Lua tool that tries to run forever neither wedges the daemon nor blocks its shutdown.

Real parts: ``homeagent serve`` as a subprocess, a Lua plugin in its data directory,
``homeagent ask`` over the daemon's socket, and a loopback server speaking the OpenAI Chat
Completions wire format (the model asks for the plugin's tool, then answers in text).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app

WEDGE = """
return {
  name = "wedge",
  start = function(sdk)
    sdk.register_tool("spin", { description = "Never ends.", parameters = { type = "object", properties = {} } },
      function(args)
        sdk.http.get("@SIGNAL@")
        -- the error object's __tostring used to run after the instruction hook was removed
        error(setmetatable({}, { __tostring = function() while true do end end }))
      end)
  end,
}
"""
#: The tool is still running at SIGTERM: it waits in a host function (an HTTP request that the
#: loopback server holds open), where no instruction hook can stop it.
HANG = WEDGE.replace('sdk.http.get("@SIGNAL@")', 'sdk.http.get("@SIGNAL@/hang")')


class FakeModel(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a tool call to ``spin`` first, plain text once it ran."""

    spinning = threading.Event()
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # the tool's signal that it is running
        FakeModel.spinning.set()
        if self.path.endswith("/hang"):
            FakeModel.release.wait(120)
        self._send(200, "application/json", b"{}")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        ran = any(m.get("role") == "tool" for m in body.get("messages", []))
        delta: dict[str, Any] = {"role": "assistant", "content": "done"} if ran else {
            "role": "assistant", "content": None,
            "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "spin", "arguments": "{}"}}]}
        finish = "stop" if ran else "tool_calls"
        base = {"id": "chatcmpl-1", "created": 1, "model": body.get("model", "m")}
        if body.get("stream"):
            frames = [
                {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                          "finish_reason": None}]},
                {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {},
                                                                          "finish_reason": finish}]},
            ]
            out = b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames) + b"data: [DONE]\n\n"
            self._send(200, "text/event-stream", out)
            return
        message = {k: v for k, v in delta.items() if k != "tool_calls"}
        if not ran:
            message["tool_calls"] = [{k: v for k, v in tc.items() if k != "index"} for tc in delta["tool_calls"]]
        reply = {**base, "object": "chat.completion",
                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(200, "application/json", json.dumps(reply).encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("script", [WEDGE, HANG], ids=["tostring-loop", "blocked-in-host-call"])
def test_sigterm_stops_the_daemon_while_a_lua_tool_tries_to_spin(tmp_path: Path, script: str) -> None:
    FakeModel.spinning.clear()
    FakeModel.release.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    data = tmp_path / "served"
    runner = CliRunner()
    for key, value in {
        "core.llm.provider": "local",
        "core.llm.sources.local.base_url": base + "/v1",
        "core.llm.sources.local.model": "m",
        "core.llm.sources.local.adapter": "openai",
        "core.llm.sources.local.api_key": "local",
    }.items():
        result = runner.invoke(app, ["config", "set", key, value, "--data", str(data)])
        assert result.exit_code == 0, result.output
    plugin = data / "plugins" / "wedge"
    plugin.mkdir(parents=True)
    manifest = {"name": "wedge", "version": "1.0.0", "entry": "main.lua", "capabilities": ["http"]}
    (plugin / "plugin.json").write_text(json.dumps(manifest), encoding="utf-8")
    (plugin / "main.lua").write_text(script.replace("@SIGNAL@", base + "/spinning"), encoding="utf-8")
    env = {**os.environ, "HOMEAGENT_LOAD_PLUGINS": ""}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    ask = None
    lines: list[str] = []
    try:
        assert daemon.stdout is not None
        for line in daemon.stdout:
            lines.append(line)
            if "HomeAgent running" in line:
                break
        ask = subprocess.Popen(
            [sys.executable, "-m", "homeagent_core.cli", "ask", "spin please", "--data", str(data), "--timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        assert FakeModel.spinning.wait(60), "the Lua tool was never called:\n" + "".join(lines)
        daemon.send_signal(signal.SIGTERM)
        rest, _ = daemon.communicate(timeout=30)
    finally:
        for proc in (daemon, ask):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate(timeout=30)
        FakeModel.release.set()
        server.shutdown()
        server.server_close()
    assert daemon.returncode == 0, "".join(lines) + rest
    assert "stopped" in rest
