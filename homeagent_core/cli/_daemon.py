"""Ask the daemon running on a data directory to do something now (over its ``cli`` socket).

Commands that change a data directory (``homeagent plugins install``, ``homeagent install``
of a ``.hmap``, ``plugins remove``) use this so a running daemon applies the change at once
instead of on its next start. No daemon (no socket, or a stale one) is not an error.
"""

from __future__ import annotations

from pathlib import Path

from homeagent_sdk.errors import HomeAgentError

__all__ = ["DaemonRefused", "daemon_command"]


class DaemonRefused(HomeAgentError):
    """The running daemon answered the command with an error (the message is the daemon's)."""


def _socket_and_key(data_dir: Path) -> tuple[Path, str]:
    """Where the daemon's socket is and the API key it may require (read from ``config.db``)."""
    from homeagent_core.config import ConfigStore

    config = ConfigStore(data_dir / "config.db")
    try:
        raw = str(config.get("plugin.cli.socket_path") or "")
        key = str(config.get("plugin.cli.api_key") or config.get("plugin.webui.api_key") or "")
    finally:
        config.close()
    return (Path(raw).expanduser() if raw else data_dir / "cli.sock"), key


def daemon_command(data_dir: Path, command: str, *, timeout: float = 120.0) -> str | None:
    """Send one slash command to the daemon on ``data_dir``; its reply, or None when none runs.

    Raises:
        DaemonRefused: a daemon runs and answered with an error.
    """
    from homeagent_core.cli.chat import AgentError, CliClient, DaemonUnreachable

    path, key = _socket_and_key(data_dir)
    if not path.exists():
        return None
    try:
        with CliClient(path, api_key=key, timeout=timeout) as client:
            events = list(client.send(command))
    except DaemonUnreachable:
        return None  # a stale socket file: nobody is listening
    except AgentError as exc:
        raise DaemonRefused(str(exc)) from None
    return str(events[-1].get("content", "")) if events else ""
