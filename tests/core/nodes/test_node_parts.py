"""The parts of nodes on their own: the pairing store, the device's capabilities, the protocol checks."""

from __future__ import annotations

import base64
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from homeagent_core.builtin.nodes_store import CODE_TTL_S, NodesError, NodeStore
from homeagent_core.node.caps import FilesCapability, NotifyCapability, RunCapability
from homeagent_core.node.caps_media import build_capabilities
from homeagent_core.node.config import NodeConfig
from homeagent_sdk.node import (
    CapabilityError,
    NodeImage,
    NodeResult,
    ProtocolError,
    parse_hello,
    parse_result,
    result_frame,
)


def test_codes_are_one_time_expire_and_tokens_are_kept_only_as_hashes(tmp_path: Path) -> None:
    store = NodeStore(tmp_path / "nodes.db")
    code, expires = store.pair("Lap", now=1000.0)
    assert expires == 1000.0 + CODE_TTL_S
    name, token = store.redeem(code.lower(), now=1001.0)
    assert name == "lap" and store.authenticate(token) == ("lap", "")
    assert store.authenticate(token, max_age_s=86400, now=1001.0 + 86401)[1].startswith("this device token has expired")
    assert store.authenticate(token, max_age_s=86400, now=1001.0 + 86399) == ("lap", "")
    with pytest.raises(NodesError, match="already used"):
        store.redeem(code, now=1002.0)
    with pytest.raises(NodesError, match="already paired"):
        store.pair("lap")
    late, _ = store.pair("pi", now=2000.0)
    with pytest.raises(NodesError, match="expired"):
        store.redeem(late, now=2000.0 + CODE_TTL_S + 1)
    with pytest.raises(NodesError, match="not a valid node name"):
        store.pair("my laptop!")
    store.close()
    dump = "\n".join(sqlite3.connect(tmp_path / "nodes.db").iterdump())
    assert token not in dump and code not in dump
    again = NodeStore(tmp_path / "nodes.db")
    assert again.revoke("lap") and again.authenticate(token)[0] is None and not again.revoke("lap")
    assert "revoked or unknown" in again.authenticate(token)[1]
    again.close()


async def test_files_stay_inside_the_sandbox_and_sizes_are_capped(tmp_path: Path) -> None:
    files = FilesCapability({"folder": "box", "max_file_bytes": 10}, tmp_path)
    assert (await files.call({"action": "write", "path": "a/b.txt", "content": "hello"})).text.startswith("wrote 5")
    assert (await files.call({"action": "read", "path": "a/b.txt"})).text == "hello"
    assert "a/b.txt" in (await files.call({"action": "list", "path": "a"})).text
    (tmp_path / "secret").write_text("no")
    (tmp_path / "box" / "link").symlink_to(tmp_path / "secret")
    for path in ("../secret", "a/../../secret", "link"):
        with pytest.raises(CapabilityError, match="outside the sandbox"):
            await files.call({"action": "read", "path": path})
    with pytest.raises(CapabilityError, match="more than this device allows"):
        await files.call({"action": "write", "path": "big", "content": "x" * 11})


async def test_run_takes_only_allowed_commands_without_a_shell_with_a_timeout_and_a_cap(tmp_path: Path) -> None:
    run = RunCapability({"commands": {
        "hi": {"argv": [sys.executable, "-c", "print('x' * 100)"], "silent": True},
        "hang": {"argv": [sys.executable, "-c", "import time; time.sleep(60)"]},
        "args": {"argv": ["echo", "$HOME;", "rm"]},
    }, "timeout_s": 1, "max_output_bytes": 10}, tmp_path)
    assert run.meta == {"silent": ["hi"]}
    assert (await run.call({"command": "hi"})).text == "exit code 0\n" + "x" * 10
    assert "timed out after 1s" in (await run.call({"command": "hang"})).text
    assert (await run.call({"command": "args"})).text == "exit code 0\n$HOME; rm\n"
    with pytest.raises(CapabilityError, match="not an allowed command"):
        await run.call({"command": "rm -rf /"})


async def test_a_device_without_a_notifier_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CapabilityError, match="not available on this device"):
        await NotifyCapability({}).call({"text": "hi"})


def test_capabilities_missing_their_tools_are_left_out_with_a_reason(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    config = NodeConfig(tmp_path, "lap", "http://x", {
        "status": {"enabled": True}, "clipboard": {"enabled": True}, "screenshot": {"enabled": True},
        "camera_snap": {"enabled": True}, "run": {"enabled": False},
    })
    caps, notes = build_capabilities(config)
    assert [c.name for c in caps] == ["status"]
    assert [n.split(":")[0] for n in notes] == ["clipboard", "screenshot", "camera_snap"]


def test_protocol_frames_are_checked() -> None:
    with pytest.raises(ProtocolError, match="capability name"):
        parse_hello({"type": "hello", "protocol": 1, "capabilities": [{"name": "Rm -rf"}]})
    with pytest.raises(ProtocolError, match="unique"):
        parse_hello({"type": "hello", "protocol": 1, "capabilities": [{"name": "a"}, {"name": "a"}]})
    frame = json.loads(result_frame("c1", NodeResult("shot", [NodeImage(b"\x89PNG", "image/png", "s.png")])))
    assert parse_result(frame) == ("c1", True, "shot", [NodeImage(b"\x89PNG", "image/png", "s.png")])
    with pytest.raises(ProtocolError, match="base64"):
        parse_result({"type": "result", "id": "c1", "ok": True, "images": [{"data": "!!"}]})
    with pytest.raises(ProtocolError, match="not an image"):
        parse_result({"type": "result", "id": "c1", "ok": True,
                      "images": [{"mime": "text/html", "data": base64.b64encode(b"x").decode()}]})


async def test_device_slash_name_reaches_the_device_channel_with_the_node_as_conversation() -> None:
    from homeagent_core.agent.channels import ChannelRegistry
    from homeagent_sdk.types import ChannelDef

    sent: list[tuple[str, dict[str, object]]] = []
    registry = ChannelRegistry()
    registry.add_output(ChannelDef(name="device", send=lambda payload, meta: sent.append((payload, meta))), "nodes")
    await registry.send("device/lap", "time to go")
    await registry.send("device:pi", "hello")
    assert sent == [("time to go", {"conversation": "lap"}), ("hello", {"conversation": "pi"})]
    assert registry.output("device/lap") is registry.output("device")


def test_node_tools_follow_the_people_policy_defaults(tmp_path: Path) -> None:
    from homeagent_core.agent.people import PeopleRegistry
    from homeagent_core.agent.policy import Decision, ToolPolicy
    from homeagent_sdk.types import Principal

    people = PeopleRegistry.open(tmp_path)
    people.ensure_owner("root")
    people.add("mum", "adult")
    people.add("kid", "child")
    policy = ToolPolicy(people)
    owner, mum, kid = (Principal(person="root", role="owner"), Principal(person="mum", role="adult"),
                       Principal(person="kid", role="child"))
    for capability in ("run", "files", "clipboard", "screenshot", "camera_snap"):
        assert policy.decide(owner, f"node_lap_{capability}") is Decision.ALLOW  # run asks the owner itself
        assert policy.decide(mum, f"node_lap_{capability}") is Decision.ASK
        assert policy.decide(kid, f"node_lap_{capability}") is Decision.DENY
    assert policy.decide(mum, "node_lap_status") is Decision.ALLOW
    assert policy.decide(mum, "node_lap_notify") is Decision.ALLOW
    assert policy.decide(kid, "node_lap_status") is Decision.DENY
    people.close()
