"""``homeagent people``: who may talk to the agent, with which rights; keys, audit and approvals.

The person registry is ``<data>/people.db`` (SQLite, WAL); these commands read and change it
directly, so they work whether the daemon runs or not (a running daemon reads it on every
input). ``invite`` writes a one-time web UI invite link into the web UI's ``logins.db`` the same
way, which the running daemon accepts at once. Pending approvals live in the running daemon:
``approvals``, ``approve`` and ``deny`` ask it over its ``cli`` socket; every approval and its
outcome is also kept in ``people.db`` (``audit --approvals`` reads them, daemon or not). The owner is created at
the first start (the operating-system user).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.agent.people import PeopleError, PeopleRegistry, default_owner_name
from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["app"]

app = typer.Typer(
    help="People and their rights: roles, chat accounts, API keys, audit, approvals.", no_args_is_help=True
)


@contextmanager
def _registry(data: Path | None) -> Iterator[PeopleRegistry]:
    from homeagent_core.datadir import prepare_data_dir

    people = PeopleRegistry.open(prepare_data_dir(data))
    try:
        people.ensure_owner(default_owner_name())
        yield people
    except PeopleError as exc:
        raise fail(str(exc)) from None
    finally:
        people.close()


def _who() -> str:
    return f"{default_owner_name()} (cli)"


@app.command("list")
@handle_errors
def list_(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List people: name, role, linked chat accounts, number of API keys."""
    with _registry(data) as people:
        rows = [p.to_dict() for p in people.list()]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        accounts = ", ".join(f"{i['platform']}:{i['account']}" for i in row["identities"]) or "-"
        typer.echo(f"{row['name']:<20} {row['role']:<8} accounts {accounts}  keys {row['api_keys']}")


@app.command("roles")
@handle_errors
def roles(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List the roles and their tool policy (allow / ask / deny patterns)."""
    with _registry(data) as people:
        rows = [r.to_dict() for r in people.roles().values()]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        typer.echo(f"{row['name']}: {row['description']}")
        for kind in ("allow", "ask", "deny"):
            if row[kind]:
                typer.echo(f"  {kind:<5} {', '.join(row[kind])}")


@app.command("add")
@handle_errors
def add(
    name: Annotated[str, typer.Argument(help="The person's name (unique).")],
    role: Annotated[str, typer.Option("--role", help="owner, adult, child, guest or a role you added.")] = "adult",
    data: DataOption = None,
) -> None:
    """Add a person with a role."""
    with _registry(data) as people:
        person = people.add(name, role, by=_who())
    typer.echo(f"added {person.name} as {person.role}")


@app.command("remove")
@handle_errors
def remove(name: Annotated[str, typer.Argument(help="The person to remove.")], data: DataOption = None) -> None:
    """Remove a person, their linked accounts and API keys (the last owner cannot be removed)."""
    with _registry(data) as people:
        people.remove(name, by=_who())
    typer.echo(f"removed {name}; their API keys no longer work")


@app.command("role")
@handle_errors
def role(
    name: Annotated[str, typer.Argument(help="The person.")],
    new_role: Annotated[str, typer.Argument(metavar="ROLE", help="owner, adult, child, guest or a role you added.")],
    data: DataOption = None,
) -> None:
    """Give a person another role."""
    with _registry(data) as people:
        person = people.set_role(name, new_role, by=_who())
    typer.echo(f"{person.name} is now {person.role}")


@app.command("role-policy")
@handle_errors
def role_policy(
    name: Annotated[str, typer.Argument(help="The role to add or change (not owner).")],
    allow: Annotated[str, typer.Option(help="Comma-separated tool-name patterns allowed, e.g. 'web_*,timer_*'.")] = "",
    ask: Annotated[str, typer.Option(help="Patterns that ask the owner first.")] = "",
    deny: Annotated[str, typer.Option(help="Patterns always refused.")] = "",
    description: Annotated[str, typer.Option(help="What the role is for.")] = "",
    data: DataOption = None,
) -> None:
    """Add a role, or replace a role's tool policy."""
    with _registry(data) as people:
        changed = people.set_role_policy(name, allow=allow, ask=ask, deny=deny, description=description, by=_who())
    typer.echo(f"role {changed.name}: allow {list(changed.allow)} ask {list(changed.ask)} deny {list(changed.deny)}")


@app.command("policy")
@handle_errors
def policy(
    name: Annotated[str, typer.Argument(help="The person.")],
    allow: Annotated[str, typer.Option(help="Comma-separated tool-name patterns allowed beyond the role.")] = "",
    ask: Annotated[str, typer.Option(help="Patterns that ask the owner first.")] = "",
    deny: Annotated[str, typer.Option(help="Patterns always refused to this person.")] = "",
    data: DataOption = None,
) -> None:
    """Give one person their own patterns, looked at before their role's (all empty: none)."""
    with _registry(data) as people:
        person = people.set_policy(name, allow=allow, ask=ask, deny=deny, by=_who())
    typer.echo(f"{person.name}: allow {list(person.allow)} ask {list(person.ask)} deny {list(person.deny)}")


@app.command("link")
@handle_errors
def link(
    name: Annotated[str, typer.Argument(help="The person.")],
    platform: Annotated[str, typer.Argument(help="The chat app as its bridge names it (qq, telegram), or 'door'.")],
    account: Annotated[str, typer.Argument(help="The account on that app (or, for 'door', a plugin's name).")],
    data: DataOption = None,
) -> None:
    """Link a chat-app account to a person: their messages get that person's rights."""
    with _registry(data) as people:
        person = people.link(name, platform, account, by=_who())
    typer.echo(f"linked {platform.lower()} {account} to {person.name} ({person.role})")


@app.command("unlink")
@handle_errors
def unlink(
    name: Annotated[str, typer.Argument(help="The person.")],
    platform: Annotated[str, typer.Argument(help="The chat app (qq, telegram), or 'door'.")],
    account: Annotated[str, typer.Argument(help="The linked account (or, for 'door', the plugin's name).")],
    data: DataOption = None,
) -> None:
    """Revoke a link: that account's next message is a guest's (a turn already running finishes with its rights)."""
    with _registry(data) as people:
        person = people.unlink(name, platform, account, by=_who())
    typer.echo(f"unlinked {platform.lower()} {account} from {person.name}")


@app.command("key")
@handle_errors
def key(
    name: Annotated[str, typer.Argument(help="The person the key acts for.")],
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a new API key for a person (for /v1 and the web API); it is printed only this once."""
    with _registry(data) as people:
        new = people.new_key(name, by=_who())
    if as_json:
        echo_json({"person": name, "api_key": new})
        return
    typer.echo(new)
    typer.echo(f"(an API key for {name}; it is not stored and will not be shown again)", err=True)


def _web_base(data_dir: Path) -> str:
    """The web UI's address from ``plugin.webui.addr`` (the default when unset)."""
    from homeagent_core.builtin.webui import parse_addr
    from homeagent_core.config import ConfigStore

    config = ConfigStore(data_dir / "config.db")
    try:
        addr = str(config.get("plugin.webui.addr") or "127.0.0.1:8080")
    except Exception:  # a data dir whose settings were never written
        addr = "127.0.0.1:8080"
    finally:
        config.close()
    try:
        host, port = parse_addr(addr)
    except ValueError:
        host, port = "127.0.0.1", 8080
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


@app.command("invite")
@handle_errors
def invite(
    name: Annotated[str, typer.Argument(help="The person who sets their own web UI password.")],
    base_url: Annotated[
        str,
        typer.Option("--base-url", help="The web UI's address as the person reaches it (default: plugin.webui.addr)."),
    ] = "",
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """A one-time link (valid 24 h) on which a person sets their own web UI password."""
    from homeagent_core.builtin.webui.api_people import invite_path
    from homeagent_core.builtin.webui.auth import INVITE_TTL_S, LOGINS_DB, Logins
    from homeagent_core.datadir import plugin_data_dir, prepare_data_dir

    root = prepare_data_dir(data)
    with _registry(root) as people:
        person = people.require(name)
        logins = Logins(plugin_data_dir(root, "webui") / LOGINS_DB)
        try:
            token, expires = logins.invite(person.name, person.created_at, INVITE_TTL_S)
        finally:
            logins.close()
        people.audit_change(_who(), "invite_new", person.name)
    url = (base_url.rstrip("/") or _web_base(root)) + invite_path(token)
    if as_json:
        echo_json({"person": person.name, "url": url, "expires": expires})
        return
    typer.echo(url)
    typer.echo(
        f"(a one-time link for {person.name} to set their web UI password; it works once, for 24 hours, "
        "and is not shown again)",
        err=True,
    )


@app.command("audit")
@handle_errors
def audit(
    limit: Annotated[int, typer.Option(help="How many entries, newest first.")] = 50,
    person: Annotated[str, typer.Option(help="Only this person's entries.")] = "",
    approvals: Annotated[
        bool, typer.Option("--approvals", help="Only the approvals: who asked for which call, and its outcome.")
    ] = False,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tool calls (allowed, denied, asked, approved, denied-by-owner, expired, interrupted), registry
    changes, and the approvals with their outcomes (kept across restarts)."""
    from homeagent_core.agent.approval_store import ApprovalStore

    with _registry(data) as people:
        rows = [r.to_dict() for r in people.audit_rows(limit, person=person)]
        store = ApprovalStore(people.path)
        try:
            asked = [r.to_dict() for r in store.rows(limit)]
        finally:
            store.close()
    if person:
        asked = [a for a in asked if a["person"] == person]
    if as_json:
        echo_json(asked if approvals else rows)
        return
    import time

    def when(ts: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"

    if not approvals:
        for row in rows:
            detail = f"  {row['detail']}" if row["detail"] else ""
            who = f"{row['person']:<12} {row['door']:<10}"
            typer.echo(f"{when(row['ts'])}  {who} {row['action']:<20} {row['outcome']}{detail}")
        if not asked:
            return
        typer.echo("\napprovals (newest first):")
    for a in asked:
        arguments = json.dumps(a["arguments"], ensure_ascii=False)
        arguments = arguments if len(arguments) <= 80 else arguments[:77] + "..."
        decided = f" by {a['decided_by']} at {when(a['decided_at'])}" if a["decided_by"] else ""
        asked_at = f"#{a['id']:<5} {when(a['created'])}"
        typer.echo(f"{asked_at}  {a['person']:<12} {a['tool']} {arguments}  {a['status']}{decided}")


def _ask_daemon(data: Path | None, command: str) -> str:
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command
    from homeagent_core.datadir import prepare_data_dir

    try:
        answer = daemon_command(prepare_data_dir(data), command, timeout=30.0)
    except DaemonRefused as exc:
        raise fail(str(exc)) from None
    if answer is None:
        raise fail(
            "no daemon runs on this data dir; approvals wait and are decided only while `homeagent serve` runs "
            "(`homeagent people audit --approvals` shows their history)"
        )
    return answer


@app.command("approvals")
@handle_errors
def approvals(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List the tool calls waiting for the owner's decision (asks the running daemon)."""
    rows = json.loads(_ask_daemon(data, "/approvals list"))
    if as_json:
        echo_json(rows)
        return
    if not rows:
        typer.echo("no pending approvals")
        return
    for row in rows:
        args = json.dumps(row["arguments"], ensure_ascii=False)
        typer.echo(f"#{row['id']}  {row['person']} ({row['role']}, {row['door']})  {row['tool']} {args}")


@app.command("approve")
@handle_errors
def approve(
    approval_id: Annotated[int, typer.Argument(metavar="ID", help="The approval's number.")],
    data: DataOption = None,
) -> None:
    """Approve a waiting call: it runs now with the asker's rights."""
    typer.echo(_ask_daemon(data, f"/approvals approve {approval_id}"))


@app.command("deny")
@handle_errors
def deny(
    approval_id: Annotated[int, typer.Argument(metavar="ID", help="The approval's number.")],
    data: DataOption = None,
) -> None:
    """Deny a waiting call: the asker is told it was denied by the owner."""
    typer.echo(_ask_daemon(data, f"/approvals deny {approval_id}"))
