"""ProviderManager: configured LLM sources, their order, cooldowns and fallback (REFERENCE §4.6).

Candidate order: exact model match, higher ``priority``, available before cooling down, the
default source, then name. A failing source cools down 30 s × 2^(fails-1) (capped at 30 min);
HTTP 401/403 disables it until its config changes. A remote source with no API key is disabled
from the start (:func:`missing_credentials`): it is never tried and never listed available.
When every enabled source is cooling down
they are still tried (in order) rather than failing without a request — honest degradation.
Streams fall back to the next source while nothing was yielded; after that (or when every
stream failed) the manager yields ``{"content": "", "reset": True}`` and answers with a
non-streaming call, then one content chunk and a done chunk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson

from homeagent_core.providers.errors import ProviderError

if TYPE_CHECKING:
    import httpx

    from homeagent_core.providers.adapter import AdapterScript, LuaAdaptedProvider

__all__ = [
    "ConfigLike",
    "ProviderManager",
    "SourceConfig",
    "cooldown_seconds",
    "is_local_url",
    "missing_credentials",
]

_log = logging.getLogger("homeagent.providers")
_NIL = {"", "nil", "null", "<nil>", "none"}
_PREFIX = "core.llm.sources."
_KEY_ENV = ("HOMEAGENT_LLM_API_KEY", "LLM_API_KEY", "DEEPSEEK_API_KEY")
COOLDOWN_BASE_S = 30.0
COOLDOWN_MAX_S = 1800.0


def cooldown_seconds(fails: int) -> float:
    """30 s × 2^(fails-1), capped at 30 minutes."""
    return min(COOLDOWN_BASE_S * float(2 ** max(fails - 1, 0)), COOLDOWN_MAX_S)


def _bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _int(v: Any, default: int) -> int:
    try:
        return int(str(v).strip()) if v not in (None, "") else default
    except ValueError:
        return default


@dataclass
class SourceConfig:
    """One ``core.llm.sources.<name>.*`` entry (values already typed)."""

    name: str
    base_url: str
    model: str
    adapter: str
    api_key: str = field(default="", repr=False)
    adapter_path: str = ""
    context_window: int = 0
    max_concurrent: int = 8
    priority: int = 0
    thinking_enabled: bool = False
    vision: bool = False
    audio: bool = False

    @classmethod
    def from_mapping(cls, name: str, values: dict[str, Any]) -> SourceConfig:
        """Build from raw (possibly string) config values, converting types."""
        def s(key: str) -> str:
            return str(values.get(key) or "").strip()

        return cls(name=name, base_url=s("base_url"), model=s("model"), adapter=s("adapter"),
                   api_key=s("api_key"), adapter_path=s("adapter_path"),
                   context_window=_int(values.get("context_window"), 0),
                   max_concurrent=max(1, _int(values.get("max_concurrent"), 8)),
                   priority=_int(values.get("priority"), 0),
                   thinking_enabled=_bool(values.get("thinking_enabled")),
                   vision=_bool(values.get("vision")), audio=_bool(values.get("audio")))

    def problem(self) -> str:
        """Why this source is invalid (§4.6), or ``""``."""
        for key in ("name", "base_url", "model", "adapter"):
            if key == "adapter" and self.adapter_path:
                continue  # the file replaces the named adapter (docs/CONFIG.md)
            if str(getattr(self, key)).strip().lower() in _NIL:
                hint = " (set adapter to a name, or adapter_path to a file)" if key == "adapter" else ""
                return f"{key} is empty{hint}"
        if not self.base_url.startswith(("http://", "https://")):
            return f"base_url {self.base_url!r} must start with http:// or https://"
        return ""

    def fingerprint(self) -> tuple[Any, ...]:
        """Everything that identifies this config (a change re-enables a disabled source)."""
        return tuple(getattr(self, f.name) for f in fields(self))


_AUTH_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization"})
_LOCAL_SUFFIXES = (".localhost", ".local", ".lan", ".internal", ".home.arpa")


def is_local_url(base_url: str) -> bool:
    """Whether ``base_url`` names this machine or a private network by its text alone (no DNS).

    ``localhost``, a loopback, private or link-local address, a single-label host (a container
    or LAN name such as ``http://ollama:11434``) and the ``.local``/``.lan``/``.internal``/
    ``.home.arpa`` names count; a public name or address does not.
    """
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(base_url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local


def missing_credentials(src: SourceConfig, headers: dict[str, str] | None = None) -> str:
    """Why ``src`` must not be asked: it has no API key and is a remote service; ``""`` when usable.

    A source has credentials when it has an ``api_key`` (its own, ``core.llm.api_key`` or an
    environment variable) or its adapter's static ``headers`` carry one. A keyless source is
    used only when its ``base_url`` is local (:func:`is_local_url`): a household that never set a
    key for a cloud API never sends it a request.
    """
    if src.api_key or is_local_url(src.base_url):
        return ""
    if any(k.lower() in _AUTH_HEADERS and v.strip() for k, v in (headers or {}).items()):
        return ""
    return (
        f"no API key for {src.base_url}, so it is never asked; set core.llm.sources.{src.name}.api_key "
        "(or core.llm.api_key, or export HOMEAGENT_LLM_API_KEY); a keyless server belongs on this machine "
        "or the local network"
    )


class ConfigLike(Protocol):
    """What :meth:`ProviderManager.from_config` needs from ``homeagent_core.config``."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def items(self, prefix: str = "") -> dict[str, Any]: ...

    def on_change(self, callback: Callable[[str], None]) -> Callable[[], None]: ...


@dataclass
class _State:
    config: SourceConfig
    provider: LuaAdaptedProvider | None = None
    fails: int = 0
    cooldown_until: float = 0.0
    disabled: str = ""
    last_error: str = ""


def sources_from_config(cfg: ConfigLike) -> tuple[list[SourceConfig], str]:
    """Read sources (and the default source name) from config, with legacy single-source keys
    and the API-key fallbacks (``core.llm.api_key``, then environment variables)."""
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in cfg.items(_PREFIX).items():
        rest = key[len(_PREFIX):]
        name, _, attr = rest.rpartition(".")
        if name and attr:
            grouped.setdefault(name, {})[attr] = value
    default = str(cfg.get("core.llm.provider") or "").strip()
    if not grouped and cfg.get("core.llm.base_url"):
        legacy = default or "default"
        grouped[legacy] = {k: cfg.get(f"core.llm.{k}") for k in
                           ("base_url", "model", "api_key", "adapter", "thinking_enabled")}
        grouped[legacy].setdefault("adapter", legacy)
    shared_key = str(cfg.get("core.llm.api_key") or "").strip()
    if not shared_key:
        shared_key = next((os.environ[e] for e in _KEY_ENV if os.environ.get(e)), "")
    out = []
    for name, values in sorted(grouped.items()):
        src = SourceConfig.from_mapping(name, values)
        if not src.api_key:
            src.api_key = shared_key
        out.append(src)
    return out, default


class ProviderManager:
    """Fallback across configured sources; implements the ChatProvider protocol."""

    name = "manager"

    def __init__(
        self,
        sources: Iterable[SourceConfig],
        *,
        default: str = "",
        data_dir: Path | str | None = None,
        adapter_dirs: Iterable[Path | str] = (),
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 180.0,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.adapter_dirs = [Path(d) for d in adapter_dirs]
        self._client = client
        self._own_client = client is None
        self._clock = clock
        self._timeout_s = timeout_s
        self._states: dict[str, _State] = {}
        self._scripts: dict[str, AdapterScript] = {}
        self.default = default
        self._cfg: ConfigLike | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._dirty = False
        #: The source that answered most recently ("" until one has).
        self.last_answered = ""
        self._apply(list(sources))

    # ------------------------------------------------------------------ configuration

    @classmethod
    def from_config(cls, cfg: ConfigLike, data_dir: Path | str | None = None,
                    **kwargs: Any) -> ProviderManager:
        """Build from ``core.llm.*`` config and reload whenever a ``core.llm.`` key changes."""
        sources, default = sources_from_config(cfg)
        mgr = cls(sources, default=default, data_dir=data_dir, **kwargs)
        mgr._cfg = cfg
        mgr._unsubscribe = cfg.on_change(mgr._on_config_change)
        return mgr

    def _on_config_change(self, key: str) -> None:
        if key.startswith("core.llm."):
            self._dirty = True  # applied at the next call, on the loop's thread

    def reload(self) -> None:
        """Re-read sources from config (when built with :meth:`from_config`)."""
        self._dirty = False
        if self._cfg is None:
            return
        sources, default = sources_from_config(self._cfg)
        self.default = default or self.default
        self._apply(sources)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(follow_redirects=False)
        return self._client

    def _script(self, src: SourceConfig) -> AdapterScript:
        from homeagent_core.providers.adapter import load_adapter
        from homeagent_core.providers.deploy import resolve_adapter

        path = resolve_adapter(src.adapter, adapter_path=src.adapter_path,
                               data_dir=self.data_dir, extra_dirs=self.adapter_dirs)
        if path is None and src.adapter_path:
            raise ProviderError(
                f"adapter_path {src.adapter_path!r} is not a file (a relative path is tried under "
                f"{self.data_dir or '<data>'} first, then the working directory)",
                source=src.name, adapter=src.adapter, kind="config")
        if path is None:
            raise ProviderError(f"no adapter file for {src.adapter!r}", source=src.name,
                                adapter=src.adapter, kind="config")
        key = str(path.resolve())
        stamp = f"{key}:{path.stat().st_mtime_ns}"
        script = self._scripts.get(stamp)
        if script is None:
            script = self._scripts[stamp] = load_adapter(path)
        return script

    def _apply(self, sources: list[SourceConfig]) -> None:
        from homeagent_core.providers.adapter import LuaAdaptedProvider

        old = self._states
        self._states = {}
        for src in sources:
            prev = old.get(src.name)
            st = _State(config=src)
            if prev is not None and prev.config.fingerprint() == src.fingerprint():
                st.fails, st.cooldown_until = prev.fails, prev.cooldown_until
                st.disabled, st.last_error = prev.disabled, prev.last_error
            problem = src.problem()
            if problem:
                st.disabled = f"invalid config: {problem}"
            else:
                try:
                    script = self._script(src)
                except ProviderError as exc:
                    st.disabled = f"adapter unusable: {exc.reason}"
                else:
                    missing = missing_credentials(src, script.headers)
                    if missing:
                        st.disabled = missing
                    else:
                        st.provider = LuaAdaptedProvider(
                            src.name, script, base_url=src.base_url, api_key=src.api_key,
                            model=src.model, client=self._http(),
                            max_concurrent=src.max_concurrent, timeout_s=self._timeout_s,
                            thinking_enabled=src.thinking_enabled)
            if st.disabled.startswith("no API key"):
                _log.info("LLM source %r not used: %s", src.name, st.disabled)
            elif st.disabled and not st.disabled.startswith("auth"):
                _log.warning("LLM source %r disabled: %s", src.name, st.disabled)
            self._states[src.name] = st
        if self.default not in self._states:
            self.default = next((n for n, s in self._states.items() if not s.disabled), "")

    # ------------------------------------------------------------------ ordering and state

    def candidates(self, model: str = "") -> list[LuaAdaptedProvider]:
        """Usable providers in the order they will be tried."""
        if self._dirty:
            self.reload()
        now = self._clock()
        usable = [s for s in self._states.values() if s.provider is not None and not s.disabled]
        usable.sort(key=lambda s: (
            0 if model and model != "AUTO" and s.config.model == model else 1,
            -s.config.priority,
            0 if s.cooldown_until <= now else 1,
            0 if s.config.name == self.default else 1,
            s.config.name))
        ready = [s for s in usable if s.cooldown_until <= now]
        chosen = ready or usable
        return [s.provider for s in chosen if s.provider is not None]

    def _mark_ok(self, name: str) -> None:
        self.last_answered = name
        st = self._states.get(name)
        if st is not None:
            st.fails, st.cooldown_until = 0, 0.0

    def _mark_failed(self, name: str, exc: ProviderError) -> None:
        st = self._states.get(name)
        if st is None:
            return
        st.last_error = str(exc)
        if exc.kind == "auth":
            st.disabled = f"auth failed (HTTP {exc.status}); fix the api_key to re-enable"
            _log.warning("LLM source %r disabled: %s", name, exc.reason)
            return
        st.fails += 1
        st.cooldown_until = self._clock() + cooldown_seconds(st.fails)
        _log.warning("LLM source %r failed (%s); cooling down %.0f s", name, exc,
                     cooldown_seconds(st.fails))

    def list_sources(self) -> list[dict[str, Any]]:
        """Plain facts per source (never the api_key)."""
        now = self._clock()
        out = []
        for name, st in sorted(self._states.items()):
            c = st.config
            out.append({
                "name": name, "model": c.model, "adapter": c.adapter, "base_url": c.base_url,
                "priority": c.priority, "max_concurrent": c.max_concurrent,
                "vision": c.vision, "audio": c.audio, "default": name == self.default,
                "available": bool(st.provider) and not st.disabled and st.cooldown_until <= now,
                "cooldown_until": st.cooldown_until if st.cooldown_until > now else None,
                "fails": st.fails, "disabled": st.disabled or None,
                "last_error": st.last_error or None,
                "has_api_key": bool(c.api_key)})
        return out

    def active_source(self) -> tuple[str, str, bool]:
        """``(source, model, answered)``: the source that last answered, else the next one to be tried."""
        st = self._states.get(self.last_answered)
        if st is not None and st.provider is not None and not st.disabled:
            return st.config.name, st.config.model, True
        first = next(iter(self.candidates()), None)
        st = self._states.get(first.name) if first is not None else None
        return (st.config.name, st.config.model, False) if st is not None else ("", "", False)

    def modalities(self) -> frozenset[str]:
        """What the source a request goes to first takes besides text (``image``, ``audio``)."""
        first = next(iter(self.candidates()), None)
        st = self._states.get(first.name) if first is not None else None
        if st is None:
            return frozenset()
        c = st.config
        return frozenset(m for m, on in (("image", c.vision), ("audio", c.audio)) if on)

    def source(self, name: str) -> tuple[SourceConfig, LuaAdaptedProvider]:
        """The config and provider of one named source (for fallback vision/audio calls).

        Raises:
            ProviderError: unknown or disabled source, with the reason.
        """
        if self._dirty:
            self.reload()
        st = self._states.get(name)
        if st is None:
            raise ProviderError(f"unknown source {name!r}; known: {sorted(self._states)}", kind="config")
        if st.provider is None or st.disabled:
            raise ProviderError(f"source {name!r} is disabled: {st.disabled}", source=name, kind="config")
        return st.config, st.provider

    def set_source(self, name: str) -> None:
        """Make ``name`` the default source.

        Raises:
            ProviderError: no such source.
        """
        if name not in self._states:
            raise ProviderError(f"unknown source {name!r}; known: {sorted(self._states)}",
                                kind="config")
        self.default = name

    # ------------------------------------------------------------------ calls

    def _exhausted(self, errors: list[str]) -> ProviderError:
        if not errors:
            known = ", ".join(f"{n} ({s.disabled})" for n, s in self._states.items()) or "none"
            return ProviderError(f"no usable LLM source; configured: {known}", kind="exhausted")
        return ProviderError("every LLM source failed: " + "; ".join(errors), kind="exhausted")

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Non-streaming call with fallback across sources.

        Raises:
            ProviderError: every candidate failed (kind ``"exhausted"``; lists each reason).
        """
        return await self._chat_over(self.candidates(str(request.get("model") or "")),
                                     request)

    async def _chat_over(self, providers: list[LuaAdaptedProvider],
                         request: dict[str, Any]) -> dict[str, Any]:
        errors: list[str] = []
        for p in providers:
            try:
                resp = await p.chat(request)
            except ProviderError as exc:
                self._mark_failed(p.name, exc)
                errors.append(str(exc))
                continue
            self._mark_ok(p.name)
            return resp
        raise self._exhausted(errors)

    async def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Streaming call with fallback; see the module docstring for the reset rule.

        Raises:
            ProviderError: every stream and every non-stream fallback failed.
        """
        providers = self.candidates(str(request.get("model") or ""))
        if not providers:
            raise self._exhausted([])
        tried: list[LuaAdaptedProvider] = []
        for p in providers:
            yielded = False
            stream = cast(AsyncGenerator[dict[str, Any], None], p.chat_stream(request))
            try:
                async for chunk in stream:
                    if not yielded:  # the consumer may stop reading at the last chunk, before _mark_ok
                        yielded, self.last_answered = True, p.name
                    yield chunk
                self._mark_ok(p.name)
                return
            except ProviderError as exc:
                self._mark_failed(p.name, exc)
                tried.append(p)
                if yielded:
                    break
            finally:
                with contextlib.suppress(RuntimeError):
                    await stream.aclose()
        # Non-stream fallback: untried healthy sources first, then the ones whose stream failed
        # (a gateway may fail streaming yet answer plainly); sources disabled by auth are out.
        rest = [p for p in self.candidates(str(request.get("model") or "")) if p not in tried]
        again = [p for p in tried if not self._states[p.name].disabled]
        yield {"content": "", "reset": True, "done": False}
        resp = await self._chat_over(rest + again, request)
        last: dict[str, Any] = {"content": resp.get("content", ""), "done": False}
        if resp.get("reasoning_content"):
            last["reasoning_content"] = resp["reasoning_content"]
        if resp.get("tool_calls"):
            last["tool_calls"] = [
                {"id": tc["id"], "type": "function", "name": tc["name"],
                 "arguments": tc["arguments"], "stream_index": i,
                 "raw_arguments": orjson.dumps(tc["arguments"]).decode()}
                for i, tc in enumerate(resp["tool_calls"])]
        yield last
        yield {"content": "", "done": True, "finish_reason": resp.get("finish_reason") or "stop",
               "usage": resp.get("token_usage") or {}}

    async def quick_chat(self, prompt: str, *, max_tokens: int = 128) -> str:
        """One user message, no memory, ``max_tokens`` 128 — for health checks.

        Raises:
            ProviderError: every source failed.
        """
        resp = await self.chat({"model": "", "messages": [{"role": "user", "content": prompt}],
                                "max_tokens": max_tokens, "stream": False})
        return str(resp.get("content") or "")

    async def aclose(self) -> None:
        """Stop listening to config and close the shared HTTP client (if owned)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None
