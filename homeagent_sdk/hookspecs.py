"""Every hook a HomeAgent plugin can implement.

Plugins implement hooks with ``@homeagent_sdk.hookimpl`` on plain functions (module plugins)
or methods (instance plugins). Impls may accept fewer arguments than the spec. The host calls
hooks only through ``homeagent_core.plugins.manager.PluginHost``.

Stage hooks fire once per turn stage; every plugin's impl of a stage runs concurrently on the
same :class:`~homeagent_sdk.types.StageContext`; an impl may be ``async def``; an exception in
one impl is recorded in ``ctx.errors`` and does not stop the others; setting ``ctx.response``
short-circuits the turn to ``after_output``.

Registration hooks run once per plugin at start (and again when the plugin is reloaded), each
with a registry that stamps every contribution with the plugin's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from homeagent_sdk._names import PROJECT_NAME

if TYPE_CHECKING:
    from homeagent_sdk.api import (
        AdapterRegistry,
        ChannelRegistry,
        CommandApp,
        EmbeddingRegistry,
        PluginSDK,
        RouteRegistry,
        SettingsRegistry,
        ToolRegistryProtocol,
    )
    from homeagent_sdk.types import Event, StageContext, ToolCall, ToolResult

hookspec = pluggy.HookspecMarker(PROJECT_NAME)

__all__ = ["hookspec"]


# --------------------------------------------------------------------------- stages


@hookspec
def on_input(ctx: StageContext) -> Any:
    """Called when an input reached the agent, before anything else processed it.

    :param ctx: the turn's context; ``ctx.raw_message``, ``ctx.source`` and ``ctx.channel``
        describe the input.

    Returns: ignored. Rewrite ``ctx.raw_message`` to change the input, set ``ctx.drop = True``
    to discard it silently, or set ``ctx.response`` to answer without calling the model.

    May be ``async def``.
    """


@hookspec
def pre_action(ctx: StageContext) -> Any:
    """Called when context and memory recall are ready, before the first model call.

    :param ctx: the turn's context; ``ctx.context_msgs`` holds the messages about to be sent
        and ``ctx.memory`` the recalled memory.

    Returns: ignored. Append system messages to ``ctx.context_msgs`` or data to ``ctx.extra``;
    setting ``ctx.response`` answers without calling the model.

    May be ``async def``.
    """


@hookspec
def post_action(ctx: StageContext) -> Any:
    """Called after every model reply, before any of its tool calls run.

    :param ctx: the turn's context; ``ctx.llm_text`` is the reply text and ``ctx.tool_calls``
        the calls the model asked for.

    Returns: ignored. Filter ``ctx.llm_text``, remove entries from ``ctx.tool_calls`` to drop
    calls, or set ``ctx.response`` to end the turn with that text.

    May be ``async def``.
    """


@hookspec
def before_toolcall(ctx: StageContext, call: ToolCall) -> Any:
    """Called before one tool call runs.

    :param ctx: the turn's context.
    :param call: the call; rewrite ``call.arguments`` in place to change what the tool gets.

    Returns: ``None`` to let the call run, or a string to reject it: the string is given to
    the model as the call's (failed) result. An impl whose plugin object has
    ``scope = "own_tools"`` only sees calls of that plugin's own tools.

    May be ``async def``.
    """


@hookspec
def after_toolcall(ctx: StageContext, call: ToolCall, result: ToolResult) -> Any:
    """Called after one tool call ran.

    :param ctx: the turn's context.
    :param call: the call that ran.
    :param result: its result; rewrite ``result.result`` in place to redact or reformat it.

    Returns: ignored. An impl whose plugin object has ``scope = "own_tools"`` only sees calls
    of that plugin's own tools.

    May be ``async def``.
    """


@hookspec
def before_output(ctx: StageContext) -> Any:
    """Called when the final reply text is ready, before it is sent to the output channel.

    :param ctx: the turn's context; ``ctx.final_text`` is what will be sent and ``ctx.channel``
        where.

    Returns: ignored. Rewrite ``ctx.final_text`` to format it for the channel.

    May be ``async def``.
    """


@hookspec
def after_output(ctx: StageContext) -> Any:
    """Called after the reply was sent (also after a short-circuited turn).

    :param ctx: the turn's context, read only: use it for statistics and logs.

    Returns: ignored.

    May be ``async def``.
    """


# --------------------------------------------------------------------------- registration


@hookspec
def register_tools(registry: ToolRegistryProtocol) -> None:
    """Called once at start (and on reload) to collect the plugin's tools.

    :param registry: call ``registry.add(fn_or_tooldef, name=None, ...)`` for each tool. A
        plain typed function becomes a tool named after the function, described by its
        docstring, with a JSON schema derived from its signature.

    Returns: ignored.

    Must be sync (the tools themselves may be ``async def``).
    """


@hookspec
def register_input_channels(registry: ChannelRegistry) -> None:
    """Called once at start to declare the input channels the plugin injects on.

    :param registry: call ``registry.add(ChannelDef(...))``.

    Returns: ignored.

    Must be sync.
    """


@hookspec
def register_output_channels(registry: ChannelRegistry) -> None:
    """Called once at start to declare the plugin's output channels.

    :param registry: call ``registry.add(ChannelDef(name=..., send=..., caps=...))``; the
        kernel generates ``output_send__<name>`` and ``output_send__<name>_help`` tools.

    Returns: ignored.

    Must be sync (``send`` may be ``async def``).
    """


@hookspec
def register_embedding_providers(registry: EmbeddingRegistry) -> None:
    """Called once at start to contribute embedding providers.

    :param registry: call ``registry.add(name, factory)`` where ``factory(config)`` returns an
        :class:`~homeagent_sdk.embeddings.EmbeddingProvider`.

    Returns: ignored.

    Must be sync.
    """


@hookspec
def register_settings(registry: SettingsRegistry) -> None:
    """Called once at start to declare the plugin's settings.

    :param registry: call ``registry.add(ConfigDef(key=..., type=..., default=...))``; keys
        are relative to the plugin's namespace ``plugin.<name>.``.

    Returns: ignored.

    Must be sync.
    """


@hookspec
def register_routes(router: RouteRegistry) -> None:
    """Called when the web UI starts, to add HTTP routes.

    :param router: call ``router.add(path, endpoint, methods=[...])`` with a Starlette
        endpoint; routes are mounted under ``/plugins/<plugin name>/`` and require the same
        authentication as the rest of the API.

    Returns: ignored.

    Must be sync.
    """


@hookspec
def register_commands(app: CommandApp) -> None:
    """Called before the ``homeagent`` command line runs, to add sub-commands.

    :param app: the root ``typer.Typer`` application; use ``app.command()`` or
        ``app.add_typer()``.

    Returns: ignored.

    Must be sync.
    """


@hookspec
def register_adapters(registry: AdapterRegistry) -> None:
    """Called once at start to contribute folders of Lua LLM adapters.

    :param registry: call ``registry.add(path)`` with a folder of ``*.lua`` adapter scripts.

    Returns: ignored.

    Must be sync.
    """


# --------------------------------------------------------------------------- lifecycle


@hookspec
def startup(sdk: PluginSDK) -> Any:
    """Called once when the daemon (or a library ``Agent``) has started, before any input.

    :param sdk: this plugin's own scoped SDK: settings table, data dir
        ``<data>/plugin_data/<name>/``, logger, input injection, memory access.

    Returns: ignored. Start background tasks here; an exception marks the plugin failed and
    the daemon continues without it.

    May be ``async def``.
    """


@hookspec
def shutdown() -> Any:
    """Called once when the daemon stops, in reverse start order.

    Returns: ignored. Stop background tasks and release resources; the call is bounded by a
    timeout.

    May be ``async def``.
    """


@hookspec
def on_event(event: Event) -> Any:
    """Called for every event published on the bus (``agent_output``, ``tool_call``, ...).

    :param event: the event; ``event.name`` is its type and ``event.data`` its payload.

    Returns: ignored. Delivery is asynchronous: a slow impl delays only its own deliveries.

    May be ``async def``.
    """
