"""Resident sub-agents and backlog triage with a zero-latency FakeModel.

Cases:

* ``resident_send``          — ``await residents.send(name, text, wait=True)``: queue, the
  resident's own turn, persistence of its state (fsync'd) and the reply, data dir on disk;
* ``resident_send_memory``   — the same without a data dir (no persistence);
* ``residents_100``          — RSS of the process with 100 idle residents (and the growth);
* ``triage_first_answer``    — from the moment the busy turn crosses ``offload_after`` to the
  first triage reply delivered for a waiting input.

Prints a markdown table (``--json``: one JSON object with ``resident_send_p50_ms``,
``resident_send_memory_p50_ms``, ``residents_100_rss_mb``, ``residents_100_rss_delta_mb``,
``triage_first_answer_ms`` and the other figures).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import Row, arg_parser, emit, rss_mb

from homeagent_core.agent.kernel import Kernel, KernelSettings
from homeagent_core.agent.settings import ResidentLimits
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, ToolCallReply

OFFLOAD_AFTER = 0.05


class LongJob:
    """A tool that holds the main turn until released."""

    name = "bench_long_job"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        async def long_job() -> str:
            """Hold the agent."""
            self.started.set()
            await self.release.wait()
            return "done"

        registry.add(long_job)


async def _kernel(
    model: Any, data_dir: Path | None, *plugins: object, settings: KernelSettings | None = None
) -> tuple[Kernel, EventBus]:
    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=plugins)
    bus = EventBus()
    kernel = Kernel(host, bus, model, settings=settings or KernelSettings(), data_dir=data_dir)
    await kernel.start()
    return kernel, bus


async def _close(kernel: Kernel, bus: EventBus) -> None:
    await kernel.aclose()
    await bus.aclose()


async def bench_send(n: int, data_dir: Path | None) -> list[float]:
    limits = ResidentLimits(report=False, turns_per_hour=n + 100)
    kernel, bus = await _kernel(FakeModel(default="ok"), data_dir, settings=KernelSettings(residents=limits))
    try:
        await kernel.residents.create("bench", "answers quickly")
        for i in range(5):
            await kernel.residents.send("bench", f"warm {i}", wait=True)
        samples = []
        for i in range(n):
            t0 = time.perf_counter()
            await kernel.residents.send("bench", f"message {i}", wait=True)
            samples.append(time.perf_counter() - t0)
        return samples
    finally:
        await _close(kernel, bus)


async def bench_idle(count: int, data_dir: Path) -> tuple[float, float]:
    kernel, bus = await _kernel(
        FakeModel(default="ok"), data_dir, settings=KernelSettings(residents=ResidentLimits(max_residents=count))
    )
    try:
        before = rss_mb()
        for i in range(count):
            await kernel.residents.create(f"idle{i}", f"helper number {i}")
        await asyncio.sleep(0)
        after = rss_mb()
        return after, after - before
    finally:
        await _close(kernel, bus)


async def bench_triage(n: int) -> list[float]:
    job = LongJob()

    def responder(request: dict[str, Any]) -> Any:
        head = str(request["messages"][0]["content"])
        if "分流助手" in head:
            return "answer from memory"
        if any(m["role"] == "tool" for m in request["messages"]):
            return "finished"
        return ToolCallReply("long_job", {})

    settings = KernelSettings(offload_after=OFFLOAD_AFTER)
    kernel, bus = await _kernel(FakeModel(responder=responder), None, job, settings=settings)
    samples = []
    try:
        for i in range(n):
            job.started.clear()
            job.release.clear()
            main = asyncio.ensure_future(kernel.ask(f"long task {i}", "owner"))
            await asyncio.wait_for(job.started.wait(), 10)
            turn = kernel.turn
            assert turn is not None
            waiting = asyncio.ensure_future(kernel.ask(f"quick question {i}", "member"))
            reply = await asyncio.wait_for(waiting, 10)
            answered = time.monotonic()
            assert reply.answered_by == "triage", reply
            samples.append(answered - (turn.started + OFFLOAD_AFTER))
            job.release.set()
            await asyncio.wait_for(main, 10)
        return samples
    finally:
        await _close(kernel, bus)


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="messages per send case")
    parser.add_argument("--triage", type=int, default=20, help="triage rounds")
    parser.add_argument("--residents", type=int, default=100, help="idle residents")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        send = asyncio.run(bench_send(args.n, Path(tmp) / "send"))
        send_memory = asyncio.run(bench_send(args.n, None))
        rss, delta = asyncio.run(bench_idle(args.residents, Path(tmp) / "idle"))
        triage = asyncio.run(bench_triage(args.triage))
    rows = [
        Row.of("resident_send (data dir, fsync'd state)", send),
        Row.of("resident_send_memory (no data dir)", send_memory),
        Row.of("triage_first_answer (from offload threshold)", triage),
        {"name": f"residents_{args.residents} idle", "rss (MiB)": rss, "rss growth (MiB)": delta},
    ]
    figures = {
        "resident_send_p50_ms": statistics.median(send) * 1e3,
        "resident_send_memory_p50_ms": statistics.median(send_memory) * 1e3,
        "residents_100_rss_mb": rss,
        "residents_100_rss_delta_mb": delta,
        "triage_first_answer_ms": statistics.median(triage) * 1e3,
        "residents": args.residents,
    }
    emit(args, "Resident sub-agents and backlog triage", rows, figures)


if __name__ == "__main__":
    main()
