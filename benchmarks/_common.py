"""What the benchmark scripts share: latency records, percentiles, timing, targets.

Imported by the scripts beside it (``python benchmarks/<name>.py`` puts this
folder on ``sys.path``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Latency",
    "TargetResult",
    "cpu_model",
    "fmt",
    "git_commit",
    "load_average",
    "log",
    "memory_item",
    "percentile",
    "print_targets",
    "source_digest",
    "status",
    "summarize",
    "time_queries",
    "version",
    "write_json",
]

Q = TypeVar("Q")
R = TypeVar("R")


@dataclass
class Latency:
    """Per-query latency: percentiles over queries of each query's median time."""

    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float
    queries: int
    repeats: int


@dataclass
class TargetResult:
    """One target and whether this run met it."""

    name: str
    value: float | None
    unit: str
    status: str
    """``PASS``, ``MISS`` or ``N/A`` (the size it needs was not measured)."""


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation, as numpy's default.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 95)
    (2.5, 5.0)
    """
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(per_query_ms: Sequence[float], repeats: int) -> Latency:
    """Percentiles over queries of per-query times (already in milliseconds)."""
    return Latency(
        p50_ms=percentile(per_query_ms, 50),
        p95_ms=percentile(per_query_ms, 95),
        mean_ms=statistics.fmean(per_query_ms),
        max_ms=max(per_query_ms),
        queries=len(per_query_ms),
        repeats=repeats,
    )


def time_queries(
    search: Callable[[Q], R],
    queries: Sequence[Q],
    repeats: int,
    fresh: Callable[[Q, int], Q] | None = None,
) -> tuple[list[float], list[R]]:
    """Time ``search`` on every query: a warm-up pass, then ``repeats`` passes.

    Returns each query's median time over the timed passes (ms) and the
    results of the warm-up pass (for the quality checks). Passes run over the
    whole query set in turn, so no query is timed right after itself.

    ``fresh(query, n)``, when given, is what timed pass ``n`` (from 1) asks
    instead of ``query``: an equivalent query the searched thing has not seen,
    for one that remembers its answers to queries it was asked before (a
    CellStore keeps its graph walks by query vector), so that every timed
    search does the work of a new query. Made before the passes, not timed.
    """
    warm = [search(q) for q in queries]
    passes = [[q if fresh is None else fresh(q, n) for q in queries] for n in range(1, repeats + 1)]
    samples: list[list[int]] = [[] for _ in queries]
    clock = time.perf_counter_ns
    for asked in passes:
        for i, q in enumerate(asked):
            t0 = clock()
            search(q)
            samples[i].append(clock() - t0)
    return [statistics.median(s) / 1e6 for s in samples], warm


def log(msg: str) -> None:
    """Progress to stderr (stdout carries the report)."""
    print(msg, file=sys.stderr, flush=True)


def write_json(path: Path, record: Any) -> None:
    """Write a run's ``record`` to ``path`` as indented JSON, making its folder if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def print_targets(targets: Sequence[TargetResult]) -> None:
    """The markdown table of the targets (name, value, PASS/MISS/N/A) on stdout."""
    print("\n| target | value | status |\n|---|---:|---|")
    for t in targets:
        print(f"| {t.name} | {fmt(t.value)} | {t.status} |")


def status(value: float | None, threshold: float, *, at_least: bool = False) -> str:
    """``PASS`` when ``value`` meets ``threshold`` (from above or below), ``N/A`` if missing."""
    if value is None:
        return "N/A"
    ok = value >= threshold if at_least else value <= threshold
    return "PASS" if ok else "MISS"


def fmt(v: float | None, digits: int = 3) -> str:
    """A number for a table: ``-`` when missing, thousands separated from 1000 on."""
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def version(dist: str) -> str | None:
    """The installed version of a distribution, or ``None``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU model name, for the machine record."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, for the machine record (``None`` outside git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (other work on the machine skews timings)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def source_digest(root: Path, package: str) -> str:
    """A digest of ``package/*.py`` under ``root``: which code was measured."""
    h = hashlib.sha256()
    for f in sorted((root / package).glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def memory_item(i: int, rev: int = 0, partitions: int = 100) -> Any:
    """Synthetic note ``i`` at revision ``rev``, in one of ``partitions`` tenants.

    The journal and replication benchmarks write the same items, so their
    figures compare. Each carries two numbers of its own (``build {i}``), so
    the vocabulary grows with the corpus, as it does with ids and timestamps.
    """
    from memstore import Item

    return Item(
        id=f"note-{i:07d}",
        kind="observation",
        title=f"deploy {i % 977} of service api-{i % 53}",
        content=(
            f"revision {rev}: the rollout of build {i} paused at stage {i % 7} "
            "while the database migration held a lock on the orders table"
        ),
        tags=[f"tenant/t{i % partitions}"],
    )
