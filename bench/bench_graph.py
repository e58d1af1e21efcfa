"""Graph memory benchmark: recall on the in-memory mirror vs the same recall in SQLite.

For synthetic graphs (default 10k, 100k and 300k relations; ``--full`` adds 1M) with one
entity per three relations, random CJK names and uniformly random edges, it measures:

* commit throughput (triples/s) through ``GraphStore.commit`` in batches of 1000 (SQLite
  transaction + keyword terms + write-through mirror update);
* start-up, in a fresh process (median of three): time to open the store after a clean close (schema check +
  mirror load: entities with their stored keyword terms, and the relation columns, CSR adjacency and rank orders
  from the mirror file the close wrote beside the database) and the RSS the mirror adds; and the same open with
  the mirror file set aside (``load_from_database_s``: what an open after a crash costs — relation rows read from
  SQLite, CSR and ranks built);
* recall at depth 2 for a probe keyword (an entity name), 30 entities / 50 relations:

  - mirror end to end: ``GraphStore.recall([keyword])`` — keyword tokenised (tokenizer caches
    cleared first, so every probe is tokenised cold, as a new user message would be) →
    keyword index → seeds → level-by-level walk over the CSR adjacency → ranked,
    materialised ``RecallResult`` (every entity and relation object built, sentence and media
    digests attached);
  - mirror from seeds: the same from the seed ids (``GraphCache.recall``), i.e. exactly the
    work the SQLite side does; ``recall_first_p50_ms`` is each probe's first such recall, before
    the rows it returns were built by an earlier recall (the mirror keeps built rows; see
    ``memory/graph/recall.py``);
  - filtered: the mirror end to end as one person's turn reads it (``audience`` =
    ``Audience("person3")``; the relations come from ten persons, every fifth commit batch the
    household's, the rest private to its person), timed in the same run next to the same
    unfiltered recall (``recall_filtered_p50_ms`` / ``recall_unfiltered_p50_ms`` =
    ``filter_ratio``): seeds and every walk level are filtered by the relations' scope codes;
  - mirror from seeds with a write delta: the same after 2,000 more triples were committed
    (new edges in the delta, refreshed ones marked in the CSR; below the merge threshold);
  - SQLite: the same recall as SQL over the same file, *given the seed ids for free* (the
    mirror's keyword seeds, computed outside the timing — SQLite's LIKE scan would be far
    slower): a recursive CTE walks both directions to the same depth, then entities and
    relations are ranked with the same keys and limits and materialised with names,
    sentence text and media digests. Both variants (one statement per list, each re-running
    the walk; or the walk once and two follow-up queries over its ids) are run and the
    faster is reported.

  Both sides must return the same entities and relations (same order); the table's "same"
  column counts probes where they do. Two ratios: SQLite over the mirror from the same seeds
  (like for like), and SQLite over the mirror end to end (the mirror also tokenises and looks
  up the keyword; SQLite is handed the seeds).

``--runs N`` repeats everything per size (graph built anew each time) and reports the median
of each figure. Prints a markdown table; ``--json`` prints one JSON object instead.
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
from typing import Any

from homeagent_core.embeddings.tfidf import _segment
from homeagent_core.memory.graph.model import RecallResult
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.keywords import name_terms, warm_up
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, Audience

PERSONS = 10  # the graph's relations come from ten persons (see run_size)
CJK_POOL = [chr(0x4E00 + i) for i in range(3000)]
MAX_ENTITIES, MAX_RELATIONS = 30, 50

WALK = """
walk(id, d) AS (
    SELECT value, 0 FROM json_each(:seeds)
    UNION
    SELECT r.target_id, w.d + 1 FROM walk w JOIN relations r ON r.source_id = w.id
        WHERE w.d < :depth AND r.status = 'active'
    UNION
    SELECT r.source_id, w.d + 1 FROM walk w JOIN relations r ON r.target_id = w.id
        WHERE w.d < :depth AND r.status = 'active'
),
dist(id, d) AS (SELECT id, min(d) FROM walk GROUP BY id)"""

ENTITIES_OF = """
SELECT e.name, e.type, e.mention_count, dist.d, e.updated_at FROM dist JOIN entities e ON e.id = dist.id
ORDER BY dist.d, e.mention_count DESC, e.updated_at DESC, e.id LIMIT :max_entities"""

RELATIONS_OF = """
, near(id, d) AS (SELECT id, d FROM dist WHERE d < :depth),
touch(rid, d) AS (
    SELECT r.id, n.d FROM near n JOIN relations r ON r.source_id = n.id WHERE r.status = 'active'
    UNION ALL
    SELECT r.id, n.d FROM near n JOIN relations r ON r.target_id = n.id WHERE r.status = 'active'
),
rd(rid, d) AS (SELECT rid, min(d) FROM touch GROUP BY rid)
SELECT s.name, t.name, r.type, r.confidence, r.session, rd.d, r.updated_at, coalesce(sen.text, ''),
    (SELECT group_concat(digest, ',') FROM (SELECT b.digest AS digest FROM memory_block_edges be
        JOIN memory_blocks b ON b.id = be.block_id WHERE be.sentence_id = r.sentence_id ORDER BY b.digest))
FROM rd JOIN relations r ON r.id = rd.rid JOIN entities s ON s.id = r.source_id
    JOIN entities t ON t.id = r.target_id LEFT JOIN sentences sen ON sen.id = r.sentence_id
ORDER BY rd.d, r.confidence DESC, r.updated_at DESC, r.id LIMIT :max_relations"""

# Variant A: each list in one statement (the walk runs twice).
SQL_ENTITIES_A = "WITH RECURSIVE" + WALK + ENTITIES_OF
SQL_RELATIONS_A = "WITH RECURSIVE" + WALK + RELATIONS_OF
# Variant B: the walk once; the two lists over its result passed back as JSON.
SQL_WALK_B = "WITH RECURSIVE" + WALK + " SELECT json_group_array(json_array(id, d)) FROM dist"
DIST_B = "dist(id, d) AS (SELECT value ->> 0, value ->> 1 FROM json_each(:dist))"
SQL_ENTITIES_B = "WITH " + DIST_B + ENTITIES_OF
SQL_RELATIONS_B = "WITH " + DIST_B + RELATIONS_OF

Recall = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


def sql_recall_a(conn: sqlite3.Connection, seeds: list[int], depth: int) -> Recall:
    args = {
        "seeds": json.dumps(seeds),
        "depth": depth,
        "max_entities": MAX_ENTITIES,
        "max_relations": MAX_RELATIONS,
    }
    ents = conn.execute(SQL_ENTITIES_A, args).fetchall()
    rels = conn.execute(SQL_RELATIONS_A, args).fetchall()
    return ents, [(*r[:8], r[8].split(",") if r[8] else []) for r in rels]


def sql_recall_b(conn: sqlite3.Connection, seeds: list[int], depth: int) -> Recall:
    (dist,) = conn.execute(SQL_WALK_B, {"seeds": json.dumps(seeds), "depth": depth}).fetchone()
    args = {"dist": dist, "depth": depth, "max_entities": MAX_ENTITIES, "max_relations": MAX_RELATIONS}
    ents = conn.execute(SQL_ENTITIES_B, args).fetchall()
    rels = conn.execute(SQL_RELATIONS_B, args).fetchall()
    return ents, [(*r[:8], r[8].split(",") if r[8] else []) for r in rels]


def mirror_tuples(res: RecallResult) -> Recall:
    return (
        [(e.name, e.type, e.mention_count, e.distance, e.updated_at) for e in res.entities],
        [
            (r.source, r.target, r.type, r.confidence, r.session, r.distance, r.updated_at, r.sentence, r.media_digests)
            for r in res.relations
        ],
    )


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def load_probe(path: str, from_database: bool) -> None:
    """Open the store in a fresh process: load time and the RSS the mirror adds.

    ``from_database`` sets the mirror file aside for the open (and puts it back after).
    """
    saved = Path(path + ".mirror")
    aside = saved.with_name(saved.name + ".aside")
    if from_database and saved.exists():
        saved.rename(aside)
    try:
        warm_up()
        gc.collect()
        rss0 = rss_bytes()
        t0 = time.perf_counter()
        store = GraphStore(path, save_mirror_from=2**62 if from_database else 20_000)
        load_s = time.perf_counter() - t0
        gc.collect()
        print(json.dumps({"load_s": load_s, "rss_mib": (rss_bytes() - rss0) / 2**20, "from": store.mirror_loaded_from}))
        store.close()
    finally:
        if aside.exists():
            aside.rename(saved)


def make_names(count: int, rng: random.Random) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choices(CJK_POOL, k=rng.randint(2, 4))))
    return sorted(names)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn: Any, items: list[Any]) -> list[float]:
    fn(items[0])  # warm caches (statement cache, tokenizer cache)
    out: list[float] = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1000)
    return out


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
            # ten persons; every fifth batch is the household's, the rest private to its person
            batch = i // 1000
            visibility = HOUSEHOLD if batch % 5 == 0 else PRIVATE
            store.commit(
                triples[i : i + 1000], session="bench", person=f"person{batch % PERSONS}", visibility=visibility
            )
        commit_s = time.perf_counter() - t0
        stored = store.cache.stats()["relations"]
        store.close()
        del store, triples
        gc.collect()

        def probe(*extra: str) -> dict[str, Any]:
            command = [sys.executable, __file__, "--load-probe", str(path), *extra]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            return dict(json.loads(out.stdout))

        # alternately: after a clean close (the mirror file the close wrote) and with the file set aside
        probes_file, probes_db = [], []
        for _ in range(3):
            probes_file.append(probe())
            probes_db.append(probe("--from-database"))
        if stored >= 20_000 and any(p["from"] != "file" for p in probes_file):  # smaller graphs keep no file
            raise RuntimeError("an open after a clean close did not use the mirror file")
        load = {
            "load_s": statistics.median(p["load_s"] for p in probes_file),
            "rss_mib": statistics.median(p["rss_mib"] for p in probes_file),
            "load_from_database_s": statistics.median(p["load_s"] for p in probes_db),
            "rss_from_database_mib": statistics.median(p["rss_mib"] for p in probes_db),
        }
        store = GraphStore(path)

        probes = [names[rng.randrange(n_entities)] for _ in range(queries)]
        seeds = {name: store.cache.keyword_seeds([name]) for name in probes}
        # each probe's first recall: none of its rows were built before (the later timings reuse them)
        first_ms = []
        for name in probes:
            t = time.perf_counter()
            store.cache.recall(seeds[name], depth=depth)
            first_ms.append((time.perf_counter() - t) * 1000)
        results = {name: store.recall([name], depth=depth) for name in probes}
        name_terms.cache_clear()
        _segment.cache_clear()
        mirror_ms = timed(lambda name: store.recall([name], depth=depth), probes)
        # the same recall as one person's turn sees it (filtered inside the walk), same run, same probes
        reader = Audience("person3")
        for name in probes:
            store.recall([name], depth=depth, audience=reader)
        filtered_ms = timed(lambda name: store.recall([name], depth=depth, audience=reader), probes)
        unfiltered_ms = timed(lambda name: store.recall([name], depth=depth), probes)
        walk_ms = timed(lambda name: store.cache.recall(seeds[name], depth=depth), probes)
        conn = sqlite3.connect(path)
        sql_a = timed(lambda name: sql_recall_a(conn, seeds[name], depth), probes)
        sql_b = timed(lambda name: sql_recall_b(conn, seeds[name], depth), probes)
        same = sum(mirror_tuples(results[n]) == sql_recall_b(conn, seeds[n], depth) for n in probes)
        same_a = sum(mirror_tuples(results[n]) == sql_recall_a(conn, seeds[n], depth) for n in probes)
        conn.close()
        extra = [
            Triple(names[rng.randrange(n_entities)], rng.choice(["认识", "住在"]), names[rng.randrange(n_entities)])
            for _ in range(2000)
        ]
        store.commit(extra, session="bench-delta")
        delta_edges = store.cache.compact.n_delta
        delta_ms = timed(lambda name: store.cache.recall(seeds[name], depth=depth), probes)
        store.close()
    sql_ms = sql_a if statistics.median(sql_a) <= statistics.median(sql_b) else sql_b
    return {
        "relations": stored,
        "entities": n_entities,
        "commit_triples_per_s": relations / commit_s,
        "load_s": load["load_s"],
        "load_from_database_s": load["load_from_database_s"],
        "mirror_rss_mib": load["rss_mib"],
        "mirror_rss_from_database_mib": load["rss_from_database_mib"],
        "recall_p50_ms": statistics.median(mirror_ms),
        "recall_p99_ms": pct(mirror_ms, 0.99),
        "recall_from_seeds_p50_ms": statistics.median(walk_ms),
        "recall_from_seeds_p99_ms": pct(walk_ms, 0.99),
        "recall_first_p50_ms": statistics.median(first_ms),
        "recall_filtered_p50_ms": statistics.median(filtered_ms),
        "recall_unfiltered_p50_ms": statistics.median(unfiltered_ms),
        "filter_ratio": statistics.median(filtered_ms) / statistics.median(unfiltered_ms),
        "recall_with_delta_p50_ms": statistics.median(delta_ms),
        "delta_edges": delta_edges,
        "sqlite_recall_p50_ms": statistics.median(sql_ms),
        "sqlite_recall_p99_ms": pct(sql_ms, 0.99),
        "sqlite_variant_a_p50_ms": statistics.median(sql_a),
        "sqlite_variant_b_p50_ms": statistics.median(sql_b),
        "ratio_p50": statistics.median(sql_ms) / statistics.median(mirror_ms),
        "ratio_same_seeds_p50": statistics.median(sql_ms) / statistics.median(walk_ms),
        "seeds_per_recall": statistics.mean(len(s) for s in seeds.values()),
        "recalled_entities_mean": statistics.mean(len(r.entities) for r in results.values()),
        "recalled_relations_mean": statistics.mean(len(r.relations) for r in results.values()),
        "same_results_fraction": min(same, same_a) / len(probes),
    }


def median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over runs of one size."""
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--full", action="store_true", help="also 1M relations")
    parser.add_argument("--sizes", type=int, nargs="*", help="relation counts to run")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1, help="runs per size; each figure is their median")
    parser.add_argument("--load-probe", help=argparse.SUPPRESS)
    parser.add_argument("--from-database", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_probe:
        load_probe(args.load_probe, args.from_database)
        return 0
    warm_up()  # jieba's dictionary loads once per process; keep it out of the timings
    sizes = args.sizes or ([10_000, 100_000, 300_000] + ([1_000_000] if args.full else []))
    results = {n: median_run([run_size(n, args.queries, args.depth, seed=n) for _ in range(args.runs)]) for n in sizes}
    if args.json:
        out: dict[str, float | None] = {}
        for n, r in results.items():
            for key, value in r.items():
                out[f"{key}_{label(n)}"] = round(value, 4)
        for n, r in results.items():  # the headline names: SQLite over the mirror, same seeds; RSS in MB
            out[f"sqlite_over_mirror_{label(n)}"] = round(r["ratio_same_seeds_p50"], 2)
            out[f"mirror_rss_mb_{label(n)}"] = round(r["rss_mib"] if "rss_mib" in r else r["mirror_rss_mib"], 1)
        ref = results.get(100_000)  # the headline keys are null unless 100k was run
        out["recall_p50_ms_100k"] = round(ref["recall_p50_ms"], 4) if ref else None
        out["sqlite_recall_p50_ms_100k"] = round(ref["sqlite_recall_p50_ms"], 4) if ref else None
        out["load_s_100k"] = round(ref["load_s"], 4) if ref else None
        best = ref or results[max(results)]
        out["commit_triples_per_s"] = round(best["commit_triples_per_s"], 1)
        print(json.dumps(out, sort_keys=True))
        return 0
    print(
        f"graph recall at depth {args.depth}, {args.queries} queries per size, "
        f"top {MAX_ENTITIES} entities / {MAX_RELATIONS} relations; SQLite gets the mirror's seed ids\n"
    )
    print(
        "| relations | entities | commit triples/s | load s (file / database) | mirror RSS MiB "
        "| mirror end-to-end p50 / p99 ms | mirror from seeds p50 / p99 ms | from seeds with delta p50 ms "
        "| SQLite from seeds p50 / p99 ms "
        "| SQLite / mirror, same seeds | SQLite / mirror end-to-end | seeds | entities / relations per recall "
        "| same results |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results.values():
        print(
            f"| {r['relations']:,.0f} | {r['entities']:,.0f} | {r['commit_triples_per_s']:,.0f} "
            f"| {r['load_s']:.2f} / {r['load_from_database_s']:.2f} | {r['mirror_rss_mib']:.0f} "
            f"| {r['recall_p50_ms']:.3f} / {r['recall_p99_ms']:.3f} "
            f"| {r['recall_from_seeds_p50_ms']:.3f} / {r['recall_from_seeds_p99_ms']:.3f} "
            f"| {r['recall_with_delta_p50_ms']:.3f} "
            f"| {r['sqlite_recall_p50_ms']:.3f} / {r['sqlite_recall_p99_ms']:.3f} "
            f"| {r['ratio_same_seeds_p50']:.1f}× | {r['ratio_p50']:.1f}× | {r['seeds_per_recall']:.2f} "
            f"| {r['recalled_entities_mean']:.1f} / {r['recalled_relations_mean']:.1f} "
            f"| {r['same_results_fraction']:.0%} |"
        )
    print(
        "\nSQLite variants (p50 ms): "
        + ", ".join(
            f"{label(n)}: one statement per list {r['sqlite_variant_a_p50_ms']:.3f}, "
            f"walk once {r['sqlite_variant_b_p50_ms']:.3f}"
            for n, r in results.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
