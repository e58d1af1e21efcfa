"""The ``homeagent`` command line (typer).

Commands only parse their arguments and call library functions. Plugins add sub-commands
through the ``register_commands`` hook, called before the app runs. Importing this package
stays light: heavy libraries load inside the commands that need them.
"""

from __future__ import annotations

from homeagent_core.cli._app import app, main

__all__ = ["app", "main"]
