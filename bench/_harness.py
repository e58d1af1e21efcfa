"""Shared helpers of the benchmark scripts: timing, percentiles, tables, ``--json``.

Every ``bench/bench_*.py`` script prints a markdown table by default and, with ``--json``,
one JSON object of its headline figures (the keys documented in the script).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Row", "arg_parser", "emit", "percentile", "rss_mb", "table", "time_calls"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100
    low, high = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def time_calls(fn: Callable[[], Any], *, repeat: int, warmup: int = 3) -> list[float]:
    """Wall times in seconds of ``repeat`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


class Row(dict[str, Any]):
    """One table row; ``Row.of(name, samples, unit)`` fills median and p90."""

    @classmethod
    def of(cls, name: str, samples: Sequence[float], *, scale: float = 1e3, unit: str = "ms", **extra: Any) -> Row:
        return cls(
            name=name,
            **{f"p50 ({unit})": statistics.median(samples) * scale, f"p90 ({unit})": percentile(samples, 90) * scale},
            n=len(samples),
            **extra,
        )


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of ``rows`` (columns in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]

    def fmt(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def rss_mb() -> float:
    """Resident set size of this process in MiB (Linux)."""
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print one JSON object of the headline figures")
    return parser


def emit(args: argparse.Namespace, title: str, rows: Sequence[dict[str, Any]], figures: dict[str, Any]) -> None:
    """Print the table (and the figures below it), or the figures as JSON with ``--json``."""
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
        return
    print(f"## {title}\n")
    print(table(rows))
    print()
    for key, value in figures.items():
        if not isinstance(value, list | dict):
            print(f"- {key}: {value:.3f}" if isinstance(value, float) else f"- {key}: {value}")
    print()
