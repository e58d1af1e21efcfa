"""The language of the web UI over HTTP: the catalogue a browser gets, the switch, who may set
the household's language, and errors in the language asked for."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import httpx

from homeagent_core.builtin.webui.i18n_routes import LANGUAGE_COOKIE

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


def catalogue(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/javascript")
    text = response.text
    assert text.startswith("window.I18N = ") and text.endswith(";\n")
    return json.loads(text[len("window.I18N = "):-2])  # type: ignore[no-any-return]


async def test_the_catalogue_follows_the_browser_then_the_setting_then_the_browsers_own_choice(daemon: WebDaemon):
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anon:  # the login page needs it too
        zh = catalogue(await anon.get("/i18n/catalogue.js", headers={"Accept-Language": "zh-CN,zh;q=0.9"}))
        en = catalogue(await anon.get("/i18n/catalogue.js", headers={"Accept-Language": "en-US,en;q=0.9"}))
        assert (zh["lang"], zh["setting"], zh["messages"]["chat.send"]) == ("zh", "auto", "发送")
        assert (en["lang"], en["messages"]["chat.send"]) == ("en", "Send")
        assert not any(key.startswith("config.") for key in zh["messages"])  # the settings API sends those
        daemon.app.config.set("plugin.webui.language", "zh")
        assert catalogue(await anon.get("/i18n/catalogue.js", headers={"Accept-Language": "en"}))["lang"] == "zh"
        anon.cookies.set(LANGUAGE_COOKIE, "en")
        mine = catalogue(await anon.get("/i18n/catalogue.js", headers={"Accept-Language": "zh"}))
        assert (mine["lang"], mine["choice"], mine["setting"]) == ("en", "en", "zh")


async def test_the_owners_switch_sets_the_household_language_and_a_bad_choice_is_named(daemon: WebDaemon):
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anon:
        assert (await anon.post("/api/v1/language", json={"language": "zh"})).status_code == 401
    async with daemon.client() as owner:
        bad = await owner.post("/api/v1/language", json={"language": "klingon"})
        assert bad.status_code == 400
        assert bad.json()["error"] == "language must be one of auto, zh, en, got 'klingon'"
        assert (await owner.post("/api/v1/language", json={})).status_code == 400
        chosen = await owner.post("/api/v1/language", json={"language": "ZH"})
        assert chosen.status_code == 200
        assert chosen.json() == {"language": "zh", "setting": "zh", "saved_for": "household"}
        assert chosen.cookies.get(LANGUAGE_COOKIE) == "zh"
        assert daemon.app.config.get("plugin.webui.language") == "zh"
        settings = (await owner.get("/api/v1/settings?prefix=plugin.webui.")).json()
        meta = settings["meta"]["plugin.webui.addr"]
        assert (meta["description"], meta["description_en"]) == ("监听地址 host:port。", "Listen address host:port.")
        back = await owner.post("/api/v1/language", json={"language": "auto"})
        assert back.json()["setting"] == "auto" and daemon.app.config.get("plugin.webui.language") == "auto"
        assert 'homeagent_lang=""' in back.headers["set-cookie"]  # the browser's own choice is dropped


async def test_another_persons_switch_changes_only_their_browser(daemon: WebDaemon):
    daemon.app.people.add("mum", "adult")
    async with daemon.client() as owner:
        reset = await owner.post("/api/v1/people/mum/password")
        assert reset.status_code == 200, reset.text
        password = reset.json()["password"]
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as mum, aclosing(mum):
        answer = await mum.post("/api/v1/login", json={"username": "mum", "password": password})
        mum.headers["X-CSRF-Token"] = answer.json()["csrf_token"]
        chosen = await mum.post("/api/v1/language", json={"language": "zh"})
        assert chosen.status_code == 200 and chosen.json()["saved_for"] == "browser"
        assert daemon.app.config.get("plugin.webui.language") == "auto"
        assert catalogue(await mum.get("/i18n/catalogue.js", headers={"Accept-Language": "en"}))["lang"] == "zh"


async def test_a_failed_login_is_told_in_the_browsers_language(daemon: WebDaemon):
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anon:
        zh = await anon.post("/api/v1/login", json={"username": "admin", "password": "x"},
                             headers={"Accept-Language": "zh-CN"})
        en = await anon.post("/api/v1/login", json={"username": "admin", "password": "x"},
                             headers={"Accept-Language": "en-GB"})
    assert (zh.status_code, zh.json()["error"]) == (401, "用户名或密码错误")
    assert (en.status_code, en.json()["error"]) == (401, "Wrong user name or password")
