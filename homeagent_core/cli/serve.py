"""``homeagent serve``: run the daemon until Ctrl-C / SIGTERM."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from homeagent_core.cli._common import DataOption, fail, handle_errors

__all__ = ["serve"]


@handle_errors
def serve(
    data: DataOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Address the web UI binds to (default: 127.0.0.1, or plugin.webui.addr). "
            "Keep 127.0.0.1 unless a reverse proxy with TLS fronts it.",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port of the web UI; 0 picks a free one (default: 8080, or plugin.webui.addr).",
            min=0,
            max=65535,
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Memory store: sqlite, or a postgresql://user:password@host/db URL shared by "
            "several daemons (saved as core.memory.store; see docs/SCALE_OUT.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start the HomeAgent daemon: load plugins, run until SIGINT/SIGTERM, shut down cleanly.

    It refuses to start when the web UI's address is taken, saying how to choose another port.
    """
    from homeagent_core.app import App, configure_logging
    from homeagent_core.datadir import forget_running, note_running

    app = App(data)
    if store is not None:
        app.config.set("core.memory.store", store)
    app.services.listen_host, app.services.listen_port = host, port
    try:
        _check_web_port(app, host, port)
    except BaseException:
        app.config.close()
        raise
    configure_logging(app.data_dir, app.config.get("core.daemon.log_level"))
    # Commands run without --data find this daemon's data directory through the note.
    note_running(app.data_dir)
    try:
        _run(app.run_until_signalled())
    finally:
        forget_running(app.data_dir)


def _check_web_port(app: Any, host: str | None, port: int | None) -> None:
    """Refuse to start when the web UI's address is taken: a daemon without its doors is no use.

    Checked before any plugin starts, so nothing runs and no web UI password is made. Port 0
    (any free port) and a daemon without the web UI plugin skip the check.

    Raises:
        typer.Exit: the address cannot be bound (the message says how to choose another).
    """
    from homeagent_core.builtin.webui import parse_addr
    from homeagent_sdk._net import listen_tcp

    if app.host.pm.get_plugin("webui") is None:
        return
    app.declare_settings()
    try:
        setting_host, setting_port = parse_addr(str(app.config.get("plugin.webui.addr")))
    except ValueError as exc:
        raise fail(f"plugin.webui.addr: {exc}") from None
    bind_host, bind_port = host or setting_host, setting_port if port is None else port
    if bind_port == 0:
        return
    try:
        listen_tcp(bind_host, bind_port).close()
    except OSError as exc:
        raise fail(
            f"the web UI cannot listen on {bind_host}:{bind_port}: {exc.strerror or exc} (is another "
            "`homeagent serve` running there?). Stop the program using it, or choose another port: "
            "`homeagent serve --port N`, or `homeagent config set plugin.webui.addr 127.0.0.1:N` to keep it."
        ) from None


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]
