"""Built-in ``senses``: see images and hear voice notes, whatever the active model can take.

Routing by capability: every source says whether it takes images (``vision``) and audio
(``audio``) in ``core.llm.sources.<name>.*``. When the source a turn goes to cannot take an
attached image, ``on_input`` has the fallback vision source
(``core.input_processing.image.fallback_provider``) describe it — and transcribe its text when
``ocr_enabled`` — and when it cannot take audio, the audio source
(``core.input_processing.audio.fallback_provider``, or a local faster-whisper model) transcribes
it. The description or transcript is appended to the input text, so it reaches the model *and*
memory, next to the media block stored in the media store (the kernel then sends the model a
note with the media id instead of a block it would reject).

Tools: ``describe_image(media_id, question)``, ``ocr_image(media_id)``,
``transcribe_audio(media_id)`` and ``generate_image(prompt)`` (stores the picture in the media
store and says how to send it). Sizes are checked from the store's metadata before any bytes
are read; bytes that are not what they claim to be are refused by their signature.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.senses_clients import (
    describe,
    generate,
    sniff_audio,
    sniff_image,
    transcribe_http,
    transcribe_local,
)
from homeagent_sdk import ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk.errors import HomeAgentError

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK
    from homeagent_sdk.types import MediaAttachment, StageContext

PLUGIN_NAME = "senses"
_IMG = "core.input_processing.image."
_AUD = "core.input_processing.audio."
_OCR_ALONG = "\n如果图片中有文字（例如票据、截图、标牌），请在描述之后另起一段，以「图中文字：」开头逐行照录。"
_HTTP_TIMEOUT = 120.0

__all__ = ["SensesPlugin", "make_plugin"]


class SensesPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.describe_image, parallel_safe=True, timeout=180)
        registry.add(self.ocr_image, parallel_safe=True, timeout=180)
        registry.add(self.transcribe_audio, parallel_safe=True, timeout=600)
        registry.add(self.generate_image, timeout=300)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    @hookimpl
    async def on_input(self, ctx: StageContext) -> None:
        """Describe / transcribe media the active source cannot take, into the input text."""
        media = [a for a in ctx.attachments if a.data and (a.mime or "").split("/")[0] in ("image", "audio")]
        if not media or self._sdk is None:
            return
        accepts = self._modalities()
        if accepts is None:
            return
        todo = [a for a in media if (a.mime or "").split("/")[0] not in accepts]
        if not todo:
            return
        notes = await asyncio.gather(*(self._sense(att) for att in todo))
        ctx.raw_message = "\n".join([ctx.raw_message, *notes]).strip()

    # ------------------------------------------------------------------ plumbing

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("senses has not started yet")
        return self._sdk

    def _cfg(self, key: str) -> Any:
        config = self.sdk.config
        if config is None:
            raise ToolError("senses needs the configuration store (it runs as a built-in)")
        return config.get(key)

    def _provider(self) -> Any:
        services = self.sdk.services
        kernel = services.kernel if services is not None else None
        return kernel.provider if kernel is not None else None

    def _modalities(self) -> frozenset[str] | None:
        services = self.sdk.services
        kernel = services.kernel if services is not None else None
        return kernel.modalities() if kernel is not None else None

    def _source(self, setting: str, needs: str) -> tuple[Any, Any, str]:
        """(source config, provider, model) of the fallback source named by ``setting``.

        Without a fallback the active source is used when it has the capability ``needs``.
        """
        provider = self._provider()
        lookup = getattr(provider, "source", None)
        name = str(self._cfg(setting + "fallback_provider") or "").strip()
        if not name:
            candidates = getattr(provider, "candidates", None)
            if callable(candidates) and needs in (self._modalities() or ()):
                first = next(iter(candidates()), None)
                name = first.name if first is not None else ""
        if not name:
            raise ToolError(
                f"no source can take {needs}: set {setting}fallback_provider to a core.llm.sources name "
                f"that has {'vision' if needs == 'image' else 'audio'}=true"
            )
        if not callable(lookup):
            raise ToolError(f"{setting}fallback_provider needs the configured LLM sources (core.llm.sources.*)")
        try:
            config, chosen = lookup(name)
        except HomeAgentError as exc:
            raise ToolError(f"{setting}fallback_provider: {exc}") from None
        model = str(self._cfg(setting + "fallback_model") or "").strip() or config.model
        return config, chosen, model

    def _store(self) -> Any:
        services = self.sdk.services
        store = services.media_store if services is not None else None
        if store is None or not getattr(store, "enabled", False):
            raise ToolError("no media store: memory is not running or core.memory.media.enabled is false")
        return store

    async def _load(self, media_id: str, kind: str, limit_key: str) -> tuple[Any, bytes]:
        """Record and bytes of one stored medium, its size checked before reading."""
        store = self._store()
        try:
            record = await store.info(media_id)
        except HomeAgentError as exc:
            raise ToolError(str(exc)) from None
        limit = int(self._cfg(limit_key))
        if record.size > limit:
            raise ToolError(
                f"media {record.short} ({record.name or record.mime}) is {record.size} bytes; the limit is "
                f"{limit} bytes ({limit_key})"
            )
        if not record.mime.startswith(kind + "/"):
            raise ToolError(f"media {record.short} is {record.mime}, not {'an image' if kind == 'image' else 'audio'}")
        return record, await store.get(record.digest)

    async def _remember(self, att: MediaAttachment) -> None:
        """Put an attachment into the media store now so it has a media id (memory reuses it)."""
        if att.digest or not att.data:
            return
        try:
            record = await self._store().put(att.data, att.mime, name=att.name)
        except (ToolError, HomeAgentError) as exc:
            self.sdk.log.info("attachment %s not stored: %s", att.name or att.mime, exc)
            return
        if record is not None:
            att.digest = record.digest

    async def _describe(self, data: bytes, label: str, prompt: str) -> tuple[str, str]:
        mime = sniff_image(data, label)
        limit = int(self._cfg(_IMG + "max_bytes"))
        if len(data) > limit:
            raise ToolError(f"{label} is {len(data)} bytes; the limit is {limit} bytes ({_IMG}max_bytes)")
        config, provider, model = self._source(_IMG, "image")
        return config.name, await describe(provider, model, data, mime, prompt)

    async def _transcribe(self, data: bytes, label: str, name: str) -> tuple[str, str]:
        limit = int(self._cfg(_AUD + "max_bytes"))
        if len(data) > limit:
            raise ToolError(f"{label} is {len(data)} bytes; the limit is {limit} bytes ({_AUD}max_bytes)")
        mime = sniff_audio(data, label)
        local = str(self._cfg(_AUD + "whisper_model_path") or "").strip()
        if not str(self._cfg(_AUD + "fallback_provider") or "").strip() and local:
            return "faster-whisper", await asyncio.to_thread(transcribe_local, local, data)
        config, provider, model = self._source(_AUD, "audio")
        prompt = str(self._cfg(_AUD + "describe_prompt") or "")
        text = await transcribe_http(provider, config.api_key, model, data, mime, name, prompt, _HTTP_TIMEOUT)
        return config.name, text

    async def _sense(self, att: MediaAttachment) -> str:
        """The note appended to the input for one attachment the model cannot take."""
        kind = (att.mime or "").split("/")[0]
        label = att.name or att.mime
        data = att.data or b""
        try:
            if kind == "image":
                sniff_image(data, label)
            else:
                sniff_audio(data, label)
            await self._remember(att)
            ref = f"，media_id {att.digest[:12]}" if att.digest else ""
            if kind == "image":
                prompt = str(self._cfg(_IMG + "describe_prompt"))
                if self._cfg(_IMG + "ocr_enabled"):
                    prompt += _OCR_ALONG
                source, text = await self._describe(data, label, prompt)
                return f"[图片 {label}{ref} 的内容，由视觉源 {source} 描述]\n{text}"
            source, text = await self._transcribe(data, label, att.name)
            return f"[语音 {label}{ref} 的转写，由 {source} 完成]\n{text}"
        except (ToolError, HomeAgentError) as exc:
            what = "图片" if kind == "image" else "语音"
            self.sdk.log.warning("%s %s could not be sensed: %s", what, label, exc)
            return f"[{what} {label} 无法识别：{exc}]"

    # ------------------------------------------------------------------ tools

    async def describe_image(self, media_id: str, question: str = "") -> str:
        """用视觉模型查看一张已存的图片并回答问题（不给问题时给出详细描述）。

        Args:
            media_id: 图片的 media id（消息中的 media_id，至少 12 位十六进制）
            question: 想问这张图片的问题，可留空
        """
        record, data = await self._load(media_id, "image", _IMG + "max_bytes")
        prompt = question.strip() or str(self._cfg(_IMG + "describe_prompt"))
        source, text = await self._describe(data, record.name or record.short, prompt)
        return f"[{source}] {text}"

    async def ocr_image(self, media_id: str) -> str:
        """识别一张已存图片中的全部文字（票据、截图、标牌），按原排版逐行输出。

        Args:
            media_id: 图片的 media id
        """
        if not self._cfg(_IMG + "ocr_enabled"):
            raise ToolError(f"ocr_image is turned off; the owner can enable it with {_IMG}ocr_enabled")
        record, data = await self._load(media_id, "image", _IMG + "max_bytes")
        source, text = await self._describe(data, record.name or record.short, str(self._cfg(_IMG + "ocr_prompt")))
        return f"[{source}] {text}"

    async def transcribe_audio(self, media_id: str) -> str:
        """把一段已存的语音/音频转写成文字。

        Args:
            media_id: 音频的 media id
        """
        record, data = await self._load(media_id, "audio", _AUD + "max_bytes")
        source, text = await self._transcribe(data, record.name or record.short, record.name)
        return f"[{source}] {text}"

    async def generate_image(self, prompt: str, size: str = "1024x1024") -> str:
        """按描述生成一张图片，存入媒体库，返回它的 media id（可用支持图片的输出通道发送）。

        Args:
            prompt: 图片描述
            size: 尺寸，如 1024x1024
        """
        name = str(self._cfg(_IMG + "generate_provider") or "").strip()
        if not name:
            raise ToolError(f"image generation is off: set {_IMG}generate_provider to a source with "
                            "an OpenAI-compatible /images/generations endpoint")
        lookup = getattr(self._provider(), "source", None)
        if not callable(lookup):
            raise ToolError(f"{_IMG}generate_provider needs the configured LLM sources (core.llm.sources.*)")
        try:
            config, provider = lookup(name)
        except HomeAgentError as exc:
            raise ToolError(f"{_IMG}generate_provider: {exc}") from None
        model = str(self._cfg(_IMG + "generate_model") or "").strip() or config.model
        data = await generate(provider, config.api_key, model, prompt, size, _HTTP_TIMEOUT)
        mime = sniff_image(data, "the generated image")
        try:
            record = await self._store().put(data, mime, name="generated." + mime.split("/")[1])
        except HomeAgentError as exc:
            raise ToolError(f"the generated image could not be stored: {exc}") from None
        path = self._store().blob_path(record.digest)
        return (
            f"已生成图片：media_id {record.digest[:12]}（{mime}，{len(data)} 字节），文件 {path}。"
            f"要发给用户，调用支持图片的输出通道的 output_send__<通道>(payload=\"{path}\", type=\"image\")"
            "（output_list_channels 列出各通道能力）。"
        )


def make_plugin() -> SensesPlugin:
    return SensesPlugin()
