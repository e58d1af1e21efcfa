from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "sentence_transformers", "open_clip", "model2vec", "jieba", "PIL")


def test_importing_the_embedding_and_media_modules_loads_no_heavy_package() -> None:
    code = (
        "import sys\n"
        "import homeagent_core.embeddings, homeagent_core.embeddings.clip\n"
        "import homeagent_core.embeddings.static, homeagent_core.embeddings.sentence\n"
        "import homeagent_core.embeddings.http, homeagent_core.memory.media\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""


def test_a_missing_optional_package_names_the_extra_to_install() -> None:
    import pytest

    from homeagent_core.embeddings.common import require

    with pytest.raises(ImportError, match=r"pip install 'homeagent\[clip\]'"):
        require("homeagent_no_such_module_xyz", "clip")
