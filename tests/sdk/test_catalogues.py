"""The message catalogue mechanism: language picking, field filling, fallbacks, and the SDK's
own catalogue (what chat bridges send) complete in both languages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homeagent_sdk.i18n import SDK, Catalogue, check, from_accept_language, language_of_text, normalize


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR,fr;q=0.9,zh-TW;q=0.5,en;q=0.4", "zh"),
        ("en;q=0.2, zh-Hans;q=0.7", "zh"),
        ("de", "en"),
        ("", "en"),
        ("zh;q=0, en", "en"),
        ("zh;q=bogus, en;q=0.1", "en"),
    ],
)
def test_the_browsers_language_is_its_most_wanted_one_we_speak(header: str, expected: str):
    assert from_accept_language(header) == expected


def test_language_names_and_text_languages():
    assert [normalize(v) for v in ("zh_CN.UTF-8", "EN-us", "zh-Hant", "C.UTF-8", "", None)] == [
        "zh", "en", "zh", None, None, None
    ]
    assert language_of_text("明天早上提醒我") == "zh"
    assert language_of_text("remind me at 7") == "en"
    assert language_of_text("   ", default="") == ""


def test_fields_are_filled_and_missing_things_stay_visible(tmp_path: Path):
    (tmp_path / "en.json").write_text(json.dumps({"hi": "Hello {name}", "only.en": "English only"}), encoding="utf-8")
    (tmp_path / "zh.json").write_text(json.dumps({"hi": "你好 {name}"}), encoding="utf-8")
    catalogue = Catalogue(tmp_path)
    assert catalogue.text("zh", "hi", name="小王") == "你好 小王"
    assert catalogue.text("en-GB", "hi", name="Li") == "Hello Li"
    assert catalogue.text("zh", "only.en") == "English only"  # a missing translation falls back to English
    assert catalogue.text("zh", "no.such.key") == "no.such.key"
    assert catalogue.text("zh", "hi") == "你好 {name}"  # an unfilled field stays visible, never a crash
    assert catalogue.both("hi", name="x") == {"zh": "你好 x", "en": "Hello x"}
    assert check(catalogue) == ["tmp_path/zh.json lacks 'only.en'".replace("tmp_path", tmp_path.name)]


def test_a_broken_catalogue_says_which_file(tmp_path: Path):
    (tmp_path / "en.json").write_text(json.dumps(["not", "an", "object"]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"en\.json: a message catalogue is a JSON object of strings"):
        Catalogue(tmp_path).text("en", "x")


def test_the_sdk_catalogue_is_complete_in_both_languages():
    assert check(SDK) == []
    code = SDK.both("pairing.code", code="AB12CD34")
    assert code["zh"].startswith("配对码：AB12CD34") and "homeagent pairing approve AB12CD34" in code["zh"]
    assert code["en"].startswith("Pairing code: AB12CD34")
