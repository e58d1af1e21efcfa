"""The settings tier's interface, run against its backend.

Only a PostgreSQL memory store has a shared settings tier; on the embedded SQLite store every
setting stays in the daemon's own ``config.db`` and ``open_shared_settings`` gives ``None``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from homeagent_core.memory.stores.factory import open_shared_settings
from homeagent_core.memory.stores.settings import SharedSettings

Opener = Callable[[], SharedSettings]


@pytest.fixture(params=["postgresql"])
def open_settings(request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Opens the test tenant's shared settings (through the factory); every one opened is closed afterwards."""
    url, tenant = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_tenant")
    opened: list[SharedSettings] = []

    def opener() -> SharedSettings:
        settings = open_shared_settings(url, tenant=tenant)
        assert settings is not None
        opened.append(settings)
        return settings

    yield opener
    for settings in opened:
        settings.close()


def test_sqlite_has_no_shared_settings_tier() -> None:
    assert open_shared_settings("sqlite") is None


def test_each_backend_declares_the_settings_interface(open_settings: Opener) -> None:
    settings = open_settings()
    assert SharedSettings in type(settings).__mro__, f"{type(settings).__name__} does not declare SharedSettings"


def test_values_are_stored_forgotten_and_seen_by_other_daemons(open_settings: Opener) -> None:
    here, there = open_settings(), open_settings()
    heard: list[tuple[str, str | None]] = []
    named = threading.Event()

    def hear(key: str, value: str | None) -> None:
        heard.append((key, value))
        if (key, value) == ("core.agent.name", "小助手"):
            named.set()

    there.follow(hear)
    here.put("core.agent.name", "小助手")
    here.put("core.agent.language", "zh")
    here.put("core.agent.language", None)
    assert open_settings().load() == {"core.agent.name": "小助手"}
    assert named.wait(20.0), f"the other daemon heard only {heard}"
