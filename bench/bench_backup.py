"""Backup and restore of a data directory at scale, and what a running backup costs the turns.

Builds a data directory through a real agent (``FakeModel`` replies, the default embedding
tier): ``--docs`` documents (default 100,000; "<name>: " + 8–22 words from a 60-word list),
500 graph triples, 20 knowledge entries, 20 media blobs and 20 turns. Then:

* ``backup_s`` — ``create_backup`` of that directory (plain archive, in this process, no daemon);
* ``restore_s`` — ``restore_backup`` of the archive into a new directory (every hash checked,
  every database opened with ``PRAGMA quick_check`` and its rows counted, then renamed into place);
  ``*_encrypted`` — the same with a passphrase (scrypt, ChaCha20-Poly1305);
* ``turn_p95_ratio_during_backup`` — the agent (100k documents, memory on) answers turns back to
  back: ``--turns`` turns alone, then as many turns while ``homeagent backup create`` runs as a
  separate process on the same directory (as an operator or cron job would; back to back until
  there are enough turns); the ratio of the p95 turn latencies (target ≤ 1.5).
  ``turn_p95_ratio_during_scheduled_backup`` is the same with the backup run by the built-in
  scheduler's path (``create_backup`` on a lower-priority worker thread of the agent's process).

``--json`` prints ``backup_s_<size>``, ``restore_s_<size>``, ``archive_mb_<size>``, their
``*_encrypted`` twins,
``turn_p95_ratio_during_backup`` and ``turn_p95_ratio_during_scheduled_backup`` (size: ``100k``
for 100,000 documents, else the count).

    python bench/bench_backup.py [--docs 100000] [--turns 60] [--json]
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _harness import Row, arg_parser, emit, percentile  # noqa: E402

from homeagent_core.library import Agent  # noqa: E402
from homeagent_core.memory.documents.store import Document  # noqa: E402
from homeagent_core.ops.backup import create_backup, lower_priority  # noqa: E402
from homeagent_core.ops.restore import restore_backup  # noqa: E402
from homeagent_sdk.testing import FakeModel  # noqa: E402
from homeagent_sdk.types import Triple  # noqa: E402

_WORD_TEXT = (
    "dinner garden painting kids school trip camping beach mountain coffee book music guitar "
    "concert friend family weekend holiday work project meeting doctor running marathon yoga "
    "cat dog adoption support group pottery museum photo sunset lake city train flight hotel "
    "birthday party cake recipe dumplings tea rain snow summer winter spring autumn movie"
)
WORDS = _WORD_TEXT.split()
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "小王", "Tim", "John"]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 22)))


def size_tag(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 and n >= 1000 else str(n)


async def build(agent: Agent, docs: int) -> None:
    rng = random.Random(7)
    store = agent.app.memory.documents
    batch = 5000
    for start in range(0, docs, batch):
        chunk = [
            Document(content=sentence(rng), source="bench", created_at=1e9 + i * 60)
            for i in range(start, min(docs, start + batch))
        ]
        await store.add_many(chunk, batch_size=batch)
    for i in range(0, 500, 50):
        await agent.memory.commit([Triple(f"person{j}", "likes", rng.choice(WORDS)) for j in range(i, i + 50)])
    for i in range(20):
        await agent.knowledge.create(f"home/note{i}", sentence(rng))
        await agent.app.services.media.put(os.urandom(64 * 1024), "image/jpeg", name=f"photo{i}.jpg")
    for i in range(20):
        await agent.ask(f"turn {i}: {sentence(rng)}")


async def turn_times(agent: Agent, rng: random.Random, *, count: int | None = None, until: Any = None) -> list[float]:
    times: list[float] = []
    while (count is not None and len(times) < count) or (until is not None and not until()):
        t0 = time.perf_counter()
        await agent.ask(sentence(rng))
        times.append(time.perf_counter() - t0)
    return times


def _scheduled_backup(data: Path, folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    lower_priority()
    create_backup(data, folder)
    shutil.rmtree(folder)


async def run(docs: int, turns: int) -> tuple[list[Row], dict[str, Any]]:
    tag = size_tag(docs)
    figures: dict[str, Any] = {"docs": docs}
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-backup-") as tmp:
        data = Path(tmp) / "data"
        rng = random.Random(11)
        agent = Agent(data, provider=FakeModel(default="ok"), load_entrypoints=False)
        await agent.start()
        try:
            t0 = time.perf_counter()
            await build(agent, docs)
            figures["build_s"] = round(time.perf_counter() - t0, 1)
            await turn_times(agent, rng, count=5)  # warm up
            alone = await turn_times(agent, rng, count=turns)

            env = {**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "PYTHONPATH": str(REPO)}
            during: list[float] = []
            live: list[float] = []
            while len(during) < turns:  # back-to-back backups until as many turns as alone
                out = Path(tmp) / "live"
                out.mkdir(exist_ok=True)
                command = ["backup", "create", "--data", str(data), "--out", str(out)]
                proc = subprocess.Popen(
                    [sys.executable, "-m", "homeagent_core.cli", *command],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                t0 = time.perf_counter()
                during += await turn_times(agent, rng, until=lambda p=proc: p.poll() is not None)
                live.append(time.perf_counter() - t0)
                _, err = proc.communicate()
                if proc.returncode != 0:
                    raise SystemExit(f"backup create failed: {err.decode()}")
                shutil.rmtree(out)
            live_s = statistics.median(live)

            during_thread: list[float] = []
            while len(during_thread) < turns:  # the scheduler's path: a lower-priority worker thread
                task = asyncio.create_task(asyncio.to_thread(_scheduled_backup, data, Path(tmp) / "thread"))
                during_thread += await turn_times(agent, rng, until=task.done)
                await task
        finally:
            await agent.aclose()

        t0 = time.perf_counter()
        archive, manifest = create_backup(data, Path(tmp) / "quiet.tar")
        figures[f"backup_s_{tag}"] = round(time.perf_counter() - t0, 2)
        figures[f"archive_mb_{tag}"] = round(archive.stat().st_size / 2**20, 1)
        t0 = time.perf_counter()
        restore_backup(archive, Path(tmp) / "restored")
        figures[f"restore_s_{tag}"] = round(time.perf_counter() - t0, 2)
        figures["documents_in_archive"] = manifest["stores"]["memory/documents.db"]["tables"]["documents"]
        t0 = time.perf_counter()
        sealed, _ = create_backup(data, Path(tmp) / "sealed.tar.enc", passphrase="bench passphrase")
        figures[f"backup_s_{tag}_encrypted"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        restore_backup(sealed, Path(tmp) / "restored-sealed", passphrase="bench passphrase")
        figures[f"restore_s_{tag}_encrypted"] = round(time.perf_counter() - t0, 2)

    p95 = percentile(alone, 95)
    figures["turn_p95_ms_alone"] = round(p95 * 1e3, 1)
    figures["turn_p95_ms_during_backup"] = round(percentile(during, 95) * 1e3, 1)
    figures["turns_during_backup"] = len(during)
    figures["live_backup_s_median"] = round(live_s, 2)
    figures["backups_during_turns"] = len(live)
    figures["turn_p95_ratio_during_backup"] = round(percentile(during, 95) / p95, 2)
    figures["turn_p95_ratio_during_scheduled_backup"] = round(percentile(during_thread, 95) / p95, 2)
    figures["turns_during_scheduled_backup"] = len(during_thread)
    rows.append(Row.of("turn, alone", alone))
    rows.append(Row.of("turn, during `backup create` (process)", during))
    rows.append(Row.of("turn, during scheduled backup (thread)", during_thread))
    return rows, figures


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    rows, figures = asyncio.run(run(args.docs, args.turns))
    emit(args, f"Backup and restore, {args.docs:,} documents", rows, figures)


if __name__ == "__main__":
    main()
