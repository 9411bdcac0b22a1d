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
  vectors are computed once, timed on their own, and cached).

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
        [--modes lexical,semantic,hybrid,hybrid_full,bm25s,dense,rrf] [--embedder local|hash] \\
        [--k 5,10,20] [--out FILE] [--limit-conversations N] [--default-mode MODE] \\
        [--item-shape transcript|speaker-title|first-words] [--misses N] [--no-plot] \\
        [--cache-dir DIR] [--fusion score|rrf] [--no-links] [--no-center]

The Searcher modes run with ``spread_relations=("precedes",)`` over items that
link each turn to the next one of its session, and the CellStore centres on
the conversation searched; ``--no-links``, ``--no-center`` and ``--fusion rrf``
turn each of these off (for ablations).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import git_commit, log, percentile
from _common import version as _version

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

import memstore  # noqa: E402
from memstore import KIND_EVENT, PARTITION_TAG_PREFIX, Item, Store, ThoughtLink  # noqa: E402
from memstore_index.cellstore import CellStore  # noqa: E402
from memstore_index.entry import embed_text, entry_for  # noqa: E402
from memstore_index.hash_embedder import HashEmbedder  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "locomo.json"
ALL_MODES = ("lexical", "semantic", "hybrid", "hybrid_full", "bm25s", "dense", "rrf")
OUR_MODES = frozenset({"lexical", "semantic", "hybrid", "hybrid_full"})
SEARCHER_MODES = frozenset({"hybrid", "hybrid_full"})
DEFAULT_MODE = "hybrid"
DEFAULT_KS = (5, 10, 20)
RESULT_KS = (5, 10)
"""The RESULT line needs these, so they are always measured."""
LATENCY_K = 10
"""Latency is reported for the ``limit=10`` call."""
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories (the official scorer's meaning, not the paper's order)."""
RRF_K = 60
RRF_DEPTH = 100
"""Each ranking fused by ``rrf`` is cut to its best this many turns."""
TITLE_WORDS = 8
"""Words of the turn text in a ``first-words`` title."""
ITEM_SHAPES = ("transcript", "speaker-title", "first-words")
DEFAULT_SHAPE = "transcript"
ITEM_SHAPE_DOC = {
    "transcript": "title '', content '<speaker>: <text> [image: <caption>]'",
    "speaker-title": "title '<speaker>', content '<text> [image: <caption>]'",
    "first-words": "title '<speaker>: <first 8 words> ...', content '<text> [image: <caption>]'",
}
EMBED_BATCH = 64
TURN_RELATION = "precedes"
"""Each turn links to the next turn of its session by this relation; the Searcher
modes spread scores along it (``SearchConfig.spread_relations``)."""

Vec = npt.NDArray[np.float32]


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Turn:
    """One dialogue turn, as read from the file."""

    conv: str
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str
    """The BLIP caption of a shared image, or ``""``."""
    event_date: str
    """The session's date-time as RFC 3339 (``""`` when it does not parse)."""

    @property
    def id(self) -> str:
        return f"{self.conv}:{self.dia_id}"


@dataclass(frozen=True)
class Question:
    """One evaluated question: category 1-4, with evidence resolved to turn ids."""

    conv: str
    index: int
    """Position in the conversation's ``qa`` list (a stable reference without the text)."""
    category: int
    text: str
    evidence: tuple[str, ...]
    """Item ids (``<conv>:<dia_id>``) of the evidence turns, deduplicated, in file order."""
    sessions: frozenset[int]


@dataclass
class Conversation:
    """One conversation: its turns and its evaluated questions."""

    sample_id: str
    turns: list[Turn]
    questions: list[Question]

    @property
    def partition(self) -> str:
        return self.sample_id


@dataclass
class LoadStats:
    """What loading kept, normalised and dropped."""

    conversations: int = 0
    sessions: int = 0
    turns: int = 0
    image_turns: int = 0
    qa_total: int = 0
    qa_category_5: int = 0
    questions: int = 0
    questions_by_category: dict[str, int] = field(default_factory=dict)
    evidence_normalised: list[str] = field(default_factory=list)
    """Evidence strings rewritten to a resolvable id (``"D8:6; D9:17"`` split, ``D:11:26``)."""
    evidence_dropped: list[str] = field(default_factory=list)
    """Evidence ids that name no turn (dropped from their question)."""
    questions_skipped: list[str] = field(default_factory=list)
    """Questions of categories 1-4 left with no resolvable evidence."""
    unparsed_dates: int = 0


_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_DATE = re.compile(
    r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.IGNORECASE
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "january february march april may june july august september october november "
        "december".split()
    )
}


def locomo_date(s: str) -> str:
    """LoCoMo's session date-time as RFC 3339 (the zone is unknown: written as UTC).

    >>> locomo_date("1:56 pm on 8 May, 2023"), locomo_date("12:09 am on 13 September, 2023")
    ('2023-05-08T13:56:00Z', '2023-09-13T00:09:00Z')
    >>> locomo_date("sometime")
    ''
    """
    m = _DATE.fullmatch(s.strip())
    if m is None:
        return ""
    month = _MONTHS.get(m[5].lower())
    if month is None:
        return ""
    hour = int(m[1]) % 12 + (12 if m[3].lower() == "pm" else 0)
    try:
        when = _dt.datetime(int(m[6]), month, int(m[4]), hour, int(m[2]))
    except ValueError:
        return ""
    return when.strftime("%Y-%m-%dT%H:%M:00Z")


def evidence_ids(raw: Iterable[object]) -> list[str]:
    """Evidence strings as canonical ``D<session>:<turn>`` ids, deduplicated, in order.

    Fixes the malformed strings LoCoMo has: several ids in one string, a stray
    colon, a zero-padded turn. What holds no id at all (``"D"``) yields nothing.

    >>> evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "D", "D8:6"])
    ['D8:6', 'D9:17', 'D11:26', 'D30:5']
    """
    out: list[str] = []
    for r in raw:
        for m in _EVIDENCE.finditer(str(r)):
            canon = f"D{int(m[1])}:{int(m[2])}"
            if canon not in out:
                out.append(canon)
    return out


def load(path: Path, limit: int | None) -> tuple[list[Conversation], LoadStats]:
    """Read a LoCoMo-format file: turns of ``session_<n>`` keys, questions of categories 1-4."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list):
        raise SystemExit(f"{path}: expected a JSON list of conversations")
    if limit is not None:
        raw = raw[:limit]
    stats = LoadStats()
    convs: list[Conversation] = []
    for obj in raw:
        sid = str(obj["sample_id"])
        conv = obj["conversation"]
        turns: list[Turn] = []
        sessions = sorted((int(m[1]), k) for k in conv if (m := _SESSION.fullmatch(k)) and conv[k])
        for n, key in sessions:
            when = locomo_date(str(conv.get(f"{key}_date_time", "")))
            stats.unparsed_dates += not when
            stats.sessions += 1
            for t in conv[key]:
                turns.append(
                    Turn(
                        conv=sid,
                        dia_id=str(t["dia_id"]),
                        session=n,
                        speaker=str(t.get("speaker", "")),
                        text=str(t.get("text", "")),
                        caption=str(t.get("blip_caption", "") or ""),
                        event_date=when,
                    )
                )
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        for i, qa in enumerate(obj.get("qa", [])):
            stats.qa_total += 1
            cat = int(qa.get("category", 0))
            if cat not in CATEGORIES:
                stats.qa_category_5 += cat == 5
                continue
            raw_ev = [str(e) for e in qa.get("evidence", [])]
            ids = evidence_ids(raw_ev)
            ref = f"{sid} qa[{i}]"
            for e in raw_ev:
                if e not in known and any(x in known for x in evidence_ids([e])):
                    stats.evidence_normalised.append(f"{ref}: {e!r}")
            for e in raw_ev:
                if not evidence_ids([e]):
                    stats.evidence_dropped.append(f"{ref}: {e!r} (no id)")
            for e in ids:
                if e not in known:
                    stats.evidence_dropped.append(f"{ref}: {e!r} (no such turn)")
            ids = [e for e in ids if e in known]
            if not ids:
                stats.questions_skipped.append(f"{ref} (evidence {raw_ev!r})")
                continue
            questions.append(
                Question(
                    conv=sid,
                    index=i,
                    category=cat,
                    text=str(qa["question"]),
                    evidence=tuple(f"{sid}:{e}" for e in ids),
                    sessions=frozenset(int(e[1:].split(":")[0]) for e in ids),
                )
            )
        convs.append(Conversation(sid, turns, questions))
        stats.turns += len(turns)
        stats.image_turns += sum(bool(t.caption) for t in turns)
        stats.questions += len(questions)
    stats.conversations = len(convs)
    for c in CATEGORIES:
        stats.questions_by_category[str(c)] = sum(
            q.category == c for cv in convs for q in cv.questions
        )
    return convs, stats


# --------------------------------------------------------------------------- items


def turn_content(turn: Turn) -> str:
    """The turn text, plus `` [image: <caption>]`` when an image was shared."""
    return f"{turn.text} [image: {turn.caption}]" if turn.caption else turn.text


def transcript_line(turn: Turn) -> str:
    """``<speaker>: <text> [image: <caption>]``: the document every peer indexes.

    >>> t = Turn("c", "D1:2", 1, "Mel", "Look!", "a dog on a beach", "")
    >>> transcript_line(t)
    'Mel: Look! [image: a dog on a beach]'
    """
    return f"{turn.speaker}: {turn_content(turn)}"


def turn_item(turn: Turn, shape: str, next_id: str = "") -> Item:
    """The memory item for one turn (the shapes are documented in docs/benchmarks.md).

    ``transcript``: no title, content = :func:`transcript_line` (the peers' document,
    so every mode ranks the same text). ``speaker-title``: title = the speaker,
    content = the turn text (+ caption). ``first-words``: title = ``<speaker>:
    <first words>``, content = the turn text (+ caption). ``next_id``: the item of
    the session's next turn, linked by :data:`TURN_RELATION` (a conversation's thread).
    """
    if shape == "transcript":
        title, content = "", transcript_line(turn)
    elif shape == "speaker-title":
        title, content = turn.speaker, turn_content(turn)
    elif shape == "first-words":
        words = turn.text.split()
        more = " ..." if len(words) > TITLE_WORDS else ""
        title = f"{turn.speaker}: {' '.join(words[:TITLE_WORDS])}{more}"
        content = turn_content(turn)
    else:
        raise ValueError(f"unknown item shape {shape!r}")
    return Item(
        id=turn.id,
        kind=KIND_EVENT,
        title=title,
        content=content,
        subject=turn.speaker,
        event_date=turn.event_date,
        tags=[f"{PARTITION_TAG_PREFIX}{turn.conv}"],
        data={"dia_id": turn.dia_id, "session": str(turn.session)},
        links=[ThoughtLink(to_id=next_id, relation=TURN_RELATION)] if next_id else [],
    )


# --------------------------------------------------------------------------- embedding


class CachingEmbedder:
    """An embedder that remembers every text it embedded (the run's one embedding cache).

    Turn texts are embedded once, in batches, for the dense peer and the
    CellStore alike; query vectors are computed (and timed) once up front, so
    every mode's search finds them here and no search time includes embedding.

    With ``cache_dir`` the vectors also persist between runs, in one ``.npz``
    file per model (keyed by the model id, each vector by the sha256 of its
    text), so repeated runs skip the model. A query found on disk is not
    embedded again, so its embedding time is not measured: a run meant to
    report query-embedding latency should not use the cache.
    """

    def __init__(self, inner: Any, cache_dir: Path | None = None) -> None:
        self.inner = inner
        self.model_id: str = str(inner.model_id)
        self.dim: int = int(inner.dim)
        self._cache: dict[str, Vec] = {}
        self.embedded = 0
        self.embed_s = 0.0
        self._disk: dict[str, Vec] = {}
        self._disk_path: Path | None = None
        self._disk_new = 0
        if cache_dir is not None:
            key = hashlib.sha256(self.model_id.encode()).hexdigest()[:16]
            self._disk_path = cache_dir / f"locomo-vectors-{key}-{self.dim}.npz"
            if self._disk_path.exists():
                with np.load(self._disk_path) as z:
                    keys, vecs = z["keys"], z["vecs"]
                self._disk = {str(k): v for k, v in zip(keys, vecs, strict=True)}

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _from_disk(self, text: str) -> bool:
        vec = self._disk.get(self._key(text)) if self._disk else None
        if vec is None:
            return False
        self._cache[text] = vec
        return True

    def _remember(self, text: str, vec: Vec) -> None:
        self._cache[text] = vec
        if self._disk_path is not None:
            self._disk[self._key(text)] = vec
            self._disk_new += 1

    def save(self) -> None:
        """Write the on-disk cache when this run embedded anything new (no-op without one)."""
        if self._disk_path is None or not self._disk_new:
            return
        self._disk_path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._disk), dtype=str)
        vecs = np.stack(list(self._disk.values())).astype(np.float32)
        tmp = self._disk_path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(self._disk_path)
        self._disk_new = 0

    def embed(self, texts: Sequence[str]) -> Vec:
        texts = list(texts)
        missing = list(
            dict.fromkeys(t for t in texts if t not in self._cache and not self._from_disk(t))
        )
        for start in range(0, len(missing), EMBED_BATCH):
            chunk = missing[start : start + EMBED_BATCH]
            t0 = time.perf_counter()
            vecs = np.asarray(self.inner.embed(chunk), np.float32)
            self.embed_s += time.perf_counter() - t0
            self.embedded += len(chunk)
            for t, v in zip(chunk, vecs, strict=True):
                self._remember(t, v)
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            out[i] = self._cache[t]
        return out

    def embed_one_timed(self, text: str) -> float | None:
        """Embed one text alone (as a query is) and cache it; the seconds it took.

        ``None`` when the vector came from the on-disk cache (nothing was timed).
        """
        if text in self._cache or self._from_disk(text):
            return None
        t0 = time.perf_counter()
        vec = np.asarray(self.inner.embed([text]), np.float32)[0]
        dt = time.perf_counter() - t0
        self._remember(text, vec)
        return dt


def make_embedder(name: str) -> Any:
    """The local MiniLM model (``local``) or the feature-hashing embedder (``hash``)."""
    if name == "hash":
        return HashEmbedder()
    from memstore_index.onnx_embedder import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder()


# --------------------------------------------------------------------------- searchers


Ranked = tuple[list[str], float, str]
"""Ranked item ids, the search time in ms (query embedding excluded), and the path taken
(``"lexical"`` or ``"fused"`` for a Searcher mode, ``""`` otherwise)."""
Search = Callable[[Question, int], Ranked]


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


@dataclass
class Built:
    """Per-conversation indexes, shared by the modes that need them."""

    stores: dict[str, Store] = field(default_factory=dict)
    cells: CellStore | None = None
    bm25: dict[str, tuple[Any, list[str]]] = field(default_factory=dict)
    dense: dict[str, tuple[Vec, list[str]]] = field(default_factory=dict)
    searchers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per hybrid mode, one ``Searcher`` per conversation (sharing that mode's stats)."""
    search_stats: dict[str, Any] = field(default_factory=dict)
    build_s: dict[str, float] = field(default_factory=dict)


def build_stores(
    convs: Sequence[Conversation], shape: str, built: Built, link_turns: bool = True
) -> None:
    """One Store per conversation, each turn upserted as an item (linked to the next one)."""
    t0 = time.perf_counter()
    for c in convs:
        store = Store()
        with store.batch():
            for i, t in enumerate(c.turns):
                nxt = c.turns[i + 1] if i + 1 < len(c.turns) else None
                linked = link_turns and nxt is not None and nxt.session == t.session
                store.upsert(turn_item(t, shape, nxt.id if linked and nxt else ""))
        built.stores[c.sample_id] = store
    built.build_s["store"] = time.perf_counter() - t0


def build_cells(
    convs: Sequence[Conversation], emb: CachingEmbedder, built: Built, center: bool = True
) -> None:
    """One CellStore for every conversation, each item in its conversation's partition.

    Indexed from the stored items exactly as ``CellStore.attach`` would
    (``entry_for`` / ``embed_text``), without binding several stores to it.
    ``center``: similarities around the mean of the partition searched
    (``CellStore(center=True)``, see docs/vector.md).
    """
    t0 = time.perf_counter()
    cells = CellStore(emb, center=center)
    for c in convs:
        store = built.stores[c.sample_id]
        items = [store.get(t.id) for t in c.turns]
        cells.upsert_many((entry_for(it), embed_text(it)) for it in items if it is not None)
    built.cells = cells
    built.build_s["cellstore"] = time.perf_counter() - t0


def bm25_tokenize(texts: list[str]) -> list[list[str]]:
    """bm25s's default tokenisation (its regex, lower case, English stop words) as strings."""
    import bm25s  # type: ignore[import-untyped]

    toks: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )
    return toks


def build_bm25s(convs: Sequence[Conversation], built: Built) -> None:
    """A bm25s index per conversation over the plain turn texts."""
    import bm25s

    t0 = time.perf_counter()
    for c in convs:
        retriever = bm25s.BM25()
        retriever.index(bm25_tokenize([transcript_line(t) for t in c.turns]), show_progress=False)
        built.bm25[c.sample_id] = (retriever, [t.id for t in c.turns])
    built.build_s["bm25s"] = time.perf_counter() - t0


def build_dense(convs: Sequence[Conversation], emb: CachingEmbedder, built: Built) -> None:
    """A matrix of plain turn-text vectors per conversation (for the exact scan)."""
    t0 = time.perf_counter()
    for c in convs:
        vecs = emb.embed([transcript_line(t) for t in c.turns])
        built.dense[c.sample_id] = (vecs, [t.id for t in c.turns])
    built.build_s["dense"] = time.perf_counter() - t0


def bm25s_ranking(built: Built, q: Question, k: int) -> list[str]:
    """bm25s's top ``k`` turns with a positive score (zero-score fill is no result)."""
    retriever, ids = built.bm25[q.conv]
    tokens = bm25_tokenize([q.text])
    if not tokens[0]:
        return []
    docs, scores = retriever.retrieve(tokens, k=min(k, len(ids)), show_progress=False)
    return [ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def dense_ranking(built: Built, emb: CachingEmbedder, q: Question, k: int) -> list[str]:
    """The exact cosine top ``k`` of the conversation's turn vectors."""
    mat, ids = built.dense[q.conv]
    scores = mat @ emb.embed([q.text])[0]
    k = min(k, len(ids))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((top, -scores[top]))]
    return [ids[int(i)] for i in top]


def rrf(rankings: Sequence[Sequence[str]], k: int, c: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion: score ``sum 1/(c + rank)``, ties by first appearance.

    >>> rrf([["a", "b"], ["b", "c"]], 3)
    ['b', 'a', 'c']
    """
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, id in enumerate(ranking, 1):
            score[id] = score.get(id, 0.0) + 1.0 / (c + rank)
    order = sorted(score, key=lambda i: -score[i])  # stable: first appearance wins ties
    return order[:k]


def searcher_api() -> tuple[Any, Any] | str:
    """``(Searcher, SearchConfig)`` from memstore, or why they cannot be had."""
    try:
        from memstore import SearchConfig, Searcher  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        return f"Searcher not available (from memstore import Searcher failed: {exc})"
    return Searcher, SearchConfig


def make_search(mode: str, built: Built, emb: CachingEmbedder | None) -> Search:
    """The search function of one mode: question and depth to ranked ids and ms."""
    if mode == "lexical":

        def lexical(q: Question, k: int) -> Ranked:
            store = built.stores[q.conv]
            t0 = time.perf_counter()
            res = store.keyword_search(q.text, limit=k)
            return [it.id for it in res], _ms(t0), ""

        return lexical
    if mode == "semantic":
        cells = built.cells
        assert cells is not None

        def semantic(q: Question, k: int) -> Ranked:
            hits, timing = cells.search_timed(q.text, k, partitions=[q.conv])
            return [e.id for e, _ in hits], timing.index_s * 1e3, ""

        return semantic
    if mode in SEARCHER_MODES:
        full = mode == "hybrid_full"
        stats = built.search_stats[mode]
        embed_ns = "search.phase.embed.ns"
        fast = "search.kw_voice_hits"

        def hybrid(q: Question, k: int) -> Ranked:
            searcher = built.searchers[mode][q.conv]
            call = searcher.hybrid_search_full if full else searcher.hybrid_search
            before = stats.ops()
            t0 = time.perf_counter()
            res = call(q.text, partition=q.conv, limit=k)
            ms = _ms(t0)
            after = stats.ops()
            # The query vector is a cache hit; its phase time is still taken off.
            ms -= (after.get(embed_ns, 0) - before.get(embed_ns, 0)) / 1e6
            path = "lexical" if after.get(fast, 0) > before.get(fast, 0) else "fused"
            return [r.item.id for r in res], ms, path

        return hybrid
    if mode == "bm25s":

        def bm25(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = bm25s_ranking(built, q, k)
            return ids, _ms(t0), ""

        return bm25
    assert emb is not None
    if mode == "dense":

        def dense(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = dense_ranking(built, emb, q, k)
            return ids, _ms(t0), ""

        return dense
    if mode == "rrf":

        def fused(q: Question, k: int) -> Ranked:
            t0 = time.perf_counter()
            ids = rrf(
                [bm25s_ranking(built, q, RRF_DEPTH), dense_ranking(built, emb, q, RRF_DEPTH)], k
            )
            return ids, _ms(t0), ""

        return fused
    raise ValueError(f"unknown mode {mode!r}")


# --------------------------------------------------------------------------- metrics


@dataclass
class Scores:
    """One mode on one question."""

    recall: dict[int, float]
    session_recall: dict[int, float]
    rr: float
    first_hit: int | None
    """1-based rank of the first evidence turn, ``None`` when it is not in the top max-k."""


def score(q: Question, by_k: dict[int, list[str]]) -> Scores:
    """Turn and session recall@k of the ranking returned for each k; RR of the deepest one."""
    ev = set(q.evidence)
    deepest = by_k[max(by_k)]
    first = next((i for i, id in enumerate(deepest, 1) if id in ev), None)
    recall: dict[int, float] = {}
    sess: dict[int, float] = {}
    for k, ranked in by_k.items():
        top = ranked[:k]
        recall[k] = len(ev.intersection(top)) / len(ev)
        touched = {int(id.rsplit(":", 2)[-2][1:]) for id in top}
        sess[k] = len(q.sessions & touched) / len(q.sessions)
    return Scores(recall, sess, 1.0 / first if first else 0.0, first)


@dataclass
class Metrics:
    """Means over a set of questions."""

    questions: int
    recall: dict[str, float]
    session_recall: dict[str, float]
    mrr: float


def aggregate(scores: Sequence[Scores], ks: Sequence[int]) -> Metrics:
    """Means of the per-question scores (zeros for an empty set)."""
    n = len(scores)

    def mean(xs: Iterable[float]) -> float:
        xs = list(xs)
        return statistics.fmean(xs) if xs else 0.0

    return Metrics(
        questions=n,
        recall={str(k): mean(s.recall[k] for s in scores) for k in ks},
        session_recall={str(k): mean(s.session_recall[k] for s in scores) for k in ks},
        mrr=mean(s.rr for s in scores),
    )


@dataclass
class Latency:
    """Per-query search time in ms (one timed pass, query embedding excluded)."""

    p50_ms: float
    p95_ms: float
    mean_ms: float
    includes_embedding: bool
    note: str


LATENCY_NOTES = {
    "lexical": "Store.keyword_search call",
    "semantic": "CellStore.search_timed index_s (exact scan of the partition)",
    "hybrid": "Searcher.hybrid_search call minus its embed phase (a cache hit)",
    "hybrid_full": "Searcher.hybrid_search_full call minus its embed phase (a cache hit)",
    "bm25s": "bm25s.tokenize + retrieve, one query per call",
    "dense": "numpy matrix-vector product + argpartition",
    "rrf": "bm25s and dense rankings (depth 100) + fusion",
}


@dataclass
class ModeResult:
    """Everything one mode produced."""

    mode: str
    available: bool
    reason: str = ""
    overall: Metrics | None = None
    by_category: dict[str, Metrics] = field(default_factory=dict)
    latency: Latency | None = None
    searcher_stats: dict[str, Any] | None = None
    """The Searcher's own counters and phase timings (hybrid modes)."""
    per_question: dict[str, list[Any]] = field(default_factory=dict)
    """Per question, in the order of the top-level ``questions``: first-hit rank
    (``None``: no evidence in the top max-k), recall@k, and for a Searcher mode the path
    of the k=10 call (``lexical`` fast path or ``fused``)."""


def run_mode(
    mode: str, search: Search, questions: Sequence[Question], ks: Sequence[int]
) -> tuple[ModeResult, list[list[str]]]:
    """Ask every question once per k; metrics overall and per category, and the rankings.

    Each k gets its own call with ``limit=k`` (a fused ranking depends on the
    limit); latency is that of the ``limit=10`` call.
    """
    all_scores: list[Scores] = []
    times: list[float] = []
    paths: list[str] = []
    rankings: list[list[str]] = []
    for q in questions:
        by_k: dict[int, list[str]] = {}
        for k in ks:
            ids, ms, path = search(q, k)
            by_k[k] = ids
            if k == LATENCY_K:
                times.append(ms)
                paths.append(path)
        rankings.append(by_k[LATENCY_K])
        all_scores.append(score(q, by_k))
    by_cat = {
        str(c): aggregate(
            [s for q, s in zip(questions, all_scores, strict=True) if q.category == c], ks
        )
        for c in CATEGORIES
        if any(q.category == c for q in questions)
    }
    latency = Latency(
        p50_ms=percentile(times, 50),
        p95_ms=percentile(times, 95),
        mean_ms=statistics.fmean(times),
        includes_embedding=False,
        note=LATENCY_NOTES[mode],
    )
    per_q: dict[str, list[Any]] = {"first_hit": [s.first_hit for s in all_scores]}
    for k in ks:
        per_q[f"recall@{k}"] = [round(s.recall[k], 4) for s in all_scores]
    if any(paths):
        per_q["path"] = paths
    res = ModeResult(
        mode=mode,
        available=True,
        overall=aggregate(all_scores, ks),
        by_category=by_cat,
        latency=latency,
        per_question=per_q,
    )
    return res, rankings


# --------------------------------------------------------------------------- report


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
        for f in sorted((ROOT / pkg).glob("*.py")):
            h.update(f"{pkg}/{f.name}".encode() + b"\0" + f.read_bytes())
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


def _ints(s: str) -> list[int]:
    return sorted({int(x) for x in s.split(",") if x.strip()})


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    p.add_argument(
        "--modes", default=",".join(ALL_MODES), help=f"comma-separated, of {','.join(ALL_MODES)}"
    )
    p.add_argument("--embedder", choices=("local", "hash"), default="local")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0, or 2 when the default mode could not run."""
    args = parse_args(argv)
    ks: list[int] = args.ks
    convs, stats = load(args.data, args.limit_conversations)
    questions = [q for c in convs for q in c.questions]
    log(
        f"{stats.conversations} conversations, {stats.turns} turns, {len(questions)} questions "
        f"(categories 1-4; {len(stats.questions_skipped)} skipped, no resolvable evidence)"
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
    if needs_vectors & set(modes):
        log(f"loading the {args.embedder} embedder")
        emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
        log(f"embedding {len(questions)} queries one at a time")
        timed = [emb.embed_one_timed(q.text) for q in questions]
        q_s = [t for t in timed if t is not None]
        log("embedding turn texts")
        before_s, before_n = emb.embed_s, emb.embedded
        if {"dense", "rrf"} & set(modes):
            build_dense(convs, emb, built)
        if ({"semantic"} | (SEARCHER_MODES - set(unavailable))) & set(modes):
            build_cells(convs, emb, built, center=not args.no_center)
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
    if searcher_modes:
        api = searcher_api()
        assert not isinstance(api, str)
        searcher_cls, config_cls = api
        from memstore.stats import SearchStats

        cells = built.cells
        spread = () if args.no_links else (TURN_RELATION,)
        for mode in searcher_modes:
            counters = built.search_stats[mode] = SearchStats()
            built.searchers[mode] = {
                c.sample_id: searcher_cls(
                    config_cls(
                        store=built.stores[c.sample_id],
                        cells=lambda: cells,
                        spread_relations=spread,
                        fusion=args.fusion,
                    ),
                    stats=counters,
                )
                for c in convs
            }
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
        results.append(res)
        if args.misses:
            show_misses(mode, questions, rankings, turns, args.misses, 10)

    report = markdown(results, ks, embed_info)
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
                "defaults": "every other SearchConfig field",
            },
            "peer_document": "<speaker>: <text> [image: <blip_caption>]",
            "cellstore_center": not args.no_center,
        },
        "machine": machine_info(),
        "dataset": asdict(stats),
        "questions": {
            "conv": [q.conv for q in questions],
            "qa": [q.index for q in questions],
            "category": [q.category for q in questions],
            "evidence_turns": [len(q.evidence) for q in questions],
        },
        "embedding": embed_info,
        "build_s": built.build_s,
        "results": [asdict(r) for r in results],
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
