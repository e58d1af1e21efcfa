"""A node's capabilities that need a desktop or phone tool: ``clipboard``, ``screenshot``, ``camera_snap``.

Each is offered only when one of its tools is on the device (``wl-paste``/``xclip``/``pbpaste``/
``termux-clipboard-get``; ``grim``/``scrot``/``import``/``screencapture``; ``termux-camera-photo``/
``fswebcam``/``imagesnap``); :func:`build_capabilities` says which were left out and why.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from homeagent_core.node.caps import FilesCapability, NotifyCapability, RunCapability, StatusCapability, run_argv
from homeagent_core.node.config import NodeConfig
from homeagent_sdk.node import (
    CAPABILITY_NAME_RE,
    ENTRYPOINT_GROUP,
    CapabilityError,
    NodeCapability,
    NodeImage,
    NodeResult,
)

__all__ = ["CameraCapability", "ClipboardCapability", "ScreenshotCapability", "build_capabilities"]

log = logging.getLogger("homeagent.node")

_MAX_IMAGE = 6 * 1024 * 1024

_CLIP_GET = (["wl-paste", "--no-newline"], ["xclip", "-o", "-selection", "clipboard"], ["pbpaste"],
             ["termux-clipboard-get"])
_CLIP_SET = (["wl-copy"], ["xclip", "-i", "-selection", "clipboard"], ["pbcopy"], ["termux-clipboard-set"])
_SHOT = (["grim", "{out}"], ["scrot", "--overwrite", "{out}"], ["import", "-window", "root", "{out}"],
         ["screencapture", "-x", "{out}"])
_CAMERA = (["termux-camera-photo", "{out}"], ["fswebcam", "--no-banner", "{out}"], ["imagesnap", "{out}"])


def _first(choices: tuple[list[str], ...]) -> list[str] | None:
    return next((list(c) for c in choices if shutil.which(c[0])), None)


class ClipboardCapability:
    name = "clipboard"
    description = "Read (get) or replace (set) the text on this device's clipboard."

    def __init__(self, get: list[str], put: list[str] | None) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {"action": {"type": "string", "enum": ["get", "set"]}, "text": {"type": "string"}},
            "required": ["action"],
        }
        self.meta: dict[str, Any] = {}
        self.get, self.put = get, put

    async def call(self, args: dict[str, Any]) -> NodeResult:
        if args.get("action") == "set":
            if self.put is None:
                raise CapabilityError("this device can read its clipboard but has no tool to set it")
            code, _o, err, _t = await run_argv(self.put, timeout=10, max_bytes=2000,
                                               stdin=str(args.get("text", "")).encode())
            if code != 0:
                raise CapabilityError(f"the clipboard was not set: {err.decode(errors='replace').strip()}")
            return NodeResult("clipboard set")
        code, out, err, _t = await run_argv(self.get, timeout=10, max_bytes=65536)
        if code != 0:
            raise CapabilityError(f"the clipboard could not be read: {err.decode(errors='replace').strip()}")
        return NodeResult(out.decode(errors="replace"))


class _ImageCapability:
    name = ""
    description = ""

    def __init__(self, argv: list[str], ext: str = "png") -> None:
        self.parameters: dict[str, Any] = {"type": "object", "properties": {}}
        self.meta: dict[str, Any] = {}
        self.argv, self.ext = argv, ext

    async def call(self, args: dict[str, Any]) -> NodeResult:
        with tempfile.TemporaryDirectory(prefix="homeagent-node-") as tmp:
            out = Path(tmp) / f"{self.name}.{self.ext}"
            code, _o, err, timed_out = await run_argv([a.replace("{out}", str(out)) for a in self.argv],
                                                      timeout=30, max_bytes=4000)
            if timed_out or code != 0 or not out.exists():
                why = "timed out" if timed_out else err.decode(errors="replace").strip() or f"exit code {code}"
                raise CapabilityError(f"{self.name} failed on this device: {why}")
            data = out.read_bytes()
        if len(data) > _MAX_IMAGE:
            raise CapabilityError(f"the image has {len(data)} bytes, more than a node sends ({_MAX_IMAGE})")
        mime = "image/jpeg" if self.ext == "jpg" else "image/png"
        return NodeResult(f"{self.name}: {len(data)} bytes", [NodeImage(data, mime, out.name)])


class ScreenshotCapability(_ImageCapability):
    name = "screenshot"
    description = "Take a screenshot of this device's screen (the image is kept in the home's media store)."


class CameraCapability(_ImageCapability):
    name = "camera_snap"
    description = "Take a photo with this device's camera (the image is kept in the home's media store)."


def _third_party(config: NodeConfig) -> list[NodeCapability]:
    """Capabilities of installed plugins (entry points ``homeagent.node``) and ``plugins`` of node.json.

    A plugin's capability is offered only when node.json enables it by name (the node is authoritative).
    """
    factories: list[tuple[str, Any]] = []
    for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP):
        factories.append((ep.value, ep.load))
    for spec in config.plugins:
        module, _, attr = spec.partition(":")
        factories.append((spec, lambda m=module, a=attr: getattr(importlib.import_module(m), a or "make_capability")))
    found: list[NodeCapability] = []
    for label, load in factories:
        try:
            cap = load()()
        except Exception as exc:
            log.warning("node capability %s could not be loaded: %s", label, exc)
            continue
        if not isinstance(cap, NodeCapability) or not CAPABILITY_NAME_RE.match(str(cap.name)):
            log.warning("node capability %s is not a NodeCapability with a valid name; skipped", label)
            continue
        found.append(cap)
    return found


def build_capabilities(config: NodeConfig) -> tuple[list[NodeCapability], list[str]]:
    """The capabilities ``config`` enables that this device can offer, and a note per one left out.

    Raises:
        ValueError: an enabled capability's settings are invalid (the message names the key).
    """
    caps: list[NodeCapability] = []
    notes: list[str] = []
    if config.section("status") is not None:
        caps.append(StatusCapability())
    notify = config.section("notify")
    if notify is not None:
        caps.append(NotifyCapability(notify))
    run = config.section("run")
    if run is not None:
        caps.append(RunCapability(run, config.folder))
    files = config.section("files")
    if files is not None:
        caps.append(FilesCapability(files, config.folder))
    if config.section("clipboard") is not None:
        get = _first(_CLIP_GET)
        if get is None:
            notes.append("clipboard: no wl-paste, xclip, pbpaste or termux-clipboard-get on this device")
        else:
            caps.append(ClipboardCapability(get, _first(_CLIP_SET)))
    for key, tools, cls, ext, names in (
        ("screenshot", _SHOT, ScreenshotCapability, "png", "grim, scrot, import or screencapture"),
        ("camera_snap", _CAMERA, CameraCapability, "jpg", "termux-camera-photo, fswebcam or imagesnap"),
    ):
        if config.section(key) is None:
            continue
        argv = _first(tools)
        if argv is None:
            notes.append(f"{key}: no {names} on this device")
        else:
            caps.append(cls(argv, ext))
    taken = {c.name for c in caps}
    for cap in _third_party(config):
        if cap.name in taken:
            notes.append(f"{cap.name}: a plugin's capability has the name of another one; skipped")
        elif config.section(cap.name) is None:
            notes.append(f"{cap.name}: installed but not enabled in node.json")
        else:
            caps.append(cap)
            taken.add(cap.name)
    return caps, notes
