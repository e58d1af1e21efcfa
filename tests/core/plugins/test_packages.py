"""``.hmap`` validation, installation, upgrade, rollback and removal on real files."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.plugins.packages import (
    MAX_PACKAGE_BYTES,
    PackageError,
    PackageExistsError,
    compare_versions,
    install_package,
    installed_plugins,
    plugin_details,
    remove_plugin,
    set_plugin_enabled,
    validate_package,
)
from homeagent_sdk.types import ConfigDef


def hmap(members: dict[str, bytes | str] | None = None, *, manifest: dict[str, Any] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if manifest is not False:
            zf.writestr(
                "plugin.json", json.dumps(manifest or {"name": "demo", "version": "1.0.0", "entry": "plugin.bin"})
            )
        for name, data in (members if members is not None else {"plugin.bin": "#!/bin/sh\necho hi\n"}).items():
            zf.writestr(name, data)
    return buf.getvalue()


def leftovers(data_dir: Path) -> list[str]:
    root = data_dir / "plugins"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"plugin.bin": "x", "../evil.sh": "x"}, "zip slip"),
        ({"plugin.bin": "x", "a/../../evil": "x"}, "zip slip"),
        ({"plugin.bin": "x", "/etc/evil": "x"}, "absolute path"),
        ({"README.md": "x"}, "not in the package"),
    ],
)
def test_hostile_or_incomplete_packages_are_refused_and_leave_nothing(
    tmp_path: Path, members: dict[str, str], message: str
) -> None:
    with pytest.raises(PackageError, match=message):
        install_package(tmp_path, hmap(members))
    assert leftovers(tmp_path) == []
    with pytest.raises(PackageError, match=message):
        validate_package(hmap(members))


def test_symlink_members_are_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "demo", "version": "1", "entry": "plugin.bin"}))
        zf.writestr("plugin.bin", "x")
        link = zipfile.ZipInfo("thirdpart/passwd")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    with pytest.raises(PackageError, match="symbolic link"):
        install_package(tmp_path, buf.getvalue())
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("manifest", "missing"),
    [({"name": "demo"}, "version, entry"), ({"version": "1", "entry": "plugin.bin"}, "name"), ({}, "name")],
)
def test_manifests_without_required_fields_are_refused_naming_them(
    tmp_path: Path, manifest: dict[str, Any], missing: str
) -> None:
    with pytest.raises(PackageError, match=f"missing required field\\(s\\) {missing}"):
        install_package(tmp_path, hmap(manifest=manifest or {"x": 1}))
    assert leftovers(tmp_path) == []


def test_a_package_over_100_mb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.hmap"
    with big.open("wb") as fh:  # sparse: no 101 MB ever held in memory or written
        fh.truncate(MAX_PACKAGE_BYTES + 1024 * 1024)
    with pytest.raises(PackageError, match="the limit is 100 MB"):
        install_package(tmp_path / "data", big)
    assert leftovers(tmp_path / "data") == []


def test_not_a_zip_and_bad_capabilities_are_explained(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="not a valid zip"):
        validate_package(b"definitely not a zip")
    manifest = {"name": "demo", "version": "1", "entry": "plugin.bin", "capabilities": ["root"]}
    with pytest.raises(PackageError, match="unknown capability root"):
        validate_package(hmap(manifest=manifest))


def test_install_restores_the_exec_bit_and_reports_the_checksum(tmp_path: Path) -> None:
    result = install_package(tmp_path, hmap())
    assert result["status"] == "installed" and result["action"] == "reload_required"
    entry = tmp_path / "plugins" / "demo" / "plugin.bin"
    assert entry.stat().st_mode & 0o111
    assert len(result["checksum"]) == 64
    assert leftovers(tmp_path) == ["demo"]
    assert installed_plugins(tmp_path)[0]["version"] == "1.0.0"
    assert "plugin.bin" in plugin_details(tmp_path, "demo")["files"]


def test_a_second_install_needs_overwrite_and_upgrades_keep_settings(tmp_path: Path) -> None:
    config = ConfigStore(tmp_path / "config.db")
    config.define_plugin("demo", ConfigDef(key="token", default=""))
    config.set("plugin.demo.token", "kept")
    install_package(tmp_path, hmap())
    with pytest.raises(PackageExistsError) as info:
        install_package(tmp_path, hmap())
    assert info.value.to_dict()["action"] == "remove_first" and info.value.to_dict()["current"] == "1.0.0"
    newer = hmap(manifest={"name": "demo", "version": "1.2", "entry": "plugin.bin"})
    upgraded = install_package(tmp_path, newer, overwrite=True)
    assert upgraded["action"] == "upgraded" and upgraded["previous_version"] == "1.0.0"
    older = hmap(manifest={"name": "demo", "version": "0.9", "entry": "plugin.bin"})
    assert install_package(tmp_path, older, overwrite=True)["action"] == "downgraded"
    assert config.get("plugin.demo.token") == "kept"
    assert leftovers(tmp_path) == ["demo"]
    config.close()


def test_a_failed_upgrade_rolls_back_to_the_previous_version(tmp_path: Path) -> None:
    install_package(tmp_path, hmap())
    corrupt = hmap(
        {"plugin.bin": "#!/bin/sh\n", "checksums.sha256": "0" * 64 + "  plugin.bin\n"},
        manifest={"name": "demo", "version": "2.0", "entry": "plugin.bin"},
    )
    with pytest.raises(PackageError, match="checksum mismatch"):
        install_package(tmp_path, corrupt, overwrite=True)
    assert plugin_details(tmp_path, "demo")["version"] == "1.0.0"
    assert leftovers(tmp_path) == ["demo"]


def test_remove_deletes_the_directory_settings_and_disabled_flag(tmp_path: Path) -> None:
    config = ConfigStore(tmp_path / "config.db")
    config.define_plugin("demo", ConfigDef(key="token", default=""))
    install_package(tmp_path, hmap())
    config.set("plugin.demo.token", "secret")
    set_plugin_enabled(config, "demo", False)
    assert "demo" in config.disabled_plugins()
    assert remove_plugin(tmp_path, "demo", config=config)["status"] == "removed"
    assert leftovers(tmp_path) == []
    assert config.source("plugin.demo.token") == "default"
    assert "demo" not in config.disabled_plugins()
    with pytest.raises(PackageError, match="not installed"):
        remove_plugin(tmp_path, "demo")
    config.close()


def test_versions_compare_numerically_per_segment() -> None:
    assert compare_versions("1.10", "1.9") == 1
    assert compare_versions("v1.0", "1.0.0") == 0
    assert compare_versions("1.0-beta", "1.0.1") == -1
