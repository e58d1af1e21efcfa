"""JSON schemas of typed functions: how a plain function becomes a tool.

One implementation for every place that turns a function into a tool definition — the kernel's
tool registry and the out-of-process child runtime: the description comes from the docstring
(Google ``Args:`` or Sphinx ``:param:`` entries describe the parameters), one property per
parameter from its annotation (``Annotated``, ``Literal``, ``Enum``, unions, sequences and
mappings included), required parameters are those without a default.
:func:`tool_from_function` wraps that into a :class:`~homeagent_sdk.types.ToolDef`.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from homeagent_sdk.errors import UsageError
from homeagent_sdk.types import ToolDef, ToolOptions

__all__ = ["TOOL_NAME_RE", "check_tool_name", "function_schema", "tool_from_function", "type_schema"]

#: What LLM APIs accept as a function name.
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _doc_sections(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {param: description}).

    Understands Google style (``Args:`` / ``Arguments:`` / ``Parameters:`` blocks with
    ``name (type): text`` entries) and Sphinx style (``:param name: text``).
    """
    doc = inspect.cleandoc(doc or "")
    params: dict[str, str] = {}
    desc_lines: list[str] = []
    section = ""
    current = ""
    for line in doc.splitlines():
        stripped = line.strip()
        sphinx = re.match(r":param\s+(?:[\w\[\], |]+\s+)?(\w+)\s*:\s*(.*)", stripped)
        if sphinx:
            section, current = "sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if re.match(r"^(Args|Arguments|Parameters|Params)\s*:\s*$", stripped):
            section, current = "args", ""
            continue
        if re.match(r"^(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$", stripped) or stripped.startswith(
            (":return", ":raises", ":rtype")
        ):
            section, current = "other", ""
            continue
        if section == "args":
            entry = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if entry and not line.startswith(" " * 8):
                current = entry.group(1)
                params[current] = entry.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
            continue
        if section == "sphinx":
            if current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
            continue
        if section == "other":
            continue
        desc_lines.append(line)
    return "\n".join(desc_lines).strip(), params


def type_schema(hint: Any, where: str) -> dict[str, Any]:
    """JSON schema of one annotation.

    Raises:
        UsageError: the annotation has no JSON equivalent (the message names ``where``).
    """
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    schema: dict[str, Any]
    if origin is typing.Annotated:
        schema = dict(type_schema(args[0], where))
        for meta in args[1:]:
            if isinstance(meta, str):
                schema["description"] = meta
            elif isinstance(meta, dict):
                schema.update(meta)
        return schema
    if hint is None or hint is type(None):
        return {"type": "null"}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return type_schema(members[0], where)
        return {"anyOf": [type_schema(a, where) for a in members]}
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {type(a) for a in args}
        if len(kinds) == 1:
            only = type_schema(kinds.pop(), where)
            schema.update({k: v for k, v in only.items() if k == "type"})
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    container = origin or hint
    if container in (list, tuple, set, frozenset) or (
        isinstance(container, type) and issubclass(container, Sequence) and container not in (str, bytes)
    ):
        schema = {"type": "array"}
        if args and not (container is tuple and len(args) == 2 and args[1] is Ellipsis):
            if container is tuple and len(args) > 1:
                schema["prefixItems"] = [type_schema(a, where) for a in args]
            else:
                schema["items"] = type_schema(args[0], where)
        elif args:
            schema["items"] = type_schema(args[0], where)
        return schema
    if container is dict or (isinstance(container, type) and issubclass(container, Mapping)):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = type_schema(args[1], where)
        return schema
    raise UsageError(
        f"{where}: type {hint!r} has no JSON schema equivalent; use str, int, float, bool, "
        "list, dict, Literal, an Enum, or register an explicit ToolDef with `parameters`"
    )


def _jsonable(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        return True
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def function_schema(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    """``(description, parameters)`` of a typed function, ``parameters`` being a JSON Schema object.

    Raises:
        UsageError: a positional-only parameter, unresolvable hints, or an annotation without a
            JSON equivalent (the message names the tool and the parameter).
    """
    doc_desc, param_docs = _doc_sections(inspect.getdoc(fn) or "")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UsageError(f"tool {name!r}: cannot resolve its type hints ({exc})") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra_allowed = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra_allowed = True
            continue
        if param.kind is param.VAR_POSITIONAL or param.name in ("self", "cls"):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise UsageError(
                f"tool {name!r}: parameter {param.name!r} is positional-only; tools are called with keyword arguments"
            )
        schema = dict(type_schema(hints.get(param.name, param.annotation), f"tool {name!r} parameter {param.name!r}"))
        if param.name in param_docs and "description" not in schema:
            schema["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is not None and _jsonable(param.default):
            schema["default"] = param.default.value if isinstance(param.default, enum.Enum) else param.default
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if not extra_allowed:
        parameters["additionalProperties"] = False
    return doc_desc or name, parameters


def check_tool_name(name: str, plugin: str = "") -> None:
    """Refuse a name LLM APIs do not accept.

    Raises:
        UsageError: the name is not 1-64 characters from a-z, A-Z, 0-9, '_' and '-'.
    """
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        owner = f" of plugin {plugin!r}" if plugin else ""
        raise UsageError(f"tool name {name!r}{owner} is invalid: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-'")


def tool_from_function(fn: Callable[..., Any], *, plugin: str = "", **options: Unpack[ToolOptions]) -> ToolDef:
    """Build a :class:`ToolDef` from a typed function (sync or ``async def``).

    Raises:
        UsageError: a lambda without ``name``, an invalid tool name, a positional-only
            parameter, or an annotation without a JSON equivalent.
    """
    fn_name = getattr(fn, "__name__", "")
    name = options.get("name")
    if name is None:
        if not fn_name or fn_name == "<lambda>":
            raise UsageError(
                "a lambda (or a callable without __name__) cannot name a tool: pass name='...' "
                "to registry.add(), e.g. registry.add(lambda x: x, name='echo')"
            )
        name = fn_name
    check_tool_name(name, plugin)
    description_from_doc, parameters = function_schema(fn, name)
    tool = ToolDef(name=name, description=description_from_doc, parameters=parameters, plugin=plugin, handler=fn)
    return tool.with_options(options)
