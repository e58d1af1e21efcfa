"""pgvector's binary wire format for numpy arrays (no extra dependency).

A ``vector`` travels as ``int16 dim, int16 unused, float4[dim]`` big-endian; loading it yields
a float32 numpy array, and a float32 numpy array is sent as a ``vector``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

__all__ = ["register_vector"]


class _VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> Any:
        return np.frombuffer(bytes(data)[4:], dtype=">f4").astype(np.float32)


class _VectorTextLoader(Loader):
    def load(self, data: Any) -> Any:
        text = bytes(data).decode()[1:-1]
        return np.array(text.split(",") if text else [], dtype=np.float32)


class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        vec = np.asarray(obj, dtype=">f4").ravel()
        return struct.pack(">HH", len(vec), 0) + vec.tobytes()


def register_vector(conn: Any, oid: int) -> None:
    """Load ``vector`` columns as float32 arrays and send numpy arrays as ``vector`` on ``conn``."""
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(oid, _VectorLoader)
    conn.adapters.register_loader(oid, _VectorTextLoader)
