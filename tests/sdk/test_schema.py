"""One schema derivation for in-process and out-of-process tools."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Literal

import pytest

from homeagent_sdk import hookimpl
from homeagent_sdk._proc_harness import ProcHarness
from homeagent_sdk.errors import UsageError
from homeagent_sdk.schema import function_schema


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def weather(city: str, days: Annotated[int, "how many days"] = 1, unit: Unit = Unit.C,
            detail: Literal["short", "long"] = "short") -> str:
    """Forecast for a city.

    Args:
        city: the city, e.g. 杭州.
    """
    return city


def test_a_typed_function_becomes_a_json_schema():
    description, parameters = function_schema(weather, "weather")
    assert description == "Forecast for a city."
    props = parameters["properties"]
    assert props["city"] == {"type": "string", "description": "the city, e.g. 杭州."}
    assert props["days"] == {"type": "integer", "description": "how many days", "default": 1}
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"], "default": "celsius"}
    assert props["detail"] == {"enum": ["short", "long"], "type": "string", "default": "short"}
    assert parameters["required"] == ["city"] and parameters["additionalProperties"] is False


def test_unusable_signatures_are_refused_with_the_tool_and_parameter_named():
    def positional(x: int, /) -> int:
        return x

    def opaque(x: object) -> object:
        return x

    with pytest.raises(UsageError, match="tool 'positional': parameter 'x' is positional-only"):
        function_schema(positional, "positional")
    with pytest.raises(UsageError, match="tool 'opaque' parameter 'x'"):
        function_schema(opaque, "opaque")


async def test_an_out_of_process_tool_gets_the_same_schema_as_an_in_process_one(tmp_path: Path):
    class Plugin:
        @hookimpl
        def register_tools(self, registry):
            registry.add(weather)

    harness = ProcHarness(Plugin(), name="forecast", data_dir=tmp_path)
    await harness.start()
    try:
        sent = harness.tools["weather"]
    finally:
        await harness.stop()
    definition = sent.get("def", sent)
    assert (definition["description"], definition["parameters"]) == function_schema(weather, "weather")
