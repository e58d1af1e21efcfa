"""Third-party node capabilities for the tests, loaded by ``homeagent node serve`` through the
node's ``plugins`` setting (``"node_plugin_caps:snap"``): an image, a call that hangs, a huge answer."""

from __future__ import annotations

import asyncio
import struct
import zlib
from typing import Any

from homeagent_sdk.node import NodeImage, NodeResult


def tiny_png() -> bytes:
    """A valid 1x1 red PNG."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(
        b"IEND", b"")


class _Cap:
    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description
        self.parameters: dict[str, Any] = {"type": "object", "properties": {}}
        self.meta: dict[str, Any] = {}

    async def call(self, args: dict[str, Any]) -> NodeResult:
        if self.name == "hang":
            await asyncio.sleep(3600)
        if self.name == "big":
            return NodeResult("x" * 200_000)
        return NodeResult("a red dot", [NodeImage(tiny_png(), "image/png", "dot.png")])


def snap() -> _Cap:
    return _Cap("snap", "Take a picture.")


def hang() -> _Cap:
    return _Cap("hang", "Never answers.")


def big() -> _Cap:
    return _Cap("big", "Answers far too much.")
