"""Smoke test of the LoCoMo benchmark on a tiny synthetic LoCoMo-format file.

Runs ``benchmarks/locomo.py`` in a subprocess with the hash embedder (no model
needed) and checks the exit status, the RESULT line, the JSON's shape and that
every recall is a share. No timing is asserted: latencies only have to exist.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "locomo.py"
RESULT = re.compile(
    r"RESULT recall@10=(\d+\.\d+) recall@5=(\d+\.\d+) mrr=(\d+\.\d+) questions=(\d+)"
)
MODES = ["lexical", "semantic", "bm25s", "dense", "rrf"]


def _turn(dia_id: str, speaker: str, text: str, **extra: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _dataset() -> list[dict[str, Any]]:
    """Two conversations in LoCoMo's schema, with the quirks the loader must handle."""
    first = {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("D1:1", "Ann", "I adopted a grey kitten called Pixel yesterday."),
                _turn("D1:2", "Bo", "Lovely! I started pottery classes on Monday."),
                _turn(
                    "D1:3",
                    "Ann",
                    "Look at this.",
                    img_url="http://example.invalid/x.jpg",
                    blip_caption="a photo of a kitten on a sofa",
                    query="kitten sofa",
                ),
            ],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [
                _turn("D2:1", "Bo", "My pottery bowl cracked in the kiln."),
                _turn("D2:2", "Ann", "Pixel learned to open the fridge."),
            ],
            # A date without a session, as conv-26 has: it must be ignored.
            "session_3_date_time": "9:00 am on 1 July, 2023",
        },
        "qa": [
            {
                "question": "When did Ann adopt her kitten?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What happened to Bo's pottery?",
                "answer": "a bowl cracked",
                "evidence": ["D1:2; D2:1"],
                "category": 1,
            },
            {
                "question": "What did Ann say about the weather?",
                "adversarial_answer": "nothing",
                "evidence": [],
                "category": 5,
            },
        ],
    }
    second = {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "12:09 am on 13 September, 2023",
            "session_1": [
                _turn("D1:1", "Cy", "I ran my first marathon in Berlin."),
                _turn("D1:2", "Di", "Congrats! I am learning the violin."),
            ],
        },
        "qa": [
            {
                "question": "Where did Cy run a marathon?",
                "answer": "Berlin",
                "evidence": ["D:1:1"],
                "category": 4,
            },
            {
                "question": "Which turn is missing?",
                "answer": "none",
                "evidence": ["D9:9"],
                "category": 4,
            },
        ],
    }
    return [first, second]


def _run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_dataset()))
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--data",
            str(data),
            "--embedder",
            "hash",
            "--modes",
            ",".join(MODES),
            "--default-mode",
            "lexical",
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc, out


def test_smoke_run_reports_and_writes(tmp_path: Path) -> None:
    proc, out = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr

    last = proc.stdout.rstrip("\n").splitlines()[-1]
    m = RESULT.fullmatch(last)
    assert m is not None, last
    r10, r5, mrr, n = float(m[1]), float(m[2]), float(m[3]), int(m[4])
    assert n == 3  # the question with no resolvable evidence and category 5 are left out
    assert 0.0 <= r5 <= r10 <= 1.0
    assert 0.0 <= mrr <= 1.0

    data: dict[str, Any] = json.loads(out.read_text())
    assert data["dataset"]["questions"] == 3
    assert data["dataset"]["turns"] == 7
    assert data["dataset"]["unparsed_dates"] == 0
    assert len(data["dataset"]["questions_skipped"]) == 1
    assert [r["mode"] for r in data["results"]] == MODES
    for r in data["results"]:
        assert r["available"], r
        metrics = [r["overall"], *r["by_category"].values()]
        for m_ in metrics:
            values = [*m_["recall"].values(), *m_["session_recall"].values(), m_["mrr"]]
            assert all(0.0 <= v <= 1.0 for v in values), (r["mode"], m_)
        assert r["latency"]["p50_ms"] >= 0.0
        assert len(r["per_question"]["first_hit"]) == 3
    lexical = next(r for r in data["results"] if r["mode"] == "lexical")
    assert lexical["overall"]["recall"]["10"] == float(m[1])
    # Seven turns and k=10: every evidence turn a ranker returns at all is in the top 10.
    assert lexical["overall"]["recall"]["10"] > 0.5
    png = out.with_suffix(".png")
    assert png.exists() == (importlib.util.find_spec("matplotlib") is not None)


def test_unknown_mode_is_a_usage_error(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, "--modes", "lexical,nonsense", "--no-plot")
    assert proc.returncode == 2
    assert "unknown mode" in proc.stderr


def test_cache_dir_reuses_vectors_and_results(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, out = _run(tmp_path, "--cache-dir", str(cache), "--no-plot")
    assert first.returncode == 0, first.stderr
    cold: dict[str, Any] = json.loads(out.read_text())
    assert len(list(cache.glob("*.npz"))) == 1
    assert cold["embedding"]["queries_from_cache"] == 0
    assert cold["embedding"]["turn_texts"] > 0

    second, out = _run(tmp_path, "--cache-dir", str(cache), "--no-plot")
    assert second.returncode == 0, second.stderr
    warm: dict[str, Any] = json.loads(out.read_text())
    # Nothing is embedded again, queries are reported as untimed, rankings are the same.
    assert warm["embedding"]["queries_from_cache"] == 3
    assert warm["embedding"]["query_p50_ms"] is None
    assert warm["embedding"]["turn_texts"] == 0
    assert second.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    for c, w in zip(cold["results"], warm["results"], strict=True):
        assert c["per_question"]["first_hit"] == w["per_question"]["first_hit"], c["mode"]


def test_ablation_runs_each_lever_off_and_reports_its_gain(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, "--no-plot", "--ablation", "--no-when-signal")
    assert proc.returncode == 0, proc.stderr
    assert "### Ablation" in proc.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["config"]["searcher"]["levers_off"] == ["when_signal"]
    assert data["config"]["searcher"]["levers_on"] == []
    rows = {r["variant"]: r for r in data["ablation"]}
    assert list(rows) == [
        "all levers",
        "without date_signal",
        "without when_signal",
        "without subject_signal",
        "no levers",
        "with feedback_round",
        "with bm25_weight",  # a weight: "on" is BM25_WEIGHT, not True
        "with info_prior=semantic",
        "with info_prior=fused",
        "with info_prior (LOO choice)",  # the pre-registered choice between the two
        "with info_prior=length (LOO fit)",  # its weight fitted leave-one-out on a grid
        "with learned_rerank (LOO)",  # not a SearchConfig lever: the harness's rerank
    ]
    # A lever turned off on the command line stays off in every variant.
    assert all("when_signal" in r["off"] for r in rows.values())
    # An opt-in lever (off in SearchConfig) is on in its own row only.
    assert [name for name, r in rows.items() if r["on"]] == [
        "with feedback_round",
        "with bm25_weight",
        "with info_prior=semantic",
        "with info_prior=fused",
        "with info_prior (LOO choice)",
        "with info_prior=length (LOO fit)",
        "with learned_rerank (LOO)",
    ]
    assert data["config"]["searcher"]["info_prior"] == "off"
    # The information prior: a row per variant, then the choice made leave-one-out.
    choice = rows["with info_prior (LOO choice)"]
    assert set(choice["picks"]) == {"conv-a", "conv-b"}
    assert set(choice["picks"].values()) <= {"semantic", "fused"}
    assert "LOO choice (the rule's row)" in choice["table"]
    assert rows["with info_prior=fused"]["p50_ms"] is not None
    # The length prior: its weight picked per conversation on the others, from the grid.
    length = rows["with info_prior=length (LOO fit)"]
    assert set(length["picks"]) == {"conv-a", "conv-b"}
    grid = {f"c={w:g}" for w in (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08)}
    assert set(length["picks"].values()) <= grid and length["fitted_on_all"] in grid
    assert "LOO choice (the rule's row)" in length["table"]
    assert rows["with feedback_round"]["on"] == ["feedback_round"]
    # The learned rerank is scored leave-one-conversation-out, with its own table.
    learned = rows["with learned_rerank (LOO)"]
    assert learned["p50_ms"] is None
    assert 0.0 <= learned["lever_loo_recall@10"] <= 1.0
    assert "learned, fused path (primary), LOO" in learned["table"]
    assert 0.0 <= rows["with feedback_round"]["lever_loo_recall@10"] <= 1.0
    for r in rows.values():
        assert 0.0 <= r["recall@5"] <= r["recall@10"] <= 1.0
        assert set(r["by_conversation_recall@10"]) == {"conv-a", "conv-b"}
    assert 0.0 <= rows["without subject_signal"]["lever_loo_recall@10"] <= 1.0


def test_embed_context_choices_run_and_are_recorded(tmp_path: Path) -> None:
    for context in ("mix-both", "max-prev-text"):
        proc, out = _run(tmp_path, "--no-plot", "--modes", "semantic", "--embed-context", context)
        assert proc.returncode == 0, proc.stderr
        data: dict[str, Any] = json.loads(out.read_text())
        assert data["config"]["embed_context"] == context
        assert data["config"]["context_weight"] == 0.5
        for r in data["results"]:
            assert r["available"], r
            assert 0.0 <= r["overall"]["recall"]["10"] <= 1.0


def test_lexical_tiebreak_runs_and_is_recorded(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, "--no-plot", "--modes", "lexical", "--lexical-tiebreak", "bm25")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["config"]["lexical_tiebreak"] == "bm25"
    assert RESULT.fullmatch(proc.stdout.rstrip("\n").splitlines()[-1])


def test_a_hybrid_run_too_small_to_refit_relevance_still_reports(tmp_path: Path) -> None:
    # Two conversations of a few turns: a leave-one-out fold has no adversarial
    # question or no evidence hit to fit on; the engine's figures still come out.
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_dataset()))
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--data", str(data), "--embedder", "hash"),
            *("--modes", "hybrid", "--no-plot", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())["results"][0]
    assert result["mode"] == "hybrid"
    abstention = result["abstention"]
    assert 0.0 <= abstention["engine"]["auroc"] <= 1.0
    assert abstention["leave_one_conversation_out"] is None
    assert "relevance refits left out" in proc.stderr


def test_feedback_round_flag_turns_the_opt_in_lever_on(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, "--no-plot", "--modes", "hybrid", "--feedback-round")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["config"]["searcher"]["levers_on"] == ["feedback_round"]
    assert RESULT.fullmatch(proc.stdout.rstrip("\n").splitlines()[-1])
