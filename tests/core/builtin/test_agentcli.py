from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from homeagent_core.builtin.agentcli import BUFFER_BYTES, strip_ansi

AGENTCLI = "homeagent_core.builtin.agentcli"
ON = {"plugin.agentcli.enabled": True}
PY = sys.executable


async def read_until(h, term_id: str, needle: str, timeout: float = 10.0) -> str:
    """Accumulate term_read output until ``needle`` shows up (bounded)."""
    seen = ""
    async with asyncio.timeout(timeout):
        while needle not in seen:
            seen += await h.ok("term_read", term_id=term_id, wait=1)
    return seen


async def _gone(pid: int, timeout: float = 5.0) -> bool:
    async with asyncio.timeout(timeout):
        while True:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                return True
            if state in ("Z", "X"):
                return True
            await asyncio.sleep(0.01)


async def test_sessions_are_refused_until_enabled(harness):
    h = await harness([AGENTCLI])
    assert "plugin.agentcli.enabled" in await h.fails("term_start", command="sh")


async def test_a_session_runs_on_a_real_pty_and_echoes_typed_commands(harness):
    h = await harness([AGENTCLI], ON)
    started = await h.ok("term_start", command="sh")
    assert started.startswith("term_1 started: sh")
    await h.ok("term_send", term_id="term_1", text=f"{PY} -c 'import sys; print(\"tty\", sys.stdin.isatty())'")
    assert "tty True" in await read_until(h, "term_1", "tty True")
    await h.ok("term_send", term_id="term_1", text="echo $((6*7))")
    assert "42" in await read_until(h, "term_1", "42")
    await h.ok("term_resize", term_id="term_1", cols=100, rows=40)
    await h.ok("term_send", term_id="term_1", text="stty size")
    assert "40 100" in await read_until(h, "term_1", "40 100")
    (row,) = json.loads(await h.ok("term_list"))
    assert row["id"] == "term_1" and row["state"] == "running"
    pid = row["pid"]
    assert (await h.ok("term_stop", term_id="term_1")).startswith("term_1 stopped")
    assert await _gone(pid)
    assert "no terminal 'term_1'" in await h.fails("term_read", term_id="term_1")


async def test_new_output_is_announced_in_batches_on_the_agentcli_channel_without_memory(harness):
    quiet = {"plugin.agentcli.notify_bytes": 4096, "plugin.agentcli.notify_interval": "100ms"}
    h = await harness([AGENTCLI], {**ON, **quiet})
    submitted = []
    submit = h.kernel.submit
    h.kernel.submit = lambda item: submitted.append(item) or submit(item)
    await h.ok("term_start", command=f"{PY} -c \"print('small'); import time; time.sleep(30)\"")
    (notice,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "agentcli")
    assert notice.data["source"] == "agentcli"
    assert notice.data["text"].startswith("[term_1] ") and "term_read" in notice.data["text"]
    assert "Last line: small" in notice.data["text"]
    assert all(item.no_memory for item in submitted if item.channel == "agentcli")
    (event,) = await h.wait_event("terminal_output")
    assert event.data["id"] == "term_1"


async def test_a_burst_over_notify_bytes_is_announced_without_waiting_for_the_interval(harness):
    h = await harness([AGENTCLI], {**ON, "plugin.agentcli.notify_bytes": 64, "plugin.agentcli.notify_interval": "1h"})
    await h.ok("term_start", command=f"{PY} -c \"print('y' * 500); import time; time.sleep(30)\"")
    (notice,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "agentcli")
    assert "new bytes of output" in notice.data["text"]


async def test_a_session_ends_after_its_lifetime_and_its_process_group_is_killed(harness):
    h = await harness([AGENTCLI], ON)
    await h.ok("term_start", command="sleep 60", lifetime="300ms")
    pid = json.loads(await h.ok("term_list"))[0]["pid"]
    await h.wait_event("raw_input", lambda e: "lifetime" in e.data["text"])
    assert await _gone(pid)
    assert json.loads(await h.ok("term_list"))[0]["state"].startswith("exited")
    assert "has ended" in await h.fails("term_send", term_id="term_1", text="x")


async def test_program_exit_is_announced_and_output_stays_readable(harness):
    h = await harness([AGENTCLI], ON)
    await h.ok("term_start", command=f"{PY} -c \"print('bye'); raise SystemExit(3)\"")
    await h.wait_event("raw_input", lambda e: "exited with code 3" in e.data["text"])
    out = await h.ok("term_read", term_id="term_1")
    assert "bye" in out and "[exited (3)]" in out


async def test_the_ring_buffer_drops_old_output_with_a_note(harness):
    h = await harness([AGENTCLI], ON)
    await h.ok("term_start", command=f"{PY} -c \"print('x' * 300000); print('END')\"")
    await h.wait_event("raw_input", lambda e: "exited with code 0" in e.data["text"])
    out = await h.ok("term_read", term_id="term_1", max_bytes=BUFFER_BYTES)
    lines = out.splitlines()
    assert "older bytes were dropped" in lines[0]
    assert lines[-2:] == ["END", "[exited (0)]"]
    assert len(out) < BUFFER_BYTES + 200


async def test_bad_arguments_and_limits_get_clear_errors(harness):
    h = await harness([AGENTCLI], {**ON, "plugin.agentcli.max_sessions": 1})
    assert "not found" in await h.fails("term_start", command="no-such-program-xyz")
    assert "quotes" in await h.fails("term_start", command="sh -c 'oops")
    assert "lifetime must be" in await h.fails("term_start", command="sh", lifetime="48h")
    assert "cols must be" in await h.fails("term_start", command="sh", cols=3)
    await h.ok("term_start", command="sleep 30")
    assert "already open" in await h.fails("term_start", command="sleep 30")
    assert "wait must be" in await h.fails("term_read", term_id="term_1", wait=99)
    assert "no terminal 'term_9'" in await h.fails("term_send", term_id="term_9", text="x")


def test_strip_ansi_removes_escape_sequences_and_carriage_returns():
    assert strip_ansi("\x1b[1;32mgreen\x1b[0m\r\nnext\rover") == "green\nover"
    assert strip_ansi("\x1b]0;title\x07prompt$ ") == "prompt$ "
