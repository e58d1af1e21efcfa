"""Fixture plugin: a module plugin with settings, a command and lifecycle hooks."""

from __future__ import annotations

from homeagent_sdk import ConfigDef, hookimpl

EVENTS: list[str] = []


@hookimpl
def register_settings(registry):
    registry.add(ConfigDef(key="greeting", type="string", default="hello"))
    registry.add(ConfigDef(key="times", type="int", default=1, min=1, max=5))


@hookimpl
def register_commands(app):
    @app.command("greet")
    def greet(name: str) -> None:
        """Greet someone (fixture command)."""
        print(f"hello {name}")


@hookimpl
def startup(sdk):
    EVENTS.append(f"startup:{sdk.name}:{sdk.settings.get('greeting')}")


@hookimpl
def shutdown():
    EVENTS.append("shutdown")
