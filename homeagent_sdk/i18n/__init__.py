"""Message catalogues: what HomeAgent says to people, in Chinese and in English.

One mechanism for every place that talks to a person: a JSON catalogue per language
(``<folder>/<lang>.json``, a flat object of ``"key": "text with {named} fields"``). The web UI
loads the very same file the Python side reads (``/i18n/catalogue.js``), so the browser, the
CLI, the daemon's chat bridges and the kernel's notices cannot drift apart.

Why JSON rather than gettext/Babel: the single-page app has no build step and must read the
catalogue as it is, which rules out compiled ``.mo`` files; a flat JSON object is read by
``json.loads`` and by the browser alike, diffs well, and needs no new dependency. Keys are
stable identifiers (``chat.send``), not the English text, so rewording English does not orphan
the Chinese. ``{name}`` fields are filled by ``str.format_map`` in Python and by the same
substitution in ``static/i18n.js``.

Each package keeps its own catalogue folder (the SDK here, for what plugins send, e.g. the
bridges' pairing message; the core in ``homeagent_core.i18n``); plugins may ship their own
with :class:`Catalogue`. A key missing in one language falls back to English, then to the key.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "SDK",
    "SETTING_CHOICES",
    "Catalogue",
    "check",
    "fields_of",
    "from_accept_language",
    "language_of_text",
    "normalize",
]

#: The languages every catalogue speaks.
LANGUAGES: tuple[str, ...] = ("zh", "en")
#: What a surface speaks when nothing says otherwise.
DEFAULT_LANGUAGE = "en"
#: Values of the language setting: ``auto`` follows the browser (or the person's own words).
SETTING_CHOICES: tuple[str, ...] = ("auto", *LANGUAGES)

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def normalize(value: str | None) -> str | None:
    """``"zh-CN"``, ``"zh_TW.UTF-8"``, ``"EN-us"`` → ``"zh"`` / ``"en"``; anything else → ``None``."""
    if not value:
        return None
    head = re.split(r"[-_.@;]", value.strip().lower(), maxsplit=1)[0]
    return head if head in LANGUAGES else None


def from_accept_language(header: str | None, default: str = DEFAULT_LANGUAGE) -> str:
    """The best of :data:`LANGUAGES` for an HTTP ``Accept-Language`` header (quality-ordered)."""
    choices: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        match = re.search(r"q\s*=\s*([^;,\s]*)", params)
        if match:  # a weight that is no number counts as "not wanted"
            try:
                quality = float(match.group(1))
            except ValueError:
                quality = 0.0
        language = normalize(tag)
        if language and quality > 0:
            choices.append((-quality, index, language))
    return sorted(choices)[0][2] if choices else default


def language_of_text(text: str, default: str = DEFAULT_LANGUAGE) -> str:
    """``"zh"`` when ``text`` contains Chinese characters, else ``"en"`` (or ``default`` when empty)."""
    if not text.strip():
        return default
    return "zh" if _CJK.search(text) else "en"


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class Catalogue:
    """The ``<lang>.json`` files of one folder, read once (thread-safe) and kept."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._loaded: dict[str, dict[str, str]] = {}

    def messages(self, language: str) -> dict[str, str]:
        """Every message of ``language`` (English ones fill keys it lacks)."""
        language = normalize(language) or DEFAULT_LANGUAGE
        with self._lock:
            if language not in self._loaded:
                merged = dict(self._read("en"))
                if language != "en":
                    merged.update(self._read(language))
                self._loaded[language] = merged
            return self._loaded[language]

    def _read(self, language: str) -> dict[str, str]:
        path = self.folder / f"{language}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{path}: a message catalogue is a JSON object of strings")
        return data

    def has(self, language: str, key: str) -> bool:
        return key in self.messages(language)

    def text(self, language: str, key: str, /, **fields: Any) -> str:
        """The message ``key`` in ``language`` with its ``{fields}`` filled in.

        A key no catalogue has comes back as the key itself (visible, never a crash); a field
        not given stays as ``{name}``.
        """
        template = self.messages(language).get(key, key)
        return template.format_map(_Fields(fields)) if _FIELD.search(template) else template

    def both(self, key: str, /, **fields: Any) -> dict[str, str]:
        """``{"zh": ..., "en": ...}`` for ``key``."""
        return {language: self.text(language, key, **fields) for language in LANGUAGES}


#: The SDK's own catalogue: what plugins built on the SDK send to people (bridges' pairing codes).
SDK = Catalogue(Path(__file__).resolve().parent)


def fields_of(template: str) -> set[str]:
    """The ``{field}`` names in ``template`` (used by the catalogue consistency checks)."""
    return set(_FIELD.findall(template))


def check(catalogue: Catalogue) -> list[str]:
    """Problems of a catalogue: keys one language lacks, fields that differ between languages."""
    english = catalogue._read("en")
    problems: list[str] = []
    for language in LANGUAGES:
        if language == "en":
            continue
        other = catalogue._read(language)
        for key in sorted(set(english) - set(other)):
            problems.append(f"{catalogue.folder.name}/{language}.json lacks {key!r}")
        for key in sorted(set(other) - set(english)):
            if not key.startswith("config."):
                problems.append(f"{catalogue.folder.name}/{language}.json has {key!r}, which en.json lacks")
        for key in sorted(set(english) & set(other)):
            if fields_of(english[key]) != fields_of(other[key]):
                problems.append(f"{key!r}: fields {sorted(fields_of(other[key]))} in {language} "
                                f"differ from {sorted(fields_of(english[key]))} in en")
    return problems
