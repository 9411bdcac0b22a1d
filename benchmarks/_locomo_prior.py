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

The length prior (``info_prior="length"``, docs/benchmarks.md "A length
prior fitted leave-one-out") has one constant, ``SearchConfig.length_weight``,
fitted on a grid fixed before measuring (:data:`LENGTH_GRID`) by the same
leave-one-out choice (ties: the smaller weight): :func:`length_rows` runs the
mode once per weight and returns its row and tables;
``benchmarks/fit_length_prior.py`` runs it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from _locomo_data import Question
from _locomo_metrics import ModeResult
from _locomo_modes import leave_one_out, per_conversation, per_question_values

PRIOR_VARIANTS = ("semantic", "fused")
"""``SearchConfig.info_prior`` values measured (pre-registered; the first wins ties)."""

LENGTH_GRID = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08)
"""``SearchConfig.length_weight`` values the length prior is fitted over (pre-registered;
0 is the engine without the prior, and the smaller weight wins a tie)."""

Record = dict[str, list[Any]]
Run = Callable[[dict[str, Any]], ModeResult]
"""Runs the default Searcher mode with these ``SearchConfig`` fields on top of its own."""


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
    run: Run,
    off: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """A "with info_prior=<variant>" row per variant (``run({"info_prior": variant})``),
    then the leave-one-out choice's row with the rule's tables, then the length
    prior's row (:func:`length_rows`).

    ``whole``: the engine's per-question record (the "all levers" row), the
    baseline of every change and of each row's own leave-one-out.
    """
    rows: list[dict[str, Any]] = []
    runs: dict[str, Record] = {}

    def row(name: str, rec: Record, p50: float | None) -> dict[str, Any]:
        return _row(questions, whole, off, name, rec, p50)

    for variant in PRIOR_VARIANTS:
        res = run({"info_prior": variant})
        assert res.overall is not None and res.latency is not None
        runs[variant] = res.per_question
        rows.append(row(f"with info_prior={variant}", res.per_question, res.latency.p50_ms))
    choice, picks = loo_choice(questions, runs)
    last = row("with info_prior (LOO choice)", choice, None)
    last["picks"] = picks
    last["table"] = prior_table(questions, whole, runs, choice, picks)
    rows.append(last)
    rows.append(length_rows(questions, whole, run, off)[0])
    return rows


def _row(
    questions: Sequence[Question],
    whole: Record,
    off: Sequence[str],
    name: str,
    rec: Record,
    p50: float | None,
) -> dict[str, Any]:
    """An ablation row for ``rec``, with its own leave-one-out against ``whole``."""
    cats = sorted({q.category for q in questions})
    out: dict[str, Any] = {
        "variant": name,
        "off": list(off),
        "on": [name.removeprefix("with ")],
        "opt_in": True,
        "recall@5": _mean(per_question_values(rec, "recall@5")),
        "recall@10": _mean(per_question_values(rec, "recall@10")),
        "mrr": _mean(per_question_values(rec, "rr")),
        "p50_ms": p50,
        "by_category_recall@10": {str(c): _figures(questions, rec, "category", c)[1] for c in cats},
        "by_conversation_recall@10": per_conversation(questions, rec, 10),
    }
    for metric in ("recall@5", "recall@10", "rr"):
        key = f"lever_loo_{'mrr' if metric == 'rr' else metric}"
        out[key] = leave_one_out(questions, rec, whole, metric)
    return out


def weight_name(weight: float) -> str:
    """A grid weight as the fit's tables name it (``c=0.005``)."""
    return f"c={weight:g}"


def length_fit(
    questions: Sequence[Question], whole: Record, run: Run
) -> tuple[Record, dict[str, str], str, dict[str, Record]]:
    """The length prior fitted leave-one-out over :data:`LENGTH_GRID`.

    Returns the LOO record (each conversation scored with the weight picked on
    the others), the picks per conversation, the weight the same rule picks on
    all conversations, and each weight's record (``c=0`` is ``whole``, the
    engine: the prior adds nothing at weight 0).
    """
    runs: dict[str, Record] = {}
    for weight in LENGTH_GRID:
        if weight == 0.0:
            runs[weight_name(weight)] = whole
        else:
            res = run({"info_prior": "length", "length_weight": weight})
            runs[weight_name(weight)] = res.per_question
    choice, picks = loo_choice(questions, runs)
    r5 = {v: sum(per_question_values(rec, "recall@5")) for v, rec in runs.items()}
    rr = {v: sum(per_question_values(rec, "rr")) for v, rec in runs.items()}
    every = max(runs, key=lambda v: (r5[v], rr[v]))  # max keeps the first (smaller) of equals
    return choice, picks, every, runs


def length_table(
    questions: Sequence[Question],
    whole: Record,
    choice: Record,
    picks: dict[str, str],
    every: str,
    runs: dict[str, Record],
) -> str:
    """The length prior's tables: each weight on all conversations, then the rule's."""
    lines = ["| length_weight (all conversations) | R@5 | R@10 | MRR |", "|---|---:|---:|---:|"]
    for name, rec in runs.items():
        r5, r10, mrr = _figures(questions, rec)
        lines.append(f"| {name} | {r5:.4f} | {r10:.4f} | {mrr:.4f} |")
    lines += ["", f"picked on all conversations: {every}", ""]
    lines.append(prior_table(questions, whole, {}, choice, picks))
    return "\n".join(lines)


def length_rows(
    questions: Sequence[Question], whole: Record, run: Run, off: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The "with info_prior=length (LOO fit)" row: the weight fitted leave-one-out, with
    the picks, the weight fitted on all conversations and the rule's tables."""
    choice, picks, every, runs = length_fit(questions, whole, run)
    out = _row(questions, whole, off, "with info_prior=length (LOO fit)", choice, None)
    out["picks"] = picks
    out["fitted_on_all"] = every
    out["table"] = length_table(questions, whole, choice, picks, every, runs)
    return [out]
