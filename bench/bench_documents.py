"""Document store at scale: start-up, crash recovery, query latency and quality with N documents.

Two corpora of ``--docs`` documents (default 100,000; with ``--dim`` > 0 each gets a random
unit vector, standing in for an embedding space):

* ``synthetic`` — "<name>: " + 8–22 words drawn uniformly from a 60-word list. Every
  character gram is common, so every posting list is long: the worst case for the lexical
  index (about 210 grams per document).
* ``locomo`` — the turns of the LoCoMo conversations (``shared/data/locomo-dev``) stored once
  as they are, then repeated with variations until ``--docs``: other speaker names (also
  inside the text), about a fifth of the words replaced by words drawn from the corpus's own
  word frequencies, words dropped or inserted, digits changed, sentences reordered. Real
  vocabulary with a natural long tail (thousands of distinct words).

For each corpus the script builds a store and closes it, then measures: opening after a clean
close (snapshot current), and in three fresh processes opening plus answering one fused query
(``cold_first_query_*``; the ``--json`` headline ``cold_first_query_s_100k`` is the slower of the
clean-close and ``kill -9`` cases); opening after ``kill -9`` of a real writer process that added
``--tail`` documents after the last snapshot without closing (the most a crash leaves to
re-index while background snapshots keep up; defaults to just under the snapshot threshold);
opening with no usable snapshot at all (every document's stored terms re-indexed);
``search`` latency fused with a query vector and lexical only; single ``add`` latency. On the
``locomo`` corpus the LoCoMo questions are the queries, and the lexical top 10 of the default
(budgeted) scoring is compared with exact BM25 over every posting: overlap of the two top-10
lists and evidence recall@10 of the planted original conversations in the 100k-document store
(skipped at 1M, where exact BM25 over every posting takes minutes). Last, a fresh process opens
the store from the files beside the database and answers the same queries fused
(``serve_query_fused_p50_ms``); its resident memory afterwards is ``rss_mb`` (the ``--json``
headline ``rss_mb_<size>``): what a restarted daemon holds, split into ``serve_rss_anon_mb``
(memory the process allocated) and ``serve_rss_file_mb`` (pages of the mapped vector file; the
lexical snapshot is read, not mapped).
``rss_mb_bench_process`` is the benchmark process itself after rebuilding the index in memory.
The dense leg alone (the scan the fused ranking makes for a query vector) is timed per query
too: ``query_dense_p50_ms`` (the ``--json`` headline ``dense_p50_ms_<size>``) and
``serve_query_dense_p50_ms``; ``vector_file_mb`` is the vector file's size.
``loop_stall_max_ms`` (the ``--json`` headline ``loop_stall_max_ms_<size>``) is the longest the
event loop went without running a 1 ms timer while 8 callers each awaited ``query`` (fused, top
10) for their share of 64 queries and a writer awaited ``add`` for 100 documents one at a time:
what a turn's recall, a tool and the web UI searching while the context archives cost every other
task. Below 1M documents, the fused and dense-only top 10 are compared with an exact float32 scan of every stored vector
(``*_top10_overlap_with_float_pct``).

``--full`` runs 1,000,000 documents of the ``locomo`` corpus (generated under a temporary
folder, about 10 GB of disk; tens of minutes): the ``--json`` keys become ``query_p50_ms_1m``,
``rss_mb_1m``, ``cold_first_query_s_1m`` and ``insert_docs_per_s``. ``make bench`` runs the
default 100k.

    python bench/bench_documents.py [--corpus both|synthetic|locomo] [--docs 100000 | --full]
        [--dim 384] [--queries 200] [--tail N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_locomo import DEFAULT_DATA, load_conversation  # noqa: E402

from homeagent_core.lexical.buckets import char_ngrams  # noqa: E402
from homeagent_core.memory.documents.ranking import DENSE_PREFILTER  # noqa: E402
from homeagent_core.memory.documents.store import Document, DocumentStore  # noqa: E402
from homeagent_core.memory.documents.vectors import DenseRows  # noqa: E402
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput  # noqa: E402
from homeagent_sdk.visibility import EVERYONE  # noqa: E402

_WORD_TEXT = (
    "dinner garden painting kids school trip camping beach mountain coffee book music guitar "
    "concert friend family weekend holiday work project meeting doctor running marathon yoga "
    "cat dog adoption support group pottery museum photo sunset lake city train flight hotel "
    "birthday party cake recipe dumplings tea rain snow summer winter spring autumn movie"
)
WORDS = _WORD_TEXT.split()
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "小王", "Tim", "John"]
_NAME_TEXT = (
    "Aaron Abby Adam Aisha Alan Alex Alice Amir Ana Andre Anna Ben Bella Carl Chloe Chris Dan "
    "Dana Dev Diego Ella Emma Eric Eva Felix Fiona Frank Grace Hana Harry Ivan Iris Jack Jade "
    "Jake James Jane Jin Kai Kate Leo Lena Liam Lily Lucas Lucy Mark Maya Mia Mike Nadia Nina "
    "Noah Olga Omar Oscar Paul Priya Quinn Raj Rosa Ryan Sam Sara Sean Sofia Tara Tom Uma Vera "
    "Will Yara Yuki Zoe 李明 王芳 张伟 刘洋 陈静 杨帆 赵磊 黄丽"
)
MORE_NAMES = _NAME_TEXT.split()
_TOKEN = re.compile(r"\S+")
_WRITER = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/bench")
from bench_documents import RandomSpace
from homeagent_core.memory.documents.store import Document, DocumentStore

async def main(path, docs_file, dim):
    store = DocumentStore(path, RandomSpace(dim) if dim else None)
    docs = [Document(**d) for d in json.loads(open(docs_file, encoding="utf-8").read())]
    for i in range(0, len(docs), 5000):
        await store.add_many(docs[i : i + 5000], batch_size=5000)
    print("acknowledged", len(docs), flush=True)
    await asyncio.Event().wait()

asyncio.run(main(sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


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


# -- corpora ---------------------------------------------------------------------------------


class SyntheticCorpus:
    """Uniform draws from 60 words: the worst case (every gram common)."""

    name = "synthetic"

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)

    def documents(self, n: int, start: int = 0) -> list[Document]:
        return [
            Document(content=sentence(self.rng), source="bench", created_at=1e9 + i * 60)
            for i in range(start, start + n)
        ]

    def queries(self, n: int) -> list[str]:
        return [sentence(self.rng)[:60] for _ in range(n)]


class LocomoCorpus:
    """LoCoMo turns once as they are (the planted conversations), then varied repetitions."""

    name = "locomo"

    def __init__(self, data: Path, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.conversations = []
        for path in sorted(data.glob("*.json")):
            turns, questions = load_conversation(path)
            speakers = sorted({t[1].split(":", 1)[0] for t in turns})
            self.conversations.append((path.stem, turns, questions, speakers))
        if not self.conversations:
            raise SystemExit(f"no LoCoMo .json files in {data}")
        counts = Counter(
            w for _, turns, _, _ in self.conversations for _, text, _ in turns
            for w in _TOKEN.findall(text.split(":", 1)[1])
        )
        self.vocab = list(counts)
        self.cum_weights = list(itertools.accumulate(counts.values()))
        self.originals = [
            Document(
                content=text, source=f"locomo:{stem}", created_at=when,
                meta={"dia_id": dia, "conversation": stem},
            )
            for stem, turns, _, _ in self.conversations for dia, text, when in turns
        ]
        self.turn_count = len(self.originals)

    def _vary(self, text: str, speakers: list[str], names: dict[str, str]) -> str:
        rng = self.rng
        speaker, body = text.split(":", 1)
        for old in speakers:
            body = body.replace(old, names[old])
        sentences = re.split(r"(?<=[.!?])\s+", body.strip())
        if len(sentences) > 1 and rng.random() < 0.3:
            rng.shuffle(sentences)
        words: list[str] = []
        for word in _TOKEN.findall(" ".join(sentences)):
            roll = rng.random()
            if roll < 0.05:
                continue
            if roll < 0.22:
                word = rng.choices(self.vocab, cum_weights=self.cum_weights)[0]
            elif roll < 0.27:
                words.append(rng.choices(self.vocab, cum_weights=self.cum_weights)[0])
            words.append(re.sub(r"\d", lambda _: str(rng.randint(0, 9)), word))
        return f"{names[speaker]}: " + " ".join(words or [rng.choice(self.vocab)])

    def documents(self, n: int, start: int = 0) -> list[Document]:
        out: list[Document] = []
        index = start
        while len(out) < n:
            rep, pos = divmod(index, self.turn_count)
            if rep == 0:
                out.append(self.originals[pos])
            else:
                conv_index, offset = 0, pos
                while offset >= len(self.conversations[conv_index][1]):
                    offset -= len(self.conversations[conv_index][1])
                    conv_index += 1
                stem, turns, _, speakers = self.conversations[conv_index]
                if offset == 0 or not hasattr(self, "_names"):
                    self._names = dict(zip(speakers, self.rng.sample(MORE_NAMES, len(speakers)), strict=True))
                _, text, when = turns[offset]
                out.append(
                    Document(
                        content=self._vary(text, speakers, self._names),
                        source=f"variant:{rep}:{stem}",
                        created_at=when + rep * 86400 * 400,
                    )
                )
            index += 1
        return out

    def queries(self, n: int) -> list[str]:
        qs = [qa["question"] for _, _, questions, _ in self.conversations for qa in questions]
        return (qs * (n // len(qs) + 1))[: max(n, len(qs))]


# -- measurements ----------------------------------------------------------------------------


def _open_s(path: Path, space: RandomSpace | None) -> tuple[float, DocumentStore]:
    t0 = time.perf_counter()
    store = DocumentStore(path, space)
    return round(time.perf_counter() - t0, 3), store


def _abandon(store: DocumentStore) -> None:
    """Drop a store without flushing anything (its background snapshot may finish)."""
    store._join_snapshot()
    store._closed = True
    store._sql.db.close()


def _kill_writer(path: Path, docs: list[Document], dim: int, workdir: Path) -> None:
    """Add ``docs`` in a real subprocess, then ``kill -9`` it once they are acknowledged."""
    docs_file = workdir / "tail.json"
    docs_file.write_text(
        json.dumps([{k: v for k, v in d.to_dict().items() if k != "id"} for d in docs]),
        encoding="utf-8",
    )
    script = workdir / "writer.py"
    script.write_text(_WRITER, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(REPO), str(path), str(docs_file), str(dim)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if not line.startswith("acknowledged"):
        raise SystemExit(f"the writer process failed before acknowledging: {line!r}")


async def loop_stall_ms(store: DocumentStore, queries: list[str], docs: list[Document], callers: int = 8) -> float:
    """The longest gap (ms, beyond its 1 ms) between ticks of a timer task while ``callers`` tasks
    await ``store.query`` for ``queries`` and one awaits ``store.add`` for each of ``docs``."""
    worst = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last - 0.001)
            last = now

    async def caller(share: list[str]) -> None:
        for q in share:
            await store.query(q, 10, touch=False, audience=EVERYONE)

    async def writer() -> None:
        for d in docs:
            await store.add(d.content, source=d.source, created_at=d.created_at)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    await asyncio.gather(*(caller(queries[i::callers]) for i in range(callers)), writer())
    done.set()
    await tick
    return worst * 1000


def _rss_mb(field: str = "VmRSS") -> float:
    """This process's resident set (MiB), from /proc; ``field`` RssAnon / RssFile splits it."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def cold_probe(path: str, dim: int, query: str) -> None:
    """In a fresh process (imports done): open the store and answer one fused query; print seconds."""
    space = RandomSpace(dim) if dim else None
    qvec = asyncio.run(space.embed([EmbedInput.of_text(query)]))[0] if space else None
    t0 = time.perf_counter()
    store = DocumentStore(path, space)
    store.search(query, 10, query_vector=qvec, audience=EVERYONE)
    elapsed = time.perf_counter() - t0
    _abandon(store)
    print(json.dumps({"open_first_query_s": elapsed}))


def serve_probe(path: str, dim: int, queries_file: str) -> None:
    """In a fresh process: open the store from its files, answer the queries (fused); print p50 and RSS."""
    space = RandomSpace(dim) if dim else None
    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    qvecs = asyncio.run(space.embed([EmbedInput.of_text(q) for q in queries])) if space else None
    store = DocumentStore(path, space)
    times, dense = [], []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        store.search(q, 10, query_vector=qvecs[i] if qvecs is not None else None, audience=EVERYONE)
        times.append((time.perf_counter() - t0) * 1000)
        if qvecs is not None:
            dense.append(_dense_leg_ms(store, qvecs[i]))
    print(json.dumps({
        "query_p50_ms": statistics.median(times), "dense_p50_ms": statistics.median(dense) if dense else 0.0,
        "rss_mb": _rss_mb(), "rss_anon_mb": _rss_mb("RssAnon"), "rss_file_mb": _rss_mb("RssFile"),
    }))
    _abandon(store)


def _dense_leg_ms(store: DocumentStore, qvec: np.ndarray) -> float:
    """Milliseconds of the dense leg alone for one query (the call the fused ranking makes)."""
    with store._lock:
        t0 = time.perf_counter()
        store._dense.scores(np.asarray(qvec, dtype=np.float32), DENSE_PREFILTER)
        return (time.perf_counter() - t0) * 1000


def _dense_quality(store: DocumentStore, queries: list[str], qvecs: np.ndarray) -> dict[str, float]:
    """Top-10 overlap of the store's dense path with an exact float32 scan of every stored vector.

    Both fused rankings and dense-only ones (lexical and neighbour weights off): the store's
    own dense rows are swapped for an in-memory float32 copy of every vector read from SQLite.
    """
    live = np.flatnonzero(store._dense.row_of >= 0)
    exact = DenseRows(store._dense.dim, len(store._dense.row_of))
    for start in range(0, len(live), 8192):
        part = [(s, b) for s, b in store._sql.vectors(live[start : start + 8192].tolist()) if b is not None]
        matrix = np.frombuffer(b"".join(b for _, b in part), dtype=np.float32).reshape(-1, exact.dim)
        exact.append(np.asarray([s for s, _ in part], dtype=np.int64), matrix)
    weights = (store.lexical_weight, store.neighbour_weight)
    out: dict[str, float] = {}
    for label, (lw, nw) in (("fused", weights), ("dense_only", (0.0, 0.0))):
        store.lexical_weight, store.neighbour_weight = lw, nw
        overlap = []
        for q, v in zip(queries, qvecs, strict=True):
            got = {s for s, _ in store._rank(q, 10, v)}
            mapped, store._dense = store._dense, exact
            try:
                want = {s for s, _ in store._rank(q, 10, v)}
            finally:
                store._dense = mapped
            overlap.append(len(got & want) / max(1, len(want)))
        out[f"{label}_top10_overlap_with_float_pct"] = round(100 * statistics.mean(overlap), 1)
    store.lexical_weight, store.neighbour_weight = weights
    return out


def _serve(path: Path, dim: int, queries: list[str], workdir: Path) -> dict[str, float]:
    """Query latency and resident memory of a fresh process serving from the files beside the database."""
    qfile = workdir / "queries.json"
    qfile.write_text(json.dumps(queries), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, __file__, "--serve-probe", str(path), "--dim", str(dim), "--queries-file", str(qfile)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _cold_first_query(path: Path, dim: int, query: str, runs: int = 3) -> float:
    """Median over ``runs`` fresh processes of opening the store and answering one query."""
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, __file__, "--cold-probe", str(path), "--dim", str(dim), "--probe-query", query],
            capture_output=True, text=True, check=True,
        )
        out.append(json.loads(done.stdout.strip().splitlines()[-1])["open_first_query_s"])
    return round(statistics.median(out), 3)


def _top10_quality(store: DocumentStore, corpus: LocomoCorpus) -> dict[str, float]:
    """Lexical top 10 with the default budget vs exact BM25, on the LoCoMo questions."""
    slot_of = store._sql.slots_of(d.id for d in corpus.originals)
    dia = {slot_of[d.id]: (d.meta["conversation"], d.meta["dia_id"]) for d in corpus.originals}
    overlap, recall_budget, recall_exact = [], [], []
    for stem, _, questions, _ in corpus.conversations:
        for qa in questions:
            budget = store._rank(qa["question"], 10, None)
            budget_limit = store._lex.max_postings
            store._lex.max_postings = None
            exact = store._rank(qa["question"], 10, None)
            store._lex.max_postings = budget_limit
            a, b = [s for s, _ in budget], [s for s, _ in exact]
            overlap.append(len(set(a) & set(b)) / max(1, len(b)))
            evidence = {(stem, e) for e in qa["evidence"]}
            recall_budget.append(len(evidence & {dia.get(s) for s in a}) / len(evidence))
            recall_exact.append(len(evidence & {dia.get(s) for s in b}) / len(evidence))
    return {
        "top10_overlap_with_exact_pct": round(100 * statistics.mean(overlap), 1),
        "planted_recall@10_budgeted": round(100 * statistics.mean(recall_budget), 1),
        "planted_recall@10_exact": round(100 * statistics.mean(recall_exact), 1),
    }


async def run_corpus(corpus: SyntheticCorpus | LocomoCorpus, args: argparse.Namespace) -> dict[str, Any]:
    space = RandomSpace(args.dim) if args.dim else None
    result: dict[str, Any] = {"corpus": corpus.name, "docs": args.docs, "dim": args.dim}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "documents.db"
        store = DocumentStore(path, space)
        words: Counter[str] = Counter()
        grams: set[str] = set()
        t0 = time.perf_counter()
        batch = 5000
        for start in range(0, args.docs, batch):
            docs = corpus.documents(min(batch, args.docs - start), start)
            if start < 20_000:
                for d in docs:
                    words.update(w.lower() for w in re.findall(r"[^\W_]+", d.content))
                    grams.update(char_ngrams(d.content))
            await store.add_many(docs, batch_size=batch)
        result["build_s"] = round(time.perf_counter() - t0, 2)
        result["insert_docs_per_s"] = round(args.docs / result["build_s"], 1)
        result["distinct_words_first_20k"] = len(words)
        result["distinct_grams_first_20k"] = len(grams)
        result["postings_per_doc"] = round(
            (len(store._lex._slots) + store._lex.delta_postings) / max(1, len(store)), 1
        )
        store.close()

        result["snapshot_mb"] = round(Path(str(path) + ".lex").stat().st_size / 2**20, 1)
        result["open_clean_s"], store = _open_s(path, space)
        _abandon(store)
        probe = corpus.queries(1)[0]
        result["cold_first_query_clean_s"] = _cold_first_query(path, args.dim, probe)

        tail = args.tail if args.tail is not None else int(
            max(DocumentStore.snapshot_min_docs, DocumentStore.snapshot_fraction * args.docs)
        ) - 1
        _kill_writer(path, corpus.documents(tail, args.docs), args.dim, Path(tmp))
        result["tail_after_last_snapshot"] = tail
        result["cold_first_query_kill9_s"] = _cold_first_query(path, args.dim, probe)
        result["open_after_kill9_s"], store = _open_s(path, space)
        _abandon(store)

        (Path(str(path) + ".lex")).unlink()
        result["open_without_snapshot_s"], store = _open_s(path, space)
        store.flush()  # let the snapshot the rebuild started finish before timing queries

        queries = corpus.queries(args.queries)
        qvecs = await space.embed([EmbedInput.of_text(q) for q in queries]) if space else None
        fused: list[float] = []
        lexical: list[float] = []
        dense: list[float] = []
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            store.search(q, 10, query_vector=qvecs[i] if qvecs is not None else None, audience=EVERYONE)
            fused.append((time.perf_counter() - t0) * 1000)
            if qvecs is not None:
                dense.append(_dense_leg_ms(store, qvecs[i]))
            t0 = time.perf_counter()
            store.search(q, 10, audience=EVERYONE)
            lexical.append((time.perf_counter() - t0) * 1000)
        result["query_fused_p50_ms"] = round(statistics.median(fused), 2)
        result["query_fused_p90_ms"] = pct(fused, 0.9)
        result["query_lexical_p50_ms"] = round(statistics.median(lexical), 2)
        result["query_lexical_p90_ms"] = pct(lexical, 0.9)
        if dense:
            result["query_dense_p50_ms"] = round(statistics.median(dense), 3)
            result["query_dense_p90_ms"] = pct(dense, 0.9)
        vec_file = Path(str(path) + ".vec")
        result["vector_file_mb"] = round(vec_file.stat().st_size / 2**20, 1) if vec_file.exists() else 0.0
        result["rss_mb_bench_process"] = round(_rss_mb(), 1)
        inserts = []
        for i, doc in enumerate(corpus.documents(21, args.docs + tail)):
            t0 = time.perf_counter()
            await store.add(doc.content, source="bench", created_at=doc.created_at)
            if i:
                inserts.append((time.perf_counter() - t0) * 1000)
        result["single_insert_p50_ms"] = round(statistics.median(inserts), 2)
        if isinstance(corpus, LocomoCorpus) and args.docs < 1_000_000:  # exact BM25 at 1M: minutes
            result.update(_top10_quality(store, corpus))
            if qvecs is not None:
                result.update(_dense_quality(store, queries, qvecs))
        stream = corpus.documents(100, args.docs + tail + 21)
        result["loop_stall_max_ms"] = round(await loop_stall_ms(store, queries[:64], stream), 2)
        store.close()
        served = _serve(path, args.dim, queries, Path(tmp))
        result["serve_query_fused_p50_ms"] = round(served["query_p50_ms"], 2)
        result["serve_query_dense_p50_ms"] = round(served["dense_p50_ms"], 3)
        result["rss_mb"] = round(served["rss_mb"], 1)
        result["serve_rss_anon_mb"] = round(served["rss_anon_mb"], 1)  # allocated by the process
        result["serve_rss_file_mb"] = round(served["rss_file_mb"], 1)  # pages of mapped files
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus", choices=["both", "synthetic", "locomo"], default=None,
        help="default: both, or locomo alone with --full",
    )
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--full", action="store_true", help="1,000,000 documents (minutes; several GB of disk)")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (0 = lexical only)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--tail", type=int, default=None, help="documents written after the last snapshot before kill -9"
    )
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo folder of the locomo corpus")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cold-probe", help=argparse.SUPPRESS)
    parser.add_argument("--probe-query", default="", help=argparse.SUPPRESS)
    parser.add_argument("--serve-probe", help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_probe:
        cold_probe(args.cold_probe, args.dim, args.probe_query)
        return
    if args.serve_probe:
        serve_probe(args.serve_probe, args.dim, args.queries_file)
        return
    if args.full:
        args.docs = 1_000_000
    if args.corpus is None:
        args.corpus = "locomo" if args.full else "both"
    corpora: list[SyntheticCorpus | LocomoCorpus] = []
    if args.corpus in ("both", "synthetic"):
        corpora.append(SyntheticCorpus())
    if args.corpus in ("both", "locomo"):
        corpora.append(LocomoCorpus(Path(args.data)))
    results = {c.name: asyncio.run(run_corpus(c, args)) for c in corpora}
    if args.json:
        head = results.get("locomo") or next(iter(results.values()))
        size = f"{args.docs // 1_000_000}m" if args.docs >= 1_000_000 else f"{args.docs // 1000}k"
        summary = {
            f"cold_first_query_s_{size}": max(head["cold_first_query_clean_s"], head["cold_first_query_kill9_s"]),
            f"query_p50_ms_{size}": head["query_fused_p50_ms"],
            f"dense_p50_ms_{size}": head.get("query_dense_p50_ms", 0.0),
            "insert_docs_per_s": head["insert_docs_per_s"],
            f"rss_mb_{size}": head["rss_mb"],
            f"loop_stall_max_ms_{size}": head["loop_stall_max_ms"],
        }
        print(json.dumps({**summary, **results}, ensure_ascii=False))
        return
    names = list(results)
    print("| metric | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names))
    keys = [k for r in results.values() for k in r if k != "corpus"]
    for key in dict.fromkeys(keys):
        print(f"| {key} | " + " | ".join(str(results[n].get(key, "")) for n in names) + " |")


if __name__ == "__main__":
    main()
