"""``AbandonableCalls``: a call's result or exception as usual; ``close()`` frees its waiters.

The point of it is the last test: a process whose worker thread waits on a
call that never returns still exits once the calls are closed, where a
thread blocked in the call itself would hold interpreter exit forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memstore_index._abandon import AbandonableCalls, CallAbandoned

ROOT = Path(__file__).resolve().parents[1]


def _wait_for_waiters(calls: AbandonableCalls, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(calls._waiting) < n:
        assert time.monotonic() < deadline, "the callers never started waiting"
        time.sleep(0.005)


def test_results_and_exceptions_reach_the_caller() -> None:
    calls = AbandonableCalls()
    assert calls.run(lambda: threading.current_thread().daemon) is True
    with pytest.raises(KeyError, match="missing"):
        calls.run(lambda: {}["missing"])
    with ThreadPoolExecutor(8) as pool:  # concurrent callers each get their own answer
        answers = list(pool.map(lambda n: calls.run(lambda: n * n), range(200)))
    assert answers == [n * n for n in range(200)]
    assert calls._waiting == set()


def test_close_releases_every_waiting_caller_and_refuses_new_calls() -> None:
    calls = AbandonableCalls()
    never = threading.Event()
    ran: list[int] = []
    outcomes: list[BaseException] = []

    def caller() -> None:
        try:
            calls.run(never.wait)
        except CallAbandoned as e:
            outcomes.append(e)

    callers = [threading.Thread(target=caller) for _ in range(3)]
    for t in callers:
        t.start()
    _wait_for_waiters(calls, 3)
    calls.close()
    for t in callers:
        t.join(30)
        assert not t.is_alive(), "close() left a caller waiting"
    assert [str(e) for e in outcomes] == ["closed while the call was running"] * 3
    with pytest.raises(CallAbandoned, match="closed"):
        calls.run(lambda: ran.append(1))
    assert ran == [] and calls.closed
    calls.close()  # idempotent
    never.set()  # the abandoned daemon threads end


def test_a_process_waiting_on_a_call_that_never_returns_exits_once_closed() -> None:
    script = textwrap.dedent(
        """
        import threading, time
        from memstore_index._abandon import AbandonableCalls, CallAbandoned

        calls = AbandonableCalls()
        def worker():  # a server's worker thread: non-daemon, so exit joins it
            try:
                calls.run(threading.Event().wait)  # a provider that never answers
            except CallAbandoned:
                print("released", flush=True)
        threading.Thread(target=worker).start()
        while not calls._waiting:
            time.sleep(0.005)
        calls.close()
        """
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "released\n"
    assert time.monotonic() - started < 30  # a blocked non-daemon thread never lets it exit
