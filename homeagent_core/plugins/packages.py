"""``.hmap`` packages and plugin manifests: validate, install, upgrade, remove.

A ``.hmap`` is a ZIP with ``plugin.json`` at its root plus the entry it names (``plugin.bin``,
``plugin.pyz``, bundle entries ``plugin.bin.<os>.<arch>``, ``main.lua`` or ``SKILL.md``),
optionally README.md, LICENSE, ``thirdpart/`` and ``checksums.sha256`` (``sha256sum`` format,
verified when present). Installation refuses, with a :class:`PackageError` naming the problem:
packages over 100 MB, archives that are not ZIPs, more than 4096 entries, member paths that are
absolute or climb out with ``..``, symbolic links and other special files, duplicate members,
encrypted members or compression other than stored/deflate, more than 1 GiB unpacked (counted
on the inflated bytes, not the headers), a member inflating over 200 times its compressed size,
a ``plugin.json`` over 256 KB, nested over 32 levels, not UTF-8 or not JSON, a
``checksums.sha256`` over 1 MB or not UTF-8, a manifest without ``name``/``version``/``entry``,
and a missing entry (the archive rules live in :mod:`homeagent_core.plugins.archive`). It
extracts into a staging directory next to the target and swaps it in with renames, so a
failure at any step leaves the previous version (or nothing) behind. Upgrades keep the
plugin's settings; removal deletes them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from homeagent_core.plugins.archive import (
    ArchiveError,
    Budget,
    check_members,
    copy_member,
    member_path,
    open_zip,
    read_member,
)
from homeagent_sdk.errors import PluginError

if TYPE_CHECKING:
    from homeagent_core.config import ConfigStore

__all__ = [
    "CAPABILITIES",
    "MAX_PACKAGE_BYTES",
    "Manifest",
    "PackageError",
    "PackageExistsError",
    "compare_versions",
    "download",
    "install_package",
    "installed_plugins",
    "load_manifest",
    "parse_manifest",
    "plugin_details",
    "remove_plugin",
    "set_plugin_enabled",
    "validate_package",
]

MAX_PACKAGE_BYTES = 100 * 1024 * 1024
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
MAX_MANIFEST_BYTES = 256 * 1024
"""Largest ``plugin.json`` accepted (a manifest is a few hundred bytes)."""
MAX_CHECKSUMS_BYTES = 1024 * 1024
"""Largest ``checksums.sha256`` accepted."""
MAX_MANIFEST_DEPTH = 32
"""Deepest nesting of objects/arrays accepted in ``plugin.json``."""
#: Capability groups an out-of-process plugin may declare; it gets exactly those (none when
#: it declares none). ``secrets`` reveals secret settings (API keys) and lets a plugin change
#: where they are sent; see docs/PROTOCOL.md.
CAPABILITIES: tuple[str, ...] = (
    "doc_memory",
    "events",
    "io",
    "knowledge",
    "llm",
    "memory",
    "plugin_mgr",
    "secrets",
    "settings_cross",
    "social",
    "text_memory",
)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
PROC_ENTRIES = ("plugin.bin", "plugin.pyz")
CHECKSUMS = "checksums.sha256"
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class PackageError(PluginError):
    """A package or manifest was refused; ``to_dict()`` is the installer's JSON answer."""

    def __init__(self, message: str, *, plugin_name: str | None = None, result: dict[str, Any] | None = None) -> None:
        super().__init__(message, plugin_name=plugin_name)
        self.result = result or {"error": "invalid package", "details": message}

    def to_dict(self) -> dict[str, Any]:
        return dict(self.result)


class PackageExistsError(PackageError):
    """The plugin is installed already and the caller did not ask to overwrite it."""


@dataclass
class Manifest:
    """A validated ``plugin.json``; unknown keys stay in ``raw``."""

    name: str
    version: str
    entry: str
    description: str = ""
    author: str = ""
    license: str = ""
    homepage: str = ""
    repository: str = ""
    min_version: str = ""
    tags: list[str] = field(default_factory=list)
    deprecated: bool = False
    capabilities: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``proc``, ``lua``, ``skill`` or ``unknown`` by the entry's name."""
        if self.entry in PROC_ENTRIES or self.entry.startswith("plugin.bin"):
            return "proc"
        if self.entry.endswith(".lua"):
            return "lua"
        if self.entry == "SKILL.md":
            return "skill"
        return "unknown"

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "author": self.author,
            "entry": self.entry,
            "deprecated": self.deprecated,
        }


def parse_manifest(data: Any, where: str = "plugin.json") -> Manifest:
    """Validate a decoded ``plugin.json``.

    Raises:
        PackageError: not an object, a required field missing or empty, an invalid name, an
            unknown capability, or a field of the wrong type.
    """
    if not isinstance(data, dict):
        raise PackageError(f"{where} must be a JSON object, got {type(data).__name__}")
    missing = [k for k in ("name", "version", "entry") if not isinstance(data.get(k), str) or not data.get(k)]
    if missing:
        raise PackageError(
            f"{where} is missing required field(s) {', '.join(missing)}: every plugin.json needs "
            '"name", "version" and "entry" (e.g. "entry": "plugin.pyz")'
        )
    name = data["name"]
    if not NAME_RE.match(name):
        raise PackageError(
            f"{where}: plugin name {name!r} is invalid: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-' "
            "(it becomes a directory name)",
            plugin_name=name,
        )
    entry = data["entry"]
    if "/" in entry or "\\" in entry or entry.startswith("."):
        raise PackageError(f"{where}: entry {entry!r} must be a file name at the package root", plugin_name=name)
    caps = data.get("capabilities") or []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise PackageError(f"{where}: capabilities must be a list of strings", plugin_name=name)
    unknown = sorted(set(caps) - set(CAPABILITIES))
    if unknown:
        raise PackageError(
            f"{where}: unknown capabilit{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)} "
            f"(available: {', '.join(CAPABILITIES)})",
            plugin_name=name,
        )
    for key in ("tags", "platforms"):
        if not isinstance(data.get(key) or [], list):
            raise PackageError(f"{where}: {key} must be a list of strings", plugin_name=name)
    return Manifest(
        name=name,
        version=data["version"],
        entry=entry,
        description=str(data.get("description", "")),
        author=str(data.get("author", "")),
        license=str(data.get("license", "")),
        homepage=str(data.get("homepage", "")),
        repository=str(data.get("repository", "")),
        min_version=str(data.get("min_version", "")),
        tags=[str(t) for t in data.get("tags") or []],
        deprecated=bool(data.get("deprecated", False)),
        capabilities=list(caps),
        platforms=[str(p) for p in data.get("platforms") or []],
        raw=dict(data),
    )


def _depth(value: Any) -> int:
    """Nesting depth of decoded JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_MANIFEST_DEPTH:
                stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def decode_manifest(raw: bytes, where: str = "plugin.json") -> Any:
    """Decode ``plugin.json`` bytes: size-capped, UTF-8, JSON, at most :data:`MAX_MANIFEST_DEPTH` deep.

    Raises:
        PackageError: too large, not UTF-8, not JSON, or nested too deeply.
    """
    if len(raw) > MAX_MANIFEST_BYTES:
        raise PackageError(f"{where} is {len(raw)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PackageError(f"{where} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PackageError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise PackageError(f"{where} nests objects or arrays too deeply (the limit is {MAX_MANIFEST_DEPTH})") from None
    if _depth(data) > MAX_MANIFEST_DEPTH:
        raise PackageError(f"{where} nests objects or arrays too deeply (the limit is {MAX_MANIFEST_DEPTH})")
    return data


def load_manifest(plugin_dir: Path) -> Manifest:
    """Read and validate ``<plugin_dir>/plugin.json``.

    Raises:
        PackageError: the file is missing, is not JSON, or fails :func:`parse_manifest`.
    """
    path = plugin_dir / "plugin.json"
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise PackageError(f"{path} does not exist") from None
    except OSError as exc:
        raise PackageError(f"{path} cannot be read: {exc}") from None
    manifest = parse_manifest(decode_manifest(raw, str(path)), str(path))
    if manifest.name != plugin_dir.name:
        raise PackageError(
            f"{path}: name {manifest.name!r} differs from its directory {plugin_dir.name!r}; "
            "the directory must be named after the plugin",
            plugin_name=manifest.name,
        )
    return manifest


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1: numeric per dot segment, ``v`` prefix ignored, non-numeric = 0, 1.0 == 1.0.0."""

    def parts(v: str) -> list[int]:
        out = []
        for seg in v.strip().lstrip("vV").split("."):
            m = re.match(r"\d+", seg)
            out.append(int(m.group()) if m else 0)
        while out and out[-1] == 0:
            out.pop()
        return out

    pa, pb = parts(a), parts(b)
    return (pa > pb) - (pa < pb)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- validation


def _bundle_entry() -> str:
    system = platform.system().lower()
    return f"plugin.bin.{system}.{_ARCH.get(platform.machine().lower(), platform.machine().lower())}"


@dataclass
class _Checked:
    manifest: Manifest
    members: list[zipfile.ZipInfo]
    entry_member: str


def _open_source(source: Path | bytes | bytearray) -> tuple[BinaryIO, str]:
    if isinstance(source, bytes | bytearray):
        if len(source) > MAX_PACKAGE_BYTES:
            raise PackageError(
                f"package is {len(source) / 1e6:.1f} MB; the limit is {MAX_PACKAGE_BYTES // (1024 * 1024)} MB"
            )
        return io.BytesIO(source), "package"
    path = Path(source)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise PackageError(f"cannot read package {path}: {exc.strerror or exc}") from None
    if size > MAX_PACKAGE_BYTES:
        raise PackageError(
            f"package {path.name} is {size / (1024 * 1024):.1f} MB; the limit is "
            f"{MAX_PACKAGE_BYTES // (1024 * 1024)} MB"
        )
    return path.open("rb"), path.name


def _check(zf: zipfile.ZipFile, label: str) -> _Checked:
    try:
        members = check_members(zf, label, max_total=MAX_UNPACKED_BYTES, target="plugin directory")
    except ArchiveError as exc:
        raise PackageError(str(exc)) from None
    by_name = {member_path(info): info for info in members}
    seen = set(by_name)
    if "plugin.json" not in seen:
        raise PackageError(f"{label}: plugin.json is missing at the package root")
    try:
        raw = read_member(zf, by_name["plugin.json"], label, limit=MAX_MANIFEST_BYTES)
    except ArchiveError as exc:
        raise PackageError(str(exc)) from None
    data = decode_manifest(raw, f"{label}: plugin.json")
    manifest = parse_manifest(data, f"{label}: plugin.json")
    entry = manifest.entry
    if entry == "plugin.bin" and entry not in seen and manifest.platforms:
        wanted = _bundle_entry()
        if wanted not in seen:
            offered = sorted(n for n in seen if n.startswith("plugin.bin."))
            raise PackageError(
                f"{label}: no entry for this platform ({wanted}); the bundle has {', '.join(offered) or 'none'}",
                plugin_name=manifest.name,
            )
        return _Checked(manifest, members, wanted)
    if entry not in seen:
        raise PackageError(
            f"{label}: the entry {entry!r} named in plugin.json is not in the package", plugin_name=manifest.name
        )
    return _Checked(manifest, members, entry)


def validate_package(source: Path | bytes | bytearray) -> Manifest:
    """Run every installer check on a package without installing it; returns its manifest.

    Raises:
        PackageError: the first problem found (the message names it).
    """
    fh, label = _open_source(source)
    with fh, _open_zip(fh, label) as zf:
        return _check(zf, label).manifest


def _open_zip(fh: BinaryIO, label: str) -> zipfile.ZipFile:
    try:
        return open_zip(fh, label)
    except ArchiveError as exc:
        raise PackageError(f"{exc} (.hmap files are ZIPs)") from None


def _extract(zf: zipfile.ZipFile, checked: _Checked, dest: Path, label: str = "package") -> None:
    root = dest.resolve()
    budget = Budget(MAX_UNPACKED_BYTES, MAX_UNPACKED_BYTES)
    for info in checked.members:
        rel = member_path(info)
        if info.is_dir():
            continue
        name = "plugin.bin" if rel == checked.entry_member and rel != checked.manifest.entry else rel
        if rel.startswith("plugin.bin.") and rel != checked.entry_member:
            continue  # other platforms of a bundle
        target = (root / name).resolve()
        if root not in target.parents:
            raise PackageError(f"member {info.filename!r} would be written outside the plugin directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        limit = MAX_CHECKSUMS_BYTES if rel == CHECKSUMS else MAX_UNPACKED_BYTES
        with target.open("wb") as out:
            try:
                copy_member(zf, info, out, label, limit=limit, budget=budget)
            except ArchiveError as exc:
                raise PackageError(str(exc)) from None
        mode = (info.external_attr >> 16) & 0o777
        if name == "plugin.bin" or mode & 0o111:
            target.chmod(0o755)
    sums = root / CHECKSUMS
    if sums.is_file():
        try:
            text = sums.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PackageError(f"{CHECKSUMS} is not UTF-8 text ({exc}); write it with `sha256sum`") from None
        for line in text.splitlines():
            if not line.strip():
                continue
            digest, _, rel = line.strip().partition("  ")
            path = (root / rel.strip()).resolve()
            if root not in path.parents or not path.is_file():
                raise PackageError(f"{CHECKSUMS} lists {rel!r}, which is not in the package")
            if sha256_file(path) != digest.lower():
                raise PackageError(f"checksum mismatch for {rel}: the package is corrupt or was modified")


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def install_package(
    data_dir: Path,
    source: Path | bytes | bytearray,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Validate and install a package into ``<data>/plugins/<name>/``; returns the result dict.

    Settings of an existing plugin are kept on upgrade. Activation is up to the caller
    (reload or restart), hence ``"action": "reload_required"`` for a fresh install.

    Raises:
        PackageError: invalid package (nothing is left behind).
        PackageExistsError: installed already and ``overwrite`` is false.
    """
    plugins_root = Path(data_dir) / "plugins"
    plugins_root.mkdir(parents=True, exist_ok=True)
    fh, label = _open_source(source)
    staging: Path | None = None
    try:
        with fh, _open_zip(fh, label) as zf:
            checked = _check(zf, label)
            manifest = checked.manifest
            target = plugins_root / manifest.name
            previous: Manifest | None = None
            if target.exists():
                try:
                    previous = load_manifest(target)
                except PackageError:
                    previous = None
                if not overwrite:
                    current = previous.version if previous else "unknown"
                    raise PackageExistsError(
                        f"plugin {manifest.name} is already installed (version {current}); remove it first "
                        "or install with overwrite",
                        plugin_name=manifest.name,
                        result={
                            "error": "plugin already exists",
                            "name": manifest.name,
                            "version": manifest.version,
                            "current": current,
                            "hint": "remove it first, or install again with overwrite (--force)",
                            "action": "remove_first",
                        },
                    )
            staging = Path(tempfile.mkdtemp(prefix=f".install-{manifest.name}-", dir=plugins_root))
            try:
                _extract(zf, checked, staging, label)
            except zipfile.BadZipFile as exc:
                raise PackageError(f"{label}: corrupt member: {exc}") from None
            except OSError as exc:
                raise PackageError(f"{label}: extraction failed: {exc}") from None
        entry_path = staging / ("plugin.bin" if manifest.entry.startswith("plugin.bin") else manifest.entry)
        checksum = sha256_file(entry_path)
        if target.exists():
            backup = plugins_root / f".backup-{manifest.name}-{os.getpid()}-{id(staging):x}"
            os.replace(target, backup)
            try:
                os.replace(staging, target)
            except OSError:
                os.replace(backup, target)  # roll back to the previous version
                raise
            staging = None
            _remove_tree(backup)
            action = "upgraded"
            if previous is not None and compare_versions(manifest.version, previous.version) < 0:
                action = "downgraded"
            return {
                "status": "installed",
                "action": action,
                "name": manifest.name,
                "version": manifest.version,
                "entry": manifest.entry,
                "checksum": checksum,
                "previous_version": previous.version if previous else "",
                "config_kept": True,
                "capabilities": sorted(manifest.capabilities),
            }
        os.replace(staging, target)
        staging = None
        return {
            "status": "installed",
            "name": manifest.name,
            "version": manifest.version,
            "entry": manifest.entry,
            "checksum": checksum,
            "action": "reload_required",
            "capabilities": sorted(manifest.capabilities),
        }
    finally:
        if staging is not None:
            _remove_tree(staging)


def remove_plugin(data_dir: Path, name: str, *, config: ConfigStore | None = None) -> dict[str, Any]:
    """Delete ``<data>/plugins/<name>/`` and, with ``config``, the plugin's settings and disabled flag.

    Raises:
        PackageError: no such plugin (or an invalid name).
    """
    if not NAME_RE.match(name):
        raise PackageError(f"invalid plugin name {name!r}", plugin_name=name)
    target = Path(data_dir) / "plugins" / name
    if not target.is_dir():
        raise PackageError(f"plugin {name} is not installed", plugin_name=name, result={"error": "plugin not found"})
    trash = target.with_name(f".remove-{name}-{os.getpid()}")
    os.replace(target, trash)
    _remove_tree(trash)
    if config is not None:
        prefix = f"plugin.{name}."
        for key in list(config.items(prefix)):
            if config.source(key) == "set":
                config.unset(key)
        config.set_plugin_disabled(name, False)
    return {"status": "removed", "name": name, "action": "reload_required"}


def set_plugin_enabled(config: ConfigStore, name: str, enabled: bool) -> None:
    """Persist enable/disable (the ``disabled_plugins`` table the app reads at start)."""
    config.set_plugin_disabled(name, not enabled)


def installed_plugins(data_dir: Path) -> list[dict[str, Any]]:
    """Summaries of every installed plugin; a broken manifest shows up with its error."""
    root = Path(data_dir) / "plugins"
    out: list[dict[str, Any]] = []
    if not root.is_dir():
        return out
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        if not (child / "plugin.json").exists():
            continue
        try:
            out.append(load_manifest(child).summary())
        except PackageError as exc:
            out.append({"name": child.name, "error": str(exc)})
    return out


def plugin_details(data_dir: Path, name: str) -> dict[str, Any]:
    """Everything the manifest says plus the installed files.

    Raises:
        PackageError: no such plugin.
    """
    target = Path(data_dir) / "plugins" / name
    if not NAME_RE.match(name) or not target.is_dir():
        raise PackageError(f"plugin {name} is not installed", plugin_name=name, result={"error": "plugin not found"})
    manifest = load_manifest(target)
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    return {
        "name": manifest.name,
        "version": manifest.version,
        "description": manifest.description,
        "author": manifest.author,
        "license": manifest.license,
        "homepage": manifest.homepage,
        "repository": manifest.repository,
        "entry": manifest.entry,
        "min_version": manifest.min_version,
        "tags": manifest.tags,
        "deprecated": manifest.deprecated,
        "capabilities": manifest.capabilities,
        "files": files,
    }


async def download(url: str, dest_dir: Path, *, timeout: float = 30.0) -> Path:
    """Fetch a package over http(s) (≤ 10 redirects, each http(s), ≤ 100 MB) into ``dest_dir``.

    Raises:
        PackageError: another scheme, a redirect elsewhere, an HTTP error, or too large.
    """
    import httpx

    def check(u: httpx.URL | str) -> None:
        scheme = httpx.URL(str(u)).scheme
        if scheme not in ("http", "https"):
            raise PackageError(f"only http and https package URLs are allowed, got {scheme or 'none'}: {u}")

    async def on_request(request: httpx.Request) -> None:
        check(request.url)

    check(url)
    fd, tmp = tempfile.mkstemp(suffix=".hmap", dir=dest_dir)
    path = Path(tmp)
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True, max_redirects=10, timeout=timeout, event_hooks={"request": [on_request]}
            ) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code >= 400:
                raise PackageError(f"download of {url} failed: HTTP {response.status_code}")
            size = 0
            with os.fdopen(fd, "wb") as out:
                fd = -1
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_PACKAGE_BYTES:
                        raise PackageError(f"package at {url} is larger than {MAX_PACKAGE_BYTES // (1024 * 1024)} MB")
                    out.write(chunk)
    except httpx.HTTPError as exc:
        path.unlink(missing_ok=True)
        raise PackageError(f"download of {url} failed: {exc}") from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        if fd >= 0:
            os.close(fd)
    return path
