from __future__ import annotations

import asyncio
import json
from pathlib import Path

from homeagent_core.builtin.healthcheck import read_history
from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk.errors import ProviderError

HC = "homeagent_core.builtin.healthcheck"


async def test_a_check_reports_the_real_state_of_every_part(harness):
    h = await harness([HC, "homeagent_core.builtin.cfgmgr"], model=FakeModel(default="OK"), memory=True)
    point = json.loads(await h.ok("healthcheck"))
    assert point["ok"] is True and point["failing"] == []
    assert {"cfgmgr", "healthcheck"} <= set(point["plugins"]["started"]) and point["plugins"]["failed"] == []
    assert point["tools"]["count"] == len(h.tools) and point["tools"]["by_plugin"]["cfgmgr"] == 7
    assert point["kernel"]["running"] is True and point["kernel"]["process"]["rss_mb"] > 0
    stores = {s["file"]: s for s in point["memory"]["stores"]}
    assert stores and all(s["ok"] for s in stores.values())
    assert point["memory"]["writable"] and point["memory"]["disk_free_mb"] > 0
    assert point["llm"]["ok"] is True and point["llm"]["answer"] == "OK" and point["llm"]["latency_ms"] >= 0
    assert h.model.requests[-1]["messages"][0]["content"].startswith("健康检查")


async def test_a_corrupt_memory_database_and_a_dead_model_are_reported_as_failing(harness):
    h = await harness([HC], model=FakeModel([ProviderError("401 from upstream")]))
    memory = h.app.data_dir / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "broken.db").write_bytes(b"this is not a database" * 100)
    point = json.loads(await h.ok("healthcheck"))
    assert point["ok"] is False and set(point["failing"]) == {"memory", "llm"}
    (broken,) = [s for s in point["memory"]["stores"] if s["file"] == "broken.db"]
    assert broken["ok"] is False and "not a database" in broken["error"]
    assert "401 from upstream" in point["llm"]["error"]


async def test_tool_reports_are_kept_and_validated(harness):
    h = await harness([HC])
    assert await h.ok("healthcheck_report", tool_name="healthcheck_kernel", status="fail", detail="boom") == (
        "recorded healthcheck_kernel: fail"
    )
    tools = json.loads(await h.ok("healthcheck_tools"))
    assert tools["ok"] is False and tools["reported_failing"]["healthcheck_kernel"]["detail"] == "boom"
    assert "unknown tool" in await h.fails("healthcheck_report", tool_name="nope", status="ok")
    assert "must be one of" in await h.fails("healthcheck_report", tool_name="healthcheck_kernel", status="meh")
    one = json.loads(await h.ok("healthcheck", plugin="healthcheck"))
    assert one["plugin"]["status"] == "started" and "healthcheck_kernel" in one["reports"]
    assert "unknown plugin" in await h.fails("healthcheck", plugin="ghost")


async def test_history_survives_a_restart_and_is_readable_from_the_data_dir(harness, tmp_path: Path):
    data = tmp_path / "hc"
    first = await harness([HC], data=data)
    await first.ok("healthcheck")
    await first.ok("healthcheck")
    await first.stop()
    assert len(read_history(data)["points"]) == 2
    second = await harness([HC], data=data)
    perf = json.loads(await second.ok("healthcheck_perf"))
    assert len(perf) == 2 and perf[0]["time"] >= perf[1]["time"]


async def test_checks_run_periodically_and_only_the_last_points_are_kept(harness):
    h = await harness([HC], {"plugin.healthcheck.auto_interval": "50ms", "plugin.healthcheck.perf_history": 3})
    plugin = h.plugin("healthcheck")
    async with asyncio.timeout(20):
        while len(read_history(h.app.data_dir)["points"]) < 3 or len(plugin.points) < 3:
            await asyncio.sleep(0.05)
        first = plugin.points[0]["time"]
        while plugin.points[0]["time"] == first:
            await asyncio.sleep(0.05)
    assert len(plugin.points) == 3
