"""Which entities a person means: "客厅的灯", "卧室空调", "all the lights", "洗衣机", "kitchen blinds".

A phrase is matched against the exposed entities' friendly names and aliases and their areas'
names and aliases (Chinese and English alike, as Home Assistant stores them), with a few words
for kinds of things ("灯"/"lights" → lights, "空调"/"AC" → climate, "几度"/"temperature" → a
temperature, "窗帘"/"blinds" → covers, ...). The best match wins; when two or more score the
same, the answer is a question listing them, unless the phrase asked for several ("所有",
"全部", "all", "every", "both").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from homeagent_plugin_homeassistant.catalog import HomeEntity

__all__ = ["Match", "Matcher", "normalise"]

#: Kinds of things people name, each as (domain, device classes or () for any).
_KINDS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "light": (("light", ()), ("switch", ("__light__",))),
    "climate": (("climate", ()),),
    "temperature": (("sensor", ("temperature",)), ("climate", ())),
    "humidity": (("sensor", ("humidity",)), ("climate", ())),
    "cover": (("cover", ()),),
    "garage": (("cover", ("garage", "gate")),),
    "lock": (("lock", ()),),
    "door": (
        ("lock", ()), ("binary_sensor", ("door", "opening", "garage_door")), ("cover", ("garage", "door", "gate")),
    ),
    "window": (("cover", ()), ("binary_sensor", ("window", "opening"))),
    "media": (("media_player", ()),),
    "fan": (("fan", ()),),
    "switch": (("switch", ()),),
    "motion": (("binary_sensor", ("motion", "occupancy", "presence")),),
    "moisture": (("binary_sensor", ("moisture",)),),
    "power": (("sensor", ("power", "energy")),),
}
#: Words for the kinds, longest first when matched. Chinese words match inside a phrase,
#: English ones as whole words.
_KIND_WORDS: dict[str, tuple[str, ...]] = {
    "light": ("灯光", "电灯", "灯", "light", "lights", "lamp", "lamps", "lighting"),
    "climate": ("空调", "冷气", "暖气", "地暖", "温控器", "温控", "ac", "a/c", "aircon", "air conditioner",
                "air conditioning", "thermostat", "heating", "heater", "hvac", "heat pump"),
    "temperature": ("温度", "几度", "多少度", "气温", "冷不冷", "热不热", "temperature", "temp", "how warm", "how cold",
                    "how hot", "degrees"),
    "humidity": ("湿度", "潮湿", "humidity", "how humid"),
    "garage": ("车库门", "garage door", "garage"),
    "cover": ("窗帘", "百叶窗", "卷帘", "遮阳帘", "遮阳", "blind", "blinds", "curtain", "curtains", "shade", "shades",
              "shutter", "shutters", "cover", "covers"),
    "window": ("窗户", "窗", "window", "windows"),
    "lock": ("门锁", "锁", "lock", "locks", "deadbolt"),
    "door": ("门", "door", "doors"),
    "media": ("电视", "音箱", "音响", "播放器", "音乐", "tv", "television", "speaker", "speakers", "player", "music"),
    "fan": ("风扇", "电扇", "吊扇", "fan", "fans"),
    "switch": ("开关", "插座", "switch", "switches", "outlet", "plug", "socket"),
    "motion": ("人体感应", "移动", "有人", "motion", "movement", "presence"),
    "moisture": ("漏水", "水浸", "积水", "leak", "wet", "flood", "moisture"),
    "power": ("功率", "耗电", "用电", "power", "consumption"),
}
_ALL_KIND_WORDS = tuple(w for words in _KIND_WORDS.values() for w in words)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_PLURAL = ("所有", "全部", "全屋", "都", "每个", "所有的", "all", "every", "both", "everything")
#: Words that say nothing about which entity (verbs, fillers), dropped before matching.
_FILLER_ZH = ("帮我", "给我", "麻烦", "请", "一下", "现在", "目前", "把", "将", "的", "了", "吗", "呢", "吧", "是",
              "看看", "打开", "开启", "关掉", "关上", "关闭", "调到", "调高", "调低", "设置", "设为", "状态", "怎么样",
              "多少", "里面", "里的", "里", "那个", "这个")
_FILLER_EN = frozenset({
    "the", "a", "an", "please", "turn", "on", "off", "in", "of", "my", "our", "is", "are", "what", "whats", "what's",
    "set", "to", "switch_", "status", "state", "check", "open", "close", "closed", "now", "currently", "it", "how",
    "room's", "s", "at", "can", "you", "tell", "me", "show", "dim", "up", "down", "and",
})


def normalise(text: str) -> str:
    """Casefolded, width-folded, punctuation as spaces, spaces squeezed."""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = re.sub(r"[^\w\s/+]", " ", text)
    return " ".join(text.replace("_", " ").split())


def _contains(haystack: str, needle: str) -> bool:
    """``needle`` in ``haystack``: anywhere for CJK, on word boundaries otherwise."""
    if not needle:
        return False
    if re.search(r"[\u4e00-\u9fff]", needle):
        return needle in haystack
    return re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])", haystack) is not None


def _strip(text: str, words: Iterable[str]) -> str:
    for word in sorted(words, key=len, reverse=True):
        if re.search(r"[\u4e00-\u9fff]", word):
            text = text.replace(word, " ")
        else:
            text = re.sub(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", " ", text)
    return " ".join(text.split())


def _stem(word: str) -> str:
    """"lights" and "light" alike."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _core(text: str) -> str:
    """A phrase without its filler words (Chinese and English)."""
    text = _strip(text, _FILLER_ZH)
    return " ".join(w for w in text.split() if w not in _FILLER_EN)


@dataclass
class Match:
    """The entities a phrase means, or the question to ask instead."""

    entities: list[HomeEntity]
    question: str = ""


class Matcher:
    """Matches phrases against a set of entities and their areas."""

    def __init__(self, entities: Iterable[HomeEntity], areas: dict[str, tuple[str, ...]] | None = None) -> None:
        self.entities = list(entities)
        names: dict[str, str] = {}
        for area, aliases in (areas or {}).items():
            for label in (area, *aliases):
                if normalise(label):
                    names[normalise(label)] = area
        for entity in self.entities:
            for label in (entity.area, *entity.area_aliases):
                if entity.area and normalise(label):
                    names.setdefault(normalise(label), entity.area)
        self._area_names = sorted(names.items(), key=lambda item: len(item[0]), reverse=True)
        self._labels = frozenset(names)

    def _area_of(self, entity: HomeEntity) -> str:
        """The entity's area, else the area its name starts with ("Living Room Fan")."""
        if entity.area:
            return entity.area
        name = normalise(entity.name)
        for label, area in self._area_names:
            if name.startswith(label):
                return area
        return ""

    def area_in(self, phrase: str) -> tuple[str, str]:
        """The area a phrase names (the longest name or alias found) and the label matched."""
        for label, area in self._area_names:
            if _contains(phrase, label):
                return area, label
        return "", ""

    @staticmethod
    def kinds_in(phrase: str) -> list[str]:
        found: list[str] = []
        rest = phrase
        words = sorted(((w, k) for k, ws in _KIND_WORDS.items() for w in ws), key=lambda item: len(item[0]),
                       reverse=True)
        for word, kind in words:
            if _contains(rest, word):
                if kind not in found:
                    found.append(kind)
                rest = _strip(rest, [word])
        return found

    @staticmethod
    def _is_kind(entity: HomeEntity, kind: str) -> bool:
        for domain, classes in _KINDS[kind]:
            if entity.domain != domain:
                continue
            if not classes:
                return True
            if "__light__" in classes:
                if "light" in normalise(entity.name) or any("灯" in a for a in entity.aliases):
                    return True
                continue
            if entity.device_class in classes:
                return True
        return False

    def match(self, phrase: str, *, domain: str = "", many: bool = False) -> Match:
        """The entities ``phrase`` means (restricted to ``domain`` when given)."""
        text = normalise(phrase)
        pool = [e for e in self.entities if not domain or e.domain == domain]
        if not text:
            return Match([], "say which device you mean (a name, or a room and a kind of device)")
        exact_id = [e for e in pool if e.entity_id == phrase.strip()]
        if exact_id:
            return Match(exact_id)
        plural = many or any(_contains(text, w) for w in _PLURAL)
        area, area_label = self.area_in(text)
        kinds = self.kinds_in(text)
        core = _core(text)
        core_no_area = _core(_strip(text, [area_label])) if area_label else core
        scored: list[tuple[float, HomeEntity]] = []
        for entity in pool:
            score = self._name_score(entity, core, core_no_area, self._labels)
            in_area = bool(area) and self._area_of(entity) == area
            if area and not in_area:
                if score < 60:
                    continue
                score -= 30
            if kinds:
                if any(self._is_kind(entity, k) for k in kinds):
                    score += 30 + (5 if self._is_kind(entity, kinds[0]) else 0)
                elif score < 60:
                    continue
            if in_area:
                score += 20
            if score > 0:
                scored.append((score, entity))
        if not scored:
            return Match([], self._nothing(phrase, area, kinds))
        scored.sort(key=lambda item: item[0], reverse=True)
        best = scored[0][0]
        if plural:
            floor = 30 if kinds else 20 if area else best
            chosen = [e for s, e in scored if s >= min(best, floor)]
            return Match(chosen)
        top = [e for s, e in scored if s >= best - 1e-9]
        if len(top) == 1:
            return Match(top)
        listed = "; ".join(f"{e.name} ({e.entity_id}{', ' + e.area if e.area else ''})" for e in top[:8])
        return Match(top, f"「{phrase}」 could mean {len(top)} devices: {listed}. Ask the person which one "
                          "(or say 'all' to mean every one of them)")

    @staticmethod
    def _name_score(entity: HomeEntity, core: str, core_no_area: str, area_labels: frozenset[str]) -> float:
        best = 0.0
        for label in (entity.name, *entity.aliases, entity.entity_id.split(".", 1)[1].replace("_", " ")):
            name = normalise(label)
            bare = _core(name)
            if not name:
                continue
            if core and (core in (name, bare) or core.replace(" ", "") == name.replace(" ", "")):
                best = max(best, 100.0)
            elif name in area_labels:
                continue  # a device named like its room ("Bedroom") is not named by the room's name
            elif core and len(name) >= 2 and (_contains(core, name) or (bare and _contains(core, bare))):
                best = max(best, 60.0 + len(name) / 10)
            elif core_no_area and len(core_no_area) >= 2 and (_contains(name, core_no_area) or core_no_area in name):
                best = max(best, 40.0)
            words = {_stem(w) for w in core.split() if w not in _FILLER_EN}
            named = {_stem(w) for w in name.split()}
            overlap = words & named
            if len(words) >= 2 and words <= named:
                best = max(best, 55.0)
            elif overlap:
                best = max(best, 8.0 * len(overlap))
            # "外面几度" and "外面温度": the same place, said with another kind word.
            own, said = _strip(name, _ALL_KIND_WORDS).replace(" ", ""), _strip(core, _ALL_KIND_WORDS).replace(" ", "")
            if _CJK.search(own) and len(own) >= 2 and len(said) >= 2 and (own in said or said in own):
                best = max(best, 50.0)
        return best

    @staticmethod
    def _nothing(phrase: str, area: str, kinds: list[str]) -> str:
        what = f" of kind {', '.join(kinds)}" if kinds else ""
        where = f" in {area}" if area else ""
        return (f"no exposed device matches 「{phrase}」{what}{where}; home_list shows the devices the agent may see "
                "(the owner exposes more with plugin.homeassistant.expose_*)")
