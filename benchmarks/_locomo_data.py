"""The LoCoMo benchmark's data: the file's conversations, turns and questions, and turns as items.

Part of ``benchmarks/locomo.py`` (run that script).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from memstore import KIND_EVENT, PARTITION_TAG_PREFIX, Item, ThoughtLink  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories (the official scorer's meaning, not the paper's order)."""
ADVERSARIAL = 5
"""LoCoMo's category 5: adversarial questions, about what the conversation does not say
(mostly a fact of one speaker asked about the other). They feed only the abstention
figures (relevance), never recall."""
TITLE_WORDS = 8
"""Words of the turn text in a ``first-words`` title."""
ITEM_SHAPES = ("transcript", "speaker-title", "first-words")
DEFAULT_SHAPE = "transcript"
ITEM_SHAPE_DOC = {
    "transcript": "title '', content '<speaker>: <text> [image: <caption>]'",
    "speaker-title": "title '<speaker>', content '<text> [image: <caption>]'",
    "first-words": "title '<speaker>: <first 8 words> ...', content '<text> [image: <caption>]'",
}
TURN_RELATION = "precedes"
"""Each turn links to the next turn of its session by this relation; the Searcher
modes spread scores along it (``SearchConfig.spread_relations``)."""


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
    """One conversation: its turns, its evaluated questions and its adversarial ones."""

    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    adversarial: list[Question] = field(default_factory=list)
    """Category 5 (:data:`ADVERSARIAL`): unanswerable from the conversation; no recall."""

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
    """Read a LoCoMo-format file: turns of ``session_<n>`` keys, questions of categories 1-5.

    Categories 1-4 are the evaluated questions; category 5 goes to
    ``Conversation.adversarial`` (its evidence is the turn the adversarial
    answer comes from, kept as is, never scored).
    """
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
        adversarial: list[Question] = []
        for i, qa in enumerate(obj.get("qa", [])):
            stats.qa_total += 1
            cat = int(qa.get("category", 0))
            if cat == ADVERSARIAL:
                stats.qa_category_5 += 1
                ev = [e for e in evidence_ids(str(e) for e in qa.get("evidence", [])) if e in known]
                adversarial.append(
                    Question(
                        conv=sid,
                        index=i,
                        category=cat,
                        text=str(qa["question"]),
                        evidence=tuple(f"{sid}:{e}" for e in ev),
                        sessions=frozenset(int(e[1:].split(":")[0]) for e in ev),
                    )
                )
                continue
            if cat not in CATEGORIES:
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
        convs.append(Conversation(sid, turns, questions, adversarial))
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
