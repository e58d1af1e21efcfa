from __future__ import annotations

import numpy as np

from homeagent_core.memory.documents.time_order import TimeOrder


def arrays(created: list[float], source: list[int], cap: int = 16):
    c = np.zeros(cap)
    s = np.full(cap, -1, dtype=np.int32)
    alive = np.zeros(cap, dtype=bool)
    c[1 : len(created) + 1] = created
    s[1 : len(source) + 1] = source
    alive[1 : len(created) + 1] = True
    return alive, c, s


def naive_smooth(total, alive, created, source, window, weight):
    slots = sorted(np.flatnonzero(alive).tolist(), key=lambda x: (created[x], x))
    out = total.copy()
    for i, slot in enumerate(slots):
        for j in (i - 1, i + 1):
            if 0 <= j < len(slots):
                other = slots[j]
                if source[other] == source[slot] and abs(created[other] - created[slot]) <= window:
                    out[slot] += weight * total[other]
    return out


def test_appending_later_documents_matches_sorting_from_scratch():
    alive, created, source = arrays([10, 20, 30, 500, 510, 520], [0, 0, 1, 1, 1, 0])
    order = TimeOrder(window=60)
    alive_now = alive.copy()
    alive_now[5:] = False
    order.ensure(alive_now, created, source)
    order.append(np.array([5, 6]), created, source)  # come after everything: appended
    scratch = TimeOrder(window=60)
    scratch.ensure(alive, created, source)
    total = np.arange(16, dtype=np.float32)
    assert np.allclose(order.smooth(total, 0.5), scratch.smooth(total, 0.5))
    assert np.allclose(order.smooth(total, 0.5), naive_smooth(total, alive, created, source, 60, 0.5))
    assert sorted(order.neighbours(np.array([4])).tolist()) == [5]  # 3 is too long before
    assert sorted(order.neighbours(np.array([5])).tolist()) == [4]  # 6 is another source


def test_a_document_older_than_the_newest_invalidates_the_order():
    alive, created, source = arrays([10, 20, 15], [0, 0, 0])
    order = TimeOrder(window=60)
    alive_now = alive.copy()
    alive_now[3] = False
    order.ensure(alive_now, created, source)
    order.append(np.array([3]), created, source)
    order.ensure(alive, created, source)  # sorts again
    assert sorted(order.neighbours(np.array([3])).tolist()) == [1, 2]
    total = np.ones(16, dtype=np.float32)
    assert np.allclose(order.smooth(total, 0.2), naive_smooth(total, alive, created, source, 60, 0.2))


def test_neighbours_of_unknown_or_isolated_slots_are_empty():
    alive, created, source = arrays([10, 5000], [0, 0])
    order = TimeOrder(window=60)
    order.ensure(alive, created, source)
    assert order.neighbours(np.array([1, 2, 9, 40])).tolist() == []


def _conversations(n: int, seed: int):
    rng = np.random.default_rng(seed)
    alive = rng.random(n) < 0.95
    alive[0] = False
    created = np.cumsum(rng.random(n) * 100)
    source = rng.integers(0, 4, n).astype(np.int32)
    order = TimeOrder(window=150)
    order.ensure(alive, created, source)
    return rng, alive, order


def test_smoothed_scores_of_a_few_slots_equal_the_full_pass_bit_for_bit():
    rng, alive, order = _conversations(20_000, 5)
    total = (rng.random(20_000).astype(np.float32) * alive).astype(np.float32)
    full = order.smooth(total, 0.2)
    some = np.concatenate([rng.choice(20_000, 500, replace=False), [0, 19_999]])
    assert np.array_equal(order.smoothed_at(total, some, 0.2), full[some])


def test_the_best_smoothed_slots_come_from_the_pool_only_when_that_is_provably_the_answer():
    rng, alive, order = _conversations(50_000, 6)
    # a few strong matches over a flat background: the pool's bound proves the answer
    total = (rng.random(50_000).astype(np.float32) * 0.1) * alive
    strong = rng.choice(np.flatnonzero(alive), 40, replace=False)
    total[strong] = rng.random(40).astype(np.float32) + 1.0
    total = total.astype(np.float32)
    full = order.smooth(total, 0.2)
    found = order.top_smoothed(total, 0.2, 10, 256)
    assert found is not None
    slots, scores = found
    assert np.array_equal(np.sort(scores), np.sort(full)[-10:])
    assert np.array_equal(full[slots], scores)
    # uniform scores: a slot outside the pool could still win, so no answer is claimed
    flat = (rng.random(50_000).astype(np.float32) * alive).astype(np.float32)
    assert order.top_smoothed(flat, 0.2, 10, 256) is None


def test_ties_at_the_last_place_go_to_the_lower_slot_with_or_without_the_pool():
    from homeagent_core.memory.documents.ranking import best_fused

    _, alive, order = _conversations(30_000, 8)
    total = np.zeros(30_000, dtype=np.float32)
    strong = np.flatnonzero(alive)[::1000][:12]
    total[strong[:4]] = 2.0
    total[strong[4:]] = 1.0  # eight documents tie for the last six places
    live = alive.copy()
    pooled = best_fused(total.copy(), live, 10, order, 0.2)
    assert order.top_smoothed(total * live, 0.2, 10, 512) is not None  # the pool answered
    plain = best_fused(total.copy(), live, 10, order, 0.0)
    full = sorted(range(30_000), key=lambda s: (-float(order.smooth(total * live, 0.2)[s]), s))[:10]
    assert [s for s, _ in pooled] == full
    assert [s for s, _ in plain][:4] == sorted(int(s) for s in strong[:4])
    assert [s for s, _ in plain][4:] == sorted(int(s) for s in strong[4:])[:6]
