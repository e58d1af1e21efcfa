"""A ``core.*`` request's params read, and its result written, the way every method does it.

Params must be a JSON object; injection options (priority, memory policy, the sender a chat
bridge names) are decoded into :class:`InjectOptions`, with ``L4`` kept for the kernel; results
that are SDK dataclasses go back as plain dicts.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from homeagent_sdk.types import InjectOptions, Principal, Priority

__all__ = ["inject_options", "maybe", "params_dict", "plain", "principal_of"]


def params_dict(params: Any, method: str) -> dict[str, Any]:
    """A request's params as a dict (none: empty); anything but a JSON object is refused, naming ``method``."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ValueError(f"参数解析失败: {method} expects a JSON object, got {type(params).__name__}")
    return params


def plain(value: Any) -> Any:
    """``value`` for the wire: SDK dataclasses as their dicts, inside lists and dicts too."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


async def maybe(value: Any) -> Any:
    """``value``, awaited when a service member answered with an awaitable."""
    return await value if inspect.isawaitable(value) else value


def inject_options(params: dict[str, Any], *, interrupt: bool = False) -> InjectOptions:
    """The injection options in ``params``; an interrupt defaults to ``L1`` and ``L4`` becomes ``L3``."""
    priority = params.get("priority") or ("L1" if interrupt else None)
    level = None
    if priority:
        try:
            level = Priority(str(priority).upper())
        except ValueError:
            raise ValueError(f"参数解析失败: priority must be L1..L4, got {priority!r}") from None
        if level is Priority.L4:
            level = Priority.L3  # L4 is reserved for the kernel
    return InjectOptions(
        no_memory=bool(params.get("no_memory", False)),
        context_policy=str(params.get("context_policy", "") or ""),
        recall_policy=str(params.get("recall_policy", "") or ""),
        cleaner_name=str(params.get("cleaner_name", "") or ""),
        priority=level,
        message_id=str(params.get("message_id", "") or ""),
        principal=principal_of(params.get("principal")),
    )


def principal_of(raw: Any) -> Principal | None:
    """The sender a chat bridge names (door and account); the kernel decides what it may do."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"参数解析失败: principal must be an object with door and account, got {raw!r}")
    return Principal.from_dict(raw)
