"""``homeagent backup``: one archive of the whole data directory, made while the daemon runs.

See docs/BACKUP.md. The work is done by :mod:`homeagent_core.ops.backup` and :mod:`homeagent_core.ops.restore`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["app"]

app = typer.Typer(
    help="Back up and restore the data directory (online, checked, optionally encrypted).", no_args_is_help=True
)

PassphraseOption = Annotated[
    str | None,
    typer.Option(
        "--passphrase-env",
        metavar="VAR",
        help="Name of the environment variable holding the passphrase (encrypts / opens the archive).",
    ),
]


def _passphrase(var: str | None) -> str | None:
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise fail(f"--passphrase-env names {var}, but that environment variable is not set or empty")
    return value


def _data(data: Path | None) -> Path:
    from homeagent_core.datadir import default_data_dir

    root = (data or default_data_dir()).expanduser()
    if not root.is_dir():
        raise fail(f"no data directory at {root}; pass the one to back up with --data")
    return root


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


@app.command("create")
@handle_errors
def create(
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Archive file or folder to write (default: <data>/backups/)."),
    ] = None,
    passphrase_env: PassphraseOption = None,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write one consistent archive of the data directory (the daemon may keep running).

    The backup runs at a lower CPU priority (nice +10), so a running daemon's turns go first."""
    from homeagent_core.ops.backup import create_backup, lower_priority

    lower_priority()
    path, manifest = create_backup(_data(data), out, passphrase=_passphrase(passphrase_env))
    if as_json:
        echo_json({"path": str(path), "counts": manifest["counts"], "stores": sorted(manifest["stores"])})
        return
    counts = manifest["counts"]
    typer.echo(f"backup written: {path}")
    typer.echo(
        f"  {counts['sqlite']} databases, {counts['files']} files, {_size(counts['bytes'])}"
        + ("  (encrypted)" if passphrase_env else "")
    )


@app.command("list")
@handle_errors
def list_(
    folder: Annotated[
        Path | None, typer.Option("--dir", help="Folder holding the archives (default: <data>/backups/).")
    ] = None,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the complete archives in the backup folder, newest first."""
    from homeagent_core.ops.backup import backup_folder, list_backups

    rows = list_backups(folder if folder is not None else backup_folder(_data(data)))
    if as_json:
        echo_json([r.to_dict() for r in rows])
        return
    if not rows:
        typer.echo("no backups")
        return
    for row in rows:
        lock = "encrypted" if row.encrypted else "plain"
        typer.echo(f"{row.path.name}  {_size(row.size):>10}  {row.created}  {lock:<9}  {row.status}")


@app.command("verify")
@handle_errors
def verify(
    archive: Annotated[Path, typer.Argument(help="The archive to check.")],
    passphrase_env: PassphraseOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-check the SHA-256 of every member and open every database in an archive."""
    from homeagent_core.ops.restore import verify_backup

    manifest = verify_backup(archive, passphrase=_passphrase(passphrase_env))
    if as_json:
        echo_json(
            {
                "path": str(archive),
                "ok": True,
                "created": manifest.get("created"),
                "counts": manifest["counts"],
                "stores": manifest["stores"],
            }
        )
        return
    counts = manifest["counts"]
    typer.echo(
        f"ok: {archive} ({manifest.get('created')}): every hash matches, "
        f"{counts['sqlite']} databases open and check, {counts['files']} files"
    )


@app.command("restore")
@handle_errors
def restore(
    archive: Annotated[Path, typer.Argument(help="The archive to restore.")],
    data: Annotated[
        Path, typer.Option("--data", "-d", help="Directory to restore into (new or empty unless --force).")
    ],
    passphrase_env: PassphraseOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Restore over a non-empty directory, moving it aside first (and replace the tenant's "
            "PostgreSQL memory if that database already holds some).",
        ),
    ] = False,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="For an archive whose memory was in PostgreSQL: the postgresql:// database to load it into "
            "(default: the one its settings name).",
        ),
    ] = None,
) -> None:
    """Restore an archive into a data directory; nothing changes there unless every check passes."""
    from homeagent_core.ops.restore import restore_backup

    result = restore_backup(archive, data, passphrase=_passphrase(passphrase_env), force=force, store=store)
    typer.echo(f"restored {archive.name} into {result.target}")
    if result.aside is not None:
        typer.echo(f"the previous contents were moved to {result.aside}")
