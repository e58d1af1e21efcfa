"""Value types passed between the kernel and plugins.

Field names follow the original wire shapes so that in-process, out-of-process and Lua
plugins see the same data. Every type converts to and from plain JSON-compatible dicts with
``to_dict()`` / ``from_dict()``; fields holding Python callables (tool handlers, cleaners) are
not part of the wire form.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict, TypeVar, get_type_hints

__all__ = [
    "STAGES",
    "Caps",
    "ChannelDef",
    "ConfigDef",
    "ContentBlock",
    "Doc",
    "Entity",
    "Event",
    "InjectOptions",
    "MediaAttachment",
    "Principal",
    "Priority",
    "Relation",
    "StageContext",
    "TextEvent",
    "ToolCall",
    "ToolDef",
    "ToolOptions",
    "ToolResult",
    "Triple",
]

_T = TypeVar("_T", bound="WireType")


#: Field metadata of values that stay in-process (callables): never serialised.
LOCAL: dict[str, Any] = {"wire": False}


class WireType:
    """Mixin: JSON round trip for dataclasses (nested dataclasses, enums, lists, dicts)."""

    _omit_empty: ClassVar[bool] = False

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-compatible wire form (local-only fields left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if not f.metadata.get("wire", True):
                continue
            value = _encode(getattr(self, f.name))
            if self._omit_empty and value in (None, "", [], {}, False, 0):
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls: type[_T], data: dict[str, Any]) -> _T:
        """Build an instance from its wire form; unknown keys are ignored.

        Raises:
            TypeError: ``data`` is not a mapping or a required field is missing.
        """
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__}.from_dict expects a dict, got {type(data).__name__}")
        hints = _hints(cls)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if not f.metadata.get("wire", True) or f.name not in data:
                continue
            kwargs[f.name] = _decode(hints.get(f.name, Any), data[f.name])
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise TypeError(f"{cls.__name__}.from_dict: {exc}") from None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _encode(value: Any) -> Any:
    if isinstance(value, WireType):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is type(None):
                continue
            return _decode(arg, value)
    if isinstance(hint, type):
        if issubclass(hint, WireType) and isinstance(value, dict):
            return hint.from_dict(value)
        if issubclass(hint, enum.Enum):
            return hint(value)
        if hint is bytes and isinstance(value, str):
            import base64

            return base64.b64decode(value)
    if origin is list and isinstance(value, list):
        (arg,) = typing.get_args(hint) or (Any,)
        return [_decode(arg, v) for v in value]
    if origin is dict and isinstance(value, dict):
        args = typing.get_args(hint)
        arg = args[1] if len(args) == 2 else Any
        return {k: _decode(arg, v) for k, v in value.items()}
    return value


class Priority(enum.StrEnum):
    """Interrupt level of an injected input; higher levels preempt lower ones.

    ``L4`` is reserved for the kernel and built-ins; out-of-process plugins are clamped to
    ``L3``. Plain queued inputs carry no level.
    """

    L1 = "L1"
    L2 = "L2"
    L3 = "L3"
    L4 = "L4"

    @property
    def rank(self) -> int:
        return int(self.value[1])


class Caps(enum.IntFlag):
    """Output-channel capability bits (values are the original SDK constants)."""

    TEXT = 1
    FILE = 2
    IMAGE = 4
    AUDIO = 8
    STRUCTURED = 16


# Cleaner: turns text into what should be embedded / remembered ("" = nothing).
Cleaner = Callable[[str], str]


@dataclass(slots=True)
class ToolCall(WireType):
    """One tool call the model asked for. ``arguments`` is always a decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    plugin: str = ""


@dataclass(slots=True)
class ToolResult(WireType):
    """What a tool call produced, as shown to the model.

    ``attachments`` (in-process tools only, not sent over the plugin protocol) are images the
    tool produced, e.g. a screenshot: a model that takes images gets them as image blocks
    right after the tool results.
    """

    call_id: str
    name: str
    success: bool
    result: str
    plugin: str = ""
    attachments: list[MediaAttachment] = field(default_factory=list, repr=False, compare=False, metadata=LOCAL)


class ToolOptions(TypedDict, total=False):
    """The keyword options of ``registry.add(tool, **options)``, the one definition of them.

    ``name`` and ``description`` replace what the function (its ``__name__`` and docstring) or
    the ``ToolDef`` says; ``no_memory``, ``parallel_safe`` and ``serial`` switch the flag on
    (a flag already set stays set); ``timeout`` (seconds) replaces the tool's own.
    """

    name: str | None
    description: str | None
    no_memory: bool
    parallel_safe: bool
    serial: bool
    timeout: float | None


@dataclass(slots=True)
class ToolDef(WireType):
    """A tool the model can call.

    ``parameters`` is a JSON Schema object. ``handler`` receives the validated arguments as
    keyword arguments and may be sync or ``async``; its return value (str, or anything
    JSON-serialisable) becomes the tool result. ``no_memory`` keeps the output out of memory;
    ``cleaner`` filters it first. A batch of calls runs concurrently only when every tool in it
    is ``parallel_safe``; ``serial`` forces serial execution.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    plugin: str = ""
    no_memory: bool = False
    context_policy: str = ""
    recall_policy: str = ""
    parallel_safe: bool = False
    serial: bool = False
    timeout: float | None = None
    handler: Callable[..., Any] | None = field(default=None, repr=False, compare=False, metadata=LOCAL)
    cleaner: Cleaner | None = field(default=None, repr=False, compare=False, metadata=LOCAL)

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools[]`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def with_options(self, options: ToolOptions) -> ToolDef:
        """A copy with ``registry.add()`` options applied (see :class:`ToolOptions`)."""
        changes: dict[str, Any] = {
            "no_memory": self.no_memory or options.get("no_memory", False),
            "parallel_safe": self.parallel_safe or options.get("parallel_safe", False),
            "serial": self.serial or options.get("serial", False),
        }
        for key in ("name", "description", "timeout"):
            value = options.get(key)
            if value is not None:
                changes[key] = value
        return dataclasses.replace(self, **changes)


@dataclass(slots=True)
class ChannelDef(WireType):
    """An input or output channel.

    Output channels declare ``caps`` and ``send``; the kernel generates the
    ``output_send__<name>`` and ``output_send__<name>_help`` tools for them. ``sync`` channels
    (webui, cli) receive the turn's final text; async ones (chat apps) are sent to explicitly
    by the model. Input channels declare how their inputs are remembered.
    """

    name: str
    plugin: str = ""
    description: str = ""
    caps: int = int(Caps.TEXT)
    sync: bool = True
    no_memory: bool = False
    context_policy: str = ""
    recall_policy: str = ""
    help: str = ""
    send: Callable[..., Awaitable[Any] | Any] | None = field(default=None, repr=False, compare=False, metadata=LOCAL)
    cleaner: Cleaner | None = field(default=None, repr=False, compare=False, metadata=LOCAL)


@dataclass(frozen=True, slots=True)
class Principal(WireType):
    """Who an input comes from: the person, their role, the door and the conversation thread.

    A door fills in what it knows. A chat-app door names the sender's ``account`` on its
    ``door`` (platform); the kernel resolves that to the person it is linked to (an unlinked
    sender is a guest). Only the core's own doors (terminal socket, web UI, library API) may
    name a ``person`` directly; from any other plugin a named person or role is ignored. The
    kernel fills in ``role`` from the person registry, whatever the door wrote.

    ``person`` "" = not known (a guest); ``role`` is ``owner``, ``adult``, ``child``, ``guest``,
    ``system`` (heartbeats) or a role the owner added.
    """

    _omit_empty: ClassVar[bool] = True

    person: str = ""
    role: str = ""
    door: str = ""
    thread: str = ""
    account: str = ""


@dataclass(slots=True)
class InjectOptions(WireType):
    """How an injected input is scheduled and remembered, and who it comes from.

    ``priority`` None = an ordinary queued input; a level makes it an interrupt.
    ``principal`` None = the door did not say who is speaking (see :class:`Principal`).
    ``message_id`` is the door's own id of the message (a chat app's message id, a client's
    request id): the same source sending the same id again is answered once. Without it an
    input is never treated as a duplicate.
    """

    _omit_empty: ClassVar[bool] = True

    no_memory: bool = False
    context_policy: str = ""
    recall_policy: str = ""
    cleaner_name: str = ""
    priority: Priority | None = None
    principal: Principal | None = None
    message_id: str = ""


@dataclass(slots=True)
class MediaAttachment(WireType):
    """A piece of media attached to a message or document; queries never return ``data``."""

    _omit_empty: ClassVar[bool] = True

    digest: str = ""
    mime: str = ""
    data: bytes | None = None
    name: str = ""


@dataclass(slots=True)
class ContentBlock(WireType):
    """One block of multimodal message content (OpenAI content-part shape)."""

    _omit_empty: ClassVar[bool] = True

    type: str = "text"
    text: str = ""
    image_url: dict[str, Any] | None = None
    audio_url: dict[str, Any] | None = None


@dataclass(slots=True)
class Triple(WireType):
    """A fact for the memory graph: subject --relation--> object."""

    subject: str
    relation: str
    object: str
    confidence: float = 1.0
    subject_type: str = ""
    object_type: str = ""
    sentence_text: str = ""
    media_digests: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Entity(WireType):
    """A node of the memory graph."""

    name: str
    type: str = ""
    mention_count: int = 0


@dataclass(slots=True)
class Relation(WireType):
    """An edge of the memory graph."""

    source_name: str
    target_name: str
    relation_type: str
    confidence: float = 1.0


@dataclass(slots=True)
class Doc(WireType):
    """A document of the L2 store or a knowledge entry."""

    id: str
    title: str
    content: str
    score: float | None = None
    media_digests: list[str] = field(default_factory=list)
    attachments: list[MediaAttachment] = field(default_factory=list)


@dataclass(slots=True)
class TextEvent(WireType):
    """One line of the conversation log."""

    role: str
    content: str
    timestamp: float
    channel: str = ""
    attachments: list[MediaAttachment] = field(default_factory=list)


@dataclass(slots=True)
class ConfigDef(WireType):
    """Metadata of one setting: how it is shown, validated and defaulted.

    ``type`` is one of ``string, int, float, bool, duration, password, select, text, json``.
    ``secret`` values are never logged or returned by listing APIs.
    """

    key: str
    type: str = "string"
    default: Any = None
    display_name: str = ""
    description: str = ""
    category: str = ""
    options: list[str] = field(default_factory=list)
    min: float | None = None
    max: float | None = None
    step: float | None = None
    required: bool = False
    secret: bool = False
    restart_required: bool = False
    plugin: str = ""


@dataclass(slots=True)
class Event(WireType):
    """A bus event: ``name`` (e.g. ``agent_output``), a JSON payload and when it happened."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)
    timestamp: float = 0.0
    source: str = ""


#: The stage hooks of a turn, in the order a turn runs them. The one list every host and child
#: runtime (in-process, out-of-process, Lua) validates stage names against.
STAGES: tuple[str, ...] = (
    "on_input",
    "pre_action",
    "post_action",
    "before_toolcall",
    "after_toolcall",
    "before_output",
    "after_output",
)


@dataclass(slots=True)
class StageContext(WireType):
    """The mutable state of one turn, shared by every stage handler.

    Handlers of one stage run concurrently on the same object: mutate only the fields your
    stage documents. ``response`` set by any handler short-circuits the turn straight to
    ``after_output`` with that text. ``principal`` says who the input comes from; it is a copy
    for handlers to read: the kernel decides rights from its own record, so changing it here
    changes nothing.
    """

    raw_message: str = ""
    source: str = ""
    channel: str = ""
    user_id: str = ""
    group_id: str = ""
    context_msgs: list[dict[str, Any]] = field(default_factory=list)
    llm_text: str = ""
    reasoning_content: str = ""
    token_usage: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    final_text: str = ""
    response: str | None = None
    phase: str = ""
    memory: list[dict[str, Any]] = field(default_factory=list)
    no_memory: bool = False
    interrupt: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    attachments: list[MediaAttachment] = field(default_factory=list)
    drop: bool = False
    principal: Principal | None = None
