"""README's library example is a script that runs as written, against a model speaking the real wire format."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from openai_loopback import REPLY, openai_loopback

README = Path(__file__).resolve().parents[2] / "README.md"


def library_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("As a library"):]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match, "README has no python block after 'As a library'"
    return match.group(1)


def test_the_readme_library_example_runs_as_a_script(tmp_path: Path):
    code = library_example()
    compile(code, "README.md", "exec")  # a script: no top-level await
    with openai_loopback() as server:
        script = code.replace("https://api.deepseek.com", server.base_url).replace('"deepseek"', '"openai"')
        (tmp_path / "example.py").write_text(script, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOMEAGENT_", "PYTEST_"))}
        env.update({"HOMEAGENT_HOME": str(tmp_path / "home"), "HOMEAGENT_LOAD_PLUGINS": "", "HF_HUB_OFFLINE": "1"})
        result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(REPLY) == 2, result.stdout  # ask, then the streamed reply
    assert (tmp_path / "ha").is_dir()
    assert server.requests and server.requests[0]["model"] == "deepseek-chat"
