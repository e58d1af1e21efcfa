"""JSON schemas of typed functions, for tools registered from an out-of-process plugin.

The host validates every call against the schema the plugin sent, so the child only has to
describe its functions: the name from ``__name__``, the description from the docstring's
first paragraph, and one property per parameter from its annotation.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["function_schema"]


def _type_schema(hint: Any, where: str) -> dict[str, Any]:
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        annotated = dict(_type_schema(args[0], where))
        for meta in args[1:]:
            if isinstance(meta, str):
                annotated["description"] = meta
            elif isinstance(meta, dict):
                annotated.update(meta)
        return annotated
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _type_schema(members[0], where)
        return {"anyOf": [_type_schema(a, where) for a in members]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    container = origin or hint
    if container in (list, tuple, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _type_schema(args[0], where)
        return schema
    if container is dict:
        return {"type": "object"}
    raise TypeError(f"{where}: type {hint!r} has no JSON schema equivalent; use str, int, float, bool, list, dict")


def function_schema(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    """``(description, parameters)`` of a typed function.

    Raises:
        TypeError: an annotation has no JSON equivalent, or a parameter is positional-only.
    """
    doc = inspect.cleandoc(inspect.getdoc(fn) or "")
    description = doc.split("\n\n", 1)[0].strip() or name
    hints = typing.get_type_hints(fn, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra = True
            continue
        if param.kind is param.VAR_POSITIONAL or param.name in ("self", "cls"):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {name!r}: parameter {param.name!r} is positional-only; tools take keyword arguments")
        schema = _type_schema(hints.get(param.name, param.annotation), f"tool {name!r} parameter {param.name!r}")
        if param.default is param.empty:
            required.append(param.name)
        elif isinstance(param.default, str | int | float | bool):
            schema = {**schema, "default": param.default}
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not extra:
        parameters["additionalProperties"] = False
    return description, parameters
