"""SocialGraph: people, traits, relations and networks over the graph store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.social import SocialGraph
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple


@pytest.fixture
def social(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> SocialGraph:
    g = open_graph(tmp_path / "graph.db")
    yield SocialGraph(g)
    g.close()


def test_traits_are_set_replaced_and_survive_a_reopen(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    g = open_graph(tmp_path / "graph.db")
    s = SocialGraph(g)
    s.set_trait("小王", "年龄", "25")
    s.set_trait("小王", "年龄", "26")
    s.set_trait("小王", "生日", "3月5日")
    g.close()
    s = SocialGraph(open_graph(tmp_path / "graph.db"))
    assert s.traits("小王") == {"年龄": "26", "生日": "3月5日"}
    assert s.get_trait("小王", "年龄") == "26"
    assert s.list_persons() == ["小王"]
    s.graph.close()


def test_relations_and_network_stay_among_people(social: SocialGraph) -> None:
    social.relate("小王", "朋友", "小李")
    social.relate("小李", "同事", "老张")
    social.relate("老张", "邻居", "老陈")
    social.graph.commit([Triple("小王", "住在", "杭州")])
    person = social.get_person("小王")
    assert person is not None and person["type"] == "person"
    assert {"person": "小李", "relation": "朋友", "direction": "out"} in person["relations"]
    net = social.network("小王", depth=2)
    assert net["people"] == [{"name": "小李", "distance": 1}, {"name": "老张", "distance": 2}]
    assert {"source": "小李", "relation": "同事", "target": "老张"} in net["relations"]
    assert all(r["target"] != "杭州" for r in net["relations"])


def test_bad_people_input_is_refused_clearly(social: SocialGraph) -> None:
    with pytest.raises(MemoryStoreError, match="invalid person name"):
        social.set_trait("王", "年龄", "3")
    with pytest.raises(MemoryStoreError, match="trait value is empty"):
        social.set_trait("小王", "年龄", "  ")
    with pytest.raises(MemoryStoreError, match="themself"):
        social.relate("小王", "朋友", "小王")
    with pytest.raises(MemoryStoreError, match="unknown person '小赵'"):
        social.network("小赵")


def test_deleting_a_person_deletes_their_traits(social: SocialGraph) -> None:
    social.set_trait("小王", "年龄", "25")
    social.graph.delete_entity("小王")
    assert social.traits("小王") == {}
    assert social.get_person("小王") is None
