"""Senses: images and audio routed by source capability, through real sources on loopback.

The agent runs the production path: config store, ProviderManager with Lua adapters, the media
store and the text log of the real memory system; the sources are a loopback OpenAI-compatible
server (``media_servers.FakeOpenAI``) that opens the PNG with Pillow and the WAV with ``wave``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from media_servers import FakeOpenAI, receipt_png, voice_wav
from web_servers import Loopback

from homeagent_core.agent.prompt import user_content
from homeagent_core.app import App
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Caps, ChannelDef, MediaAttachment, ToolCall

SENSES = "homeagent_core.builtin.senses"
MakeApp = Callable[..., Awaitable[App]]


@pytest.fixture
async def senses(tmp_path: Path) -> AsyncIterator[tuple[FakeOpenAI, MakeApp]]:
    fake = FakeOpenAI()
    apps: list[App] = []
    async with Loopback(fake.app()) as srv:

        async def make(**overrides: Any) -> App:
            base = f"{srv.url}/v1"
            config: dict[str, Any] = {"core.llm.provider": "main"}
            for name, model, extra in (
                ("main", "text-only", {}),
                ("eyes", "vision-1", {"vision": True}),
                ("ears", "whisper-1", {"audio": True}),
            ):
                for key, value in {"base_url": base, "model": model, "adapter": "openai", "api_key": f"k-{name}",
                                   **extra}.items():
                    config[f"core.llm.sources.{name}.{key}"] = value
            config["core.input_processing.image.fallback_provider"] = "eyes"
            config["core.input_processing.audio.fallback_provider"] = "ears"
            config.update(overrides)
            app = App(tmp_path / f"data{len(apps)}", load_entrypoints=False, builtins=[SENSES], memory=True,
                      embedder=FakeEmbedder(), overrides=config, local_plugins=False)
            apps.append(app)
            await app.start()
            return app

        yield fake, make
        for app in reversed(apps):
            await app.stop()


async def turn(app: App, text: str, attachments: list[MediaAttachment]) -> str:
    kernel = app.kernel
    assert kernel is not None
    item = kernel.submit(kernel.make_item(text, "library", source="test", attachments=attachments, reply=True))
    assert item.reply is not None
    async with asyncio.timeout(60):
        return str(await item.reply)


def main_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests if r["path"].endswith("/chat/completions")
            and r["body"]["model"] == "text-only"]


def logged_inputs(app: App) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((app.data_dir / "memory" / "text").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("role") == "user"]


async def test_a_receipt_photo_and_a_voice_note_reach_a_text_only_model_through_fallbacks(senses, capsys):
    fake, make = senses
    app = await make()
    png, wav = receipt_png(), voice_wav()
    reply = await turn(app, "帮我记一下这张小票，还有语音里说的事", [
        MediaAttachment(mime="image/png", data=png, name="receipt.png"),
        MediaAttachment(mime="audio/wav", data=wav, name="voice.wav"),
    ])
    # The vision source got the real PNG as an image_url block with the describe + OCR prompt.
    vision = [r["body"] for r in fake.requests if r["path"].endswith("/chat/completions")
              and r["body"]["model"] == "vision-1"]
    assert len(vision) == 1
    blocks = vision[0]["messages"][-1]["content"]
    assert blocks[0]["text"].startswith("请详细描述这张图片的内容。") and "图中文字" in blocks[0]["text"]
    assert blocks[1]["image_url"]["url"].startswith("data:image/png;base64,")
    # The audio source got the WAV as multipart with the model name and the key of that source.
    heard = [r for r in fake.requests if r["path"] == "/v1/audio/transcriptions"]
    assert len(heard) == 1
    assert heard[0]["form"]["model"] == "whisper-1" and heard[0]["filename"] == "voice.wav"
    assert heard[0]["bytes"] == len(wav) and heard[0]["auth"] == "Bearer k-ears"
    # The text-only model received text only: the description, the transcript, media-id notes.
    sent = main_requests(fake)[0]["messages"][-1]["content"]
    assert isinstance(sent, str), sent
    assert "合计        ¥22.60" in sent and "明天早上八点提醒我去取快递" in sent
    assert "当前模型不能直接接收图片" in sent and "media_id" in sent
    assert "合计        ¥22.60" in reply and "取快递" in reply
    # Memory keeps the description with the media blocks.
    logged = logged_inputs(app)[-1]
    assert "鲜果超市 收银小票" in logged["content"] and "取快递" in logged["content"]
    digests = [a["digest"] for a in logged["attachments"]]
    assert len(digests) == 2 and all(len(d) == 64 for d in digests)
    assert await app.services.media_store.get(digests[0]) == png
    with capsys.disabled():
        print("\n--- turn: user ---\n帮我记一下这张小票，还有语音里说的事  [receipt.png, voice.wav]")
        print("--- what the text-only model received ---\n" + sent)
        print("--- reply ---\n" + reply)


async def test_a_source_with_vision_gets_the_image_itself(senses):
    fake, make = senses
    app = await make(**{"core.llm.sources.main.vision": True})
    await turn(app, "看看这个", [MediaAttachment(mime="image/png", data=receipt_png(), name="r.png")])
    assert not [r for r in fake.requests if r.get("body", {}).get("model") == "vision-1"]
    content = main_requests(fake)[0]["messages"][-1]["content"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


async def test_tools_read_stored_media_by_id(senses):
    fake, make = senses
    app = await make()
    media = app.services.media_store
    png = await media.put(receipt_png(), "image/png", name="receipt.png")
    wav = await media.put(voice_wav(), "audio/wav", name="note.wav")
    tools = app.kernel.tools
    described = await tools.execute(ToolCall(id="1", name="describe_image",
                                             arguments={"media_id": png.short, "question": "总价多少？"}))
    assert described.success and "¥22.60" in described.result and described.result.startswith("[eyes]")
    asked = [r["body"] for r in fake.requests if r.get("body", {}).get("model") == "vision-1"][-1]
    assert asked["messages"][-1]["content"][0]["text"] == "总价多少？"
    ocr = await tools.execute(ToolCall(id="2", name="ocr_image", arguments={"media_id": png.digest}))
    assert ocr.success and "香蕉" in ocr.result
    heard = await tools.execute(ToolCall(id="3", name="transcribe_audio", arguments={"media_id": wav.short}))
    assert heard.success and heard.result == "[ears] 明天早上八点提醒我去取快递"
    wrong = await tools.execute(ToolCall(id="4", name="transcribe_audio", arguments={"media_id": png.short}))
    assert not wrong.success and "image/png, not audio" in wrong.result
    unknown = await tools.execute(ToolCall(id="5", name="describe_image", arguments={"media_id": "ab" * 6}))
    assert not unknown.success and "no media with digest" in unknown.result


async def test_bad_media_gets_clear_errors_and_nothing_is_sent(senses):
    fake, make = senses
    app = await make(**{"core.input_processing.audio.max_bytes": 1000})
    reply = await turn(app, "看图听音", [
        MediaAttachment(mime="image/png", data=b"this is not a png at all", name="fake.png"),
        MediaAttachment(mime="audio/wav", data=voice_wav(), name="long.wav"),
    ])
    assert "fake.png is not an image" in reply and "not a PNG, JPEG" in reply
    assert "long.wav is 32044 bytes; the limit is 1000 bytes (core.input_processing.audio.max_bytes)" in reply
    assert not [r for r in fake.requests if r["path"] == "/v1/audio/transcriptions"]
    assert not [r for r in fake.requests if r.get("body", {}).get("model") == "vision-1"]
    stored = await app.services.media_store.put(voice_wav(), "audio/wav", name="big.wav")
    refused = await app.kernel.tools.execute(
        ToolCall(id="1", name="transcribe_audio", arguments={"media_id": stored.short}))
    assert not refused.success and "the limit is 1000 bytes" in refused.result


async def test_without_fallbacks_the_owner_is_told_what_to_set(senses, tmp_path):
    _fake, make = senses
    app = await make(**{"core.input_processing.image.fallback_provider": "",
                        "core.input_processing.audio.fallback_provider": "",
                        "core.input_processing.image.ocr_enabled": False})
    reply = await turn(app, "看图", [MediaAttachment(mime="image/png", data=receipt_png(), name="r.png")])
    assert "core.input_processing.image.fallback_provider" in reply
    png = await app.services.media_store.put(receipt_png(), "image/png")
    off = await app.kernel.tools.execute(ToolCall(id="1", name="ocr_image", arguments={"media_id": png.short}))
    assert not off.success and "core.input_processing.image.ocr_enabled" in off.result
    await app.stop()
    app = await make(**{"core.input_processing.audio.fallback_provider": "",
                        "core.input_processing.audio.whisper_model_path": str(tmp_path / "whisper-small")})
    wav = await app.services.media_store.put(voice_wav(), "audio/wav")
    local = await app.kernel.tools.execute(ToolCall(id="1", name="transcribe_audio", arguments={"media_id": wav.short}))
    assert not local.success
    looked = tmp_path / "whisper-small" / "model.bin"
    assert f"unavailable: looked for a faster-whisper model at {looked}" in local.result


async def test_generate_image_stores_the_picture_for_a_channel_that_sends_images(senses):
    fake, make = senses
    app = await make(**{"core.input_processing.image.generate_provider": "eyes",
                        "core.input_processing.image.generate_model": "image-1"})
    sent: list[tuple[str, str]] = []
    album = ChannelDef(name="album", plugin="test", caps=int(Caps.TEXT | Caps.IMAGE), sync=False,
                       send=lambda payload, meta, kind: sent.append((payload, kind)))
    app.kernel.channels.add_output(album, "test")
    out = await app.kernel.tools.execute(ToolCall(id="1", name="generate_image", arguments={"prompt": "一只橘猫"}))
    assert out.success, out.result
    short = out.result.split("media_id ")[1][:12]
    record, data = await app.services.media_store.get_with_record(short)
    assert record.mime == "image/png" and data.startswith(b"\x89PNG")
    path = out.result.split("文件 ")[1].split("。")[0]
    assert await app.kernel.channels.send("album", path, {}, "image") is None
    assert sent == [(path, "image")] and Path(path).read_bytes() == data
    body = next(r["body"] for r in fake.requests if r["path"] == "/v1/images/generations")
    assert body == {"model": "image-1", "prompt": "一只橘猫", "n": 1, "size": "1024x1024",
                    "response_format": "b64_json"}


def test_media_the_model_cannot_take_becomes_a_note():
    att = MediaAttachment(digest="ab" * 32, mime="image/png", data=b"\x89PNG", name="cat.png")
    note = "看 [图片 cat.png (image/png，media_id abababababab)：当前模型不能直接接收图片]"
    assert user_content("看", [att], frozenset()) == note
    blocks = user_content("看", [att], frozenset({"image"}))
    assert isinstance(blocks, list) and blocks[1]["type"] == "image_url"
    assert isinstance(user_content("看", [att]), list)  # a provider that does not say: unchanged


async def test_every_input_processing_setting_is_read(senses):
    from homeagent_core.config import CORE_DEFS

    _fake, make = senses
    app = await make(**{"core.input_processing.image.generate_provider": "eyes"})
    read: set[str] = set()
    original = app.config.get

    def recording(key: str, default: Any = None) -> Any:
        read.add(key)
        return original(key, default)

    app.config.get = recording  # type: ignore[method-assign]
    await turn(app, "看图听音", [MediaAttachment(mime="image/png", data=receipt_png(), name="r.png"),
                               MediaAttachment(mime="audio/wav", data=voice_wav(), name="v.wav")])
    png = await app.services.media_store.put(receipt_png(), "image/png")
    for tool, args in (("ocr_image", {"media_id": png.short}), ("generate_image", {"prompt": "猫"})):
        assert (await app.kernel.tools.execute(ToolCall(id="1", name=tool, arguments=args))).success
    declared = {d.key for d in CORE_DEFS if d.key.startswith("core.input_processing.")}
    assert declared - read == set()


async def test_a_500_mb_voice_note_is_refused_by_its_size_before_any_byte_is_read(senses):
    """The store holds a 500 MB blob (sparse file, hand-registered); reading it would fail the
    sha256 check, so the size refusal proves nothing was read."""
    fake, make = senses
    app = await make()
    store = app.services.media_store
    digest = "ab" * 32
    size = 500 * 1024 * 1024
    blob = store.root / "blobs" / digest[:2] / digest[2:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    with blob.open("wb") as fh:
        fh.truncate(size)
    import sqlite3

    index = sqlite3.connect(store.root / "media.db")  # registered by hand, beside the store's own connection
    with index:
        index.execute("INSERT INTO media (digest, mime, size, name, created_at) VALUES (?, ?, ?, ?, ?)",
                      (digest, "audio/wav", size, "huge.wav", 0.0))
    index.close()
    refused = await app.kernel.tools.execute(
        ToolCall(id="1", name="transcribe_audio", arguments={"media_id": digest[:12]}))
    assert not refused.success
    assert f"is {size} bytes; the limit is {25 * 1024 * 1024} bytes" in refused.result
    assert not [r for r in fake.requests if r["path"] == "/v1/audio/transcriptions"]
