"""The LoCoMo benchmark's report: the markdown tables, the plot, missed questions, the JSON.

Part of ``benchmarks/locomo.py`` (run that script).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import git_commit, log
from _common import version as _version

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from _locomo_data import CATEGORIES, Question, Turn, turn_content  # noqa: E402
from _locomo_embed import EMBED_BATCH  # noqa: E402
from _locomo_metrics import ModeResult  # noqa: E402
from _locomo_modes import OUR_MODES  # noqa: E402

import memstore  # noqa: E402


def _f(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}"


def markdown(results: Sequence[ModeResult], ks: Sequence[int], embed: dict[str, Any]) -> str:
    """The report: quality per mode and category, then latency per mode."""
    rk = " | ".join(f"R@{k}" for k in ks)
    sk = " | ".join(f"sessR@{k}" for k in ks)
    lines = [
        "### LoCoMo retrieval quality (turn recall@k, session recall@k, MRR)",
        "",
        f"| mode | category | questions | {rk} | {sk} | MRR |",
        "|---|---|---:|" + "---:|" * (2 * len(ks) + 1),
    ]
    for r in results:
        if not r.available or r.overall is None:
            continue
        rows = [("all", r.overall)] + [
            (f"{c} {CATEGORIES[int(c)]}", m) for c, m in r.by_category.items()
        ]
        for name, m in rows:
            rec = " | ".join(_f(m.recall[str(k)]) for k in ks)
            ses = " | ".join(_f(m.session_recall[str(k)]) for k in ks)
            lines.append(f"| {r.mode} | {name} | {m.questions} | {rec} | {ses} | {_f(m.mrr)} |")
    lines += [
        "",
        "### Search latency (ms per query, one pass; query embedding excluded)",
        "",
        "| mode | p50 | p95 | mean | what is timed |",
        "|---|---:|---:|---:|---|",
    ]
    for r in results:
        if r.latency is None:
            continue
        lat = r.latency
        lines.append(
            f"| {r.mode} | {_f(lat.p50_ms)} | {_f(lat.p95_ms)} | {_f(lat.mean_ms)} | {lat.note} |"
        )
    lines += relevance_lines(results)
    if embed:
        if embed["query_p50_ms"] is None:
            queries = "query vectors all from the --cache-dir cache (not timed)"
        else:
            queries = (
                f"query embedding p50 {_f(embed['query_p50_ms'], 2)} ms (one query per call), "
                f"p95 {_f(embed['query_p95_ms'], 2)} ms"
            )
            if embed["queries_from_cache"]:
                queries += f" ({embed['queries_from_cache']} more from the cache, not timed)"
        if embed["turn_texts"]:
            turns = (
                f"turns embedded in batches of {EMBED_BATCH} at "
                f"{embed['turns_per_s']:,.0f} texts/s ({embed['turn_texts']} texts)"
            )
        else:
            turns = "turn vectors all from the cache"
        lines += ["", f"Embedder `{embed['model_id']}`: {queries}; {turns}."]
    missing = [r for r in results if not r.available]
    if missing:
        lines.append("")
        lines += [f"- `{r.mode}` did not run: {r.reason}" for r in missing]
    return "\n".join(lines)


def relevance_lines(results: Sequence[ModeResult]) -> list[str]:
    """The relevance table: abstention on category 5, in-sample and leave-one-conversation-out."""
    done = [r for r in results if r.abstention]
    if not done:
        return []
    lines = [
        "",
        "### Relevance: answerable (categories 1-4) against adversarial (category 5)",
        "",
        "AUROC of the top hit's relevance; recall@10 of categories 1-4 with `min_relevance` at "
        "the median top relevance of category 5 (a question left with no hit counts 0); "
        "'gated': the same threshold on the top hit only, the whole list kept when it passes.",
        "",
        "| mode | weights | AUROC | threshold | R@10 | R@10 at threshold | R@10 gated | "
        "cat 1-4 left with no hit | cat 5 left with no hit |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in done:
        a = r.abstention
        assert a is not None
        e = a["engine"]
        lines.append(
            f"| {r.mode} | engine (fitted on dev) | {_f(e['auroc'])} | {_f(e['threshold'], 4)} | "
            f"{_f(e['recall@10'])} | {_f(e['recall@10_at_threshold_searcher'])} | "
            f"{_f(e['recall@10_gated'])} | "
            f"{_f(e['answerable_left_without_hit'])} | {_f(e['adversarial_left_without_hit'])} |"
        )
        lo = a["leave_one_conversation_out"]
        if lo is None:  # too few hits to refit (a small run)
            continue
        lines.append(
            f"| {r.mode} | refit leave-one-conversation-out | {_f(lo['auroc'])} | per fold | "
            f"{_f(e['recall@10'])} | {_f(lo['recall@10_at_threshold'])} | "
            f"{_f(lo['recall@10_gated'])} | | |"
        )
    cal = done[0].abstention["calibration"] if done[0].abstention else []
    if cal:
        lines += [
            "",
            f"Calibration ({done[0].mode}, hits of categories 1-4): relevance bin, hits, "
            "mean relevance, share that are evidence.",
            "",
            "| bin | hits | mean relevance | evidence share |",
            "|---|---:|---:|---:|",
        ]
        for b in cal:
            lines.append(
                f"| {b['from']:.2f}-{b['to']:.2f} | {b['hits']} | {_f(b['mean_relevance'])} | "
                f"{_f(b['evidence_share'])} |"
            )
    for r in done:
        a = r.abstention
        assert a is not None
        if a["refit_all"] is None:
            continue
        w = a["refit_all"]["model"]
        lines.append("")
        lines.append(
            f"{r.mode}: weights refitted on all of this data: "
            + ", ".join(f"{k} {v:.2f}" for k, v in w.items())
            + f" (engine: {', '.join(f'{v:.2f}' for v in a['engine_model'].values())}); "
            f"relevance recomputed from the signals differs on {a['recomputed_mismatches']} hits."
        )
    return lines


def plot(results: Sequence[ModeResult], ks: Sequence[int], path: Path, title: str) -> str:
    """Recall@k per mode, and recall@10 per category: a PNG at ``path``; ``""`` or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib): no plot"
    done = [r for r in results if r.available and r.overall is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for r in done:
        assert r.overall is not None
        style = "-" if r.mode in OUR_MODES else "--"
        ax1.plot(ks, [r.overall.recall[str(k)] for k in ks], style, marker="o", label=r.mode)
    ax1.set_xlabel("k")
    ax1.set_ylabel("turn recall@k")
    ax1.set_xticks(list(ks))
    ax1.set_ylim(0, 1)
    ax1.grid(alpha=0.3)
    ax1.legend()
    ax1.set_title("recall@k, all questions (dashed: peers)")
    k10 = 10 if 10 in ks else ks[-1]
    cats = sorted({c for r in done for c in r.by_category})
    width = 0.8 / max(1, len(done))
    for i, r in enumerate(done):
        xs = [j + i * width for j in range(len(cats))]
        ys = [r.by_category[c].recall[str(k10)] if c in r.by_category else 0.0 for c in cats]
        ax2.bar(xs, ys, width, label=r.mode)
    ax2.set_xticks([j + 0.4 - width / 2 for j in range(len(cats))])
    ax2.set_xticklabels([f"{c} {CATEGORIES[int(c)]}" for c in cats])
    ax2.set_ylabel(f"turn recall@{k10}")
    ax2.set_ylim(0, 1)
    ax2.grid(alpha=0.3, axis="y")
    ax2.set_title(f"recall@{k10} by question category")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return ""


def show_misses(
    mode: str,
    questions: Sequence[Question],
    rankings: Sequence[Sequence[str]],
    turns: dict[str, Turn],
    n: int,
    k: int,
) -> None:
    """Print up to ``n`` questions whose evidence is wholly missing from the top ``k`` (stderr)."""
    shown = 0
    for q, ids in zip(questions, rankings, strict=True):
        if shown >= n:
            break
        if set(q.evidence) & set(ids[:k]):
            continue
        shown += 1
        log(f"  [{mode} miss] {q.conv} qa[{q.index}] cat {q.category}: {q.text}")
        for e in q.evidence:
            t = turns[e]
            log(f"      evidence {t.dia_id} {t.speaker}: {turn_content(t)}")
        for id in ids[:3]:
            t = turns[id]
            log(f"      got      {t.dia_id} {t.speaker}: {turn_content(t)}")


# --------------------------------------------------------------------------- main


_SCALAR = r'(?:-?[\d.eE+-]+|null|true|false|"[^",\\\n]*")'
_SCALAR_LIST = re.compile(rf"\[\s*((?:{_SCALAR},\s*)*{_SCALAR})\s*\]")


def dumps(payload: Any) -> str:
    """Indented JSON with lists of scalars kept on one line (the per-question arrays).

    >>> print(dumps({"a": [1, None, 0.5], "b": {"c": ["x", "y"]}}))
    {
     "a": [1, null, 0.5],
     "b": {
      "c": ["x", "y"]
     }
    }
    """
    text = json.dumps(payload, indent=1, ensure_ascii=False)
    return _SCALAR_LIST.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m[1])) + "]", text)


def _source_digest() -> str:
    """A digest of memstore's and memstore_index's ``*.py`` files: which code was measured."""
    h = hashlib.sha256()
    for pkg in ("memstore", "memstore_index"):
        for f in sorted((ROOT / pkg).rglob("*.py")):  # packages too (memstore/search/)
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def machine_info() -> dict[str, Any]:
    """Where and with what this run happened."""
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "bm25s": _version("bm25s"),
        "onnxruntime": _version("onnxruntime"),
        "memstore": getattr(memstore, "__version__", None),
        "git_commit": git_commit(ROOT),
        "source_sha256": _source_digest(),
    }
