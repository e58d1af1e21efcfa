"""The compiled loops give the numpy and simsimd paths' scores bit for bit, and refuse bad indexes."""

from __future__ import annotations

import logging
import os
import random
import shutil
import string
import subprocess
import threading

import numpy as np
import pytest

from homeagent_core.memory import lexical, lexical_scoring, native
from homeagent_core.memory.lexical import LexicalIndex, term_counts

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
    caplog.set_level(logging.INFO, logger="homeagent_core.memory.native")
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
