"""A real home daemon and a real node process (separate data dirs) on loopback, end to end.

Pair, join, the model calls ``node_lap_status`` and ``node_lap_notify`` in a ``/v1`` turn, ``run``
asks the owner and runs after approval, the node is killed and its tools go, it comes back by
itself (after its own restart and after the daemon's), a second node of the same name is refused,
and revoking cuts it off with a clear message.
"""

from __future__ import annotations

import json
import re
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from nodes_procs import Proc, ask, cli, configure, free_port, node_serve, nodes_list, serve, until
from openai_loopback import openai_loopback

NOTIFIER = """import sys, pathlib
pathlib.Path(sys.argv[1]).open("a").write(sys.argv[2] + ": " + sys.argv[3] + "\\n")
"""


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in reversed(started):
        proc.stop(signal.SIGKILL)


def offered_tools(requests: list[dict[str, object]]) -> set[str]:
    tools = requests[-1].get("tools") or []
    assert isinstance(tools, list)
    return {t["function"]["name"] for t in tools}


def enable(folder: Path, notes: Path, marker: Path) -> None:
    """The device owner's node.json: notify through a script, one run command, a files sandbox."""
    (folder / "notifier.py").write_text(NOTIFIER)
    config = json.loads((folder / "node.json").read_text())
    config["capabilities"]["notify"]["argv"] = [sys.executable, str(folder / "notifier.py"), str(notes),
                                                "{title}", "{text}"]
    config["capabilities"]["run"] = {
        "enabled": True,
        "commands": {
            "mark": {"argv": [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ran'); print('marked')"]},
            "echo": {"argv": [sys.executable, "-c", "print('silent one')"], "silent": True},
        },
    }
    config["capabilities"]["files"] = {"enabled": True, "folder": "sandbox"}
    config["plugins"] = ["node_plugin_caps:snap", "node_plugin_caps:hang", "node_plugin_caps:big"]
    config["capabilities"].update({"snap": {"enabled": True}, "hang": {"enabled": True}, "big": {"enabled": True}})
    (folder / "node.json").write_text(json.dumps(config))


@pytest.mark.timeout(600)
def test_pair_join_call_approve_kill_return_restart_and_revoke(tmp_path: Path, procs: list[Proc]) -> None:
    home, lap = tmp_path / "home", tmp_path / "lap"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    notes, marker = tmp_path / "notes.txt", tmp_path / "marker.txt"
    with openai_loopback() as model:
        configure(home, model.base_url)
        cli("config", "set", "plugin.nodes.call_timeout", "2s", "--data", str(home))
        procs.append(serve(home, port))

        # pairing: a one-time code, traded for a token kept 0600 in the node's own dir
        paired = json.loads(cli("nodes", "pair", "lap", "--json", "--data", str(home)).stdout)
        assert paired["name"] == "lap" and len(paired["code"]) == 9 and paired["join"].endswith(paired["code"])
        joined = cli("node", "join", url, paired["code"], "--data", str(lap))
        assert "as node lap" in joined.stdout
        assert stat.S_IMODE((lap / "token").stat().st_mode) == 0o600
        assert paired["code"] not in (lap / "node.json").read_text()
        again = cli("node", "join", url, paired["code"], "--data", str(tmp_path / "other"), check=False)
        assert again.returncode == 1 and "unknown or already used pairing code" in again.stderr
        twin = cli("nodes", "pair", "lap", "--data", str(home), check=False)
        assert twin.returncode == 1 and "already paired" in twin.stderr

        enable(lap, notes, marker)
        node = node_serve(lap)
        procs.append(node)
        node.wait_for("connected to")
        rows = nodes_list(home)
        assert [(r["name"], r["online"]) for r in rows] == [("lap", True)]
        assert set(rows[0]["capabilities"]) == {"status", "notify", "run", "files", "snap", "hang", "big"}

        # the model calls node_lap_status and node_lap_notify in one /v1 turn
        model.tool_rules["how is the laptop"] = [("node_lap_status", {}),
                                                 ("node_lap_notify", {"text": "dinner is ready", "title": "Home"})]
        reply = ask(url, "how is the laptop?")
        assert reply.startswith("tool results: "), reply
        status = json.loads(reply.removeprefix("tool results: ").split(" | ")[0])
        assert {"host", "os", "uptime_s", "disk", "battery"} <= set(status)
        assert "notification shown" in reply
        assert notes.read_text() == "Home: dinner is ready\n"
        assert {"node_lap_status", "node_lap_notify", "node_lap_run", "node_lap_files"} <= offered_tools(model.requests)

        # a third-party capability's image lands in the media store; calls time out; answers are capped
        model.tool_rules["take a picture"] = [("node_lap_snap", {})]
        picture = ask(url, "take a picture")
        assert re.fullmatch(r"tool results: a red dot\nimages: [0-9a-f]{64}", picture), picture
        model.tool_rules["wait forever"] = [("node_lap_hang", {})]
        assert "did not answer hang within 2s" in ask(url, "wait forever")
        model.tool_rules["say a lot"] = [("node_lap_big", {})]
        big = ask(url, "say a lot")
        assert "[truncated: 134464 more bytes]" in big and len(big) < 70_000

        # the device/<name> output channel shows a notification on the node
        model.tool_rules["tell the laptop"] = [("output_send__device",
                                                {"payload": "time to go", "type": "text",
                                                 "meta": '{"conversation": "lap"}'})]
        assert "shown on lap" in ask(url, "tell the laptop")
        assert notes.read_text().endswith("HomeAgent: time to go\n")

        # run asks the owner first; a silent command does not
        model.tool_rules["mark it"] = [("node_lap_run", {"command": "mark"})]
        waiting = ask(url, "mark it")
        assert "needs the owner's approval" in waiting and not marker.exists()
        pending = json.loads(cli("people", "approvals", "--json", "--data", str(home)).stdout)
        assert [(p["tool"], p["arguments"]) for p in pending] == [("node_lap_run", {"command": "mark"})]
        cli("people", "approve", str(pending[0]["id"]), "--data", str(home))
        until(marker.exists, "the approved command ran on the node")
        until(lambda: any("the owner approved node_lap_run" in json.dumps(r) and "marked" in json.dumps(r)
                          for r in model.requests), "the result came back to the asker")
        model.tool_rules["say hi"] = [("node_lap_run", {"command": "echo"})]
        assert "silent one" in ask(url, "say hi")

        # the same token twice: the second connection is refused while the first lives
        twin_node = node_serve(lap)
        procs.append(twin_node)
        twin_node.wait_for("already connected")
        twin_node.stop(signal.SIGKILL)

        # killed: its tools go; started again: they come back
        node.stop(signal.SIGKILL)
        until(lambda: not nodes_list(home)[0]["online"], "the killed node is offline", timeout=30)
        ask(url, "anything")
        assert not any(n.startswith("node_lap_") for n in offered_tools(model.requests))
        node = node_serve(lap)
        procs.append(node)
        node.wait_for("connected to")

        # the daemon restarts: the node comes back by itself
        procs[0].stop()
        node.wait_for("disconnected")
        procs[0] = serve(home, port)
        node.wait_for("connected to")
        until(lambda: nodes_list(home)[0]["online"], "the node is online after the daemon's restart")
        ask(url, "anything")
        assert "node_lap_status" in offered_tools(model.requests)

        # revoked: the link closes now, the node says why and stops
        revoked = cli("nodes", "revoke", "lap", "--data", str(home))
        assert "revoked and disconnected" in revoked.stdout
        node.wait_for("refused this node's token")
        assert node.popen.wait(timeout=30) == 2
        assert nodes_list(home) == []
        ask(url, "anything")
        assert not any(n.startswith("node_lap_") for n in offered_tools(model.requests))
    log = (home / "log" / "homeagent.log").read_text()
    assert "Traceback" not in log, log
