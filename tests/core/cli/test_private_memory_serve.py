"""A household's private memory through a real ``homeagent serve`` and a model server on loopback.

The people and their API keys are made with ``homeagent people add``/``key``; the mother and the
child talk to the daemon's web API with their own keys; the loopback model records every request
body. The mother's private remark is archived into the daemon's documents (the smallest working
window) and must be in no byte of a model request of the child's turn; what she says "告诉全家"
reaches the child's next turn.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from daemon_procs import Proc, env, homeagent, serve
from openai_loopback import openai_loopback

SECRET = "下周三我要去医院复查，别跟孩子说"
FAMILY = "告诉全家：周六晚上七点家庭聚餐"
KID_ASKS = "妈妈下周三要去哪里？"


def cli(data: Path, *args: str) -> str:
    run = subprocess.run(homeagent(*args, "--data", str(data)), env=env(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.fixture
def daemons() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


ADMIN_KEY = "test-admin-key-0123456789"


def test_the_mothers_private_remark_is_in_no_request_of_the_childs_turn(
    tmp_path: Path, daemons: list[Proc], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", ADMIN_KEY)  # the owner's key, for the memory page's routes
    data = tmp_path / "d"
    with openai_loopback() as model:
        for key, value in {
            "core.llm.sources.box.adapter": "openai",
            "core.llm.sources.box.base_url": model.base_url,
            "core.llm.sources.box.model": "loopback-model",
            "core.llm.provider": "box",
            "core.agent.max_context_size": "11",  # the smallest window: older turns go to documents
        }.items():
            cli(data, "config", "set", key, value)
        cli(data, "people", "add", "mum", "--role", "adult")
        cli(data, "people", "add", "kid", "--role", "child")
        keys = {name: json.loads(cli(data, "people", "key", name, "--json"))["api_key"] for name in ("mum", "kid")}
        proc = serve(data, daemons)
        found = re.search(r"web UI on (http://\S+?)/?\s*$", "".join(proc.seen), re.MULTILINE)
        assert found, "".join(proc.seen)
        url = found.group(1).rstrip("/")

        transcript: list[str] = []

        def say(who: str, text: str) -> list[str]:
            """Send ``text`` as ``who``; the bodies of the model requests of that turn."""
            before = len(model.requests)
            answer = httpx.post(f"{url}/api/v1/chat", json={"message": text}, timeout=120,
                                headers={"Authorization": f"Bearer {keys[who]}"})
            assert answer.status_code == 200, answer.text
            turn = [r for r in model.requests[before:] if text in json.dumps(r, ensure_ascii=False)]
            remembered = sorted({line.strip() for r in turn for m in r.get("messages", [])
                                 if m.get("role") == "system" for line in str(m.get("content", "")).splitlines()
                                 if any(w in line for w in ("医院", "家庭聚餐"))})
            transcript.append(f"{who}: {text}\n    memory in {who}'s request: {remembered or '(none of it)'}")
            return [json.dumps(r, ensure_ascii=False) for r in turn]  # this turn's (not a heartbeat's)

        assert any(SECRET in b for b in say("mum", SECRET))
        say("mum", FAMILY)
        for i in range(6):  # push both remarks out of her window into the documents
            say("mum", f"今天的天气记录第{i}条：多云")

        kid_turn = say("kid", KID_ASKS)
        assert kid_turn, "the child's turn made no model request"
        for body in kid_turn:
            for word in ("医院", "复查"):
                assert word not in body, f"{word!r} reached the child's request"

        assert any("家庭聚餐" in b for b in say("kid", "周六晚上家里有什么安排？"))
        # the same recall finds the remark for the mother herself: the filter, not a miss, kept it out
        assert any("医院" in b for b in say("mum", "我下周三要去哪里来着？"))

        # the owner shares it (through the running daemon): now it is the household's
        listed = httpx.get(f"{url}/api/v1/memory/documents", params={"q": "下周三 医院 复查"},
                           headers={"X-API-Key": ADMIN_KEY}, timeout=60).json()["documents"]
        ids = [d["id"] for d in listed if d["content"] == SECRET]
        assert ids and all(d["person"] == "mum" for d in listed if d["id"] in ids)
        shared = json.loads(cli(data, "memory", "share", *ids, "--json"))
        assert shared["documents"] == ids and shared["unknown"] == []
        assert any("医院" in b for b in say("kid", "妈妈下周三到底要去哪里呀？"))
        print("\n".join(["", "The household, as each person's request saw it:", *transcript]))
