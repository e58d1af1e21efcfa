"""SKILL.md skills, compatible with the Agent Skills layout (Claude, OpenClaw, nanobot).

A skill is a directory holding ``SKILL.md`` — YAML front matter (``name``, ``description``,
optional ``version``, ``author``, ``license``, ``allowed-tools``, ``metadata``; unknown keys
are kept, not rejected) followed by Markdown instructions — plus optional ``scripts/``,
``references/``, ``assets/`` and ``skill.json``. Skills are found in ``<data>/skills/``,
in ``<data>/plugins/<name>/`` packages whose entry is ``SKILL.md``, and in installed Python
packages (entry-point group ``homeagent.skills``: the value names a package whose folder holds
skill directories).

The system prompt lists enabled skills compactly (:meth:`SkillIndex.prompt_block`); the model
loads one on demand with ``skill_info(name)`` and reads its files with
``skill_file(name, path)`` (path-safe: nothing outside the skill directory). Using a skill
publishes ``skill_detected``. A skill whose front matter is broken is reported with the reason
and skipped; the others still load.

OpenClaw/ClawHub sidecar skills (an executable ``main.py`` / ``main.js`` entry) are not run:
they are reported as unsupported (their ``SKILL.md`` text, when present, still loads).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from homeagent_sdk import ToolRegistryProtocol, hookimpl
from homeagent_sdk.errors import PluginError, ToolError
from homeagent_sdk.types import ToolResult

__all__ = [
    "SKILLS_ENTRYPOINT_GROUP",
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "SkillIndex",
    "SkillProblem",
    "SkillsPlugin",
    "discover_skills",
    "install_skill",
    "parse_skill_md",
    "remove_skill",
]

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
SKILLS_ENTRYPOINT_GROUP = "homeagent.skills"
MAX_SKILL_MD_BYTES = 1024 * 1024
"""Largest SKILL.md read (bigger ones are reported, not loaded)."""
MAX_FILE_BYTES = 256 * 1024
"""Largest file ``skill_file`` returns in one call."""
MAX_PACKAGE_BYTES = 100 * 1024 * 1024
"""Largest unpacked size of a skill archive."""
PROMPT_DESCRIPTION_CHARS = 160
"""Characters of a description shown in the prompt index (the full text is in skill_info)."""

_FENCE = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_SIDECARS = ("main.py", "main.js")


class SkillError(PluginError):
    """A skill could not be parsed, installed, removed or read."""


@dataclass
class SkillProblem:
    """A skill directory that did not load, and why."""

    path: Path
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"path": str(self.path), "error": self.error}


@dataclass
class Skill:
    """One loaded skill."""

    name: str
    description: str
    path: Path
    body: str
    version: str = ""
    author: str = ""
    license: str = ""
    allowed_tools: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True
    origin: str = "data"
    notes: list[str] = field(default_factory=list)

    def files(self, limit: int = 200) -> list[str]:
        """Relative paths of the skill's files (``SKILL.md`` first), at most ``limit``."""
        out: list[str] = []
        root = self.path.resolve()
        for path in sorted(self.path.rglob("*")):
            if len(out) >= limit:
                break
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(self.path).parts):
                with contextlib.suppress(OSError, ValueError):
                    if path.resolve().is_relative_to(root):
                        out.append(path.relative_to(self.path).as_posix())
        if SKILL_FILE in out:
            out.remove(SKILL_FILE)
        return [SKILL_FILE, *out]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "path": str(self.path),
            "version": self.version, "author": self.author, "license": self.license,
            "allowed_tools": list(self.allowed_tools), "metadata": self.metadata, "enabled": self.enabled,
            "origin": self.origin, "notes": list(self.notes),
        }


def parse_skill_md(text: str, *, where: str = SKILL_FILE) -> tuple[dict[str, Any], str]:
    """Split a SKILL.md into (front matter mapping, Markdown body).

    Accepts a UTF-8 BOM, CRLF or CR line endings, leading blank lines and a ``...`` closing
    fence.

    Raises:
        SkillError: no front matter, invalid YAML, or front matter that is not a mapping
            (the message names ``where`` and says how to fix it).
    """
    import yaml

    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").lstrip("\n")
    match = _FENCE.match(text)
    if match is None:
        raise SkillError(f"{where}: no YAML front matter; start the file with '---', then "
                         "'name: ...' and 'description: ...', then '---'")
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillError(f"{where}: front matter is not valid YAML{at}: {problem}; quote values "
                         "that contain ': ' or start with special characters") from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise SkillError(f"{where}: front matter must be a mapping of keys (name: ..., description: ...), "
                         f"got {type(front).__name__}")
    return {str(k): v for k, v in front.items()}, text[match.end():].lstrip("\n")


def _string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def load_skill(directory: Path, *, origin: str = "data") -> Skill:
    """Load the skill in ``directory``.

    Raises:
        SkillError: missing/oversized/non-UTF-8 SKILL.md, broken front matter, or a missing
            or non-string ``description`` / ``name``.
    """
    path = directory / SKILL_FILE
    where = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise SkillError(f"{directory}: no {SKILL_FILE}") from None
    if size > MAX_SKILL_MD_BYTES:
        raise SkillError(f"{where}: {size} bytes is larger than the {MAX_SKILL_MD_BYTES}-byte limit")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{where}: not UTF-8 text ({exc})") from None
    front, body = parse_skill_md(text, where=where)
    manifest: dict[str, Any] = {}
    sidecar = directory / "skill.json"
    if sidecar.is_file():
        try:
            loaded = orjson.loads(sidecar.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise SkillError(f"{sidecar}: not valid JSON: {exc}") from None
        if isinstance(loaded, dict):
            manifest = loaded
    notes: list[str] = []
    name = front.get("name", manifest.get("name"))
    if name is None:
        name = directory.name
        notes.append(f"front matter has no 'name'; using the directory name {name!r}")
    if not isinstance(name, str | int | float) or not str(name).strip():
        raise SkillError(f"{where}: 'name' must be a non-empty string")
    description = front.get("description", manifest.get("description"))
    if description is None:
        raise SkillError(f"{where}: front matter needs a 'description' (what the skill does and when to use it)")
    if not isinstance(description, str | int | float) or not str(description).strip():
        raise SkillError(f"{where}: 'description' must be a non-empty string")
    metadata = front.get("metadata") or {}
    if not isinstance(metadata, dict):
        metadata = {"value": metadata}
    known = {"name", "description", "version", "author", "license", "allowed-tools", "allowed_tools", "metadata"}
    extra = {k: v for k, v in front.items() if k not in known}
    for sidecar_entry in _SIDECARS:
        if (directory / sidecar_entry).is_file():
            notes.append(f"{sidecar_entry} sidecar is not run (out-of-process skill sidecars are not supported); "
                         "only SKILL.md is used")
    enabled = manifest.get("enabled", front.get("enabled", True))
    return Skill(
        name=str(name).strip(),
        description=" ".join(str(description).split()),
        path=directory,
        body=body,
        version=str(front.get("version", manifest.get("version", metadata.get("version", ""))) or ""),
        author=str(front.get("author", manifest.get("author", metadata.get("author", ""))) or ""),
        license=str(front.get("license", "") or ""),
        allowed_tools=_string_list(front.get("allowed-tools", front.get("allowed_tools"))),
        metadata=metadata,
        extra=extra,
        enabled=enabled is not False,
        origin=origin,
        notes=notes,
    )


def package_skill_roots() -> list[tuple[str, Path]]:
    """Folders of skills shipped by installed packages (entry-point group ``homeagent.skills``)."""
    roots: list[tuple[str, Path]] = []
    for ep in importlib.metadata.entry_points(group=SKILLS_ENTRYPOINT_GROUP):
        try:
            spec = importlib.util.find_spec(ep.value)
        except (ImportError, ValueError) as exc:
            log.warning("skills of entry point %s (%s) not found: %s", ep.name, ep.value, exc)
            continue
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for location in locations:
            roots.append((f"package:{ep.dist.name if ep.dist else ep.name}", Path(location)))
    return roots


class SkillIndex:
    """Every skill found in a set of folders, by name.

    :param roots: ``(origin, folder)`` pairs; each subfolder holding ``SKILL.md`` is a skill
        (a folder that itself holds ``SKILL.md`` is one skill). Earlier roots win on a name clash.
    :param disabled: skill names not listed in the prompt nor served.
    """

    def __init__(self, roots: Iterable[tuple[str, Path]], *, disabled: Iterable[str] = ()) -> None:
        self.roots = [(origin, Path(path)) for origin, path in roots]
        self.disabled = {d.casefold() for d in disabled}
        self.skills: dict[str, Skill] = {}
        self.problems: list[SkillProblem] = []
        self.scan()

    def scan(self) -> None:
        """Re-read every root (a rescan after installs or edits)."""
        skills: dict[str, Skill] = {}
        problems: list[SkillProblem] = []
        for origin, root in self.roots:
            if not root.is_dir():
                continue
            candidates = [root] if (root / SKILL_FILE).is_file() else sorted(
                p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
            for directory in candidates:
                if not (directory / SKILL_FILE).is_file():
                    if any((directory / s).is_file() for s in _SIDECARS):
                        problems.append(SkillProblem(directory, "sidecar skill (main.py/main.js) without SKILL.md: "
                                                                "out-of-process skill sidecars are not supported"))
                    continue
                try:
                    skill = load_skill(directory, origin=origin)
                except SkillError as exc:
                    problems.append(SkillProblem(directory, str(exc)))
                    log.warning("skill in %s not loaded: %s", directory, exc)
                    continue
                key = skill.name.casefold()
                if key in skills:
                    problems.append(SkillProblem(directory, f"skill name {skill.name!r} is already used by "
                                                            f"{skills[key].path}; this copy is ignored"))
                    continue
                if key in self.disabled:
                    skill.enabled = False
                skills[key] = skill
        self.skills, self.problems = skills, problems

    def get(self, name: str) -> Skill | None:
        """The enabled skill called ``name`` (case-insensitive), or None."""
        skill = self.skills.get(str(name).strip().casefold())
        return skill if skill is not None and skill.enabled else None

    def enabled(self) -> list[Skill]:
        return [s for s in self.skills.values() if s.enabled]

    def names(self) -> list[str]:
        return [s.name for s in self.enabled()]

    def _require(self, name: str) -> Skill:
        skill = self.get(name)
        if skill is None:
            known = ", ".join(self.names()) or "none"
            raise ToolError(f"unknown skill {name!r}; available skills: {known}")
        return skill

    def info(self, name: str) -> str:
        """The full instructions of a skill, with its metadata and file list.

        Raises:
            ToolError: no enabled skill of that name (the message lists the available ones).
        """
        skill = self._require(name)
        head = [f"# Skill: {skill.name}", f"description: {skill.description}"]
        for label, value in (("version", skill.version), ("author", skill.author), ("license", skill.license)):
            if value:
                head.append(f"{label}: {value}")
        if skill.allowed_tools:
            head.append(f"allowed-tools: {', '.join(skill.allowed_tools)}")
        files = skill.files()
        if len(files) > 1:
            head.append("files (read with skill_file(name, path)): " + ", ".join(files[1:]))
        return "\n".join(head) + "\n\n" + skill.body

    def file(self, name: str, path: str) -> str:
        """The text of one file inside a skill.

        Raises:
            ToolError: unknown skill, a path that leaves the skill directory (absolute,
                ``..``, a link pointing outside), a missing or binary file, or one over
                :data:`MAX_FILE_BYTES`.
        """
        skill = self._require(name)
        raw = str(path or "").replace("\\", "/").strip()
        pure = PurePosixPath(raw)
        if not raw or pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", raw):
            raise ToolError(f"skill_file: path {path!r} is not allowed: give a path relative to the skill "
                            f"folder without '..' (e.g. one of {', '.join(skill.files()[:5])})")
        root = skill.path.resolve()
        target = (skill.path / pure).resolve()
        if not target.is_relative_to(root):
            raise ToolError(f"skill_file: path {path!r} points outside the skill {skill.name!r}; refused")
        if not target.is_file():
            raise ToolError(f"skill_file: {path!r} does not exist in skill {skill.name!r}; files: "
                            f"{', '.join(skill.files()[:20])}")
        size = target.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ToolError(f"skill_file: {path!r} is {size} bytes, over the {MAX_FILE_BYTES}-byte limit")
        data = target.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"skill_file: {path!r} is a binary file ({size} bytes); only text files can be read")
        return data.decode("utf-8", "replace")

    def prompt_block(self, *, description_chars: int = PROMPT_DESCRIPTION_CHARS) -> str:
        """The compact skills index for the system prompt ("" when there are none)."""
        skills = self.enabled()
        if not skills:
            return ""
        lines = ["## 技能 (Skills)",
                 "需要时先调用 skill_info(name) 读取完整说明，再用 skill_file(name, path) 读取其中的文件。"]
        for skill in skills:
            desc = skill.description
            if len(desc) > description_chars:
                desc = desc[: description_chars - 1] + "…"
            lines.append(f"- {skill.name}: {desc}")
        return "\n".join(lines)


def discover_skills(data_dir: Path | str, *, extra_roots: Iterable[Path] = (), packages: bool = True,
                    disabled: Iterable[str] = ()) -> SkillIndex:
    """Index the skills of a data dir: ``<data>/skills/``, skill packages in ``<data>/plugins/``,
    ``extra_roots`` and (with ``packages``) installed packages."""
    data = Path(data_dir)
    roots: list[tuple[str, Path]] = [("data", data / "skills")]
    plugins = data / "plugins"
    if plugins.is_dir():
        for directory in sorted(p for p in plugins.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file()):
            roots.append(("plugin", directory))
    roots += [("extra", Path(p)) for p in extra_roots]
    if packages:
        roots += package_skill_roots()
    return SkillIndex(roots, disabled=disabled)


# --------------------------------------------------------------------------- install / remove

_SAFE_DIR = re.compile(r"[^\w.-]+", re.UNICODE)


def _dir_name(name: str) -> str:
    cleaned = _SAFE_DIR.sub("-", name.strip()).strip(".-")
    if not cleaned:
        raise SkillError(f"skill name {name!r} cannot be used as a folder name")
    return cleaned[:100]


def _extract(archive: Path, into: Path) -> None:
    """Unpack a skill archive with the hostile-archive rules of :mod:`homeagent_core.plugins.archive`."""
    from homeagent_core.plugins.archive import ArchiveError, Budget, check_members, copy_member, member_path, open_zip

    root = into.resolve()
    try:
        with archive.open("rb") as fh, open_zip(fh, str(archive)) as zf:
            budget = Budget(MAX_PACKAGE_BYTES, MAX_PACKAGE_BYTES)
            for info in check_members(zf, str(archive), max_total=MAX_PACKAGE_BYTES, target="skill folder"):
                rel = member_path(info)
                target = (root / rel).resolve()
                if not target.is_relative_to(root):
                    raise SkillError(f"{archive}: entry {info.filename!r} escapes the target folder")
                if info.is_dir() or not rel:
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as out:
                    copy_member(zf, info, out, str(archive), limit=MAX_PACKAGE_BYTES, budget=budget)
    except ArchiveError as exc:
        raise SkillError(f"{exc}; refusing the archive") from None
    except OSError as exc:
        raise SkillError(f"{archive}: cannot unpack: {exc}") from None


def _skill_root(folder: Path) -> Path:
    """The folder holding SKILL.md: ``folder`` itself or its single subfolder."""
    if (folder / SKILL_FILE).is_file():
        return folder
    children = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(children) == 1 and children[0].is_dir() and (children[0] / SKILL_FILE).is_file():
        return children[0]
    raise SkillError(f"no {SKILL_FILE} at the top of the package (or in its single top folder)")


def install_skill(source: Path | str, skills_dir: Path | str, *, overwrite: bool = False) -> Skill:
    """Install a skill from a directory, a ``.zip`` or a ``.hmap`` into ``skills_dir``.

    The skill is validated (front matter parsed) before anything is written; the copy is made
    in a temporary folder next to the target and renamed into place, so a failure leaves the
    previous state untouched.

    Raises:
        SkillError: unreadable source, unsafe archive, broken SKILL.md, or the skill exists
            and ``overwrite`` is false.
    """
    src = Path(source)
    dest_root = Path(skills_dir)
    dest_root.mkdir(parents=True, exist_ok=True)
    if not src.exists():
        raise SkillError(f"{src} does not exist")
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=dest_root))
    try:
        unpacked = staging / "pkg"
        if src.is_dir():
            root = _skill_root(src)
            shutil.copytree(root, unpacked, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        elif src.suffix.lower() in (".zip", ".hmap"):
            unpacked.mkdir()
            _extract(src, unpacked)
            root = _skill_root(unpacked)
            if root != unpacked:
                root.rename(staging / "root")
                shutil.rmtree(unpacked)
                (staging / "root").rename(unpacked)
        else:
            raise SkillError(f"{src}: install a skill from a folder, a .zip or a .hmap file")
        for link in [p for p in unpacked.rglob("*") if p.is_symlink()]:
            if not link.resolve().is_relative_to(unpacked.resolve()):
                raise SkillError(f"{src}: {link.relative_to(unpacked)} links outside the skill; refusing it")
        skill = load_skill(unpacked)
        target = dest_root / _dir_name(skill.name)
        if target.exists():
            if not overwrite:
                raise SkillError(f"skill {skill.name!r} is already installed at {target}; remove it first or "
                                 "install with overwrite (--force)")
            old = staging / "previous"
            target.rename(old)
        unpacked.rename(target)
        return load_skill(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_skill(name: str, skills_dir: Path | str) -> Path:
    """Delete an installed skill by name (or folder name); returns the removed folder.

    Raises:
        SkillError: no skill of that name in ``skills_dir``.
    """
    root = Path(skills_dir)
    index = SkillIndex([("data", root)])
    skill = index.skills.get(name.strip().casefold())
    if skill is None:
        folder = root / name
        if name and "/" not in name and name not in (".", "..") and (folder / SKILL_FILE).is_file():
            target = folder
        else:
            known = ", ".join(s.name for s in index.skills.values()) or "none"
            raise SkillError(f"no installed skill {name!r} in {root}; installed: {known}")
    else:
        target = skill.path
    trash = root / f".remove-{os.getpid()}-{target.name}"
    target.rename(trash)
    shutil.rmtree(trash)
    return target


# --------------------------------------------------------------------------- the plugin


class SkillsPlugin:
    """The plugin serving skills: ``skill_info`` / ``skill_file`` tools and the prompt index.

    :param index: the skills to serve (rescanned by :meth:`reload`).
    """

    name = "skills"

    def __init__(self, index: SkillIndex) -> None:
        self.index = index
        self._events: Any = None
        self.used: dict[str, int] = {}

    def prompt_block(self) -> str:
        """Compact name + description list of enabled skills for the system prompt."""
        return self.index.prompt_block()

    def reload(self) -> None:
        """Rescan the skill folders."""
        self.index.scan()

    def _detected(self, skill: str, via: str, path: str = "") -> None:
        self.used[skill] = self.used.get(skill, 0) + 1
        if self._events is not None:
            data = {"skill": skill, "via": via}
            if path:
                data["path"] = path
            self._events.publish("skill_detected", data)

    def skill_info(self, name: str) -> str | ToolResult:
        """Load the full instructions of a skill listed in the system prompt.

        Args:
            name: the skill's name as listed.
        """
        try:
            text = self.index.info(name)
        except ToolError as exc:
            return ToolResult("", "skill_info", False, str(exc), self.name)
        skill = self.index.get(name)
        assert skill is not None
        self._detected(skill.name, "skill_info")
        return text

    def skill_file(self, name: str, path: str) -> str | ToolResult:
        """Read a file of a skill (scripts, references, assets), by path relative to the skill folder.

        Args:
            name: the skill's name.
            path: e.g. "references/api.md".
        """
        try:
            text = self.index.file(name, path)
        except ToolError as exc:
            return ToolResult("", "skill_file", False, str(exc), self.name)
        skill = self.index.get(name)
        assert skill is not None
        self._detected(skill.name, "skill_file", path)
        return text

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.skill_info, name="skill_info", parallel_safe=True)
        registry.add(self.skill_file, name="skill_file", parallel_safe=True)

    @hookimpl
    def pre_action(self, ctx: Any) -> None:
        """Put the compact skills index into the prompt, right after the system prompt."""
        block = self.prompt_block()
        if not block:
            return
        messages = ctx.context_msgs
        at = 1 if messages and messages[0].get("role") == "system" else 0
        messages.insert(at, {"role": "system", "content": block})

    @hookimpl
    def startup(self, sdk: Any) -> None:
        self._events = getattr(sdk, "events", None)
        for problem in self.index.problems:
            log.warning("skill not loaded: %s: %s", problem.path, problem.error)
