"""Packing the compact graph for others: a networkx graph built in bulk, string columns as codes.

:func:`build_multidigraph` fills a networkx ``MultiDiGraph`` directly (the compact graph's
``to_networkx``); :func:`encode_strings` / :func:`decode_strings` turn an object column of
strings into integer codes and a vocabulary and back (the mirror file stores numbers only).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import networkx as nx
    import numpy.typing as npt

__all__ = ["build_multidigraph", "decode_strings", "encode_strings"]


def build_multidigraph(
    nodes: Iterable[int],
    edges: Iterable[tuple[int, int, int]],
    attrs: Iterable[dict[str, Any]] | None = None,
) -> nx.MultiDiGraph[int]:
    """A networkx ``MultiDiGraph`` with ``nodes`` and keyed ``edges`` ``(u, v, key)``, built in bulk.

    ``attrs`` (optional) gives each edge's attribute dict, in the order of ``edges``.

    ``add_edges_from`` costs ~30 µs per edge on a multigraph (it builds views per edge); this
    fills the graph's adjacency dicts directly, in the exact shape ``add_edge`` leaves them
    (``succ[u][v]`` and ``pred[v][u]`` share one key dict), when the graph uses plain dicts;
    otherwise it falls back to the public methods.
    """
    import networkx as nx

    g: nx.MultiDiGraph[int] = nx.MultiDiGraph()
    factories = ("node_attr_dict", "adjlist_inner_dict", "edge_key_dict", "edge_attr_dict")
    plain = all(getattr(g, f + "_factory", None) is dict for f in factories)
    attr_iter = iter(attrs) if attrs is not None else None
    if not plain or getattr(g, "_adj", None) is not getattr(g, "_succ", 0):
        g.add_nodes_from(nodes)
        for u, v, key in edges:
            g.add_edge(u, v, key, **(next(attr_iter) if attr_iter is not None else {}))
        return g
    node, succ, pred = g._node, g._succ, g._pred
    for n in nodes:
        node[n] = {}
        succ[n] = {}
        pred[n] = {}
    for u, v, key in edges:
        try:
            out, inc = succ[u], pred[v]
        except KeyError:  # an endpoint not among ``nodes``: add it as add_edge would
            for n in (u, v):
                if n not in succ:
                    node[n], succ[n], pred[n] = {}, {}, {}
            out, inc = succ[u], pred[v]
        keys = out.get(v)
        if keys is None:
            keys = out[v] = inc[u] = {}  # one key dict shared by both directions
        keys[key] = next(attr_iter) if attr_iter is not None else {}
    return g


def encode_strings(column: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8]]:
    """An object column of strings (None where no row) as codes and a JSON-encoded vocabulary."""
    vocab: dict[str, int] = {}
    code = vocab.setdefault
    values = (-1 if v is None else code(v, len(vocab)) for v in column.tolist())
    codes = np.fromiter(values, dtype=np.int32, count=len(column))
    return codes, np.frombuffer(json.dumps(list(vocab)).encode(), dtype=np.uint8)


def decode_strings(codes: npt.NDArray[Any], vocab: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The object column :func:`encode_strings` encoded (the same string objects shared per value)."""
    words = json.loads(vocab.tobytes().decode())
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError("string vocabulary is not a list of strings")
    table = np.empty(len(words) + 1, dtype=object)
    table[: len(words)] = words  # code -1 picks the last slot: None
    codes = codes.astype(np.int64)
    if len(codes) and (codes.min() < -1 or codes.max() >= len(words)):
        raise ValueError("string codes outside their vocabulary")
    out: npt.NDArray[Any] = table[codes]
    return out
