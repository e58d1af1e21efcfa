"""The C node of docs/NODES.md builds, joins a real daemon and answers the model's call."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from nodes_procs import API_KEY, Proc, ask, configure, free_port, serve
from openai_loopback import openai_loopback

DOC = Path(__file__).resolve().parents[3] / "docs" / "NODES.md"


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_the_c_node_of_the_docs_answers_a_call(tmp_path: Path) -> None:
    source = re.search(r"<!-- c-node-begin -->\n```c\n(.*?)```\n<!-- c-node-end -->", DOC.read_text(), re.S)
    assert source is not None, "docs/NODES.md lost its C example markers"
    (tmp_path / "node.c").write_text(source.group(1))
    build = subprocess.run(["cc", "-O2", "-Wall", "-o", str(tmp_path / "node"), str(tmp_path / "node.c")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    port = free_port()
    with openai_loopback() as model:
        configure(tmp_path / "home", model.base_url)
        daemon = serve(tmp_path / "home", port)
        node: Proc | None = None
        try:
            base = f"http://127.0.0.1:{port}"
            code = httpx.post(f"{base}/api/v1/nodes/pair", json={"name": "pi"},
                              headers={"X-API-Key": API_KEY}).json()["code"]
            token = httpx.post(f"{base}/api/v1/nodes/join", json={"code": code}).json()["token"]
            refused = subprocess.run([str(tmp_path / "node"), "127.0.0.1", str(port), "hn_wrong", "pi"],
                                     capture_output=True, text=True, timeout=30)
            assert refused.returncode == 1 and "401" in refused.stderr
            node = Proc([str(tmp_path / "node"), "127.0.0.1", str(port), token, "pi"])
            node.wait_for("connected as pi")
            model.tool_rules["uptime of the pi"] = [("node_pi_status", {})]
            reply = ask(base, "what is the uptime of the pi?")
            assert re.fullmatch(r"tool results: up \d+ s \(a C node\)", reply), reply
        finally:
            if node is not None:
                node.stop(signal.SIGKILL)
            daemon.stop(signal.SIGKILL)
