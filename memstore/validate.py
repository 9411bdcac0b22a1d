"""The writing rules every item obeys, whatever the host, and retention stamping.

:func:`validate_base` returns why an item may not be written (``""`` when it
may); the store raises :class:`~memstore.errors.InvalidItemError` with that
reason and changes nothing.

>>> validate_base(Vocabulary(), Item(kind="stable_fact", title="x", confidence="low"))
"kind 'stable_fact' needs confidence 'high', got 'low'"
>>> validate_base(Vocabulary(), Item(kind="note", title="x"))
''
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable
from typing import Any

import regex

from memstore._namerule import (
    CONTROL_RULE,
    FORMAT_RULE,
    control_character,
    control_named,
    format_character,
    format_named,
)
from memstore.arguments import describe, has_lone_surrogate
from memstore.errors import InvalidItemError, MemstoreError
from memstore.eventdate import valid_event_date
from memstore.item import (
    DEFAULT_HYPOTHESIS_STALE_AFTER,
    DEFAULT_UNKNOWN_STALE_AFTER,
    KIND_EVENT,
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_UNKNOWN,
    REFUTED_DATA_KEY,
    SCOPE_PRIVATE,
    VALID_THOUGHT_LINK_RELATIONS,
    Item,
    ThoughtLink,
    utc_now,
    well_typed,
)
from memstore.limits import (
    MAX_CONTENT_CHARS,
    MAX_DATA_CHARS,
    MAX_DATA_KEY_CHARS,
    MAX_DATA_KEYS,
    MAX_EVENT_DATE_CHARS,
    MAX_ID_CHARS,
    MAX_KIND_CHARS,
    MAX_LINKS,
    MAX_NAME_CHARS,
    MAX_PARTITION_TAG_CHARS,
    MAX_REF_CHARS,
    MAX_REFS,
    MAX_SUBJECT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
)
from memstore.tags import (
    PARTITION_ALL,
    PARTITION_TAG_PREFIX,
    partition_from_tags,
    private_owner,
)
from memstore.vocabulary import Vocabulary

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_TAGS",
    "MAX_TITLE_CHARS",
    "format_character",
    "id_rejection",
    "intake_rejection",
    "kind_rejection",
    "link_shape_rejection",
    "model_error",
    "naive_datetime_rejection",
    "new_id_rejection",
    "record_copy",
    "record_kind_rejection",
    "record_rejection",
    "stamp_knowledge_retention",
    "thought_link_rejection",
    "validate_base",
]

# The MAX_* names above are re-exported from memstore.limits, where every bound lives.

_KIND = regex.compile(r"[\p{Ll}\p{Lu}\p{N}_.:/-]{1," + str(MAX_KIND_CHARS) + "}")
_BAD_ID = regex.compile(r"[\s\p{Cc}]")


def thought_link_rejection(from_id: str, link: ThoughtLink) -> str:
    """Why :meth:`Store.add_link` would reject ``link`` from ``from_id``, or ``""``.

    Only the checks that depend on the values (empty target, unknown relation,
    self-link), not on the store's state (missing cell, cell at the cap).

    >>> thought_link_rejection("a", ThoughtLink(to_id="a", relation="explains"))
    'a cell cannot link to itself (a)'
    """
    if not link.to_id:
        return "link target (to_id) is empty"
    if link.relation not in VALID_THOUGHT_LINK_RELATIONS:
        names = ", ".join(VALID_THOUGHT_LINK_RELATIONS)
        return f"link relation {link.relation!r} is not one of: {names}"
    if link.to_id == from_id:
        return f"a cell cannot link to itself ({from_id})"
    return ""


def naive_datetime_rejection(item: Item) -> str:
    """Why the item's datetimes are unusable, or ``""``.

    Each must carry a timezone (the model refuses naive datetimes at
    construction; this catches one assigned afterwards, which would
    otherwise break every later comparison), and must name an instant that
    UTC can write: within the years 1-9999 *in UTC*, as ``event_date`` is.
    ``0001-01-01T00:00+14:00`` is a day before year 1 in UTC: the journal
    (which writes an offset in seconds as UTC) and every reader converting
    to UTC would fail on it, after the store had taken it.

    >>> import datetime as dt
    >>> east = dt.timezone(dt.timedelta(seconds=561))
    >>> naive_datetime_rejection(Item(kind="note", title="x",
    ...                               stale_after=dt.datetime(1, 1, 1, tzinfo=east)))
    'stale_after 0001-01-01T00:00:00+00:09:21 is outside the years 1-9999 in UTC'
    """
    for name in ("stale_after", "created_at", "updated_at"):
        value = getattr(item, name)
        if value is None:
            continue
        if not isinstance(value, _dt.datetime) or value.utcoffset() is None:
            return f"{name} must be a timezone-aware datetime, got {value!r}"
        if value.year in (1, 9999) and not _fits_utc(value):  # only these can spill over
            return f"{name} {value.isoformat()} is outside the years 1-9999 in UTC"
    return ""


def _fits_utc(value: _dt.datetime) -> bool:
    """Whether ``value`` converts to UTC (its instant is within the years 1-9999)."""
    try:
        value.astimezone(_dt.UTC)
    except OverflowError:
        return False
    return True


def record_rejection(item: Item) -> str:
    """Why a journal could not keep ``item`` and read it back, or ``""``: the record rule.

    Every stored item obeys it, whoever wrote it and however: it is what
    reopening a journal, an import and a restored backup read back. A field
    holds what the model declares (a link's weight a number in ``(0, 1]``,
    never NaN; data values text), the id is a valid id (:func:`id_rejection`),
    the datetimes are aware and within the years 1-9999 in UTC, no text holds
    a lone surrogate, and no NUL is in the kind or a tag (PostgreSQL keeps
    them in text columns, which refuse it). An item that breaks it would be
    acknowledged, then lost with every other item at the next open.

    :func:`validate_base` includes it (for any item with an id), so every
    write that validates obeys it; the writes that take an item as given
    (``Store.put``, ``mirror``, ``reflect``, ``restore``), a link added to a
    cell and what ``Config.before`` makes of an item are held to it alone
    (all but ``restore`` and a link to a partition tag's bound too, see
    :func:`intake_rejection`), and so is an import
    (:mod:`memstore.journal.importrules`, with the bound too), so an export
    of whatever those wrote imports back.

    >>> record_rejection(Item(id="a", kind="note", title="x"))
    ''
    >>> link = ThoughtLink(to_id="b", relation="explains")
    >>> link.weight = float("nan")  # an assignment: pydantic does not check it
    >>> record_rejection(Item(id="a", kind="note", title="x", links=[link]))
    'link 0: weight must be a number in (0, 1], got float nan'
    """
    if not well_typed(item):
        links = item.links if isinstance(item.links, list) else []
        for n, link in enumerate(links):
            why = link_shape_rejection(link) if isinstance(link, ThoughtLink) else ""
            if why:
                return f"link {n}: {why}"
        try:
            item = Item.model_validate(item_fields(item))
        except ValueError as e:  # pydantic's ValidationError: name the first bad field
            return model_error(e)
    why = id_rejection(item.id) or naive_datetime_rejection(item)
    if why:
        return why
    if "\x00" in item.kind:
        return "kind holds a NUL character"
    for tag in item.tags:
        if "\x00" in tag:
            return f"tag {tag[:80]!r} holds a NUL character"
    return _surrogate_rejection(item)


def link_shape_rejection(link: ThoughtLink) -> str:
    """Why ``link``'s fields are not what the model declares, or ``""``.

    Construction checks them, but a field assigned afterwards is not
    checked: a weight set to NaN would reach the journal, which writes it
    as ``null`` and cannot read the cell back.

    >>> link = ThoughtLink(to_id="b", relation="explains")
    >>> link.weight = float("inf")
    >>> link_shape_rejection(link)
    'weight must be a number in (0, 1], got float inf'
    """
    d = link.__dict__
    if type(d.get("to_id")) is not str:
        return f"to_id must be text, got {describe(d.get('to_id'))}"
    if type(d.get("relation")) is not str:
        return f"relation must be text, got {describe(d.get('relation'))}"
    weight: object = d.get("weight")
    # A float or an int (True is no weight); NaN fails both comparisons.
    if isinstance(weight, bool) or not isinstance(weight, float | int) or not 0 < weight <= 1:
        return f"weight must be a number in (0, 1], got {describe(weight)}"
    if has_lone_surrogate(d["to_id"]):
        return "to_id is not valid Unicode text (it holds a lone surrogate)"
    return ""


def intake_rejection(item: Item) -> str:
    """Why a write taking ``item`` as given must refuse it, or ``""``: the rule on the way in.

    :func:`record_rejection`, and no partition tag longer than
    :data:`~memstore.limits.MAX_PARTITION_TAG_CHARS` (what a PostgreSQL
    journal can always index). Asked of ``Store.put``, ``mirror`` and
    ``reflect`` (:func:`record_copy`); :func:`validate_base`, which every
    other write and an import obey, bounds every tag to the same length.
    Reading never asks it: a journal, a backup or a follower's feed that
    already holds a longer partition tag (written before this bound) is read
    as it is, and ``Store.restore`` (which loads such a record into a store,
    recording nothing) is held to :func:`record_rejection` alone.

    >>> intake_rejection(Item(id="a", kind="note", title="x", tags=["tenant/" + "x" * 300]))
    "partition tag 'tenant/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... is 307 characters; at most 256"
    """
    why = record_rejection(item)
    if why:
        return why
    for tag in item.tags:
        if len(tag) > MAX_PARTITION_TAG_CHARS and tag.startswith(PARTITION_TAG_PREFIX):
            return (
                f"partition tag {tag[:40]!r}... is {len(tag)} characters; "
                f"at most {MAX_PARTITION_TAG_CHARS}"
            )
    return ""


def record_copy(item: Item, what: str, rule: Callable[[Item], str] = intake_rejection) -> Item:
    """A copy of ``item`` that obeys ``rule``, else an :class:`InvalidItemError`.

    ``rule``: :func:`intake_rejection` (a write), or :func:`record_rejection`
    (loading what a record holds). The copy holds exactly the model's types
    (a field assigned after construction is validated, e.g. a tuple of tags
    becomes a list); the error names ``what`` refused it (``"put"``,
    ``"Config.before"``...).
    """
    why = rule(item)
    if why:
        raise InvalidItemError(f"{what}: {why}")
    if well_typed(item):
        return item.clone()
    return Item.model_validate(item_fields(item))  # the rule held: the fields validate


def item_fields(item: Item) -> dict[str, Any]:
    """Every field of ``item``, its links as plain dicts: what validation must see.

    Pydantic takes a model instance inside a field as it is (a link whose
    weight was assigned NaN would pass); as a dict, every link is checked too.
    """
    fields = dict(item.__dict__)
    links = fields.get("links")
    if isinstance(links, list):
        fields["links"] = [
            dict(link.__dict__) if isinstance(link, ThoughtLink) else link for link in links
        ]
    return fields


def model_error(error: ValueError) -> str:
    """The first problem of a pydantic ``ValidationError`` on one line: where, what, the value.

    Pydantic's own text spans several lines and ends in a link; an error
    message (and the CLI's one line) wants ``field.path: message, got value``.

    >>> from pydantic import ValidationError
    >>> try:
    ...     ThoughtLink(to_id="b", relation="explains", weight=float("nan"))
    ... except ValidationError as e:
    ...     model_error(e)
    'weight: Input should be less than or equal to 1, got float nan'
    """
    errors = getattr(error, "errors", None)
    if not callable(errors):  # not pydantic's: its first line
        return str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
    first = errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    text = f"{where}: {first['msg']}" if where else str(first["msg"])
    value = first.get("input")
    if first.get("type") != "missing" and isinstance(value, str | int | float | None):
        text += f", got {describe(value)}"
    more = len(errors()) - 1
    return text + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def validate_base(vocabulary: Vocabulary, item: Item, previous: Item | None = None) -> str:
    """Why ``item`` breaks the rules every item obeys, or ``""`` when it is valid.

    The host's own rules (``Config.validate``, the vocabulary's writable list)
    come on top. Checked: id and kind shape, non-empty text, size limits, a
    stable fact's high confidence (unless the vocabulary makes it optional), a
    deadline on hypotheses and unknowns, an event date on events (and a valid
    one wherever set), an owner tag on private items, one partition tag at
    most (its name at most :data:`~memstore.limits.MAX_NAME_CHARS`, the
    longest a read's ``partition=`` takes, and not padded with whitespace),
    well-formed tags, links and data.

    The names a reader compares by eye, the id and the tags (the partition's
    among them), hold no Unicode format character (:func:`format_character`:
    a bidi control or a zero-width character would make two names that look
    the same name two items, or two partitions) and no control character
    (:func:`~memstore._namerule.control_character`: a tab reads as a space, an
    escape rewrites a terminal's screen), and a partition name is not
    padded (``" x"`` would be another partition than ``"x"``). These rules
    came after items were stored: ``previous``, the stored item this write
    replaces (the same id), keeps its id and the tags it holds, so an item
    written before them can still be updated. Reading, deleting, exporting
    and importing such an item never asks them (:func:`record_rejection`).
    """
    # Fields read from the item's __dict__, where the model keeps them: every
    # write asks this, and an attribute of a model costs more than a key.
    d = item.__dict__
    id, kind, title, content = d["id"], d["kind"], d["title"], d["content"]
    if id and (len(id) > MAX_ID_CHARS or _bad_id(id)):
        return _id_shape_rejection(id)
    if id and previous is None and not id.isascii():
        why = new_id_rejection(id)
        if why:
            return why
    if not kind:
        return "kind is required"
    if not _valid_kind(kind):
        return _KIND_RULE.format(kind=kind[:80])
    if (not title or title.isspace()) and (not content or content.isspace()):
        return "title and content are both empty"
    if len(title) > MAX_TITLE_CHARS:
        return f"title is {len(title)} characters; at most {MAX_TITLE_CHARS}"
    if len(content) > MAX_CONTENT_CHARS:
        return f"content is {len(content)} characters; at most {MAX_CONTENT_CHARS}"
    why = _size_rejection(item)
    if why:
        return why
    stale_after, event_date = d["stale_after"], d["event_date"]
    if kind in _KINDS_WITH_RULES:
        if (
            kind == KIND_STABLE_FACT
            and d["confidence"] != "high"
            and not vocabulary.fact_confidence_optional
        ):
            return f"kind {kind!r} needs confidence 'high', got {d['confidence']!r}"
        if kind in (KIND_HYPOTHESIS, KIND_UNKNOWN) and stale_after is None:
            return f"kind {kind!r} needs a deadline (stale_after)"
        if kind == KIND_EVENT and not event_date:
            return "kind 'event' needs an event_date (YYYY-MM-DD or RFC 3339)"
    if stale_after is not None or d["created_at"] is not None or d["updated_at"] is not None:
        why = naive_datetime_rejection(item)
        if why:
            return why
    if event_date and not _valid_event_date(event_date):
        return (
            f"event_date {event_date[:80]!r} is neither YYYY-MM-DD nor RFC 3339 "
            "(in UTC, within the years 1-9999)"
        )
    tags = d["tags"]
    if d["scope"] == SCOPE_PRIVATE and not private_owner(item):
        return "a private item needs its owner's tag (user:<hash>)"
    if len(tags) > MAX_TAGS:
        return f"{len(tags)} tags; at most {MAX_TAGS}"
    partitions = 0
    for tag in tags:
        if tag.startswith(PARTITION_TAG_PREFIX):  # first: a padded name is said as a partition
            why = _padded_partition(tag, previous)
            if why:
                return why
        if not tag or tag != tag.strip() or "," in tag or "\n" in tag or "\r" in tag:
            return f"tag {tag[:80]!r} is empty, padded, or holds a comma or newline"
        if "\x00" in tag:  # a partition column cannot hold it (PostgreSQL text refuses NUL)
            return f"tag {tag[:80]!r} holds a NUL character"
        if not tag.isprintable() and (previous is None or tag not in previous.tags):
            found = control_character(tag)
            if found:
                return f"tag {tag[:80]!r} holds {control_named(found)}: {CONTROL_RULE} in a tag"
            found = format_character(tag)
            if found:
                return f"tag {tag[:80]!r} holds {format_named(found)}: {FORMAT_RULE} in a tag"
        if tag.startswith(PARTITION_TAG_PREFIX):
            partitions += 1
            if tag in _NO_PARTITION_TAGS:
                return (
                    f"tag {tag!r} names no partition ('{PARTITION_ALL}' means every "
                    "partition, on reads only; '' is none)"
                )
            if len(tag) - len(PARTITION_TAG_PREFIX) > MAX_NAME_CHARS:  # no read could name it
                return (
                    f"partition tag {tag[:40]!r}... names a partition of "
                    f"{len(tag) - len(PARTITION_TAG_PREFIX)} characters; at most {MAX_NAME_CHARS}"
                )
    if partitions > 1:
        return f"at most one partition tag ({PARTITION_TAG_PREFIX}...), got {partitions}"
    for link in d["links"]:
        why = thought_link_rejection(id, link)
        if why:
            return why
    for key in d["data"]:
        if not key:
            return "data keys must be non-empty"
    return ""


def _padded_partition(tag: str, previous: Item | None) -> str:
    """Why the partition tag ``tag`` names a padded partition a write may not make, or ``""``.

    ``" x"`` and ``"x"`` are two partitions that read the same: a name padded
    with whitespace is refused, unless ``previous`` (the stored item being
    updated) is in that partition already.
    """
    name = tag[len(PARTITION_TAG_PREFIX) :]
    if name == name.strip() or (previous is not None and tag in previous.tags):
        return ""
    return (
        f"partition {name[:80]!r} is padded with whitespace: it would be another partition "
        f"than {name.strip()[:80]!r}, which reads the same; name it without the padding"
    )


_NO_PARTITION_TAGS = frozenset({PARTITION_TAG_PREFIX, PARTITION_TAG_PREFIX + PARTITION_ALL})
"""``tenant/`` and ``tenant/*``: a partition tag no partition is named by."""

_ID_RULE = "an id is printable text of at most " + str(MAX_ID_CHARS) + " characters, no whitespace"
_KIND_RULE = "kind {kind!r} must be 1-" + str(MAX_KIND_CHARS) + " letters, digits or _ . : / -"


def id_rejection(id: object) -> str:
    """Why ``id`` cannot be an item's id, or ``""``: the rule :func:`validate_base` applies.

    For an id that arrives without its item (a delete in an export): non-empty
    text of at most :data:`MAX_ID_CHARS` characters, no whitespace or control
    character (so no NUL), valid Unicode.

    The reason names what is wrong: the length, or the first character an
    id may not hold (a space, other whitespace, or a control character such
    as a NUL, which is not printable), then the rule.

    >>> id_rejection("a b")
    "id 'a b' holds a space (' '): an id is printable text of at most 256 characters, no whitespace"
    >>> print(id_rejection("a\\x00b"))  # doctest: +ELLIPSIS
    id 'a\\x00b' holds a control character ('\\x00'), which is not printable: an id is ...
    >>> id_rejection("billing/eu-west.1")
    ''
    """
    if not isinstance(id, str) or not id:
        return f"an id is non-empty text, got {describe(id)}"
    if len(id) > MAX_ID_CHARS or _bad_id(id):
        return _id_shape_rejection(id)
    if has_lone_surrogate(id):
        return "id is not valid Unicode text (it holds a lone surrogate)"
    return ""


def new_id_rejection(id: object) -> str:
    """Why ``id`` cannot be the id of a new item, or ``""``: :func:`id_rejection` and more.

    A new id holds no Unicode format character either (:func:`format_character`):
    ``"inv\\u200b-42"`` (with a zero-width space) reads as ``"inv-42"``, and a bidi
    control reorders what is shown around it, so two ids that look the same
    would name two items. Only the writes that make an item ask it
    (:func:`validate_base`, ``Config.new_id``, ``Config.id_prefix``): an id
    already stored (written before this rule) is still read, looked up,
    updated, linked to, deleted, exported and imported as it is.

    >>> print(new_id_rejection("inv\\u200b-42"))  # doctest: +ELLIPSIS
    id 'inv\\u200b-42' holds a format character (U+200B ZERO WIDTH SPACE), which is invisible: ...
    >>> new_id_rejection("team-\\U0001f469\\u200d\\U0001f4bb")  # a ZWJ inside an emoji
    ''
    """
    why = id_rejection(id)
    if why or not isinstance(id, str) or id.isascii():
        return why
    found = format_character(id)
    if found:
        return f"id {id[:80]!r} holds {format_named(found)}: {_ID_RULE}, {FORMAT_RULE}"
    return ""


def kind_rejection(kind: object) -> str:
    """Why ``kind`` cannot be an item's kind, or ``""`` (the rule of :func:`validate_base`).

    >>> kind_rejection("deploy note")
    "kind 'deploy note' must be 1-64 letters, digits or _ . : / -"
    """
    if not isinstance(kind, str) or not kind:
        return f"a kind is non-empty text, got {describe(kind)}"
    return "" if _valid_kind(kind) else _KIND_RULE.format(kind=kind[:80])


def record_kind_rejection(kind: object) -> str:
    """Why a journal could not keep ``kind`` as a kind, or ``""``: the record rule for a kind.

    For a kind that arrives without its item (the kind a delete version in
    an export names): text, with no NUL (PostgreSQL's text columns refuse
    it) and no lone surrogate, as :func:`record_rejection` holds an item's
    kind. The shape a write holds a kind to (:func:`kind_rejection`) is not
    asked: :meth:`Store.put <memstore.store.Store.put>` may store a kind that
    breaks it, and its delete names that kind.

    >>> record_kind_rejection("deploy note")
    ''
    >>> record_kind_rejection("note\\x00")
    'kind holds a NUL character'
    """
    if not isinstance(kind, str):
        return f"a kind is text, got {describe(kind)}"
    if "\x00" in kind:
        return "kind holds a NUL character"
    if has_lone_surrogate(kind):
        return "kind is not valid Unicode text (it holds a lone surrogate)"
    return ""


def _id_shape_rejection(id: str) -> str:
    """What is wrong with an id :func:`_bad_id` refuses or that is too long, then the rule."""
    if len(id) > MAX_ID_CHARS:
        return f"id {id[:40]!r}... is {len(id)} characters: {_ID_RULE}"
    found = _BAD_ID.search(id)
    bad = found.group() if found else " "
    if bad == " ":
        what = "a space"
    elif bad.isspace():
        what = "whitespace"
    else:
        what = "a control character"
    extra = ", which is not printable" if what == "a control character" else ""
    return f"id {id[:80]!r} holds {what} ({bad!r}){extra}: {_ID_RULE}"


def _bad_id(id: str) -> bool:
    """Whether ``id`` holds whitespace or a control character.

    Printable ASCII (nearly every id) holds neither but the space, so only
    other text pays for the Unicode pattern.
    """
    if id.isascii() and id.isprintable():
        return " " in id
    return _BAD_ID.search(id) is not None


_KINDS_WITH_RULES = frozenset({KIND_STABLE_FACT, KIND_HYPOTHESIS, KIND_UNKNOWN, KIND_EVENT})
"""The kinds :func:`validate_base` has a rule of their own for."""

_KINDS_SEEN: dict[str, bool] = {}
"""Kinds already checked against :data:`_KIND` (a store sees a handful, over and over)."""
_KINDS_SEEN_MAX = 4096


def _valid_kind(kind: str) -> bool:
    ok = _KINDS_SEEN.get(kind)
    if ok is None:
        ok = _KIND.fullmatch(kind) is not None
        if len(_KINDS_SEEN) < _KINDS_SEEN_MAX:
            _KINDS_SEEN[kind] = ok
    return ok


@functools.lru_cache(maxsize=4096)
def _valid_event_date(event_date: str) -> bool:
    """:func:`~memstore.eventdate.valid_event_date`, remembered (dates recur across items)."""
    return valid_event_date(event_date)


def _size_rejection(item: Item) -> str:
    """Why a field other than title and content is too large, or holds invalid text.

    The common item takes a fast path: no references, links or data, and every
    text ASCII (``str.isascii`` is a flag CPython keeps, not a scan), with the
    subject and event date within their bounds and all the tags together
    within one tag's bound, is under every limit :func:`_size_rejection_slow`
    checks and holds no surrogate, so it returns ``""`` as that would. Anything
    else (or anything not exactly the declared types) is checked the slow way.
    """
    d = item.__dict__
    subject, event_date, tags = d["subject"], d["event_date"], d["tags"]
    sup, refs, links, data = d["supersedes"], d["evidence_refs"], d["links"], d["data"]
    id, kind, title, content = d["id"], d["kind"], d["title"], d["content"]
    if (
        not (sup or refs or links or data)
        and type(sup) is list
        and type(refs) is list
        and type(links) is list
        and type(data) is dict
        and type(tags) is list
        and type(subject) is str
        and type(event_date) is str
        and type(id) is str
        and type(kind) is str
        and type(title) is str
        and type(content) is str
        and len(subject) <= MAX_SUBJECT_CHARS
        and len(event_date) <= MAX_EVENT_DATE_CHARS
        and subject.isascii()
        and event_date.isascii()
        and id.isascii()
        and kind.isascii()
        and title.isascii()
        and content.isascii()
    ):
        try:
            joined = "".join(tags)  # each tag is at most as long as all of them
        except TypeError:  # not every tag a str: the slow way says what it says
            joined = None
        if joined is not None and len(joined) <= MAX_TAG_CHARS and joined.isascii():
            return ""
    return _size_rejection_slow(item)


def _size_rejection_slow(item: Item) -> str:
    """:func:`_size_rejection`, every bound and every text checked one by one."""
    if len(item.subject) > MAX_SUBJECT_CHARS:
        return f"subject is {len(item.subject)} characters; at most {MAX_SUBJECT_CHARS}"
    if len(item.event_date) > MAX_EVENT_DATE_CHARS:
        return f"event_date is {len(item.event_date)} characters; at most {MAX_EVENT_DATE_CHARS}"
    for tag in item.tags:
        if len(tag) > MAX_TAG_CHARS:
            return f"tag {tag[:40]!r}... is {len(tag)} characters; at most {MAX_TAG_CHARS}"
    refs = (("supersedes", item.supersedes), ("evidence_refs", item.evidence_refs))
    for name, entries in refs:
        if len(entries) > MAX_REFS:
            return f"{name} has {len(entries)} entries; at most {MAX_REFS}"
        for ref in entries:
            if len(ref) > MAX_REF_CHARS:
                return f"an entry of {name} is {len(ref)} characters; at most {MAX_REF_CHARS}"
    if len(item.links) > MAX_LINKS:
        return f"{len(item.links)} links; at most {MAX_LINKS}"
    data = item.data
    if len(data) > MAX_DATA_KEYS:
        return f"data has {len(data)} keys; at most {MAX_DATA_KEYS}"
    size = 0
    for key, value in data.items():
        if len(key) > MAX_DATA_KEY_CHARS:
            return f"a data key is {len(key)} characters; at most {MAX_DATA_KEY_CHARS}"
        size += len(key) + len(value)
    if size > MAX_DATA_CHARS:
        return f"data holds {size} characters; at most {MAX_DATA_CHARS}"
    return _surrogate_rejection(item)


def _surrogate_rejection(item: Item) -> str:
    """Which text of the item holds a lone surrogate (the journal could not encode it)."""
    fields = (item.id, item.kind, item.title, item.content, item.subject, item.event_date)
    if (
        all(map(str.isascii, fields))
        and not (item.supersedes or item.evidence_refs or item.links or item.data)
        and "".join(item.tags).isascii()
    ):
        return ""  # ASCII holds no surrogate: the common case, copying nothing large
    whole = "".join(
        [
            item.id,
            item.kind,
            item.title,
            item.content,
            item.subject,
            item.event_date,
            *item.tags,
            *item.supersedes,
            *item.evidence_refs,
            *(link.to_id for link in item.links),
            *item.data,
            *item.data.values(),
        ]
    )
    if not has_lone_surrogate(whole):  # one pass over all of it: the common case
        return ""
    for name in ("id", "kind", "title", "content", "subject", "event_date"):
        if has_lone_surrogate(getattr(item, name)):
            return f"{name} is not valid Unicode text (it holds a lone surrogate)"
    lists = (
        ("a tag", item.tags),
        ("an entry of supersedes", item.supersedes),
        ("an entry of evidence_refs", item.evidence_refs),
        ("a link target", [link.to_id for link in item.links]),
        ("a data key", list(item.data)),
        ("a data value", list(item.data.values())),
    )
    for name, texts in lists:
        for text in texts:
            if has_lone_surrogate(text):
                return f"{name} is not valid Unicode text (it holds a lone surrogate)"
    return ""


RETAINED_KINDS = frozenset(
    {KIND_HYPOTHESIS, KIND_UNKNOWN, KIND_STABLE_FACT, KIND_OPERATIONAL_PATTERN}
)
"""The kinds :func:`stamp_knowledge_retention` may give a deadline (others it leaves)."""


def stamp_knowledge_retention(
    item: Item,
    retention: Callable[[str], int] | None,
    now: _dt.datetime | None = None,
) -> None:
    """Stamp a computed ``stale_after`` onto an item that has none.

    A set deadline is never overwritten. ``stable_fact`` and
    ``operational_pattern`` get ``retention(partition)`` days (0 = no deadline),
    the partition read from the item's ``tenant/`` tag; a hypothesis or unknown
    gets the compiled default (a day, a week) instead of being refused by the
    base rules. Other kinds are untouched.
    """
    if item.stale_after is not None:
        return
    now = now or utc_now()
    if item.kind == KIND_HYPOTHESIS:
        item.stale_after = now + DEFAULT_HYPOTHESIS_STALE_AFTER
    elif item.kind == KIND_UNKNOWN:
        item.stale_after = now + DEFAULT_UNKNOWN_STALE_AFTER
    elif item.kind in (KIND_STABLE_FACT, KIND_OPERATIONAL_PATTERN) and retention is not None:
        partition = partition_from_tags(item.tags)
        days = retention(partition)
        if days > 0:
            try:
                item.stale_after = now + _dt.timedelta(days=days)
            except (OverflowError, TypeError):  # past year 9999, or no number of days
                raise MemstoreError(
                    f"Config.retention gave {days!r:.40} days for partition {partition!r:.80}: "
                    "no deadline can be that far"
                ) from None


def is_refuted(item: Item) -> bool:
    """Whether :meth:`Store.refute` has recorded a refutation on ``item``."""
    return REFUTED_DATA_KEY in item.data
