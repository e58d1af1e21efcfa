"""``homeagent doctor``: what is configured, what is missing, and how to fix it."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
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
    if not key and not source_keys:
        found.append(
            Finding(
                "llm",
                "warn",
                "no API key is set for any LLM source, so the agent cannot answer yet",
                "homeagent config set core.llm.sources.deepseek.api_key <key>  (or export HOMEAGENT_LLM_API_KEY)",
            )
        )
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


#: Extra checks, each taking the App and returning findings (providers, embeddings...).
EXTRA_CHECKS: list[Callable[[Any], list[Finding]]] = []


def run_checks(data: Path | None) -> list[Finding]:
    """Run every check against the data directory and return the findings."""
    found, app = _check_data_dir(data)
    try:
        for check in (_check_llm, _check_plugins, _check_runtime, *EXTRA_CHECKS):
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
