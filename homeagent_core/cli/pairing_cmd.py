"""``homeagent pairing``: approve, deny or revoke chat-app senders who asked to talk to the agent.

Chat bridges keep their pairing requests in ``<data>/plugin_data/<plugin>/pairing.db``; these
commands read and change those files directly, so they work whether the daemon runs or not
(a running bridge reads the table on every message).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors
from homeagent_core.i18n import cli_language, t
from homeagent_sdk.pairing import PairingRequest, PairingStore, pairing_files

__all__ = ["app", "pairing_stores"]

app = typer.Typer(help="Approve, deny or revoke chat-app senders (pairing codes).", no_args_is_help=True)


def pairing_stores(data: Path | None) -> dict[str, PairingStore]:
    """The pairing table of every bridge plugin in the data dir, by plugin name."""
    from homeagent_core.datadir import prepare_data_dir

    files = pairing_files(prepare_data_dir(data) / "plugin_data")
    return {plugin: PairingStore(path) for plugin, path in files.items()}


def _find(data: Path | None, code: str) -> tuple[str, PairingStore]:
    stores = pairing_stores(data)
    wanted = code.strip().upper()
    for plugin, store in stores.items():
        if any(r.code == wanted for r in store.list()):
            return plugin, store
    language = _language(data)
    if not stores:
        raise fail(t(language, "cli.pairing.no_bridges"), language=language)
    raise fail(t(language, "cli.pairing.no_code", code=repr(wanted)), language=language)


def _language(data: Path | None) -> str:
    from homeagent_core.datadir import resolve_data_dir

    return cli_language(resolve_data_dir(data))


def _said(key: str, plugin: str, request: PairingRequest, data: Path | None, linked: str = "") -> str:
    language = _language(data)
    return t(language, key, platform=request.platform, account=request.account,
             name=request.name or t(language, "cli.pairing.no_name"), plugin=plugin, linked=linked)


def _row(plugin: str, request: PairingRequest) -> dict[str, object]:
    return {"plugin": plugin, **request.to_dict()}


@app.command("list")
@handle_errors
def list_(
    status: Annotated[
        str | None, typer.Option(help="Only pending, approved or denied requests.")
    ] = None,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """List pairing requests of every chat bridge, newest first."""
    if status is not None and status not in ("pending", "approved", "denied"):
        language = _language(data)
        raise fail(t(language, "cli.pairing.bad_status", status=repr(status)), language=language)
    rows = [_row(p, r) for p, s in pairing_stores(data).items() for r in s.list(status)]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        typer.echo(t(_language(data), "cli.pairing.empty"))
        return
    for row in rows:
        person = f" -> {row['person']}" if row["person"] else ""
        typer.echo(
            f"{row['code']}  {row['status']:<8}  {row['plugin']}  {row['platform']} {row['account']}"
            f"  {row['name']}{person}"
        )


@app.command("approve")
@handle_errors
def approve(
    code: Annotated[str, typer.Argument(help="The code the sender was given.")],
    person: Annotated[
        str, typer.Option(help="Link the sender to this person (the same person on another app).")
    ] = "",
    data: DataOption = None,
) -> None:
    """Approve a sender (or group): the agent answers them from now on."""
    plugin, store = _find(data, code)
    request = store.approve(code, person=person)
    linked = t(_language(data), "cli.pairing.linked", person=person) if person else ""
    typer.echo(_said("cli.pairing.approved", plugin, request, data, linked))


@app.command("deny")
@handle_errors
def deny(
    code: Annotated[str, typer.Argument(help="The code the sender was given.")],
    data: DataOption = None,
) -> None:
    """Deny a sender (or group): their messages are ignored from now on."""
    plugin, store = _find(data, code)
    request = store.deny(code)
    typer.echo(_said("cli.pairing.denied", plugin, request, data))


@app.command("revoke")
@handle_errors
def revoke(
    code: Annotated[str, typer.Argument(help="The code the sender was given (`homeagent pairing list` shows it).")],
    data: DataOption = None,
) -> None:
    """Revoke an approved (or denied) sender: forgotten, so their next message gets a new code."""
    plugin, store = _find(data, code)
    request = store.revoke(code)
    typer.echo(_said("cli.pairing.revoked", plugin, request, data))
