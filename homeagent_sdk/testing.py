"""Test kit for HomeAgent and its plugins (a pytest plugin).

It is active in every pytest run as soon as HomeAgent is installed (``pytest11`` entry point
``homeagent``), so do not list it in ``pytest_plugins`` as well: pytest would register it
twice. With plugin autoloading disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``) enable it with
``-p homeagent_sdk.testing``. Nothing in it touches the network, and importing it does nothing
but define names.

Doubles:

* :class:`FakeModel` — a scripted chat model (replies, tool calls, streaming, delays) that
  records every request it was sent (:func:`ToolCallReply`, :class:`FakeReply`).
* :class:`FakeModelServer` — a :class:`FakeModel` behind a loopback OpenAI-compatible HTTP
  endpoint, for end-to-end tests of a real daemon (``homeagent serve`` in a subprocess).
* :class:`FakeEmbedder` — a character n-gram hashing embedder: similar texts get similar
  vectors, equal texts equal vectors, so recall and ranking can be tested without a model.

Fixtures:

* ``agent`` — an :class:`AgentHarness`: the real kernel, memory and plugin host on a temporary
  data directory with a :class:`FakeModel` (``agent.model``) and a :class:`FakeEmbedder`; no
  built-ins, no web UI, no installed entry-point plugins. It starts on the first
  ``await agent.ask(...)`` (or ``await agent.start()``), so plugins registered before that take
  part in start-up exactly as in the daemon.
* ``make_agent`` — the factory behind ``agent`` (``make_agent(builtins=..., memory=False)``).
* ``register_plugin`` — ``register_plugin(plugin)`` adds a plugin to ``agent``; it is always
  removed again after the test (its ``shutdown`` runs, its tools and channels are detached).
* ``hook_recorder`` — a :class:`HookRecorder` that sees every hook call of ``agent``:
  ``hook_recorder.getcalls("before_toolcall")``.
* ``no_model_requests`` — forbids real model requests for the test (the ``agent`` fixture turns
  it on itself); ``homeagent_allow_model_requests = false`` in the pytest ini makes it apply
  to every test.
* ``proc_harness`` — runs an out-of-process plugin object over an in-memory protocol
  connection (:class:`ProcHarness`): the real wire format, no subprocess.

End to end, against a real daemon:

* :func:`serve_daemon` — ``async with serve_daemon(data, env, settings=[...]) as daemon``:
  ``homeagent serve`` in a subprocess on a data directory, once it printed ``HomeAgent
  running``; :class:`ServedDaemon` gives its ``url``, its ``output`` lines so far, ``await
  daemon.cli(...)`` and ``await daemon.printed(text)``. SIGTERM at the end (SIGKILL after a
  bounded wait); it must exit with status 0 without printing any of ``secrets``.
* :func:`daemon_env` — the environment for it: which plugins load, a ``PYTHONPATH`` entry.
* :func:`plugin_pythonpath` — installs a plugin project with pip into a folder for
  ``PYTHONPATH`` unless its entry point is installed already.
* :func:`run_cli` / :func:`cli_output` — one ``homeagent`` command against a data directory:
  its stdout (raising :class:`CommandFailed` with the output on an error), or all its output.
* :func:`free_port` — a free loopback TCP port.

The SDK never imports ``homeagent_core`` by name; the fixtures that need the running core
resolve it with ``importlib`` when they are used, so ``import homeagent_sdk.testing`` stays
light and the SDK stays installable on its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import itertools
import re
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from homeagent_sdk import ChannelRegistry, PluginSDK, SettingsRegistry, ToolRegistryProtocol, hookimpl
from homeagent_sdk._daemon_harness import (
    CommandFailed,
    ServedDaemon,
    cli_output,
    daemon_env,
    free_port,
    plugin_pythonpath,
    run_cli,
    serve_daemon,
)
from homeagent_sdk._fake_model import FakeModel, FakeReply, ToolCallReply
from homeagent_sdk._fake_model_server import FakeModelServer
from homeagent_sdk._proc_harness import ProcHarness
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput, make_fingerprint
from homeagent_sdk.errors import PluginError, UsageError
from homeagent_sdk.types import StageContext, ToolCall, ToolResult

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "AgentHarness",
    "CommandFailed",
    "FakeEmbedder",
    "FakeModel",
    "FakeModelServer",
    "FakeReply",
    "HookCall",
    "HookRecorder",
    "ModelRequestsForbidden",
    "ProcHarness",
    "ServedDaemon",
    "ToolCallReply",
    "cli_output",
    "daemon_env",
    "forbid_model_requests",
    "free_port",
    "plugin_pythonpath",
    "run_cli",
    "serve_daemon",
]

_WORD = re.compile(r"[a-z0-9]+")


def _core(module: str) -> Any:
    """Import a ``homeagent_core`` module on first use (the SDK may not import it by name)."""
    return importlib.import_module(f"homeagent_core.{module}")


# --------------------------------------------------------------------------- FakeEmbedder


class FakeEmbedder(EmbeddingProvider):
    """Deterministic hashing embedder for tests (text, and optionally images).

    Text features: CJK characters and their bigrams, lower-cased Latin words. Image inputs
    (when ``image=True``) hash their bytes, so the same image always gets the same vector.
    """

    __test__ = False

    def __init__(
        self,
        dimension: int = 64,
        *,
        image: bool = False,
        name: str = "fake",
        languages: frozenset[str] = frozenset({"*"}),
    ) -> None:
        modalities = frozenset({"text", "image"} if image else {"text"})
        self.info = EmbeddingInfo(
            name=name,
            model=f"fake-{dimension}",
            dimension=dimension,
            fingerprint=make_fingerprint(name, f"fake-{dimension}", dimension),
            modalities=modalities,
            languages=languages,
        )
        self.calls: list[list[EmbedInput]] = []

    @staticmethod
    def features(text: str) -> list[str]:
        text = text.lower()
        cjk = [c for c in text if "\u4e00" <= c <= "\u9fff"]
        feats = cjk + [a + b for a, b in itertools.pairwise(cjk)]
        feats += _WORD.findall(text)
        return feats

    def _bucket(self, feature: str) -> int:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.info.dimension

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        import numpy as np

        self.check_inputs(inputs)
        self.calls.append(list(inputs))
        out = np.zeros((len(inputs), self.info.dimension), dtype=np.float32)
        for row, item in enumerate(inputs):
            if item.modality == "image":
                feats = [hashlib.sha256(item.data or b"").hexdigest()[i : i + 4] for i in range(8)]
            else:
                feats = self.features(item.text or "")
            for feat in feats:
                out[row, self._bucket(feat)] += 1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


# --------------------------------------------------------------------------- model requests


class ModelRequestsForbidden(UsageError):
    """A test tried to reach a real model while real model requests are forbidden."""


def forbid_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every real chat or HTTP-embedding request raise :class:`ModelRequestsForbidden`.

    Patches the two places the core sends model requests from (the adapter-driven chat
    provider and the HTTP embedding provider) for the duration of ``monkeypatch``. The error is
    not a ``ProviderError``, so source fallback cannot swallow it.
    """
    hint = (
        "real model requests are forbidden in this test: script the model instead "
        "(agent.model.add('reply') / FakeModel([...])), or set homeagent_allow_model_requests = true"
    )

    async def chat(self: Any, request: dict[str, Any]) -> dict[str, Any]:
        raise ModelRequestsForbidden(f"{hint} (chat request to source {getattr(self, 'name', '?')!r})")

    def chat_stream(self: Any, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        raise ModelRequestsForbidden(f"{hint} (streaming request to source {getattr(self, 'name', '?')!r})")

    async def embed(self: Any, inputs: list[Any]) -> Any:
        raise ModelRequestsForbidden(f"{hint} (HTTP embedding request)")

    adapter = _core("providers.adapter")
    monkeypatch.setattr(adapter.LuaAdaptedProvider, "chat", chat)
    monkeypatch.setattr(adapter.LuaAdaptedProvider, "chat_stream", chat_stream)
    monkeypatch.setattr(_core("embeddings.http").HttpEmbeddingProvider, "embed", embed)


# --------------------------------------------------------------------------- hook recorder


@dataclass
class HookCall:
    """One recorded hook call: ``call.name`` and its arguments as attributes (``call.ctx``).

    Stage contexts are the turn's live objects: they show the state after every handler ran.
    """

    name: str
    kwargs: dict[str, Any]

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["kwargs"][key]
        except KeyError:
            raise AttributeError(f"hook call {self.name} has no argument {key!r}") from None


class HookRecorder:
    """Records every hook call the agent makes, like pytest's ``HookRecorder``.

    The host calls hook implementations directly (stage handlers run concurrently and may be
    async, which pluggy's synchronous ``pm.hook.<name>()`` cannot do), so pluggy's
    ``add_hookcall_monitoring`` would see nothing. The recorder therefore takes part as a
    plugin implementing every hook, registered last, with a global scope: it is called exactly
    when, and with exactly what, every other plugin is called.
    """

    __test__ = False
    name = "hook_recorder"

    def __init__(self) -> None:
        self.calls: list[HookCall] = []
        self._waiters: list[tuple[str, int, Callable[[HookCall], bool] | None, asyncio.Future[None]]] = []

    def _add(self, name: str, **kwargs: Any) -> None:
        self.calls.append(HookCall(name, kwargs))
        for waiter in list(self._waiters):
            hook, wanted, where, future = waiter
            if hook == name and not future.done() and len(self._matching(hook, where)) >= wanted:
                future.set_result(None)
                self._waiters.remove(waiter)

    def _matching(self, name: str, where: Callable[[HookCall], bool] | None) -> list[HookCall]:
        return [c for c in self.getcalls(name) if where is None or where(c)]

    def getcalls(self, names: str | Iterable[str]) -> list[HookCall]:
        """Calls of the given hooks in call order (``"on_input before_output"`` or a list)."""
        wanted = set(names.split()) if isinstance(names, str) else set(names)
        return [c for c in self.calls if c.name in wanted]

    def getcall(self, name: str) -> HookCall:
        """The one call of ``name``; fails when there were none or several."""
        calls = self.getcalls(name)
        if len(calls) != 1:
            raise AssertionError(f"expected exactly one call of {name}, got {len(calls)}: {calls!r}")
        return calls[0]

    def clear(self) -> None:
        self.calls.clear()

    async def wait_for(
        self, name: str, count: int = 1, *, where: Callable[[HookCall], bool] | None = None, timeout: float = 5.0
    ) -> list[HookCall]:
        """Wait until ``name`` was called ``count`` times (``where`` filters the calls); returns them.

        ``on_event`` is delivered asynchronously, so event assertions wait:
        ``await recorder.wait_for("on_event", where=lambda c: c.event.name == "skill_detected")``.

        Raises:
            TimeoutError: not seen within ``timeout`` seconds.
        """
        if len(self._matching(name, where)) < count:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((name, count, where, future))
            try:
                async with asyncio.timeout(timeout):
                    await future
            except TimeoutError:
                raise TimeoutError(
                    f"{name} was called {len(self._matching(name, where))} matching time(s) within {timeout:g} s; "
                    f"expected {count}"
                ) from None
        return self._matching(name, where)

    # every hook, recorded -------------------------------------------------------------

    @hookimpl
    def on_input(self, ctx: StageContext) -> None:
        self._add("on_input", ctx=ctx)

    @hookimpl
    def pre_action(self, ctx: StageContext) -> None:
        self._add("pre_action", ctx=ctx)

    @hookimpl
    def post_action(self, ctx: StageContext) -> None:
        self._add("post_action", ctx=ctx)

    @hookimpl
    def before_toolcall(self, ctx: StageContext, call: ToolCall) -> None:
        self._add("before_toolcall", ctx=ctx, call=call)

    @hookimpl
    def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
        self._add("after_toolcall", ctx=ctx, call=call, result=result)

    @hookimpl
    def before_output(self, ctx: StageContext) -> None:
        self._add("before_output", ctx=ctx)

    @hookimpl
    def after_output(self, ctx: StageContext) -> None:
        self._add("after_output", ctx=ctx)

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        self._add("register_tools", registry=registry)

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        self._add("register_input_channels", registry=registry)

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        self._add("register_output_channels", registry=registry)

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        self._add("register_settings", registry=registry)

    @hookimpl
    def startup(self, sdk: PluginSDK) -> None:
        self._add("startup", sdk=sdk)

    @hookimpl
    def shutdown(self) -> None:
        self._add("shutdown")

    @hookimpl
    def on_event(self, event: Any) -> None:
        self._add("on_event", event=event)


# --------------------------------------------------------------------------- the agent


class AgentHarness:
    """An in-process agent for tests: the real kernel, memory and plugin host.

    :param data_dir: its data directory (created).
    :param model: the chat model (default: a :class:`FakeModel` answering ``"ok"``).
    :param embedder: the memory's embedder (default: a :class:`FakeEmbedder`).
    :param memory: open the memory system (graph, documents, knowledge).
    :param builtins: module paths of built-in plugins to load (default: none).
    :param strict: a registered or installed plugin that fails to register or start raises
        :class:`PluginError` from :meth:`start` instead of being only marked failed.
    """

    __test__ = False

    def __init__(
        self,
        data_dir: Path | str,
        *,
        model: Any = None,
        embedder: EmbeddingProvider | None = None,
        memory: bool = True,
        builtins: Iterable[str] = (),
        strict: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.model: Any = model if model is not None else FakeModel(default="ok")
        self.embedder = embedder if embedder is not None else FakeEmbedder()
        self.memory_enabled = memory
        self.builtins = tuple(builtins)
        self.strict = strict
        self.app: Any = None
        self._pending: list[tuple[object, str]] = []
        self._installed: list[str] = []
        self._overrides: dict[str, Any] = {}
        self._events: dict[str, Callable[[], None]] = {}
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ before start

    @property
    def started(self) -> bool:
        return self.app is not None and self.app.started

    def register(self, plugin: object, name: str | None = None) -> str:
        """Add a plugin object; returns its name.

        Before start it takes part in start-up like any plugin; after start use
        :meth:`add_plugin` (its ``startup`` hook has to be awaited).

        Raises:
            PluginValidationError: the object is a class or its hooks do not match the specs.
            UsageError: the agent is already running.
        """
        if self.started:
            raise UsageError("the agent is already running: `await agent.add_plugin(plugin)` adds a plugin live")
        name = _core("plugins.manager").PluginHost().register(plugin, name=name)  # validates, same messages
        if any(n == name for _, n in self._pending):
            raise UsageError(f"a plugin named {name!r} is already registered with this agent")
        self._pending.append((plugin, name))
        return name

    def set(self, key: str, value: Any) -> None:
        """Set a config key (``core.*`` or ``plugin.<name>.*``); before start it applies at start."""
        if self.started:
            self.app.config.set(key, value)
        else:
            self._overrides[key] = value

    def install(self, source: Path | str, *, overwrite: bool = False) -> str:
        """Install a plugin package into the data directory before start; returns its name.

        ``source`` is a ``.hmap`` file, a skill folder (with ``SKILL.md``; copied whole into
        ``<data>/skills/``) or a project folder made with ``hmapdev new`` (built and packed
        first, as ``hmapdev pack`` does).

        Raises:
            UsageError: the agent is already running (local plugins are found at start).
        """
        if self.app is not None:
            raise UsageError("install plugins before the agent starts: local plugins are discovered at start")
        path = Path(source)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and (path / "SKILL.md").is_file():
            # A skill folder is copied whole (references/, scripts/, assets/ included).
            skill = _core("plugins.skills").install_skill(path, self.data_dir / "skills", overwrite=overwrite)
            self._installed.append("skills")
            return str(skill.name)
        if path.is_dir():
            path = importlib.import_module("hmapdev.build").pack_project(path.resolve())
        result = _core("plugins.packages").install_package(self.data_dir, path, overwrite=overwrite)
        self._installed.append(result["name"])
        return str(result["name"])

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> AgentHarness:
        """Build and start the app (idempotent)."""
        async with self._lock:
            if self.app is not None:
                return self
            app = _core("app").App(
                self.data_dir,
                load_entrypoints=False,
                builtins=self.builtins,
                provider=self.model,
                memory=self.memory_enabled,
                embedder=self.embedder,
                overrides=self._overrides,
            )
            for plugin, name in self._pending:
                app.host.register(plugin, name=name, kind="local")
            self.app = app
            await app.start()
            if self.strict:
                self._raise_failures([name for _, name in self._pending] + self._installed)
        return self

    def _raise_failures(self, names: Iterable[str]) -> None:
        for name in names:
            info = self.app.host.info(name)
            if info is not None and info.status == "failed":
                raise PluginError(f"plugin {name!r} failed: {info.error}", plugin_name=name)

    async def aclose(self) -> None:
        """Stop everything (plugins' ``shutdown``, memory flush)."""
        for unsubscribe in self._events.values():
            unsubscribe()
        self._events.clear()
        if self.app is not None:
            await self.app.stop()

    async def __aenter__(self) -> AgentHarness:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ live plugins

    async def add_plugin(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin, before or after start; after start its hooks run at once.

        Raises:
            PluginError: (strict) its registration or ``startup`` failed.
        """
        if not self.started:
            return self.register(plugin, name)
        app = self.app
        host = app.host
        name = host.register(plugin, name=name, kind="local")
        registries = _core("plugins.registries")
        for handler in host.handlers("register_settings"):
            if handler.plugin_name == name:
                settings = registries.PluginSettings(name, app.config, host)
                host.call_registration("register_settings", name, registry=settings)
                app.settings[name] = settings
        app.kernel.attach_plugin(name)
        for handler in host.handlers("startup"):
            if handler.plugin_name == name:
                try:
                    await host.acall("startup", handler, sdk=app.sdk_for(name))
                except Exception as exc:
                    host.record_failure(name, exc)
                    app.kernel.detach_plugin(name)
                    if self.strict:
                        raise PluginError(f"plugin {name!r}: startup failed: {exc}", plugin_name=name) from exc
                    return name
                info = host.info(name)
                if info is not None:
                    info.status = "started"
        for handler in host.handlers("on_event"):
            if handler.plugin_name == name:
                self._events[name] = app.bus.subscribe(
                    lambda event, h=handler: host.deliver_event(h, event), label=name
                )
        return name

    async def remove_plugin(self, name: str) -> None:
        """Remove a plugin: its ``shutdown`` runs (if started), its tools and channels go."""
        if not self.started:
            self._pending = [(p, n) for p, n in self._pending if n != name]
            return
        host = self.app.host
        unsubscribe = self._events.pop(name, None)
        if unsubscribe is not None:
            unsubscribe()
        for handler in host.handlers("shutdown"):
            if handler.plugin_name == name:
                async with asyncio.timeout(10):
                    await host.acall("shutdown", handler)
        self.app.kernel.detach_plugin(name)
        host.unregister(name)

    # ------------------------------------------------------------------ using it

    @property
    def kernel(self) -> Any:
        if not self.started:
            raise UsageError("the agent is not started: `await agent.start()` or `await agent.ask(...)` first")
        return self.app.kernel

    @property
    def config(self) -> Any:
        if self.app is None:
            raise UsageError("the agent is not started: use agent.set(key, value) before start")
        return self.app.config

    @property
    def host(self) -> Any:
        return self.kernel.host

    @property
    def memory(self) -> Any:
        """The memory facade plugins see as ``sdk.memory`` (recall, commit, ...)."""
        self.kernel  # noqa: B018 - raises a clear error when not started
        return self.app.services.memory

    def tool_names(self) -> list[str]:
        return list(self.kernel.tools.names())

    async def ask(self, text: str, *, channel: str = "library", timeout: float = 30.0) -> Any:
        """Send ``text`` through a whole turn; returns the reply (``str(reply)`` is its text)."""
        await self.start()
        return await self.kernel.ask(text, channel, timeout=timeout)

    async def stream(self, text: str, *, channel: str = "library") -> AsyncIterator[str]:
        """Send ``text`` and yield the reply as it streams."""
        await self.start()
        async for delta in self.kernel.stream(text, channel):
            yield delta

    async def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Run one registered tool as the kernel would (validation, timeout, stage hooks excluded)."""
        await self.start()
        call = ToolCall(id=f"test_{next(_call_ids)}", name=name, arguments=arguments)
        return await self.kernel.tools.execute(call)  # type: ignore[no-any-return]

    def plugin(self, name: str) -> dict[str, Any]:
        """What the host knows about a plugin (status, hooks, contributions) as a dict."""
        info = self.kernel.host.info(name)
        if info is None:
            raise KeyError(f"no plugin {name!r}; known: {', '.join(p.name for p in self.kernel.host.plugins())}")
        return info.to_dict()  # type: ignore[no-any-return]


_call_ids = itertools.count(1)


# --------------------------------------------------------------------------- pytest plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "homeagent_allow_model_requests",
        type="bool",
        default=True,
        help="HomeAgent test kit: false forbids real model requests in every test",
    )


@pytest.fixture(autouse=True)
def _homeagent_model_request_switch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if not request.config.getini("homeagent_allow_model_requests"):
        forbid_model_requests(monkeypatch)


@pytest.fixture
def no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forbid real model requests in this test (:func:`forbid_model_requests`)."""
    forbid_model_requests(monkeypatch)


@pytest_asyncio.fixture
async def make_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., AgentHarness]]:
    """``make_agent(**options)`` -> :class:`AgentHarness` on its own temporary data dir; all closed after."""
    forbid_model_requests(monkeypatch)
    made: list[AgentHarness] = []

    def make(**options: Any) -> AgentHarness:
        harness = AgentHarness(tmp_path / f"homeagent-data-{len(made)}", **options)
        made.append(harness)
        return harness

    yield make
    for harness in reversed(made):
        await harness.aclose()


@pytest_asyncio.fixture
async def agent(make_agent: Callable[..., AgentHarness]) -> AgentHarness:
    """An in-process agent with a :class:`FakeModel` (``agent.model``); starts on first use."""
    return make_agent()


@pytest_asyncio.fixture
async def register_plugin(agent: AgentHarness) -> AsyncIterator[Callable[..., str]]:
    """``register_plugin(plugin, name=None) -> name``: added to ``agent``, always removed after the test."""
    names: list[str] = []

    def register(plugin: object, name: str | None = None) -> str:
        registered = agent.register(plugin, name)
        names.append(registered)
        return registered

    yield register
    for name in reversed(names):
        await agent.remove_plugin(name)


@pytest_asyncio.fixture
async def hook_recorder(agent: AgentHarness) -> AsyncIterator[HookRecorder]:
    """A :class:`HookRecorder` taking part in ``agent`` (``getcalls("on_input")``)."""
    recorder = HookRecorder()
    name = await agent.add_plugin(recorder, HookRecorder.name)
    yield recorder
    await agent.remove_plugin(name)


@pytest_asyncio.fixture
async def proc_harness() -> AsyncIterator[Callable[..., Any]]:
    """``await proc_harness(plugin, config={})`` -> a started :class:`ProcHarness`; stopped after."""
    started: list[ProcHarness] = []

    async def make(plugin: object, *, name: str = "plugin", config: dict[str, Any] | None = None) -> ProcHarness:
        harness = ProcHarness(plugin, name=name)
        started.append(harness)
        return await harness.start(config)

    yield make
    for harness in reversed(started):
        await harness.stop()
