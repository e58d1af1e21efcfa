"""Knowledge base search: latency on 2,000 and 20,000 entries, and the lexical path's recall.

Latency: a knowledge folder of synthetic entries (mixed Chinese and English notes about people,
places and things; seeded, so every run and every checkout gets the same entries) is written to
disk as ``<root>/<category>/<leaf>/content.md`` and opened with :class:`KnowledgeBase`, as the
daemon opens it at start; then questions are asked through ``KnowledgeBase.search`` (no embedder:
the lexical path alone), once as the owner (every entry) and once as a person who may see half
of them. Reported: the open time, query p50/p90 (ms), and the time one ``create`` takes to be
searchable (its lexical indexing; the file write is the same before and after).

Quality (``--memdaily DIR``, ``--locomo DIR``): each conversation — a simulated user's messages
in the converted MemDaily layout (``items`` and ``questions``), or a LoCoMo conversation; read
as ``bench/bench_memory_zh.py`` reads them — becomes one knowledge base, one entry per message
(``"<speaker>: <text>"``), and each question is asked of its lexical path.
A question's ``equivalent`` messages are dropped from the ranking before scoring (the filtered
protocol of ``bench_memory_zh.py``), and evidence recall@5/@10, hit@10 and MRR are reported
(the keys of ``bench_locomo.py``). Use the development users 00-09 only.

The script uses only the public ``KnowledgeBase`` API, so the same file measures another
checkout: copy it into that checkout's ``bench/`` and run it there.

    python bench/bench_knowledge.py [--entries 2000,20000] [--queries 200] [--memdaily DIR] [--locomo DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_locomo import score  # noqa: E402
from bench_memory_zh import load  # noqa: E402

from homeagent_core.memory.knowledge.base import KnowledgeBase  # noqa: E402
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, PRIVATE, Audience  # noqa: E402


def _words(text: str) -> list[str]:
    return text.split()


_SURNAMES = _words("王 李 张 刘 陈 杨 赵 黄 周 吴 徐 孙 胡 朱 高 林 何 郭 马 罗")
_GIVEN = _words("伟 芳 娜 敏 静 丽 强 磊 军 洋 勇 艳 杰 娟 涛 明 超 秀英 华 平 刚 桂英 玉兰 志强 建国")
_ZH_FACTS = [
    "{n}在{place}工作，每天{how}上班。",
    "{n}的生日是{m}月{d}日，喜欢{hobby}。",
    "{n}住在{place}附近，养了一只{pet}。",
    "{n}的电话号码存在通讯录里，周末常去{place}{hobby}。",
    "上次和{n}一起去{place}，吃了{food}，很好吃。",
    "{n}对{food}过敏，聚餐时记得提醒。",
]
_PLACES = _words("北京 上海 深圳 杭州 成都 南京 武汉 西安 华为 腾讯 阿里巴巴 人民医院 图书馆 健身房 公园 超市")
_HOBBIES = _words("打篮球 跑步 游泳 爬山 钓鱼 下棋 弹钢琴 画画 摄影 做饭 看电影 唱歌")
_FOODS = _words("饺子 火锅 烤鸭 面条 米饭 海鲜 花生 牛奶 鸡蛋 小龙虾")
_PETS = _words("猫 狗 兔子 鹦鹉 金鱼")
_HOW = _words("骑车 坐地铁 开车 走路 坐公交")
_EN_NAMES = _words("Melanie Caroline John Maria David Sarah Peter Anna Tom Lucy Mark Emma")
_EN_FACTS = [
    "{n} works at the {place} and takes the {how} every morning.",
    "{n}'s birthday is in {month}; {n} loves {hobby} and {food}.",
    "{n} painted the fence last summer and keeps the paint in the garage.",
    "Remember: {n} is allergic to {food}; the doctor's number is on the fridge.",
    "{n} recommended a recipe for {food} with garlic, ginger and soy sauce.",
]
_EN_PLACES = _words("hospital library bakery school museum garage office pharmacy")
_EN_HOBBIES = _words("pottery camping hiking painting swimming chess guitar gardening")
_EN_FOODS = _words("peanuts shellfish dumplings pasta curry pancakes")
_MONTHS = _words("January March May July September November")


def synthetic_entries(count: int, seed: int = 11) -> list[tuple[str, str]]:
    """``count`` entries ``(name, content)``: a few facts each, two in three in Chinese."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if rng.random() < 2 / 3:
            n = rng.choice(_SURNAMES) + rng.choice(_GIVEN)
            facts = [rng.choice(_ZH_FACTS).format(
                n=n, place=rng.choice(_PLACES), how=rng.choice(_HOW), m=rng.randint(1, 12), d=rng.randint(1, 28),
                hobby=rng.choice(_HOBBIES), pet=rng.choice(_PETS), food=rng.choice(_FOODS),
            ) for _ in range(rng.randint(1, 6))]
            out.append((f"people/zh{i:05d}", "".join(facts)))
        else:
            n = rng.choice(_EN_NAMES)
            facts = [rng.choice(_EN_FACTS).format(
                n=n, place=rng.choice(_EN_PLACES), how=rng.choice(["bus", "train", "bike"]),
                month=rng.choice(_MONTHS), hobby=rng.choice(_EN_HOBBIES), food=rng.choice(_EN_FOODS),
            ) for _ in range(rng.randint(1, 6))]
            out.append((f"notes/en{i:05d}", " ".join(facts)))
    return out


def synthetic_queries(count: int, seed: int = 12) -> list[str]:
    rng = random.Random(seed)
    zh = ["{n}在哪里工作？", "{n}的生日是几月几号？", "{n}和{o}喜欢什么？", "谁对{food}过敏？", "{n}养了什么宠物？"]
    en = ["Where does {e} work?", "When is {e}'s birthday?", "Who is allergic to {f}?", "recipe for {f}"]
    out = []
    for _ in range(count):
        n, o = (rng.choice(_SURNAMES) + rng.choice(_GIVEN) for _ in range(2))
        if rng.random() < 2 / 3:
            out.append(rng.choice(zh).format(n=n, o=o, food=rng.choice(_FOODS)))
        else:
            out.append(rng.choice(en).format(e=rng.choice(_EN_NAMES), f=rng.choice(_EN_FOODS)))
    return out


def write_folder(root: Path, entries: list[tuple[str, str]], marks: dict[str, tuple[str, str]] | None = None) -> None:
    """The entries as a knowledge folder (``content.md`` files, and ``.marks.json`` when given)."""
    for name, content in entries:
        folder = root.joinpath(*name.split("/"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "content.md").write_text(content, encoding="utf-8")
    if marks is not None:
        payload = {"version": 1, "entries": {n: list(m) for n, m in sorted(marks.items())}}
        (root / ".marks.json").write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def latency(count: int, queries: list[str]) -> dict[str, Any]:
    entries = synthetic_entries(count)
    # half the entries household, half the owner's private: "kid" sees the household half
    marks = {name: ("owner", HOUSEHOLD if i % 2 else PRIVATE) for i, (name, _) in enumerate(entries)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "knowledge"
        write_folder(root, entries, marks)
        t0 = time.perf_counter()
        kb = KnowledgeBase(root)
        opened = time.perf_counter() - t0
        await kb.search("warm up 热身", 5, audience=EVERYONE)  # a first query may build what a load deferred
        result: dict[str, Any] = {"entries": count, "open_s": round(opened, 3)}
        for label, audience in (("owner", EVERYONE), ("kid", Audience(person="kid"))):
            times = []
            for query in queries:
                t0 = time.perf_counter()
                await kb.search(query, 5, audience=audience)
                times.append((time.perf_counter() - t0) * 1000)
            result[f"{label}_p50_ms"] = percentile(times, 0.5)
            result[f"{label}_p90_ms"] = percentile(times, 0.9)
        adds = []
        for i in range(20):
            t0 = time.perf_counter()
            await kb.create(f"bench/new{i}", f"小王{i}号在杭州工作，喜欢爬山。 Note {i}: Melanie likes hiking.")
            await kb.search("小王在哪里工作？", 5, audience=EVERYONE)
            adds.append((time.perf_counter() - t0) * 1000)
        result["create_then_search_p50_ms"] = percentile(adds, 0.5)
        kb.close()
    return result


async def lexical_recall(folder: Path) -> dict[str, Any]:
    """Recall of the lexical path over every conversation of ``folder`` (one knowledge base each)."""
    rows: list[dict[str, Any]] = []
    conversations = 0
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not ("items" in data or "qa" in data):
            continue
        conversations += 1
        turns, questions = load(data)
        names = {f"m/{i:05d}": dia for i, (dia, _, _) in enumerate(turns)}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "knowledge"
            write_folder(root, [(name, text) for name, (_, text, _) in zip(names, turns, strict=True)])
            kb = KnowledgeBase(root)
            for qa in questions:
                dropped = set(qa.get("equivalent", ()))
                hits = await kb.search(str(qa["question"]), 10 + len(dropped), audience=EVERYONE)
                ranked = [names[h.entry.name] for h in hits if names[h.entry.name] not in dropped][:10]
                rows.append({"evidence": [str(e) for e in qa["evidence"]], "retrieved": ranked})
            kb.close()
    return {"conversations": conversations, **score(rows)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    queries = synthetic_queries(args.queries)
    out: dict[str, Any] = {"latency": [await latency(int(n), queries) for n in args.entries.split(",") if n]}
    if args.memdaily:
        out["memdaily_lexical"] = await lexical_recall(Path(args.memdaily))
    if args.locomo:
        out["locomo_lexical"] = await lexical_recall(Path(args.locomo))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", default="2000,20000", help="comma-separated collection sizes")
    parser.add_argument("--queries", type=int, default=200, help="questions asked per size and reader")
    parser.add_argument("--memdaily", default="", help="folder of converted MemDaily users (00-09 only)")
    parser.add_argument("--locomo", default="", help="folder of LoCoMo conversations (English)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return
    for row in result["latency"]:
        print(f"{row['entries']:>6} entries: open {row['open_s']} s, owner p50 {row['owner_p50_ms']} ms "
              f"(p90 {row['owner_p90_ms']}), kid p50 {row['kid_p50_ms']} ms, "
              f"create+search p50 {row['create_then_search_p50_ms']} ms")
    for key, label in (("memdaily_lexical", "MemDaily"), ("locomo_lexical", "LoCoMo")):
        if key in result:
            m = result[key]
            print(f"{label} lexical ({m['conversations']} conversations, {m['questions']} questions): "
                  f"recall@5 {m['recall@5']} recall@10 {m['recall@10']} hit@10 {m['hit@10']} mrr {m['mrr']}")


if __name__ == "__main__":
    main()
