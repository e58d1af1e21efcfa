"""A household on a real ``homeagent serve``: the owner in Chromium, the mother and the child on
their own web logins and ``/v1`` keys, an unlinked QQ group member through the OneBot bridge.

Everything is real but the model: the daemon is a child process, its web UI and ``/v1`` are
reached over loopback HTTP, the owner clicks Approve / Deny in headless Chromium, ``cmd_run``
runs a real program, the QQ side is a loopback OneBot v11 implementation over a real WebSocket.
The model is a scripted :class:`FakeModel` behind a loopback OpenAI-compatible server that
records every request the daemon sent, so "the child's request lists no admin tool" is read
off the bytes the kernel really sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from homeagent_core.agent.people import PeopleRegistry, default_owner_name
from homeagent_sdk.testing import FakeModel, FakeModelServer, ToolCallReply

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "plugins" / "homeagent-plugin-onebot" / "tests"))
from onebot_fake import SELF_ID, FakeOneBot, text_of

pytestmark = pytest.mark.timeout(300)

API_KEY = "test-api-key-0123456789"  # the webui conftest sets HOMEAGENT_WEBUI_API_KEY to it
QQ_TOKEN = "household-token"
OWNER_QQ = 12345
MUM_PASSWORD = "mums-own-password-1"
KID_PASSWORD = "kids-own-password-1"
SECRET = "下周三我要去医院复查，别跟孩子说"
#: Tools only the owner uses without asking; none may be offered to the child.
ADMIN = re.compile(r"^(cmd_run|config_\w+|plugin_\w+|term_\w+|memory_purge|persona_set|llm_set_source)$")
WAIT_S = 90


def last_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1].get("content")
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def answer(request: dict[str, Any]) -> Any:
    """The scripted model: what each person's words make it do."""
    last = request["messages"][-1]
    text = last_text(request)
    if last["role"] == "tool":
        return f"工具结果 tool result: {text}"
    if text.endswith("turn on commands"):
        return ToolCallReply("config_set", {"scope": "cmd", "key": "enabled", "value": "true"})
    if text.endswith("list files please"):
        return ToolCallReply("cmd_run", {"command": "printf %s%s approved- run"})
    if text.endswith("run it again"):
        return ToolCallReply("cmd_run", {"command": "printf %s%s denied- run"})
    return "好的"


def requests_with(model: FakeModel, text: str) -> list[dict[str, Any]]:
    return [r for r in model.requests if text in json.dumps(r, ensure_ascii=False)]


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


async def next_private(qq: FakeOneBot, user_id: int) -> str:
    """The text of the next private QQ message the daemon sends to ``user_id``."""
    while True:
        sent = await qq.next_sent(timeout=WAIT_S)
        if sent.get("action") == "send_private_msg" and sent.get("user_id") == user_id:
            return text_of(sent)


async def wait_for(predicate: Any, timeout: float = WAIT_S) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def configure(data: Path, settings: dict[str, Any]) -> None:
    """Write settings the way ``homeagent config set`` does before the daemon runs."""
    from homeagent_core.app import App

    app = App(data)
    try:
        app.declare_settings()
        for key, value in settings.items():
            app.config.set(key, value)
    finally:
        app.config.close()


class Daemon:
    """``homeagent serve`` in a child process; its output is collected as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.url = ""
        self.password = ""

    async def started(self) -> None:
        assert self.proc.stdout is not None
        async with asyncio.timeout(WAIT_S):
            while True:
                line = (await self.proc.stdout.readline()).decode(errors="replace")
                assert line, "homeagent serve exited:\n" + "".join(self.lines)
                self.lines.append(line)
                if found := re.search(r"web UI on (http://127\.0\.0\.1:\d+)/", line):
                    self.url = found.group(1)
                if found := re.match(r"\s+password: (\S+)", line):
                    self.password = found.group(1)
                if "HomeAgent running" in line:
                    break
        assert self.url, "".join(self.lines)  # (the admin password is printed at the first start only)

    async def collect(self) -> None:
        assert self.proc.stdout is not None
        while line := (await self.proc.stdout.readline()).decode(errors="replace"):
            self.lines.append(line)


@contextlib.asynccontextmanager
async def serve(data: Path, *, kill: bool = False) -> AsyncIterator[Daemon]:
    """``homeagent serve`` on ``data``; stopped with SIGTERM (a clean exit is checked), or SIGKILL with ``kill``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "homeagent_core.cli", "serve", "--data", str(data), "--port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    daemon = Daemon(proc)
    try:
        await daemon.started()
        drain = asyncio.get_running_loop().create_task(daemon.collect())
        yield daemon
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            async with asyncio.timeout(60):
                await proc.wait()
    await drain
    assert proc.returncode == (-signal.SIGKILL if kill else 0), "".join(daemon.lines)


async def web_login(url: str, name: str, password: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=url, timeout=30)
    answer_ = await client.post("/api/v1/login", json={"username": name, "password": password})
    assert answer_.status_code == 200, answer_.text
    client.headers["X-CSRF-Token"] = answer_.json()["csrf_token"]
    return client


async def invite(owner: httpx.AsyncClient, url: str, name: str, password: str) -> None:
    made = await owner.post(f"/api/v1/people/{name}/invite")
    assert made.status_code == 201, made.text
    token = made.json()["path"].split("#", 1)[1]
    async with httpx.AsyncClient(base_url=url, timeout=30) as anon:
        accepted = await anon.post("/api/v1/invite", json={"token": token, "password": password})
        assert accepted.status_code == 200, accepted.text


async def test_a_household_on_a_real_daemon(page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if not any(ep.name == "onebot" for ep in importlib.metadata.entry_points(group="homeagent")):
        pytest.skip("the onebot plugin is not installed (make test installs it)")
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "onebot")
    monkeypatch.setenv("HOMEAGENT_LLM_API_KEY", "test-key")
    qq = await FakeOneBot(access_token=QQ_TOKEN).start_server()
    transcript: list[str] = []
    try:
        async with FakeModelServer(FakeModel(responder=answer)) as server:
            model = server.model
            data = tmp_path / "home"
            await asyncio.to_thread(configure, data, {
                "core.llm.sources.box.adapter": "openai",
                "core.llm.sources.box.base_url": server.base_url,
                "core.llm.sources.box.model": "fake",
                "core.llm.provider": "box",
                "plugin.cmd.allow_root": "true",  # the tests may run as root; cmd itself stays off
                "plugin.onebot.ws_url": qq.ws_url,
                "plugin.onebot.access_token": QQ_TOKEN,
                "plugin.onebot.reconnect_min": "0.05",
                "plugin.onebot.allow_from": f"group:678,{OWNER_QQ}",
            })
            people = PeopleRegistry.open(data)  # what `homeagent people add/key` does
            owner_name = people.ensure_owner(default_owner_name()).name
            people.link(owner_name, "qq", str(OWNER_QQ))  # the owner's QQ gets the approval requests
            people.add("mum", "adult")
            people.add("kid", "child")
            mum_key, kid_key = people.new_key("mum"), people.new_key("kid")
            people.close()
            async with serve(data) as daemon:
                await household(daemon, model, qq, page, owner_name, mum_key, kid_key, transcript)
    finally:
        await qq.close()
    print("\n".join(["", "household transcript (what each person saw):", *transcript]))


async def household(
    daemon: Daemon, model: FakeModel, qq: FakeOneBot, page: Any, owner_name: str, mum_key: str, kid_key: str,
    transcript: list[str],
) -> None:
    url = daemon.url
    owner = httpx.AsyncClient(base_url=url, headers={"X-API-Key": API_KEY}, timeout=60)
    async with owner:
        await qq.wait_connected(timeout=WAIT_S)
        # 1. The owner's own turn cannot switch cmd on: config_set fails and says why.
        said = await owner.post("/api/v1/chat", json={"message": "turn on commands"})
        assert said.status_code == 200, said.text
        reply = said.json()["response"]
        transcript.append(f"{owner_name} (web) -> agent: turn on commands")
        transcript.append(f"agent -> {owner_name}: {reply}")
        tool_result = last_text(requests_with(model, "plugin.cmd.enabled is a guarded setting")[0])
        assert "config_set" in offered(requests_with(model, "turn on commands")[0])
        assert "homeagent config set plugin.cmd.enabled" in tool_result
        assert "plugin.cmd.enabled is a guarded setting" in reply  # the model relayed why
        settings = (await owner.get("/api/v1/settings", params={"prefix": "plugin.cmd."})).json()["settings"]
        assert settings["plugin.cmd.enabled"] in (False, "false"), settings
        # The owner switches it on themselves, through the web UI's settings.
        put = await owner.put("/api/v1/settings", json={"key": "plugin.cmd.enabled", "value": True})
        assert put.status_code == 200, put.text

        # 2. The mother (her own web login) says something private; the child asks on /v1.
        await invite(owner, url, "mum", MUM_PASSWORD)
        await invite(owner, url, "kid", KID_PASSWORD)
        mum_web = await web_login(url, "mum", MUM_PASSWORD)
        kid_web = await web_login(url, "kid", KID_PASSWORD)
        async with contextlib.aclosing(mum_web), contextlib.aclosing(kid_web):
            assert (await mum_web.post("/api/v1/chat", json={"message": SECRET})).status_code == 200
            transcript.append(f"mum (web) -> agent: {SECRET}")
            kid = openai.AsyncOpenAI(base_url=url + "/v1", api_key=kid_key, max_retries=0, timeout=60)
            async with kid:
                done = await kid.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "妈妈下周三要去哪里？"}]
                )
            transcript.append("kid (/v1) -> agent: 妈妈下周三要去哪里？")
            transcript.append(f"agent -> kid: {done.choices[0].message.content}")
            (kids,) = requests_with(model, "妈妈下周三要去哪里")
            assert not {t for t in offered(kids) if ADMIN.match(t)}, offered(kids)
            assert offered(kids), "a child still has their everyday tools"
            assert SECRET not in json.dumps(kids, ensure_ascii=False)
            # Each person's web session lists only their own conversations.
            mums = {t["id"] for t in (await mum_web.get("/api/v1/threads")).json()["threads"]}
            kids_threads = {t["id"] for t in (await kid_web.get("/api/v1/threads")).json()["threads"]}
            owners = {t["id"] for t in (await owner.get("/api/v1/threads")).json()["threads"]}
            assert mums == {"person:mum"} and "main" in owners and "person:mum" not in owners
            assert not any(t.startswith(("person:mum", "web:mum", "v1:mum")) for t in kids_threads)
            refused = await kid_web.get("/api/v1/threads/person:mum/history")
            assert refused.status_code == 404
            mine = json.dumps((await kid_web.get("/api/v1/chat/history")).json(), ensure_ascii=False)
            assert SECRET not in mine

        # 3. Two /v1 keys: the second's request does not contain the first's words.
        mum = openai.AsyncOpenAI(base_url=url + "/v1", api_key=mum_key, max_retries=0, timeout=60)
        kid = openai.AsyncOpenAI(base_url=url + "/v1", api_key=kid_key, max_retries=0, timeout=60)
        async with mum, kid:
            await mum.chat.completions.create(model="m", messages=[{"role": "user", "content": "mum's v1 note 7391"}])
            await kid.chat.completions.create(model="m", messages=[{"role": "user", "content": "kid's v1 question"}])
            (second,) = requests_with(model, "kid's v1 question")
            assert "7391" not in json.dumps(second, ensure_ascii=False)

            # 4. The mother's cmd_run waits; the owner approves it in Chromium, then denies another.
            await page.goto(url + "/")
            await page.wait_for_url("**/login")
            assert daemon.password, "the admin password is printed at the first start"
            await page.fill("#password", daemon.password)
            await page.click("#login-button")
            await page.wait_for_selector("#chat-form")
            waiting = await mum.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "list files please"}]
            )
            transcript.append("mum (/v1) -> agent: list files please")
            transcript.append(f"agent -> mum: {waiting.choices[0].message.content}")
            assert "needs the owner's approval: request #1" in str(waiting.choices[0].message.content)
            toast = page.locator('#approval-toasts [data-approval="1"]')
            await toast.wait_for(timeout=WAIT_S * 1000)
            assert "mum (adult" in await toast.inner_text()
            on_qq = await next_private(qq, OWNER_QQ)  # the same request on the owner's QQ
            transcript.append(f"agent -> {owner_name} (QQ {OWNER_QQ}): {on_qq}")
            assert on_qq.startswith("[审批 #1] mum (adult, ") and "回复「同意 1」批准" in on_qq
            assert not requests_with(model, "approved-run")  # it waits: its output is nowhere yet
            await toast.locator("button[data-approve]").click()
            transcript.append(f"{owner_name} (Chromium) clicks Approve on #1")
            await wait_for(lambda: any("[审批 #1]" in last_text(r) for r in model.requests))
            follow = next(last_text(r) for r in model.requests if "[审批 #1]" in last_text(r))
            transcript.append(f"agent <- approvals: {follow}")
            assert "the owner approved cmd_run; it ran (ok)" in follow and "approved-run" in follow

            await mum.chat.completions.create(model="m", messages=[{"role": "user", "content": "run it again"}])
            toast = page.locator('#approval-toasts [data-approval="2"]')
            await toast.wait_for(timeout=WAIT_S * 1000)
            await toast.locator("button[data-deny]").click()
            transcript.append(f"{owner_name} (Chromium) clicks Deny on #2")
            await wait_for(lambda: any("[审批 #2]" in last_text(r) for r in model.requests))
            denied = next(last_text(r) for r in model.requests if "[审批 #2]" in last_text(r))
            transcript.append(f"agent <- approvals: {denied}")
            assert "denied by the owner" in denied
            assert not requests_with(model, "denied-run")  # it never ran: its output is nowhere

        # 5. An unlinked member of an approved QQ group gets an answer, and the model no tools.
        at_me = {"type": "at", "data": {"qq": str(SELF_ID)}}
        await qq.group(678, 4242, "路人", [at_me, {"type": "text", "data": {"text": " 帮我运行 ls"}}])
        sent = await qq.next_sent(timeout=WAIT_S)
        while sent.get("action") != "send_group_msg":  # the owner's copy of request #2 came first
            sent = await qq.next_sent(timeout=WAIT_S)
        transcript.append("路人 (QQ group 678) -> agent: 帮我运行 ls")
        transcript.append(f"agent -> group 678: {text_of(sent)}")
        assert sent["action"] == "send_group_msg" and text_of(sent) == "好的"
        (group_request,) = requests_with(model, "帮我运行 ls")
        assert "tools" not in group_request
        assert SECRET not in json.dumps(group_request, ensure_ascii=False)

        # The audit log has every outcome, and the approvals their history.
        audit = (await owner.get("/api/v1/people/audit", params={"limit": 200})).json()["audit"]
        outcomes = {(r["person"], r["action"], r["outcome"]) for r in audit}
        assert {(owner_name, "config_set", "allowed"), ("mum", "cmd_run", "asked"), ("mum", "cmd_run", "approved"),
                ("mum", "cmd_run", "denied-by-owner")} <= outcomes
        history = (await owner.get("/api/v1/approvals", params={"history": 1})).json()["approvals"]
        assert [(a["id"], a["status"]) for a in history] == [(2, "denied"), (1, "approved")]



async def test_an_approval_pending_when_the_daemon_is_killed_is_closed_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """kill -9 with a call waiting for the owner: the request was on disk before the asker was told
    it waits; the next start closes it as interrupted and tells the asker to ask again."""
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "")  # no installed plugin, only the built-ins
    monkeypatch.setenv("HOMEAGENT_LLM_API_KEY", "test-key")
    async with FakeModelServer(FakeModel(responder=answer)) as server:
        model = server.model
        data = tmp_path / "home"
        await asyncio.to_thread(configure, data, {
            "core.llm.sources.box.adapter": "openai",
            "core.llm.sources.box.base_url": server.base_url,
            "core.llm.sources.box.model": "fake",
            "core.llm.provider": "box",
            "plugin.cmd.enabled": "true",
            "plugin.cmd.allow_root": "true",
        })
        people = PeopleRegistry.open(data)
        people.ensure_owner(default_owner_name())
        people.add("mum", "adult")
        mum_key = people.new_key("mum")
        people.close()
        async with serve(data, kill=True) as daemon:
            mum = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=mum_key, max_retries=0, timeout=60)
            async with mum:
                waiting = await mum.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "list files please"}]
                )
            assert "request #1 is waiting" in str(waiting.choices[0].message.content)
        listed = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "homeagent_core.cli", "people", "audit", "--approvals", "--json", "--data", str(data),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await listed.communicate()
        assert listed.returncode == 0, out
        assert [(a["id"], a["person"], a["status"]) for a in json.loads(out)] == [(1, "mum", "pending")]

        async with serve(data) as daemon:
            await wait_for(lambda: any("[审批 #1]" in last_text(r) for r in model.requests))
            told = next(last_text(r) for r in model.requests if "[审批 #1]" in last_text(r))
            assert "cmd_run did not run: the daemon restarted before the owner decided; ask again" in told
            async with httpx.AsyncClient(base_url=daemon.url, headers={"X-API-Key": API_KEY}, timeout=60) as owner:
                late = await owner.post("/api/v1/approvals/1", json={"approve": True})
                assert late.status_code == 409 and "was already interrupted" in late.json()["error"]
                mum = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=mum_key, max_retries=0, timeout=60)
                async with mum:
                    again = await mum.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "list files please"}]
                    )
                assert "request #2 is waiting" in str(again.choices[0].message.content)  # numbers go on
                approved = await owner.post("/api/v1/approvals/2", json={"approve": True})
                assert approved.status_code == 200, approved.text
                await wait_for(lambda: any("[审批 #2]" in last_text(r) for r in model.requests))
                history = (await owner.get("/api/v1/approvals", params={"history": 1})).json()["approvals"]
                assert [(a["id"], a["status"]) for a in history] == [(2, "approved"), (1, "interrupted")]
            ran = next(last_text(r) for r in model.requests if "[审批 #2]" in last_text(r))
            assert "it ran (ok)" in ran and "approved-run" in ran
