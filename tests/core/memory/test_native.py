"""The compiled loops give the numpy and simsimd paths' scores bit for bit, and refuse bad indexes."""

from __future__ import annotations

import ast
import logging
import os
import random
import shutil
import string
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from homeagent_core.lexical.buckets import term_counts
from homeagent_core.memory.documents import native
from homeagent_core.memory.documents.lexical import index as lexical
from homeagent_core.memory.documents.lexical import scoring as lexical_scoring
from homeagent_core.memory.documents.lexical.index import LexicalIndex

_WORD_TEXT = (
    "i painted a sunrise at the lake last weekend melanie caroline went to the support group "
    "yesterday we talked about adoption and pottery class my kids love the beach camping trip "
    "小王 你好 museum pottery bowl guitar concert marathon yoga recipe dumplings"
)
WORDS = _WORD_TEXT.split()
QUERIES = (
    "pottery bowl for the guitar marathon at the lake",
    "melanie painted a sunrise",
    "小王 你好 museum",
    "the the the support group",
    "zzz unknown words only",
)


def texts(seed: int, count: int) -> list[str]:
    """Random texts; repeated words give term counts above one."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.3:
            words += [rng.choice(words)] * rng.randint(1, 4)
        out.append(" ".join(words))
    return out


@pytest.fixture
def kernel() -> native.NativeLibrary:
    if os.environ.get("HOMEAGENT_BUILD_NATIVE") == "0":
        pytest.skip("installed with HOMEAGENT_BUILD_NATIVE=0: no compiled loops to compare")
    if os.environ.get("HOMEAGENT_NATIVE") == "0":
        pytest.skip("HOMEAGENT_NATIVE=0 switches the compiled loops off: the numpy path alone runs")
    lib = native.library()
    assert lib is not None, f"the install did not build {native.LIBRARY} (hatch_build.py)"
    return lib


def spied(monkeypatch: pytest.MonkeyPatch, lib: native.NativeLibrary) -> dict[str, list[int]]:
    """Record which compiled functions ran (and with which formula / term width)."""
    seen: dict[str, list[int]] = {"ranges": [], "rescore": []}
    ranges = lib.ranges

    def spy_ranges(*args: object) -> int:
        seen["ranges"].append(int(args[10]))  # type: ignore[call-overload]
        return int(ranges(*args))

    monkeypatch.setattr(lib, "ranges", spy_ranges)
    for width, fn in list(lib.rescore.items()):
        def spy_rescore(*args: object, _fn=fn, _width=width) -> int:
            seen["rescore"].append(_width)
            return int(_fn(*args))

        monkeypatch.setitem(lib.rescore, width, spy_rescore)
    return seen


def both_ways(index: LexicalIndex, query: str, **kw: object) -> tuple[np.ndarray, np.ndarray]:
    previous = native.set_enabled(True)
    try:
        compiled = index.scores(query, **kw)  # type: ignore[arg-type]
        native.set_enabled(False)
        plain = index.scores(query, **kw)  # type: ignore[arg-type]
    finally:
        native.set_enabled(previous)
    return compiled, plain


@pytest.mark.parametrize("budget", [300, 4_000, None])
def test_compiled_scores_equal_the_numpy_scores_bit_for_bit(kernel, monkeypatch, budget):
    monkeypatch.setattr(lexical, "DELTA_MAX", 500)
    seen = spied(monkeypatch, kernel)
    index = LexicalIndex(max_postings=budget, rescore=80)
    written = texts(5, 2400)
    for slot, text in enumerate(written[:2000], start=1):
        index.add(slot, text)
    index.merge()
    for slot, text in enumerate(written[2000:], start=2001):  # some merged, the rest in the delta
        index.add(slot, text)
    index.remove(7, term_counts(written[6])[0])
    picked = np.array([3, 4, 5, 900, 2399], dtype=np.int64)
    for query in QUERIES:
        compiled, plain = both_ways(index, query, candidates=picked, expand=lambda c: c[c < 2400] + 1)
        assert compiled.dtype == plain.dtype == np.float32
        assert np.array_equal(compiled, plain), query
    assert seen["ranges"]
    if budget is None:
        assert 1 in seen["ranges"]  # postings for over half the slots: the "many" formula
        assert not seen["rescore"]  # nothing over budget
    else:
        assert seen["rescore"] and set(seen["rescore"]) == {2}  # over-budget buckets, two-byte term ids
    if budget == 300:
        assert 0 in seen["ranges"]  # few postings: the "few" formula


@pytest.mark.parametrize("split", [1, 2_000])
def test_rescoring_split_over_two_threads_gives_the_same_scores(kernel, monkeypatch, split):
    """Past SPLIT_ENTRIES forward entries, half the candidates are summed on a pool thread."""
    index = LexicalIndex(max_postings=300, rescore=120)
    for slot, text in enumerate(texts(7, 2000), start=1):
        index.add(slot, text)
    index.merge()
    threads: list[str] = []
    real = native.rescore_sums

    def sums(*args: object) -> object:
        threads.append(threading.current_thread().name)
        return real(*args)  # type: ignore[arg-type]

    picked = np.arange(1, 2001, 9, dtype=np.int64)
    for query in QUERIES:
        whole = index.scores(query, candidates=picked)
        monkeypatch.setattr(lexical_scoring, "SPLIT_ENTRIES", split)
        monkeypatch.setattr(native, "rescore_sums", sums)
        halves = index.scores(query, candidates=picked)
        monkeypatch.undo()
        assert np.array_equal(whole, halves), query
        compiled, plain = both_ways(index, query, candidates=picked)
        assert np.array_equal(compiled, plain), query
    pooled = [name for name in threads if name.startswith("homeagent-query")]
    assert pooled and len(threads) == 2 * len(pooled)  # every split call: one half here, one there


def test_int8_dot_products_equal_simsimd_and_the_plain_loop(kernel):
    """The dense leg's compiled int8 scan gives simsimd's scores exactly, for any width and row count."""
    import simsimd

    rng = np.random.default_rng(3)
    for rows, dim in ((0, 64), (1, 64), (7, 33), (1_003, 64), (259, 384), (64, 31), (5, 1)):
        matrix = rng.integers(-127, 128, (rows, dim), dtype=np.int8)
        q = rng.integers(-127, 128, dim, dtype=np.int8)
        got = native.i8_dots(kernel, matrix, q)
        assert got.dtype == np.float32 and got.shape == (rows,)
        if rows:  # simsimd refuses an empty matrix
            want = np.asarray(simsimd.cdist(matrix, q.reshape(1, -1), metric="dot", out_dtype="float32")).reshape(-1)
            assert np.array_equal(got, want), (rows, dim)
        assert np.array_equal(got, (matrix.astype(np.int64) @ q.astype(np.int64)).astype(np.float32))
    extreme = np.full((9, 64), 127, dtype=np.int8)
    extreme[::2] = -127
    q = np.full(64, -127, dtype=np.int8)
    assert np.array_equal(native.i8_dots(kernel, extreme, q), (extreme.astype(np.int64) @ q).astype(np.float32))
    with pytest.raises(ValueError, match="do not match"):
        native.i8_dots(kernel, np.zeros((3, 8), np.int8), np.zeros(9, np.int8))
    with pytest.raises(TypeError, match="contiguous int8"):
        native.i8_dots(kernel, np.zeros((3, 16), np.int8)[:, ::2], np.zeros(8, np.int8))


def test_compiled_scores_equal_the_numpy_scores_on_an_index_read_from_its_snapshot(kernel, tmp_path, monkeypatch):
    seen = spied(monkeypatch, kernel)
    written = texts(9, 3000)
    counted = [term_counts(t) for t in written[:2500]]
    slots = np.arange(1, 2501, dtype=np.int64)
    lengths = np.array([c[2] for c in counted])
    built = LexicalIndex.build(
        slots, np.array([len(c[0]) for c in counted]), np.concatenate([c[0] for c in counted]),
        np.concatenate([c[1] for c in counted]), lengths, max_postings=3_000, rescore=200,
    )
    path = tmp_path / "lex"
    built.save(path, tag="t")
    loaded = LexicalIndex.load(path, slots, lengths, tag="t", verify=False, max_postings=3_000, rescore=200)
    assert loaded.unchecked is not None and loaded.unchecked.source is not None
    try:
        assert loaded.forward_file_bytes > 0  # postings and forward lists read from the file
        for slot, text in enumerate(written[2500:], start=2501):  # forward lists in memory too
            loaded.add(slot, text)
        spread = np.arange(1, 3001, 7, dtype=np.int64)
        for query in QUERIES:
            compiled, plain = both_ways(loaded, query, candidates=spread)
            assert np.array_equal(compiled, plain), query
        assert seen["ranges"] and seen["rescore"]
    finally:
        loaded.unchecked.source.close()


def test_term_ids_past_two_bytes_take_the_wide_kernel(kernel, monkeypatch):
    seen = spied(monkeypatch, kernel)
    rng = random.Random(4)
    index = LexicalIndex(max_postings=2_000, rescore=50)
    for slot in range(1, 2501):
        noise = " ".join("".join(rng.choices(string.ascii_lowercase, k=9)) for _ in range(6))
        index.add(slot, f"{rng.choice(WORDS)} {rng.choice(WORDS)} {noise}")
    index.merge()
    assert index._forward.n_terms > 1 << 16
    for query in QUERIES[:3]:
        compiled, plain = both_ways(index, query, candidates=np.array([10, 11, 2000], dtype=np.int64))
        assert np.array_equal(compiled, plain), query
    assert 4 in seen["rescore"]


def test_indexes_outside_the_tables_raise_instead_of_reaching_past_them(kernel):
    norm = np.ones(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    args = (np.array([0], np.int64), np.array([3], np.int64), np.array([1.0], np.float32), norm, norm, 1.2, out)
    with pytest.raises(IndexError, match="names a slot outside 10 slots"):
        native.add_ranges(kernel, np.array([1, 2, 10], np.int32), np.ones(3, np.uint8), *args)
    with pytest.raises(IndexError, match="names a slot outside"):
        native.add_ranges(kernel, np.array([1, -5, 2], np.int32), np.ones(3, np.uint8), *args)
    assert not out.any()  # nothing was added
    with pytest.raises(IndexError, match="range reaches past"):
        native.add_ranges(kernel, np.array([1, 2], np.int32), np.ones(2, np.uint8), *args)
    with pytest.raises(TypeError, match="contiguous int32"):
        native.add_ranges(kernel, np.array([1, 2, 3], np.int64), np.ones(3, np.uint8), *args)
    table = np.zeros(4, dtype=np.float32)
    table[2] = 1.5
    starts, lens, cand = np.array([0], np.int64), np.array([3], np.int64), np.array([1], np.int64)
    few, many, hits = native.rescore_sums(
        kernel, np.array([0, 2, 3], np.uint16), np.array([1, 2, 1], np.uint8), starts, lens, cand, table, norm, 1.2
    )
    assert hits == 1 and few[0] > 0 and many[0] > 0
    with pytest.raises(IndexError, match="forward entry 1 names a term outside a table of 4"):
        native.rescore_sums(
            kernel, np.array([0, 4, 3], np.uint16), np.ones(3, np.uint8), starts, lens, cand, table, norm, 1.2
        )
    with pytest.raises(IndexError, match="candidate slot"):
        native.rescore_sums(
            kernel, np.array([0, 2, 3], np.uint16), np.ones(3, np.uint8), starts, lens,
            np.array([10], np.int64), table, norm, 1.2,
        )
    with pytest.raises(TypeError, match="uint16 or uint32"):
        native.rescore_sums(
            kernel, np.array([0, 2, 3], np.int64), np.ones(3, np.uint8), starts, lens, cand, table, norm, 1.2
        )


def test_lengths_and_ranges_are_checked_before_the_compiled_loops_read_anything(kernel):
    """Arrays read side by side must be equally long, ranges non-negative and inside their array
    (also where start + length would wrap), every array one-dimensional: else an error names it
    and nothing is read or written."""
    slots, tfs = np.array([1, 2, 3], np.int32), np.ones(3, np.uint8)
    norm = np.ones(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)

    def ranges(starts: list[int], lens: list[int], weights: list[float], **kw: np.ndarray) -> None:
        args = {"slots": slots, "tfs": tfs, "norm": norm, "unit": norm, "out": out, **kw}
        native.add_ranges(
            kernel, args["slots"], args["tfs"], np.array(starts, np.int64), np.array(lens, np.int64),
            np.array(weights, np.float32), args["norm"], args["unit"], 1.2, args["out"],
        )

    with pytest.raises(ValueError, match="starts, lens and weights must be equally long, not 3, 1 and 1"):
        ranges([0, 1, 2], [1], [1.0])
    with pytest.raises(ValueError, match="not 1, 1 and 3"):
        ranges([0], [1], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="slots and tfs must be equally long, not 3 and 2"):
        ranges([0], [2], [1.0], tfs=np.ones(2, np.uint8))
    with pytest.raises(ValueError, match="range 1 has a negative length -2"):
        ranges([0, 1], [1, -2], [1.0, 1.0])
    with pytest.raises(IndexError, match=r"reaches past an array of 3 \(range 0: 4611686018427387904 from 4611686"):
        ranges([1 << 62], [1 << 62], [1.0])  # start + length wraps to a negative int64
    with pytest.raises(IndexError, match="range 0: 1 from -1"):
        ranges([-1], [1], [1.0])
    with pytest.raises(ValueError, match="out must be one-dimensional"):
        ranges([0], [1], [1.0], out=np.zeros((10, 1), np.float32))
    with pytest.raises(ValueError, match=r"length factors \(4, 10\) shorter than the 10 scores"):
        ranges([0], [1], [1.0], norm=np.ones(4, np.float32))
    assert not out.any()
    ranges([0, 2], [2, 1], [1.0, 2.0])
    assert out[1] > 0 and out[2] > 0 and out[3] > 0 and out[[0, 4]].tolist() == [0, 0]

    table = np.ones(4, dtype=np.float32)
    terms = np.array([0, 2, 3], np.uint16)

    def rescore(starts: list[int], lens: list[int], cand: list[int]) -> object:
        return native.rescore_sums(
            kernel, terms, tfs, np.array(starts, np.int64), np.array(lens, np.int64), np.array(cand, np.int64),
            table, norm, 1.2,
        )

    with pytest.raises(ValueError, match="starts, lens and slots must be equally long, not 1, 1 and 3"):
        rescore([0], [3], [1, 2, 3])
    with pytest.raises(ValueError, match="not 3, 1 and 1"):
        rescore([0, 1, 2], [1], [1])
    with pytest.raises(ValueError, match="negative length"):
        rescore([0], [-1], [1])
    with pytest.raises(IndexError, match="reaches past an array of 3"):
        rescore([1 << 62], [1 << 62], [1])


@st.composite
def ranged_postings(draw: st.DrawFn) -> dict[str, object]:
    """Postings, ranges over them and per-slot factors; about half the cases carry some damage
    (a length that does not pair up, a range outside, a slot outside the scores)."""
    clean = draw(st.booleans())

    def sized(k: int) -> int:  # a length, or in a damaged case sometimes one off
        return k if clean else max(0, k + draw(st.sampled_from([-1, 0, 0, 0, 1])))

    def floats(lo: float, hi: float, count: int) -> list[float]:
        return draw(st.lists(st.floats(lo, hi, width=32), min_size=count, max_size=count))

    size = draw(st.integers(0, 24))
    n = draw(st.integers(0, 40)) if size or not clean else 0  # no slot is valid among 0 scores
    slot = st.integers(0, max(size - 1, 0)) if clean else st.integers(-2, size + 1)
    slots = draw(st.lists(slot, min_size=n, max_size=n))
    starts, lens = [], []
    for _ in range(draw(st.integers(0, 6))):
        if clean:
            starts.append(draw(st.integers(0, n)))
            lens.append(draw(st.integers(0, n - starts[-1])))
        else:
            starts.append(draw(st.sampled_from([-1, 0, n // 2, n, n + 1, 1 << 62])))
            lens.append(draw(st.sampled_from([-1, 0, 1, 2, n, 1 << 62])))
    nlens, nweights, ntfs = sized(len(starts)), sized(len(starts)), sized(n)
    return {
        "slots": np.array(slots, np.int32),
        "tfs": np.array(draw(st.lists(st.integers(0, 255), min_size=ntfs, max_size=ntfs)), np.uint8),
        "starts": np.array(starts, np.int64),
        "lens": np.array([*lens, 1, 1][:nlens], np.int64),
        "weights": np.array(floats(0, 30, nweights), np.float32),
        "norm": np.array(floats(0.0625, 8, sized(size) + draw(st.integers(0, 2))), np.float32),
        "unit": np.array(floats(0.0625, 3, size + draw(st.integers(0, 2))), np.float32),
        "out": np.array(floats(-5, 50, size), np.float32),
        "k1": draw(st.floats(0.1, 3.0)),
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranged_postings())
def test_the_compiled_ranges_equal_numpy_or_refuse_for_any_lengths_and_ranges(kernel, case):
    slots, tfs, starts, lens, weights = (case[k] for k in ("slots", "tfs", "starts", "lens", "weights"))
    norm, unit, out, k1 = case["norm"], case["unit"], case["out"], case["k1"]
    size, n = len(out), len(slots)
    pairs = [(int(a), int(b)) for a, b in zip(starts, lens, strict=False)]
    valid = (
        len(tfs) == n and len(starts) == len(lens) == len(weights) and len(norm) >= size and len(unit) >= size
        and all(length >= 0 and start >= 0 and start + length <= n for start, length in pairs)
        and all(0 <= slot < size for start, length in pairs for slot in slots[start : start + length].tolist())
    )
    before = out.copy()
    if not valid:
        with pytest.raises((ValueError, IndexError)):
            native.add_ranges(kernel, slots, tfs, starts, lens, weights, norm, unit, k1, out)
        assert np.array_equal(out, before)  # nothing added on a refusal
        return
    native.add_ranges(kernel, slots, tfs, starts, lens, weights, norm, unit, k1, out)
    expected = before.copy()
    taken = [np.zeros(0, np.int64)] + [np.arange(start, start + length) for start, length in pairs]
    picked = np.concatenate(taken)
    lexical_scoring.accumulate(
        expected, slots[picked], tfs[picked], np.repeat(weights, lens), (norm, unit), k1
    )
    assert np.array_equal(out, expected)


@st.composite
def forward_entries(draw: st.DrawFn) -> dict[str, object]:
    """Candidates' forward entries and a term table; about half the cases carry some damage."""
    clean = draw(st.booleans())
    n = draw(st.integers(0, 40))
    table_len = draw(st.integers(1, 12))
    nnorm = draw(st.integers(1, 12))
    ncand = draw(st.integers(0, 6))
    term_hi = table_len - 1 if clean else table_len + 1
    starts, lens = [], []
    for _ in range(ncand):
        start = draw(st.integers(0, n) if clean else st.sampled_from([-1, 0, n // 2, n, n + 1, 1 << 62]))
        lens.append(draw(st.integers(0, n - start)) if clean else draw(st.sampled_from([-1, 0, 1, n, 1 << 62])))
        starts.append(start)
    extra = 0 if clean else draw(st.sampled_from([-1, 0, 0, 1]))
    table = draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.25, 3.0, 7.5]), min_size=table_len, max_size=table_len))
    finite = {"allow_nan": False, "allow_infinity": False, "width": 32}
    return {
        "terms": np.array(draw(st.lists(st.integers(0, term_hi), min_size=n, max_size=n)),
                          draw(st.sampled_from([np.uint16, np.uint32]))),
        "tfs": np.array(draw(st.lists(st.integers(0, 255), min_size=max(0, n + extra), max_size=max(0, n + extra))),
                        np.uint8),
        "starts": np.array(starts, np.int64),
        "lens": np.array(lens, np.int64),
        "slots": np.array(draw(st.lists(st.integers(0 if clean else -1, nnorm - (1 if clean else 0)),
                                        min_size=max(0, ncand + extra), max_size=max(0, ncand + extra))), np.int64),
        "table": np.array(table, np.float32),
        "norm": np.array(draw(st.lists(st.floats(0.0625, 8, **finite), min_size=nnorm, max_size=nnorm)), np.float32),
        "k1": draw(st.floats(0.1, 3.0)),
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(forward_entries())
def test_the_compiled_rescoring_sums_equal_numpy_or_refuse_for_any_lengths_and_ranges(kernel, case):
    terms, tfs, starts, lens, slots = (case[k] for k in ("terms", "tfs", "starts", "lens", "slots"))
    table, norm, k1 = case["table"], case["norm"], case["k1"]
    pairs = [(int(a), int(b)) for a, b in zip(starts, lens, strict=False)]
    valid = (
        len(terms) == len(tfs) and len(starts) == len(lens) == len(slots)
        and all(0 <= slot < len(norm) for slot in slots.tolist())
        and all(length >= 0 and start >= 0 and start + length <= len(terms) for start, length in pairs)
        and all(term < len(table) for start, length in pairs for term in terms[start : start + length].tolist())
    )
    if not valid:
        with pytest.raises((ValueError, IndexError)):
            native.rescore_sums(kernel, terms, tfs, starts, lens, slots, table, norm, k1)
        return
    few, many, hits = native.rescore_sums(kernel, terms, tfs, starts, lens, slots, table, norm, k1)
    # numpy, with the arithmetic of lexical_scoring.accumulate, per candidate
    owner = np.concatenate([np.zeros(0, np.int64)] + [np.full(length, i) for i, (_, length) in enumerate(pairs)])
    entry = np.concatenate([np.zeros(0, np.int64)] + [np.arange(start, start + length) for start, length in pairs])
    weights = table[terms[entry]]
    hit = weights != 0
    owner, entry, weights = owner[hit], entry[hit], weights[hit]
    tf, near = tfs[entry].astype(np.float32), norm[slots[owner]]
    contrib = weights * tf * (k1 + 1.0) / (tf + near)
    scaled = weights.astype(np.float64)
    more = tfs[entry] > 1
    scaled[more] *= (tf * (1.0 + near) / (tf + near))[more]
    assert hits == int(hit.sum())
    assert np.array_equal(few, np.bincount(owner, weights=contrib, minlength=len(slots)))
    assert np.array_equal(many, np.bincount(owner, weights=scaled, minlength=len(slots)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 9), st.integers(0, 80), st.sampled_from([0, 0, 0, -1, 1, 32]), st.randoms(use_true_random=False))
def test_the_compiled_int8_dots_equal_integer_sums_or_refuse_for_any_shape(kernel, rows, dim, off, rng):
    """Any int8 values (-128 included), any row count and width; a query of another width is refused."""
    qdim = max(0, dim + off)
    matrix = np.array([[rng.randint(-128, 127) for _ in range(dim)] for _ in range(rows)], np.int8).reshape(rows, dim)
    q = np.array([rng.randint(-128, 127) for _ in range(qdim)], np.int8)
    if qdim != dim:
        with pytest.raises(ValueError, match="do not match"):
            native.i8_dots(kernel, matrix, q)
        return
    got = native.i8_dots(kernel, matrix, q)
    assert np.array_equal(got, (matrix.astype(np.int64) @ q.astype(np.int64)).astype(np.float32))


def test_int8_dot_products_are_exact_for_minus_128_in_rows_and_query(kernel):
    """-128 never comes out of the quantizer, but a damaged vector file can hold it: it must score
    as in simsimd and the plain loop (the AVX2 loop once gave it the wrong sign)."""
    import simsimd

    rng = np.random.default_rng(11)
    for rows, dim in ((8, 64), (13, 96), (5, 33)):
        matrix = rng.integers(-128, 128, (rows, dim), dtype=np.int8)
        matrix[:, ::3] = -128
        for q in (rng.integers(-127, 128, dim, dtype=np.int8), np.full(dim, -127, np.int8),
                  rng.integers(-128, 128, dim, dtype=np.int8), np.full(dim, -128, np.int8)):
            got = native.i8_dots(kernel, matrix, q)
            want = (matrix.astype(np.int64) @ q.astype(np.int64)).astype(np.float32)
            assert np.array_equal(got, want), (rows, dim, q[:4])
            simd = np.asarray(simsimd.cdist(matrix, q.reshape(1, -1), metric="dot", out_dtype="float32")).reshape(-1)
            assert np.array_equal(got, simd)


def _reload(monkeypatch: pytest.MonkeyPatch, path: object) -> native.NativeLibrary | None:
    monkeypatch.setattr(native, "LIBRARY", path)
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_loaded", None)
    monkeypatch.setattr(native, "_enabled", True)
    return native.library()


def test_a_missing_damaged_or_outdated_library_leaves_scoring_to_numpy(tmp_path, monkeypatch, caplog):
    index = LexicalIndex(max_postings=500, rescore=40)
    for slot, text in enumerate(texts(2, 800), start=1):
        index.add(slot, text)
    index.merge()
    native.set_enabled(False)
    try:
        expected = index.scores(QUERIES[0])
    finally:
        native.set_enabled(True)
    caplog.set_level(logging.INFO, logger="homeagent_core.memory.documents.native")
    assert _reload(monkeypatch, tmp_path / "absent.so") is None
    assert "no compiled BM25 loops at" in caplog.text
    assert np.array_equal(index.scores(QUERIES[0]), expected)

    damaged = tmp_path / "damaged.so"
    damaged.write_bytes(b"\x7fELF not really a library")
    assert _reload(monkeypatch, damaged) is None
    assert f"the compiled BM25 loops {damaged} cannot be loaded" in caplog.text
    assert np.array_equal(index.scores(QUERIES[0]), expected)

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return  # no compiler to build an outdated library with; the two cases above still ran
    source = tmp_path / "old.c"
    source.write_text("int ha_native_abi(void) { return 0; }\n")
    old = tmp_path / "old.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(old), str(source)], check=True)
    assert _reload(monkeypatch, old) is None
    assert f"are version 0, this code needs {native.ABI}" in caplog.text
    assert np.array_equal(index.scores(QUERIES[0]), expected)


def test_the_wheel_hook_builds_the_library_where_native_loads_it_from():
    """hatch_build.py compiles the source beside native.py into the file native.py loads; make and git agree."""
    root = Path(__file__).resolve().parents[3]
    tree = ast.parse((root / "hatch_build.py").read_text(encoding="utf-8"))
    values = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    source = ast.literal_eval(values["SOURCE"])
    library = values["LIBRARY"]
    assert isinstance(library, ast.BinOp), "hatch_build.LIBRARY is no longer '<folder>/' + <file name>"
    folder = ast.literal_eval(library.left)
    assert (root / source).resolve() == native.LIBRARY.with_name("_native.c").resolve(), (
        f"hatch_build.SOURCE is {source}, but native.py sits beside {native.LIBRARY.with_name('_native.c')}"
    )
    assert (root / folder).resolve() == native.LIBRARY.parent.resolve(), (
        f"hatch_build.LIBRARY builds into {folder}, but native.py loads {native.LIBRARY}"
    )
    relative = native.LIBRARY.resolve().relative_to(root.resolve()).as_posix()
    ignored = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert relative.endswith(".dll") or relative in ignored, f".gitignore does not list the built {relative}"
    assert source in (root / "Makefile").read_text(encoding="utf-8"), "the Makefile's installs do not depend on SOURCE"
