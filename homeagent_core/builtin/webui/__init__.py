"""Built-in ``webui``: the browser UI, the REST API, SSE and an OpenAI-compatible endpoint.

A Starlette app served by uvicorn inside the daemon's event loop, bound to 127.0.0.1:8080 by
default (``homeagent serve --host/--port`` or the setting ``plugin.webui.addr``). Every API
route requires the API key or a login session; a foreign ``Host`` or a cross-site ``Origin`` is
refused before any route runs, and a cookie session must echo its CSRF token on every change
(see ``docs/SECURITY.md``). Connections are capped in total and per client address
(``plugin.webui.max_connections``, ``max_connections_per_address``: 503 with ``Retry-After``),
and a socket that sends no request is closed after ``IDLE_TIMEOUT``. It is also the only HTTP door of the plugin manager
(``/api/v1/plugins``). Plugins add routes under ``/plugins/<name>/`` through the
``register_routes`` hook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.i18n import locale_language, setting_value, t
from homeagent_sdk import Caps, ChannelDef, ChannelRegistry, ConfigDef, SettingsRegistry, hookimpl
from homeagent_sdk._net import listen_tcp
from homeagent_sdk.errors import ChannelSendError, PluginLoadError
from homeagent_sdk.i18n import SETTING_CHOICES

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from homeagent_core.builtin.webui.channel import WebChannel
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "webui"

__all__ = ["WebUI", "make_plugin", "parse_addr"]

log = logging.getLogger("homeagent.webui")

STATIC = Path(__file__).resolve().parent / "static"
#: Seconds a new connection may stay silent before its first request (then it is closed).
IDLE_TIMEOUT = 10.0
#: Largest WebSocket frame a node may send (a screenshot's base64 fits).
WS_MAX_BYTES = 8 * 1024 * 1024


def parse_addr(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``":8080"`` → (host, port).

    Raises:
        ValueError: not ``host:port`` with a port in 0..65535.
    """
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid listen address {addr!r}; write host:port, e.g. 127.0.0.1:8080")
    return (host.strip("[]") or "127.0.0.1"), int(port)


class WebUI:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.server: Any = None
        self.task: asyncio.Task[None] | None = None
        self.port: int | None = None
        self.host = "127.0.0.1"
        self.app: Starlette | None = None
        self.state: Any = None
        self.channel: WebChannel | None = None

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(key="addr", type="string", default="127.0.0.1:8080",
                               description="Listen address host:port.", restart_required=True))
        registry.add(ConfigDef(key="language", type="select", default="auto", options=list(SETTING_CHOICES),
                               description="The language of the web UI, the CLI and the messages to chat-app users: "
                                           "auto (the browser's language; the CLI follows LANG, a chat app the "
                                           "language a person writes in), zh (Chinese) or en (English). The web "
                                           "UI's language switch sets it."))
        registry.add(ConfigDef(key="username", type="string", default="admin", description="Admin login name."))
        registry.add(ConfigDef(key="api_key", type="password", default="", secret=True,
                               description="API key to use on first start instead of a generated one."))
        registry.add(ConfigDef(key="session_ttl_hours", type="int", default=24, min=1, max=24 * 90,
                               description="Login session lifetime."))
        registry.add(ConfigDef(key="trusted_proxies", type="string", default="", restart_required=True,
                               description="Comma-separated IPs/CIDRs of reverse proxies whose X-Forwarded-For and "
                                           "X-Forwarded-Proto are believed. Empty: the client address is the "
                                           "socket peer, and forwarded headers are ignored."))
        registry.add(ConfigDef(key="allowed_hosts", type="string", default="", restart_required=True,
                               description="Comma-separated extra host names the web UI answers to (e.g. a reverse "
                                           "proxy's public name). IP addresses, localhost and this machine's name "
                                           "are always allowed; any other Host header is refused (DNS rebinding)."))
        registry.add(ConfigDef(key="max_body_bytes", type="int", default=1024 * 1024, min=1024,
                               description="Largest JSON request body."))
        registry.add(ConfigDef(key="max_upload_bytes", type="int", default=64 * 1024 * 1024, min=1024,
                               description="Largest uploaded file."))
        registry.add(ConfigDef(key="max_connections", type="int", default=512, min=8, max=100_000,
                               restart_required=True,
                               description="Most HTTP connections (event streams included) open at once; "
                                           "more are answered 503 with Retry-After."))
        registry.add(ConfigDef(key="max_connections_per_address", type="int", default=384, min=4, max=100_000,
                               restart_required=True,
                               description="Most HTTP connections open at once from one client address; "
                                           "more are answered 503 with Retry-After."))

        registry.add(ConfigDef(key="push_timeout", type="duration", default="10s", min=1, max=120,
                               description="How long one Web Push request may take; a push service that does "
                                           "not answer in time is given up on (the subscription stays)."))
        registry.add(ConfigDef(key="push_subject", type="string", default="",
                               description="The contact sent to push services with each notification (VAPID "
                                           "subject): mailto:you@example.com or an https URL. Empty: "
                                           "mailto:homeagent@localhost."))
        registry.add(ConfigDef(key="push_allow_private", type="string", default="",
                               description="Private hosts a push subscription may point at (host:port, network), "
                                           "like plugin.web.allow_private; push services are public hosts, so "
                                           "this is normally empty."))

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name="webui", description="the web UI's chat"))

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        from homeagent_core.builtin.webui.channel import HELP

        registry.add(ChannelDef(
            name="webui", description="the browser: every open web UI tab, with a notification when hidden",
            caps=int(Caps.TEXT | Caps.IMAGE | Caps.FILE), sync=True, send=self._send, help=HELP,
        ))

    async def _send(self, payload: str, meta: dict[str, Any], type: str) -> str:
        if self.channel is None:
            raise ChannelSendError("the web UI is not running")
        return await self.channel.send(payload, meta, type)

    def _listen(self, sdk: ScopedSDK) -> tuple[str, int]:
        services = sdk.services
        assert services is not None
        host, port = parse_addr(sdk.settings.get("addr"))
        # `homeagent serve --host/--port` win over the setting.
        return services.listen_host or host, port if services.listen_port is None else services.listen_port

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        import uvicorn

        from homeagent_core.builtin.webui.app import build_app, build_state
        from homeagent_core.builtin.webui.conncap import capped_protocol

        if sdk.services is None:
            raise PluginLoadError("webui needs the privileged services of a built-in plugin", plugin_name=self.name)
        from homeagent_core.builtin.webui.channel import WebChannel

        # The address first: a web UI that cannot listen makes no credentials and prints no password.
        host, port = self._listen(sdk)
        try:
            sock = listen_tcp(host, port)
        except OSError as exc:
            raise PluginLoadError(
                f"webui cannot listen on {host}:{port}: {exc.strerror or exc}. "
                "Choose another port with `homeagent serve --port N` or `homeagent config set plugin.webui.addr`.",
                plugin_name=self.name,
            ) from None
        try:
            self.state, secrets = build_state(sdk)
        except BaseException:
            sock.close()
            raise
        self.channel = WebChannel(sdk.services.bus, sdk.services.data_dir / "webui_files",
                                  max_bytes=sdk.settings.get("max_upload_bytes"),
                                  clients=lambda: self.state.hub.client_count,
                                  log=sdk.services.conversation_log, rights=sdk.services.rights)
        if secrets:
            self._announce(secrets, sdk)
        self.app = build_app(self.state, bound_host=host)
        self.host, self.port = host, sock.getsockname()[1]
        # proxy_headers=False: uvicorn would otherwise believe X-Forwarded-For from 127.0.0.1, and any
        # local client could claim a fresh address per login try. Forwarded headers are read only from
        # plugin.webui.trusted_proxies (auth.client_ip).
        http = capped_protocol(
            max_total=int(sdk.settings.get("max_connections") or 512),
            max_per_address=int(sdk.settings.get("max_connections_per_address") or 384),
            idle_timeout=IDLE_TIMEOUT,
        )
        # WebSockets serve only the nodes' links (/api/v1/nodes/ws); a bigger frame closes the socket (1009).
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                ws="websockets-sansio", ws_max_size=WS_MAX_BYTES, ws_ping_interval=20.0,
                                ws_ping_timeout=20.0, proxy_headers=False, server_header=False, http=http)
        self.server = _EmbeddedServer(config)
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]), name="webui")
        async with asyncio.timeout(10):
            while not self.server.started:
                if self.task.done():
                    self.task.result()
                await asyncio.sleep(0.01)
        log.info("web UI on http://%s:%d/", host if ":" not in host else f"[{host}]", self.port)

    def _announce(self, secrets: dict[str, str], sdk: ScopedSDK) -> None:
        """Print the generated credentials once, on the terminal only (never into log files)."""
        setting = setting_value(sdk.settings.get("language"))
        language = setting if setting != "auto" else locale_language()
        lines = ["", t(language, "cli.credentials")]
        lines += [f"  {k}: {v}" for k, v in secrets.items()]
        lines += ["  " + t(language, "cli.credentials_change", path=sdk.data_dir / "credentials.json"), ""]
        print("\n".join(lines), file=sys.stderr, flush=True)

    @hookimpl
    async def shutdown(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await self.task
        if self.state is not None:
            await self.state.aclose()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _server_class() -> type:
    import uvicorn

    class EmbeddedServer(uvicorn.Server):
        """uvicorn inside the daemon: the daemon owns SIGINT/SIGTERM, not uvicorn."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return EmbeddedServer


def _EmbeddedServer(config: Any) -> Any:
    return _server_class()(config)


def make_plugin() -> WebUI:
    return WebUI()
