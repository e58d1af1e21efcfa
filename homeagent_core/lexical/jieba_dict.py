"""jieba with a compact dictionary: the same words, frequencies and segmentation in ~5 MB.

jieba keeps its dictionary as one Python dict holding every word *and every prefix of every
word* (~500k ``str`` keys with ``int`` values): about 62 MB of a daemon's resident memory for
as long as it runs. :class:`CompactTokenizer` is a :class:`jieba.Tokenizer` whose dictionary
is a :mod:`marisa_trie` of the words with a non-zero frequency plus a parallel array of their
frequencies. Segmentation only ever asks two questions of the dictionary — which words start
at position *k* of a sentence (the DAG), and how frequent a word is (the route) — and a trie
answers the first one directly (``iter_prefixes_with_ids``), where jieba walks the prefix dict
one character at a time. The prefix entries exist only to stop that walk, so dropping them
changes nothing: since jieba adds every prefix of every word, its walk from *k* visits exactly
the words a trie returns as prefixes of the sentence from *k*. The route is computed with the
same expression in the same order, so the words cut are identical (``tests`` compare both on a
large text); the trie is built from jieba's own ``dict.txt``, streaming, in 1–2 s, by a child
process (the builder holds the GIL, so a thread would stall the event loop), and kept in a cache
file (``$XDG_CACHE_HOME/homeagent/``, else ``~/.cache/homeagent/``; keyed by jieba's
version and the dictionary file's size and time) that later starts load in milliseconds — as
jieba caches its own prefix dict in the temp folder. A cache that is missing, unreadable or
inconsistent is rebuilt; one that cannot be written only costs the next start the build.

Only the default dictionary is supported, and the dictionary is read-only (``add_word``,
``load_userdict`` and ``suggest_freq`` raise); nothing here uses them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import subprocess
import sys
from array import array
from collections.abc import Iterator
from math import log
from pathlib import Path
from typing import IO, Any

import jieba
import marisa_trie

from homeagent_sdk._atomic import atomic_file

__all__ = ["CompactTokenizer", "cache_path", "write_cache"]

logger = logging.getLogger(__name__)

#: Cache file layout: magic, then total, longest word, word count (int64 each), the frequencies
#: (int64 by trie id), then the serialized trie.
_MAGIC = b"HAJIEBA1"
_HEADER = struct.Struct("<8sqqq")


class _Frequencies:
    """jieba's ``FREQ`` mapping, read-only, over the trie: word -> frequency (words only)."""

    def __init__(self, trie: marisa_trie.Trie, freqs: array[int]) -> None:
        self._trie, self._freqs = trie, freqs

    def get(self, word: str, default: Any = None) -> Any:
        key_id = self._trie.get(word)
        return default if key_id is None else self._freqs[key_id]

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and word in self._trie

    def __getitem__(self, word: str) -> int:
        key_id = self._trie.get(word)
        if key_id is None:
            raise KeyError(word)
        return int(self._freqs[key_id])

    def __setitem__(self, word: str, freq: int) -> None:
        raise TypeError("the compact jieba dictionary is read-only (add_word, load_userdict are not supported)")

    def __len__(self) -> int:
        return len(self._trie)


def _entries(f: IO[bytes]) -> Iterator[tuple[str, int]]:
    """(word, frequency) of each line of a jieba dictionary file, parsed as jieba parses it."""
    try:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip().decode("utf-8")
            try:
                word, freq = line.split(" ")[:2]
                yield word, int(freq)
            except ValueError:
                raise ValueError(f"invalid dictionary entry at line {lineno}: {line}") from None
    finally:
        f.close()


def cache_path() -> Path | None:
    """Where the compact form of jieba's default dictionary is cached (None: no such file)."""
    source = Path(jieba.__file__).parent / "dict.txt"
    try:
        stat = source.stat()
    except OSError:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "homeagent"
    return base / f"jieba-{jieba.__version__}-{stat.st_size}-{stat.st_mtime_ns}.dict"


def _load_cache(path: Path) -> tuple[marisa_trie.Trie, array[int], int, int] | None:
    """The trie, frequencies, total and longest word from ``path``; None when it is not a good cache."""
    try:
        data = path.read_bytes()
        magic, total, maxlen, count = _HEADER.unpack_from(data)
        start = _HEADER.size + 8 * count
        if magic != _MAGIC or count <= 0 or len(data) <= start:
            return None
        freqs = array("q")
        freqs.frombytes(data[_HEADER.size : start])
        trie = marisa_trie.Trie().frombytes(data[start:])
    except (OSError, ValueError, struct.error, RuntimeError) as exc:
        logger.debug("jieba dictionary cache %s not used: %s", path, exc)
        return None
    if len(trie) != count:
        return None
    return trie, freqs, total, maxlen


def _save_cache(path: Path, trie: marisa_trie.Trie, freqs: array[int], total: int, maxlen: int) -> None:
    """Write the cache atomically (a temp file renamed into place); a failure is only logged."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with atomic_file(path) as fh:
            fh.write(_HEADER.pack(_MAGIC, total, maxlen, len(freqs)))
            fh.write(freqs.tobytes())
            fh.write(trie.tobytes())
    except OSError as exc:
        logger.debug("jieba dictionary cache %s not written: %s", path, exc)


def _build_in_child(path: Path) -> bool:
    """Build the cache file in a child process; True when it wrote one.

    The trie builder is C++ that holds the GIL for about half a second, which would stall the
    daemon's event loop even from a worker thread; a child process stalls nothing, and its
    scratch memory goes away with it.
    """
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    code = "import sys; from homeagent_core.lexical.jieba_dict import write_cache; write_cache(sys.argv[1])"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(path)], env=env, capture_output=True, timeout=300, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("jieba dictionary cache not built in a child process: %s", exc)
        return False
    if done.returncode != 0:
        logger.debug("jieba dictionary cache build failed: %s", done.stderr.decode("utf-8", "replace")[-500:])
        return False
    return path.is_file()


def write_cache(path: str) -> None:
    """Build the compact dictionary and write it to ``path`` (what the child process runs)."""
    jieba.setLogLevel(logging.WARNING)
    _save_cache(Path(path), *CompactTokenizer()._build())


def _release_heap() -> None:
    """Hand the trie builder's freed scratch memory (~20 MB) back to the OS (glibc only).

    The builder's many small allocations are freed when it finishes, but glibc keeps freed heap
    memory in the process; ``malloc_trim`` returns it, so the build leaves only the trie behind.
    """
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: the memory is reused by later allocations
        return
    trim(0)


class CompactTokenizer(jieba.Tokenizer):  # type: ignore[misc]
    """A :class:`jieba.Tokenizer` on the compact dictionary (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.initialized: bool = False
        self._trie: marisa_trie.Trie | None = None
        self._freqs: array[int] = array("q")
        self._maxlen = 1

    def initialize(self, dictionary: str | None = None) -> None:
        """Build the trie from jieba's default ``dict.txt`` (once; thread-safe)."""
        if dictionary:
            raise ValueError("the compact jieba dictionary supports only jieba's default dictionary")
        with self.lock:
            if self.initialized:
                return
            path = cache_path()
            cached = _load_cache(path) if path is not None else None
            if cached is None and path is not None and _build_in_child(path):
                cached = _load_cache(path)
            if cached is None:  # no child could write the cache: build here (and try to save it)
                cached = self._build()
                if path is not None:
                    _save_cache(path, *cached)
            trie, freqs, total, maxlen = cached
            self._trie, self._freqs, self._maxlen = trie, freqs, maxlen
            self.total = total
            self.FREQ = _Frequencies(trie, freqs)
            self.initialized = True
        _release_heap()

    def _build(self) -> tuple[marisa_trie.Trie, array[int], int, int]:
        """Trie, frequencies, total and longest word from jieba's ``dict.txt``.

        Two streaming passes, so no list of 350k words is ever held: the trie takes the words
        (last line wins, as in jieba), then the array takes the frequencies by trie id.
        """
        dropped = False
        total = 0
        trie = marisa_trie.Trie(w for w, f in _entries(self.get_dict_file()) if f)
        freqs = array("q", bytes(8 * len(trie)))
        maxlen = 1
        for word, freq in _entries(self.get_dict_file()):
            total += freq
            key_id = trie.get(word)
            if key_id is not None:
                freqs[key_id] = freq
                maxlen = max(maxlen, len(word))
                dropped = dropped or not freq
        if dropped:  # a word listed again with frequency 0 is no word for jieba: rebuild without it
            trie = marisa_trie.Trie([w for w in trie if freqs[trie[w]]])
            freqs = array("q", bytes(8 * len(trie)))
            for word, freq in _entries(self.get_dict_file()):
                key_id = trie.get(word)
                if key_id is not None:
                    freqs[key_id] = freq
        return trie, freqs, total, maxlen

    def get_DAG(self, sentence: str) -> dict[int, list[int]]:
        """End positions of the dictionary words starting at each position (jieba's DAG)."""
        self.check_initialized()
        trie, maxlen = self._trie, self._maxlen
        assert trie is not None
        dag: dict[int, list[int]] = {}
        for k in range(len(sentence)):
            ends = [k + len(word) - 1 for word, _ in trie.iter_prefixes_with_ids(sentence[k : k + maxlen])]
            dag[k] = ends or [k]
        return dag

    def calc(self, sentence: str, DAG: dict[int, list[int]], route: dict[int, tuple[float, int]]) -> None:
        """jieba's best route: the same expression, in the same order, with frequencies from the array."""
        trie, freqs = self._trie, self._freqs
        assert trie is not None
        get = trie.get
        n = len(sentence)
        route[n] = (0, 0)
        logtotal = log(self.total)
        for idx in range(n - 1, -1, -1):
            best: tuple[float, int] | None = None
            for x in DAG[idx]:
                key_id = get(sentence[idx : x + 1])
                candidate = (log((freqs[key_id] if key_id is not None else 0) or 1) - logtotal + route[x + 1][0], x)
                if best is None or candidate > best:
                    best = candidate
            assert best is not None
            route[idx] = best
