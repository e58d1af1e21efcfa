"""Remote devices ("nodes"): the JSON protocol and the API for writing a node capability.

A node is a device (a laptop, a Raspberry Pi, a phone) that lends the home agent its hands. It
keeps ONE outbound WebSocket to the daemon's web port (``/api/v1/nodes/ws``, authenticated with
its device token as ``Authorization: Bearer <token>``) and answers calls over it. Every frame
is one JSON object in a text frame (``docs/NODES.md`` has the full schema):

* node → daemon, first: ``{"type": "hello", "protocol": 1, "node": "lap", "capabilities":
  [{"name", "description", "parameters", "meta"}], "platform": {...}}``
* daemon → node: ``{"type": "welcome", "node": "lap", "max_result_bytes": N}``
* daemon → node: ``{"type": "call", "id": "c1", "capability": "status", "args": {...}}``
* node → daemon: ``{"type": "result", "id": "c1", "ok": true, "text": "...", "images":
  [{"mime": "image/png", "data": "<base64>", "name": "shot.png"}]}`` or ``{"type": "result",
  "id": "c1", "ok": false, "error": "why"}``

A third party adds a capability by writing a :class:`NodeCapability` and exposing a factory
under the entry-point group ``homeagent.node`` (or listing ``"module:factory"`` in the node's
``plugins`` setting); ``homeagent node serve`` loads it when the node's config enables it.
This module imports nothing of the host.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CAPABILITY_NAME_RE",
    "ENTRYPOINT_GROUP",
    "NODE_NAME_RE",
    "PROTOCOL_VERSION",
    "WS_PATH",
    "CapabilityError",
    "NodeCapability",
    "NodeImage",
    "NodeResult",
    "ProtocolError",
    "call_frame",
    "decode_frame",
    "hello_frame",
    "parse_hello",
    "parse_result",
    "result_frame",
]

#: Version of the JSON protocol; a daemon refuses a hello with another major version.
PROTOCOL_VERSION = 1
#: The daemon's WebSocket path (on the web UI's port).
WS_PATH = "/api/v1/nodes/ws"
#: Entry-point group of third-party node capabilities (each a factory returning a NodeCapability).
ENTRYPOINT_GROUP = "homeagent.node"
#: A node's name: it becomes part of tool names (``node_<name>_<capability>``).
NODE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
#: A capability's name.
CAPABILITY_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,23}$")
_MAX_DESCRIPTION = 2000


class ProtocolError(ValueError):
    """A frame that breaks the protocol (not JSON, not an object, a missing or wrong field)."""


class CapabilityError(Exception):
    """A capability refused or failed a call; the message goes back to the model as is."""


@dataclass(frozen=True, slots=True)
class NodeImage:
    """An image a capability took (a screenshot, a camera snap); the home side keeps it as media."""

    data: bytes
    mime: str = "image/png"
    name: str = "image.png"


@dataclass(slots=True)
class NodeResult:
    """What a capability answers: text for the model, and images."""

    text: str = ""
    images: list[NodeImage] = field(default_factory=list)


@runtime_checkable
class NodeCapability(Protocol):
    """One thing a node can do. ``call`` runs on the node's event loop: block in a thread.

    ``parameters`` is the JSON Schema (an object) of ``call``'s arguments, shown to the model;
    ``meta`` is extra facts the home side may use (``run`` lists its ``silent`` commands).
    ``call`` raises :class:`CapabilityError` for a refusal the model should read.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    meta: dict[str, Any]

    async def call(self, args: dict[str, Any]) -> NodeResult: ...


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """One received frame as a JSON object with a string ``type``.

    Raises:
        ProtocolError: not JSON, not an object, or no ``type``.
    """
    if isinstance(text, bytes):
        raise ProtocolError("binary frames are not part of the node protocol; send JSON in text frames")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"a frame is not JSON ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError('a frame must be a JSON object with a string "type"')
    return value


def _capability_entry(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ProtocolError("each capability must be an object with name, description, parameters")
    name = raw.get("name")
    if not isinstance(name, str) or not CAPABILITY_NAME_RE.match(name):
        raise ProtocolError(f"capability name {name!r} is invalid: use 1-24 of a-z, 0-9 and _, starting with a letter")
    description = raw.get("description", "")
    parameters = raw.get("parameters", {"type": "object", "properties": {}})
    meta = raw.get("meta", {})
    if not isinstance(description, str):
        raise ProtocolError(f"capability {name}: description must be a string")
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise ProtocolError(f'capability {name}: parameters must be a JSON Schema with "type": "object"')
    if not isinstance(meta, dict):
        raise ProtocolError(f"capability {name}: meta must be an object")
    return {"name": name, "description": description[:_MAX_DESCRIPTION], "parameters": parameters, "meta": meta}


def hello_frame(node: str, capabilities: list[NodeCapability], platform: dict[str, Any]) -> str:
    """The node's first frame."""
    return json.dumps({
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "node": node,
        "capabilities": [
            {"name": c.name, "description": c.description, "parameters": c.parameters, "meta": c.meta}
            for c in capabilities
        ],
        "platform": platform,
    })


def parse_hello(frame: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The capabilities and platform facts of a ``hello`` frame.

    Raises:
        ProtocolError: not a hello, another protocol version, or a malformed capability.
    """
    if frame.get("type") != "hello":
        raise ProtocolError(f'the first frame must be {{"type": "hello", ...}}, not {frame.get("type")!r}')
    if frame.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol {frame.get('protocol')!r} is not supported; this daemon speaks {PROTOCOL_VERSION}"
        )
    raw = frame.get("capabilities")
    if not isinstance(raw, list) or len(raw) > 32:
        raise ProtocolError("capabilities must be a list of at most 32 objects")
    caps = [_capability_entry(c) for c in raw]
    names = [c["name"] for c in caps]
    if len(set(names)) != len(names):
        raise ProtocolError("capability names must be unique")
    platform = frame.get("platform", {})
    return caps, platform if isinstance(platform, dict) else {}


def call_frame(call_id: str, capability: str, args: dict[str, Any]) -> str:
    """A call the daemon sends."""
    return json.dumps({"type": "call", "id": call_id, "capability": capability, "args": args})


def result_frame(call_id: str, result: NodeResult | None = None, *, error: str = "") -> str:
    """The node's answer to call ``call_id``: ``result``, or a failure saying ``error``."""
    if result is None:
        return json.dumps({"type": "result", "id": call_id, "ok": False, "error": error or "failed"})
    images = [
        {"mime": i.mime, "name": i.name, "data": base64.b64encode(i.data).decode("ascii")} for i in result.images
    ]
    return json.dumps({"type": "result", "id": call_id, "ok": True, "text": result.text, "images": images})


def parse_result(frame: dict[str, Any]) -> tuple[str, bool, str, list[NodeImage]]:
    """``(id, ok, text or error, images)`` of a ``result`` frame.

    Raises:
        ProtocolError: a field is missing or of the wrong type, or an image is not base64.
    """
    call_id, ok = frame.get("id"), frame.get("ok")
    if not isinstance(call_id, str) or not isinstance(ok, bool):
        raise ProtocolError('a result needs a string "id" and a boolean "ok"')
    text = frame.get("text" if ok else "error", "")
    if not isinstance(text, str):
        raise ProtocolError('"text" and "error" must be strings')
    images: list[NodeImage] = []
    raw = frame.get("images", [])
    if not isinstance(raw, list):
        raise ProtocolError('"images" must be a list')
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("data"), str):
            raise ProtocolError('each image must be {"mime", "name", "data": "<base64>"}')
        mime, name = str(item.get("mime") or "image/png"), str(item.get("name") or "image")
        if not mime.startswith("image/"):
            raise ProtocolError(f"image mime {mime!r} is not an image type")
        try:
            data = base64.b64decode(item["data"], validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError("an image's data is not valid base64") from None
        images.append(NodeImage(data, mime, name[:100]))
    return call_id, ok, text, images
