"""``homeagent reminders``: list and cancel the reminders the ``reminders`` built-in keeps.

They live in ``<data>/plugin_data/reminders/reminders.db``; these commands read and change that
file directly, so they work whether the daemon runs or not (a running daemon re-reads a
reminder's row before it fires it, so one cancelled here does not fire).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

if TYPE_CHECKING:
    from pathlib import Path

    from homeagent_core.builtin.reminders import ReminderStore

__all__ = ["app"]

app = typer.Typer(help="List and cancel reminders (works offline on the data dir).", no_args_is_help=True)


def _store(data: Path | None) -> ReminderStore:
    from homeagent_core.builtin.reminders import DB_NAME, PLUGIN_NAME, ReminderStore
    from homeagent_core.datadir import plugin_data_dir, prepare_data_dir

    return ReminderStore(plugin_data_dir(prepare_data_dir(data), PLUGIN_NAME) / DB_NAME)


@app.command("list")
@handle_errors
def list_(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List pending reminders, soonest first: id, next due time, repeat rule, text."""
    store = _store(data)
    try:
        rows = [r.to_dict() for r in store.pending()]
    finally:
        store.close()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        typer.echo("no pending reminders")
        return
    for row in rows:
        repeat = f"  ({row['repeat']})" if row["repeat"] else ""
        typer.echo(f"{row['id']}  {row['due']}  {row['text']}{repeat}")


@app.command("cancel")
@handle_errors
def cancel(
    reminder_id: Annotated[
        str, typer.Argument(help="The id, e.g. reminder_3 (`homeagent reminders list` shows them).")
    ],
    data: DataOption = None,
) -> None:
    """Cancel a pending reminder (a repeating one stops repeating)."""
    from homeagent_core.builtin.reminders import seq_of

    key = f"reminder_{seq_of(reminder_id)}"
    store = _store(data)
    try:
        removed = store.remove(key)
    finally:
        store.close()
    if not removed:
        raise fail(f"no pending reminder {reminder_id!r}; `homeagent reminders list` shows the pending ones")
    typer.echo(f"{key} cancelled")
