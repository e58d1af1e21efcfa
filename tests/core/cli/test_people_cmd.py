"""``homeagent people`` on a temporary data dir: the registry offline, approvals through a daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from homeagent_core.agent.people import PeopleRegistry, default_owner_name
from homeagent_core.cli import app

runner = CliRunner()


def run(data: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["people", *args, "--data", str(data)], catch_exceptions=False)
    return result.exit_code, result.output


def test_add_role_link_list_and_remove(tmp_path: Path) -> None:
    assert run(tmp_path, "add", "mum", "--role", "adult") == (0, "added mum as adult\n")
    assert run(tmp_path, "add", "kid", "--role", "child")[0] == 0
    assert run(tmp_path, "role", "kid", "adult") == (0, "kid is now adult\n")
    assert run(tmp_path, "link", "kid", "QQ", "12345") == (0, "linked qq 12345 to kid (adult)\n")
    code, out = run(tmp_path, "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows[default_owner_name()]["role"] == "owner"
    assert rows["kid"]["identities"] == [{"platform": "qq", "account": "12345"}]
    assert run(tmp_path, "remove", "kid")[0] == 0
    assert "kid" not in run(tmp_path, "list")[1]


def test_bad_input_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    code, out = run(tmp_path, "add", "x", "--role", "wizard")
    assert code == 1 and "unknown role 'wizard'" in out
    code, out = run(tmp_path, "role", "nobody", "adult")
    assert code == 1 and "unknown person 'nobody'" in out
    code, out = run(tmp_path, "remove", default_owner_name())
    assert code == 1 and "last owner" in out
    code, out = run(tmp_path, "key", "nobody")
    assert code == 1 and "unknown person" in out


def test_a_key_is_printed_once_and_dies_with_its_person(tmp_path: Path) -> None:
    run(tmp_path, "add", "bob", "--role", "adult")
    code, out = run(tmp_path, "key", "bob", "--json")
    made = json.loads(out)
    assert code == 0 and made["person"] == "bob" and made["api_key"].startswith("ha_")
    people = PeopleRegistry.open(tmp_path)
    try:
        assert people.person_for_key(made["api_key"]).name == "bob"  # type: ignore[union-attr]
        assert made["api_key"] not in json.dumps([p.to_dict() for p in people.list()])
    finally:
        people.close()
    run(tmp_path, "remove", "bob")
    people = PeopleRegistry.open(tmp_path)
    try:
        assert people.person_for_key(made["api_key"]) is None
    finally:
        people.close()


def test_audit_lists_the_changes(tmp_path: Path) -> None:
    run(tmp_path, "add", "mum", "--role", "adult")
    code, out = run(tmp_path, "audit", "--json")
    actions = [r["action"] for r in json.loads(out)]
    assert code == 0 and actions[0] == "person_add" and "person_add" in actions


def test_roles_and_a_new_role(tmp_path: Path) -> None:
    code, out = run(tmp_path, "role-policy", "teen", "--allow", "*", "--deny", "cmd_run,term_*")
    assert code == 0 and "role teen" in out
    assert run(tmp_path, "add", "ann", "--role", "teen")[0] == 0
    rows = {r["name"]: r for r in json.loads(run(tmp_path, "roles", "--json")[1])}
    assert rows["teen"]["deny"] == ["cmd_run", "term_*"] and rows["adult"]["ask"]


def test_a_persons_own_policy(tmp_path: Path) -> None:
    run(tmp_path, "add", "kid", "--role", "child")
    code, out = run(tmp_path, "policy", "kid", "--deny", "web_*", "--allow", "files_read")
    assert code == 0 and "kid: allow ['files_read'] ask [] deny ['web_*']" in out
    row = next(r for r in json.loads(run(tmp_path, "list", "--json")[1]) if r["name"] == "kid")
    assert row["policy"] == {"allow": ["files_read"], "deny": ["web_*"], "ask": []}


def test_approvals_without_a_daemon_say_so(tmp_path: Path) -> None:
    code, out = run(tmp_path, "approvals")
    assert code == 1 and "no daemon runs" in out


def test_doctor_warns_about_running_as_root(tmp_path: Path) -> None:
    from homeagent_core.app import App
    from homeagent_core.cli.doctor import check_root

    home = App(tmp_path / "d", load_entrypoints=False, builtins=["homeagent_core.builtin.cmd"], memory=False)
    home.declare_settings()
    try:
        assert check_root(home, euid=1000) == []
        (finding,) = check_root(home, euid=0)
        assert finding.status == "warn" and "running as root" in finding.message and "refuses" in finding.message
        home.config.set("plugin.cmd.allow_root", True)
        assert "allow_root is true" in check_root(home, euid=0)[0].message
    finally:
        home.config.close()
    if os.geteuid() == 0:
        findings = json.loads(runner.invoke(app, ["doctor", "--json", "--data", str(tmp_path / "e")]).output)
        assert any("running as root" in f["message"] for f in findings)


def test_audit_lists_the_approvals_and_their_outcomes(tmp_path: Path) -> None:
    from homeagent_core.agent.approval_store import ApprovalStore
    from homeagent_sdk.types import Principal, ToolCall

    run(tmp_path, "add", "mum", "--role", "adult")
    store = ApprovalStore(tmp_path / "people.db")
    try:
        mum = Principal(person="mum", role="adult", door="webui")
        first = store.insert(mum, ToolCall("c1", "cmd_run", {"command": "ls /"}), "webui", 1.0)
        second = store.insert(mum, ToolCall("c2", "plugin_install", {"name": "x"}), "webui", 2.0)
        assert store.finish(first, "denied", by="owner (web)", at=3.0)
        assert not store.finish(first, "approved", by="owner (cli)", at=4.0)  # decided already: unchanged
    finally:
        store.close()
    code, out = run(tmp_path, "audit", "--approvals", "--json")
    rows = {r["id"]: r for r in json.loads(out)}
    assert code == 0 and rows[first]["status"] == "denied" and rows[first]["decided_by"] == "owner (web)"
    assert rows[second]["status"] == "pending" and rows[second]["arguments"] == {"name": "x"}
    code, out = run(tmp_path, "audit")
    assert code == 0 and "approvals (newest first):" in out
    assert 'mum          cmd_run {"command": "ls /"}  denied by owner (web)' in out


def test_unlink_revokes_a_link(tmp_path: Path) -> None:
    run(tmp_path, "add", "kid", "--role", "child")
    assert run(tmp_path, "link", "kid", "qq", "10001")[0] == 0
    code, out = run(tmp_path, "unlink", "kid", "qq", "10001")
    assert code == 0 and "unlinked qq 10001 from kid" in out
    code, out = run(tmp_path, "unlink", "kid", "qq", "10001")
    assert code == 1 and "is not linked to 'kid'" in out
    code, out = run(tmp_path, "list", "--json")
    assert next(p for p in json.loads(out) if p["name"] == "kid")["identities"] == []
