"""``examples/notebook.ipynb`` is valid and runs top to bottom in a real Jupyter kernel.

The notebook is executed with ``nbclient`` on an ``ipykernel`` kernel started from this
interpreter (a kernelspec written to a temporary ``JUPYTER_PATH`` pins it, whatever kernels the
machine has installed), offline, with a time limit per cell; any cell that raises fails the test.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
KERNEL = "python3"
CELL_TIMEOUT_S = 120


def load() -> dict[str, Any]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def source(cell: dict[str, Any]) -> str:
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def pin_kernel(jupyter_dir: Path) -> None:
    """Write a ``python3`` kernelspec that runs ipykernel in this interpreter."""
    spec_dir = jupyter_dir / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (HomeAgent tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")


def stdout_of(cell: Any) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("name") == "stdout")


def test_the_notebook_is_valid_nbformat_4_without_stored_outputs():
    nb = load()
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 4
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    assert nb["metadata"]["kernelspec"]["name"] == KERNEL
    ids = [cell["id"] for cell in nb["cells"]]
    assert len(ids) == len(set(ids))
    for index, cell in enumerate(nb["cells"]):
        assert cell["cell_type"] in ("markdown", "code")
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
            # every code cell is valid Python (top-level await allowed, as in Jupyter)
            compile(source(cell), f"<notebook cell {index}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    nbformat.validate(nbformat.reads(NOTEBOOK.read_text(encoding="utf-8"), as_version=4))


async def test_the_notebook_runs_top_to_bottom_in_a_jupyter_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    nb = nbformat.reads(NOTEBOOK.read_text(encoding="utf-8"), as_version=4)
    scratch, text = await execute(nb, tmp_path, monkeypatch)
    assert "你好小王！我记住了：你住在杭州。" in text
    assert "Hangzhou is famous for Longjing tea." in text
    assert "小王 住在 杭州" in text and "小王 喜欢 龙井" in text
    assert "泡龙井 -> 龙井用 80 °C 的水" in text
    assert "Use water at 80 °C for green tea." in text
    assert "tool result the model saw: 80 °C" in text
    assert "('小王', '住在', '杭州')" in text
    assert [p for p in scratch.iterdir() if p.name.startswith("homeagent-notebook-")], "the notebook's data dir"
    assert f"data directory: {scratch}" in text


async def test_the_notebook_runs_with_a_real_model_server_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``LLM`` set in the first cell: every later cell still runs (against a loopback OpenAI server)."""
    import importlib.util

    served_py = Path(__file__).resolve().parents[1] / "core" / "builtin" / "webui" / "served.py"
    spec = importlib.util.spec_from_file_location("notebook_model_server", served_py)
    assert spec is not None and spec.loader is not None
    served = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, served)  # its dataclasses look themselves up there
    spec.loader.exec_module(served)
    nb = nbformat.reads(NOTEBOOK.read_text(encoding="utf-8"), as_version=4)
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert "LLM = None" in first.source
    async with served.fake_model() as (server, url):
        llm = {"base_url": f"{url}/v1", "model": "echo", "adapter": "openai", "api_key": "sk-loopback"}
        first.source = first.source.replace("LLM = None", f"LLM = {llm!r}", 1)
        _, text = await execute(nb, tmp_path, monkeypatch)
    assert "echo: 我叫小王，住在杭州" in text
    assert "tool result the model saw" not in text  # only the scripted model is inspected
    assert server.received >= 3


async def execute(nb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """Run ``nb`` in a pinned Jupyter kernel; returns its scratch TMPDIR and the code cells' stdout."""
    jupyter_dir = tmp_path / "jupyter"
    pin_kernel(jupyter_dir)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_dir))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))

    from jupyter_client.kernelspec import KernelSpecManager

    assert KernelSpecManager().get_kernel_spec(KERNEL).argv[0] == sys.executable

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    kernel_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TMPDIR": str(scratch),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLBACKEND": "Agg",
    }
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT_S,
        startup_timeout=60,
        allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    await client.async_execute(env=kernel_env)  # raises CellExecutionError on the first failing cell

    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells), "a cell did not run"
    assert not [out for cell in code_cells for out in cell.outputs if out.output_type == "error"]
    return scratch, "\n".join(stdout_of(cell) for cell in code_cells)
