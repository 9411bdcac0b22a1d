"""AsyncMemory beyond parity of results (tests/test_memory.py runs every case both ways).

Cancellation, many tasks at once, a close while calls are in flight, use after
close: what asyncio adds to the synchronous :class:`Memory`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memstore import AsyncMemory, Config, InvalidItemError, Item, Memory, MemstoreError

HOLD_S = 0.3
"""How long a held write keeps its worker busy after it was cancelled."""


class HeldWrites:
    """A ``Config(before=...)`` hook that holds each write until released (or ``HOLD_S``)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.finished = threading.Event()
        self.release = threading.Event()

    def __call__(self, item: Item) -> None:
        self.entered.set()
        self.release.wait(HOLD_S)
        self.finished.set()


async def _cancel_when_entered(task: asyncio.Task[Any], hook: HeldWrites) -> bool:
    """Cancel ``task`` once its write runs; whether the write had finished when it raised."""
    while not hook.entered.is_set():
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return hook.finished.is_set()


@pytest.mark.parametrize(
    "write",
    [
        lambda m: m.add("a note written while the caller gives up", partition="p"),
        lambda m: m.add_many(["one of a batch", "another of the batch"], partition="p"),
    ],
    ids=["add", "add_many"],
)
def test_a_cancelled_write_has_settled_when_the_caller_sees_the_cancellation(
    tmp_path: Path, write: Any
) -> None:
    """Written entirely or not at all, and never landing after the CancelledError."""
    hook = HeldWrites()

    async def run() -> tuple[bool, int, int]:
        async with await AsyncMemory.open(
            tmp_path / "m", embedder=None, config=Config(before=hook)
        ) as mem:
            settled = await _cancel_when_entered(asyncio.ensure_future(write(mem)), hook)
            seen = len(await mem.recent(50, partition="p"))
            await asyncio.sleep(HOLD_S)  # had the write gone on in its thread, it lands now
            return settled, seen, len(await mem.recent(50, partition="p"))

    settled, seen, later = asyncio.run(run())
    assert settled, "CancelledError came back while the write still ran in its thread"
    assert seen == later and seen in (0, 1, 2)
    with Memory(tmp_path / "m", embedder=None) as again:  # and the journal agrees
        assert len(again.recent(50, partition="p")) == seen


def test_a_write_cancelled_before_its_thread_starts_never_runs(tmp_path: Path) -> None:
    blocker = threading.Event()

    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        async with await AsyncMemory.open(tmp_path / "m", embedder=None) as mem:
            busy = loop.run_in_executor(None, blocker.wait, 5.0)  # the only worker is taken
            queued = asyncio.ensure_future(mem.add("queued behind the busy worker"))
            await asyncio.sleep(0.05)
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            blocker.set()
            await busy
            await asyncio.sleep(0.05)
            return [it.content for it in await mem.recent(10)]

    assert asyncio.run(run()) == []


def test_a_cancelled_read_answers_at_once(tmp_path: Path) -> None:
    """Only writes wait to settle: a search the caller gave up on is not waited for."""
    hook = HeldWrites()

    async def run() -> float:
        async with await AsyncMemory.open(
            tmp_path / "m", embedder=None, config=Config(before=hook)
        ) as mem:
            writing = asyncio.ensure_future(mem.add("holds the store's lock"))
            while not hook.entered.is_set():
                await asyncio.sleep(0.005)
            reading = asyncio.ensure_future(mem.recent(5))  # waits for the lock
            await asyncio.sleep(0.02)
            started = time.monotonic()
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            took = time.monotonic() - started
            hook.release.set()
            await writing
            return took

    assert asyncio.run(run()) < HOLD_S / 2


def test_many_tasks_at_once_and_a_close_while_calls_are_in_flight(tmp_path: Path) -> None:
    """Every write that answered is in the journal; every one refused after close is not."""

    async def writer(mem: AsyncMemory, n: int) -> list[tuple[str, bool]]:
        """Writes until the memory refuses (it closed); each outcome with its text."""
        out: list[tuple[str, bool]] = []
        for i in itertools.count():
            text = f"writer {n} note {i} about topic {i % 5}"
            try:
                await mem.add(text, partition="p", dedup=False)
            except MemstoreError as e:
                assert "closed" in str(e)
                out.append((text, False))
                return out
            out.append((text, True))
        raise AssertionError("unreachable")

    async def reader(mem: AsyncMemory) -> int:
        done = 0
        try:
            while True:
                await mem.search("topic note", partition="p")
                await mem.recent(5, partition="p")
                done += 1
        except MemstoreError as e:
            assert "closed" in str(e)
        return done

    async def run() -> list[tuple[str, bool]]:
        mem = await AsyncMemory.open(tmp_path / "m", embedder="hash")
        writers = [asyncio.ensure_future(writer(mem, n)) for n in range(6)]
        readers = [asyncio.ensure_future(reader(mem)) for _ in range(4)]
        await asyncio.sleep(0.15)
        await mem.close()
        results = await asyncio.gather(*writers)
        assert all(n >= 0 for n in await asyncio.gather(*readers))
        with pytest.raises(MemstoreError, match="closed"):
            await mem.add("after close")
        with pytest.raises(MemstoreError, match="closed"):
            await mem.search("after close")
        with pytest.raises(MemstoreError, match="closed"):
            mem.subscribe()
        await mem.close()  # idempotent, as Memory.close is
        return [r for rs in results for r in rs]

    outcomes = asyncio.run(run())
    assert any(ok for _, ok in outcomes) and any(not ok for _, ok in outcomes)
    with Memory(tmp_path / "m", embedder=None) as again:
        kept = {it.content for it in again.recent(1000, partition="p")}
    assert kept == {text for text, ok in outcomes if ok}


def test_memory_keyword_is_refused_beside_other_arguments(tmp_path: Path) -> None:
    with Memory(embedder=None) as memory:
        with pytest.raises(MemstoreError, match="memory="):
            AsyncMemory(tmp_path / "ignored", memory=memory)
        with pytest.raises(MemstoreError, match="memory="):
            AsyncMemory(memory=memory, embedder="hash")
        assert AsyncMemory(memory=memory).memory is memory
    assert not (tmp_path / "ignored").exists()


def test_atomically_runs_a_plain_function_off_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncMemory.open(tmp_path, embedder=None) as mem:
            item = await mem.add("the pool holds 20")

            def bump() -> bool:
                current = mem.memory.get(item.id)
                assert current is not None
                mem.memory.update(item.id, content=current.content.replace("20", "40"))
                return True

            assert await mem.atomically(bump) is True
            assert (await mem.get(item.id)).content == "the pool holds 40"  # type: ignore[union-attr]

            async def coroutine() -> None:
                return None

            with pytest.raises(InvalidItemError, match="plain function"):
                await mem.atomically(coroutine)  # type: ignore[arg-type]

    asyncio.run(main())
