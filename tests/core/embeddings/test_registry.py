from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from homeagent_core.embeddings.registry import ProviderRegistry, same_space
from homeagent_sdk.embeddings import EmbeddingUnavailable
from homeagent_sdk.errors import UsageError
from homeagent_sdk.testing import FakeEmbedder


def write_tiny_vec(path: Path) -> Path:
    path.write_text("2 3\n猫 1 0 0\ncat 0.9 0.1 0\n", encoding="utf-8")
    return path


async def test_the_dense_tier_is_active_when_its_model_loads(tiny_clip_dir: Path) -> None:
    sel = await ProviderRegistry().select("chineseclip", {"model": str(tiny_clip_dir)})
    assert sel.tier == "dense" and sel.provider is sel.dense
    assert sel.provider is not None and sel.provider.info.name == "chineseclip"
    rows = sel.to_dicts()
    json.dumps(rows)
    assert [r["tier"] for r in rows] == ["dense", "static", "tfidf"]
    assert rows[0]["active"] and rows[0]["dimension"] == 16
    assert rows[0]["modalities"] == ["image", "text"]
    assert not rows[1]["available"] and "embedding_model_path" in rows[1]["reason"]


async def test_a_missing_dense_model_falls_back_to_static_and_says_where_it_looked(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "models" / "clip"
    vec = write_tiny_vec(tmp_path / "tiny.vec")
    sel = await ProviderRegistry().select("chineseclip", {"model": str(missing)}, str(vec))
    assert sel.tier == "static" and sel.provider is sel.static and sel.dense is None
    dense, static, tfidf = sel.to_dicts()
    assert not dense["available"] and str(missing) in dense["reason"]
    assert dense["looked_for"] == [str(missing)]
    assert static["active"] and static["looked_for"] == [str(vec)]
    assert static["load"][0]["words"] == 2
    assert tfidf["available"] and not tfidf["active"]


async def test_the_default_hub_model_reports_the_cache_directory_it_looked_in() -> None:
    sel = await ProviderRegistry().select("chineseclip", {"model": "homeagent-tests/absent"})
    dense = sel.to_dicts()[0]
    assert dense["looked_for"][0] == "homeagent-tests/absent"
    assert dense["looked_for"][1].endswith("models--homeagent-tests--absent")


async def test_tfidf_is_the_last_tier_and_always_available(tmp_path: Path) -> None:
    sel = await ProviderRegistry().select(None, static_paths=str(tmp_path / "absent.vec"))
    assert sel.tier == "tfidf" and sel.provider is None
    dense, static, tfidf = sel.to_dicts()
    assert dense["reason"] == "no dense provider configured"
    assert "does not exist" in static["reason"]
    assert tfidf["active"] and tfidf["available"]


async def test_the_tier_in_use_is_said_once_at_info_with_how_to_get_a_better_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="homeagent_core.embeddings.registry")
    registry = ProviderRegistry()
    for _ in range(3):
        await registry.select("chineseclip", {"model": str(tmp_path / "once")})
    said = [r for r in caplog.records if "once" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.INFO
    assert said[0].getMessage().startswith("embedding tier in use: tfidf; for a better one, dense (chineseclip)")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_plugins_add_providers_by_name() -> None:
    registry = ProviderRegistry()
    registry.add("fake", lambda cfg: FakeEmbedder(int(cfg.get("dimension", 32))), plugin="p")
    sel = await registry.select("fake", {"dimension": 24})
    assert sel.tier == "dense" and sel.provider is not None
    assert sel.provider.info.dimension == 24
    assert "fake" in registry.names()


def test_registration_mistakes_are_usage_errors() -> None:
    registry = ProviderRegistry()
    with pytest.raises(UsageError, match="already registered by homeagent"):
        registry.add("chineseclip", lambda cfg: FakeEmbedder())
    with pytest.raises(UsageError, match="must be callable"):
        registry.add("x", "not a factory")  # type: ignore[arg-type]


def test_unknown_names_and_wrong_factory_results_are_unavailable() -> None:
    registry = ProviderRegistry()
    with pytest.raises(EmbeddingUnavailable, match="unknown embedding provider 'nope'; known:"):
        registry.build("nope")
    registry.add("liar", lambda cfg: object())  # type: ignore[arg-type,return-value]
    with pytest.raises(EmbeddingUnavailable, match="returned object, not an EmbeddingProvider"):
        registry.build("liar")
    with pytest.raises(EmbeddingUnavailable, match="needs base_url and model"):
        registry.build("http", {})


def test_vectors_are_comparable_only_within_one_space() -> None:
    assert same_space("abc", 512, "abc", 512)
    assert not same_space("abc", 512, "abc", 384)
    assert not same_space("abc", 512, "abd", 512)
    assert not same_space("", 512, "", 512)
    assert not same_space(None, 512, None, 512)
