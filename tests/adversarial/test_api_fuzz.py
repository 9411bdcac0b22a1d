"""Every public method of ``Memory`` and ``AsyncMemory``, driven with arbitrary values.

The contract under test: a call either succeeds or raises a
:class:`~memstore.errors.MemstoreError`, and a call that raised changed
nothing (the same export, the same items). The arguments are drawn per
parameter from the method's own signature, so a method added later is driven
too: plausible values (a known id, a small text, a file) mixed with wild ones
(ints, floats with nan and inf, ``None``, bytes, lists, dicts, strings with a
lone surrogate, a 10 MB string). Kept small (a few dozen examples per method,
no embedder model, one memory per method) so the suite stays quick.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import AsyncMemory, Item, Memory
from memstore.errors import MemstoreError
from tests.journals import memory_state

LONE = "caf\udce9"
HUGE = "x" * 10_000_001
SEEDED = ("alpha", "beta", "fact")
OMIT = object()
"""Marks an optional parameter left out of a call."""

METHODS = sorted(
    name
    for name, fn in inspect.getmembers(Memory, inspect.isfunction)
    if not name.startswith("_") and name != "close"
)
FIELDS = sorted(Item.model_fields)

WILD: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from([LONE, HUGE, "", "  ", "*", "a,b", "line\nbreak", "abc"]),
    st.binary(max_size=8),
    st.lists(st.one_of(st.integers(), st.text(max_size=6), st.just(LONE)), max_size=3),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=6)), max_size=2),
    st.builds(dt.datetime.now),  # naive
)

ids = st.sampled_from([*SEEDED, "missing"])
texts = st.text(min_size=1, max_size=20)
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "id": ids,
    "old_id": ids,
    "from_id": ids,
    "to_id": ids,
    "text_or_item": st.one_of(texts, st.builds(Item, kind=st.just("note"), title=texts)),
    "query": texts,
    "anchor": st.one_of(ids, texts),
    "reason": texts,
    "evidence": st.lists(texts, max_size=2),
    "items": st.lists(st.one_of(texts, st.fixed_dictionaries({"text": texts})), max_size=3),
    "ids": st.lists(ids, max_size=2),
    "limit": st.one_of(st.integers(1, 20), st.integers(-2, 1_100)),
    "max_depth": st.one_of(st.integers(1, 4), st.integers(-1, 10)),
    "explain": st.booleans(),
    "dedup": st.booleans(),
    "progress": st.just(False),
    "apply": st.booleans(),
    "weight": st.one_of(st.floats(0.1, 1.0), st.floats(-0.5, 1.5)),
    "relation": st.sampled_from(["explains", "triggers", "unknown_relation"]),
    "partition": st.sampled_from([None, "acme", "*", "shared"]),
    "private_to": st.sampled_from([None, "u1"]),
    "user": st.sampled_from([None, "u1"]),
    "kind": st.sampled_from(["", "note", "stable_fact"]),
    "subject": st.sampled_from(["", "billing"]),
    "when": st.one_of(
        st.datetimes(timezones=st.just(dt.UTC)), st.sampled_from(["0.0", "99999999999999.0"])
    ),
    "fp": st.builds(io.StringIO),
}


PLAUSIBLE_FIELDS = st.sampled_from([{}, {"subject": "billing"}, {"tags": ["x"]}, {"kind": "note"}])


@st.composite
def calls(draw: st.DrawFn, name: str, export: str = "") -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments for ``Memory.<name>``, one per parameter.

    A call is all plausible, plausible but for one wild argument, or all wild:
    so each argument is also tried wild beside valid ones, and successes run
    too. ``export`` is a valid export text, for ``import_``'s file.
    """
    params = list(inspect.signature(getattr(Memory, name)).parameters.values())[1:]
    mode = draw(st.sampled_from(["plausible", "one", "wild"]))
    wild_at = draw(st.integers(0, max(len(params) - 1, 0))) if mode == "one" else -1
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, p in enumerate(params):
        wild = mode == "wild" or i == wild_at
        if p.kind is p.VAR_KEYWORD:
            keys = st.sampled_from([*FIELDS, "partition", "private_to", "bogus"])
            wild_fields = st.dictionaries(keys, WILD, max_size=2)
            kwargs.update(draw(wild_fields if wild else PLAUSIBLE_FIELDS))
            continue
        if p.name == "fp" and name == "import_":
            plausible: st.SearchStrategy[Any] = st.builds(io.StringIO, st.just(export))
        else:
            plausible = PLAUSIBLE.get(p.name, WILD)
        strategy = WILD if wild else plausible
        if p.default is not p.empty and not wild:
            strategy = st.one_of(st.just(OMIT), strategy)
        value = draw(strategy)
        if value is OMIT:
            continue
        if p.default is p.empty or p.kind is p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return args, kwargs


def _seed(mem: Memory) -> None:
    mem.add("alpha note about the billing service", id="alpha", partition="acme")
    mem.add("beta note about the deploy", id="beta")
    mem.add("the user prefers tea", id="fact", kind="stable_fact", confidence="high")
    mem.link("alpha", "beta", "explains")


def _check(mem: Memory, call: Callable[[], Any]) -> None:
    before = memory_state(mem)
    try:
        call()
    except MemstoreError:
        assert memory_state(mem) == before, "a call that raised changed the memory"


FUZZ = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "mem", embedder="hash") as mem:
        _seed(mem)
        yield mem


def test_every_public_method_is_driven() -> None:
    assert {"add", "add_many", "search", "recent", "get", "update", "import_"} <= set(METHODS)
    missing = [m for m in METHODS if not callable(getattr(AsyncMemory, m, None))]
    assert missing == []  # AsyncMemory has every method, by delegation


@pytest.mark.parametrize("name", METHODS)
def test_memory_method(name: str, memory: Memory) -> None:
    method = getattr(memory, name)

    @FUZZ
    @given(call=calls(name, memory_state(memory)[0]))
    def run(call: tuple[list[Any], dict[str, Any]]) -> None:
        args, kwargs = call
        _check(memory, lambda: method(*args, **kwargs))

    run()


@pytest.mark.parametrize("name", METHODS)
def test_async_memory_method(name: str, memory: Memory) -> None:
    amem = AsyncMemory(memory=memory)
    loop = asyncio.new_event_loop()

    def invoke(args: list[Any], kwargs: dict[str, Any]) -> Any:
        out = getattr(amem, name)(*args, **kwargs)
        return loop.run_until_complete(out) if inspect.isawaitable(out) else out

    @settings(FUZZ, max_examples=8)
    @given(call=calls(name, memory_state(memory)[0]))
    def run(call: tuple[list[Any], dict[str, Any]]) -> None:
        args, kwargs = call
        _check(memory, lambda: invoke(args, kwargs))

    try:
        run()
    finally:
        loop.close()


OPTIONS = st.dictionaries(
    st.sampled_from(["embedder", "journal", "config", "search", "hub"]),
    WILD.filter(lambda v: v != "auto"),  # "auto" may warn that no model is installed
    max_size=3,
)


@FUZZ
@given(options=OPTIONS)
def test_opening_with_arbitrary_options(options: dict[str, Any]) -> None:
    try:
        mem = Memory(None, **options)
    except MemstoreError:
        return
    mem.close()
