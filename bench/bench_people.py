"""Private memory's cost: a query filtered to one person's audience vs the unfiltered query, and
one tool-policy decision.

A household of 10 persons stores ``--items`` documents (default 100k) in one SQLite
``DocumentStore``: synthetic notes ("<name>: " + 8–22 words of a 60-word list) with
``--dim``-dimensional vectors of the SDK's deterministic ``FakeEmbedder``; 30 % are
``household``, the rest ``private`` to one of the 10 persons (round robin). ``--queries``
queries of three words are ranked (``search(text, 10)``: fused dense + lexical, the query
vectors computed beforehand) once for one person's audience and once for ``EVERYONE``,
interleaved, in the same run. Measured:

* ``recall_filtered_p50_ms_100k`` / ``recall_unfiltered_p50_ms_100k``: p50 of the two queries
  (the key names the 100k store; the ``items`` figure says what ran);
* ``filter_ratio``: filtered p50 / unfiltered p50 (target ≤ 1.2);
* ``filtered_full_top10``: share of filtered queries that returned 10 hits (every query has
  more than 10 visible matches, so 1.0 means the filter never cost a place);
* ``policy_check_us``: ``ToolPolicy.decide(principal, tool)`` per call for an adult (the
  registry read included), in µs.

    python bench/bench_people.py [--items 100000] [--dim 64] [--queries 300] [--json]
"""

from __future__ import annotations

import asyncio
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

from bench._harness import Row, arg_parser, emit, percentile  # noqa: E402
from homeagent_core.memory.documents.store import Document, DocumentStore  # noqa: E402
from homeagent_sdk.testing import FakeEmbedder  # noqa: E402
from homeagent_sdk.types import Principal  # noqa: E402
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, PRIVATE, Audience  # noqa: E402

_WORD_TEXT = (
    "apple river mountain garden painting music doctor school friend family holiday camping lake sunrise "
    "pottery bicycle kitchen recipe letter travel museum concert birthday wedding puppy kitten library "
    "adoption support group career interview ocean forest summer winter autumn spring morning evening "
    "coffee tea dinner breakfast market bakery station airport hospital teacher student neighbour city "
    "village country piano guitar violin"
)
WORDS = _WORD_TEXT.split()
PERSONS = [f"person{i}" for i in range(10)]
HOUSEHOLD_SHARE = 0.3


def corpus(n: int, seed: int = 7) -> list[Document]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        person = PERSONS[i % len(PERSONS)]
        visibility = HOUSEHOLD if rng.random() < HOUSEHOLD_SHARE else PRIVATE
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 22)))
        docs.append(Document(content=f"{person}: {words}", source=person, created_at=1.7e9 + i * 60.0,
                             person=person, visibility=visibility))
    return docs


async def build(path: Path, n: int, dim: int) -> DocumentStore:
    store = DocumentStore(path, FakeEmbedder(dim) if dim else None)
    docs = corpus(n)
    for start in range(0, n, 5000):
        await store.add_many(docs[start : start + 5000], batch_size=5000)
    return store


def policy_us(calls: int) -> float:
    from homeagent_core.agent.people import PeopleRegistry
    from homeagent_core.agent.policy import ToolPolicy

    with tempfile.TemporaryDirectory() as tmp:
        people = PeopleRegistry.open(tmp)
        people.ensure_owner("owner")
        people.add("mum", "adult")
        policy = ToolPolicy(people)
        principal = Principal(person="mum", role="adult", door="webui")
        tools = ["cmd_run", "memory_recall", "web_fetch", "plugin_install", "timer_set"]
        for tool in tools:
            policy.decide(principal, tool)
        t0 = time.perf_counter()
        for i in range(calls):
            policy.decide(principal, tools[i % len(tools)])
        elapsed = time.perf_counter() - t0
        people.close()
    return elapsed / calls * 1e6


async def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--items", type=int, default=100_000, help="documents stored")
    parser.add_argument("--dim", type=int, default=64, help="vector dimension (0: lexical only)")
    parser.add_argument("--queries", type=int, default=300, help="queries of each kind")
    parser.add_argument("--policy-calls", type=int, default=20_000, help="policy decisions timed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store = await build(Path(tmp) / "documents.db", args.items, args.dim)
        load_s = time.perf_counter() - t0
        rng = random.Random(11)
        texts = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
        qvecs: list[Any] = [None] * len(texts)
        if args.dim and store.embedder is not None:
            qvecs = list(np.asarray(await store.embedder.embed_texts(texts), dtype=np.float32))
        reader = Audience(person=PERSONS[3])
        for text, vec in zip(texts[:20], qvecs[:20], strict=True):  # warm the caches of both paths
            store.search(text, 10, audience=reader, query_vector=vec)
            store.search(text, 10, audience=EVERYONE, query_vector=vec)
        filtered: list[float] = []
        unfiltered: list[float] = []
        full = 0
        for text, vec in zip(texts, qvecs, strict=True):
            t = time.perf_counter()
            hits = store.search(text, 10, audience=reader, query_vector=vec)
            filtered.append(time.perf_counter() - t)
            full += len(hits) == 10
            if any(h.document.person != PERSONS[3] and h.document.visibility != HOUSEHOLD for h in hits):
                raise SystemExit("a filtered query returned a document its reader may not see")
            t = time.perf_counter()
            store.search(text, 10, audience=EVERYONE, query_vector=vec)
            unfiltered.append(time.perf_counter() - t)
        store.close()

    f50, u50 = statistics.median(filtered) * 1e3, statistics.median(unfiltered) * 1e3
    policy = policy_us(args.policy_calls)
    rows = [
        Row.of(f"query as {PERSONS[3]} (filtered)", filtered),
        Row.of("query as EVERYONE (unfiltered)", unfiltered),
        Row(name="policy decide", **{"p50 (us)": policy}, n=args.policy_calls),
    ]
    figures = {
        "items": args.items,
        "dim": args.dim,
        "load_s": round(load_s, 1),
        "recall_filtered_p50_ms_100k": round(f50, 3),
        "recall_filtered_p90_ms_100k": round(percentile(filtered, 90) * 1e3, 3),
        "recall_unfiltered_p50_ms_100k": round(u50, 3),
        "filter_ratio": round(f50 / u50, 3),
        "filtered_full_top10": round(full / len(texts), 3),
        "policy_check_us": round(policy, 2),
    }
    emit(args, f"Private memory: filtered vs unfiltered recall ({args.items} documents, 10 persons)", rows, figures)


if __name__ == "__main__":
    asyncio.run(main())
