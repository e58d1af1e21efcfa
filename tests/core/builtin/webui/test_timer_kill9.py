"""A timer that fired is not lost when ``homeagent serve`` is killed before its turn ended.

A real daemon over a loopback model: the timer's interrupt reaches the model, the model holds
its answer, the daemon gets SIGKILL. The timer must still be pending on disk, fire again after
the restart, and be gone once that turn answered.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from served import configure, fake_model, served

from homeagent_core.builtin.timer import TimerStore
from homeagent_core.datadir import plugin_data_dir


def _pending(data: Path) -> list[str]:
    store = TimerStore(plugin_data_dir(data, "timer") / "timers.db")
    try:
        return [t.message for t in store.pending()]
    finally:
        store.close()


async def test_a_timer_killed_mid_turn_fires_again_after_the_restart_and_only_then_is_gone(tmp_path: Path):
    async with fake_model() as (model, model_url):
        data = configure(tmp_path / "data", model_url)
        store = TimerStore(plugin_data_dir(data, "timer") / "timers.db")
        store.add(time.time() - 1, "turn the oven off")  # due while the daemon was down
        store.close()

        model.gate.clear()  # the model holds every answer: the timer's turn cannot end
        async with served(data) as daemon:
            async with asyncio.timeout(60):
                await model.arrived.wait()  # the interrupt was accepted and its turn asked the model
            await daemon.kill9()
        assert _pending(data) == ["turn the oven off"]

        asked = model.received
        model.gate.set()
        async with served(data) as daemon:
            async with asyncio.timeout(60):
                while _pending(data):
                    await asyncio.sleep(0.05)  # bounded by the timeout above
            await daemon.kill9()
        assert model.received > asked  # it fired again, and the row went only after that turn
