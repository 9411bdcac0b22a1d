"""The vector benchmark's results: what one run measured, its targets and its report.

The dataclasses are what ``vector.py`` writes to its JSON (``asdict``); the
targets are PASS/MISS judgements for the report, never assertions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from _common import Latency, TargetResult
from _common import fmt as _fmt
from _common import status as _status
from _vector_data import FILTERS, TOP_K, Quality

# Targets (a report, never an assertion).
TARGET_RAW_RATIO = 1.3
TARGET_FILTERED_RATIO = 2.0
TARGET_P50_MS = 1.0
TARGET_P50_SIZE = 100_000
TARGET_RECALL = 0.97


@dataclass
class FilteredResult:
    """One engine on one filtered case."""

    visible: int
    """Entries the filter lets through."""
    latency: Latency
    quality: Quality
    path: str = ""
    """How CellStore answered: ``exact scan`` or ``hnsw`` (empty for raw hnswlib)."""
    note: str = ""


@dataclass
class OursResult:
    """CellStore at one size."""

    entries_s: float
    """Building the ``StoredVector`` rows (not part of the build figure)."""
    build_s: float
    build_per_s: float
    latency: Latency
    quality: Quality
    filtered: dict[str, FilteredResult]
    repeated: Latency | None = None
    """The plain searches asked again with the same vectors: answered from the walks the
    CellStore keeps for its index generation (``latency`` times new vectors: walks)."""
    search_ef: int = 0
    """The beam plain searches used (calibrated: ``CellStore.search_ef``)."""
    calibration_recall: float | None = None
    """Recall@10 the last calibration measured on its held-out sample."""


@dataclass
class RawResult:
    """Raw hnswlib at one size."""

    build_s: float
    build_per_s: float
    build_threads: int
    build_1thread_s: float | None
    """The same build with ``num_threads=1`` (CellStore adds one vector at a time)."""
    latency: Latency
    quality: Quality
    filtered: dict[str, FilteredResult]
    at_ours_ef: Latency | None = None
    """The same graph queried with CellStore's calibrated ef (overhead at equal work)."""
    at_ours_ef_quality: Quality | None = None


@dataclass
class FlatResult:
    """The flat numpy scan at one size."""

    latency: Latency
    quality: Quality


@dataclass
class SizeResult:
    """Everything measured at one size."""

    size: int
    data_gen_s: float
    ground_truth_s: float
    ours: OursResult
    hnswlib: RawResult
    flat: FlatResult
    ratios: dict[str, float | None] = field(default_factory=dict)
    data: str = "uniform"
    """The generator: ``uniform`` or ``lowrank`` (embedding-like)."""


@dataclass
class EmbedResult:
    """Embedding throughput of one embedder."""

    name: str
    model_id: str | None
    available: bool
    sentences: int
    batch_size: int | None
    load_s: float | None
    sentences_per_s: float | None
    """Median over the timed passes of sentences / seconds for the whole set."""
    cold_sentences_per_s: float | None = None
    """The first pass of a fresh instance (HashEmbedder memoises words)."""
    mean_words: float | None = None
    note: str = ""


# --------------------------------------------------------------------------- targets


def evaluate_targets(results: Sequence[SizeResult]) -> list[TargetResult]:
    """PASS/MISS for each target; N/A when the size a target needs was not measured."""
    out: list[TargetResult] = []
    for r in results:
        v = r.ratios["ours_over_hnswlib_p50"]
        out.append(
            TargetResult(
                f"p50 within {TARGET_RAW_RATIO:g}x of raw hnswlib at {r.size:,} {r.data}",
                v,
                "x (ours/hnswlib)",
                _status(v, TARGET_RAW_RATIO),
            )
        )
    for r in results:
        for spec in FILTERS:
            v = r.ratios[f"ours_{spec.name}_over_unfiltered_p50"]
            out.append(
                TargetResult(
                    f"{spec.name} p50 within {TARGET_FILTERED_RATIO:g}x of unfiltered "
                    f"at {r.size:,} {r.data}",
                    v,
                    "x (filtered/unfiltered)",
                    _status(v, TARGET_FILTERED_RATIO),
                )
            )
    for kind in dict.fromkeys(r.data for r in results):
        big = next((r for r in results if r.size == TARGET_P50_SIZE and r.data == kind), None)
        v = big.ours.latency.p50_ms if big else None
        out.append(
            TargetResult(
                f"p50 < {TARGET_P50_MS:g} ms at {TARGET_P50_SIZE:,} {kind}",
                v,
                "ms",
                "N/A" if v is None else ("PASS" if v < TARGET_P50_MS else "MISS"),
            )
        )
        r_ = big.ours.quality.recall_at_10 if big else None
        out.append(
            TargetResult(
                f"recall@10 >= {TARGET_RECALL:g} at {TARGET_P50_SIZE:,} {kind}",
                r_,
                "",
                "N/A" if r_ is None else ("PASS" if r_ >= TARGET_RECALL else "MISS"),
            )
        )
    return out


# --------------------------------------------------------------------------- report


def markdown(
    results: Sequence[SizeResult], embedders: Sequence[EmbedResult], targets: Sequence[TargetResult]
) -> str:
    """The markdown report: latency, filtered, build, embedding and target tables."""
    lines = [
        f"### Vector search latency (ms; p50/p95 over queries of each query's median; k={TOP_K})",
        "",
        "| data | vectors | ours p50 | ours p95 | ours p50 asked again | hnswlib p50 "
        "| hnswlib p95 | flat p50 | flat p95 | ours/hnswlib p50 | recall@10 ours "
        "| recall@10 hnswlib | ours ef | hnswlib at ours' ef p50 | recall@10 there |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ol, hl, fl = r.ours.latency, r.hnswlib.latency, r.flat.latency
        at, atq = r.hnswlib.at_ours_ef, r.hnswlib.at_ours_ef_quality
        again = _fmt(r.ours.repeated.p50_ms) if r.ours.repeated else "-"
        lines.append(
            f"| {r.data} | {r.size:,} | {_fmt(ol.p50_ms)} | {_fmt(ol.p95_ms)} | {again} "
            f"| {_fmt(hl.p50_ms)} "
            f"| {_fmt(hl.p95_ms)} | {_fmt(fl.p50_ms)} | {_fmt(fl.p95_ms)} "
            f"| {_fmt(r.ratios['ours_over_hnswlib_p50'], 2)} "
            f"| {_fmt(r.ours.quality.recall_at_10)} | {_fmt(r.hnswlib.quality.recall_at_10)} "
            f"| {r.ours.search_ef} | {_fmt(at.p50_ms) if at else '-'} "
            f"| {_fmt(atq.recall_at_10) if atq else '-'} |"
        )
    lines += [
        "",
        "### Filtered search (ms)",
        "",
        "| vectors | filter | visible | ours path | ours p50 | ours p95 | ours/unfiltered p50 "
        "| recall@10 ours | min results | hnswlib+filter p50 | hnswlib+filter p95 "
        "| recall@10 hnswlib | hnswlib queries |",
        "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for spec in FILTERS:
            f = r.ours.filtered[spec.name]
            raw = r.hnswlib.filtered.get(spec.name)
            raw_cells = (
                f"{_fmt(raw.latency.p50_ms)} | {_fmt(raw.latency.p95_ms)} "
                f"| {_fmt(raw.quality.recall_at_10)} | {raw.latency.queries}"
                if raw
                else "(as 10% partitions) | | |"
            )
            lines.append(
                f"| {r.data} {r.size:,} | {spec.name} | {f.visible:,} | {f.path} "
                f"| {_fmt(f.latency.p50_ms)} "
                f"| {_fmt(f.latency.p95_ms)} "
                f"| {_fmt(r.ratios[f'ours_{spec.name}_over_unfiltered_p50'], 2)} "
                f"| {_fmt(f.quality.recall_at_10)} | {f.quality.min_results} | {raw_cells} |"
            )
    lines += [
        "",
        "### Build",
        "",
        "| vectors | ours build s | ours vectors/s | hnswlib build s | hnswlib vectors/s "
        "| hnswlib threads | hnswlib 1-thread s | ours/hnswlib build | ours/hnswlib 1-thread |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        o, h = r.ours, r.hnswlib
        lines.append(
            f"| {r.data} {r.size:,} | {_fmt(o.build_s, 2)} | {_fmt(o.build_per_s, 0)} "
            f"| {_fmt(h.build_s, 2)} | {_fmt(h.build_per_s, 0)} | {h.build_threads} "
            f"| {_fmt(h.build_1thread_s, 2)} | {_fmt(r.ratios['ours_over_hnswlib_build_s'], 2)} "
            f"| {_fmt(r.ratios['ours_over_hnswlib_1thread_build_s'], 2)} |"
        )
    lines += [
        "",
        "### Embedding throughput",
        "",
        "| embedder | sentences | mean words | batch | load s | sentences/s | first pass/s "
        "| note |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in embedders:
        lines.append(
            f"| {e.name} | {e.sentences} | {_fmt(e.mean_words, 1)} "
            f"| {e.batch_size if e.batch_size else '-'} | {_fmt(e.load_s, 2)} "
            f"| {_fmt(e.sentences_per_s, 0)} | {_fmt(e.cold_sentences_per_s, 0)} | {e.note} |"
        )
    lines += ["", "### Targets", "", "| target | value | status |", "|---|---:|:---:|"]
    for t in targets:
        value = "-" if t.value is None else f"{_fmt(t.value, 3)} {t.unit}"
        lines.append(f"| {t.name} | {value} | {t.status} |")
    return "\n".join(lines)
