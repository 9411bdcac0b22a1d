"""The near-duplicate tuning fixture: paraphrases merge, distinct facts stay apart.

``fixtures/neardup_groups.json`` holds groups of realistic memory notes about
one subject: paraphrases of one fact, and distinct facts sharing the subject's
vocabulary. These tests prove the near-duplicate rules (and the threshold in
particular) separate the two.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memstore.item import Item
from memstore.neardup import (
    MEMORY_NEAR_DUP_THRESHOLD,
    NEAR_DUP_CONTAINMENT,
    NEAR_DUP_MIN_TOKENS,
    near_duplicate_memory,
)
from memstore.text import dedup_tokens

FIXTURE_PATH = Path(__file__).parent.parent / "fixtures" / "neardup_groups.json"
KINDS = frozenset({"stable_fact", "operational_pattern", "watch_item", "hypothesis"})


@dataclass(frozen=True)
class Group:
    name: str
    kind: str
    subject: str
    paraphrases: tuple[Item, ...]
    distinct: tuple[Item, ...]

    @property
    def notes(self) -> tuple[Item, ...]:
        return self.paraphrases + self.distinct


def _note(raw: dict[str, Any], kind: str, subject: str) -> Item:
    title, content = raw["title"], raw["content"]
    assert isinstance(title, str) and title, raw
    assert isinstance(content, str) and content, raw
    return Item(kind=kind, title=title, content=content, subject=subject, confidence="high")


def _load() -> tuple[str, list[Group]]:
    data = json.loads(FIXTURE_PATH.read_text(encoding="utf-8"))
    groups: list[Group] = []
    for raw in data["groups"]:
        kind, subject = raw["kind"], raw["subject"]
        groups.append(
            Group(
                name=raw["name"],
                kind=kind,
                subject=subject,
                paraphrases=tuple(_note(n, kind, subject) for n in raw["paraphrases"]),
                distinct=tuple(_note(n, kind, subject) for n in raw["distinct"]),
            )
        )
    description = data["description"]
    assert isinstance(description, str)
    return description, groups


DESCRIPTION, GROUPS = _load()
GROUP_IDS = [g.name for g in GROUPS]


def _show(item: Item) -> str:
    return f"{item.title!r}: {item.content!r}"


def _pair_report(label: str, a: Item, b: Item) -> str:
    ta, tb = dedup_tokens(a), dedup_tokens(b)
    score, dup = near_duplicate_memory(a, b)
    return (
        f"{label}: score={score:.3f} dup={dup}\n"
        f"  a = {_show(a)}\n      tokens({len(ta)}) = {sorted(ta)}\n"
        f"  b = {_show(b)}\n      tokens({len(tb)}) = {sorted(tb)}\n"
        f"  shared = {sorted(ta & tb)}"
    )


def _distinct_pairs(group: Group) -> Iterator[tuple[Item, Item]]:
    yield from itertools.product(group.paraphrases, group.distinct)
    yield from itertools.combinations(group.distinct, 2)


def _is_long(a: Item, b: Item) -> bool:
    return min(len(dedup_tokens(a)), len(dedup_tokens(b))) >= NEAR_DUP_MIN_TOKENS


def _contained(a: Item, b: Item) -> bool:
    ta, tb = dedup_tokens(a), dedup_tokens(b)
    return len(ta & tb) >= NEAR_DUP_CONTAINMENT * min(len(ta), len(tb))


def test_fixture_shape() -> None:
    assert DESCRIPTION.strip()
    assert len(GROUPS) >= 40
    assert len(set(GROUP_IDS)) == len(GROUP_IDS), "group names must be unique"
    for g in GROUPS:
        assert g.kind in KINDS, g.name
        assert g.subject, g.name
        assert 2 <= len(g.paraphrases) <= 4, g.name
        assert 1 <= len(g.distinct) <= 3, g.name


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_paraphrases_are_near_duplicates(group: Group) -> None:
    failures = [
        _pair_report(f"paraphrases not merged ({label})", x, y)
        for a, b in itertools.combinations(group.paraphrases, 2)
        for label, x, y in (("a,b", a, b), ("b,a", b, a))
        if not near_duplicate_memory(x, y)[1]
    ]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_distinct_facts_are_not_near_duplicates(group: Group) -> None:
    failures = [
        _pair_report(f"distinct facts merged ({label})", x, y)
        for a, b in _distinct_pairs(group)
        for label, x, y in (("a,b", a, b), ("b,a", b, a))
        if near_duplicate_memory(x, y)[1]
    ]
    assert not failures, "\n".join(failures)


def _groups_by_subject_and_kind() -> dict[tuple[str, str], list[Group]]:
    by_key: dict[tuple[str, str], list[Group]] = defaultdict(list)
    for g in GROUPS:
        by_key[(g.subject.casefold(), g.kind)].append(g)
    return {k: v for k, v in by_key.items() if len(v) > 1}


SHARED_KEYS = _groups_by_subject_and_kind()


def test_fixture_has_groups_sharing_subject_and_kind() -> None:
    assert len(SHARED_KEYS) >= 5


@pytest.mark.parametrize(
    "key", list(SHARED_KEYS), ids=[f"{subject}/{kind}" for subject, kind in SHARED_KEYS]
)
def test_groups_sharing_subject_and_kind_do_not_merge(key: tuple[str, str]) -> None:
    failures: list[str] = []
    for g1, g2 in itertools.combinations(SHARED_KEYS[key], 2):
        for a, b in itertools.product(g1.notes, g2.notes):
            for x, y in ((a, b), (b, a)):
                if near_duplicate_memory(x, y)[1]:
                    failures.append(_pair_report(f"groups {g1.name} / {g2.name} merged", x, y))
    assert not failures, "\n".join(failures)


def test_threshold_separates_long_paraphrases_from_distinct_facts() -> None:
    """Among long notes, the Jaccard threshold alone must do the separating.

    Containment rescues a short restatement of a long note, so paraphrase pairs
    it already covers do not constrain the threshold; every other long pair does.
    """
    long_paraphrases: list[tuple[float, Item, Item]] = []
    long_distinct: list[tuple[float, Item, Item]] = []
    for g in GROUPS:
        for a, b in itertools.combinations(g.paraphrases, 2):
            if _is_long(a, b):
                long_paraphrases.append((near_duplicate_memory(a, b)[0], a, b))
        for a, b in _distinct_pairs(g):
            if _is_long(a, b) and not _contained(a, b):
                long_distinct.append((near_duplicate_memory(a, b)[0], a, b))
    assert len(long_paraphrases) >= 20, "too few long paraphrase pairs to tune the threshold"

    by_jaccard = [p for p in long_paraphrases if not _contained(p[1], p[2])]
    if long_distinct:
        score, a, b = max(long_distinct, key=lambda p: p[0])
        assert score < MEMORY_NEAR_DUP_THRESHOLD, _pair_report(
            f"closest distinct pair reaches threshold {MEMORY_NEAR_DUP_THRESHOLD}", a, b
        )
    if by_jaccard:
        score, a, b = min(by_jaccard, key=lambda p: p[0])
        assert score >= MEMORY_NEAR_DUP_THRESHOLD, _pair_report(
            f"loosest paraphrase pair falls below threshold {MEMORY_NEAR_DUP_THRESHOLD}", a, b
        )


def test_fixture_exercises_short_text_rule() -> None:
    short_groups = [
        g.name for g in GROUPS if any(len(dedup_tokens(n)) < NEAR_DUP_MIN_TOKENS for n in g.notes)
    ]
    assert len(short_groups) >= 10, short_groups
