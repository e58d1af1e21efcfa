"""Prompt assembly: token estimate, budget split, catalogue, persona, timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from homeagent_core.agent.channels import ChannelRegistry
from homeagent_core.agent.kernel import KernelSettings
from homeagent_core.agent.prompt import MAX_BUDGET, PromptBuilder, Timeline, estimate_tokens
from homeagent_core.agent.tools import ToolRegistry
from homeagent_sdk._fake_model import FakeModel

MakeKernel = Any


def test_token_estimate_counts_cjk_per_character_and_ascii_per_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("你好世界") == 4
    assert estimate_tokens("a" * 40) == 10
    assert estimate_tokens("你好 hello") == 2 + 2  # 2 CJK + 6 ASCII chars ~ 2 tokens


def test_budget_target_is_eighty_percent_of_the_window_capped_at_600k() -> None:
    assert PromptBuilder(context_window=100_000).target == 80_000
    assert PromptBuilder(context_window=2_000_000).target == MAX_BUDGET


def _build(
    builder: PromptBuilder, blocks: list[str], timeline: Timeline
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    return builder.build(
        channel="cli",
        sync_reply=True,
        tools=ToolRegistry(),
        channels=ChannelRegistry(),
        memory_blocks=blocks,
        current={"role": "user", "content": "现在"},
        current_tokens=estimate_tokens("现在"),
        timeline=timeline,
    )


def test_memory_gets_at_most_a_third_and_the_timeline_two_thirds() -> None:
    builder = PromptBuilder(system_prompt="sys", context_window=2_000)  # target 1600 tokens
    timeline = Timeline(max_events=1000)
    for n in range(500):
        timeline.append("user" if n % 2 == 0 else "assistant", f"第{n}条消息内容")
    blocks = ["记" * 2000]  # far larger than the memory budget
    messages, stats = _build(builder, blocks, timeline)
    remaining = stats["target"] - stats["fixed"]
    assert stats["memory_budget"] == remaining // 3
    assert stats["memory_used"] <= stats["memory_budget"]
    history = messages[1:-1]
    used = sum(estimate_tokens(m["content"]) + 4 for m in history)
    assert used <= stats["timeline_budget"] == remaining * 2 // 3
    assert history[-1]["content"] == "第499条消息内容"  # newest kept, oldest dropped
    assert 0 < len(history) < 500
    assert messages[0]["content"].endswith("…")  # the block was cut to fit


def test_memory_blocks_are_kept_whole_while_they_fit() -> None:
    messages, stats = _build(
        PromptBuilder(system_prompt="sys"), ["【记忆索引】 小王", "[Related Memory Docs] 杭州"], Timeline()
    )
    assert "## 记忆\n【记忆索引】 小王\n\n[Related Memory Docs] 杭州" in messages[0]["content"]
    assert stats["memory_used"] == estimate_tokens("【记忆索引】 小王") + estimate_tokens("[Related Memory Docs] 杭州")


def test_timeline_is_bounded_to_its_size() -> None:
    timeline = Timeline(max_events=3)
    for n in range(5):
        timeline.append("user", str(n))
    assert [e.content for e in timeline.events()] == ["2", "3", "4"]


def test_catalogue_lists_each_plugin_once_with_a_short_description() -> None:
    tools = ToolRegistry()
    tools.add(lambda: "", name="a1", description="A very long description " * 10, plugin="alpha")
    tools.add(lambda: "", name="a2", description="second", plugin="alpha")
    tools.add(lambda: "", name="b1", description="Beta tool", plugin="beta")
    text = PromptBuilder().catalogue(tools)
    lines = text.splitlines()
    assert (
        lines[2].startswith("- alpha (2 tools): A very long description")
        and len(lines[2]) <= len("- alpha (2 tools): ") + 60
    )
    assert lines[3] == "- beta (1 tools): Beta tool"


async def test_persona_file_in_the_data_dir_overrides_the_setting(make_kernel: MakeKernel, tmp_path: Path) -> None:
    (tmp_path / "personal").mkdir()
    (tmp_path / "personal" / "personal.md").write_text("你是小宅，说话温柔。", encoding="utf-8")
    model = FakeModel(["嗯"])
    settings = KernelSettings(system_prompt="基础指令", personal_prompt="设置里的人格")
    kernel = await make_kernel(model=model, settings=settings, data_dir=tmp_path)
    await kernel.ask("你是谁")
    system = model.requests[0]["messages"][0]["content"]
    assert system.startswith("基础指令\n\n## 人格设定\n你是小宅，说话温柔。")
    assert "设置里的人格" not in system


async def test_without_a_persona_file_the_setting_is_used(make_kernel: MakeKernel, tmp_path: Path) -> None:
    model = FakeModel(["嗯"])
    kernel = await make_kernel(model=model, settings=KernelSettings(personal_prompt="设置里的人格"), data_dir=tmp_path)
    await kernel.ask("你是谁")
    assert "## 人格设定\n设置里的人格" in model.requests[0]["messages"][0]["content"]


async def test_the_kernel_timeline_keeps_max_context_size_events(make_kernel: MakeKernel) -> None:
    model = FakeModel(default="ok")
    kernel = await make_kernel(model=model, settings=KernelSettings(max_context_size=4))
    for n in range(4):
        await kernel.ask(f"q{n}")
    history = model.requests[-1]["messages"][1:-1]
    # the newest 4 events are ok, q2, ok, q3; q3 is the current input, sent last
    assert [m["content"] for m in history] == ["ok", "q2", "ok"]
