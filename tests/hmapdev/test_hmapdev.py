"""hmapdev end to end: new -> own tests -> build -> pack -> validate -> install -> a kernel turn."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hmapdev.cli import app
from homeagent_core.agent.kernel import Kernel
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_core.plugins.packages import install_package
from homeagent_core.plugins.proc import discover_proc_plugins
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk._fake_model import FakeModel, ToolCallReply

runner = CliRunner()


def hmapdev(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    code, out = hmapdev("new", "my-greeter", "--kind", "proc")
    assert code == 0, out
    return tmp_path / "my-greeter"


def test_every_template_passes_its_own_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for kind in ("proc", "lua", "skill", "inproc"):
        code, out = hmapdev("new", f"t-{kind}", "--kind", kind)
        assert code == 0, out
    dirs = [str(tmp_path / f"t-{kind}" / "tests") for kind in ("proc", "lua", "skill", "inproc")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib", *dirs],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 passed" in run.stdout


def test_new_refuses_an_existing_folder_and_unknown_kinds(project: Path) -> None:
    assert hmapdev("new", "my-greeter")[0] == 1
    code, out = hmapdev("new", "other", "--kind", "java")
    assert code == 1 and "unknown kind" in out


def test_build_vendors_pure_python_dependencies_and_refuses_compiled_ones(project: Path) -> None:
    (project / "requirements.txt").write_text("sniffio\n")
    code, out = hmapdev("build", "-C", str(project))
    assert code == 0, out
    with zipfile.ZipFile(project / "build" / "plugin.pyz") as zf:
        names = zf.namelist()
    assert "__main__.py" in names and "plugin.py" in names and "sniffio/__init__.py" in names
    (project / "requirements.txt").write_text("orjson\n")
    code, out = hmapdev("build", "-C", str(project))
    assert code == 1 and "orjson" in out and "compiled" in out


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A real (pure-Python, py3-none-any) wheel file that pip installs."""
    import base64
    import hashlib

    dist_info = f"{name}-{version}.dist-info"
    members = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for member, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append(f"{member},sha256={digest},{len(text.encode())}")
    rows.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = "\n".join(rows) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for member, text in members.items():
            zf.writestr(member, text)
    return wheel


def test_pinned_requirements_build_from_the_index_into_a_clean_target_reproducibly(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, "tinydep", "0.1", {"tinydep/__init__.py": "VALUE = 'from the wheel'\n"})
    write_wheel(wheels, "tinydep", "0.2", {"tinydep/__init__.py": "VALUE = 'newer'\n"})
    write_wheel(wheels, "fastdep", "1.0", {"fastdep/__init__.py": "", "fastdep/_speed.so": "not really"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    (project / "requirements.txt").write_text("tinydep==0.1  # pinned: installed by pip, not copied from here\n")
    code, out = hmapdev("build", "-C", str(project))
    assert code == 0, out
    built = project / "build" / "plugin.pyz"
    first = built.read_bytes()
    with zipfile.ZipFile(built) as zf:
        names = zf.namelist()
        assert zf.read("tinydep/__init__.py") == b"VALUE = 'from the wheel'\n"
    assert "plugin.py" in names and not any(".dist-info" in n or n.startswith("bin/") for n in names)
    assert (project / "build" / "vendored.txt").read_text() == "tinydep==0.1\n"
    code, out = hmapdev("build", "-C", str(project))
    assert code == 0, out
    assert built.read_bytes() == first  # same inputs, same bytes

    (project / "requirements.txt").write_text("tinydep==9.9\n")
    code, out = hmapdev("build", "-C", str(project))
    assert code == 1 and "tinydep==9.9" in out and "requirements.txt" in out
    (project / "requirements.txt").write_text("fastdep==1.0\n")
    code, out = hmapdev("build", "-C", str(project))
    assert code == 1 and "fastdep" in out and "compiled" in out


def test_validate_uses_the_installer_checks(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hmap"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "x", "version": "1", "entry": "plugin.bin"}))
        zf.writestr("../escape", "x")
    code, out = hmapdev("validate", str(bad))
    assert code == 1 and "zip slip" in out


async def test_a_built_package_installs_and_serves_a_real_kernel_turn(project: Path, tmp_path: Path) -> None:
    code, out = hmapdev("pack", "-C", str(project))
    assert code == 0, out
    package = project / "dist" / "my-greeter-0.1.0.hmap"
    with zipfile.ZipFile(package) as zf:
        assert {"plugin.json", "plugin.pyz", "README.md", "LICENSE", "checksums.sha256"} <= set(zf.namelist())
    assert hmapdev("validate", str(package))[0] == 0

    data = tmp_path / "data"
    assert install_package(data, package)["status"] == "installed"
    [(name, plugin)] = discover_proc_plugins(data, supervisor=Supervisor())
    model = FakeModel(
        [
            ToolCallReply(
                calls=[
                    ("my_greeter_greet", {"who": "Ada"}),
                    ("output_send__my_greeter_outbox", {"payload": "note", "type": "text"}),
                ]
            ),
            ":wave: all done",
        ]
    )
    bus = EventBus()
    config = ConfigStore(":memory:")
    host = create_plugin_manager(load_entrypoints=False, builtins=[], plugins=[plugin])
    kernel = Kernel(host, bus, model)
    services = Services(config=config, bus=bus, data_dir=data, kernel=kernel)
    try:
        await kernel.start()
        await plugin.startup(ScopedSDK.for_plugin(name, services, privileged=True))
        reply = await kernel.ask("greet Ada and note it", timeout=30)
        assert str(reply) == "👋 all done"  # the plugin's before_output stage ran
        tool_messages = [m for m in model.requests[1]["messages"] if m.get("role") == "tool"]
        assert any("Hello, Ada!" in str(m.get("content")) for m in tool_messages)
        outbox = data / "plugin_data" / "my-greeter" / "outbox.txt"
        assert outbox.read_text(encoding="utf-8") == "note\n"
    finally:
        await plugin.shutdown()
        await kernel.aclose()
        await bus.aclose()
        config.close()


def test_run_starts_the_plugin_against_a_scripted_model(project: Path) -> None:
    code, out = hmapdev("run", "-C", str(project), "--call", "my_greeter_greet", "--args", '{"who": "Bo"}')
    assert code == 0, out
    report = json.loads(out[out.index("{") :])
    assert "my_greeter_greet" in report["tools"] and report["stages"] == ["before_output"]


def test_a_skill_package_carries_its_resource_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from hmapdev.cli import app

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["new", "notes", "--kind", "skill"]).exit_code == 0
    project = tmp_path / "notes"
    (project / "references").mkdir()
    (project / "references" / "guide.md").write_text("how to", encoding="utf-8")
    (project / "scripts").mkdir()
    (project / "scripts" / "run.py").write_text("print(1)\n", encoding="utf-8")
    result = runner.invoke(app, ["pack", "--project", str(project)])
    assert result.exit_code == 0, result.output
    names = zipfile.ZipFile(next((project / "dist").glob("*.hmap"))).namelist()
    assert "references/guide.md" in names and "scripts/run.py" in names


@pytest.mark.parametrize("kind", ["inproc", "proc"])
def test_a_new_project_s_tests_pass_without_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str):
    monkeypatch.chdir(tmp_path)
    code, out = hmapdev("new", "hello", "--kind", kind)
    assert code == 0, out
    if kind == "inproc":
        assert "homeagent install -e ." in out and "hmapdev pack" not in out
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "tests"],
        cwd=tmp_path / "hello", capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr
