"""The person registry: persons, roles, identities, API keys, audit — on a real SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from homeagent_core.agent.people import KEY_PREFIX, PeopleError, PeopleRegistry
from homeagent_core.agent.policy import Decision, ToolPolicy, is_guarded
from homeagent_sdk.types import Principal


@pytest.fixture
def people(tmp_path: Path) -> Iterator[PeopleRegistry]:
    registry = PeopleRegistry.open(tmp_path)
    registry.ensure_owner("root")
    yield registry
    registry.close()


def test_owner_is_created_once_and_survives_a_reopen(tmp_path: Path) -> None:
    first = PeopleRegistry.open(tmp_path)
    assert first.ensure_owner("alice").name == "alice"
    first.add("bob", "adult")
    first.close()
    again = PeopleRegistry.open(tmp_path)
    assert again.ensure_owner("someone-else").name == "alice"
    assert [(p.name, p.role) for p in again.list()] == [("alice", "owner"), ("bob", "adult")]
    mode = sqlite3.connect(tmp_path / "people.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    again.close()


def test_bad_input_gets_clear_errors(people: PeopleRegistry) -> None:
    with pytest.raises(PeopleError, match=r"unknown role 'wizard'.*adult, child, guest, owner"):
        people.add("kid", "wizard")
    with pytest.raises(PeopleError, match="unknown person 'nobody'"):
        people.set_role("nobody", "adult")
    with pytest.raises(PeopleError, match="last owner"):
        people.remove("root")
    with pytest.raises(PeopleError, match="last owner"):
        people.set_role("root", "adult")
    people.add("kid", "child")
    with pytest.raises(PeopleError, match="already exists"):
        people.add("kid", "adult")
    with pytest.raises(PeopleError, match="reserved"):
        people.add("system", "adult")


def test_api_keys_are_stored_hashed_and_die_with_their_person(people: PeopleRegistry, tmp_path: Path) -> None:
    people.add("bob", "adult")
    key = people.new_key("bob")
    assert key.startswith(KEY_PREFIX)
    person = people.person_for_key(key)
    assert person is not None and person.name == "bob" and person.keys == 1
    raw = (tmp_path / "people.db").read_bytes() + (tmp_path / "people.db-wal").read_bytes()
    assert key.encode() not in raw
    people.remove("bob")
    assert people.person_for_key(key) is None
    assert people.person_for_key("not-a-key") is None


def test_identities_link_one_account_to_one_person(people: PeopleRegistry) -> None:
    people.add("mum", "adult")
    people.add("kid", "child")
    people.link("kid", "QQ", "12345")
    found = people.person_for_identity("qq", "12345")
    assert found is not None and found.name == "kid"
    with pytest.raises(PeopleError, match="already linked to 'kid'"):
        people.link("mum", "qq", "12345")
    assert people.person_for_identity("qq", "999") is None


def test_role_defaults_and_person_overrides(people: PeopleRegistry) -> None:
    policy = ToolPolicy(people)
    people.add("mum", "adult")
    people.add("kid", "child")
    owner = Principal(person="root", role="owner")
    mum = Principal(person="mum", role="adult")
    kid = Principal(person="kid", role="child")
    guest = Principal(role="guest")
    assert policy.decide(owner, "cmd_run") is Decision.ALLOW
    assert policy.decide(mum, "cmd_run") is Decision.ASK
    assert policy.decide(mum, "config_set") is Decision.ASK
    assert policy.decide(mum, "web_fetch") is Decision.ALLOW
    assert policy.decide(kid, "cmd_run") is Decision.DENY
    assert policy.decide(kid, "timer_set") is Decision.ALLOW
    assert policy.decide(kid, "memory_recall") is Decision.ALLOW
    assert policy.decide(kid, "memory_purge") is Decision.DENY
    assert policy.decide(guest, "web_fetch") is Decision.DENY
    assert policy.decide(None, "web_fetch") is Decision.DENY
    people.set_policy("kid", allow=["files_read"], deny=["web_*"])
    assert policy.decide(kid, "files_read") is Decision.ALLOW
    assert policy.decide(kid, "web_search") is Decision.DENY
    people.set_role_policy("teen", allow=["*"], deny=["cmd_run"], ask=["files_*"])
    people.add("ann", "teen")
    teen = Principal(person="ann", role="teen")
    assert policy.decide(teen, "cmd_run") is Decision.DENY
    assert policy.decide(teen, "files_write") is Decision.ASK


def test_audit_records_changes_and_calls(people: PeopleRegistry) -> None:
    people.add("bob", "adult", by="root")
    people.audit(Principal(person="bob", role="adult", door="qq"), "cmd_run", "asked", "approval #1")
    rows = people.audit_rows(10)
    assert (rows[0].person, rows[0].door, rows[0].action, rows[0].outcome) == ("bob", "qq", "cmd_run", "asked")
    assert rows[1].action == "person_add" and rows[1].person == "root"


def test_guarded_settings() -> None:
    for key in (
        "plugin.cmd.enabled",
        "plugin.files.dir",
        "core.llm.sources.x.api_key",
        "plugin.webui.username",
        "core.people.approval_timeout",
        "plugin.pluginmgr.anything",
    ):
        assert is_guarded(key), key
    for key in ("core.agent.max_tool_turns", "plugin.timer.max_duration"):
        assert not is_guarded(key), key
