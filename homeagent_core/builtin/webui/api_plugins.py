"""Plugin routes: list, details, enable/disable, ``.hmap`` install/upgrade, start, remove, reload."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port, plugin_ops
from homeagent_core.builtin.webui.common import (
    ApiError,
    UIState,
    is_json_type,
    json_body,
    media_type,
    ok,
    read_body,
    require_api,
)
from homeagent_core.plugins import packages
from homeagent_sdk.errors import PluginLoadError

__all__ = ["routes"]

_PLUGIN_NAME = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_.-]{1,128}$")
MAX_PACKAGE_BYTES = packages.MAX_PACKAGE_BYTES
#: Content types under which a request body is taken as the package bytes.
PACKAGE_TYPES = frozenset({"application/zip", "application/octet-stream", "application/x-zip-compressed"})


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _plugin_name(request: Request) -> str:
    name = str(request.path_params["name"])
    if not _PLUGIN_NAME.match(name):
        raise ApiError(400, "plugin name must be 1-128 characters of letters, digits, '.', '_' or '-' without '..'")
    return name


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "").lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ApiError(400, f"{name} must be true or false, got {raw!r}")


@require_api
async def plugins_list(request: Request) -> Response:
    services = _ui(request).services
    rows = plugin_ops.plugin_list(services, agent_port.plugin_rows(services))
    return ok({"plugins": rows, "disabled": sorted(services.config.disabled_plugins())})


@require_api
async def plugins_disabled(request: Request) -> Response:
    return ok({"disabled": plugin_ops.disabled_details(_ui(request).services.config)})


@require_api
async def plugin_details(request: Request) -> Response:
    name = _plugin_name(request)
    services = _ui(request).services
    rows = {r["name"]: r for r in plugin_ops.plugin_list(services, agent_port.plugin_rows(services))}
    if name not in rows:
        raise ApiError(404, f"plugin {name} is neither loaded nor installed")
    row = rows[name]
    if "package" in row:
        try:
            row["package"] = packages.plugin_details(services.data_dir, name)
        except packages.PackageError as exc:
            row["error"] = row.get("error") or str(exc)
    return ok(row)


@require_api
async def plugin_disable(request: Request) -> Response:
    """Disable a plugin; an installed package that runs is stopped at once, anything else on restart."""
    name = _plugin_name(request)
    services = _ui(request).services
    services.config.set_plugin_disabled(name, True, by="webui")
    live = getattr(services, "live", None)
    stopped = live is not None and await live.stop(name)
    return ok({"status": "disabled", "name": name, "action": "stopped" if stopped else "restart_required"})


@require_api
async def plugin_enable(request: Request) -> Response:
    """Enable a plugin; an installed package that is not running is started at once."""
    name = _plugin_name(request)
    services = _ui(request).services
    services.config.set_plugin_disabled(name, False)
    result = {"status": "enabled", "name": name, "action": "restart_required"}
    live = getattr(services, "live", None)
    if live is not None and (services.data_dir / "plugins" / name).is_dir() and not live.loaded(name):
        try:
            started = await live.start(name)
            result.update(action=started["status"], tools=started["tools"])
        except PluginLoadError as exc:
            result.update(action="start_failed", start_error=str(exc))
    return ok(result)


@require_api
async def plugin_install(request: Request) -> Response:
    """Install a ``.hmap``; ``?overwrite=true`` upgrades an installed plugin.

    The body is chosen by its declared ``Content-Type``, never sniffed: ``application/zip`` or
    ``application/octet-stream`` (the package bytes), ``multipart/form-data`` (a ``file``
    field), or ``application/json`` (``{"path": "/x.hmap"}`` or ``{"url": "https://..."}``,
    optional ``"overwrite": true``). Anything else is a 415.
    """
    kind = media_type(request)
    overwrite = _flag(request, "overwrite")
    source: bytes | Path
    fetched: Path | None = None
    if kind in PACKAGE_TYPES:
        source = await read_body(request, MAX_PACKAGE_BYTES)
        if not source:
            raise ApiError(400, "empty body: send the .hmap file's bytes")
    elif kind == "multipart/form-data":
        source = await _multipart_package(request)
    elif is_json_type(kind):
        data = await json_body(request)
        overwrite = overwrite or _json_flag(data.get("overwrite", False))
        url, path = data.get("url"), data.get("path")
        if not isinstance(url, str | None) or not isinstance(path, str | None) or not (url or path):
            raise ApiError(400, 'a JSON body must name the package: {"path": "/x.hmap"} or {"url": "https://..."}')
        if url:
            try:
                fetched = await packages.download(url, Path(tempfile.gettempdir()))
            except packages.PackageError as exc:
                raise ApiError(502, f"download failed: {exc}") from None
            source = fetched
        else:
            source = Path(str(path)).expanduser()
    else:
        shown = request.headers.get("content-type") or "none"
        raise ApiError(415, f"Content-Type {shown} is not accepted: send the .hmap as application/zip (or "
                            "application/octet-stream, or multipart/form-data field 'file'), or JSON {path} / {url}")
    try:
        result = await plugin_ops.install(_ui(request).services, source, overwrite=overwrite)
    except packages.PackageExistsError as exc:
        raise ApiError(409, str(exc)) from None
    except packages.PackageError as exc:
        raise ApiError(400, str(exc)) from None
    finally:
        if fetched is not None:
            fetched.unlink(missing_ok=True)
    return ok(result, status=201)


async def _multipart_package(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_PACKAGE_BYTES + 64 * 1024:
        raise ApiError(413, f"request body too large (the package limit is {MAX_PACKAGE_BYTES} bytes)")
    try:
        async with request.form(max_files=1, max_fields=4, max_part_size=MAX_PACKAGE_BYTES + 1) as form:
            file = form.get("file")
            if file is None or isinstance(file, str):
                raise ApiError(400, "missing multipart field 'file' (the .hmap)")
            data = await file.read(MAX_PACKAGE_BYTES + 1)
    except ApiError:
        raise
    except Exception as exc:  # multipart parser errors are user input errors
        raise ApiError(400, f"could not read the upload: {exc}") from None
    if len(data) > MAX_PACKAGE_BYTES:
        raise ApiError(413, f"request body too large (the package limit is {MAX_PACKAGE_BYTES} bytes)")
    if not data:
        raise ApiError(400, "the multipart field 'file' is empty")
    return data


def _json_flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise ApiError(400, f"overwrite must be true or false, got {value!r}")


@require_api
async def plugin_remove(request: Request) -> Response:
    name = _plugin_name(request)
    try:
        result = await plugin_ops.remove(_ui(request).services, name)
    except packages.PackageError as exc:
        raise ApiError(404, str(exc)) from None
    return ok(result)


@require_api
async def plugins_reload(request: Request) -> Response:
    return ok(await plugin_ops.reload(_ui(request).services))


@require_api
async def plugin_start(request: Request) -> Response:
    """Start an installed plugin now (restart it when it runs); 409 with the reason when it fails."""
    name = _plugin_name(request)
    try:
        return ok(await plugin_ops.start(_ui(request).services, name))
    except PluginLoadError as exc:
        status = 404 if not (_ui(request).services.data_dir / "plugins" / name).is_dir() else 409
        raise ApiError(status, str(exc)) from None


routes = [
    Route("/api/v1/plugins", plugins_list, methods=["GET"]),
    Route("/api/v1/plugins", plugin_install, methods=["POST"]),
    Route("/api/v1/plugins/disabled", plugins_disabled, methods=["GET"]),
    Route("/api/v1/plugins/reload", plugins_reload, methods=["POST"]),
    Route("/api/v1/plugins/{name}/disable", plugin_disable, methods=["POST"]),
    Route("/api/v1/plugins/{name}/enable", plugin_enable, methods=["POST"]),
    Route("/api/v1/plugins/{name}/start", plugin_start, methods=["POST"]),
    Route("/api/v1/plugins/{name}", plugin_details, methods=["GET"]),
    Route("/api/v1/plugins/{name}", plugin_remove, methods=["DELETE"]),
]
