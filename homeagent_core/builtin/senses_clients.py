"""The calls behind the senses: vision chat, transcription, image generation, media sniffing.

Fallback sources are ordinary ``core.llm.sources.<name>`` entries. Describing an image is a
chat request with an ``image_url`` content block sent through that source's adapter.
Transcription and image generation use the OpenAI-compatible endpoints next to the source's
chat endpoint (``…/chat/completions`` → ``…/audio/transcriptions`` or ``…/images/generations``),
which OpenAI, Groq, most gateways and local whisper / image servers offer.
Local transcription uses faster-whisper (optional extra) on a model folder that must already
be on disk; nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from pathlib import Path
from typing import Any

import httpx

from homeagent_sdk import ToolError

__all__ = [
    "describe",
    "generate",
    "openai_url",
    "sniff_audio",
    "sniff_image",
    "transcribe_http",
    "transcribe_local",
]

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)
_AUDIO_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
    (b"\xff\xf2", "audio/mpeg"),
    (b"\x1aE\xdf\xa3", "audio/webm"),
    (b"#!AMR", "audio/amr"),
)
_EXT = {"audio/wav": "wav", "audio/ogg": "ogg", "audio/flac": "flac", "audio/mpeg": "mp3", "audio/webm": "webm",
        "audio/mp4": "m4a", "audio/amr": "amr"}


def _head(data: bytes) -> str:
    return data[:8].hex(" ") or "nothing"


def sniff_image(data: bytes, label: str) -> str:
    """The real MIME type of image bytes (by their signature).

    Raises:
        ToolError: the bytes are not a PNG, JPEG, GIF, BMP or WebP image.
    """
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise ToolError(
        f"{label} is not an image: its bytes start with {_head(data)}, not a PNG, JPEG, GIF, BMP or WebP signature"
    )


def sniff_audio(data: bytes, label: str) -> str:
    """The real MIME type of audio bytes (by their signature).

    Raises:
        ToolError: not WAV, MP3, OGG/Opus, FLAC, WebM, M4A or AMR.
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data[4:8] == b"ftyp":
        return "audio/mp4"
    for magic, mime in _AUDIO_MAGIC:
        if data.startswith(magic):
            return mime
    raise ToolError(
        f"{label} is not audio: its bytes start with {_head(data)}, not WAV, MP3, OGG, FLAC, WebM, M4A or AMR"
    )


def openai_url(provider: Any, path: str) -> str:
    """``path`` (e.g. ``audio/transcriptions``) next to the source's ``chat/completions`` endpoint.

    Raises:
        ToolError: the source's adapter does not use an OpenAI-style chat endpoint.
    """
    chat = f"{provider.base_url}{provider.adapter.endpoint}"
    if not chat.endswith("/chat/completions"):
        raise ToolError(
            f"source {provider.name!r} does not speak the OpenAI API (its chat endpoint is {chat}); "
            f"/{path} needs an OpenAI-compatible source such as openai, groq or a local server"
        )
    return chat[: -len("chat/completions")] + path


async def describe(provider: Any, model: str, data: bytes, mime: str, prompt: str) -> str:
    """Ask a vision source about one image; its answer text.

    Raises:
        ProviderError: the source failed.
        ToolError: it answered nothing.
    """
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    request = {
        "model": model,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": url}},
        ]}],
        "max_tokens": 1024,
        "temperature": 0.2,
        "stream": False,
    }
    response = await provider.chat(request)
    text = str(response.get("content") or "").strip()
    if not text:
        raise ToolError(f"the vision source {provider.name!r} answered with no text")
    return text


def _auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _http_error(what: str, url: str, response: httpx.Response) -> ToolError:
    detail = response.text[:300].strip()
    return ToolError(f"{what} at {url} failed with HTTP {response.status_code}: {detail}")


async def transcribe_http(
    provider: Any, api_key: str, model: str, data: bytes, mime: str, name: str, prompt: str, timeout: float
) -> str:
    """POST the audio to ``/audio/transcriptions`` (multipart ``file`` + ``model``); the text.

    Raises:
        ToolError: not an OpenAI-style source, HTTP error, network error, a body without ``text``.
    """
    url = openai_url(provider, "audio/transcriptions")
    filename = name or f"audio.{_EXT.get(mime, 'bin')}"
    form = {"model": model, "response_format": "json"}
    if prompt:
        form["prompt"] = prompt
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(
                url, headers=_auth(api_key), data=form, files={"file": (filename, data, mime)}
            )
    except httpx.HTTPError as exc:
        raise ToolError(f"transcription at {url} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        raise _http_error("transcription", url, response)
    try:
        text = response.json().get("text")
    except (ValueError, AttributeError):
        text = None
    if not isinstance(text, str):
        raise ToolError(f"transcription at {url} answered without a text field: {response.text[:200]!r}")
    return text.strip()


_WHISPER: dict[str, Any] = {}
_WHISPER_LOCK = threading.Lock()


def transcribe_local(model_dir: str, data: bytes) -> str:
    """Transcribe with faster-whisper from a model folder on disk (CPU, int8); blocking.

    Raises:
        ToolError: ``unavailable: looked for …`` when the folder or the package is missing.
    """
    path = Path(model_dir).expanduser()
    wanted = path / "model.bin"
    if not wanted.is_file():
        raise ToolError(
            f"local transcription unavailable: looked for a faster-whisper model at {wanted} and found none; "
            "put a CTranslate2 whisper model there or set core.input_processing.audio.fallback_provider"
        )
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise ToolError(
            f"local transcription unavailable: the model at {path} is there but faster-whisper is not "
            "installed (pip install 'homeagent[whisper]')"
        ) from None
    with _WHISPER_LOCK:
        model = _WHISPER.get(str(path))
        if model is None:
            model = _WHISPER[str(path)] = WhisperModel(str(path), device="cpu", compute_type="int8")
    segments, _info = model.transcribe(io.BytesIO(data))
    return "".join(segment.text for segment in segments).strip()


async def generate(provider: Any, api_key: str, model: str, prompt: str, size: str, timeout: float) -> bytes:
    """POST ``/images/generations`` asking for base64 JSON; the image bytes.

    Raises:
        ToolError: not an OpenAI-style source, HTTP or network error, no image in the answer.
    """
    url = openai_url(provider, "images/generations")
    body = {"model": model, "prompt": prompt, "n": 1, "size": size, "response_format": "b64_json"}
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url, headers=_auth(api_key), json=body)
    except httpx.HTTPError as exc:
        raise ToolError(f"image generation at {url} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        raise _http_error("image generation", url, response)
    try:
        item = response.json()["data"][0]
        encoded = item["b64_json"]
        return await asyncio.to_thread(base64.b64decode, encoded, validate=True)
    except (ValueError, KeyError, IndexError, TypeError):
        raise ToolError(f"image generation at {url} answered without data[0].b64_json") from None
