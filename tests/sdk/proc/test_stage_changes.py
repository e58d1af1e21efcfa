"""stage.invoke sends back exactly what a child's handler changed, including in-place edits."""

from __future__ import annotations

from pathlib import Path

from homeagent_sdk import hookimpl
from homeagent_sdk._proc_harness import ProcHarness
from homeagent_sdk.types import StageContext


class Editor:
    @hookimpl
    def pre_action(self, ctx):
        ctx.context_msgs.append({"role": "system", "content": "be brief"})  # in-place list edit
        ctx.extra["seen"] = True  # in-place dict edit
        ctx.errors = ["replaced"]  # replaced list

    @hookimpl
    def before_output(self, ctx):
        ctx.final_text = ctx.final_text.upper()
        ctx.drop = True

    @hookimpl
    def after_output(self, ctx):
        ctx.response = None  # a plugin cannot un-set a response
        ctx.phase = "tampered"  # read only


async def test_in_place_and_replaced_fields_come_back_and_nothing_else(tmp_path: Path):
    harness = ProcHarness(Editor(), name="editor", data_dir=tmp_path)
    await harness.start()
    try:
        ctx = StageContext(raw_message="hi", context_msgs=[{"role": "user", "content": "hi"}], extra={"k": 1})
        answer = await harness.run_stage("pre_action", ctx)
        assert set(answer["changed"]) == {"context_msgs", "extra", "errors"}
        assert ctx.context_msgs[-1] == {"role": "system", "content": "be brief"}
        assert ctx.extra == {"k": 1, "seen": True} and ctx.errors == ["replaced"]

        ctx.final_text = "done"
        answer = await harness.run_stage("before_output", ctx)
        assert set(answer["changed"]) == {"final_text", "drop"}
        assert ctx.final_text == "DONE" and ctx.drop is True

        ctx.response = "kept"
        answer = await harness.run_stage("after_output", ctx)
        assert "response" not in (answer.get("changed") or {}) and "phase" not in (answer.get("changed") or {})
        assert ctx.response == "kept"
    finally:
        await harness.stop()
