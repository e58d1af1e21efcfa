"""SKILL.md skills: real-world front matter shapes, the prompt index, the tools, install/remove."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core.cli.skills_cmd import app as skills_app
from homeagent_core.events import EventBus
from homeagent_core.plugins.skills import (
    PROMPT_DESCRIPTION_CHARS,
    SkillError,
    SkillIndex,
    SkillsPlugin,
    discover_skills,
    install_skill,
    parse_skill_md,
    remove_skill,
)
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.errors import ToolError
from homeagent_sdk.types import Event, ToolCall

FIXTURES = Path(__file__).resolve().parents[2] / "plugins" / "skills"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "skills")
    # Windows-edited file: CRLF line endings and a BOM.
    crlf = tmp_path / "skills" / "minimal" / "SKILL.md"
    crlf.write_bytes(b"\xef\xbb\xbf" + crlf.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    return tmp_path


@pytest.fixture
def index(data: Path) -> SkillIndex:
    return discover_skills(data, packages=False)


def test_differently_shaped_skills_are_indexed(index: SkillIndex) -> None:
    assert sorted(index.names()) == ["deep-research", "github-issues", "minimal", "pdf-tools", "天气查询"]
    weather = index.get("天气查询")
    assert weather is not None
    assert weather.version == "1.2.0" and weather.author == "小王"
    assert weather.metadata == {"tags": ["weather", "中文"]}
    minimal = index.get("MINIMAL")  # names match case-insensitively
    assert minimal is not None and minimal.description == "The smallest valid skill."
    assert minimal.body == "Say hello.\n" and minimal.version == "" and minimal.allowed_tools == []
    pdf = index.get("pdf-tools")
    assert pdf is not None and pdf.allowed_tools == ["Bash(python:*)", "Read", "Write"]
    github = index.get("github-issues")
    assert github is not None
    assert github.extra["homepage"].endswith("github-issues") and github.extra["user-invocable"] is True
    assert github.metadata["openclaw"]["requires"]["bins"] == ["gh"]
    long = index.get("deep-research")
    assert long is not None and len(long.description) > 1500 and long.license == "MIT"


def test_front_matter_errors_are_reported_per_skill_while_the_rest_load(index: SkillIndex) -> None:
    problems = {p.path.name: p.error for p in index.problems}
    assert set(problems) == {"broken-yaml", "no-frontmatter", "no-description", "sidecar-only"}
    assert "not valid YAML (line 3)" in problems["broken-yaml"]
    assert "no YAML front matter" in problems["no-frontmatter"]
    assert "needs a 'description'" in problems["no-description"]
    assert "sidecars are not supported" in problems["sidecar-only"]


def test_the_prompt_block_is_compact_and_cuts_long_descriptions(index: SkillIndex) -> None:
    block = index.prompt_block()
    lines = block.splitlines()
    assert "skill_info(name)" in lines[1]
    assert "- 天气查询: 查询中国城市的天气预报。用户问到天气、气温、下雨时使用。" in lines
    long_line = next(line for line in lines if line.startswith("- deep-research: "))
    assert long_line.endswith("…") and len(long_line) == len("- deep-research: ") + PROMPT_DESCRIPTION_CHARS
    assert SkillIndex([]).prompt_block() == ""


def test_skill_info_returns_the_full_text_and_lists_files(index: SkillIndex) -> None:
    text = index.info("天气查询")
    assert text.startswith("# Skill: 天气查询\n")
    assert "references/api.md" in text and "scripts/fetch.py" in text
    assert "2. 调用接口，回答用户。" in text
    with pytest.raises(ToolError, match="unknown skill 'nope'; available skills: "):
        index.info("nope")


def test_skill_file_reads_files_inside_the_skill(index: SkillIndex) -> None:
    assert "city=杭州" in index.file("天气查询", "references/api.md")
    assert index.file("天气查询", "./scripts/fetch.py") == 'print("fetch weather")\n'


@pytest.mark.parametrize(
    "path",
    ["../minimal/SKILL.md", "/etc/passwd", "references/../../minimal/SKILL.md", "..\\minimal\\SKILL.md",
     "C:/Windows/win.ini", ""],
)
def test_path_traversal_through_skill_file_is_refused(index: SkillIndex, path: str) -> None:
    with pytest.raises(ToolError, match="not allowed"):
        index.file("天气查询", path)


def test_a_link_pointing_outside_the_skill_is_refused(data: Path) -> None:
    secret = data / "secret.txt"
    secret.write_text("top secret")
    (data / "skills" / "minimal" / "leak.md").symlink_to(secret)
    index = discover_skills(data, packages=False)
    with pytest.raises(ToolError, match="points outside the skill"):
        index.file("minimal", "leak.md")
    assert "leak.md" not in index.info("minimal")


def test_binary_and_missing_files_get_clear_errors(index: SkillIndex) -> None:
    with pytest.raises(ToolError, match="binary file"):
        index.file("天气查询", "scripts/blob.bin")
    with pytest.raises(ToolError, match="does not exist"):
        index.file("天气查询", "references/missing.md")


def test_parse_accepts_crlf_bom_and_a_dots_closing_fence() -> None:
    front, body = parse_skill_md("\ufeff---\r\nname: x\r\ndescription: d\r\n...\r\nbody\r\n")
    assert front == {"name": "x", "description": "d"}
    assert body == "body\n"
    with pytest.raises(SkillError, match="must be a mapping"):
        parse_skill_md("---\n- a\n- b\n---\n")


async def test_the_model_uses_a_skill_through_the_tools_in_a_real_turn(index: SkillIndex) -> None:
    from homeagent_core.agent.kernel import Kernel
    from homeagent_core.plugins.manager import create_plugin_manager

    plugin = SkillsPlugin(index)
    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=[plugin])
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, "skill_detected", label="test")
    model = FakeModel([
        ToolCallReply("skill_info", {"name": "天气查询"}),
        ToolCallReply("skill_file", {"name": "天气查询", "path": "../minimal/SKILL.md"}),
        "查好了",
    ])
    kernel = Kernel(host, bus, model)
    await kernel.start()
    await host.startup(lambda name: _Sdk(bus, name))
    try:
        assert str(await kernel.ask("杭州天气怎么样")) == "查好了"
        tool_messages = [m["content"] for m in model.requests[2]["messages"] if m.get("role") == "tool"]
        assert tool_messages[0].startswith("# Skill: 天气查询")
        assert "not allowed" in tool_messages[1]
        await bus.drain()
        assert [e.data for e in seen] == [{"skill": "天气查询", "via": "skill_info"}]
        assert plugin.used == {"天气查询": 1}
    finally:
        await kernel.aclose()
        await bus.aclose()


class _Sdk:
    """The part of the scoped SDK the skills plugin uses: its event publisher."""

    def __init__(self, bus: EventBus, name: str) -> None:
        from homeagent_core.plugins.sdk import _Events

        self.events = _Events(bus, name)


def test_a_plugin_package_whose_entry_is_skill_md_is_indexed(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "minimal", tmp_path / "plugins" / "minimal-pkg")
    index = discover_skills(tmp_path, packages=False)
    skill = index.get("minimal")
    assert skill is not None and skill.origin == "plugin"


# --------------------------------------------------------------------------- install / remove


def _zip(folder: Path, target: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(target, "w") as zf:
        for path in folder.rglob("*"):
            if path.is_file():
                zf.write(path, prefix + path.relative_to(folder).as_posix())
    return target


def test_install_from_a_folder_a_zip_and_a_hmap(tmp_path: Path) -> None:
    skills = tmp_path / "data" / "skills"
    installed = install_skill(FIXTURES / "weather-cn", skills)
    assert installed.name == "天气查询" and (skills / "天气查询" / "references" / "api.md").is_file()
    zipped = install_skill(_zip(FIXTURES / "claude-style", tmp_path / "pdf.zip", prefix="pdf-tools/"), skills)
    assert zipped.path == skills / "pdf-tools"
    hmap = install_skill(_zip(FIXTURES / "minimal", tmp_path / "minimal.hmap"), skills)
    assert hmap.name == "minimal"
    assert sorted(discover_skills(tmp_path / "data", packages=False).names()) == ["minimal", "pdf-tools", "天气查询"]
    assert [p.name for p in skills.iterdir() if p.name.startswith(".")] == []


def test_install_refuses_broken_unsafe_or_duplicate_skills_and_writes_nothing(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    with pytest.raises(SkillError, match="not valid YAML"):
        install_skill(FIXTURES / "broken-yaml", skills)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("SKILL.md", "---\nname: evil\ndescription: d\n---\n")
        zf.writestr("../../escaped.txt", "x")
    with pytest.raises(SkillError, match="outside the skill folder"):
        install_skill(evil, skills)
    not_zip = tmp_path / "fake.zip"
    not_zip.write_text("not a zip")
    with pytest.raises(SkillError, match="not a valid zip"):
        install_skill(not_zip, skills)
    assert list(skills.iterdir()) == []
    install_skill(FIXTURES / "minimal", skills)
    with pytest.raises(SkillError, match="already installed"):
        install_skill(FIXTURES / "minimal", skills)
    assert install_skill(FIXTURES / "minimal", skills, overwrite=True).name == "minimal"
    assert not (tmp_path / "escaped.txt").exists()


def test_remove_deletes_the_skill_and_names_installed_ones_on_error(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    install_skill(FIXTURES / "weather-cn", skills)
    with pytest.raises(SkillError, match="installed: 天气查询"):
        remove_skill("nope", skills)
    assert remove_skill("天气查询", skills) == skills / "天气查询"
    assert list(skills.iterdir()) == []


def test_the_skills_command_installs_lists_and_removes(tmp_path: Path) -> None:
    runner = CliRunner()
    data = str(tmp_path / "data")
    result = runner.invoke(skills_app, ["install", str(FIXTURES / "openclaw-style"), "--data", data])
    assert result.exit_code == 0, result.output
    assert "installed skill github-issues" in result.output
    listed = runner.invoke(skills_app, ["list", "--data", data, "--json"])
    assert listed.exit_code == 0
    payload: dict[str, Any] = json.loads(listed.output)
    assert [s["name"] for s in payload["skills"]] == ["github-issues"]
    again = runner.invoke(skills_app, ["install", str(FIXTURES / "openclaw-style"), "--data", data])
    assert again.exit_code == 1 and "already installed" in again.output
    removed = runner.invoke(skills_app, ["remove", "github-issues", "--data", data])
    assert removed.exit_code == 0
    assert "no skills" in runner.invoke(skills_app, ["list", "--data", data]).output


async def test_execute_turns_errors_into_failed_results(index: SkillIndex) -> None:
    from homeagent_core.agent.tools import PluginToolRegistry, ToolRegistry

    registry = ToolRegistry()
    plugin = SkillsPlugin(index)
    plugin.register_tools(PluginToolRegistry(registry, "skills"))
    result = await registry.execute(ToolCall("1", "skill_file", {"name": "天气查询", "path": "/etc/passwd"}))
    assert not result.success and "not allowed" in result.result
    ok = await registry.execute(ToolCall("2", "skill_info", {"name": "pdf-tools"}))
    assert ok.success and "reference.md" in ok.result
