"""A proc plugin written against the wire protocol only: stdlib, no HomeAgent import.

It proves the protocol in docs/PROTOCOL.md is enough to write a plugin in any language, and
it is the crash-test subject: its ``raw_crash`` tool dies in the way it is asked to.
``behaviour.json`` in the plugin directory (its working directory) can change the protocol
version it claims, to test the handshake refusal; a file ``hang_handshake`` there makes it
never answer the handshake. It answers the liveness ``plugin.ping`` from its one thread, so a
tool that blocks (``raw_crash`` with ``block``) also stops the answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

PROTOCOL = 3
_out = sys.stdout.buffer
_in = sys.stdin.buffer
_next_id = 0
_queued: list[dict[str, Any]] = []


def log(text: str) -> None:
    sys.stderr.write(f"[raw] {text}\n")
    sys.stderr.flush()


def send(frame: dict[str, Any]) -> None:
    _out.write(json.dumps(frame, ensure_ascii=False).encode("utf-8") + b"\n")
    _out.flush()


def read() -> dict[str, Any] | None:
    line = _in.readline()
    if not line:
        return None
    return json.loads(line)


def call(method: str, params: Any = None) -> tuple[Any, str]:
    """A blocking request to the host; requests arriving meanwhile are queued."""
    global _next_id
    _next_id += 1
    my_id = _next_id
    send({"id": my_id, "method": method, "params": params})
    while True:
        frame = read()
        if frame is None:
            sys.exit(0)
        if frame.get("method"):
            _queued.append(frame)
            continue
        if frame.get("id") == my_id:
            return frame.get("result"), frame.get("error") or ""


def behaviour() -> dict[str, Any]:
    try:
        with open("behaviour.json", encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


TOOLS = {
    "raw_echo": {
        "description": "Echo the text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    "raw_crash": {
        "description": "Die or misbehave: exit, kill, raise, garbage, grandchild, close_stdout, block, setsid, spam.",
        "parameters": {"type": "object", "properties": {"how": {"type": "string"}}, "required": ["how"]},
    },
    "raw_call": {
        "description": "Call a core method and report what came back.",
        "parameters": {
            "type": "object",
            "properties": {"method": {"type": "string"}, "params": {"type": "object"}},
            "required": ["method"],
        },
    },
    "raw_big": {
        "description": "Return a string of the given size.",
        "parameters": {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    },
}


def crash(how: str) -> None:
    if how == "exit":
        sys.stderr.write("[raw] exiting on purpose\n")
        sys.exit(7)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "raise":
        raise RuntimeError("unhandled failure inside the raw plugin")
    if how == "garbage":
        _out.write(b"this is not json\n")
        _out.flush()
        return
    if how == "grandchild":
        subprocess.Popen(["sleep", "60"], stdout=_out.fileno(), stdin=subprocess.DEVNULL)
        os._exit(5)
    if how == "close_stdout":  # alive, but the protocol channel is gone
        os.close(_out.fileno())
        time.sleep(120)
    if how == "block":  # alive, stdout open, but nothing is read or answered any more
        time.sleep(120)
    if how in ("setsid", "setsid_keep"):  # a grandchild in its own session, detached from every pipe
        pid = subprocess.Popen(
            ["setsid", "sleep", "120"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).pid
        with open("grandchild.pid", "w", encoding="utf-8") as fh:
            fh.write(str(pid))
        if how == "setsid":
            os._exit(6)
    if how == "spam":  # a flood of stderr lines, some very long
        for n in range(20000):
            sys.stderr.write(f"[raw] spam line {n} " + ("x" * (50000 if n % 1000 == 0 else 10)) + "\n")
        sys.stderr.flush()


def handle(frame: dict[str, Any]) -> None:
    method, call_id, params = frame.get("method"), frame.get("id") or 0, frame.get("params") or {}

    def reply(result: Any = None, error: str = "") -> None:
        if call_id:
            send({"id": call_id, "error": error} if error else {"id": call_id, "result": result})

    if method == "handshake":
        if os.path.exists("hang_handshake"):  # a start that never completes
            time.sleep(120)
        claimed = behaviour().get("protocol", PROTOCOL)
        if params.get("protocol") != claimed:
            reply(error=f"协议版本不匹配（内核 {params.get('protocol')}，插件 {claimed}）")
            sys.exit(3)
        reply(
            {"protocol": claimed, "sdk_version": "raw-1", "plugin_name": params.get("plugin_name"), "pid": os.getpid()}
        )
    elif method == "plugin.init":
        reply(None)
    elif method == "plugin.start":
        for name, definition in TOOLS.items():
            _, error = call("tool.register", {"name": name, "def": {"name": name, **definition}})
            if error:
                log(f"tool.register {name}: {error}")
        call("stage.register", {"stage": "before_output", "scope": "global"})
        call("output.register", {"name": "raw_out", "caps": 1, "desc": "writes to sent.log", "def": {}})
        call("lifecycle.autoRestart", {"enabled": True})
        reply(None)
    elif method == "plugin.ping":
        reply({})
    elif method == "plugin.stop":
        reply(None)
        sys.exit(0)
    elif method == "tool.invoke":
        name, args = params.get("name"), params.get("args") or {}
        if name == "raw_echo":
            reply({"result": args.get("text", "")})
        elif name == "raw_crash":
            crash(args.get("how", ""))
            reply({"result": "still alive"})
        elif name == "raw_call":
            result, error = call(args["method"], args.get("params") or {})
            reply({"result": json.dumps({"result": result, "error": error}, ensure_ascii=False)})
        elif name == "raw_big":
            reply({"result": "x" * int(args.get("size", 0))})
        else:
            reply(error=f"未注册的工具: {name}")
    elif method == "stage.invoke":
        ctx = params.get("ctx") or {}
        reply({"changed": {"final_text": f"{ctx.get('final_text', '')} [raw]"}})
    elif method == "output.invoke":
        args = params.get("args") or {}
        with open("sent.log", "a", encoding="utf-8") as fh:
            fh.write(f"{args.get('type')}:{args.get('payload')}\n")
        reply({"status": "sent"})
    else:
        reply(error=f"未实现的 method: {method}")


def main() -> None:
    while True:
        frame = _queued.pop(0) if _queued else read()
        if frame is None:
            return
        if frame.get("method"):
            handle(frame)


if __name__ == "__main__":
    main()
