from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from homeagent_core.builtin.cmd import split_command
from homeagent_sdk import ToolError

CMD = "homeagent_core.builtin.cmd"
ON = {"plugin.cmd.enabled": True, "plugin.cmd.allow_root": True}


async def test_cmd_run_is_refused_until_the_owner_enables_it(harness):
    h = await harness([CMD])
    message = await h.fails("cmd_run", command="echo hi")
    assert "disabled" in message and "plugin.cmd.enabled" in message
    assert "plugin.cmd.enabled" in h.tools.get("cmd_run").description


async def test_cmd_run_executes_the_program_directly_and_reports_the_exit_code(harness):
    h = await harness([CMD], ON)
    out = await h.ok("cmd_run", command="echo 'a  b' $HOME")
    assert "a  b $HOME" in out  # quotes honoured, no shell expansion
    assert "[exit code 0" in out
    out = await h.ok("cmd_run", command=f"{sys.executable} -c 'import sys; sys.exit(3)'")
    assert "[exit code 3" in out


async def test_shell_operators_and_bad_quotes_are_refused_with_an_explanation(harness):
    h = await harness([CMD], ON)
    assert "without a shell" in await h.fails("cmd_run", command="ls | wc -l")
    assert "quotes" in await h.fails("cmd_run", command="echo 'unbalanced")
    assert "empty" in await h.fails("cmd_run", command="   ")
    assert "not found" in await h.fails("cmd_run", command="no-such-program-xyz")


async def test_output_over_the_cap_is_truncated_with_a_note(harness):
    h = await harness([CMD], {**ON, "plugin.cmd.max_output_bytes": 1000})
    out = await h.ok("cmd_run", command=f"{sys.executable} -c \"print('x' * 3_000_000)\"")
    assert "output truncated: showing the first 1000 of 3000001 bytes" in out
    assert out.count("x") <= 1000 + 10
    assert "[exit code 0" in out


async def test_a_timeout_kills_the_whole_process_group(harness, tmp_path: Path):
    h = await harness([CMD], ON)
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); "
        "time.sleep(60)"
    )
    out = await h.ok("cmd_run", command=f'{sys.executable} -c "{script}"', timeout=1.5)
    assert "timed out after 1500ms" in out and "process group was killed" in out
    grandchild = int(pidfile.read_text())
    assert await _gone(grandchild), "the grandchild survived the timeout"
    history = h.plugin("cmd").history
    assert history[-1].timed_out and history[-1].exit_code is None


async def test_workdir_is_confined_to_the_base_directory(harness, tmp_path: Path):
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    h = await harness([CMD], {**ON, "plugin.cmd.workdir": str(base)})
    out = await h.ok("cmd_run", command="pwd", workdir="sub")
    assert str((base / "sub").resolve()) in out
    assert "outside" in await h.fails("cmd_run", command="pwd", workdir="../")
    assert "outside" in await h.fails("cmd_run", command="pwd", workdir="/etc")
    assert "does not exist" in await h.fails("cmd_run", command="pwd", workdir="missing")


async def test_allow_and_deny_lists_are_enforced(harness):
    h = await harness([CMD], {**ON, "plugin.cmd.allow": "echo, true"})
    assert await h.ok("cmd_run", command="true")
    assert "allow list" in await h.fails("cmd_run", command="ls")
    h.config.set("plugin.cmd.allow", "")
    assert "deny list" in await h.fails("cmd_run", command="sudo ls")


async def test_invalid_arguments_get_clear_errors(harness):
    h = await harness([CMD], ON)
    assert "missing required argument 'command'" in await h.fails("cmd_run")
    assert "timeout must be positive" in await h.fails("cmd_run", command="true", timeout=-1)
    assert "above the maximum" in await h.fails("cmd_run", command="true", timeout=99999)


async def test_history_keeps_the_last_hundred_runs_newest_first(harness):
    h = await harness([CMD], ON)
    for i in range(103):
        h.plugin("cmd").history.append(_record(i))
    await h.ok("cmd_run", command="echo last")
    rows = json.loads(await h.ok("cmd_history", limit=200))
    assert len(rows) == 100 and rows[0]["command"] == "echo last"


async def _gone(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (absent or a zombie awaiting its reaper); bounded wait."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                return True
            if state in ("Z", "X"):
                return True
            await asyncio.sleep(0.01)


def _record(i: int):
    from homeagent_core.builtin.cmd import RunRecord

    return RunRecord(f"echo {i}", "/", 0, 0.0, 0.0, 2, False, False)


def test_split_command_honours_quotes_and_escapes():
    assert split_command('grep -n "a b" c\\ d') == ["grep", "-n", "a b", "c d"]
    with pytest.raises(ToolError):
        split_command("a && b")
