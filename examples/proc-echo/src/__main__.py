"""Entry point of plugin.pyz: serve the plugin over stdin/stdout."""

from __future__ import annotations

from plugin import Plugin

from homeagent_sdk.proc import serve

if __name__ == "__main__":
    serve(Plugin())
