"""Wire types round-trip through JSON with the original's field names."""

from __future__ import annotations

import json

import pytest

from homeagent_sdk.types import (
    ConfigDef,
    Doc,
    InjectOptions,
    MediaAttachment,
    Priority,
    StageContext,
    ToolCall,
    ToolDef,
    ToolResult,
    Triple,
)


def roundtrip(obj):
    return type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))


def test_stage_context_round_trips_with_nested_calls_and_results():
    ctx = StageContext(
        raw_message="我叫小王",
        tool_calls=[ToolCall(id="c1", name="memory_recall", arguments={"keywords": ["小王"]})],
        tool_results=[ToolResult(call_id="c1", name="memory_recall", success=True, result="ok")],
        response=None,
        extra={"k": [1, 2]},
    )
    back = roundtrip(ctx)
    assert back == ctx
    assert isinstance(back.tool_calls[0], ToolCall)


def test_inject_options_send_only_non_zero_values():
    assert InjectOptions().to_dict() == {}
    opts = InjectOptions(no_memory=True, priority=Priority.L3)
    assert opts.to_dict() == {"no_memory": True, "priority": "L3"}
    assert roundtrip(opts).priority is Priority.L3


def test_media_bytes_travel_as_base64_and_come_back_as_bytes():
    att = MediaAttachment(digest="ab" * 32, mime="image/png", data=b"\x89PNG")
    data = att.to_dict()
    assert isinstance(data["data"], str)
    assert MediaAttachment.from_dict(data).data == b"\x89PNG"


def test_tool_def_keeps_handlers_out_of_the_wire_form():
    tool = ToolDef(name="t", description="d", handler=lambda: "x")
    assert "handler" not in tool.to_dict()
    assert tool.openai_schema()["function"]["name"] == "t"


def test_from_dict_rejects_missing_required_fields_with_the_type_name():
    with pytest.raises(TypeError, match="Triple"):
        Triple.from_dict({"subject": "a"})


def test_from_dict_ignores_unknown_keys_for_forward_compatibility():
    doc = Doc.from_dict({"id": "1", "title": "t", "content": "c", "future_field": 1})
    assert doc.id == "1"


def test_config_def_round_trips():
    d = ConfigDef(key="x", type="int", default=3, min=1, max=5, options=[])
    assert roundtrip(d) == d
