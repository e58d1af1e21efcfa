"""``homeagent nodes`` without a running daemon works on the store directly."""

from __future__ import annotations

import json
from pathlib import Path

from nodes_procs import cli


def test_pair_list_and_revoke_work_on_the_data_dir_when_no_daemon_runs(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    cli("config", "set", "plugin.webui.addr", "0.0.0.0:8123", "--data", home)
    paired = json.loads(cli("nodes", "pair", "pi", "--json", "--data", home).stdout)
    assert paired["join"].startswith("homeagent node join http://") and ":8123 " in paired["join"]
    assert "0.0.0.0" not in paired["join"]  # a wildcard bind is shown as this machine's name
    assert json.loads(cli("nodes", "list", "--json", "--data", home).stdout) == []  # paired once joined
    bad = cli("nodes", "pair", "Pi 4!", "--data", home, check=False)
    assert bad.returncode == 1 and "not a valid node name" in bad.stderr
    assert cli("nodes", "revoke", "pi", "--data", home).stdout.strip() == "node pi revoked"  # its pending code
    missing = cli("nodes", "revoke", "pi", "--data", home, check=False)
    assert missing.returncode == 1 and "no node named 'pi'" in missing.stderr
