"""Web logins per person, invites, the owner's People API and approvals, over real HTTP.

Every test runs a real daemon (``daemon`` fixture: App + web UI on a loopback port, SQLite
files in a temp data dir); the CLI test runs ``homeagent people invite`` on the same data dir
while the daemon runs.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import openai
from typer.testing import CliRunner

from homeagent_core.builtin.webui.auth import LOGINS_DB, Logins, Sessions
from homeagent_core.cli import app as cli_app
from homeagent_sdk._fake_model import ToolCallReply

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)
MUM_PASSWORD = "mums-own-password-1"
CMD = "homeagent_core.builtin.cmd"


async def login(daemon: WebDaemon, username: str, password: str) -> httpx.AsyncClient:
    """A client holding a session cookie of ``username`` and sending its CSRF token."""
    client = httpx.AsyncClient(base_url=daemon.url, timeout=10)
    answer = await client.post("/api/v1/login", json={"username": username, "password": password})
    assert answer.status_code == 200, answer.text
    client.headers["X-CSRF-Token"] = answer.json()["csrf_token"]
    return client


async def invite_and_accept(daemon: WebDaemon, owner: httpx.AsyncClient, name: str, password: str) -> str:
    made = await owner.post(f"/api/v1/people/{name}/invite")
    assert made.status_code == 201, made.text
    token = made.json()["path"].split("#", 1)[1]
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anon:
        greeted = await anon.get("/api/v1/invite", params={"token": token})
        assert greeted.json() == {"person": name}
        accepted = await anon.post("/api/v1/invite", json={"token": token, "password": password})
        assert accepted.status_code == 200, accepted.text
    return token


async def test_each_person_logs_in_with_their_own_password_and_reaches_only_their_routes(daemon: WebDaemon):
    async with daemon.client() as owner:
        added = await owner.post("/api/v1/people", json={"name": "mum", "role": "adult"})
        assert added.status_code == 201 and added.json()["web_login"] is False
        await invite_and_accept(daemon, owner, "mum", MUM_PASSWORD)
        listed = {p["name"]: p for p in (await owner.get("/api/v1/people")).json()["people"]}
        assert listed["mum"]["web_login"] is True
    mum = await login(daemon, "mum", MUM_PASSWORD)
    admin = await login(daemon, "admin", daemon.password)
    async with aclosing(mum), aclosing(admin):
        me = (await mum.get("/api/v1/session")).json()
        assert (me["person"], me["role"], me["owner"]) == ("mum", "adult", False)
        assert (await admin.get("/api/v1/session")).json()["owner"] is True
        for path in (
            "/api/v1/people",
            "/api/v1/approvals",
            "/api/v1/settings",
            "/api/v1/kernel",
            "/api/v1/plugins",
            "/api/v1/people/audit",
        ):
            refused = await mum.get(path)
            assert refused.status_code == 403, (path, refused.text)
            assert "for the owner only" in refused.json()["error"]
            assert (await admin.get(path)).status_code == 200, path
        assert (await mum.post("/api/v1/people", json={"name": "x", "role": "owner"})).status_code == 403
        # The chat is hers too, as herself: her own conversation, never the owner's; her event
        # stream shows her own turns only (approvals, which name who asked for what, never).
        own = (await mum.get("/api/v1/chat/history")).json()
        assert (own["person"], own["thread"]) == ("mum", "person:mum")
        assert (await mum.get("/")).status_code == 200  # the app shell
        # The chat endpoint speaks as mum, with mum's rights, read live: made a child, she is
        # offered no admin tool in her very next turn.
        demoted = await admin.put("/api/v1/people/mum/role", json={"role": "child"})
        assert demoted.status_code == 200 and demoted.json()["role"] == "child"
        assert (await mum.get("/api/v1/session")).json()["role"] == "child"
        answer = await mum.post(
            "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi from mum"}]}
        )
        assert answer.status_code == 200, answer.text
        offered = {t["function"]["name"] for t in daemon.model.requests[-1].get("tools") or ()}
        assert "persona_set" not in offered
    async with daemon.client(key=False) as anon:
        wrong = await anon.post("/api/v1/login", json={"username": "mum", "password": "nope-nope"})
        assert wrong.status_code == 401


async def test_a_person_changes_their_own_password_and_the_admin_password_can_be_changed(daemon: WebDaemon):
    async with daemon.client() as owner:
        await owner.post("/api/v1/people", json={"name": "mum", "role": "adult"})
        await invite_and_accept(daemon, owner, "mum", MUM_PASSWORD)
    mum = await login(daemon, "mum", MUM_PASSWORD)
    other_tab = await login(daemon, "mum", MUM_PASSWORD)
    async with aclosing(mum), aclosing(other_tab):
        bad = await mum.put("/api/v1/me/password", json={"current": "not-it-at-all", "new": "another-pass-2"})
        assert bad.status_code == 403 and "current password is wrong" in bad.json()["error"]
        short = await mum.put("/api/v1/me/password", json={"current": MUM_PASSWORD, "new": "short"})
        assert short.status_code == 400 and "at least 8 characters" in short.json()["error"]
        done = await mum.put("/api/v1/me/password", json={"current": MUM_PASSWORD, "new": "another-pass-2"})
        assert done.status_code == 200, done.text
        assert (await mum.get("/api/v1/session")).status_code == 200  # this tab stays logged in
        assert (await other_tab.get("/api/v1/session")).status_code == 401  # the others end
    async with httpx.AsyncClient(base_url=daemon.url) as anon:
        old = await anon.post("/api/v1/login", json={"username": "mum", "password": MUM_PASSWORD})
        assert old.status_code == 401
    await (await login(daemon, "mum", "another-pass-2")).aclose()
    # The generated admin password (credentials.json) can be changed the same way.
    admin = await login(daemon, "admin", daemon.password)
    async with aclosing(admin):
        changed = await admin.put("/api/v1/me/password", json={"current": daemon.password, "new": "new-admin-pass"})
        assert changed.status_code == 200, changed.text
    await (await login(daemon, "admin", "new-admin-pass")).aclose()
    stored = json.loads(daemon.plugin.state.credentials_path.read_text())
    assert "new-admin-pass" not in json.dumps(stored)
    async with daemon.client() as by_key:
        refused = await by_key.put("/api/v1/me/password", json={"current": "x", "new": "yyyyyyyyyy"})
        assert refused.status_code == 400 and "API key has no password" in refused.json()["error"]


async def test_the_owner_resets_a_password_and_ends_that_persons_sessions(daemon: WebDaemon):
    async with daemon.client() as owner:
        await owner.post("/api/v1/people", json={"name": "mum", "role": "adult"})
        await invite_and_accept(daemon, owner, "mum", MUM_PASSWORD)
        mum = await login(daemon, "mum", MUM_PASSWORD)
        async with aclosing(mum):
            reset = await owner.post("/api/v1/people/mum/password", json={})
            assert reset.status_code == 200 and reset.json()["sessions_ended"] == 1
            assert (await mum.get("/api/v1/session")).status_code == 401
        again = await login(daemon, "mum", reset.json()["password"])
        async with aclosing(again):
            ended = await owner.delete("/api/v1/people/mum/sessions")
            assert ended.json()["sessions_ended"] == 1
            assert (await again.get("/api/v1/session")).status_code == 401
        audit = (await owner.get("/api/v1/people/audit", params={"limit": 20})).json()["audit"]
        assert {"password_reset", "sessions_revoke", "invite_used"} <= {r["action"] for r in audit}


async def test_a_removed_persons_sessions_keys_and_password_stop_at_once(daemon: WebDaemon):
    async with daemon.client() as owner:
        await owner.post("/api/v1/people", json={"name": "mum", "role": "adult"})
        await invite_and_accept(daemon, owner, "mum", MUM_PASSWORD)
        key = (await owner.post("/api/v1/people/mum/key")).json()["api_key"]
        mum = await login(daemon, "mum", MUM_PASSWORD)
        async with aclosing(mum):
            assert (await mum.get("/api/v1/session")).status_code == 200
            # Removed offline (the CLI writes people.db directly): the next request already fails.
            daemon.app.people.remove("mum")
            assert (await mum.get("/api/v1/session")).status_code == 401
        client = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
        async with client:
            try:
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            except openai.AuthenticationError as exc:
                assert exc.status_code == 401
            else:
                raise AssertionError("a removed person's API key still works")
        async with httpx.AsyncClient(base_url=daemon.url, headers={"Authorization": f"Bearer {key}"}) as by_key:
            for path in ("/api/v1/session", "/api/v1/threads", "/api/v1/people"):
                assert (await by_key.get(path)).status_code == 401, path
        # Someone new called mum does not inherit the old password.
        await owner.post("/api/v1/people", json={"name": "mum", "role": "child"})
        async with httpx.AsyncClient(base_url=daemon.url) as anon:
            old = await anon.post("/api/v1/login", json={"username": "mum", "password": MUM_PASSWORD})
            assert old.status_code == 401
        removed = await owner.delete("/api/v1/people/mum")
        assert removed.status_code == 200
        unknown = await owner.delete("/api/v1/people/mum")
        assert unknown.status_code == 400 and "unknown person 'mum'" in unknown.json()["error"]


async def test_the_owner_links_and_unlinks_a_chat_account_on_the_api(daemon: WebDaemon):
    async with daemon.client() as owner:
        await owner.post("/api/v1/people", json={"name": "kid", "role": "child"})
        linked = await owner.post("/api/v1/people/kid/link", json={"platform": "QQ", "account": "10001"})
        assert linked.json()["identities"] == [{"platform": "qq", "account": "10001"}]
        unlinked = await owner.request("DELETE", "/api/v1/people/kid/link", json={"platform": "qq", "account": "10001"})
        assert unlinked.status_code == 200 and unlinked.json()["identities"] == []
        again = await owner.request("DELETE", "/api/v1/people/kid/link", json={"platform": "qq", "account": "10001"})
        assert again.status_code == 400 and "is not linked to 'kid'" in again.json()["error"]
    assert daemon.app.people.person_for_identity("qq", "10001") is None


async def test_an_invite_works_once_and_not_after_it_expired(daemon: WebDaemon):
    async with daemon.client() as owner:
        await owner.post("/api/v1/people", json={"name": "kid", "role": "child"})
        token = await invite_and_accept(daemon, owner, "kid", "kids-password-1")
    person = daemon.app.people.require("kid")
    state = daemon.plugin.state
    expired, _ = state.logins.invite(person.name, person.created_at, ttl_s=-1.0)
    async with httpx.AsyncClient(base_url=daemon.url) as anon:
        twice = await anon.post("/api/v1/invite", json={"token": token, "password": "another-kid-pass"})
        assert twice.status_code == 410 and "used already" in twice.json()["error"]
        late = await anon.post("/api/v1/invite", json={"token": expired, "password": "another-kid-pass"})
        assert late.status_code == 410 and "expired" in late.json()["error"]
        forged = await anon.get("/api/v1/invite", params={"token": "made-up"})
        assert forged.status_code == 404 and "not valid" in forged.json()["error"]
        first = await anon.post("/api/v1/login", json={"username": "kid", "password": "kids-password-1"})
        assert first.status_code == 200  # the first password stands
        assert (
            await anon.post("/api/v1/login", json={"username": "kid", "password": "another-kid-pass"})
        ).status_code == 401


async def test_two_tries_of_one_invite_at_once_set_one_password(tmp_path: Path):
    logins = Logins(tmp_path / LOGINS_DB)
    token, _ = logins.invite("ann", 1.0)

    def take(password: str) -> str:
        try:
            logins.accept(token, password)
        except ValueError as exc:
            return str(exc)
        return "ok"

    outcomes = await asyncio.gather(*(asyncio.to_thread(take, f"password-{i}") for i in range(4)))
    assert outcomes.count("ok") == 1, outcomes
    winner = f"password-{outcomes.index('ok')}"
    assert logins.check("ann", 1.0, winner) and not logins.check("ann", 2.0, winner)
    logins.close()


async def test_bad_requests_are_refused_with_what_to_do(daemon: WebDaemon):
    async with daemon.client() as owner:
        role = await owner.post("/api/v1/people", json={"name": "zed", "role": "wizard"})
        assert role.status_code == 400 and "unknown role 'wizard'" in role.json()["error"]
        await owner.post("/api/v1/people", json={"name": "ann", "role": "adult"})
        other = await owner.put("/api/v1/people/ann/role", json={"role": "nobody"})
        assert other.status_code == 400 and "the roles are" in other.json()["error"]
        decided = await owner.post("/api/v1/approvals/7", json={"approve": True})
        assert decided.status_code == 409 and "no approval #7" in decided.json()["error"]
        limit = await owner.get("/api/v1/people/audit", params={"limit": "lots"})
        assert limit.status_code == 400
    async with httpx.AsyncClient(base_url=daemon.url) as anon:
        assert (await anon.get("/api/v1/people")).status_code == 401


async def test_cli_invite_gives_a_link_the_running_daemon_accepts(daemon: WebDaemon):
    data = daemon.app.data_dir
    daemon.app.people.add("gran", "adult")
    result = await asyncio.to_thread(
        CliRunner().invoke,
        cli_app,
        ["people", "invite", "gran", "--data", str(data), "--base-url", daemon.url, "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    url = json.loads(result.output)["url"]
    assert url.startswith(daemon.url + "/invite#")
    async with httpx.AsyncClient(base_url=daemon.url) as anon:
        page = await anon.get(url.split("#")[0])
        assert page.status_code == 200 and "invite.js" in page.text
        taken = await anon.post("/api/v1/invite", json={"token": url.split("#")[1], "password": "grans-password"})
        assert taken.status_code == 200, taken.text
    await (await login(daemon, "gran", "grans-password")).aclose()
    unknown = await asyncio.to_thread(
        CliRunner().invoke, cli_app, ["people", "invite", "nobody", "--data", str(data)], catch_exceptions=False
    )
    assert unknown.exit_code != 0 and "unknown person 'nobody'" in unknown.output


async def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_the_owner_decides_two_waiting_approvals_through_the_api(start_daemon: Any, tmp_path: Path):
    async with start_daemon(tmp_path / "data", extra=(CMD,)) as daemon:
        await decide_two_approvals(daemon)


async def decide_two_approvals(daemon: WebDaemon) -> None:
    daemon.app.config.set("plugin.cmd.enabled", "true")
    daemon.app.config.set("plugin.cmd.allow_root", "true")
    people = daemon.app.people
    people.add("mum", "adult")
    key = people.new_key("mum")
    daemon.model.add(
        ToolCallReply("cmd_run", {"command": "echo first-run"}),
        "waits",
        ToolCallReply("cmd_run", {"command": "echo second-run"}),
        "waits too",
    )
    client = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
    async with client:
        for text in ("run one", "run two"):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    async with daemon.client() as owner:
        waiting = (await owner.get("/api/v1/approvals")).json()["approvals"]
        assert [(a["id"], a["person"], a["tool"]) for a in waiting] == [(1, "mum", "cmd_run"), (2, "mum", "cmd_run")]
        denied = await owner.post("/api/v1/approvals/1", json={"approve": False})
        assert denied.json()["status"] == "denied"
        approved = await owner.post("/api/v1/approvals/2", json={"approve": True})
        assert approved.json()["status"] == "approved"
        twice = await owner.post("/api/v1/approvals/2", json={"approve": False})
        assert twice.status_code == 409 and "already approved" in twice.json()["error"]
        await wait_for(lambda: any("second-run" in str(r["messages"][-1]["content"]) for r in daemon.model.requests))
        assert not any("first-run" in str(r["messages"][-1]["content"]) for r in daemon.model.requests)
        assert (await owner.get("/api/v1/approvals")).json()["approvals"] == []
        unknown = await owner.post("/api/v1/approvals/99", json={"approve": True})
        assert unknown.status_code == 409 and "there is no approval #99" in unknown.json()["error"]

    # A third one: the asker cannot decide it, and two owner's clicks at once decide it once.
    daemon.model.add(ToolCallReply("cmd_run", {"command": "echo third-run"}), "waits")
    again = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
    async with again:
        await again.chat.completions.create(model="m", messages=[{"role": "user", "content": "run three"}])
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10, headers={"Authorization": f"Bearer {key}"}) as mum:
        refused = await mum.post("/api/v1/approvals/3", json={"approve": True})
        assert refused.status_code in (401, 403), refused.text
    async with daemon.client() as owner:
        both = await asyncio.gather(
            owner.post("/api/v1/approvals/3", json={"approve": True}),
            owner.post("/api/v1/approvals/3", json={"approve": False}),
        )
        codes = sorted(r.status_code for r in both)
        assert codes == [200, 409], [r.text for r in both]
        loser = next(r for r in both if r.status_code == 409)
        assert "approval #3 (cmd_run for mum) was already" in loser.json()["error"]
        history = (await owner.get("/api/v1/approvals", params={"history": 1})).json()["approvals"]
        assert [(a["id"], a["status"]) for a in history][1:] == [(2, "approved"), (1, "denied")]
        assert history[0]["id"] == 3 and history[0]["status"] == next(r for r in both if r.status_code == 200).json()[
            "status"
        ]
        assert history[1]["decided_by"].endswith("(web)")
        bad = await owner.get("/api/v1/approvals", params={"history": 1, "limit": "lots"})
        assert bad.status_code == 400 and "limit must be a whole number" in bad.json()["error"]


def test_sessions_stored_before_they_carried_a_person_stay_the_admin_logins(tmp_path: Path):
    path = tmp_path / "sessions.json"
    old = Sessions(path=path)
    token = old.create()
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({k: v[:2] for k, v in stored.items()}))  # the earlier [expiry, csrf] form
    reloaded = Sessions(path=path)
    assert reloaded.person_of(token) == ("", 0.0) and reloaded.valid(token)
    mum = reloaded.create("mum", 12.5)
    assert Sessions(path=path).person_of(mum) == ("mum", 12.5)
    assert reloaded.drop_person("mum") == 1 and Sessions(path=path).person_of(mum) is None
    assert Sessions(path=path).valid(token)
