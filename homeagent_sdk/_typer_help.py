"""Help screens of the command-line apps (``homeagent``, ``hmapdev``): a flag shows no type.

typer's rich help prints each option's type beside it; for a flag (``--force``, ``--json``,
``--help``) that reads ``<bool>``, as if the flag took a value. :func:`hide_flag_types` makes
flags show none, as click's own help does; options that take a value keep theirs (``<path>``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["hide_flag_types"]


def hide_flag_types() -> None:
    """Make typer's rich help show no type beside a flag (idempotent).

    Typer versions whose help shows no type for flags (no ``display_type_rich``) are left as
    they are.
    """
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "hides_flag_types", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> Any:
        if self.is_flag and not self.count:
            return None
        return shown(self, ctx)

    setattr(display_type_rich, "hides_flag_types", True)  # noqa: B010 (an attribute on a function)
    setattr(TyperOption, "display_type_rich", display_type_rich)  # noqa: B010 (replaces typer's method)
