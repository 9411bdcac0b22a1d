"""The export file: NDJSON that carries a journal's items, every version, from one store to another.

An export is three kinds of line::

    {"format": "memstore-journal-export/2", "partition": null, "head": "12.0"}
    {"id": "01J...", "versions": [{"valid_from": {...}, "op": "upsert", "item": {...}}]}
    ...
    {"end": true, "items": 2}

The first names the format; then one line per item; the last says the export
is complete and how many item lines came before it. The end line is what
tells a whole export from one cut off at a line boundary (a copy that stopped,
a disk that filled, an interrupted pipe): without it, such a file is valid
line by line and would import as if it were all there, and the items after
the cut would be gone without a word. An export of format ``/1`` (written
before the end line existed) is still read; it cannot vouch for being whole.

The header's ``head`` is the journal position the item lines are the state
at: every version stamped at or before it is in the file (for the partition
exported), none after it. A reader that imports the file resumes the change
stream from there, skipping nothing and repeating nothing; so the head and the
rows are read in one snapshot (see :func:`write_export`).

This module writes and reads the file; :meth:`JournalBase.export
<memstore.journal.base.JournalBase.export>` and :meth:`~memstore.journal.base.JournalBase.import_`
own what goes in it and what an import does with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import IO, Any, TypeGuard

from memstore.errors import InvalidItemError, JournalCorruptError
from memstore.journal.hlc import Lsn
from memstore.journal.importrules import RECORD_RULES, ImportRules
from memstore.journal.version import Row, row_from_export
from memstore.validate import id_rejection

__all__ = [
    "EXPORT_FORMAT",
    "LEGACY_EXPORT_FORMATS",
    "ExportWriter",
    "is_end_line",
    "read_export",
    "write_export",
]

EXPORT_FORMAT = "memstore-journal-export/2"
"""The first line of an export names its format: ``{"format": EXPORT_FORMAT, ...}``."""

LEGACY_EXPORT_FORMATS = ("memstore-journal-export/1",)
"""Older formats an import still reads: the same lines, with no end line to check."""

_FAMILY = EXPORT_FORMAT.rsplit("/", 1)[0] + "/"
"""What every version's format name starts with: ``memstore-journal-export/``."""

BOM = "\ufeff"
"""The byte-order mark an editor may put first in a UTF-8 file; a reader skips it there."""


class ExportWriter:
    """Writes one export to ``fp``: the header now, item lines as given, the end line last."""

    def __init__(self, fp: IO[str], partition: str | None, head: str) -> None:
        self._fp = fp
        self.items = 0
        header = {"format": EXPORT_FORMAT, "partition": partition, "head": head}
        fp.write(json.dumps(header) + "\n")

    def item(self, id: str, versions: list[dict[str, Any]]) -> None:
        """Write one item with its versions, oldest first."""
        self._fp.write(json.dumps({"id": id, "versions": versions}) + "\n")
        self.items += 1

    def end(self) -> int:
        """Write the end line; returns how many items the export holds."""
        self._fp.write(json.dumps({"end": True, "items": self.items}) + "\n")
        return self.items


def write_export(
    fp: IO[str],
    partition: str | None,
    snapshot: Iterator[Lsn | Row],
    on_corrupt: Callable[[JournalCorruptError], None] | None = None,
) -> int:
    """Write a whole export of ``snapshot`` to ``fp``; returns the number of items.

    ``snapshot`` is one read of the journal: first the head it reads at, then
    every row to export, by id then stamp, from that same snapshot (a backend
    reads the head in the transaction that reads the rows, so that a write
    committed meanwhile is in neither). The header names that head. A row
    that cannot be read raises :class:`~memstore.errors.JournalCorruptError`,
    or with ``on_corrupt`` is reported to it and left out (an item with no
    readable version is left out whole).
    """
    head = next(snapshot)
    if not isinstance(head, Lsn):  # pragma: no cover - a backend's mistake
        raise TypeError(f"an export snapshot starts with its head, got {head!r:.60}")
    out = ExportWriter(fp, partition, str(head))
    versions: list[dict[str, Any]] = []
    current: str | None = None
    for row in snapshot:
        if not isinstance(row, Row):  # pragma: no cover - a backend's mistake
            raise TypeError(f"an export snapshot holds one head, then rows; got {row!r:.60}")
        if row.id != current:
            if versions and current is not None:
                out.item(current, versions)
            current, versions = row.id, []
        try:
            versions.append(row.version().to_json())
        except JournalCorruptError as e:
            if on_corrupt is None:
                raise
            on_corrupt(e)
    if versions and current is not None:
        out.item(current, versions)
    return out.end()


def is_end_line(line: str) -> bool:
    """Whether ``line`` is an export's end line (for a caller that counts an export's lines)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return _ends(obj)


def _ends(obj: object) -> TypeGuard[dict[str, Any]]:
    """Whether a parsed line is the end line (an object naming ``end`` and no item ``id``)."""
    return isinstance(obj, dict) and "end" in obj and "id" not in obj


def read_export(fp: IO[str], rules: ImportRules = RECORD_RULES) -> dict[str, list[Row]]:
    """The export in ``fp`` by id, each id's versions in order; ``rules`` judge every version.

    Raises :class:`~memstore.errors.InvalidItemError` naming the line for
    anything that is not a whole export of a known format: a line that is
    not JSON or not an item, an item twice, two versions of an item with one
    stamp, and (format ``/2``) a missing end
    line, an end line whose count disagrees, or text after the end line.
    """
    by_id: dict[str, list[Row]] = {}
    legacy: bool | None = None  # None until the header is read
    ended = False
    last = 0  # the last line with content
    for n, line in _numbered_lines(fp):
        if not isinstance(line, str):
            raise InvalidItemError(
                f"line {n}: expected text, got {type(line).__name__} (open the export in text mode)"
            )
        if not line.strip():
            continue
        if ended:
            raise InvalidItemError(f"line {n}: text after the export's end line (line {last})")
        last = n
        obj = _json_line(n, line)
        if legacy is None:
            legacy = _header(n, obj)
            continue
        if not legacy and _ends(obj):
            _check_end(n, obj, len(by_id))
            ended = True
            continue
        id, rows = _item_line(n, obj, rules)
        if id in by_id:
            raise InvalidItemError(f"line {n}: {id} appears twice")
        by_id[id] = rows
    if legacy is None:
        raise InvalidItemError("empty input: not a memstore export")
    if not legacy and not ended:
        raise InvalidItemError(
            f"the export stops after line {last} without its end line: it is cut off "
            "(an interrupted export or copy), and what followed is missing"
        )
    return by_id


def _json_line(n: int, line: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidItemError(f"line {n}: not JSON: {e}") from None
    except RecursionError:  # no export nests deeper than an item's fields
        raise InvalidItemError(f"line {n}: JSON nested too deeply for an export") from None


def _header(n: int, obj: object) -> bool:
    """Check the first line; returns whether it names a legacy format (no end line)."""
    fmt = obj.get("format") if isinstance(obj, dict) else None
    if fmt == EXPORT_FORMAT:
        return False
    if fmt in LEGACY_EXPORT_FORMATS:
        return True
    if isinstance(fmt, str) and fmt.startswith(_FAMILY):  # a version this one does not know
        raise InvalidItemError(
            f"line {n}: the export is format {fmt[:80]!r}, which this memstore does not read "
            f"(it reads {EXPORT_FORMAT!r}): it was written by a newer memstore; import it "
            "with that version (pip install -U memstore-engine)"
        )
    raise InvalidItemError(
        f"line {n}: not a memstore export (the first line must name format {EXPORT_FORMAT!r})"
    )


def _check_end(n: int, obj: dict[str, Any], items: int) -> None:
    count = obj.get("items")
    if obj.get("end") is not True or type(count) is not int:
        raise InvalidItemError(f"line {n}: expected the end line {{'end': true, 'items': N}}")
    if count != items:
        raise InvalidItemError(
            f"line {n}: the end line counts {count} item(s) but the export holds {items}: "
            "it is damaged"
        )


def _item_line(n: int, obj: object, rules: ImportRules) -> tuple[str, list[Row]]:
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not obj["id"]:
        raise InvalidItemError(f"line {n}: expected {{'id': ..., 'versions': [...]}}")
    id = obj["id"]
    why = id_rejection(id)  # a delete-only entry has no item whose rules would check it
    if why:
        raise InvalidItemError(f"line {n}: {why}")
    entries = obj.get("versions")
    if not isinstance(entries, list) or not entries:
        raise InvalidItemError(f"line {n}: {id} has no versions")
    try:
        rows = sorted(
            (row_from_export(id, e, rules) for e in entries), key=lambda r: (r.lsn, r.node)
        )
    except InvalidItemError as e:
        raise InvalidItemError(f"line {n}: {e.reason}") from None
    for before, after in pairwise(rows):
        # A journal keys a version by (id, stamp): of two with one stamp it would
        # keep one and the store might show the other. No export holds such a pair.
        if (before.lsn, before.node) == (after.lsn, after.node):
            raise InvalidItemError(f"line {n}: {id} has two versions stamped {after.hlc}")
    _place_deletes(rows)
    return id, rows


def _numbered_lines(fp: IO[str]) -> Iterator[tuple[int, str]]:
    """The lines of ``fp`` numbered from 1; text that does not decode is an invalid export.

    A text file decodes ahead of the line read, so the error names the last
    line read whole rather than the one holding the bad bytes. A byte-order
    mark opening the first line (an editor that saved the export as "UTF-8
    with BOM", read through ``open(path)``, whose ``utf-8`` keeps the mark) is
    dropped, as ``encoding="utf-8-sig"`` would: the file is read as if opened
    that way. A mark anywhere else is text, and the line holding it is not JSON.
    """
    lines = iter(fp)
    n = 0
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as e:
            where = f"after line {n}: " if n else ""
            raise InvalidItemError(
                f"{where}the export is not {e.encoding.upper()} text ({e.reason})"
            ) from None
        n += 1
        if n == 1 and isinstance(line, str) and line.startswith(BOM):
            line = line[len(BOM) :]
        yield n, line


def _place_deletes(rows: list[Row]) -> None:
    """A delete version belongs where the item it ended was: copy its placement."""
    prev: Row | None = None
    for r in rows:
        if r.op == "delete" and prev is not None:
            r.partition, r.shared = prev.partition, prev.shared
            r.kind = r.kind or prev.kind
        if r.op == "upsert":
            prev = r
