"""A loopback OpenAI-compatible server for the senses tests, plus real media made in the test.

Routes follow the OpenAI API reference:

* ``POST /v1/chat/completions`` — the "Create chat completion" object, or ``chat.completion.chunk``
  SSE frames ending with ``data: [DONE]`` when ``stream`` is true. A request whose last user
  message holds an ``image_url`` block is a vision call: the data URL is decoded and opened
  with Pillow (a broken image is answered with HTTP 400 like the real API), and the answer is
  the scripted ``vision_answer``. Any other request is the text-only main model: it answers
  ``收到：`` followed by the text it was given, so tests see exactly what reached it.
* ``POST /v1/audio/transcriptions`` — multipart ``file`` + ``model``; the file is opened with
  the ``wave`` module (not a WAV → HTTP 400), the answer ``{"text": ...}`` is scripted.
* ``POST /v1/images/generations`` — ``{"created", "data": [{"b64_json"}]}`` with a PNG drawn by
  Pillow.
"""

from __future__ import annotations

import base64
import io
import json
import math
import struct
import time
import wave
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RECEIPT_LINES = ["鲜果超市 收银小票", "香蕉 1.2kg  ¥9.60", "牛奶 2盒    ¥13.00", "合计        ¥22.60"]


def receipt_png() -> bytes:
    """A real PNG of a small receipt (ASCII glyphs drawn by Pillow's default font)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (240, 120), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(["FRESH MART", "BANANA 1.2kg  9.60", "MILK x2      13.00", "TOTAL        22.60"]):
        draw.text((10, 10 + 25 * i), line, fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def voice_wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    """A real 16-bit mono WAV: a 440 Hz tone."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        frames = b"".join(
            struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(int(seconds * rate))
        )
        w.writeframes(frames)
    return out.getvalue()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class FakeOpenAI:
    """State and handlers; ``requests`` records every call (path and body)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.vision_answer = "这是一张超市小票。\n图中文字：\n" + "\n".join(RECEIPT_LINES)
        self.transcript = "明天早上八点提醒我去取快递"
        #: Seconds spent inside the chat handler per request (the "model's" own time, for the bench).
        self.handled_s: list[float] = []

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/audio/transcriptions", self.transcribe, methods=["POST"]),
            Route("/v1/images/generations", self.images, methods=["POST"]),
        ])

    async def chat(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            return await self._chat(request)
        finally:
            self.handled_s.append(time.perf_counter() - started)

    async def _chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append({"path": request.url.path, "body": body})
        last = body["messages"][-1]
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        images = [b for b in blocks if isinstance(b, dict) and b.get("type") == "image_url"]
        if images:
            from PIL import Image, UnidentifiedImageError

            url = images[0]["image_url"]["url"]
            try:
                raw = base64.b64decode(url.split(",", 1)[1])
                Image.open(io.BytesIO(raw)).verify()
            except (IndexError, ValueError, UnidentifiedImageError, OSError):
                return JSONResponse({"error": {"message": "Invalid image.", "type": "invalid_request_error"}}, 400)
            answer = self.vision_answer
        else:
            answer = "收到：" + _text_of(last.get("content"))
        if body.get("stream"):
            return StreamingResponse(self._stream(body["model"], answer), media_type="text/event-stream")
        return JSONResponse({
            "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        })

    async def _stream(self, model: str, answer: str) -> Any:
        base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer},
                                      "finish_reason": None}]}
        yield f"data: {json.dumps(first, ensure_ascii=False)}\n\n".encode()
        done = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        yield f"data: {json.dumps(done)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def transcribe(self, request: Request) -> Response:
        async with request.form() as form:
            upload: Any = form.get("file")
            data = await upload.read() if upload is not None else b""
            self.requests.append({"path": request.url.path, "form": {k: v for k, v in form.items() if k != "file"},
                                  "filename": getattr(upload, "filename", None), "bytes": len(data),
                                  "auth": request.headers.get("authorization")})
        try:
            with wave.open(io.BytesIO(data)) as w:
                if w.getnframes() == 0:
                    raise wave.Error("no frames")
        except (wave.Error, EOFError):
            return JSONResponse({"error": {"message": "Invalid file format.", "type": "invalid_request_error"}}, 400)
        return JSONResponse({"text": self.transcript})

    async def images(self, request: Request) -> Response:
        from PIL import Image

        body = json.loads(await request.body())
        self.requests.append({"path": request.url.path, "body": body})
        width, height = (int(x) for x in str(body.get("size", "64x64")).split("x"))
        out = io.BytesIO()
        Image.new("RGB", (min(width, 64), min(height, 64)), "orange").save(out, format="PNG")
        return JSONResponse({"created": int(time.time()),
                             "data": [{"b64_json": base64.b64encode(out.getvalue()).decode()}]})
