"""Built-in ``pluginmgr``: install, list, inspect, reload and remove ``.hmap`` plugins.

Two doors onto the same operations (all through :mod:`homeagent_core.plugins.packages`):

* **Tools** for the model: ``plugin_install``, ``plugin_list``, ``plugin_info``,
  ``plugin_remove``, ``plugin_reload``. Each answers with the installer's JSON
  (``{"status": "installed", ...}`` or ``{"error": ..., "details": ...}``), so a refused
  package reaches the model with the reason.
* **A loopback HTTP API** on ``plugin.pluginmgr.http_addr`` (default ``127.0.0.1:9876``;
  empty disables it). It has no authentication, so a non-loopback address is refused unless
  ``plugin.pluginmgr.http_allow_remote`` is true:

  - ``GET /plugins`` → ``[{name, version, description, author, entry, deprecated}]`` (plus
    ``status``/``pid``/``crash_count`` for running out-of-process plugins);
  - ``POST /plugins`` with JSON ``{"path": "/x.hmap"}`` or ``{"url": "https://..."}`` (and
    optional ``"overwrite": true``), or the raw ``.hmap`` bytes as the body (``?overwrite=true``)
    → the install result (201); ``{"error": "url or path is required"}`` (400) for a JSON body
    naming neither; an invalid package 400 ``{"error": "invalid package", "details"}``; an
    installed one 409 ``{"error": "plugin already exists", ...}``; a failed download 502;
  - ``GET /plugins/<name>`` → the manifest and the installed files, 404 ``{"error": "plugin not found"}``;
  - ``DELETE /plugins/<name>`` → ``{"status": "removed", "name", "action": "reload_required"}``
    or 404 ``{"error": "plugin not found"}``.

Installing over a running out-of-process plugin stops it first and starts the new version
(``"action": "reloaded"``; if the install fails the old version is started again); a fresh
install goes live on ``plugin_reload`` / restart (``"action": "reload_required"``). Removing
stops the plugin and deletes its directory and settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.plugins import packages
from homeagent_core.plugins.packages import PackageError, PackageExistsError
from homeagent_sdk import ConfigDef, ToolError, hookimpl
from homeagent_sdk.errors import PluginLoadError

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

PLUGIN_NAME = "pluginmgr"
DEFAULT_HTTP_ADDR = "127.0.0.1:9876"

__all__ = [
    "DEFAULT_HTTP_ADDR",
    "PLUGIN_NAME",
    "PluginMgr",
    "install_source",
    "installed_rows",
    "make_plugin",
    "remove_installed",
]

log = logging.getLogger("homeagent.pluginmgr")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- operations


def _supervisor(services: Any) -> Any:
    return getattr(services, "supervisor", None)


def installed_rows(services: Any) -> list[dict[str, Any]]:
    """Installed packages' summaries, with live status for running out-of-process plugins."""
    rows = packages.installed_plugins(Path(services.data_dir))
    supervisor = _supervisor(services)
    if supervisor is not None:
        live = {r["name"]: r for r in supervisor.status()}
        for row in rows:
            info = live.get(row["name"])
            if info is not None:
                row.update(status=info["status"], pid=info["pid"], crash_count=info["crash_count"])
    return rows


async def install_source(services: Any, source: Path | bytes, *, overwrite: bool = False) -> dict[str, Any]:
    """Validate and install a package (a local path or its bytes); returns the install result.

    A running out-of-process plugin of the same name is stopped, upgraded and started again
    (``"action": "reloaded"``); when the install fails it is started again on its old version.

    Raises:
        PackageExistsError: installed already and ``overwrite`` is false.
        PackageError: the package is invalid (the message names the problem).
    """
    manifest = await asyncio.to_thread(packages.validate_package, source)
    supervisor = _supervisor(services)
    running = supervisor.get(manifest.name) if supervisor is not None and overwrite else None
    if running is not None:
        await running.stop()
    try:
        result = await asyncio.to_thread(
            packages.install_package, Path(services.data_dir), source, overwrite=overwrite
        )
    except BaseException:
        if running is not None:
            with contextlib.suppress(Exception):
                await supervisor.reload(manifest.name)
        raise
    if running is not None:
        await supervisor.reload(manifest.name)
        result["action"] = "reloaded"
    return result


async def remove_installed(services: Any, name: str) -> dict[str, Any]:
    """Stop a running out-of-process plugin, then delete its directory and settings.

    Raises:
        PackageError: no such installed plugin (``to_dict()`` is ``{"error": "plugin not found"}``).
    """
    if not packages.NAME_RE.match(name) or not (Path(services.data_dir) / "plugins" / name).is_dir():
        raise PackageError(f"plugin {name} is not installed", plugin_name=name, result={"error": "plugin not found"})
    supervisor = _supervisor(services)
    running = supervisor.get(name) if supervisor is not None else None
    if running is not None:
        await running.stop()
        supervisor.detach(name)
    return await asyncio.to_thread(
        packages.remove_plugin, Path(services.data_dir), name, config=getattr(services, "config", None)
    )


# --------------------------------------------------------------------------- HTTP API


def parse_http_addr(addr: str, *, allow_remote: bool) -> tuple[str, int]:
    """``host:port`` of the HTTP API; ``":9876"`` means 127.0.0.1.

    Raises:
        ValueError: not ``host:port``, or a non-loopback host while ``allow_remote`` is false.
    """
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(
            f"plugin.pluginmgr.http_addr {addr!r} is not host:port; write e.g. 127.0.0.1:9876 (empty disables the API)"
        )
    host = host.strip("[]") or "127.0.0.1"
    if not allow_remote and not _is_loopback(host):
        raise ValueError(
            f"plugin.pluginmgr.http_addr {addr!r} is not a loopback address; the plugin manager API has no "
            "authentication, so it only listens on 127.0.0.1, ::1 or localhost. Use one of those, or set "
            "plugin.pluginmgr.http_allow_remote to true to expose it to the network on purpose"
        )
    return host, int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Refused(Exception):
    """Ends a request with ``status`` and a JSON ``body``."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("error", ""))
        self.status, self.body = status, body


def _package_status(exc: PackageError) -> int:
    return 409 if isinstance(exc, PackageExistsError) else 400


class HttpAPI:
    """The starlette app of the loopback API, over the app's services."""

    def __init__(self, services: Any) -> None:
        self.services = services

    def build(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/plugins", self._guard(self.list_plugins), methods=["GET"]),
                Route("/plugins", self._guard(self.install), methods=["POST"]),
                Route("/plugins/{name}", self._guard(self.details), methods=["GET"]),
                Route("/plugins/{name}", self._guard(self.remove), methods=["DELETE"]),
            ]
        )

    def _guard(self, endpoint: Any) -> Any:
        from starlette.responses import JSONResponse

        async def route(request: Request) -> Response:
            try:
                status, body = await endpoint(request)
            except _Refused as exc:
                status, body = exc.status, exc.body
            except Exception as exc:
                log.exception("pluginmgr API %s %s failed", request.method, request.url.path)
                status, body = 500, {"error": f"{type(exc).__name__}: {exc}"}
            return JSONResponse(body, status_code=status)

        return route

    async def list_plugins(self, request: Request) -> tuple[int, Any]:
        return 200, await asyncio.to_thread(installed_rows, self.services)

    async def details(self, request: Request) -> tuple[int, Any]:
        try:
            return 200, await asyncio.to_thread(
                packages.plugin_details, Path(self.services.data_dir), request.path_params["name"]
            )
        except PackageError as exc:
            return (404 if exc.to_dict().get("error") == "plugin not found" else 500), exc.to_dict()

    async def remove(self, request: Request) -> tuple[int, Any]:
        try:
            return 200, await remove_installed(self.services, request.path_params["name"])
        except PackageError as exc:
            return 404, exc.to_dict()

    async def install(self, request: Request) -> tuple[int, Any]:
        body = await _read_body(request, packages.MAX_PACKAGE_BYTES)
        overwrite = _flag(request.query_params.get("overwrite", ""), "overwrite")
        source: Path | bytes
        fetched: Path | None = None
        if _is_json(request, body):
            try:
                data = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise _Refused(400, {"error": f"body is not valid JSON: {exc}"}) from None
            if not isinstance(data, dict):
                raise _Refused(400, {"error": "body must be a JSON object {path} or {url}, or the .hmap bytes"})
            overwrite = overwrite or _flag(data.get("overwrite", False), "overwrite")
            url, path = data.get("url"), data.get("path")
            if not url and not path:
                raise _Refused(400, {"error": "url or path is required"})
            if url:
                try:
                    fetched = await packages.download(str(url), Path(tempfile.gettempdir()))
                except PackageError as exc:
                    raise _Refused(502, {"error": "download failed", "details": str(exc)}) from None
                source = fetched
            else:
                source = Path(str(path)).expanduser()
        elif body:
            source = body
        else:
            raise _Refused(400, {"error": "url or path is required",
                                 "details": "send JSON {path} or {url}, or the .hmap file as the body"})
        try:
            return 201, await install_source(self.services, source, overwrite=overwrite)
        except PackageError as exc:
            return _package_status(exc), exc.to_dict()
        finally:
            if fetched is not None:
                fetched.unlink(missing_ok=True)


def _is_json(request: Request, body: bytes) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        return True
    return not kind and body.lstrip()[:1] == b"{"


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raw = str(value).strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise _Refused(400, {"error": f"{name} must be true or false, got {value!r}"})


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _Refused(413, {"error": f"request body too large (the package limit is {limit // (1024 * 1024)} MB)"})
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _Refused(413, {"error": f"request body too large (the package limit is {limit // (1024 * 1024)} MB)"})
        chunks.append(chunk)
    return b"".join(chunks)


# --------------------------------------------------------------------------- the plugin


class PluginMgr:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._services: Any = None
        self.server: Any = None
        self.task: asyncio.Task[None] | None = None
        self.host = ""
        self.port: int | None = None

    @hookimpl
    def register_settings(self, registry: Any) -> None:
        registry.add(ConfigDef(
            key="http_addr", type="string", default=DEFAULT_HTTP_ADDR, restart_required=True,
            description="Listen address host:port of the plugin manager HTTP API (no authentication; "
                        "loopback only unless http_allow_remote). Empty disables it.",
        ))
        registry.add(ConfigDef(
            key="http_allow_remote", type="bool", default=False, restart_required=True,
            description="Allow http_addr to be a non-loopback address. The API has no authentication: "
                        "anyone who can reach it can install code.",
        ))

    @hookimpl
    async def startup(self, sdk: Any) -> None:
        services = getattr(sdk, "services", None)
        if services is None:
            raise PluginLoadError("pluginmgr needs the privileged services of a built-in plugin", plugin_name=self.name)
        self._services = services
        addr = str(sdk.settings.get("http_addr", DEFAULT_HTTP_ADDR) or "").strip()
        if addr and services.listen_network:
            allow = bool(sdk.settings.get("http_allow_remote", False))
            await self._serve(addr, allow_remote=allow)

    async def _serve(self, addr: str, *, allow_remote: bool) -> None:
        import uvicorn

        from homeagent_core.builtin.webui import _EmbeddedServer

        try:
            host, port = parse_http_addr(addr, allow_remote=allow_remote)
        except ValueError as exc:
            raise PluginLoadError(str(exc), plugin_name=self.name) from None
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise PluginLoadError(
                f"pluginmgr cannot listen on {host}:{port}: {exc.strerror or exc}. Another program (or another "
                "HomeAgent) uses it: choose a free port with `homeagent config set plugin.pluginmgr.http_addr "
                "127.0.0.1:PORT`, or set it to an empty value to disable the plugin manager HTTP API",
                plugin_name=self.name,
            ) from None
        sock.listen(64)
        sock.setblocking(False)
        self.host, self.port = host, sock.getsockname()[1]
        config = uvicorn.Config(
            HttpAPI(self._services).build(), log_level="warning", access_log=False, lifespan="off", ws="none"
        )
        self.server = _EmbeddedServer(config)
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]), name="pluginmgr-http")
        async with asyncio.timeout(10):
            while not self.server.started:
                if self.task.done():
                    self.task.result()
                    raise PluginLoadError("pluginmgr HTTP API stopped while starting", plugin_name=self.name)
                await asyncio.sleep(0.01)
        log.info("plugin manager API on %s", self.url)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @hookimpl
    async def shutdown(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await self.task
            self.task = None
        self.server = None

    @property
    def services(self) -> Any:
        if self._services is None:
            raise ToolError("pluginmgr has not started yet")
        return self._services

    # ------------------------------------------------------------------ tools

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        registry.add(self.plugin_install, serial=True)
        registry.add(self.plugin_list, parallel_safe=True)
        registry.add(self.plugin_info, parallel_safe=True)
        registry.add(self.plugin_remove, serial=True)
        registry.add(self.plugin_reload, serial=True)

    async def plugin_install(self, source: str, overwrite: bool = False) -> str:
        """Install a .hmap plugin package.

        Args:
            source: a local file path or an http(s) URL of the .hmap.
            overwrite: replace an installed plugin of the same name (upgrade/downgrade; settings are kept).
        """
        fetched: Path | None = None
        try:
            if source.startswith(("http://", "https://")):
                fetched = await packages.download(source, Path(tempfile.gettempdir()))
            path = fetched or Path(source).expanduser()
            return _json(await install_source(self.services, path, overwrite=overwrite))
        except PackageError as exc:
            return _json(exc.to_dict())
        finally:
            if fetched is not None:
                fetched.unlink(missing_ok=True)

    def plugin_list(self) -> str:
        """List installed plugin packages (name, version, description, author, entry, deprecated)."""
        return _json(installed_rows(self.services))

    def plugin_info(self, name: str) -> str:
        """Everything known about one installed plugin, including its files.

        Args:
            name: the plugin's name.
        """
        try:
            return _json(packages.plugin_details(Path(self.services.data_dir), name))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_remove(self, name: str) -> str:
        """Uninstall a plugin: stop it, delete its directory and its settings.

        Args:
            name: the plugin's name.
        """
        try:
            return _json(await remove_installed(self.services, name))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_reload(self, name: str = "") -> str:
        """Reload one out-of-process plugin by name, or (empty name) every one whose entry file changed.

        Args:
            name: the plugin's name; empty reloads the changed ones.
        """
        supervisor = _supervisor(self.services)
        if supervisor is None:
            return _json({"error": "no out-of-process plugins are supervised in this agent"})
        if name:
            try:
                await supervisor.reload(name)
            except KeyError:
                return _json({"error": f"plugin {name} is not a loaded out-of-process plugin"})
            return _json({"status": "reloaded", "name": name})
        return _json({"status": "reloaded", "names": await supervisor.reload_changed()})


def make_plugin() -> PluginMgr:
    return PluginMgr()
