"""The commands on items: ``add``, ``search``, ``get``, ``forget`` and ``stats``."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from memstore.memory import DEFAULT_KIND, JOURNAL_FILE, Memory
from memstore.tags import partition_from_tags
from memstore.vocabulary import ENGINE_KINDS

from ._common import (
    Failure,
    UsageError,
    existing,
    hint_unknown_partition,
    in_its_journal,
    not_a_file,
    place,
    print_item,
    reader,
    shown,
    writer,
)


def _check_kind(args: argparse.Namespace) -> None:
    """Refuse a kind nobody uses (a typo such as ``stable-fact`` would skip its rules).

    Known: the engine's kinds, ``note``, and every kind already in the folder;
    ``--new-kind`` starts one of your own. Checked before anything is opened,
    so a refused add creates nothing.
    """
    kind = args.kind
    if not kind or args.new_kind:
        return
    known = {*ENGINE_KINDS, DEFAULT_KIND}
    if kind in known:
        return
    if args.journal or (Path(args.data) / JOURNAL_FILE).is_file():
        with reader(argparse.Namespace(**{**vars(args), "readonly": True}), embed=False) as mem:
            known |= {it.kind for it in mem.store.all_items()}
        if kind in known:
            return
    near = difflib.get_close_matches(kind, sorted(known), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise UsageError(
        f"unknown kind {kind!r}: {hint}known kinds: {', '.join(sorted(known))} "
        "(--new-kind starts a kind of your own)"
    )


def cmd_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {}
    for name in ("kind", "confidence", "origin", "subject", "event_date", "title"):
        value = getattr(args, name)
        if value:
            fields[name] = value
    if not args.journal:
        not_a_file(args.data)
        in_its_journal(args.data)  # a server's folder on PostgreSQL: say what to pass first
    _check_kind(args)
    if not args.journal and not (Path(args.data) / JOURNAL_FILE).is_file():
        # A new memory: the item is tried in memory first, so a refused add makes no
        # folder (two adds racing to make one still both land: the second waits its turn).
        with Memory(embedder=None) as trial:
            trial.add(args.text, partition=args.partition, **fields)
    with writer(args, embed=True) as mem:
        item = mem.add(args.text, partition=args.partition, **fields)
        print_item(item, args.json)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise UsageError("the query is empty: give some words to search for")
    partition = "*" if args.all else args.partition
    with reader(args, embed=True) as mem:
        hits = mem.search(args.query, partition=partition, kind=args.kind, limit=args.limit)
        for hit in hits:
            print_item(hit.item, args.json, hit.score)
        said = False
        if partition is None:
            said = _hint_partitions(mem)
        elif partition != "*":
            said = hint_unknown_partition(mem, partition)
        if args.kind and not hits:
            said = _hint_kinds(mem, args.kind) or said
        if not hits and not said:  # exit 0 and an empty stdout: say it was a search of nothing
            print(f"memstore: no hit for {args.query!r}", file=sys.stderr)
    return 0


def _hint_kinds(mem: Memory, kind: str) -> bool:
    """No hits for ``--kind``: say when no item has that kind at all (a typo finds nothing).

    Whether it said so.
    """
    known = sorted({it.kind for it in mem.store.all_items()})
    if kind in known:
        return False
    near = difflib.get_close_matches(kind, known, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    print(
        f"memstore: no item here has kind {kind!r}: {hint}kinds here: {', '.join(known) or '-'}",
        file=sys.stderr,
    )
    return True


def _hint_partitions(mem: Memory) -> bool:
    """Without --partition only untagged items are searched: say when others exist.

    Whether it said so.
    """
    parts = Counter(p for it in mem.store.all_items() if (p := partition_from_tags(it.tags)))
    if parts:
        names = ", ".join(f"{p} ({n})" for p, n in sorted(parts.items())[:5])
        more = f" and {len(parts) - 5} more" if len(parts) > 5 else ""
        print(
            f"memstore: searched items without a partition; partitions here: {names}{more}. "
            "Use --partition NAME, or --all for every partition",
            file=sys.stderr,
        )
    return bool(parts)


def cmd_get(args: argparse.Namespace) -> int:
    with reader(args, embed=False) as mem:
        item = mem.get(args.id)
        if item is None:
            raise Failure(f"no item {args.id!r} in {place(args)}")
        print(json.dumps(item.model_dump(mode="json"), indent=None if args.json else 2))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if not args.journal:
        existing(args.data)  # nothing to forget in a folder that is not there: create none
    with writer(args, embed=False) as mem:
        if args.hard:
            if mem.get(args.id) is None and not mem.history(args.id):
                raise Failure(f"no item {args.id!r} in {place(args)}")
            mem.purge([args.id])
        elif not mem.delete(args.id):
            raise Failure(f"no item {args.id!r} in {place(args)}")
    if args.json:
        print(json.dumps({"deleted": args.id, "hard": args.hard}))
    elif args.hard:
        print(f"purged {args.id} (every version)")
    else:
        print(f"deleted {args.id} (its history is kept; --hard erases it)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with reader(args, embed=False) as mem:
        s = mem.stats()
        items = mem.store.all_items()
        by_partition = Counter(partition_from_tags(it.tags) or "" for it in items)
        by_kind = Counter(it.kind for it in items)
        report: dict[str, Any] = {
            "items": s.items,
            "active": s.active,
            "head": str(s.head) if s.head else None,
            "partitions": dict(sorted(by_partition.items())),
            "kinds": dict(sorted(by_kind.items())),
        }
        if args.json:
            print(json.dumps(report, indent=2))
            return 0
        print(f"{'items':<24}{s.items:>10}")
        print(f"{'active':<24}{s.active:>10}")
        print(f"{'journal head':<24}{report['head'] or '-':>10}")
        for title, counts in (("partition", by_partition), ("kind", by_kind)):
            if counts:
                print(f"\n{title:<24}{'items':>10}")
                for name, n in sorted(counts.items()):
                    print(f"{shown(name) or '(none)':<24}{n:>10}")
    return 0
