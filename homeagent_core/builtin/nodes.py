"""Built-in ``nodes``: remote devices (a laptop, a Raspberry Pi, a phone) that lend the agent hands.

The home side of ``docs/NODES.md``. ``homeagent nodes pair NAME`` makes a one-time code (10
minutes); the device trades it for a device token (``homeagent node join``, the route
``POST /api/v1/nodes/join``) and keeps one WebSocket to the web UI's port
(``/api/v1/nodes/ws``). While a node is connected, each capability it offers is the tool
``node_<name>_<capability>`` (see :mod:`homeagent_core.builtin.nodes_link`); the people policy
applies to them like to any tool (the defaults: ``node_*_run``, ``files``, ``clipboard``,
``screenshot`` and ``camera_snap`` ask the owner for an adult and are denied to a child).
``run`` asks the owner on every call, the owner's own turns included, unless the node lists the
command as ``silent``. Each node is also reachable as the output channel ``device/<name>``
(``device:<name>``): what is sent there is shown as a notification on the device.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.nodes_link import CallFailed, Link, LinkLimits, NodeHub
from homeagent_core.builtin.nodes_store import DB_NAME, PLUGIN_NAME, NodesError, NodeStore
from homeagent_sdk import Caps, ChannelDef, ChannelRegistry, ConfigDef, SettingsRegistry, hookimpl
from homeagent_sdk.errors import ChannelSendError, ToolError
from homeagent_sdk.types import MediaAttachment, ToolCall, ToolDef, ToolResult

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK
    from homeagent_sdk.node import NodeImage

__all__ = ["CHANNEL", "Nodes", "make_plugin", "tool_name"]

log = logging.getLogger("homeagent.nodes")

CHANNEL = "device"
_CHANNEL_HELP = (
    'Send to a node (remote device) as a notification: output_send__device with meta {"conversation": "<node>"} '
    "(or the channel name device/<node>); type text. The node must be online and offer notify."
)


def tool_name(node: str, capability: str) -> str:
    """The tool of one node capability: ``node_<name>_<capability>``."""
    return f"node_{node}_{capability}"


class Nodes:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.sdk: ScopedSDK | None = None
        self.store: NodeStore | None = None
        self.hub: NodeHub | None = None
        self._asks = itertools.count(1)
        self._failures: dict[str, list[float]] = {}

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(key="call_timeout", type="duration", default="60s", min=1, max=3600,
                               description="How long a call to a node's capability may take before it fails."))
        registry.add(ConfigDef(key="max_result_bytes", type="int", default=64 * 1024, min=1024, max=4 * 1024 * 1024,
                               description="Largest text a node's answer may bring to the model (longer is cut)."))
        registry.add(ConfigDef(key="max_frames_per_10s", type="int", default=200, min=10, max=100_000,
                               description="A node that sends more frames in 10 seconds is cut off as flooding."))
        registry.add(ConfigDef(key="token_days", type="int", default=0, min=0, max=3650,
                               description="Days a device token lives after its pairing (then the node gets 401 "
                                           "and must be paired again); 0: until it is revoked."))
        registry.add(ConfigDef(key="keepalive", type="duration", default="15s", min=1, max=3600,
                               description="How often a connected node's token is checked again (a revoked token "
                                           "is cut off then at the latest)."))

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="a node (remote device): device/<name> shows a notification",
                                caps=int(Caps.TEXT), send=self._send, help=_CHANNEL_HELP))

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        self.sdk = sdk
        self.store = await asyncio.to_thread(NodeStore, sdk.data_dir / DB_NAME)
        await asyncio.to_thread(self.store.all_offline)
        kernel = sdk.services.kernel if sdk.services is not None else None
        if kernel is None:
            return  # no kernel (an offline command): nothing connects
        tools = kernel.tools
        limits = LinkLimits(
            call_timeout=float(sdk.settings.get("call_timeout") or 60),
            max_result_bytes=int(sdk.settings.get("max_result_bytes") or 65536),
            max_frames_per_10s=int(sdk.settings.get("max_frames_per_10s") or 200),
            keepalive_s=float(sdk.settings.get("keepalive") or 15),
            token_max_age_s=float(sdk.settings.get("token_days") or 0) * 86400,
        )
        self.hub = NodeHub(self.store, limits, make_tool=self._tool,
                           add_tool=lambda t: tools.add(t, plugin=PLUGIN_NAME), remove_tool=tools.remove,
                           publish=sdk.events.publish)

    @hookimpl
    async def shutdown(self) -> None:
        if self.hub is not None:
            await self.hub.close_all()
        if self.store is not None:
            await asyncio.to_thread(self.store.all_offline)
            await asyncio.to_thread(self.store.close)
            self.store = None

    # ------------------------------------------------------------------ what the web UI and CLI use

    async def join(self, code: str, client: str) -> tuple[str, str]:
        """Trade a pairing code for ``(name, token)``; five wrong codes a minute from one address are refused.

        Raises:
            NodesError: the code is wrong, used or expired, or too many wrong tries.
        """
        import time

        assert self.store is not None
        now = time.monotonic()
        for address in [a for a, times in self._failures.items() if times[-1] < now - 60]:
            del self._failures[address]  # forget addresses whose last wrong code is over a minute old
        recent = [t for t in self._failures.get(client, []) if t > now - 60]
        if len(recent) >= 5:
            raise NodesError("too many wrong pairing codes from this address; wait a minute")
        try:
            return await asyncio.to_thread(self.store.redeem, code)
        except NodesError:
            self._failures[client] = [*recent, now]
            raise

    async def listing(self) -> list[dict[str, Any]]:
        """Every paired node with ``online`` as the running daemon sees it."""
        assert self.store is not None
        rows = await asyncio.to_thread(self.store.list)
        live = self.hub.listing() if self.hub is not None else {}
        return [{**r.to_dict(), "online": r.name in live} for r in rows]

    async def pair(self, name: str) -> dict[str, Any]:
        """A one-time code for node ``name``, and the address the web UI is served on.

        Raises:
            NodesError: invalid name, or a node of that name is already paired.
        """
        assert self.store is not None
        code, expires = await asyncio.to_thread(self.store.pair, name)
        services = self.sdk.services if self.sdk is not None else None
        webui = services.host.pm.get_plugin("webui") if services is not None and services.host is not None else None
        url = str(getattr(webui, "url", "") or "") if getattr(webui, "port", None) else ""
        return {"name": name.strip().lower(), "code": code, "expires": expires, "url": url}

    async def revoke(self, name: str) -> str:
        """Forget node ``name``: its token dies and its open link is closed now."""
        assert self.store is not None
        name = name.strip().lower()
        known = await asyncio.to_thread(self.store.revoke, name)
        closed = await self.hub.close(name, "the node was revoked", code=4401) if self.hub is not None else False
        if not known and not closed:
            raise NodesError(f"no node named {name!r}; `homeagent nodes list` shows them")
        return f"node {name} revoked" + (" and disconnected" if closed else "")

    # ------------------------------------------------------------------ tools

    def _tool(self, link: Link, cap: dict[str, Any]) -> ToolDef:
        node, capability = link.name, str(cap["name"])
        silent = {str(s) for s in cap["meta"].get("silent", [])} if capability == "run" else set()

        async def handler(**args: Any) -> Any:
            if capability == "run" and str(args.get("command", "")) not in silent:
                waiting = await self._ask_owner(node, args)
                if waiting is not None:
                    return waiting
            return await self._call(node, capability, args)

        platform = link.platform.get("system", "")
        where = f"{node}, {platform}" if platform else node
        return ToolDef(name=tool_name(node, capability), description=f"[device {where}] {cap['description']}",
                       parameters=cap["parameters"], handler=handler,
                       timeout=(self.hub.limits.call_timeout if self.hub is not None else 60.0) + 5)

    async def _call(self, node: str, capability: str, args: dict[str, Any]) -> Any:
        if self.hub is None:
            raise ToolError("nodes are not running in this agent")
        text, images = await self.hub.call(node, capability, args)
        if not images:
            return text
        attachments = [await self._keep(image) for image in images]
        kept = ", ".join(a.digest or "not stored (no media store)" for a in attachments)
        return ToolResult("", tool_name(node, capability), True, f"{text}\nimages: {kept}", attachments=attachments)

    async def _keep(self, image: NodeImage) -> MediaAttachment:
        """An image from a node as an attachment, kept in the media store when there is one."""
        sdk = self.sdk
        if sdk is not None and getattr(sdk.services, "media", None) is not None:
            try:
                attachment: MediaAttachment = await sdk.media.put(image.data, image.mime, name=image.name)
                return MediaAttachment(digest=attachment.digest, mime=image.mime, data=image.data, name=image.name)
            except Exception as exc:
                log.warning("an image from a node was not stored: %s", exc)
        return MediaAttachment(mime=image.mime, data=image.data, name=image.name)

    async def _ask_owner(self, node: str, args: dict[str, Any]) -> str | None:
        """File a ``run`` call of the owner's own turn for the owner's decision; None when it may run now.

        A call of anyone else reaches the tool only once the policy allowed it (by default it
        asked the owner already), so it runs.
        """
        services = self.sdk.services if self.sdk is not None else None
        rights = services.rights if services is not None else None
        principal = rights.current() if rights is not None else None
        if rights is None or principal is None or principal.role != "owner":
            return None
        kernel = services.kernel if services is not None else None
        turn = kernel.turn if kernel is not None else None
        channel = turn.item.channel if turn is not None else "cli"
        name = tool_name(node, "run")
        call = ToolCall(f"nodes-run-{next(self._asks)}", name, dict(args), PLUGIN_NAME)

        async def execute(approved: ToolCall) -> ToolResult:
            try:
                text = await self._call(node, "run", approved.arguments)
            except (CallFailed, ToolError) as exc:
                return ToolResult(approved.id, name, False, str(exc), PLUGIN_NAME)
            return ToolResult(approved.id, name, True, str(text), PLUGIN_NAME)

        approval = await rights.approvals.request(principal, call, channel, execute)
        return (f"{name} ({args.get('command')!r}) needs the owner's approval on every call: request "
                f"#{approval.id} is waiting (homeagent people approve {approval.id}). Its result is sent to you "
                "when the owner decides; tell the person it is waiting.")

    # ------------------------------------------------------------------ the device channel

    async def _send(self, payload: str, meta: dict[str, Any], type: str) -> str:
        node = str(meta.get("conversation") or meta.get("node") or "").strip().lower()
        if not node:
            raise ChannelSendError('say which node: the channel device/<name>, or meta {"conversation": "<name>"}')
        if self.hub is None:
            raise ChannelSendError("nodes are not running in this agent")
        try:
            title = str(meta.get("title") or "HomeAgent")
            await self.hub.call(node, "notify", {"text": payload[:2000], "title": title})
        except CallFailed as exc:
            raise ChannelSendError(str(exc)) from None
        return f"shown on {node}"


def make_plugin() -> Nodes:
    return Nodes()

