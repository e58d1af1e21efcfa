"""The App wires plugins to settings, scoped SDKs, the event bus and the lifecycle."""

from __future__ import annotations

from pathlib import Path

import pytest

from homeagent_core.app import App
from homeagent_core.plugins.registries import PluginRoutes
from homeagent_sdk import ConfigDef, hookimpl
from homeagent_sdk.errors import HomeAgentError, PluginValidationError
from homeagent_sdk.testing import FakeEmbedder, FakeModel


def make_app(tmp_path: Path, *plugins: object, builtins: tuple[str, ...] = (), memory: bool = False) -> App:
    return App(
        tmp_path / "data",
        load_entrypoints=False,
        builtins=builtins,
        plugins=plugins,
        provider=FakeModel(default="ok"),
        memory=memory,
    )


async def test_hook_register_settings(tmp_path: Path):
    class P:
        name = "weather"

        @hookimpl
        def register_settings(self, registry):
            registry.add(ConfigDef(key="city", type="string", default="杭州"))
            registry.add(ConfigDef(key="interval", type="duration", default="5m"))

        @hookimpl
        def startup(self, sdk):
            self.seen = (sdk.settings.get("city"), sdk.settings.get("interval"))

    plugin = P()
    async with make_app(tmp_path, plugin) as app:
        assert plugin.seen == ("杭州", 300.0)
        app.config.set("plugin.weather.city", "上海")
        assert app.config.get("plugin.weather.city") == "上海"
        assert app.host.info("weather").contributions["settings"] == ["plugin.weather.city", "plugin.weather.interval"]


async def test_hook_startup(tmp_path: Path):
    class P:
        name = "scoped"

        @hookimpl
        async def startup(self, sdk):
            self.sdk = sdk

    plugin = P()
    async with make_app(tmp_path, plugin, builtins=("homeagent_core.builtin.cfgmgr",)) as app:
        sdk = plugin.sdk
        assert sdk.name == "scoped"
        assert sdk.data_dir == app.data_dir / "plugin_data" / "scoped" and sdk.data_dir.is_dir()
        assert sdk.log.name == "homeagent.plugin.scoped"
        assert sdk.config is None, "third-party plugins do not get the whole config store"
        with pytest.raises(HomeAgentError, match=r"sdk\.memory\.recall: memory is not available"):
            sdk.memory.recall(["x"])


async def test_plugins_reach_memory_through_their_sdk(tmp_path: Path):
    from homeagent_sdk.types import Triple

    class P:
        name = "reader"

        @hookimpl
        async def startup(self, sdk):
            self.sdk = sdk

    plugin = P()
    async with make_app(tmp_path, plugin, memory=True):
        sdk = plugin.sdk
        committed = await sdk.memory.commit([Triple("小王", "住在", "杭州")])
        assert committed["added"] == 1
        recalled = await sdk.memory.recall(["小王"])
        assert [r["target"] for r in recalled["relations"]] == ["杭州"]
        doc_id = await sdk.doc.commit("笔记", "小王喜欢喝龙井茶")
        assert [d.id for d in await sdk.doc.query("龙井茶")] == [doc_id]
        assert await sdk.knowledge.create("饮品/龙井", "杭州的绿茶") == "饮品/龙井"
        assert (await sdk.knowledge.search("绿茶"))[0].title == "饮品/龙井"


async def test_hook_shutdown(tmp_path: Path):
    calls: list[str] = []

    class P:
        @hookimpl
        async def shutdown(self):
            calls.append("async")

    class Q:
        @hookimpl
        def shutdown(self):
            calls.append("sync")

    app = make_app(tmp_path, P(), Q())
    await app.start()
    await app.stop()
    assert calls == ["sync", "async"]


async def test_hook_on_event(tmp_path: Path):
    got: list[str] = []

    class Sync:
        @hookimpl
        def on_event(self, event):
            got.append(f"sync:{event.name}")

    class Async:
        @hookimpl
        async def on_event(self, event):
            got.append(f"async:{event.name}")

    async with make_app(tmp_path, Sync(), Async()) as app:
        app.bus.publish("agent_output", {"text": "hi"})
        await app.bus.drain()
    assert "sync:agent_output" in got and "async:agent_output" in got


async def test_hook_register_embedding_providers(tmp_path: Path):
    class P:
        name = "emb"

        @hookimpl
        def register_embedding_providers(self, registry):
            registry.add("fake", lambda config: FakeEmbedder(dimension=8))

    async with make_app(tmp_path, P()) as app:
        factory = app.embedding_factories["emb"].factories["fake"]
        assert factory({}).info.dimension == 8
        assert app.host.info("emb").contributions["embedding_providers"] == ["fake"]


async def test_hook_register_adapters(tmp_path: Path):
    folder = tmp_path / "lua"
    folder.mkdir()

    class P:
        name = "adapters"

        @hookimpl
        def register_adapters(self, registry):
            registry.add(folder)

    class Bad:
        name = "bad-adapters"

        @hookimpl
        def register_adapters(self, registry):
            registry.add(tmp_path / "missing")

    async with make_app(tmp_path, P(), Bad()) as app:
        assert app.adapter_folders["adapters"].folders == [folder]
        info = app.host.info("bad-adapters")
        assert info.status == "failed" and "does not exist" in info.error


def test_hook_register_routes(tmp_path: Path):
    async def hello(request):
        return None

    class P:
        name = "routes"

        @hookimpl
        def register_routes(self, router):
            router.add("/hello", hello, methods=["GET", "POST"])

    class Bad:
        name = "bad-routes"

        @hookimpl
        def register_routes(self, router):
            router.add("relative", hello)

    app = make_app(tmp_path, P(), Bad())
    routes = app.host.call_register("register_routes", PluginRoutes)
    assert routes["routes"].routes == [("/hello", hello, ["GET", "POST"])]
    assert "must start with '/'" in app.host.info("bad-routes").error
    app.config.close()


async def test_a_plugin_failing_at_startup_leaves_the_app_running(tmp_path: Path):
    class Broken:
        name = "broken"

        @hookimpl
        def startup(self, sdk):
            raise RuntimeError("no credentials")

    async with make_app(tmp_path, Broken(), builtins=("homeagent_core.builtin.cfgmgr",)) as app:
        status = app.status()
        assert status["failed"] == ["broken"]
        assert "cfgmgr" in status["started"]


def test_registering_a_plugin_class_through_the_app_fails_loudly(tmp_path: Path):
    class NotInstantiated:
        @hookimpl
        def startup(self, sdk):
            return None

    with pytest.raises(PluginValidationError, match="did you forget"):
        make_app(tmp_path, NotInstantiated)


async def test_disabled_plugins_stored_in_config_are_not_loaded(tmp_path: Path):
    app = make_app(tmp_path, builtins=("homeagent_core.builtin.cfgmgr",))
    app.config.set_plugin_disabled("cfgmgr", True)
    app.config.close()
    again = make_app(tmp_path, builtins=("homeagent_core.builtin.cfgmgr",))
    assert "cfgmgr" not in again.host.plugin_names()
    assert again.host.info("cfgmgr").status == "blocked"
    again.config.close()
