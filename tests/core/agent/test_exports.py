"""The agent package exports exactly its public names, sorted."""

from __future__ import annotations

import homeagent_core.agent as agent


def test_all_is_sorted_and_every_name_exists() -> None:
    assert agent.__all__ == sorted(agent.__all__, key=lambda n: (not n.isupper(), n))
    for name in agent.__all__:
        assert hasattr(agent, name), name


def test_public_names_are_exactly_the_exported_ones() -> None:
    public = {n for n in vars(agent) if not n.startswith("_") and not isinstance(getattr(agent, n), type(agent))}
    public.discard("annotations")
    assert public == set(agent.__all__)
