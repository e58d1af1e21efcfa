"""Document store at scale: start-up time and query latency with N documents.

Builds a store of ``--docs`` synthetic conversation-like documents (default 100,000; with
``--dim`` > 0 each gets a random unit vector, standing in for an embedding space), closes it,
then measures: opening with the lexical snapshot (a clean shutdown), opening without it (the
index rebuilt from the stored term blobs, as after ``kill -9``), and ``search`` latency
(lexical, or fused with a query vector).

    python bench/bench_documents.py [--docs 100000] [--dim 384] [--queries 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from homeagent_core.memory.documents import Document, DocumentStore  # noqa: E402
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput  # noqa: E402

_WORD_TEXT = (
    "dinner garden painting kids school trip camping beach mountain coffee book music guitar "
    "concert friend family weekend holiday work project meeting doctor running marathon yoga "
    "cat dog adoption support group pottery museum photo sunset lake city train flight hotel "
    "birthday party cake recipe dumplings tea rain snow summer winter spring autumn movie"
)
WORDS = _WORD_TEXT.split()
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "小王", "Tim", "John"]


class RandomSpace(EmbeddingProvider):
    """Random unit vectors (seeded by text): a stand-in space of the chosen dimension."""

    def __init__(self, dim: int) -> None:
        self.info = EmbeddingInfo("bench", f"random-{dim}", dim, f"bench{dim:07d}")

    async def embed(self, inputs: list[EmbedInput]) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(tuple(i.text for i in inputs))) % 2**32)
        out = rng.standard_normal((len(inputs), self.info.dimension)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 22)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 3)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    space = RandomSpace(args.dim) if args.dim else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "documents.db"
        store = DocumentStore(path, space)
        t0 = time.perf_counter()
        batch = 5000
        for start in range(0, args.docs, batch):
            docs = [
                Document(content=sentence(rng), source="bench", created_at=1e9 + i * 60)
                for i in range(start, min(args.docs, start + batch))
            ]
            await store.add_many(docs, batch_size=batch)
        build_s = time.perf_counter() - t0
        store.close()

        t0 = time.perf_counter()
        store = DocumentStore(path, space)
        open_snapshot_s = time.perf_counter() - t0
        store._db.close()
        Path(str(path) + ".lex.npz").unlink()
        t0 = time.perf_counter()
        store = DocumentStore(path, space)
        open_rebuild_s = time.perf_counter() - t0

        queries = [sentence(rng)[:60] for _ in range(args.queries)]
        qvecs = await space.embed([EmbedInput.of_text(q) for q in queries]) if space else None
        lat: list[float] = []
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            store.search(q, 10, query_vector=qvecs[i] if qvecs is not None else None)
            lat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        await store.add("Caroline: one more document after start-up", source="bench")
        insert_ms = (time.perf_counter() - t0) * 1000
        store.close()
    return {
        "docs": args.docs,
        "dim": args.dim,
        "build_s": round(build_s, 2),
        "open_with_snapshot_s": round(open_snapshot_s, 3),
        "open_rebuild_s": round(open_rebuild_s, 3),
        "query_p50_ms": round(statistics.median(lat), 3),
        "query_p90_ms": pct(lat, 0.9),
        "single_insert_ms": round(insert_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (0 = lexical only)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
        return
    print("| metric | value |\n|---|---:|")
    for key, value in result.items():
        print(f"| {key} | {value} |")


if __name__ == "__main__":
    main()
