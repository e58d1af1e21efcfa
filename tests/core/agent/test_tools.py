"""ToolRegistry: schemas from functions, registration rules, validation, execution."""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import threading
import time
from typing import Annotated, Any, Literal

import pytest

from homeagent_core.agent.tools import ToolRegistry, run_batch, tool_from_function, validate_arguments
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.errors import PluginValidationError, UsageError
from homeagent_sdk.types import ToolCall, ToolDef, ToolResult


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def forecast(
    city: str,
    days: int = 1,
    unit: Unit = Unit.C,
    detail: Literal["short", "long"] = "short",
    tags: list[str] | None = None,
    lat: Annotated[float | None, "latitude in degrees"] = None,
) -> str:
    """Weather forecast for a city.

    Looks the city up first.

    Args:
        city: the city name, in any language
        days: how many days
            (continued description)
        tags: labels to attach
    """
    return f"{city}/{days}/{unit}/{detail}/{tags}/{lat}"


def test_function_becomes_a_tool_with_name_description_and_schema() -> None:
    tool = tool_from_function(forecast, plugin="weather")
    assert tool.name == "forecast"
    assert tool.description == "Weather forecast for a city.\n\nLooks the city up first."
    props = tool.parameters["properties"]
    assert props["city"] == {"type": "string", "description": "the city name, in any language"}
    assert props["days"] == {"type": "integer", "description": "how many days (continued description)", "default": 1}
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"], "default": "celsius"}
    assert props["detail"] == {"enum": ["short", "long"], "type": "string", "default": "short"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": "labels to attach"}
    assert props["lat"] == {"type": "number", "description": "latitude in degrees"}
    assert tool.parameters["required"] == ["city"]
    assert tool.parameters["additionalProperties"] is False
    assert tool.handler is forecast and tool.plugin == "weather"


def test_sphinx_style_docstrings_describe_parameters() -> None:
    def lookup(term: str, limit: int = 5) -> list[str]:
        """Search the glossary.

        :param term: what to look for
        :param limit: most results
        :returns: matching entries
        """
        return []

    tool = tool_from_function(lookup)
    assert tool.description == "Search the glossary."
    assert tool.parameters["properties"]["term"]["description"] == "what to look for"
    assert tool.parameters["properties"]["limit"]["description"] == "most results"


def test_a_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(UsageError, match="pass name="):
        tool_from_function(lambda x: x)
    assert tool_from_function(lambda x: x, name="identity").name == "identity"


def test_unsupported_annotations_and_bad_names_are_rejected_clearly() -> None:
    def when(at: complex) -> str:
        return ""

    with pytest.raises(UsageError, match=r"parameter 'at'.*no JSON schema"):
        tool_from_function(when)
    with pytest.raises(UsageError, match="1-64 characters"):
        tool_from_function(forecast, name="has space")


def test_duplicate_tool_names_are_rejected_naming_both_plugins() -> None:
    registry = ToolRegistry()
    registry.add(forecast, plugin="weather")
    with pytest.raises(
        PluginValidationError, match=r"'forecast' of plugin 'other'.*already registered by plugin 'weather'"
    ):
        registry.add(forecast, plugin="other")


def test_tooldef_without_handler_is_rejected() -> None:
    with pytest.raises(PluginValidationError, match="no handler"):
        ToolRegistry().add(ToolDef(name="x", description="x"), plugin="p")


def test_remove_plugin_unregisters_all_of_its_tools() -> None:
    removed: list[str] = []
    registry = ToolRegistry(on_remove=lambda t: removed.append(t.name))
    registry.add(forecast, plugin="weather")
    registry.add(lambda: "pong", name="ping", plugin="weather")
    registry.add(lambda: "x", name="other", plugin="misc")
    assert registry.remove_plugin("weather") == ["forecast", "ping"]
    assert registry.names() == ["other"] and removed == ["forecast", "ping"]


def test_schemas_are_openai_function_entries_cached_per_version() -> None:
    registry = ToolRegistry()
    registry.add(forecast, plugin="weather")
    first = registry.schemas()
    assert first[0]["type"] == "function" and first[0]["function"]["name"] == "forecast"
    assert registry.schemas() is first
    registry.add(lambda: "", name="ping", plugin="p")
    assert len(registry.schemas()) == 2


def test_validation_reports_every_problem_readably() -> None:
    schema = tool_from_function(forecast).parameters
    problems = validate_arguments(schema, {"days": "3", "unit": "kelvin", "color": "red"})
    assert "missing required argument 'city' (string)" in problems
    assert 'days must be integer, got "3"' in problems
    assert any(p.startswith("unit must be one of") for p in problems)
    assert any("unexpected argument 'color'" in p for p in problems)
    assert validate_arguments(schema, {"city": "杭州", "days": 2.0}) == []
    nested = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer", "minimum": 0}}}}
    assert validate_arguments(nested, {"xs": [1, -2]}) == ["xs[1] must be >= 0, got -2"]


def test_validation_follows_refs_like_the_schemas_mcp_servers_send() -> None:
    schema = {
        "type": "object",
        "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
        "properties": {"unit": {"$ref": "#/$defs/Unit"}, "extra": {"type": "any"}},
        "required": ["unit"],
    }
    assert validate_arguments(schema, {"unit": "kelvin"}) == ['unit must be one of ["c", "f"], got "kelvin"']
    assert validate_arguments(schema, {"unit": "c", "extra": [1]}) == []  # an unknown type name accepts anything


async def test_invalid_arguments_return_an_error_result_without_calling_the_tool() -> None:
    calls: list[Any] = []
    registry = ToolRegistry()
    registry.add(lambda city: calls.append(city), name="visit", plugin="p", description="visit")
    registry.add(forecast, plugin="weather")
    result = await registry.execute(ToolCall("c1", "forecast", {"days": 2}))
    assert not result.success
    assert "工具 forecast 参数错误" in result.result and "missing required argument 'city'" in result.result
    assert "city (string, required)" in result.result
    bad_json = await registry.execute(ToolCall("c2", "forecast", {"raw": '{"city": '}))
    assert "not valid JSON" in bad_json.result
    unknown = await registry.execute(ToolCall("c3", "nope", {}))
    assert not unknown.success and "未知工具 nope" in unknown.result
    assert calls == []


async def test_sync_and_async_tools_run_and_results_are_serialised() -> None:
    registry = ToolRegistry()

    async def add(a: int, b: int) -> dict[str, int]:
        """Add."""
        return {"sum": a + b}

    def shout(text: str) -> str:
        """Upper-case."""
        return text.upper()

    registry.add(add, plugin="m")
    registry.add(shout, plugin="m")
    registry.add(lambda: ToolResult("", "", False, "explicit failure"), name="fails", plugin="m")
    assert (await registry.execute(ToolCall("1", "add", {"a": 1, "b": 2}))).result == '{"sum": 3}'
    assert (await registry.execute(ToolCall("2", "shout", {"text": "hi"}))).result == "HI"
    explicit = await registry.execute(ToolCall("3", "fails", {}))
    assert (explicit.call_id, explicit.success, explicit.result) == ("3", False, "explicit failure")


async def test_a_tool_that_runs_too_long_is_cancelled_with_the_configured_seconds() -> None:
    cancelled = asyncio.Event()

    async def slow() -> str:
        """Never finishes."""
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            cancelled.set()
        return ""

    registry = ToolRegistry(default_timeout=0.2)
    registry.add(slow, plugin="p")
    result = await registry.execute(ToolCall("1", "slow", {}))
    assert not result.success
    assert result.result == "工具 slow 执行超时（0.2秒），已取消"
    assert cancelled.is_set()


async def test_a_tool_that_raises_becomes_an_error_result_and_a_logged_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(n: int) -> int:
        """Divide."""
        return 1 // n

    registry = ToolRegistry()
    registry.add(broken, plugin="maths")
    caplog.set_level(logging.ERROR)
    result = await registry.execute(ToolCall("1", "broken", {"n": 0}))
    assert not result.success
    assert result.result == "工具 broken 执行崩溃：ZeroDivisionError: integer division or modulo by zero"
    record = next(r for r in caplog.records if "broken" in r.getMessage())
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


async def test_a_sync_tool_that_hangs_on_every_call_never_starves_other_plugins_sync_tools() -> None:
    """Sync tools run in their own bounded pool; a plugin with two hung calls is refused."""
    release = threading.Event()

    def stuck() -> str:
        """Hangs."""
        release.wait(30)
        return "late"

    def where() -> str:
        """Names the thread it runs in."""
        return threading.current_thread().name

    registry = ToolRegistry(default_timeout=0.2)
    registry.add(stuck, plugin="hangs")
    registry.add(where, plugin="quick")
    try:
        outcomes = [await registry.execute(ToolCall(str(n), "stuck", {})) for n in range(10)]
        quick = await registry.execute(ToolCall("q", "where", {}))
        assert quick.success, quick.result
        assert [r.result for r in outcomes[:2]] == ["工具 stuck 执行超时（0.2秒），已取消"] * 2
        assert all(not r.success for r in outcomes)
        assert "plugin hangs: not called, 2 of its earlier calls are still running in worker pool 'tools'" in (
            outcomes[-1].result
        )
        assert quick.result.startswith("tools-"), quick.result
    finally:
        release.set()


def _timed_registry(log: list[tuple[str, str, float]], *, parallel_safe: bool, serial_name: str = "") -> ToolRegistry:
    registry = ToolRegistry()

    def make(name: str) -> Any:
        async def work() -> str:
            log.append((name, "start", time.perf_counter()))
            await asyncio.sleep(0.2)  # the tool's own work
            log.append((name, "end", time.perf_counter()))
            return name

        return work

    for name in ("a", "b", "c"):
        registry.add(make(name), name=name, plugin="p", parallel_safe=parallel_safe, serial=name == serial_name)
    return registry


async def test_a_parallel_safe_batch_runs_concurrently_in_about_one_tools_time() -> None:
    log: list[tuple[str, str, float]] = []
    registry = _timed_registry(log, parallel_safe=True)
    calls = [ToolCall(str(i), n, {}) for i, n in enumerate("abc")]
    assert registry.batch_is_parallel(calls)
    started = time.perf_counter()
    results = await run_batch(calls, registry.execute, parallel=True)
    wall = time.perf_counter() - started
    assert [r.result for r in results] == ["a", "b", "c"]
    starts = [t for _, kind, t in log if kind == "start"]
    first_end = min(t for _, kind, t in log if kind == "end")
    assert max(starts) < first_end  # every tool started before any finished
    assert wall < 0.45  # three 0.2 s tools in about one tool's time (serial: >= 0.6 s)


async def test_a_batch_with_one_tool_not_parallel_safe_runs_serially() -> None:
    log: list[tuple[str, str, float]] = []
    registry = _timed_registry(log, parallel_safe=True)
    registry.add(lambda: "plain", name="plain", plugin="p")
    calls = [ToolCall("1", "a", {}), ToolCall("2", "plain", {}), ToolCall("3", "b", {})]
    assert not registry.batch_is_parallel(calls)
    await run_batch(calls, registry.execute, parallel=registry.batch_is_parallel(calls))
    assert [(n, k) for n, k, _ in log] == [("a", "start"), ("a", "end"), ("b", "start"), ("b", "end")]


def test_serial_wins_over_parallel_safe() -> None:
    registry = _timed_registry([], parallel_safe=True, serial_name="b")
    assert not registry.batch_is_parallel([ToolCall("1", "a", {}), ToolCall("2", "b", {})])
    assert not registry.batch_is_parallel([ToolCall("1", "a", {})])  # one call: nothing to parallelise


async def test_a_result_nested_too_deeply_is_one_failed_call_and_the_turn_goes_on(make_kernel: Any) -> None:
    class Deep:
        name = "deep"

        @hookimpl
        def register_tools(self, registry: Any) -> None:
            def nested(depth: int) -> list[Any]:
                """A result nested ``depth`` lists deep (as a remote plugin may send it)."""
                value: list[Any] = []
                for _ in range(depth):
                    value = [value]
                return value

            registry.add(nested)

    # Deeper than the recursion limit, whatever an earlier test (hypothesis raises it) left it at.
    depth = sys.getrecursionlimit() + 1000
    model = FakeModel([ToolCallReply("nested", {"depth": depth}), "结果太深，换个办法"])
    kernel = await make_kernel(Deep(), model=model)
    reply = await kernel.ask("取一个很深的结果", timeout=10)
    assert reply == "结果太深，换个办法"
    (result,) = reply.tool_results
    assert not result.success and "nested too deeply to encode as JSON" in result.result
    last = model.requests[-1]["messages"][-1]
    assert last == {"role": "tool", "tool_call_id": result.call_id, "content": result.result}
