"""``homeagent doctor``: what is configured, what is missing, and how to fix it."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["Finding", "doctor", "run_checks"]


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


def _check_llm(app: Any) -> list[Finding]:
    config = app.config
    found: list[Finding] = []
    default = config.get("core.llm.provider")
    sources = sorted({k.split(".")[3] for k in config.items("core.llm.sources.")})
    found.append(Finding("llm", "ok", f"LLM sources configured: {', '.join(sources)}; default {default!r}"))
    key = config.get("core.llm.api_key")
    source_keys = [s for s in sources if config.get(f"core.llm.sources.{s}.api_key")]
    # A server on this machine (Ollama, vLLM, llama.cpp) usually needs no key at all.
    local = [s for s in sources if _is_local(str(config.get(f"core.llm.sources.{s}.base_url") or ""))]
    if not key and not source_keys and not local:
        found.append(
            Finding(
                "llm",
                "warn",
                "no API key is set for any LLM source, so the agent cannot answer yet",
                "homeagent config set core.llm.sources.deepseek.api_key <key>  (or export HOMEAGENT_LLM_API_KEY)",
            )
        )
    return found


def _is_local(url: str) -> bool:
    host = url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _daemon_report(app: Any) -> dict[str, Any] | None:
    """What the daemon running on this data directory reports (``/doctor``), or None."""
    from homeagent_core.cli.chat import AgentError, CliClient, DaemonUnreachable

    config = app.config
    raw = str(config.get("plugin.cli.socket_path") or "") if config.is_known("plugin.cli.socket_path") else ""
    path = Path(raw).expanduser() if raw else Path(app.data_dir) / "cli.sock"
    if not path.exists():
        return None
    key = ""
    for name in ("plugin.cli.api_key", "plugin.webui.api_key"):
        if not key and config.is_known(name):
            key = str(config.get(name) or "")
    try:
        with CliClient(path, api_key=key, timeout=30) as client:
            events = list(client.send("/doctor"))
        report = json.loads(str(events[-1].get("content", "")))
    except (DaemonUnreachable, AgentError, OSError, ValueError, IndexError):
        return None
    return report if isinstance(report, dict) else None


def _check_daemon(app: Any, report: dict[str, Any]) -> list[Finding]:
    """Findings from the running daemon: the plugins as they run, the sources as they answer."""
    found: list[Finding] = []
    plugins = report.get("plugins") or []
    for p in plugins:
        if p.get("status") == "failed":
            found.append(Finding("plugins", "fail", f"plugin {p['name']} ({p.get('kind', '')}) failed in the running "
                                 f"daemon: {p.get('error', '')}", f"fix or remove it, then: homeagent plugins reload "
                                 f"(or HOMEAGENT_DISABLE_PLUGINS={p['name']} homeagent serve)"))
    started = [p["name"] for p in plugins if p.get("status") == "started"]
    message = f"{len(started)} plugins started in the running daemon: {', '.join(started)}"
    found.append(Finding("plugins", "ok", message))
    sources = report.get("llm_sources")
    if isinstance(sources, list):
        for s in sources:
            state = "ok" if s.get("available") else "warn"
            reason = s.get("disabled") or s.get("last_error") or "cooling down"
            why = "" if s.get("available") else f" (not available: {reason})"
            found.append(Finding("llm", state, f"source {s['name']} ({s.get('model', '')}) in the running daemon{why}"))
    return found


def _check_plugins(app: Any) -> list[Finding]:
    app.declare_settings()
    app.register_contributions()
    found = []
    for info in app.host.plugins():
        if info.status == "failed":
            found.append(
                Finding(
                    "plugins",
                    "fail",
                    f"plugin {info.name} ({info.distribution or info.kind}) failed: {info.error}",
                    f"fix or remove it; meanwhile: HOMEAGENT_DISABLE_PLUGINS={info.name} homeagent serve",
                )
            )
        elif info.status == "blocked":
            found.append(Finding("plugins", "warn", f"plugin {info.name} is disabled"))
    loaded = [i.name for i in app.host.plugins() if i.status not in ("failed", "blocked")]
    found.append(Finding("plugins", "ok", f"{len(loaded)} plugins load: {', '.join(loaded)}"))
    return found


def _check_runtime(app: Any) -> list[Finding]:
    found = [Finding("runtime", "ok", f"Python {sys.version.split()[0]} on {sys.platform}")]
    for module, why in (("uvloop", "faster event loop"), ("orjson", "faster JSON on hot paths")):
        if importlib.util.find_spec(module) is None:
            found.append(Finding("runtime", "warn", f"{module} is not installed ({why})", f"pip install {module}"))
    if os.environ.get("HOMEAGENT_TRACE_PLUGINS"):
        found.append(Finding("runtime", "warn", "HOMEAGENT_TRACE_PLUGINS is set: every hook call is printed"))
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


def run_checks(data: Path | None) -> list[Finding]:
    """Run every check against the data directory and return the findings."""
    found, app = _check_data_dir(data)
    try:
        report = _daemon_report(app)
        checks: list[Any] = [_check_llm, _check_adapters, _check_plugins, _check_embeddings, _check_health,
                             _check_runtime]
        if report is not None:
            # A daemon runs here: what it reports is the truth (its plugins ran, its sources answered).
            checks = [lambda a: _check_daemon(a, report), _check_adapters, _check_embeddings, _check_health,
                      _check_runtime]
            found.append(Finding("daemon", "ok", f"a daemon is running on {app.data_dir}; showing what it reports"))
        for check in checks:
            try:
                found.extend(check(app))
            except Exception as exc:  # a broken check must not hide the others
                found.append(Finding(check.__name__.strip("_").replace("check_", ""), "fail", f"check failed: {exc}"))
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
