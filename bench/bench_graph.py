"""Graph memory benchmark: networkx-mirror recall vs the same recall in SQLite.

For synthetic graphs (default 10k and 100k relations; ``--full`` adds 300k and 1M) with one
entity per three relations, random CJK names and uniformly random edges, it measures:

* commit throughput (triples/s) through ``GraphStore.commit`` in batches of 1000 (SQLite
  transaction + write-through mirror update);
* start-up: time to open the store (schema check + mirror load) and the RSS the mirror adds;
* recall at depth 2 seeded by one entity name: the mirror (``GraphStore.recall``) vs a
  recursive CTE in SQLite over the same file (seed by indexed exact name — SQLite's best case,
  the original used ``LIKE '%kw%'`` which is slower still), p50 / p99 and the ratio.

Prints a markdown table; ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from homeagent_core.memory.graph import GraphStore
from homeagent_core.memory.keywords import warm_up
from homeagent_sdk.types import Triple

CJK_POOL = [chr(0x4E00 + i) for i in range(3000)]

SQL_WALK = """
WITH RECURSIVE walk(id, d) AS (
    SELECT id, 0 FROM entities WHERE name = ?
    UNION
    SELECT r.target_id, w.d + 1 FROM walk w JOIN relations r ON r.source_id = w.id
        WHERE w.d < ? AND r.status = 'active'
    UNION
    SELECT r.source_id, w.d + 1 FROM walk w JOIN relations r ON r.target_id = w.id
        WHERE w.d < ? AND r.status = 'active'
)
SELECT e.id, e.name, e.type, e.mention_count, e.updated_at, min(w.d) AS dist
FROM walk w JOIN entities e ON e.id = w.id GROUP BY e.id
ORDER BY dist, e.mention_count DESC, e.updated_at DESC
"""


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def load_probe(path: str) -> None:
    """Open the store in a fresh process: load time and the RSS the mirror adds."""
    warm_up()
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    store = GraphStore(path)
    load_s = time.perf_counter() - t0
    gc.collect()
    print(json.dumps({"load_s": load_s, "rss_mib": (rss_bytes() - rss0) / 2**20}))
    store.close()


def make_names(count: int, rng: random.Random) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choices(CJK_POOL, k=rng.randint(2, 4))))
    return sorted(names)


def sql_recall(conn: sqlite3.Connection, name: str, depth: int) -> tuple[int, int]:
    rows = conn.execute(SQL_WALK, (name, depth, depth)).fetchall()
    inner = [r[0] for r in rows if r[5] < depth]
    rels: list[tuple[object, ...]] = []
    for i in range(0, len(inner), 500):
        chunk = inner[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rels += conn.execute(
            "SELECT r.id, s.name, t.name, r.type, r.confidence FROM relations r"
            " JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"
            f" WHERE r.status = 'active' AND (r.source_id IN ({marks}) OR r.target_id IN ({marks}))",
            chunk + chunk,
        ).fetchall()
    return len(rows), len({r[0] for r in rels})


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_size(relations: int, queries: int, depth: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    n_entities = max(10, relations // 3)
    names = make_names(n_entities, rng)
    triples = [
        Triple(
            names[rng.randrange(n_entities)],
            rng.choice(["认识", "住在", "喜欢", "属于"]),
            names[rng.randrange(n_entities)],
        )
        for _ in range(relations)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.db"
        store = GraphStore(path)
        t0 = time.perf_counter()
        for i in range(0, len(triples), 1000):
            store.commit(triples[i : i + 1000], session="bench")
        commit_s = time.perf_counter() - t0
        stored = store.cache.stats()["relations"]
        store.close()
        del store, triples
        gc.collect()

        probe = subprocess.run(
            [sys.executable, __file__, "--load-probe", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        load = json.loads(probe.stdout)
        store = GraphStore(path)

        probes = [names[rng.randrange(n_entities)] for _ in range(queries)]
        store.recall([probes[0]], depth=depth)  # warm the keyword tokenizer
        mirror_ms: list[float] = []
        sizes: list[int] = []
        for name in probes:
            t = time.perf_counter()
            res = store.recall([name], depth=depth)
            mirror_ms.append((time.perf_counter() - t) * 1000)
            sizes.append(len(res.entities))
        conn = sqlite3.connect(path)
        sql_recall(conn, probes[0], depth)
        sql_ms: list[float] = []
        for name in probes:
            t = time.perf_counter()
            sql_recall(conn, name, depth)
            sql_ms.append((time.perf_counter() - t) * 1000)
        conn.close()
        store.close()
    return {
        "relations": stored,
        "entities": n_entities,
        "commit_triples_per_s": relations / commit_s,
        "load_s": load["load_s"],
        "mirror_rss_mib": load["rss_mib"],
        "recall_p50_ms": statistics.median(mirror_ms),
        "recall_p99_ms": pct(mirror_ms, 0.99),
        "sqlite_recall_p50_ms": statistics.median(sql_ms),
        "sqlite_recall_p99_ms": pct(sql_ms, 0.99),
        "ratio_p50": statistics.median(sql_ms) / statistics.median(mirror_ms),
        "recalled_entities_p50": statistics.median(sizes),
    }


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--full", action="store_true", help="also 300k and 1M relations")
    parser.add_argument("--sizes", type=int, nargs="*", help="relation counts to run")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--load-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_probe:
        load_probe(args.load_probe)
        return 0
    warm_up()  # jieba's dictionary loads once per process; keep it out of the timings
    sizes = args.sizes or ([10_000, 100_000] + ([300_000, 1_000_000] if args.full else []))
    results = {n: run_size(n, args.queries, args.depth, seed=n) for n in sizes}
    if args.json:
        out: dict[str, float | None] = {}
        for n, r in results.items():
            for key, value in r.items():
                out[f"{key}_{label(n)}"] = round(value, 4)
        ref = results.get(100_000)  # the headline keys are null unless 100k was run
        out["recall_p50_ms_100k"] = round(ref["recall_p50_ms"], 4) if ref else None
        out["sqlite_recall_p50_ms_100k"] = round(ref["sqlite_recall_p50_ms"], 4) if ref else None
        out["load_s_100k"] = round(ref["load_s"], 4) if ref else None
        best = ref or results[max(results)]
        out["commit_triples_per_s"] = round(best["commit_triples_per_s"], 1)
        print(json.dumps(out, sort_keys=True))
        return 0
    print(f"graph recall at depth {args.depth}, {args.queries} queries per size\n")
    print(
        "| relations | entities | commit triples/s | load s | mirror RSS MiB | mirror p50 ms "
        "| mirror p99 ms | SQLite p50 ms | SQLite p99 ms | SQLite/mirror p50 | entities/recall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results.values():
        print(
            f"| {r['relations']:,.0f} | {r['entities']:,.0f} | {r['commit_triples_per_s']:,.0f} "
            f"| {r['load_s']:.2f} | {r['mirror_rss_mib']:.0f} | {r['recall_p50_ms']:.3f} "
            f"| {r['recall_p99_ms']:.3f} | {r['sqlite_recall_p50_ms']:.3f} "
            f"| {r['sqlite_recall_p99_ms']:.3f} | {r['ratio_p50']:.1f}× "
            f"| {r['recalled_entities_p50']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
