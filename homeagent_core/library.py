"""``Agent``: HomeAgent as a library, for scripts and notebooks.

It runs the same kernel, memory and plugins as the daemon, over a data directory, without the
web UI unless asked::

    import asyncio

    from homeagent_core import Agent

    async def main() -> None:
        async with Agent(data_dir="./ha", llm={"base_url": "http://127.0.0.1:11434/v1",
                                               "model": "qwen2.5", "adapter": "openai"}) as agent:
            print(await agent.ask("我叫小王，住在杭州"))

    asyncio.run(main())

In Jupyter, top-level ``await`` works (the body of ``main`` runs as it is in a cell);
``agent.ask_sync(...)`` is for plain scripts without ``asyncio`` and
refuses to run inside an event loop (it says to ``await agent.ask(...)`` instead).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Unpack

from homeagent_core.aio import refuse_running_loop, run_sync
from homeagent_core.app import App
from homeagent_core.plugins.manager import DEFAULT_PLUGINS
from homeagent_sdk.api import ChatProvider
from homeagent_sdk.errors import UsageError
from homeagent_sdk.types import InjectOptions, ToolDef, ToolOptions

__all__ = ["Agent"]

_LLM_KEYS = {"base_url", "model", "adapter", "api_key", "context_window", "priority", "thinking_enabled",
             "adapter_path", "vision", "audio", "max_concurrent", "name"}


def _provider_from_llm(llm: dict[str, Any], app: App) -> ChatProvider:
    """A provider for one explicitly given source (not written to the data dir's config)."""
    unknown = set(llm) - _LLM_KEYS
    if unknown:
        raise UsageError(f"llm: unknown keys {sorted(unknown)}; use {sorted(_LLM_KEYS)}")
    missing = [k for k in ("base_url", "model") if not llm.get(k)]
    if missing:
        raise UsageError(f"llm: {', '.join(missing)} required, e.g. llm={{'base_url': 'https://api.deepseek.com', "
                         "'model': 'deepseek-chat', 'adapter': 'deepseek', 'api_key': '...'}")
    from homeagent_core.providers import ProviderManager, SourceConfig, deploy_bundled_adapters

    deploy_bundled_adapters(app.data_dir)
    values = {k: v for k, v in llm.items() if k != "name"}
    values.setdefault("adapter", "openai")
    values.setdefault("api_key", app.config.get("core.llm.api_key"))
    source = SourceConfig.from_mapping(str(llm.get("name", "library")), values)
    problem = source.problem()
    if problem:
        raise UsageError(f"llm: {problem}")
    return ProviderManager([source], default=source.name, data_dir=app.data_dir)


class Agent:
    """One agent over one data directory. Create it, then ``await agent.ask(...)``.

    :param data_dir: the data directory (default ``$HOMEAGENT_HOME`` or ``~/.homeagent``).
    :param llm: one model source ``{"base_url", "model", "adapter", "api_key"}``; without it
        the sources configured in the data directory are used.
    :param provider: any object implementing ``ChatProvider`` (e.g. ``FakeModel`` in tests);
        wins over ``llm``.
    :param plugins: extra plugin objects to register.
    :param web: also start the web UI built-in (and let built-ins open network listeners, such
        as the plugin manager's loopback API; without it two agents never compete for a port).
    :param load_entrypoints: load installed ``homeagent`` entry-point plugins.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        llm: dict[str, Any] | None = None,
        provider: ChatProvider | None = None,
        plugins: Iterable[object] = (),
        web: bool = False,
        load_entrypoints: bool = True,
        builtins: Sequence[str] | None = None,
    ) -> None:
        if builtins is None:
            builtins = tuple(p for p in DEFAULT_PLUGINS if web or not p.endswith(".webui"))
        self.app = App(data_dir, load_entrypoints=load_entrypoints, builtins=builtins, plugins=plugins,
                       provider=provider)
        self.app.services.listen_network = web
        self._portal: tuple[Any, Any] | None = None
        if provider is None and llm is not None:
            self.app.provider = _provider_from_llm(llm, self.app)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Agent:
        """Start plugins and the kernel (``ask`` does it on first use)."""
        await self.app.start()
        return self

    async def aclose(self) -> None:
        """Stop everything cleanly; pending memory writes are flushed."""
        await self.app.stop()

    async def __aenter__(self) -> Agent:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def kernel(self) -> Any:
        if self.app.kernel is None:
            raise UsageError("the agent is not started: `await agent.start()` or use `async with Agent(...)`")
        return self.app.kernel

    @property
    def data_dir(self) -> Any:
        return self.app.data_dir

    @property
    def config(self) -> Any:
        return self.app.config

    @property
    def owner(self) -> str:
        """The owner's name: who "我" / "I" is in what is said through this agent (the data
        directory's first person — the operating-system user at first start; ``homeagent people``
        renames and adds people). Needs a started agent."""
        people = self.app.people
        owner = people.owner() if people is not None else None
        if owner is None:
            raise UsageError("the agent is not started: `await agent.start()` or use `async with Agent(...)`")
        return owner.name

    @property
    def memory(self) -> Any:
        """The memory graph facade (``await agent.memory.recall(["小王"])``)."""
        return self.app.services.memory

    @property
    def residents(self) -> Any:
        """Resident sub-agents: ``await agent.residents.create("shop", "keeps the shopping list")``,
        ``send``, ``inspect``, ``compress``, ``reclaim``, ``destroy``, ``list`` (needs a started agent)."""
        return self.kernel.residents

    @property
    def documents(self) -> Any:
        return self.app.services.doc

    @property
    def knowledge(self) -> Any:
        return self.app.services.knowledge

    def add_tool(self, tool: ToolDef | Callable[..., Any], **options: Unpack[ToolOptions]) -> ToolDef:
        """Give the agent a tool: a typed function (its schema comes from the signature and
        docstring, like a plugin's) or a :class:`ToolDef`. Options as for ``register_tools``."""
        tool_def: ToolDef = self.kernel.tools.add(tool, plugin="library", **options)
        return tool_def

    # ------------------------------------------------------------------ talking

    async def ask(self, text: str, *, channel: str = "library", remember: bool = True,
                  timeout: float | None = 300) -> Any:
        """Send ``text``; returns the reply (a ``str`` subclass with ``usage``, ``reasoning_content``)."""
        if not self.app.started:
            await self.start()
        options = None if remember else InjectOptions(no_memory=True)
        return await self.kernel.ask(text, channel, options=options, timeout=timeout)

    async def stream(self, text: str, *, channel: str = "library", remember: bool = True) -> AsyncIterator[str]:
        """Send ``text`` and yield the reply as it streams."""
        if not self.app.started:
            await self.start()
        options = None if remember else InjectOptions(no_memory=True)
        async for delta in self.kernel.stream(text, channel, options=options):
            yield delta

    def ask_sync(self, text: str, **kwargs: Any) -> str:
        """``ask`` for synchronous code (scripts); the agent runs on a private event-loop thread.

        Call :meth:`close_sync` when done.

        Raises:
            SyncInAsyncError: called inside a running event loop (use ``await agent.ask``).
        """
        return str(self._portal_call(self.ask(text, **kwargs), "ask"))

    def close_sync(self) -> None:
        """Stop an agent used through the ``*_sync`` methods."""
        if self._portal is None:
            run_sync(self.aclose(), "close")
            return
        self._portal_call(self.aclose(), "close")
        loop, thread = self._portal
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._portal = None

    def _portal_call(self, coro: Any, what: str) -> Any:
        import asyncio
        import threading

        refuse_running_loop(coro, f"agent.{what}")
        if self._portal is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="homeagent-sync", daemon=True)
            thread.start()
            self._portal = (loop, thread)
        return asyncio.run_coroutine_threadsafe(coro, self._portal[0]).result()
