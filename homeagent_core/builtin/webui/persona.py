"""The persona file ``<data>/personal/personal.md`` and the first-start persona choice.

The kernel reads the file at start (it overrides ``core.agent.personal_prompt``); the web UI
writes it atomically and hands the new text to the running kernel, so a change needs no
restart. Choosing "later" only records that the question was answered, so it is asked once.
"""

from __future__ import annotations

from pathlib import Path

from homeagent_sdk._atomic import atomic_write

__all__ = ["MAX_PERSONA_CHARS", "MODES", "PersonaFile"]

MODES = ("default", "custom", "later")
MAX_PERSONA_CHARS = 20_000


class PersonaFile:
    """``personal.md`` plus the marker that records the first-start choice."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / "personal" / "personal.md"
        self.marker = self.path.with_name(".persona_choice")

    def read(self) -> str | None:
        """The file's text, or None when there is none."""
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    @property
    def choice(self) -> str:
        """``default``/``custom``/``later`` once answered; ``custom`` for a file written by hand."""
        try:
            recorded = self.marker.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            recorded = ""
        if recorded in MODES:
            return recorded
        return "custom" if self.path.exists() else ""

    def write(self, text: str) -> None:
        _atomic_write(self.path, text)
        _atomic_write(self.marker, "custom")

    def clear(self, choice: str) -> None:
        """Remove the file (back to the configured persona) and record ``choice``."""
        self.path.unlink(missing_ok=True)
        _atomic_write(self.marker, choice)

    def postpone(self) -> None:
        _atomic_write(self.marker, "later")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, text)
