"""``homeagent doctor``: what is configured, what is missing, and how to fix it.

When a daemon runs on the data directory, the plugin and model findings are what that daemon
reports over its ``cli`` socket (``/doctor``): the plugins as they run, with the error of
each that failed, the LLM source that answered, the worker threads hung on calls their callers
gave up on, and the event-loop stalls its loop watch recorded. Without one, plugins are loaded here (their
start-up is not checked) and a keyless source on this machine or the local network is asked for
its ``/models`` before the report says no source can answer.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

if TYPE_CHECKING:
    from homeagent_core.providers.manager import SourceConfig

__all__ = ["Finding", "check_data_format", "doctor", "run_checks"]


@dataclass
class Finding:
    """One line of the report: ``ok``, ``warn`` (degraded) or ``fail`` (broken)."""

    area: str
    status: str
    message: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"area": self.area, "status": self.status, "message": self.message, "fix": self.fix}


def _check_data_dir(data: Path | None) -> tuple[list[Finding], Any]:
    from homeagent_core.app import App

    app = App(data)
    found = [Finding("data", "ok", f"data directory {app.data_dir} is writable")]
    mode = app.data_dir.stat().st_mode & 0o777
    if mode & 0o077:
        message = f"data directory is readable by others (mode {mode:o})"
        found.append(Finding("data", "warn", message, f"chmod 700 {app.data_dir}"))
    return found, app


def _daemon_facts(app: Any) -> dict[str, Any] | None:
    """``/doctor`` of the daemon running on this data directory, or ``None`` when none answers."""
    import json

    from homeagent_core.cli.chat import AgentError, CliClient, DaemonUnreachable

    def setting(key: str) -> str:
        try:
            return str(app.config.get(key) or "")
        except Exception:  # not declared in this process: the default applies
            return ""

    raw = setting("plugin.cli.socket_path")
    path = Path(raw).expanduser() if raw else app.data_dir / "cli.sock"
    if not path.exists():
        return None
    key = setting("plugin.cli.api_key") or setting("plugin.webui.api_key")
    try:
        with CliClient(path, api_key=key, timeout=15) as client:
            reply = [e for e in client.send("/doctor") if e.get("type") == "response"][-1]
        facts = json.loads(reply.get("content") or "{}")
    except (DaemonUnreachable, AgentError, OSError, ValueError, IndexError):
        return None
    return facts if isinstance(facts, dict) else None


def _is_local(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine or a private network (where keyless servers live)."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    host = urlsplit(base_url).hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".lan", ".internal")):
        return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    try:
        return bool(addresses) and all(
            ipaddress.ip_address(a.split("%")[0]).is_private or ipaddress.ip_address(a.split("%")[0]).is_loopback
            for a in addresses)
    except ValueError:
        return False


def _answers_models(base_url: str) -> str:
    """``""`` when ``GET <base_url>/models`` answers 200, else why not."""
    import httpx

    url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, timeout=5.0, follow_redirects=False)
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    return "" if response.status_code == 200 else f"{url} answered HTTP {response.status_code}"


def _sources_by_credentials(config: Any) -> tuple[list[SourceConfig], list[str], list[str]]:
    """``(sources, usable, keyless)``: every configured source (keys from config and environment
    applied) and the names of those the daemon asks and of the remote ones it never asks for
    want of an API key."""
    from homeagent_core.providers.manager import missing_credentials, sources_from_config

    configs, _ = sources_from_config(config)
    keyless = [c.name for c in configs if missing_credentials(c)]
    return configs, [c.name for c in configs if c.name not in keyless], keyless


def _check_llm(app: Any, daemon: dict[str, Any] | None = None) -> list[Finding]:
    config = app.config
    found: list[Finding] = []
    default = config.get("core.llm.provider")
    configs, usable, keyless = _sources_by_credentials(config)
    sources = [c.name for c in configs]
    message = f"LLM sources configured: {', '.join(usable) or 'none'}; default {default!r}"
    if keyless:
        message += f"; never asked until they get an API key: {', '.join(keyless)}"
    found.append(Finding("llm", "ok", message))
    llm = (daemon or {}).get("llm")
    if isinstance(llm, dict) and llm.get("source"):
        how = "answered last" if llm.get("answered") else "is next to try (nothing asked yet)"
        found.append(Finding("llm", "ok", f"running daemon: source {llm['source']} "
                                          f"(model {llm.get('model') or 'adapter default'}) {how}"))
    for row in (daemon or {}).get("llm_sources") or []:
        problem = row.get("disabled") or (row.get("last_error") if not row.get("available") else "")
        if problem and row.get("name") not in keyless:
            found.append(Finding("llm", "warn", f"running daemon: source {row['name']} is not usable: {problem}",
                                 f"homeagent config get core.llm.sources.{row['name']}"))
    if isinstance(llm, dict) and llm.get("answered"):
        return found
    if any(c.api_key for c in configs):
        return found
    for name in sources:
        base_url = str(config.get(f"core.llm.sources.{name}.base_url") or "")
        if not base_url or not _is_local(base_url):
            continue
        problem = _answers_models(base_url)
        if not problem:
            found.append(Finding("llm", "ok", f"source {name} needs no API key: {base_url} is local and answers"))
            return found
        found.append(Finding("llm", "warn", f"source {name} (keyless, local) does not answer: {problem}",
                             f"start the server at {base_url}, or fix core.llm.sources.{name}.base_url"))
    if any(f.message.startswith("source ") and "(keyless, local)" in f.message for f in found):
        return found  # the problem is a local server that is down, not a missing key
    found.append(
        Finding(
            "llm",
            "warn",
            "no API key is set for any LLM source, so the agent cannot answer yet",
            "homeagent config set core.llm.sources.deepseek.api_key <key>  (or export HOMEAGENT_LLM_API_KEY)",
        )
    )
    return found


def _plugin_failed(name: str, kind: str, error: str) -> Finding:
    return Finding("plugins", "fail", f"plugin {name} ({kind}) failed: {error}",
                   f"fix or remove it; meanwhile: HOMEAGENT_DISABLE_PLUGINS={name} homeagent serve")


def _check_plugins(app: Any, daemon: dict[str, Any] | None = None) -> list[Finding]:
    rows = (daemon or {}).get("plugins")
    if isinstance(rows, list):
        found = [_plugin_failed(r["name"], r.get("kind", ""), r.get("error") or "no reason given")
                 for r in rows if r.get("status") in ("failed", "crashed")]
        running = [r["name"] for r in rows if r.get("status") in ("started", "running")]
        others = [f"{r['name']} ({r.get('status')})" for r in rows
                  if r.get("status") not in ("started", "running", "failed", "crashed")]
        message = f"{len(running)} of {len(rows)} plugins started in the running daemon: {', '.join(running)}"
        if found:
            message += f"; failed: {', '.join(r['name'] for r in rows if r.get('status') in ('failed', 'crashed'))}"
        if others:
            message += f"; other: {', '.join(others)}"
        return [*found, Finding("plugins", "fail" if found else "ok", message)]
    app.declare_settings()
    app.register_contributions()
    found = []
    infos = app.host.plugins()
    for info in infos:
        if info.status == "failed":
            found.append(_plugin_failed(info.name, info.distribution or info.kind, info.error))
        elif info.status == "blocked":
            found.append(Finding("plugins", "warn", f"plugin {info.name} is disabled"))
    loaded = [i.name for i in infos if i.status not in ("failed", "blocked")]
    failed = [i.name for i in infos if i.status == "failed"]
    message = f"{len(loaded)} of {len(infos)} plugins load: {', '.join(loaded)}"
    if failed:
        message += f"; failed: {', '.join(failed)}"
    message += " (no daemon runs on this data directory, so their start-up was not checked)"
    found.append(Finding("plugins", "fail" if failed else "ok", message))
    return found


def _check_runtime(app: Any) -> list[Finding]:
    found = [Finding("runtime", "ok", f"Python {sys.version.split()[0]} on {sys.platform}")]
    for module, why in (("uvloop", "faster event loop"), ("orjson", "faster JSON on hot paths")):
        if importlib.util.find_spec(module) is None:
            found.append(Finding("runtime", "warn", f"{module} is not installed ({why})", f"pip install {module}"))
    from homeagent_core.memory.documents import native

    if native.library() is None:
        found.append(Finding(
            "runtime", "warn",
            f"document queries score in numpy and simsimd: no usable compiled BM25 loops at {native.LIBRARY} "
            "(same results, slower)",
            "reinstall with a C compiler present (pip install --force-reinstall homeagent), and do not set "
            "HOMEAGENT_NATIVE=0",
        ))
    if os.environ.get("HOMEAGENT_TRACE_PLUGINS"):
        found.append(Finding("runtime", "warn", "HOMEAGENT_TRACE_PLUGINS is set: every hook call is printed"))
    return found


def _check_threads(app: Any, daemon: dict[str, Any] | None = None) -> list[Finding]:
    """Hung worker threads and event-loop stalls of the running daemon."""
    if daemon is None:
        return []
    found: list[Finding] = []
    pools = daemon.get("workers")
    if isinstance(pools, list):
        hung = [p for p in pools if p.get("abandoned")]
        for pool in hung:
            calls = "; ".join(
                f"{s['call']}{' of plugin ' + s['owner'] if s.get('owner') else ''} for {s['seconds']:g} s"
                for s in pool.get("stuck") or []
            )
            found.append(Finding(
                "threads", "warn",
                f"running daemon: worker pool {pool['name']} has {pool['abandoned']} hung thread(s) its callers "
                f"gave up on ({pool['abandoned_total']} since start, {pool['refused_total']} calls refused): {calls}",
                "fix the blocking code (or make it async), or disable that plugin; the threads end when their "
                "calls return or the daemon restarts",
            ))
        if not hung:
            widths = sorted({f"{p['name']} {p['workers']}" for p in pools})
            found.append(Finding("threads", "ok", f"running daemon: no hung worker threads ({', '.join(widths)})"))
    if "loop_watch" in daemon:
        watch = daemon.get("loop_watch")
        if not isinstance(watch, dict):
            found.append(Finding(
                "loop", "ok", "running daemon: the loop watch is off, event-loop stalls are not recorded",
                "start the daemon with HOMEAGENT_DEBUG=1 to log every stall over 50 ms with its stack",
            ))
        elif watch.get("stalls"):
            latest = (watch.get("latest") or [{}])[-1]
            where = [line.strip() for line in str(latest.get("stack", "")).splitlines() if line.strip()]
            found.append(Finding(
                "loop", "warn",
                f"running daemon: the event loop was blocked {watch['stalls']} time(s) (loop watch threshold "
                f"{watch['threshold_ms']:g} ms, worst {watch['worst_ms']:g} ms); the latest at: "
                f"{' / '.join(where[-2:]) or 'unknown'}",
                "the daemon log has each stall's full stack; move that call off the event loop",
            ))
        else:
            found.append(Finding(
                "loop", "ok", f"running daemon: no event-loop stall over {watch['threshold_ms']:g} ms so far"
            ))
    return found


def _check_adapters(app: Any) -> list[Finding]:
    from homeagent_core.providers import deploy_bundled_adapters, list_adapters

    deploy_bundled_adapters(app.data_dir)
    rows = list_adapters(app.data_dir)
    found = [
        Finding("adapters", "fail", f"adapter {r['name']} ({r['path']}) is broken: {r['error']}",
                f"fix or delete {r['path']}")
        for r in rows if r["status"] != "ok"
    ]
    names = sorted({r["name"] for r in rows if r["status"] == "ok"})
    found.append(Finding("adapters", "ok", f"{len(names)} LLM adapters usable: {', '.join(names)}"))
    wanted = app.config.get("core.llm.sources." + app.config.get("core.llm.provider") + ".adapter")
    if wanted and wanted not in names:
        found.append(Finding("adapters", "fail", f"the default source uses adapter {wanted!r}, which does not exist",
                             "homeagent adapters list shows the available ones"))
    return found


def _check_health(app: Any) -> list[Finding]:
    """The last periodic self-check the running daemon recorded (healthcheck built-in)."""
    import time

    from homeagent_core.builtin.healthcheck import read_history

    points = read_history(app.data_dir)["points"]
    if not points:
        return [Finding("health", "ok", "no self-check recorded yet (the daemon runs one periodically)")]
    last = points[-1]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last.get("time", 0)))
    if last.get("ok"):
        return [Finding("health", "ok", f"last self-check {when}: everything ok ({len(points)} checks kept)")]
    failing = ", ".join(last.get("failing", [])) or "unknown"
    details = "; ".join(
        str(last.get(part, {}).get("error") or last.get(part, {}).get("problems") or "")
        for part in last.get("failing", [])
    ).strip("; ")
    message = f"last self-check {when} failed: {failing}" + (f" ({details})" if details else "")
    return [Finding("health", "warn", message, "see `homeagent chat` → /status, or the web UI kernel page")]


def _check_heartbeats(app: Any) -> list[Finding]:
    """The memory heartbeats whose last run failed, from the ledger the daemon keeps."""
    import re
    import time

    from homeagent_core.memory.heartbeat import LEDGER_NAME, read_heartbeat_ledger

    path = app.data_dir / "memory" / LEDGER_NAME
    entries = read_heartbeat_ledger(path)
    if not entries:
        return [Finding("memory", "ok", "no memory heartbeat has run yet (the daemon runs them)")]
    found = []
    for name, entry in sorted(entries.items()):
        if entry.get("ok"):
            continue
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(entry.get("since") or 0)))
        error = str(entry.get("error") or "no reason recorded")
        missing = re.search(r"No module named '([\w.]+)'", error)
        fix = (
            f"pip install {missing.group(1).split('.')[0]}, then restart the daemon"
            if missing
            else f"see the daemon's log in {app.data_dir / 'log'}; the heartbeat is retried at every interval"
        )
        found.append(Finding("memory", "warn", f"heartbeat {name} has failed since {when}: {error}", fix))
    if not found:
        found.append(Finding("memory", "ok", f"memory heartbeats ok at their last runs: {', '.join(sorted(entries))}"))
    return found


def _check_private_memory(app: Any) -> list[Finding]:
    """How many documents became the owner's (private) when memory started recording who said what."""
    import sqlite3

    from homeagent_core.memory.documents.sql import PEOPLE_MIGRATED

    path = app.data_dir / "memory" / "documents.db"
    if not path.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (PEOPLE_MIGRATED,)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return []  # not upgraded yet (the daemon upgrades it when it opens memory), or no such table
    if row is None:
        return []
    return [Finding(
        "memory", "ok",
        f"{int(row[0])} document(s) stored before memory recorded who said what belong to the owner and are private",
        "`homeagent memory docs QUERY` shows their ids; `homeagent memory share ID` makes one the household's",
    )]


def _check_embeddings(app: Any) -> list[Finding]:
    import asyncio

    from homeagent_core.embeddings.registry import ProviderRegistry
    from homeagent_core.memory.system import embedding_tier_config

    async def select() -> Any:
        tiers = await ProviderRegistry().select(**embedding_tier_config(app.config))
        await tiers.aclose()
        return tiers

    # The findings below report unavailable tiers; the loader's own warning would repeat them.
    logging.getLogger("homeagent_core.embeddings").setLevel(logging.ERROR)
    tiers = asyncio.run(select())
    found = []
    for status in tiers.statuses:
        if status.active:
            found.append(Finding("memory", "ok", f"embedding tier in use: {status.tier} ({status.provider})"))
            found.append(Finding("memory", "ok", _languages_message(status.tier, status.languages)))
        elif not status.available:
            looked = f" (looked for: {', '.join(status.looked_for)})" if status.looked_for else ""
            found.append(Finding("memory", "warn", f"embedding tier {status.tier} unavailable: {status.reason}{looked}",
                                 "memory works on the next tier; see docs/CONFIG.md for model paths"))
    return found


def _languages_message(tier: str, languages: list[str]) -> str:
    """Which path serves which language: the dense model for its own, lexical for the rest."""
    if tier == "tfidf" or not languages:
        return "search languages: every language by the lexical path (Chinese and English n-grams)"
    if "*" in languages:
        return f"search languages: every language by the {tier} model fused with the lexical path"
    return (
        f"search languages: {', '.join(languages)} by the {tier} model fused with the lexical path; "
        "other languages by the lexical path alone (set core.embeddings.languages to change)"
    )


def check_root(app: Any, euid: int | None = None) -> list[Finding]:
    """Warn when HomeAgent runs as root: whatever a model runs would have every right on the machine."""
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        return []
    key = "plugin.cmd.allow_root"
    allowed = bool(app.config.get(key, False)) if app.config.is_known(key) else False
    what = (
        "cmd_run runs programs as root because plugin.cmd.allow_root is true"
        if allowed
        else "cmd_run refuses to run programs until you run HomeAgent as an ordinary user or set plugin.cmd.allow_root"
    )
    return [Finding("runtime", "warn", f"running as root (uid 0): {what}",
                    "run HomeAgent as an ordinary user, e.g. a `homeagent` system account")]


def check_data_format(data: Path) -> list[Finding]:
    """The data format of ``data`` and every store's version, read without changing anything."""
    from homeagent_core.ops.formats import DATA_FORMAT, inspect_data_dir

    if not data.is_dir():
        return [Finding("format", "ok", f"no data directory yet at {data}: it is created in data format {DATA_FORMAT}")]
    report = inspect_data_dir(data)
    found: list[Finding] = []
    for store in report.stores:
        rel = store.path.relative_to(data) if store.path.is_relative_to(data) else store.path
        where = str(rel) if rel.name == store.store else f"{rel} ({store.store})"
        told = "" if store.recorded else " (from its shape: written before versions were recorded)"
        if store.state == "current":
            found.append(Finding("format", "ok", f"{where}: format {store.version}{told}"))
        elif store.state == "older":
            found.append(Finding(
                "format", "warn",
                f"{where}: format {store.version}{told}, this HomeAgent writes {store.current}: "
                "it is migrated when it is next opened",
                f"nothing to do: a copy is kept in {data / 'backups' / 'pre-migration'} before it is migrated",
            ))
        elif store.state == "newer":
            found.append(Finding(
                "format", "fail",
                f"{where} is format {store.version}, this HomeAgent reads up to {store.current}",
                "upgrade HomeAgent or restore a backup",
            ))
        else:
            found.append(Finding("format", "fail", f"{where}: {store.detail}",
                                 "restore a backup, or move the file away to start that store empty"))
    fmt = report.format
    if fmt is None:
        summary = Finding("format", "fail", f"data format: newer than this HomeAgent's {DATA_FORMAT}",
                          "upgrade HomeAgent or restore a backup")
    elif fmt < DATA_FORMAT:
        summary = Finding("format", "warn", f"data format {fmt}; this HomeAgent writes {DATA_FORMAT} and upgrades "
                          "the older stores when it opens them")
    else:
        summary = Finding("format", "ok", f"data format {fmt}")
    return [summary, *found]


def run_checks(data: Path | None) -> list[Finding]:
    """Run every check against the data directory and return the findings."""
    from homeagent_core.datadir import resolve_data_dir
    from homeagent_sdk.errors import DataFormatError

    formats = check_data_format(resolve_data_dir(data))  # before anything opens (and so upgrades) a store
    try:
        found, app = _check_data_dir(data)
    except DataFormatError as exc:
        return [*formats, Finding("data", "fail", str(exc), "upgrade HomeAgent or restore a backup")]
    found.extend(formats)
    try:
        daemon = _daemon_facts(app)
        if daemon is not None:
            found.append(Finding("daemon", "ok", f"a daemon is running on {app.data_dir} (pid {daemon.get('pid')}); "
                                                 "plugin and model findings are what it reports"))
        checks = (_check_llm, _check_adapters, _check_plugins, _check_threads, _check_embeddings, _check_heartbeats,
                  _check_private_memory, _check_health, _check_runtime)
        with_daemon = (_check_llm, _check_plugins, _check_threads)
        for check in checks:
            try:
                found.extend(check(app, daemon) if check in with_daemon else check(app))
            except Exception as exc:  # a broken check must not hide the others
                found.append(Finding(check.__name__.strip("_").replace("check_", ""), "fail", f"check failed: {exc}"))
        found.extend(check_root(app))
    finally:
        app.config.close()
    return found


@handle_errors
def doctor(data: DataOption = None, as_json: JsonOption = False) -> None:
    """Check the installation and data directory; exit 1 if something is broken."""
    findings = run_checks(data)
    if as_json:
        echo_json([f.to_dict() for f in findings])
    else:
        colours = {"ok": typer.colors.GREEN, "warn": typer.colors.YELLOW, "fail": typer.colors.RED}
        for f in findings:
            typer.secho(f"[{f.status:>4}] {f.area:<10} {f.message}", fg=colours[f.status])
            if f.fix:
                typer.echo(f"{'':18}fix: {f.fix}")
    if any(f.status == "fail" for f in findings):
        raise typer.Exit(1)
