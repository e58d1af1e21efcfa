"""``examples/notebook.ipynb`` is valid and runs top to bottom against a FakeModel.

The code cells are executed in order in one namespace on one event loop, with top-level
``await`` allowed as in Jupyter; no Jupyter installation is needed.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def load() -> dict[str, Any]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def source(cell: dict[str, Any]) -> str:
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def compile_cell(text: str, index: int) -> CodeType:
    return compile(text, f"<notebook cell {index}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def run_notebook(nb: dict[str, Any]) -> list[str]:
    """Execute every code cell in order; returns each cell's printed output."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    outputs: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        for index, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            code = compile_cell(source(cell), index)
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                result = eval(code, namespace)
                if asyncio.iscoroutine(result):
                    loop.run_until_complete(asyncio.wait_for(result, timeout=120))
            outputs.append(buffer.getvalue())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return outputs


def test_the_notebook_is_valid_nbformat_4_without_stored_outputs():
    nb = load()
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 4
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    ids = [cell["id"] for cell in nb["cells"]]
    assert len(ids) == len(set(ids))
    for index, cell in enumerate(nb["cells"]):
        assert cell["cell_type"] in ("markdown", "code")
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
            compile_cell(source(cell), index)  # every code cell is valid Python
    try:
        import nbformat
    except ImportError:
        return
    nbformat.validate(nbformat.reads(NOTEBOOK.read_text(encoding="utf-8"), as_version=4))


def test_the_notebook_runs_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    outputs = run_notebook(load())
    text = "\n".join(outputs)

    assert "你好小王！我记住了：你住在杭州。" in text
    assert "Hangzhou is famous for Longjing tea." in text
    assert "小王 住在 杭州" in text and "小王 喜欢 龙井" in text
    assert "泡龙井 -> 龙井用 80 °C 的水" in text
    assert "Use water at 80 °C for green tea." in text
    assert "tool result the model saw: 80 °C" in text
    assert "('小王', '住在', '杭州')" in text
    assert [p for p in tmp_path.iterdir() if p.name.startswith("homeagent-notebook-")], "the notebook's data dir"
    assert os.environ["TMPDIR"] == str(tmp_path)
