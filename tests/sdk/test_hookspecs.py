"""The hookspec module keeps its promises: templated docstrings, names, no host imports."""

from __future__ import annotations

import ast
import inspect
import re
import types
from pathlib import Path

import homeagent_sdk
from homeagent_sdk import hookspecs

ROOT = Path(__file__).resolve().parents[2]
STAGES = {"on_input", "pre_action", "post_action", "before_toolcall", "after_toolcall", "before_output", "after_output"}


def spec_functions() -> dict[str, object]:
    return {n: f for n, f in vars(hookspecs).items() if inspect.isfunction(f) and hasattr(f, "homeagent_spec")}


def test_every_design_hook_is_specified():
    expected = STAGES | {
        "register_tools",
        "register_input_channels",
        "register_output_channels",
        "register_embedding_providers",
        "register_settings",
        "register_routes",
        "register_commands",
        "register_adapters",
        "startup",
        "shutdown",
        "on_event",
    }
    assert set(spec_functions()) == expected


def test_hook_names_follow_the_two_families():
    pattern = re.compile(r"^(register_[a-z_]+|on_input|pre_action|post_action|before_toolcall|after_toolcall|"
                         r"before_output|after_output|startup|shutdown|on_event)$")
    for name in spec_functions():
        assert pattern.match(name), name


def test_every_hookspec_docstring_follows_the_template():
    for name, fn in spec_functions().items():
        doc = inspect.getdoc(fn) or ""
        first = doc.splitlines()[0] if doc else ""
        assert first.startswith("Called"), f"{name}: first line must say when it fires"
        assert "Returns:" in doc, f"{name}: must say what a return value means"
        assert ("May be ``async def``" in doc) != ("Must be sync" in doc), f"{name}: must state its async policy"
        for param in inspect.signature(fn).parameters:
            assert f":param {param}:" in doc, f"{name}: parameter {param} undocumented"


def test_hookspecs_are_fully_annotated():
    for name, fn in spec_functions().items():
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        for param in sig.parameters.values():
            assert param.annotation is not inspect.Parameter.empty, f"{name}({param.name})"


def test_firstresult_and_historic_are_not_mixed_with_async_hooks():
    for name, fn in spec_functions().items():
        opts = fn.homeagent_spec
        if opts.get("firstresult"):
            assert "first non-None" in (fn.__doc__ or ""), name
            assert "May be ``async def``" not in (fn.__doc__ or ""), name


def test_sdk_all_is_exact_and_sorted():
    public = {n for n in dir(homeagent_sdk) if not n.startswith(("_", "@")) and n not in {"annotations", "pluggy"}}
    public = {n for n in public if not isinstance(getattr(homeagent_sdk, n), types.ModuleType)}
    assert set(homeagent_sdk.__all__) == public | {"__version__"}
    def isort_style(name: str) -> tuple[int, str]:  # constants, then classes, then the rest
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(homeagent_sdk.__all__) == sorted(homeagent_sdk.__all__, key=isort_style)


def test_every_type_a_hook_is_handed_is_exported_by_the_sdk():
    import typing

    import homeagent_sdk.api
    import homeagent_sdk.types

    namespace = {**vars(homeagent_sdk.api), **vars(homeagent_sdk.types)}
    handed = set()
    for fn in spec_functions().values():
        hints = typing.get_type_hints(fn, globalns=namespace)
        handed |= {hint.__name__ for param, hint in hints.items() if param != "return" and isinstance(hint, type)}
    assert handed >= {"ToolRegistryProtocol", "ChannelRegistry", "SettingsRegistry", "PluginSDK", "StageContext"}
    assert handed - set(homeagent_sdk.__all__) == set(), "hookspec parameter types missing from homeagent_sdk.__all__"
    for name in ("PluginValidationError", "ConfigError"):
        assert name in homeagent_sdk.__all__


def test_exactly_one_hookspec_marker_in_the_repository():
    hits = []
    packages = ("homeagent_sdk", "homeagent_core", "hmapdev")
    for path in [p for package in packages for p in ROOT.glob(f"{package}/**/*.py")]:
        if "HookspecMarker(" in path.read_text(encoding="utf-8"):
            hits.append(path.name)
    assert hits == ["hookspecs.py"]


def test_sdk_examples_and_adapters_never_import_the_host():
    offenders = []
    for folder in ("homeagent_sdk", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if any(n == "homeagent_core" or n.startswith("homeagent_core.") for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
