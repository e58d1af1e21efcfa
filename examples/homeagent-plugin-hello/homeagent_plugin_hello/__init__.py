"""homeagent-plugin-hello: the smallest complete HomeAgent plugin.

It shows each kind of contribution once: a tool (``hello``), a stage hook (``on_input``
answers "ping" without asking the model), a setting (``plugin.hello.greeting``) and a command
line sub-command (``homeagent hello NAME``).
"""

from __future__ import annotations

from typing import Any

from homeagent_sdk import (
    CommandApp,
    ConfigDef,
    PluginSDK,
    SettingsRegistry,
    StageContext,
    ToolRegistryProtocol,
    hookimpl,
)

__all__ = ["HelloPlugin", "plugin"]

DEFAULT_GREETING = "Hello"


class HelloPlugin:
    """Greets people. One instance per agent: tests create their own."""

    name = "hello"

    def __init__(self) -> None:
        self.settings: Any = None

    def greeting(self) -> str:
        """The configured greeting (the default before the agent started)."""
        if self.settings is None:
            return DEFAULT_GREETING
        return str(self.settings.get("greeting") or DEFAULT_GREETING)

    def hello(self, name: str) -> str:
        """Greet someone by name with the configured greeting.

        Args:
            name: who to greet
        """
        return f"{self.greeting()}, {name}!"

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(
            ConfigDef(
                key="greeting",
                type="string",
                default=DEFAULT_GREETING,
                description="The word the hello tool greets with.",
            )
        )

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.hello)

    @hookimpl
    def startup(self, sdk: PluginSDK) -> None:
        self.settings = sdk.settings

    @hookimpl
    def on_input(self, ctx: StageContext) -> None:
        if ctx.raw_message.strip().lower() == "ping":
            ctx.response = "pong"

    @hookimpl
    def register_commands(self, app: CommandApp) -> None:
        import typer

        @app.command("hello")
        def hello_command(name: str) -> None:
            """Print a greeting (from the homeagent-plugin-hello plugin)."""
            typer.echo(self.hello(name))


#: The object the ``homeagent`` entry point names.
plugin = HelloPlugin()
