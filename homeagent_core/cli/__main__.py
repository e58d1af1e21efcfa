"""``python -m homeagent_core.cli``: same as the ``homeagent`` command."""

from __future__ import annotations

from homeagent_core.cli import main

main()
