"""The information prior's rows of ``locomo.py --ablation`` (``SearchConfig.info_prior``).

Part of ``benchmarks/locomo.py`` (run that script). The rule these figures
are judged by was written before they were run (docs/benchmarks.md, "An
information prior"): the default Searcher mode is run once per variant of
the prior (:data:`PRIOR_VARIANTS`), and the two are chosen between
leave-one-conversation-out: each conversation gets the variant with the
higher recall@5 summed over the other conversations (ties: the higher MRR,
then the first variant). :func:`prior_rows` returns a row per variant and one
for that choice, in the format of the other ablation rows, and the tables the
rule reads (per conversation and per category, against the engine's run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from _locomo_data import Question
from _locomo_metrics import ModeResult
from _locomo_modes import leave_one_out, per_conversation, per_question_values

PRIOR_VARIANTS = ("semantic", "fused")
"""``SearchConfig.info_prior`` values measured (pre-registered; the first wins ties)."""

Record = dict[str, list[Any]]


def loo_choice(
    questions: Sequence[Question], runs: dict[str, Record]
) -> tuple[Record, dict[str, str]]:
    """Per question, the run chosen for its conversation on the other ones; and the choices.

    ``runs`` maps a variant to its per-question record (``recall@5``,
    ``recall@10``, ``first_hit``), in :data:`PRIOR_VARIANTS` order of preference.
    """
    convs = sorted({q.conv for q in questions})
    r5 = {v: per_question_values(rec, "recall@5") for v, rec in runs.items()}
    rr = {v: per_question_values(rec, "rr") for v, rec in runs.items()}
    out: Record = {"recall@5": [], "recall@10": [], "first_hit": []}
    picks: dict[str, str] = {}
    for held in convs:
        rest = [i for i, q in enumerate(questions) if q.conv != held]
        picks[held] = max(
            runs,  # max keeps the first of equals: the earlier variant wins a full tie
            key=lambda v: (sum(r5[v][i] for i in rest), sum(rr[v][i] for i in rest)),
        )
    for i, q in enumerate(questions):
        rec = runs[picks[q.conv]]
        for key in out:
            out[key].append(rec[key][i])
    return out, picks


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _figures(
    questions: Sequence[Question], rec: Record, field: str = "", value: object = None
) -> tuple[float, float, float]:
    """R@5, R@10 and MRR of ``rec`` over the questions whose ``field`` is ``value`` (all: "")."""
    idx = [i for i, q in enumerate(questions) if not field or getattr(q, field) == value]
    r5, r10, rr = (per_question_values(rec, m) for m in ("recall@5", "recall@10", "rr"))
    return _mean([r5[i] for i in idx]), _mean([r10[i] for i in idx]), _mean([rr[i] for i in idx])


def prior_table(
    questions: Sequence[Question],
    engine: Record,
    runs: dict[str, Record],
    choice: Record,
    picks: dict[str, str],
) -> str:
    """The rule's tables: overall, per conversation and per category, against the engine."""
    rows = {"engine (info_prior off)": engine}
    rows |= {f"info_prior={v}": rec for v, rec in runs.items()}
    rows["LOO choice (the rule's row)"] = choice
    lines = ["| ranking | R@5 | R@10 | MRR |", "|---|---:|---:|---:|"]
    for name, rec in rows.items():
        r5, r10, mrr = _figures(questions, rec)
        lines.append(f"| {name} | {r5:.3f} | {r10:.3f} | {mrr:.3f} |")
    lines += [
        "",
        "| conversation | questions | pick | engine R@5 | LOO R@5 | change R@5 | change R@10 "
        "| change MRR |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for conv in sorted({q.conv for q in questions}):
        n = sum(q.conv == conv for q in questions)
        e = _figures(questions, engine, "conv", conv)
        c = _figures(questions, choice, "conv", conv)
        lines.append(
            f"| {conv} | {n} | {picks[conv]} | {e[0]:.3f} | {c[0]:.3f} | {c[0] - e[0]:+.3f} "
            f"| {c[1] - e[1]:+.3f} | {c[2] - e[2]:+.3f} |"
        )
    lines += [
        "",
        "| category | questions | engine R@5 | LOO R@5 | engine R@10 | LOO R@10 | change R@10 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for cat in sorted({q.category for q in questions}):
        n = sum(q.category == cat for q in questions)
        e = _figures(questions, engine, "category", cat)
        c = _figures(questions, choice, "category", cat)
        lines.append(
            f"| {cat} | {n} | {e[0]:.3f} | {c[0]:.3f} | {e[1]:.3f} | {c[1]:.3f} "
            f"| {c[1] - e[1]:+.3f} |"
        )
    return "\n".join(lines)


def prior_rows(
    questions: Sequence[Question],
    whole: Record,
    run: Callable[[str], ModeResult],
    off: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """A "with info_prior=<variant>" row per variant (``run(variant)`` runs the default
    Searcher mode with it), then the leave-one-out choice's row with the rule's tables.

    ``whole``: the engine's per-question record (the "all levers" row), the
    baseline of every change and of each row's own leave-one-out.
    """
    cats = sorted({q.category for q in questions})
    rows: list[dict[str, Any]] = []
    runs: dict[str, Record] = {}

    def row(name: str, rec: Record, p50: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "variant": name,
            "off": list(off),
            "on": [name.removeprefix("with ")],
            "opt_in": True,
            "recall@5": _mean(per_question_values(rec, "recall@5")),
            "recall@10": _mean(per_question_values(rec, "recall@10")),
            "mrr": _mean(per_question_values(rec, "rr")),
            "p50_ms": p50,
            "by_category_recall@10": {
                str(c): _figures(questions, rec, "category", c)[1] for c in cats
            },
            "by_conversation_recall@10": per_conversation(questions, rec, 10),
        }
        for metric in ("recall@5", "recall@10", "rr"):
            key = f"lever_loo_{'mrr' if metric == 'rr' else metric}"
            out[key] = leave_one_out(questions, rec, whole, metric)
        return out

    for variant in PRIOR_VARIANTS:
        res = run(variant)
        assert res.overall is not None and res.latency is not None
        runs[variant] = res.per_question
        rows.append(row(f"with info_prior={variant}", res.per_question, res.latency.p50_ms))
    choice, picks = loo_choice(questions, runs)
    last = row("with info_prior (LOO choice)", choice, None)
    last["picks"] = picks
    last["table"] = prior_table(questions, whole, runs, choice, picks)
    rows.append(last)
    return rows
