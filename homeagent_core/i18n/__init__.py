"""The core's message catalogue (``en.json``, ``zh.json`` beside this file).

What the web UI, the CLI and the kernel's notices say to people, and the Chinese descriptions
of the settings (``config.<key>``; the English ones are the ``ConfigDef`` descriptions in the
code). The mechanism and the reasons for it are in :mod:`homeagent_sdk.i18n`; the web UI reads
these same files through ``/i18n/catalogue.js``.

The one language setting is ``plugin.webui.language``: ``auto`` (the browser's language in
the web UI, the locale (``LANG``) in the CLI, the words a person wrote in a chat app), ``zh`` or
``en``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from homeagent_sdk.i18n import DEFAULT_LANGUAGE, SETTING_CHOICES, Catalogue, normalize
from homeagent_sdk.types import ConfigDef

__all__ = [
    "CORE",
    "LANGUAGE_KEY",
    "cli_language",
    "config_description",
    "locale_language",
    "setting_value",
    "stored_setting",
    "t",
]

#: The core's catalogue.
CORE = Catalogue(Path(__file__).resolve().parent)
#: The one language setting.
LANGUAGE_KEY = "plugin.webui.language"


def t(language: str, key: str, /, **fields: Any) -> str:
    """``CORE.text``: the message ``key`` in ``language``."""
    return CORE.text(language, key, **fields)


def setting_value(value: Any) -> str:
    """A stored language setting → ``auto``, ``zh`` or ``en`` (anything else reads as ``auto``)."""
    text = str(value or "auto").strip().lower()
    return text if text in SETTING_CHOICES else "auto"


def locale_language(environ: dict[str, str] | None = None) -> str:
    """The language of the process's locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``), default English."""
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        if value:
            return normalize(value) or DEFAULT_LANGUAGE
    return DEFAULT_LANGUAGE


def config_description(definition: ConfigDef, language: str) -> str:
    """A setting's description in ``language`` (the code's English one where no translation exists)."""
    if normalize(language) == "zh":
        translated = CORE.messages("zh").get(f"config.{definition.key}")
        if translated:
            return translated
    return definition.description


def stored_setting(data_dir: Path | None = None) -> str:
    """``plugin.webui.language`` as stored in ``<data>/config.db`` (read-only; ``auto`` when unset or unreadable)."""
    from homeagent_core.datadir import default_data_dir

    path = (data_dir or default_data_dir()) / "config.db"
    if not path.is_file():
        return "auto"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute("SELECT value FROM config_webui WHERE key = ?", (LANGUAGE_KEY,)).fetchone()
    except sqlite3.Error:
        return "auto"
    return setting_value(row[0] if row else "auto")


def cli_language(data_dir: Path | None = None) -> str:
    """The CLI's language: the setting when it is ``zh`` or ``en``, else the locale's."""
    setting = stored_setting(data_dir)
    return setting if setting != "auto" else locale_language()
