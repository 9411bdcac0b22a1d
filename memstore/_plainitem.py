"""The common new item, recognised in one pass: typed and valid by every write rule.

A write checks its item three times over: :func:`~memstore.item.well_typed`
(every field exactly its declared type, before the item is copied),
:func:`~memstore.arguments.text_list` (its tags, as they are placed) and
:func:`~memstore.validate.validate_base` (every rule an item obeys, with
:func:`~memstore.validate._size_rejection`'s bounds). Each reads the fields
one by one, a few hundred interpreter steps an item between them, and most
items a batch writes are the same plain shape: ASCII text, no links,
references or data, no datetimes yet, public, a kind without rules of its
own, and a tag or two.

:func:`plain_item` recognises that shape in one pass over the fields (read
from the item's ``__dict__``; its tags read as one comma-joined string),
and answers ``True`` only when every one of those checks would pass, for
any stored item it replaces (the rules that look at the replaced item only
relax a rule for non-ASCII ids and for tags that are padded or hold control
characters, which this shape has none of). Anything else answers ``False``,
and the write checks it the way it always did: this only skips checks, it
never decides a refusal, so no message changes.
``tests/test_plain_item.py`` holds it to the three checks it stands for.

That one pass is still a few hundred interpreter steps (about 26k machine
instructions an item, a tenth of a durable ``add_many``'s), so where the
optional C extension is built, :func:`plain_check` hands the writers its
compiled twin (``memstore/_itemwrite.c``'s ``plain_item``, given :data:`_RULES`):
the same answer for every item, by the same tests, in about a twentieth of the
instructions. ``MEMSTORE_PURE_PYTHON=1`` (or
:func:`memstore._wordbatch.pure_python`) keeps the function here, the oracle
``tests/test_write_compiled.py`` holds the compiled one to.

A kind counts once a write has found it valid (the rules' own cache):

>>> from memstore.item import Item
>>> from memstore.validate import validate_base
>>> from memstore.vocabulary import Vocabulary
>>> note = Item(kind="plain_doc_note", title="Deploy moved", tags=["tenant/ops"])
>>> plain_item(note.__dict__)  # its kind not seen yet: checked the long way
False
>>> validate_base(Vocabulary(), note)
''
>>> plain_item(note.__dict__)
True
>>> plain_item(Item(kind="plain_doc_note", title="Café").__dict__)  # not ASCII
False
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from memstore import _wordbatch
from memstore.item import _CONFIDENCES, _ORIGINS, _STATUSES, SCOPE_PUBLIC
from memstore.limits import (
    MAX_CONTENT_CHARS,
    MAX_EVENT_DATE_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_SUBJECT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
)
from memstore.tags import PARTITION_TAG_PREFIX
from memstore.validate import _KINDS_SEEN, _KINDS_WITH_RULES, _NO_PARTITION_TAGS, _valid_event_date

__all__ = ["plain_check", "plain_item"]

_PARTITION_START: Final = "," + PARTITION_TAG_PREFIX


def plain_item(d: dict[str, Any]) -> bool:
    """Whether the item whose ``__dict__`` is ``d`` is of the common shape (see above).

    ``True`` promises: :func:`~memstore.item.well_typed` is true,
    ``validate_base`` finds nothing (whatever stored item it replaces), and
    ``text_list`` takes its tags as they are. ``False`` promises nothing.
    Written as plain comparisons: CPython specialises ``type(x) is str`` and
    a ``__dict__`` subscript into a few machine steps each, cheaper than any
    C-level ``map`` over the fields.
    """
    id, kind, title, content = d["id"], d["kind"], d["title"], d["content"]
    subject, event_date, tags = d["subject"], d["event_date"], d["tags"]
    scope, status, confidence, origin = d["scope"], d["status"], d["confidence"], d["origin"]
    links, supersedes, refs, data = d["links"], d["supersedes"], d["evidence_refs"], d["data"]
    if not (
        type(kind) is str
        and kind not in _KINDS_WITH_RULES  # first: the kinds with rules of their own are common
        and d["stale_after"] is None
        and type(id) is str
        and type(title) is str
        and type(content) is str
        and type(subject) is str
        and type(event_date) is str
        and type(scope) is str
        and type(status) is str
        and type(confidence) is str
        and type(origin) is str
        and type(tags) is list
        and type(links) is list
        and type(supersedes) is list
        and type(refs) is list
        and type(data) is dict
        and type(d["no_embed"]) is bool
        and type(d["links_set"]) is bool
        and d["created_at"] is None
        and d["updated_at"] is None
        and not (links or supersedes or refs or data)
        and scope == SCOPE_PUBLIC
        and status in _STATUSES
        and confidence in _CONFIDENCES
        and origin in _ORIGINS
        and _KINDS_SEEN.get(kind) is True  # a kind validate_base has found valid before
        and len(id) <= MAX_ID_CHARS
        and len(title) <= MAX_TITLE_CHARS
        and len(content) <= MAX_CONTENT_CHARS
        and len(subject) <= MAX_SUBJECT_CHARS
        and len(event_date) <= MAX_EVENT_DATE_CHARS
        and id.isascii()
        and title.isascii()
        and content.isascii()
        and subject.isascii()
        and event_date.isascii()
        and id.isprintable()
        and " " not in id
        and ((title and not title.isspace()) or (content and not content.isspace()))
        and (not event_date or _valid_event_date(event_date))
    ):
        return False
    return not tags or _plain_tags(tags)


def _plain_tags(tags: list[Any]) -> bool:
    """Whether a non-empty tags list passes every tag rule, read as one joined string.

    The tags joined by ``,`` (which no tag may hold) and wrapped in it: one
    comma more than there are tags means none inside a tag; printable ASCII
    means no control character (newlines, NUL), and leaves the space as the
    only whitespace, so a tag is empty or padded exactly when two commas, or
    a comma and a space, meet. The whole is within one tag's bound (as
    ``_size_rejection``'s fast path asks), and one partition tag at most, naming one.
    """
    if len(tags) > MAX_TAGS:
        return False
    for tag in tags:
        if type(tag) is not str:
            return False
    joined = ",".join(tags)
    wrapped = "," + joined + ","
    if not (
        len(joined) <= MAX_TAG_CHARS
        and joined.isascii()
        and joined.isprintable()
        and wrapped.count(",") == len(tags) + 1
        and ",," not in wrapped
        and ", " not in wrapped
        and " ," not in wrapped
    ):
        return False
    partitions = wrapped.count(_PARTITION_START)
    if partitions != 1:
        return partitions == 0
    start = wrapped.find(_PARTITION_START) + 1
    tag = wrapped[start : wrapped.find(",", start)]
    return (
        tag not in _NO_PARTITION_TAGS
        and len(tag) - len(PARTITION_TAG_PREFIX) <= MAX_NAME_CHARS
        and tag[len(PARTITION_TAG_PREFIX)] != " "
    )


_RULES: Final = (
    _KINDS_WITH_RULES,
    _KINDS_SEEN,
    _STATUSES,
    _CONFIDENCES,
    _ORIGINS,
    _NO_PARTITION_TAGS,
    PARTITION_TAG_PREFIX,
    _valid_event_date,
    SCOPE_PUBLIC,
    MAX_ID_CHARS,
    MAX_TITLE_CHARS,
    MAX_CONTENT_CHARS,
    MAX_SUBJECT_CHARS,
    MAX_EVENT_DATE_CHARS,
    MAX_TAGS,
    MAX_TAG_CHARS,
    MAX_NAME_CHARS,
)
"""What :func:`plain_item` reads besides the item, in the order the compiled twin takes it.

The sets are the very objects the rules keep (``_KINDS_SEEN`` fills as
kinds are found valid), so the twin sees what this module sees.
"""


def plain_check() -> Callable[[dict[str, Any]], bool]:
    """The recogniser to use now: the compiled :func:`plain_item` where built, else that one.

    Asked once per batch (a writer's loop calls what it gets for each
    entry): the compiled one is ``_speedups.plain_item`` with :data:`_RULES`
    bound, called without a Python frame.

    >>> from memstore.item import Item
    >>> check = plain_check()
    >>> check(Item(kind="plain_doc_note", title="Café").__dict__)  # not ASCII, either way
    False
    """
    fast = _wordbatch.speedups
    if fast is None:
        return plain_item
    compiled: Callable[[dict[str, Any]], bool] = partial(fast.plain_item, _RULES)
    return compiled
