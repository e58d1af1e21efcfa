"""Tool arguments checked against the tool's JSON Schema, with problems worded for the model.

Validation is ``jsonschema`` (Draft 2020-12: ``$ref``, ``anyOf``/``oneOf``/``allOf``,
``prefixItems`` and every other keyword, unknown ones ignored). This module only words its
errors so a model can fix its call: ``missing required argument 'city' (string)``,
``days must be integer, got "3"``, ``xs[1] must be >= 0, got -2``. Two choices keep the old,
forgiving behaviour: an unknown type name in ``type`` accepts any value (tool schemas from MCP
servers sometimes say ``"any"``), and a value of the wrong type reports only that, not every
other keyword it then fails.

``jsonschema`` costs ~0.1 s to import: :func:`load_validator` (run in a worker thread by the
registry the first time) keeps that off the event loop.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["describe_value", "load_validator", "validate_arguments"]

_validator_cls: Any = None
_lock = threading.Lock()


def describe_value(value: Any) -> str:
    """``value`` as short JSON for a message (at most 60 characters)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def load_validator() -> Any:
    """The validator class (Draft 2020-12 with the forgiving ``type`` rule), imported once."""
    global _validator_cls
    if _validator_cls is None:
        with _lock:
            if _validator_cls is None:
                from jsonschema import Draft202012Validator, ValidationError, validators

                checker = Draft202012Validator.TYPE_CHECKER

                def forgiving_type(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[Any]:
                    kinds = types if isinstance(types, list) else [types]
                    known = checker._type_checkers  # unknown names accept anything, as before
                    if not any(k not in known or validator.is_type(instance, k) for k in kinds):
                        yield ValidationError(f"{instance!r} is not of type {kinds!r}")

                _validator_cls = validators.extend(Draft202012Validator, {"type": forgiving_type})
    return _validator_cls


def is_loaded() -> bool:
    """Whether :func:`load_validator` already ran (so validating does no import)."""
    return _validator_cls is not None


def validate_arguments(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Check ``value`` against a JSON schema; return readable problems (empty = valid)."""
    validator = load_validator()(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: len(e.absolute_path))  # outer problems first
    wrong_type = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    problems: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    for error in errors:
        at = tuple(error.absolute_path)
        if error.validator != "type" and at in wrong_type:
            continue  # a value of the wrong type: say only that
        key = (at, error.validator)
        if error.validator in ("required", "additionalProperties"):
            if key in seen:  # one error per missing name, worded together below
                continue
            seen.add(key)
        problems.extend(_words(error, _where(path, at)))
    return problems


def _where(base: str, at: tuple[Any, ...]) -> str:
    where = base
    for part in at:
        where = f"{where or 'arguments'}[{part}]" if isinstance(part, int) else (f"{where}.{part}" if where else part)
    return where


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _words(error: Any, path: str) -> list[str]:
    """The model-facing wording of one ``jsonschema`` error at ``path``."""
    where = path or "arguments"
    kind, expected, value, schema = error.validator, error.validator_value, error.instance, error.schema
    if kind == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        return [f"{where} must be {' or '.join(kinds)}, got {describe_value(value)}"]
    if kind == "enum":
        return [f"{where} must be one of {describe_value(expected)}, got {describe_value(value)}"]
    if kind == "const":
        return [f"{where} must be {describe_value(expected)}"]
    if kind in ("anyOf", "oneOf"):
        return [f"{where} does not match any allowed form ({describe_value(expected)})"]
    if kind == "required":
        props: Mapping[str, Any] = schema.get("properties", {})
        out = []
        for name in expected:
            if name not in value:
                sub = props.get(name, {})
                hint = f" ({sub['type']})" if isinstance(sub, dict) and sub.get("type") else ""
                out.append(f"missing required argument {_join(path, name)!r}{hint}")
        return out
    if kind == "additionalProperties":
        props = schema.get("properties", {})
        allowed = ", ".join(props) or "none"
        patterns = schema.get("patternProperties", {})
        extras = [n for n in value if n not in props and not any(re.search(p, n) for p in patterns)]
        return [f"unexpected argument {_join(path, name)!r} (allowed: {allowed})" for name in extras]
    messages = {
        "minItems": f"{where} needs at least {expected} items",
        "maxItems": f"{where} allows at most {expected} items",
        "minLength": f"{where} must have at least {expected} characters",
        "maxLength": f"{where} must have at most {expected} characters",
        "pattern": f"{where} must match the pattern {expected!r}",
        "minimum": f"{where} must be >= {expected}, got {value}",
        "maximum": f"{where} must be <= {expected}, got {value}",
        "exclusiveMinimum": f"{where} must be > {expected}, got {value}",
        "exclusiveMaximum": f"{where} must be < {expected}, got {value}",
    }
    return [messages.get(kind, f"{where}: {error.message}")]
