"""Out-of-process plugins that die quietly: closed stdout, blocked loop, escaped grandchildren,
stderr floods, give-up status and a stop racing a restart — real subprocesses, asyncio and uvloop."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import os
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from test_proc import Harness, install_raw, run_tool

from homeagent_core.plugins.supervisor import Supervisor

LOOPS = ["asyncio", "uvloop"]


def run_on(loop: str, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` on a fresh event loop of the given kind (the daemon runs on uvloop)."""
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(scenario())
    else:
        asyncio.run(scenario())


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] in (b"Z", b"X")


async def until(check: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Wait (bounded) until ``check()`` holds."""
    async with asyncio.timeout(limit):
        while not check():
            await asyncio.sleep(0.02)
    assert check(), what


@pytest.mark.parametrize("loop", LOOPS)
def test_a_plugin_that_closes_stdout_but_lives_on_is_a_crash(tmp_path: Path, loop: str) -> None:
    async def scenario() -> None:
        install_raw(tmp_path)
        harness = Harness(tmp_path)
        try:
            plugin = await harness.start()  # the pipe must tell, long before the first ping
            assert plugin.conn is not None
            pid = plugin.conn.pid
            call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how="close_stdout"))
            crashed = await harness.event("plugin_crashed")
            assert "closed its stdout" in crashed["error"]
            await until(lambda: gone(pid), "the plugin process is killed")
            await harness.event("plugin_restarted")
            assert (await run_tool(plugin, "raw_echo", text="back")).result == "back"
            assert not (await call).success
        finally:
            await harness.close()

    run_on(loop, scenario)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_plugin_whose_loop_is_blocked_misses_the_ping_and_counts_as_crashed(tmp_path: Path, loop: str) -> None:
    async def scenario() -> None:
        install_raw(tmp_path)
        harness = Harness(tmp_path)
        try:
            plugin = await harness.start(ping_interval=0.1, ping_timeout=0.5)
            assert plugin.conn is not None
            pid = plugin.conn.pid
            call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how="block"))
            crashed = await harness.event("plugin_crashed")
            assert "plugin.ping" in crashed["error"] and crashed["crash_count"] == 1
            result = await asyncio.wait_for(call, 10)
            assert not result.success and "插件进程已退出" in result.result
            await until(lambda: gone(pid), "the blocked process is killed")
            await harness.event("plugin_restarted")
        finally:
            await harness.close()

    run_on(loop, scenario)


SDK_CHILD = """
import time

from homeagent_sdk import hookimpl
from homeagent_sdk.proc import serve
from homeagent_sdk.types import ToolDef


async def freeze() -> str:
    time.sleep(120)  # blocks the plugin's event loop
    return "never"


def crunch() -> str:
    time.sleep(1.5)  # a sync tool: runs in a worker thread, the loop stays free
    return "crunched"


class Sleepy:
    name = "sleepy"

    @hookimpl
    def register_tools(self, registry):
        registry.add(ToolDef(name="freeze", description="block the loop", handler=freeze))
        registry.add(ToolDef(name="crunch", description="busy in a thread", handler=crunch))


serve(Sleepy())
"""


def install_sdk_child(data_dir: Path) -> None:
    folder = data_dir / "plugins" / "sleepy"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({"name": "sleepy", "version": "1.0.0", "entry": "plugin.bin"}))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + SDK_CHILD)
    entry.chmod(0o755)


async def test_the_sdk_answers_pings_from_its_loop_busy_threads_pass_a_blocked_loop_does_not(
    tmp_path: Path,
) -> None:
    install_sdk_child(tmp_path)
    harness = Harness(tmp_path)
    try:
        plugin = await harness.start("sleepy", ping_interval=0.1, ping_timeout=1.0)
        busy = await run_tool(plugin, "crunch")
        assert busy.success and busy.result == "crunched"
        assert harness.supervisor.crash_count("sleepy") == 0
        frozen = await run_tool(plugin, "freeze")
        assert not frozen.success
        crashed = await harness.event("plugin_crashed")
        assert "plugin.ping" in crashed["error"]
    finally:
        await harness.close()


async def test_a_call_left_unanswered_pings_at_once_and_a_blocked_loop_is_a_crash(tmp_path: Path) -> None:
    """The next ping round is far away (60 s): the tool call that timed out asks right away,
    so a plugin whose loop hangs is not left "started" behind timeout after timeout."""
    install_sdk_child(tmp_path)
    harness = Harness(tmp_path)
    try:
        plugin = await harness.start("sleepy", ping_interval=60.0, ping_timeout=1.0)
        assert (await run_tool(plugin, "crunch")).success
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run_tool(plugin, "freeze"), 0.5)  # the kernel's tool timeout, in short
        crashed = await harness.event("plugin_crashed")
        assert "did not answer plugin.ping within 1 s" in crashed["error"]
        await harness.event("plugin_restarted")
        assert (await run_tool(plugin, "crunch")).success
    finally:
        await harness.close()


async def test_an_answer_over_the_frame_cap_is_a_tool_error_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_raw(tmp_path)
    caplog.set_level(logging.INFO)
    harness = Harness(tmp_path)
    try:
        plugin = await harness.start()
        result = await run_tool(plugin, "raw_big", size=17 * 1024 * 1024)  # over the 16 MiB frame cap
        assert not result.success and "frame cap" in result.result and "plugin raw" in result.result
        assert (await run_tool(plugin, "raw_echo", text="still here")).result == "still here"
        assert harness.supervisor.crash_count("raw") == 0
    finally:
        await harness.close()
    assert not [r for r in caplog.records if r.exc_info], "an oversized answer logged a traceback"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_setsid_grandchild_dies_with_its_crashed_plugin(tmp_path: Path, loop: str) -> None:
    async def scenario() -> None:
        plugin_dir = install_raw(tmp_path)
        harness = Harness(tmp_path)
        try:
            plugin = await harness.start()
            call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how="setsid"))
            await harness.event("plugin_crashed")
            assert not (await asyncio.wait_for(call, 10)).success
            grandchild = int((plugin_dir / "grandchild.pid").read_text())
            await until(lambda: gone(grandchild), "the setsid grandchild is killed")
        finally:
            await harness.close()

    run_on(loop, scenario)


async def test_a_setsid_grandchild_dies_when_the_daemon_stops_its_plugins(tmp_path: Path) -> None:
    plugin_dir = install_raw(tmp_path)
    harness = Harness(tmp_path)
    plugin = await harness.start()
    result = await run_tool(plugin, "raw_crash", how="setsid_keep")
    assert result.result == "still alive"
    grandchild = int((plugin_dir / "grandchild.pid").read_text())
    assert not gone(grandchild)
    await harness.close()  # the daemon's shutdown path: stop_all
    await until(lambda: gone(grandchild), "the setsid grandchild is killed on stop")


async def test_a_stderr_flood_is_rate_limited_and_long_lines_are_cut(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="homeagent.plugin.raw")
    install_raw(harness.data_dir)
    plugin = await harness.start()
    assert (await run_tool(plugin, "raw_crash", how="spam")).result == "still alive"
    await plugin.stop()  # the process is gone and its pipe read to the end
    lines = [r for r in caplog.records if r.name == "homeagent.plugin.raw"]
    assert len(lines) < 2000, f"{len(lines)} of 20000 flood lines were logged"
    assert any("stderr lines suppressed" in r.getMessage() for r in lines)
    assert max(len(r.getMessage()) for r in lines) < 2200


async def test_a_stop_during_a_pending_restart_is_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin_dir = install_raw(tmp_path)
    harness = Harness(tmp_path)
    try:
        plugin = await harness.start(stop_grace=0.5)
        assert plugin.conn is not None
        first = plugin.conn
        (plugin_dir / "hang_handshake").write_text("")  # the restart will hang in its handshake
        call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how="exit"))
        await harness.event("plugin_crashed")
        assert not (await asyncio.wait_for(call, 10)).success
        await until(lambda: plugin.conn is not first and plugin.conn is not None, "the restart spawned a process")
        assert plugin.conn is not None
        pid = plugin.conn.pid
        caplog.clear()
        await plugin.stop()
        for _ in range(50):  # let anything still running on the loop finish its step
            await asyncio.sleep(0)
        assert plugin.status == "stopped"
        assert harness.supervisor.crash_count("raw") == 1
        assert not [r for r in caplog.records if "crashed" in r.getMessage()]
        assert gone(pid)
    finally:
        await harness.close()


@pytest.fixture
async def harness(tmp_path: Path) -> Any:
    h = Harness(tmp_path)
    yield h
    await h.close()


def test_the_liveness_ping_is_in_the_protocol_document() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
    assert "`plugin.ping`" in doc


def children() -> set[int]:
    """This process's children (running or zombie: a child nobody waited for is still listed)."""
    me, found = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        if int(stat[stat.rindex(b")") + 2 :].split()[1]) == me:
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("loop", LOOPS)
def test_a_stop_at_any_point_of_the_restart_leaves_no_process_and_no_open_pipe(tmp_path: Path, loop: str) -> None:
    """The stop lands at every step of the restart in turn (sleeping, spawning, connecting the
    pipes, handshaking): every process is reaped and every pipe closed by the time it returns."""
    install_raw(tmp_path)
    before = children()

    async def scenario(steps: int) -> None:
        harness = Harness(tmp_path)
        harness.supervisor = Supervisor(backoff=(0.0, 0.0, 0.0))
        try:
            plugin = await harness.start()
            call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how="exit"))
            await harness.event("plugin_crashed")
            for _ in range(steps):
                await asyncio.sleep(0)
            await plugin.stop()
            assert plugin.status == "stopped"
            assert plugin.conn is None or not plugin.conn.alive
            await call
        finally:
            await harness.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for steps in range(0, 24, 2):
            run_on(loop, functools.partial(scenario, steps))
            gc.collect()
            assert children() <= before, f"stopped {steps} loop steps into the restart: a process was not reaped"
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, leaks
