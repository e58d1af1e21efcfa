"""ProviderManager: ordering, cooldown, auth disabling, fallback, stream reset, config reload."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from provider_helpers import collect
from provider_servers import FakeVendors

from homeagent_core.providers import ProviderError
from homeagent_core.providers.manager import (
    ProviderManager,
    SourceConfig,
    cooldown_seconds,
    is_local_url,
    missing_credentials,
)

MSG = {"messages": [{"role": "user", "content": "hi"}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class DictConfig:
    """The subset of ConfigStore the manager uses, backed by a dict (string values)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = dict(values)
        self.callbacks: list[Callable[[str], None]] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def items(self, prefix: str = "") -> dict[str, Any]:
        return {k: v for k, v in self.values.items() if k.startswith(prefix)}

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value
        for cb in list(self.callbacks):
            cb(key)

    def on_change(self, callback: Callable[[str], None]) -> Callable[[], None]:
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback)


def src(name: str, base: str, model: str = "m", **kw: Any) -> SourceConfig:
    return SourceConfig(name=name, base_url=base, model=model, adapter=kw.pop("adapter", "openai"), **kw)


@pytest.fixture
async def managers() -> AsyncIterator[list[ProviderManager]]:
    made: list[ProviderManager] = []
    yield made
    for m in made:
        await m.aclose()


def test_cooldown_doubles_and_caps() -> None:
    assert [cooldown_seconds(n) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert cooldown_seconds(20) == 1800


def test_invalid_sources_are_disabled_with_reason() -> None:
    mgr = ProviderManager(
        [
            SourceConfig(name="a", base_url="ftp://x", model="m", adapter="openai"),
            SourceConfig(name="b", base_url="http://x", model="nil", adapter="openai"),
            SourceConfig(name="c", base_url="http://x", model="m", adapter="no-such-adapter"),
        ]
    )
    rows = {r["name"]: r for r in mgr.list_sources()}
    assert "http://" in rows["a"]["disabled"]
    assert "model is empty" in rows["b"]["disabled"]
    assert "no adapter file" in rows["c"]["disabled"]
    assert mgr.candidates() == []


async def test_no_usable_source_raises_clear_error() -> None:
    mgr = ProviderManager([])
    with pytest.raises(ProviderError, match="no usable LLM source"):
        await mgr.chat(MSG)


async def test_falls_back_and_cools_down(vendors: tuple[FakeVendors, str], managers: list[ProviderManager]) -> None:
    fake, base = vendors
    clock = Clock()
    mgr = ProviderManager([src("bad", base, "error-500", priority=5), src("good", base)], clock=clock)
    managers.append(mgr)
    resp = await mgr.chat(MSG)
    assert resp["content"].startswith("Hello there")
    bad = next(r for r in mgr.list_sources() if r["name"] == "bad")
    assert bad["available"] is False
    assert bad["cooldown_until"] == clock.now + 30
    assert "simulated 500" in bad["last_error"]
    n = len(fake.requests)
    await mgr.chat(MSG)  # bad is cooling down: only good is asked
    assert len(fake.requests) == n + 1
    clock.now += 31
    await mgr.chat(MSG)  # cooldown over: bad is tried again and fails a second time
    bad = next(r for r in mgr.list_sources() if r["name"] == "bad")
    assert bad["fails"] == 2
    assert bad["cooldown_until"] == clock.now + 60


async def test_auth_failure_disables_until_config_changes(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    cfg = DictConfig(
        {
            "core.llm.sources.a.base_url": base,
            "core.llm.sources.a.model": "error-401",
            "core.llm.sources.a.adapter": "openai",
            "core.llm.sources.a.priority": "9",
            "core.llm.sources.b.base_url": base,
            "core.llm.sources.b.model": "m",
            "core.llm.sources.b.adapter": "openai",
        }
    )
    mgr = ProviderManager.from_config(cfg)
    managers.append(mgr)
    await mgr.chat(MSG)
    a = next(r for r in mgr.list_sources() if r["name"] == "a")
    assert a["disabled"].startswith("auth failed")
    assert [p.name for p in mgr.candidates()] == ["b"]
    cfg.set("core.llm.sources.a.model", "m")  # user fixes the source
    assert [p.name for p in mgr.candidates()] == ["a", "b"]


async def test_all_sources_failing_lists_every_reason(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    mgr = ProviderManager([src("x", base, "error-500"), src("y", base, "error-429")])
    managers.append(mgr)
    with pytest.raises(ProviderError) as info:
        await mgr.chat(MSG)
    assert info.value.kind == "exhausted"
    assert "'x'" in str(info.value) and "'y'" in str(info.value)


async def test_candidate_order(tmp_path: Path) -> None:
    base = "http://127.0.0.1:9"
    mgr = ProviderManager(
        [
            src("zeta", base, "m1"),
            src("alpha", base, "m1"),
            src("high", base, "m1", priority=3),
            src("exact", base, "special"),
        ],
        default="zeta",
    )
    assert [p.name for p in mgr.candidates()] == ["high", "zeta", "alpha", "exact"]
    assert next(p.name for p in mgr.candidates("special")) == "exact"
    mgr.set_source("alpha")
    assert [p.name for p in mgr.candidates()][:2] == ["high", "alpha"]
    with pytest.raises(ProviderError, match="unknown source"):
        mgr.set_source("nope")
    await mgr.aclose()


async def test_bad_adapter_source_is_skipped_and_next_answers(
    vendors: tuple[FakeVendors, str], tmp_path: Path, managers: list[ProviderManager]
) -> None:
    _, base = vendors
    adir = tmp_path / "adapters"
    adir.mkdir()
    (adir / "broken.lua").write_text("return {", encoding="utf-8")
    (adir / "nonjson.lua").write_text(
        'return {name="nonjson", transform_request=function(r) return r end,'
        ' transform_response=function(r) return "{{" end}',
        encoding="utf-8",
    )
    mgr = ProviderManager(
        [
            src("broken", base, adapter="broken", priority=3),
            src("nonjson", base, "html", adapter="nonjson", priority=2),
            src("good", base),
        ],
        data_dir=tmp_path,
    )
    managers.append(mgr)
    rows = {r["name"]: r for r in mgr.list_sources()}
    assert "syntax error" in rows["broken"]["disabled"]
    resp = await mgr.chat(MSG)
    assert resp["content"].startswith("Hello there")
    rows = {r["name"]: r for r in mgr.list_sources()}
    assert "nonjson" in rows["nonjson"]["last_error"]


async def test_stream_falls_back_to_next_source_before_output(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    mgr = ProviderManager([src("gw", base, "network_error", priority=2), src("good", base)])
    managers.append(mgr)
    chunks = await collect(mgr.chat_stream(MSG))
    assert not any(c.get("reset") for c in chunks)
    assert "".join(c["content"] for c in chunks) == "Hello from loopback"


async def test_mid_stream_failure_resets_and_answers_non_stream(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    mgr = ProviderManager([src("flaky", base, "drop", priority=2), src("good", base)])
    managers.append(mgr)
    chunks = await collect(mgr.chat_stream(MSG))
    reset_at = next(i for i, c in enumerate(chunks) if c.get("reset"))
    assert reset_at > 0  # partial output happened before the reset
    after = chunks[reset_at + 1 :]
    assert after[0]["content"] == "Hello there, how may I assist you today?"
    assert after[-1]["done"] is True
    assert [c.get("done") for c in after].count(True) == 1


async def test_stream_failure_on_single_source_retries_it_non_stream(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    mgr = ProviderManager([src("only", base, "garbage")])
    managers.append(mgr)
    chunks = await collect(mgr.chat_stream(MSG))
    assert chunks[0] == {"content": "", "reset": True, "done": False}
    assert chunks[1]["content"].startswith("Hello there")


async def test_from_config_legacy_keys_and_env_key(
    vendors: tuple[FakeVendors, str], monkeypatch: pytest.MonkeyPatch, managers: list[ProviderManager]
) -> None:
    fake, base = vendors
    monkeypatch.setenv("DEEPSEEK_API_KEY", "env-key")
    cfg = DictConfig(
        {
            "core.llm.provider": "deepseek",
            "core.llm.base_url": base,
            "core.llm.model": "m",
            "core.llm.adapter": "deepseek",
            "core.llm.api_key": "",
        }
    )
    mgr = ProviderManager.from_config(cfg)
    managers.append(mgr)
    assert await mgr.quick_chat("ping") == "Hello there, how may I assist you today?"
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer env-key"
    assert fake.requests[-1]["body"]["max_tokens"] == 128
    rows = mgr.list_sources()
    assert rows[0]["name"] == "deepseek" and rows[0]["default"] is True
    assert "env-key" not in repr(rows)


async def test_reload_on_config_change_adds_source(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    _, base = vendors
    cfg = DictConfig(
        {
            "core.llm.sources.one.base_url": base,
            "core.llm.sources.one.model": "m",
            "core.llm.sources.one.adapter": "openai",
            "core.llm.sources.one.max_concurrent": "2",
        }
    )
    mgr = ProviderManager.from_config(cfg)
    managers.append(mgr)
    assert [r["name"] for r in mgr.list_sources()] == ["one"]
    assert mgr.list_sources()[0]["max_concurrent"] == 2
    for k, v in {"base_url": base, "model": "m", "adapter": "kimicode"}.items():
        cfg.set(f"core.llm.sources.two.{k}", v)
    cfg.set("unrelated.key", "x")
    names = [p.name for p in mgr.candidates()]
    assert names == ["one", "two"]
    assert mgr.candidates()[1].adapter.name == "kimi"  # legacy alias resolved
    await mgr.aclose()
    assert cfg.callbacks == []


async def test_max_concurrent_limits_parallel_requests(
        vendors: tuple[FakeVendors, str], managers: list[ProviderManager]) -> None:
    fake, base = vendors
    mgr = ProviderManager([src("one", base, "slow", max_concurrent=1)])
    probe = ProviderManager([src("probe", base, "m")])
    managers.extend([mgr, probe])
    tasks = [asyncio.create_task(mgr.chat(MSG)) for _ in range(3)]
    async with asyncio.timeout(5):
        while not fake.requests:
            await asyncio.sleep(0.005)
    # A full HTTP round trip through another client: the blocked tasks had every chance to
    # send their requests meanwhile, had the limit not held them back.
    await probe.chat(MSG)
    assert [r["body"]["model"] for r in fake.requests] == ["slow", "m"]
    fake.release.set()
    async with asyncio.timeout(5):
        results = await asyncio.gather(*tasks)
    assert len(results) == 3
    assert [r["body"]["model"] for r in fake.requests].count("slow") == 3


async def test_from_real_config_store(vendors: tuple[FakeVendors, str],
                                      managers: list[ProviderManager]) -> None:
    config = pytest.importorskip("homeagent_core.config")
    fake, base = vendors
    cfg = config.ConfigStore(":memory:")
    cfg.set("core.llm.sources.deepseek.base_url", base)
    cfg.set("core.llm.sources.deepseek.model", "m")
    cfg.set("core.llm.sources.deepseek.api_key", "sk-store")
    mgr = ProviderManager.from_config(cfg)
    managers.append(mgr)
    assert await mgr.quick_chat("ping") == "Hello there, how may I assist you today?"
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-store"
    cfg.set("core.llm.sources.deepseek.model", "error-500")
    with pytest.raises(ProviderError, match="simulated 500"):
        await mgr.chat(MSG)
    await mgr.aclose()
    cfg.close()


async def test_closing_the_manager_stream_closes_the_http_request(
        vendors: tuple[FakeVendors, str], managers: list[ProviderManager]) -> None:
    fake, base = vendors
    mgr = ProviderManager([src("one", base, "hang")])
    managers.append(mgr)
    stream = mgr.chat_stream(MSG)
    assert (await anext(stream))["done"] is False
    await stream.aclose()
    async with asyncio.timeout(5):
        await fake.stream_closed.wait()
    assert mgr.list_sources()[0]["fails"] == 0  # a caller hanging up is not a source failure


async def test_adapter_path_alone_names_the_adapter_file(
    vendors: tuple[FakeVendors, str], tmp_path: Path, managers: list[ProviderManager]
) -> None:
    """docs/CONFIG.md: ``adapter_path`` is used instead of the named adapter, so no name is needed."""
    config = pytest.importorskip("homeagent_core.config")
    fake, base = vendors
    custom = tmp_path / "my_adapters" / "mine.lua"
    custom.parent.mkdir()
    bundled = Path(__file__).resolve().parents[3] / "adapters" / "openai.lua"
    custom.write_text(
        bundled.read_text(encoding="utf-8").replace('headers = {}', 'headers = { ["x-adapter"] = "mine" }'),
        encoding="utf-8",
    )
    cfg = config.ConfigStore(":memory:")
    cfg.set("core.llm.sources.mine.base_url", base)
    cfg.set("core.llm.sources.mine.model", "m")
    cfg.set("core.llm.sources.mine.api_key", "sk-mine")
    cfg.set("core.llm.sources.mine.adapter_path", "my_adapters/mine.lua")  # relative: under <data>
    mgr = ProviderManager.from_config(cfg, data_dir=tmp_path)
    managers.append(mgr)
    rows = {r["name"]: r for r in mgr.list_sources()}
    assert not rows["mine"]["disabled"], rows["mine"]
    assert await mgr.quick_chat("ping") == "Hello there, how may I assist you today?"
    assert fake.requests[-1]["headers"]["x-adapter"] == "mine"
    cfg.set("core.llm.sources.mine.adapter_path", "my_adapters/missing.lua")
    mgr.reload()
    row = {r["name"]: r for r in mgr.list_sources()}["mine"]
    assert "adapter_path 'my_adapters/missing.lua' is not a file" in str(row["disabled"]), row
    cfg.close()


async def test_a_remote_source_without_a_key_is_never_tried_nor_listed_available(
    vendors: tuple[FakeVendors, str], managers: list[ProviderManager]
) -> None:
    fake, base = vendors
    cfg = DictConfig(
        {
            "core.llm.provider": "deepseek",
            "core.llm.sources.deepseek.base_url": "https://api.deepseek.com",
            "core.llm.sources.deepseek.model": "deepseek-v4-flash",
            "core.llm.sources.deepseek.adapter": "deepseek",
            "core.llm.sources.local.base_url": base,
            "core.llm.sources.local.model": "m",
            "core.llm.sources.local.adapter": "openai",
        }
    )
    mgr = ProviderManager.from_config(cfg)
    managers.append(mgr)
    assert [p.name for p in mgr.candidates()] == ["local"]
    rows = {r["name"]: r for r in mgr.list_sources()}
    assert rows["deepseek"]["available"] is False
    assert "core.llm.sources.deepseek.api_key" in rows["deepseek"]["disabled"]
    assert rows["local"]["available"] is True
    assert mgr.active_source() == ("local", "m", False)
    assert await mgr.quick_chat("ping") == "Hello there, how may I assist you today?"
    assert len(fake.requests) == 1
    cfg.set("core.llm.sources.deepseek.api_key", "sk-now-set")
    assert [p.name for p in mgr.candidates()] == ["deepseek", "local"]


async def test_only_remote_keyless_sources_means_no_request_and_a_clear_error() -> None:
    mgr = ProviderManager([src("cloud", "https://api.example.com/v1")])
    with pytest.raises(ProviderError, match=r"no usable LLM source; configured: cloud \(no API key"):
        await mgr.chat(MSG)
    await mgr.aclose()


@pytest.mark.parametrize(
    ("base_url", "local"),
    [
        ("http://127.0.0.1:11434", True),
        ("http://localhost:8080/v1", True),
        ("http://[::1]:8080", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://ollama:11434", True),
        ("http://gpu-box.lan:8000", True),
        ("https://api.deepseek.com", False),
        ("https://8.8.8.8/v1", False),
    ],
)
def test_which_base_urls_count_as_local(base_url: str, local: bool) -> None:
    assert is_local_url(base_url) is local


def test_a_key_in_the_adapter_headers_counts_as_credentials() -> None:
    cloud = src("cloud", "https://api.example.com/v1")
    assert missing_credentials(cloud, {"Authorization": "Bearer sk-in-file"}) == ""
    assert "core.llm.sources.cloud.api_key" in missing_credentials(cloud, {"Accept": "x"})
