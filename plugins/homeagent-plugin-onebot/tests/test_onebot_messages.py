"""OneBot v11 message parsing: segment arrays, CQ strings, escapes, odd input."""

from __future__ import annotations

from homeagent_plugin_onebot.message import cq_escape, cq_unescape, parse_cq, parse_message, render_segments


def test_cq_strings_parse_to_segments_with_escapes():
    raw = "hi &#91;not code&#93; [CQ:at,qq=10001] [CQ:image,file=a.jpg,url=http://x/a?b=1&#44;2]"
    segments = parse_cq(raw)
    assert segments[0] == {"type": "text", "data": {"text": "hi [not code] "}}
    assert segments[1] == {"type": "at", "data": {"qq": "10001"}}
    assert segments[3] == {"type": "image", "data": {"file": "a.jpg", "url": "http://x/a?b=1,2"}}
    assert cq_unescape(cq_escape("a&[b],c", param=True)) == "a&[b],c"
    assert parse_cq(render_segments(segments)) == segments


def test_segments_give_text_mentions_replies_and_media():
    parsed = parse_message(
        [
            {"type": "reply", "data": {"id": "77"}},
            {"type": "at", "data": {"qq": "10001"}},
            {"type": "text", "data": {"text": " 看这张 "}},
            {"type": "face", "data": {"id": "14"}},
            {"type": "image", "data": {"file": "x.image", "url": "http://h/x"}},
            {"type": "record", "data": {"file": "v.amr"}},
            {"type": "file", "data": {"name": "a.pdf", "url": "http://h/a"}},
            {"type": "at", "data": {"qq": "555", "name": "小李"}},
        ],
        "10001",
    )
    assert parsed.at_me and parsed.reply_to == "77"
    assert parsed.text == "看这张 [表情]@小李"
    assert [k for k, _ in parsed.media] == ["image", "record", "file"]


def test_unknown_and_malformed_segments_never_raise():
    parsed = parse_message([{"type": "dice", "data": {"result": 3}}, "junk", {"data": {}}, {"type": "text"}], "1")
    assert parsed.unknown == ["dice"] and parsed.malformed == 2 and parsed.text == "[dice]"
    assert parse_message(None).malformed == 1
    assert parse_message("[CQ:broken").text == "[CQ:broken"
