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


_RANK = {"user": 0, "modified": 0, "deployed": 1, "plugin": 2, "bundled": 3}


def _files(data_dir: Path | str | None, extra_dirs: Iterable[Path | str]) -> list[tuple[Path, str]]:
    """Every adapter file with its origin, in folder order (``<data>/adapters``, plugins, bundled)."""
    bundled = {p.name: _sha(p.read_bytes()) for p in bundled_adapters_dir().glob("*.lua")}
    manifest = _read_manifest(Path(data_dir) / "adapters" / MANIFEST_NAME) if data_dir is not None else {}
    out: list[tuple[Path, str]] = []
    for kind, folder in _dirs(data_dir, extra_dirs):
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.lua")):
            if kind == "data" and f.name in bundled:
                digest = _sha(f.read_bytes())
                origin = "deployed" if digest in (bundled[f.name], manifest.get(f.name)) else "modified"
            else:
                origin = "user" if kind == "data" else kind
            out.append((f, origin))
    return out


def _ranked(files: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """Lookup order: the user's own and edited files in ``<data>/adapters``, then the deployed
    bundled copies there, plugin folders, bundled files (stable within each group)."""
    return sorted(files, key=lambda fo: _RANK[fo[1]])


_NAMES: dict[tuple[str, int, int], str] = {}


def _registry_key(path: Path) -> str:
    """The adapter's registry key: the ``name`` its table declares, else the file name.

    A file that does not compile keys by its file name (using it reports the error). Cached by
    path, size and modification time.
    """
    from homeagent_core.providers.adapter import load_adapter
    from homeagent_core.providers.errors import ProviderError

    st = path.stat()
    stamp = (str(path), st.st_mtime_ns, st.st_size)
    name = _NAMES.get(stamp)
    if name is None:
        try:
            name = load_adapter(path).name
        except ProviderError:
            name = path.stem
        _NAMES[stamp] = name
    return name


def resolve_adapter(
    adapter: str,
    *,
    adapter_path: str = "",
    data_dir: Path | str | None = None,
    extra_dirs: Iterable[Path | str] = (),
) -> Path | None:
    """File for an adapter name: explicit path, else the first file whose registry key (the
    ``name`` it declares, else its file name) is the name or its alias, looked up in
    ``<data>/adapters`` (the user's own and edited files before the deployed bundled copies),
    plugin folders, bundled. Relative ``adapter_path`` values are tried against the data dir first."""
    if adapter_path:
        p = Path(adapter_path).expanduser()
        candidates = [p] if p.is_absolute() else [
            *([Path(data_dir) / p] if data_dir is not None else []), p]
        for c in candidates:
            if c.is_file():
                return c
    wanted = {adapter, ADAPTER_ALIASES.get(adapter, adapter)}
    quoted = [f'{q}{w}{q}' for w in wanted for q in "\"'"]
    for f, _ in _ranked(_files(data_dir, extra_dirs)):
        if f.stem not in wanted:
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if not any(q in text for q in quoted):
                continue  # cannot declare the name: skip compiling it
        if _registry_key(f) in wanted:
            return f
    return None


def list_adapters(
    data_dir: Path | str | None = None,
    extra_dirs: Iterable[Path | str] = (),
    *,
    compile_check: bool = True,
) -> list[dict[str, Any]]:
    """Every adapter file that can be used, as plain dicts for ``adapters list`` / ``doctor``.

    Keys: ``name`` (the registry key: the ``name`` the script declares, else its file name),
    ``version``, ``path``, ``origin`` (``bundled``, ``deployed`` = unmodified bundled copy,
    ``modified`` = a bundled copy the user edited, ``user``, ``plugin``), ``status`` (``ok`` or
    ``error``), ``error`` (message or ``""``), ``active`` (whether :func:`resolve_adapter` picks
    this file for its name; False when another file with the same name comes first in the
    lookup order). Without ``compile_check`` names are file names.
    """
    from homeagent_core.providers.adapter import load_adapter
    from homeagent_core.providers.errors import ProviderError

    files = _files(data_dir, extra_dirs)
    rows: dict[Path, dict[str, Any]] = {}
    for f, origin in files:
        row: dict[str, Any] = {"name": f.stem, "version": "", "path": str(f),
                               "origin": origin, "status": "ok", "error": ""}
        if compile_check:
            try:
                script = load_adapter(f)
            except ProviderError as exc:
                row["status"], row["error"] = "error", str(exc)
            else:
                row["name"], row["version"] = script.name, script.version
        rows[f] = row
    seen: set[str] = set()
    for f, _ in _ranked(files):
        rows[f]["active"] = rows[f]["name"] not in seen
        seen.add(rows[f]["name"])
    return [rows[f] for f, _ in files]
