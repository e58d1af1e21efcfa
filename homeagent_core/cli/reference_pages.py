"""What the two generated reference pages (``docs/CLI.md``, ``docs/CONFIG.md``) share.

Both are collected from a plugin host holding only the built-ins (installed third-party
plugins and the operator's ``HOMEAGENT_*_PLUGINS`` switches never change them), both refuse to
render while a built-in failed to load (the page would silently lack its part), and both are
printed by a ``main`` that takes no arguments and writes UTF-8 whatever the locale.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from homeagent_core.plugins.manager import DEFAULT_PLUGINS, PluginHost
from homeagent_sdk.errors import PluginLoadError

__all__ = ["builtins_host", "print_page", "refuse_failed"]


def builtins_host(modules: Sequence[str] = DEFAULT_PLUGINS) -> PluginHost:
    """A plugin host with ``modules`` (the built-ins) loaded, built directly rather than with
    ``create_plugin_manager`` so the environment cannot change what it holds."""
    host = PluginHost()
    for module_path in modules:
        host.load_module(module_path)
    return host


def refuse_failed(host: PluginHost, what: str) -> None:
    """Raise when a plugin of ``host`` failed to load or to answer the hook that collects ``what``.

    Raises:
        PluginLoadError: naming every failed plugin and its error.
    """
    failed = [info for info in host.plugins() if info.status == "failed"]
    if failed:
        details = "; ".join(f"{info.name}: {info.error}" for info in failed)
        raise PluginLoadError(
            f"cannot document the {what} of failed plugins ({details}); fix them and regenerate",
            plugin_name=failed[0].name,
        )


def print_page(render: Callable[[], str], regenerate: str, argv: Sequence[str] | None = None) -> int:
    """Print ``render()`` to stdout in UTF-8; with any argument, print the ``regenerate`` usage and return 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print(f"usage: {regenerate}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(render().encode("utf-8"))
    sys.stdout.flush()
    return 0
