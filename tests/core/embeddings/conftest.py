"""Tiny models built on the fly, so the real loading code runs without any download."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "homeagent_tests_tiny_models", Path(__file__).with_name("tiny_models.py")
)
assert _spec is not None and _spec.loader is not None
tiny_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_models)
build_tiny_chinese_clip = tiny_models.build_tiny_chinese_clip
png_bytes = tiny_models.png_bytes

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@pytest.fixture(name="build_tiny_chinese_clip", scope="session")
def _build_tiny_chinese_clip():  # type: ignore[no-untyped-def]
    return build_tiny_chinese_clip


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chinese_clip(tmp_path_factory.mktemp("tiny-clip") / "model")


@pytest.fixture
def make_png():  # type: ignore[no-untyped-def]
    return png_bytes
