"""Project operations behind the ``hmapdev`` commands: templates, build, pack.

A project folder holds ``plugin.json`` (the manifest that ships) plus sources: ``src/`` with
``__main__.py`` for a proc plugin (zipped into ``plugin.pyz``), ``main.lua`` for Lua, ``SKILL.md``
for a skill. Dependencies listed in ``requirements.txt`` are vendored into ``plugin.pyz``.
When every line pins a version (``name==1.2.3``, the dependencies of dependencies included), the
build is reproducible and independent of the building environment: each pinned wheel is
installed with ``pip install --no-deps --only-binary=:all: --target`` into a clean folder (from
the index pip is configured with: ``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``pip.conf``). Otherwise
the named distributions and their requirements are copied from those installed in the building
environment. Either way a distribution with compiled files cannot be vendored and is refused by
name, and ``homeagent`` itself is never vendored: a ``.pyz`` runs with the daemon's interpreter,
whose SDK matches the daemon's protocol. The ``.pyz`` is written with sorted entries and fixed
timestamps, so the same inputs give the same bytes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from homeagent_sdk._atomic import atomic_file
from homeagent_sdk.errors import HomeAgentError

__all__ = ["BuildError", "build_project", "pack_project", "read_project", "render_template"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_COMPILED = (".so", ".pyd", ".dylib", ".dll")
_PROVIDED = {"homeagent", "homeagent-sdk", "pluggy"}
_EXTRA_FILES = ("README.md", "LICENSE")


class BuildError(HomeAgentError):
    """A build step failed; the message says which and how to fix it."""


def render_template(kind: str, name: str, target: Path) -> None:
    """Copy the ``kind`` template into ``target`` with the name filled in.

    Raises:
        BuildError: invalid name, unknown kind, or ``target`` exists.
    """
    if not NAME_RE.match(name):
        raise BuildError(f"invalid plugin name {name!r}: start with a letter, then letters, digits, '_' or '-'")
    source = TEMPLATES / kind
    if not source.is_dir():
        raise BuildError(f"no template for kind {kind!r}")
    if target.exists():
        raise BuildError(f"{target} already exists; choose another name or remove it")
    ident = name.replace("-", "_")
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        rel = str(path.relative_to(source)).replace("__ident__", ident)
        dest = target / rel
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8").replace("__ident__", ident).replace("__plugin_name__", name)
        dest.write_text(text, encoding="utf-8")


def read_project(project: Path) -> dict[str, Any]:
    """The project's ``plugin.json``, validated like the installer does.

    Raises:
        BuildError: missing or invalid.
    """
    from homeagent_core.plugins.packages import PackageError, decode_manifest, parse_manifest

    path = project / "plugin.json"
    if not path.is_file():
        raise BuildError(f"{path} not found: run hmapdev inside a project created by `hmapdev new`, or pass -C DIR")
    try:
        data = decode_manifest(path.read_bytes(), str(path))
        parse_manifest(data, str(path))
    except PackageError as exc:
        raise BuildError(str(exc)) from None
    return dict(data)


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
#: Zip entry time of every file in a built ``.pyz`` (the earliest a zip can say).
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _requirement_lines(project: Path) -> list[str]:
    path = project / "requirements.txt"
    if not path.is_file():
        return []
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def _requirements(project: Path) -> list[str]:
    return [re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0] for line in _requirement_lines(project)]


def _pins(lines: list[str]) -> list[str] | None:
    """``name==version`` for each line when every line pins exactly one version, else None."""
    pins = []
    for line in lines:
        match = _PIN.match(line)
        if match is None:
            return None
        if _canonical(match.group(1)) not in _PROVIDED:
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


def _install_pinned(pins: list[str], dest: Path, work: Path) -> list[str]:
    """Install each pinned wheel, without its dependencies, into a clean folder; copy it to ``dest``."""
    if not pins:
        return []
    target = work / "deps"
    if target.exists():
        shutil.rmtree(target)
    command = [
        sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary=:all:", "--no-compile",
        "--disable-pip-version-check", "--no-input", "--target", str(target), *pins,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-4:])
        raise BuildError(
            f"pip could not install the pinned requirements ({', '.join(pins)}): {tail}\n"
            "Check the versions in requirements.txt and the index pip uses (PIP_INDEX_URL / PIP_FIND_LINKS); "
            "only wheels are used"
        )
    vendored = []
    for info in sorted(target.glob("*.dist-info")):
        meta = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
        name = re.search(r"^Name: *(.+)$", meta, re.M)
        version = re.search(r"^Version: *(.+)$", meta, re.M)
        record = (info / "RECORD").read_text(encoding="utf-8") if (info / "RECORD").is_file() else ""
        compiled = [row.split(",", 1)[0] for row in record.splitlines() if row.split(",", 1)[0].endswith(_COMPILED)]
        label = name.group(1).strip() if name else info.name
        if compiled:
            raise BuildError(
                f"dependency {label} has compiled files ({', '.join(compiled[:3])}) and cannot be "
                "vendored into plugin.pyz; drop it, use a pure-Python alternative, or ship a plugin.bin"
            )
        vendored.append(f"{label}=={version.group(1).strip() if version else '?'}")
    for path in sorted(target.rglob("*")):
        parts = path.relative_to(target).parts
        if not path.is_file() or parts[0].endswith((".dist-info", ".egg-info")) or parts[0] == "bin":
            continue
        if "__pycache__" in parts:
            continue
        out = dest.joinpath(*parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out)
    shutil.rmtree(target)
    return vendored


def _write_pyz(staging: Path, target: Path) -> None:
    """Zip ``staging`` into ``target``: sorted entries, fixed times and modes (reproducible)."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(staging).as_posix(), date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _vendor(names: list[str], dest: Path) -> list[str]:
    """Copy installed pure-Python distributions (and their requirements) into ``dest``."""
    done: set[str] = set()
    todo = list(names)
    vendored: list[str] = []
    while todo:
        name = _canonical(todo.pop())
        if name in done or name in _PROVIDED:
            continue
        done.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise BuildError(
                f"dependency {name} is not installed in this environment; `pip install {name}` first "
                "(hmapdev vendors what is installed)"
            ) from None
        files = [f for f in dist.files or [] if not str(f).startswith("..")]
        compiled = [str(f) for f in files if str(f).endswith(_COMPILED)]
        if compiled:
            raise BuildError(
                f"dependency {dist.metadata['Name']} has compiled files ({', '.join(compiled[:3])}) and cannot be "
                "vendored into plugin.pyz; drop it, use a pure-Python alternative, or ship a plugin.bin"
            )
        for f in files:
            parts = Path(str(f)).parts
            if not parts or parts[0].endswith((".dist-info", ".egg-info")) or "__pycache__" in parts:
                continue
            src = Path(str(dist.locate_file(f)))
            if src.is_file():
                out = dest / str(f)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out)
        vendored.append(f"{dist.metadata['Name']}=={dist.version}")
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[<>=!~;\[ (]", req, maxsplit=1)[0])
    return vendored


#: Folders a Lua plugin or a skill carries next to its entry.
_RESOURCE_DIRS = ("thirdpart", "scripts", "references", "assets", "lib")


def build_project(project: Path) -> Path:
    """Build into ``<project>/build/``; returns the built entry.

    Raises:
        BuildError: the project is invalid or a step failed.
    """
    manifest = read_project(project)
    entry = str(manifest["entry"])
    out = project / "build"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    if entry == "plugin.pyz":
        src = project / "src"
        if not (src / "__main__.py").is_file():
            raise BuildError(
                f"{src / '__main__.py'} not found: a proc plugin's src/ needs a __main__.py that calls serve()"
            )
        staging = out / "pyz"
        shutil.copytree(src, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        pins = _pins(_requirement_lines(project))  # all pinned: a clean, reproducible install
        vendored = _vendor(_requirements(project), staging) if pins is None else _install_pinned(pins, staging, out)
        target = out / "plugin.pyz"
        _write_pyz(staging, target)
        shutil.rmtree(staging)
        (out / "vendored.txt").write_text("\n".join(vendored) + ("\n" if vendored else ""), encoding="utf-8")
        return target
    if entry.endswith(".lua") or entry == "SKILL.md":
        source = project / entry
        if not source.is_file():
            raise BuildError(f"{source} not found: plugin.json names it as the entry")
        shutil.copy2(source, out / entry)
        # Skills and Lua plugins ship their resource folders (Agent Skills layout) as they are.
        for folder in _RESOURCE_DIRS:
            if (project / folder).is_dir():
                shutil.copytree(project / folder, out / folder,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if (project / "skill.json").is_file():
            shutil.copy2(project / "skill.json", out / "skill.json")
        return out / entry
    if entry == "plugin.bin":
        binary = project / "plugin.bin"
        if not binary.is_file():
            raise BuildError(f"{binary} not found: build your executable there first (any language)")
        shutil.copy2(binary, out / "plugin.bin")
        (out / "plugin.bin").chmod(0o755)
        return out / "plugin.bin"
    raise BuildError(f"entry {entry!r} cannot be built: use plugin.pyz, plugin.bin, main.lua or SKILL.md")


def pack_project(project: Path) -> Path:
    """Build if needed, then write ``dist/<name>-<version>.hmap`` and validate it.

    Raises:
        BuildError: build or validation failed.
    """
    from homeagent_core.plugins.packages import CHECKSUMS, PackageError, validate_package

    manifest = read_project(project)
    entry = manifest["entry"]
    built = project / "build" / entry
    if not built.is_file():
        built = build_project(project)
    files: dict[str, Path] = {"plugin.json": project / "plugin.json", entry: built}
    for extra in _EXTRA_FILES:
        if (project / extra).is_file():
            files[extra] = project / extra
    build = project / "build"
    for folder in ("skill.json", *_RESOURCE_DIRS):
        base = build / folder
        if base.is_file():
            files[folder] = base
        elif base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file():
                    files[str(path.relative_to(build))] = path
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {arc}\n" for arc, p in files.items())
    dist = project / "dist"
    dist.mkdir(exist_ok=True)
    target = dist / f"{manifest['name']}-{manifest['version']}.hmap"
    tmp = target.with_suffix(".hmap.tmp")
    try:
        with atomic_file(target, mode=0o644, tmp=tmp) as out:
            with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for arc, path in files.items():
                    info = zipfile.ZipInfo.from_file(path, arc)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    with path.open("rb") as fh:
                        zf.writestr(info, fh.read())
                zf.writestr(CHECKSUMS, sums)
            out.flush()
            validate_package(tmp)
    except PackageError as exc:
        raise BuildError(f"the package failed validation: {exc}") from None
    return target
