"""A Chinese personal-memory development set, generated from templated household profiles.

Why generated: no permissively licensed Chinese long-term personal-memory set with evidence
labels ships with the project, and a generator is reproducible byte for byte (one seed), has no
licence question, and can be made larger at will. Each conversation is one person's chat log
with their agent over ~24 sessions (a few months): facts about their family, friends, pets,
home, work, plans and health are stated once (some restated or changed later), surrounded by
everyday chatter that keeps naming the same people, places and things — the hard case for a
lexical index, because the chatter repeats an entity's name far more often than the one turn
that answers a question about it.

Questions are asked the way people ask, in other words than the statement ("在哪上班" for a
statement with "做...工作"), and carry evidence turn ids, in the LoCoMo JSON layout
(``session_N``, ``session_N_date_time``, ``qa[].evidence``) so ``bench_locomo``'s scoring applies.
Question types (``category``): 1 single-hop, 2 multi-hop, 3 temporal, 4 comparative
(two entities and one attribute), 5 aggregative (all of several turns), 6 updated fact (the
latest statement), 7 conditional, 8 computed (needs arithmetic over two facts).

    python bench/zh_devset.py --out DIR [--people 10] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

CATEGORIES = {
    1: "single-hop",
    2: "multi-hop",
    3: "temporal",
    4: "comparative",
    5: "aggregative",
    6: "updated",
    7: "conditional",
    8: "computed",
}

SURNAMES = list("王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕苏卢蒋蔡贾丁魏")
GIVEN = [
    "伟",
    "芳",
    "娜",
    "敏",
    "静",
    "丽",
    "强",
    "磊",
    "军",
    "洋",
    "勇",
    "艳",
    "杰",
    "娟",
    "涛",
    "明",
    "超",
    "秀英",
    "霞",
    "平",
    "刚",
    "桂英",
    "晨",
    "浩然",
    "子涵",
    "欣怡",
    "梓萱",
    "宇轩",
    "思远",
    "雨桐",
    "一鸣",
    "佳怡",
    "俊杰",
    "若曦",
]
CITIES = [
    "杭州",
    "北京",
    "上海",
    "成都",
    "深圳",
    "南京",
    "武汉",
    "西安",
    "苏州",
    "厦门",
    "青岛",
    "长沙",
    "重庆",
    "昆明",
    "大连",
    "合肥",
    "天津",
    "广州",
    "宁波",
    "郑州",
]
COMPANIES = [
    "华为",
    "阿里巴巴",
    "腾讯",
    "字节跳动",
    "京东",
    "美团",
    "网易",
    "小米",
    "百度",
    "比亚迪",
    "招商银行",
    "中国移动",
    "顺丰",
    "海尔",
    "格力",
    "蔚来",
    "携程",
    "拼多多",
]
JOBS = [
    "程序员",
    "产品经理",
    "会计",
    "护士",
    "老师",
    "律师",
    "设计师",
    "销售",
    "医生",
    "厨师",
    "记者",
    "工程师",
    "公务员",
    "摄影师",
]
FOODS = ["火锅", "烧烤", "小龙虾", "饺子", "牛肉面", "寿司", "披萨", "麻辣烫", "烤鸭", "酸菜鱼", "螺蛳粉", "煎饼果子"]
HOBBIES = ["羽毛球", "游泳", "爬山", "弹吉他", "画画", "跑步", "下围棋", "摄影", "钓鱼", "瑜伽", "打篮球", "烘焙"]
PET_KINDS = ["猫", "狗", "仓鼠", "鹦鹉", "兔子", "乌龟", "金鱼"]
PET_NAMES = [
    "咪咪",
    "旺财",
    "豆豆",
    "球球",
    "花花",
    "小白",
    "黑妞",
    "可乐",
    "布丁",
    "团子",
    "年糕",
    "元宝",
    "橘子",
    "饭团",
]
ALLERGENS = ["花生", "海鲜", "芒果", "牛奶", "鸡蛋", "花粉", "青霉素", "猫毛"]
PLACES = ["咖啡馆", "公园", "商场", "图书馆", "电影院", "体育馆", "菜市场", "健身房", "书店", "茶馆"]
CARS = ["特斯拉", "丰田", "本田", "大众", "比亚迪", "宝马", "五菱", "理想"]
WEATHER = ["今天好热", "今天下了一整天的雨", "外面风好大", "今天天气不错", "降温了，好冷", "雾霾有点重"]
FEELINGS = ["有点累", "心情不错", "忙得团团转", "睡得不太好", "挺开心的", "有点烦"]
ACKS = ["好的，我记住了。", "明白了。", "收到，已经记下。", "好的。", "了解。", "嗯嗯，知道了。", "记下来了。"]
CHAT_REPLIES = [
    "听起来不错！",
    "辛苦了，注意休息。",
    "哈哈，真有意思。",
    "那挺好的。",
    "要照顾好自己哦。",
    "确实如此。",
]


@dataclass
class Friend:
    name: str
    age: int
    height: int
    job: str
    company: str
    hometown: str
    hobby: str


@dataclass
class Person:
    """One conversation owner and what their chat log states."""

    name: str
    friends: list[Friend]
    sister: str
    sister_age: int
    sister_city: str
    sister_husband: str
    husband_company: str
    own_age: int
    old_city: str
    new_city: str
    employer: str
    new_employer: str
    job: str
    pets: list[tuple[str, str]]
    allergies: list[str]
    car: str
    favourite_food: str
    mother_hobby: str
    trips: list[str]
    rain_place: str
    fine_place: str
    dentist_day: str
    facts: list[tuple[str, str]] = field(default_factory=list)  # (fact key, text)


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = rng.choice(SURNAMES) + rng.choice(GIVEN)
        if name not in used:
            used.add(name)
            return name


def make_person(rng: random.Random) -> Person:
    used: set[str] = set()
    me = _name(rng, used)
    friends = []
    for _ in range(5):
        friends.append(
            Friend(
                name=_name(rng, used),
                age=rng.randint(22, 58),
                height=rng.randint(152, 190),
                job=rng.choice(JOBS),
                company=rng.choice(COMPANIES),
                hometown=rng.choice(CITIES),
                hobby=rng.choice(HOBBIES),
            )
        )
    # distinct ages and heights so comparative questions have one answer
    ages = rng.sample(range(22, 60), len(friends))
    heights = rng.sample(range(152, 192), len(friends))
    for f, a, h in zip(friends, ages, heights, strict=True):
        f.age, f.height = a, h
    cities = rng.sample(CITIES, 6)
    companies = rng.sample(COMPANIES, 3)
    pet_kinds = rng.sample(PET_KINDS, 3)
    pet_names = rng.sample(PET_NAMES, 3)
    places = rng.sample(PLACES, 2)
    return Person(
        name=me,
        friends=friends,
        sister=_name(rng, used),
        sister_age=rng.randint(20, 45),
        sister_city=cities[2],
        sister_husband=_name(rng, used),
        husband_company=companies[2],
        own_age=rng.randint(26, 50),
        old_city=cities[0],
        new_city=cities[1],
        employer=companies[0],
        new_employer=companies[1],
        job=rng.choice(JOBS),
        pets=list(zip(pet_kinds, pet_names, strict=True)),
        allergies=rng.sample(ALLERGENS, 2),
        car=rng.choice(CARS),
        favourite_food=rng.choice(FOODS),
        mother_hobby=rng.choice(HOBBIES),
        trips=cities[3:6],
        rain_place=places[0],
        fine_place=places[1],
        dentist_day=rng.choice(["周一", "周二", "周三", "周四", "周五"]),
    )


def fact_turns(p: Person, rng: random.Random) -> list[tuple[str, str]]:
    """(key, user text) of every fact, in the order they are told; keys name the fact."""
    pick = rng.choice
    out: list[tuple[str, str]] = [
        ("home_old", pick([f"我住在{p.old_city}，离公司挺近的。", f"我家在{p.old_city}，住了好几年了。"])),
        ("job", pick([f"我在{p.employer}做{p.job}。", f"我现在是{p.employer}的{p.job}。"])),
        ("own_age", pick([f"我今年{p.own_age}岁。", f"说起来我都{p.own_age}岁了。"])),
        (
            "sister",
            pick([f"我妹妹叫{p.sister}，她在{p.sister_city}生活。", f"我有个妹妹{p.sister}，住在{p.sister_city}。"]),
        ),
        ("sister_age", pick([f"{p.sister}今年{p.sister_age}岁。", f"我妹妹{p.sister_age}岁了，还像个小孩。"])),
        ("sister_husband", pick([f"{p.sister}的老公叫{p.sister_husband}。", f"我妹夫是{p.sister_husband}。"])),
        (
            "husband_company",
            pick(
                [
                    f"{p.sister_husband}在{p.husband_company}上班。",
                    f"{p.sister_husband}去年跳槽到了{p.husband_company}。",
                ]
            ),
        ),
        ("allergy_0", pick([f"我对{p.allergies[0]}过敏，吃了会起疹子。", f"医生说我{p.allergies[0]}过敏，要小心。"])),
        (
            "allergy_1",
            pick([f"最近发现我对{p.allergies[1]}也过敏。", f"原来我还对{p.allergies[1]}过敏，难怪之前不舒服。"]),
        ),
        ("car", pick([f"我开的是一辆{p.car}。", f"上个月提了一辆{p.car}的车。"])),
        ("food", pick([f"我最爱吃{p.favourite_food}了。", f"要说最喜欢的还是{p.favourite_food}。"])),
        ("mother_hobby", pick([f"我妈退休以后天天{p.mother_hobby}。", f"我妈妈最近迷上了{p.mother_hobby}。"])),
        ("dentist", pick([f"我约了下{p.dentist_day}去看牙医。", f"牙医给我排在了{p.dentist_day}下午。"])),
        ("party_plan", f"周六和朋友聚会，如果下雨就去{p.rain_place}，天气好就去{p.fine_place}。"),
    ]
    for i, (kind, pet) in enumerate(p.pets):
        out.append(
            (f"pet_{i}", pick([f"我们家新养了一只{kind}，名字叫{pet}。", f"前几天领养了一只{kind}，取名{pet}。"]))
        )
    for i, f in enumerate(p.friends):
        out += [
            (f"friend_job_{i}", pick([f"{f.name}在{f.company}当{f.job}。", f"我朋友{f.name}是{f.company}的{f.job}。"])),
            (f"friend_age_{i}", pick([f"{f.name}今年{f.age}岁。", f"{f.name}过完生日就{f.age}岁了。"])),
            (f"friend_height_{i}", pick([f"{f.name}身高{f.height}厘米。", f"{f.name}有{f.height}公分高。"])),
            (f"friend_home_{i}", pick([f"{f.name}老家是{f.hometown}的。", f"{f.name}是{f.hometown}人。"])),
            (f"friend_hobby_{i}", pick([f"{f.name}周末经常去{f.hobby}。", f"{f.name}特别喜欢{f.hobby}。"])),
        ]
    for i, city in enumerate(p.trips):
        out.append((f"trip_{i}", pick([f"我昨天去{city}出差了，刚回来。", f"这周在{city}出差，忙死了。"])))
    rng.shuffle(out)
    # changes come late in the log
    out += [
        ("home_new", pick([f"我上个月从{p.old_city}搬到了{p.new_city}。", f"告诉你，我已经搬家到{p.new_city}了。"])),
        (
            "job_new",
            pick([f"我跳槽去{p.new_employer}了，下周一入职。", f"我离开{p.employer}了，现在在{p.new_employer}上班。"]),
        ),
    ]
    return out


def chatter(p: Person, rng: random.Random) -> str:
    """An everyday user turn that names known people, places and things but states no fact."""
    f = rng.choice(p.friends)
    g = rng.choice(p.friends)
    kind, pet = rng.choice(p.pets)
    return rng.choice(
        [
            f"{rng.choice(WEATHER)}，{rng.choice(FEELINGS)}。",
            f"{f.name}又给我发消息了，{f.name}说周末想约饭。",
            f"今天和{f.name}、{g.name}一起吃了{rng.choice(FOODS)}。",
            f"{pet}今天特别调皮，把沙发咬坏了。",
            f"{p.sister}给我打电话聊了半天，{p.sister}最近挺好的。",
            f"刚跟{f.name}视频，{f.name}说{g.name}最近很忙。",
            f"{f.name}推荐了一部电影，说特别好看。",
            f"晚上带{pet}出去转了一圈。",
            f"我想给{f.name}买个生日礼物，还没想好买什么。",
            f"{g.name}又迟到了，{g.name}每次都这样。",
            f"今天加班到很晚，{rng.choice(FEELINGS)}。",
            "我妈又问我什么时候回家。",
            f"周末想去{rng.choice(PLACES)}逛逛。",
            f"{f.name}和{g.name}吵架了，我夹在中间好为难。",
            "帮我记一下，明天要交水电费。",
            f"{p.sister_husband}请我们吃饭，点了一桌子菜。",
            f"在{rng.choice(PLACES)}碰到了{f.name}，真巧。",
            # hard negatives: the words questions use, about the wrong person or no fact
            f"{f.name}最近工作压力特别大，{f.name}说想换个工作。",
            f"{f.name}问我{g.name}多大了，我也记不清。",
            f"{f.name}说{g.name}长得好高，打球肯定厉害。",
            f"{f.name}想回老家看看，好久没回去了。",
            f"{f.name}也喜欢吃{p.favourite_food}，下次一起去。",
            "我妹妹说她公司最近在裁员，有点担心。",
            f"{f.name}的爱好可真多，什么都想试试。",
            "出差真累，这个月跑了好几个城市。",
            f"{f.name}家的{kind}生病了，{f.name}急坏了。",
            f"住的地方附近新开了一家{rng.choice(PLACES)}。",
            "这周末要是下雨就在家待着。",
            f"我的车该保养了，{f.name}推荐了一家店。",
            f"{f.name}的车坏在半路上了，我去接的。",
            "好像有点过敏，打了好几个喷嚏。",
            f"{p.sister}说她老公最近天天加班。",
            f"{f.name}和{g.name}一起去{rng.choice(PLACES)}了，没叫我。",
            f"{f.name}跟{g.name}说好了下周一起去{rng.choice(HOBBIES[:6])}。",
            f"{f.name}和{g.name}都觉得{rng.choice(FOODS)}不错。",
            f"我和{f.name}聊到{g.name}的事，大家都挺感慨的。",
        ]
    )


def questions(p: Person, turn_of: dict[str, str], rng: random.Random) -> list[dict[str, Any]]:
    """Questions with evidence turn ids, phrased unlike their statements."""
    qs: list[dict[str, Any]] = []

    def add(category: int, question: str, answer: str, keys: list[str]) -> None:
        qs.append(
            {"question": question, "answer": answer, "category": category, "evidence": [turn_of[k] for k in keys]}
        )

    pick = rng.choice
    for i, f in enumerate(p.friends):
        add(
            1,
            pick([f"{f.name}是做什么工作的？", f"{f.name}在哪家公司上班？"]),
            f"{f.company}{f.job}",
            [f"friend_job_{i}"],
        )
        add(1, pick([f"{f.name}是哪里人？", f"{f.name}的家乡在哪？"]), f.hometown, [f"friend_home_{i}"])
        add(1, pick([f"{f.name}平时有什么爱好？", f"{f.name}喜欢做什么运动或消遣？"]), f.hobby, [f"friend_hobby_{i}"])
    pairs = rng.sample([(a, b) for a in range(5) for b in range(5) if a < b], 4)
    for a, b in pairs[:2]:
        fa, fb = p.friends[a], p.friends[b]
        older = fa if fa.age > fb.age else fb
        add(
            4,
            pick([f"{fa.name}和{fb.name}谁年纪更大？", f"{fa.name}跟{fb.name}比，谁岁数大？"]),
            older.name,
            [f"friend_age_{a}", f"friend_age_{b}"],
        )
    for a, b in pairs[2:]:
        fa, fb = p.friends[a], p.friends[b]
        taller = fa if fa.height > fb.height else fb
        add(
            4,
            pick([f"{fa.name}和{fb.name}谁个子更高？", f"{fa.name}与{fb.name}哪个更高？"]),
            taller.name,
            [f"friend_height_{a}", f"friend_height_{b}"],
        )
    add(
        2,
        pick(["我妹夫在哪里工作？", f"{p.sister}的丈夫在什么单位？"]),
        p.husband_company,
        ["sister_husband", "husband_company"],
    )
    add(2, "我妹妹住的城市是哪里？她老公叫什么？", f"{p.sister_city}，{p.sister_husband}", ["sister", "sister_husband"])
    add(
        5,
        pick(["我家都养了哪些宠物？", "我一共养了几只小动物，都叫什么？"]),
        "、".join(n for _, n in p.pets),
        [f"pet_{i}" for i in range(len(p.pets))],
    )
    add(5, pick(["我对哪些东西过敏？", "我有哪些过敏原要注意？"]), "、".join(p.allergies), ["allergy_0", "allergy_1"])
    add(
        5,
        pick(["我都去过哪些城市出差？", "最近我出差去了哪几个地方？"]),
        "、".join(p.trips),
        [f"trip_{i}" for i in range(len(p.trips))],
    )
    add(6, pick(["我现在住在哪个城市？", "我现在家在哪？"]), p.new_city, ["home_new"])
    add(6, pick(["我现在在哪家公司工作？", "我目前的雇主是谁？"]), p.new_employer, ["job_new"])
    add(7, pick(["要是周六下雨，聚会去哪儿？", "周六如果天气不好，我们在哪里碰头？"]), p.rain_place, ["party_plan"])
    add(7, pick(["周六天气好的话去哪里聚？", "如果周六晴天，聚会地点是？"]), p.fine_place, ["party_plan"])
    add(3, pick(["我哪天看牙？", "牙医预约是星期几？"]), p.dentist_day, ["dentist"])
    trip = rng.randrange(len(p.trips))
    add(3, f"我是什么时候去{p.trips[trip]}出差的？", p.trips[trip], [f"trip_{trip}"])
    add(
        8,
        pick(["我比我妹妹大几岁？", "我和妹妹差几岁？"]),
        str(abs(p.own_age - p.sister_age)),
        ["own_age", "sister_age"],
    )
    a, b = pairs[0]
    fa, fb = p.friends[a], p.friends[b]
    add(8, f"{fa.name}和{fb.name}加起来多少岁？", str(fa.age + fb.age), [f"friend_age_{a}", f"friend_age_{b}"])
    add(1, pick(["我开什么车？", "我的车是什么牌子的？"]), p.car, ["car"])
    add(1, pick(["我最喜欢吃什么？", "我最爱的食物是什么？"]), p.favourite_food, ["food"])
    add(1, pick(["我妈妈退休后喜欢干嘛？", "我母亲有什么爱好？"]), p.mother_hobby, ["mother_hobby"])
    return qs


def conversation(index: int, rng: random.Random, *, sessions: int = 24, turns_per_session: int = 22) -> dict[str, Any]:
    """One person's log in the LoCoMo layout."""
    p = make_person(rng)
    facts = fact_turns(p, rng)
    per_session = -(-len(facts) // sessions)
    data: dict[str, Any] = {"speaker_a": p.name, "speaker_b": "助手", "sample_id": f"zh-{index:02d}"}
    start = datetime(2026, 1, 5, 20, 0) + timedelta(days=rng.randint(0, 30))
    turn_of: dict[str, str] = {}
    fi = 0
    for s in range(1, sessions + 1):
        when = start + timedelta(days=4 * s, hours=rng.randint(-3, 2))
        data[f"session_{s}_date_time"] = when.strftime("%I:%M %p on %d %B, %Y").lstrip("0")
        todo = facts[fi : fi + per_session]
        fi += len(todo)
        slots = sorted(rng.sample(range(turns_per_session // 2), len(todo)))
        turns = []
        n = 0
        for k in range(turns_per_session // 2):
            if slots and slots[0] == k:
                slots.pop(0)
                key, text = todo.pop(0)
                reply = rng.choice(ACKS)
            else:
                key, text = "", chatter(p, rng)
                reply = rng.choice(CHAT_REPLIES)
            n += 1
            dia = f"D{s}:{n}"
            if key:
                turn_of[key] = dia
            turns.append({"speaker": p.name, "dia_id": dia, "text": text})
            n += 1
            turns.append({"speaker": "助手", "dia_id": f"D{s}:{n}", "text": reply})
        data[f"session_{s}"] = turns
    if fi < len(facts):
        raise RuntimeError("facts left over: raise sessions or turns per session")
    data["qa"] = questions(p, turn_of, rng)
    return data


def generate(people: int = 10, seed: int = 7) -> list[dict[str, Any]]:
    """``people`` conversations, identical for the same seed."""
    rng = random.Random(seed)
    return [conversation(i, rng) for i in range(people)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for zh-NN.json files")
    parser.add_argument("--people", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for conv in generate(args.people, args.seed):
        (out / f"{conv['sample_id']}.json").write_text(json.dumps(conv, ensure_ascii=False, indent=1), "utf-8")
    print(f"wrote {args.people} conversations to {out}")


if __name__ == "__main__":
    main()
