"""Bundled adapters: find them, deploy them to ``<data>/adapters/``, list and resolve adapters.

Deployment follows REFERENCE §4.5 (newer logic): a ``.bundled`` manifest holds
``name<TAB>sha256`` of the content last written from the package; a file on disk is replaced
only while it still equals that content, so a user's edit is never overwritten, and repeated
runs are no-ops. Users may drop their own ``*.lua`` files next to the deployed ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from homeagent_sdk._atomic import atomic_write

__all__ = [
    "ADAPTER_ALIASES",
    "MANIFEST_NAME",
    "bundled_adapters_dir",
    "deploy_bundled_adapters",
    "list_adapters",
    "resolve_adapter",
]

MANIFEST_NAME = ".bundled"
ADAPTER_ALIASES = {"kimicode": "kimi", "claude": "anthropic", "google": "gemini",
                   "dashscope": "qwen", "glm": "zhipu"}


def bundled_adapters_dir() -> Path:
    """Folder of the adapters shipped with HomeAgent (wheel first, then the source tree)."""
    from importlib.resources import files

    try:
        packaged = Path(str(files("homeagent_core") / "_bundled_adapters"))
        if packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - namespace oddities
        pass
    return Path(__file__).resolve().parents[2] / "adapters"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_manifest(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return out
    for line in text.splitlines():
        name, sep, digest = line.partition("\t")
        if sep and name and len(digest.strip()) == 64:
            out[name] = digest.strip()
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    atomic_write(path, data)


def deploy_bundled_adapters(data_dir: Path | str,
                            source_dir: Path | None = None) -> list[dict[str, str]]:
    """Write bundled adapters into ``<data_dir>/adapters/`` without clobbering user edits.

    Returns one dict per bundled file: ``name``, ``path`` and ``status`` — ``installed`` (was
    missing), ``updated`` (replaced an unmodified older copy), ``unchanged``, or ``kept``
    (the user changed it; left alone).
    """
    src_dir = source_dir or bundled_adapters_dir()
    dest = Path(data_dir) / "adapters"
    dest.mkdir(parents=True, exist_ok=True)
    manifest_path = dest / MANIFEST_NAME
    manifest = _read_manifest(manifest_path)
    results: list[dict[str, str]] = []
    for src in sorted(src_dir.glob("*.lua")):
        data = src.read_bytes()
        new = _sha(data)
        target = dest / src.name
        name = src.name
        if not target.exists():
            _atomic_write(target, data)
            status = "installed"
        else:
            current = _sha(target.read_bytes())
            if current == new:
                status = "unchanged"
            elif manifest.get(name) == current:
                _atomic_write(target, data)
                status = "updated"
            else:
                status = "kept"
        if status != "kept":
            manifest[name] = new
        results.append({"name": src.stem, "path": str(target), "status": status})
    body = "".join(f"{n}\t{d}\n" for n, d in sorted(manifest.items()))
    if not manifest_path.exists() or manifest_path.read_text(encoding="utf-8") != body:
        _atomic_write(manifest_path, body.encode("utf-8"))
    return results


def _dirs(data_dir: Path | str | None, extra_dirs: Iterable[Path | str]) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    if data_dir is not None:
        out.append(("data", Path(data_dir) / "adapters"))
    out.extend(("plugin", Path(d)) for d in extra_dirs)
    out.append(("bundled", bundled_adapters_dir()))
    return out


def resolve_adapter(
    adapter: str,
    *,
    adapter_path: str = "",
    data_dir: Path | str | None = None,
    extra_dirs: Iterable[Path | str] = (),
) -> Path | None:
    """File for an adapter name: explicit path, then ``<data>/adapters``, plugin folders,
    bundled. Relative ``adapter_path`` values are tried against the data dir first."""
    if adapter_path:
        p = Path(adapter_path).expanduser()
        candidates = [p] if p.is_absolute() else [
            *([Path(data_dir) / p] if data_dir is not None else []), p]
        for c in candidates:
            if c.is_file():
                return c
    name = ADAPTER_ALIASES.get(adapter, adapter)
    for _, folder in _dirs(data_dir, extra_dirs):
        for stem in dict.fromkeys((adapter, name)):
            f = folder / f"{stem}.lua"
            if f.is_file():
                return f
    return None


def list_adapters(
    data_dir: Path | str | None = None,
    extra_dirs: Iterable[Path | str] = (),
    *,
    compile_check: bool = True,
) -> list[dict[str, Any]]:
    """Every adapter file that can be used, as plain dicts for ``adapters list`` / ``doctor``.

    Keys: ``name``, ``version``, ``path``, ``origin`` (``bundled``, ``deployed`` = unmodified
    bundled copy, ``modified`` = a bundled copy the user edited, ``user``, ``plugin``),
    ``status`` (``ok`` or ``error``), ``error`` (message or ``""``), ``active`` (False when a
    same-named file earlier in the search order shadows it).
    """
    from homeagent_core.providers.adapter import load_adapter
    from homeagent_core.providers.errors import ProviderError

    bundled_dir = bundled_adapters_dir()
    bundled = {p.name: _sha(p.read_bytes()) for p in bundled_dir.glob("*.lua")}
    manifest = (_read_manifest(Path(data_dir) / "adapters" / MANIFEST_NAME)
                if data_dir is not None else {})
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for kind, folder in _dirs(data_dir, extra_dirs):
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.lua")):
            if kind == "data" and f.name in bundled:
                digest = _sha(f.read_bytes())
                origin = ("deployed" if digest in (bundled[f.name], manifest.get(f.name))
                          else "modified")
            elif kind == "data":
                origin = "user"
            else:
                origin = kind
            row: dict[str, Any] = {"name": f.stem, "version": "", "path": str(f),
                                   "origin": origin, "status": "ok", "error": ""}
            if compile_check:
                try:
                    script = load_adapter(f)
                except ProviderError as exc:
                    row["status"], row["error"] = "error", str(exc)
                else:
                    row["name"], row["version"] = script.name, script.version
            row["active"] = f.stem not in seen
            seen.add(f.stem)
            rows.append(row)
    return rows
