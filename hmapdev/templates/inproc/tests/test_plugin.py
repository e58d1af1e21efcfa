"""Tests of __plugin_name__ without a daemon."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import __ident__


def test_greet_says_hello() -> None:
    assert asyncio.run(__ident__.__ident___greet("Ada")) == "Hello, Ada!"


def test_register_tools_adds_the_greeting() -> None:
    added = []

    class Registry:
        def add(self, fn: object) -> None:
            added.append(fn)

    __ident__.register_tools(Registry())
    assert added == [__ident__.__ident___greet]
