"""The core catalogue: complete in both languages, every key the web UI asks for exists, every
built-in setting has a Chinese description, and the CLI speaks the language it is set to."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homeagent_core.agent.triage import busy_notice
from homeagent_core.cli import app as cli_app
from homeagent_core.cli.config_docs import collect_plugin_definitions
from homeagent_core.config import CORE_DEFS
from homeagent_core.i18n import CORE, cli_language, config_description, locale_language, stored_setting
from homeagent_sdk.i18n import check

STATIC = Path(__file__).resolve().parents[2] / "homeagent_core" / "builtin" / "webui" / "static"


def test_the_core_catalogue_is_complete_in_both_languages():
    assert check(CORE) == []


def test_every_message_the_web_ui_asks_for_is_in_the_catalogue():
    wanted: set[str] = set()
    for path in STATIC.glob("*.js"):
        wanted |= set(re.findall(r"""\bt\(\s*["']([a-z_]+(?:\.[a-z_]+)+)["']""", path.read_text(encoding="utf-8")))
        for prefix in re.findall(r"""\bt\(`([a-z_.]+)\$\{""", path.read_text(encoding="utf-8")):
            wanted |= {k for k in CORE.messages("en") if k.startswith(prefix)} or {prefix + "<missing>"}
    for path in STATIC.glob("*.html"):
        wanted |= set(re.findall(r'data-i18n(?:-[a-z-]+)?="([^"]+)"', path.read_text(encoding="utf-8")))
    assert len(wanted) > 150
    english = CORE.messages("en")
    assert sorted(wanted - set(english)) == []


def test_no_page_carries_hard_coded_chinese_any_more():
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for path in [*STATIC.glob("*.js"), *STATIC.glob("*.html")]:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines()
                 if cjk.search(line) and not line.strip().startswith("//") and "lang.zh" not in line]
        assert lines == [], f"{path.name} has words outside the catalogue: {lines[:3]}"


def test_every_built_in_setting_has_a_chinese_description():
    definitions = [*CORE_DEFS, *(d for defs in collect_plugin_definitions().values() for d in defs)]
    missing = [d.key for d in definitions if d.description and config_description(d, "zh") == d.description]
    assert missing == [], "add config.<key> to homeagent_core/i18n/zh.json for: " + ", ".join(missing)
    addr = next(d for d in definitions if d.key == "plugin.webui.addr")
    assert config_description(addr, "zh") == "监听地址 host:port。"
    assert config_description(addr, "en") == "Listen address host:port."


def test_busy_notice_comes_from_the_catalogue_in_the_senders_language():
    assert busy_notice("在吗", 90) == CORE.text("zh", "notice.busy", minutes=2)
    assert busy_notice("hello?", 90) == CORE.text("en", "notice.busy", minutes=2)


def test_the_cli_follows_the_setting_then_the_locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOMEAGENT_HOME", str(tmp_path))
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert locale_language() == "zh" and stored_setting() == "auto" and cli_language() == "zh"
    with sqlite3.connect(tmp_path / "config.db") as db:
        db.execute("CREATE TABLE config_webui (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO config_webui VALUES ('plugin.webui.language', 'en')")
    assert cli_language() == "en"
    monkeypatch.setenv("LANG", "C.UTF-8")
    with sqlite3.connect(tmp_path / "config.db") as db:
        db.execute("UPDATE config_webui SET value = 'zh'")
    result = CliRunner().invoke(cli_app, ["config", "get", "no.such.key", "--data", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.startswith("错误："), result.output


def test_pairing_commands_speak_the_clis_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    listed = CliRunner().invoke(cli_app, ["pairing", "list", "--data", str(tmp_path)])
    assert (listed.exit_code, listed.output) == (0, "没有配对请求\n")
    wrong = CliRunner().invoke(cli_app, ["pairing", "approve", "NOPE", "--data", str(tmp_path)])
    assert wrong.exit_code == 1, wrong.output
    assert wrong.output.startswith("错误：这个数据目录里没有任何聊天渠道的配对请求"), wrong.output
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    listed = CliRunner().invoke(cli_app, ["pairing", "list", "--data", str(tmp_path)])
    assert listed.output == "no pairing requests\n"
