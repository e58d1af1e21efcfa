"""Plugin discovery, validation, operator switches and per-plugin lifecycle."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from homeagent_core.plugins.manager import DEFAULT_PLUGINS, create_plugin_manager
from homeagent_sdk import hookimpl
from homeagent_sdk.errors import PluginValidationError


def make_distribution(root: Path, dist: str, entry: str, module: str, source: str) -> None:
    """Write an installed distribution (dist-info + module) that importlib.metadata finds."""
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[homeagent]\n{entry} = {module}\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m.startswith("ha_fixture_")]:
        del sys.modules[name]


GOOD = """
from homeagent_sdk import hookimpl

@hookimpl
def register_tools(registry):
    pass
"""


def test_registering_a_class_instead_of_an_instance_asks_about_missing_parentheses():
    class MyPlugin:
        @hookimpl
        def startup(self, sdk):
            return None

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    with pytest.raises(PluginValidationError, match=r"did you forget \(\)"):
        host.register(MyPlugin, name="mine")


def test_a_hook_impl_with_unknown_arguments_is_rejected_with_the_plugin_name():
    class Bad:
        @hookimpl
        def on_input(self, ctx, surprise):
            return None

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    with pytest.raises(PluginValidationError, match="bad-plugin"):
        host.register(Bad(), name="bad-plugin")
    assert "bad-plugin" not in host.plugin_names()


def test_an_unknown_hook_name_is_rejected():
    class Typo:
        @hookimpl
        def on_inptu(self, ctx):
            return None

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    with pytest.raises(PluginValidationError, match="on_inptu"):
        host.register(Typo(), name="typo")


def test_entry_point_plugins_load_with_their_distribution_and_version(site: Path):
    make_distribution(site, "homeagent-plugin-good", "good", "ha_fixture_good", GOOD)
    host = create_plugin_manager(builtins=())
    info = host.info("good")
    assert info is not None and info.status == "loaded"
    assert (info.distribution, info.version, info.kind) == ("homeagent-plugin-good", "1.2.3", "entrypoint")
    assert info.hooks == ["register_tools"]


def test_an_entry_point_that_fails_to_import_is_reported_and_the_rest_still_loads(site: Path):
    make_distribution(site, "homeagent-plugin-broken", "broken", "ha_fixture_broken", "import does_not_exist\n")
    make_distribution(site, "homeagent-plugin-fine", "fine", "ha_fixture_fine", GOOD)
    host = create_plugin_manager()
    broken = host.info("broken")
    assert broken is not None and broken.status == "failed"
    assert broken.distribution == "homeagent-plugin-broken"
    assert "does_not_exist" in broken.error and "error importing plugin 'broken'" in broken.error
    assert "fine" in host.plugin_names()
    assert set(DEFAULT_PLUGINS_NAMES()) <= set(host.plugin_names())


def DEFAULT_PLUGINS_NAMES() -> list[str]:
    import importlib

    return [getattr(importlib.import_module(p), "PLUGIN_NAME", p.rsplit(".", 1)[-1]) for p in DEFAULT_PLUGINS]


def test_load_plugins_allowlist_limits_entry_points(site: Path, monkeypatch: pytest.MonkeyPatch):
    make_distribution(site, "homeagent-plugin-a", "a", "ha_fixture_a", GOOD)
    make_distribution(site, "homeagent-plugin-b", "b", "ha_fixture_b", GOOD)
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "b")
    names = create_plugin_manager(builtins=()).plugin_names()
    assert "b" in names and "a" not in names
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "")
    assert create_plugin_manager(builtins=()).plugin_names() == []


def test_disable_plugins_blocks_entry_points_and_builtins(site: Path, monkeypatch: pytest.MonkeyPatch):
    make_distribution(site, "homeagent-plugin-a", "a", "ha_fixture_a2", GOOD)
    monkeypatch.setenv("HOMEAGENT_DISABLE_PLUGINS", "a, cfgmgr")
    host = create_plugin_manager()
    assert "a" not in host.plugin_names() and "cfgmgr" not in host.plugin_names()
    assert host.info("cfgmgr").status == "blocked"


def test_trace_plugins_prints_hook_calls(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("HOMEAGENT_TRACE_PLUGINS", "1")
    host = create_plugin_manager(load_entrypoints=False, builtins=())

    class P:
        @hookimpl
        def register_adapters(self, registry):
            return None

    host.register(P(), name="traced")
    host.pm.hook.register_adapters(registry=None)
    err = capsys.readouterr().err
    assert "[trace] register_adapters(registry) -> impls: traced" in err


def test_two_hosts_never_share_plugins():
    a = create_plugin_manager(load_entrypoints=False)
    b = create_plugin_manager(load_entrypoints=False)
    assert a.pm.get_plugin("cfgmgr") is not b.pm.get_plugin("cfgmgr")


def test_importing_homeagent_core_registers_nothing():
    import homeagent_core  # noqa: F401
    import homeagent_core.plugins.manager as manager

    assert not any(isinstance(v, manager.PluginHost) for v in vars(manager).values())


def test_register_hooks_are_called_once_per_plugin_with_a_stamped_registry():
    class A:
        @hookimpl
        def register_adapters(self, registry):
            registry.append("a")

    class B:
        @hookimpl
        def register_adapters(self, registry):
            raise RuntimeError("boom")

    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=[])
    host.register(A(), name="a")
    host.register(B(), name="b")
    registries = host.call_register("register_adapters", lambda name: [name])
    assert registries == {"a": ["a", "a"]}
    assert host.info("b").status == "failed" and "boom" in host.info("b").error


def test_an_async_registration_impl_is_refused_with_an_explanation():
    class Async:
        @hookimpl
        async def register_adapters(self, registry):
            return None

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    host.register(Async(), name="async-reg")
    host.call_register("register_adapters", lambda name: [])
    assert "must be sync" in host.info("async-reg").error


async def test_a_plugin_raising_in_startup_is_marked_failed_and_others_start():
    started: list[str] = []

    class Good:
        @hookimpl
        def startup(self, sdk):
            started.append(sdk)

    class Bad:
        @hookimpl
        async def startup(self, sdk):
            raise ValueError("cannot reach the thing")

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    host.register(Good(), name="good")
    host.register(Bad(), name="bad")
    failed = await host.startup(lambda name: f"sdk-for-{name}")
    assert failed == ["bad"]
    assert started == ["sdk-for-good"]
    assert host.info("good").status == "started"
    assert host.info("bad").status == "failed" and "cannot reach the thing" in host.info("bad").error
    assert "bad" not in host.plugin_names()


async def test_shutdown_runs_in_reverse_start_order_and_survives_a_failure():
    order: list[str] = []

    def plugin(name: str, fail: bool = False):
        class P:
            @hookimpl
            def shutdown(self):
                order.append(name)
                if fail:
                    raise RuntimeError("x")

        return P()

    host = create_plugin_manager(load_entrypoints=False, builtins=())
    for name, fail in (("first", False), ("second", True), ("third", False)):
        host.register(plugin(name, fail), name=name)
    await host.shutdown()
    assert order == ["third", "second", "first"]


async def test_trace_plugins_also_prints_stage_hooks_run_by_the_kernel(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    from homeagent_core.library import Agent
    from homeagent_sdk.testing import FakeModel

    monkeypatch.setenv("HOMEAGENT_TRACE_PLUGINS", "1")

    class Stage:
        name = "tracer"

        @hookimpl
        def on_input(self, ctx):
            return None

    async with Agent(tmp_path, provider=FakeModel(default="ok"), plugins=[Stage()], load_entrypoints=False,
                     builtins=()) as agent:
        await agent.ask("hi")
    assert "[trace] on_input(ctx) -> tracer=None" in capsys.readouterr().err


def test_an_entry_point_module_with_make_plugin_gets_a_fresh_instance(site: Path):
    source = GOOD.replace("def register_tools", "def _unused") + (
        "\nclass P:\n    @hookimpl\n    def register_tools(self, registry):\n        pass\n\n"
        "def make_plugin():\n    return P()\n"
    )
    make_distribution(site, "homeagent-plugin-made", "made", "ha_fixture_made", source)
    first = create_plugin_manager(builtins=()).pm.get_plugin("made")
    second = create_plugin_manager(builtins=()).pm.get_plugin("made")
    assert type(first).__name__ == "P" and first is not second
