"""An ops assistant that remembers incidents across restarts.

It records what it observes during an incident, keeps hypotheses apart from
facts, drops a hypothesis the evidence refuted (and what was built on it), and
answers "what do we know?" the next morning, after a restart.

    python examples/ops_assistant.py [FOLDER]
"""

from __future__ import annotations

import sys
import tempfile

from memstore import Memory


def night_shift(folder: str) -> None:
    with Memory(folder) as mem:
        outage = mem.add(
            "payment-api returned 502s for 40 minutes after the 02:10 deploy",
            kind="event",
            event_date="2025-03-05",
            origin="observed",
            partition="ops",
        )
        pool = mem.add(
            "the ledger database connection pool (max 20) ran dry during the outage",
            kind="event",
            event_date="2025-03-05",
            origin="observed",
            partition="ops",
        )
        guess = mem.add(
            "the 02:10 deploy introduced a connection leak",
            kind="hypothesis",
            confidence="medium",
            evidence_refs=[outage.id],
            partition="ops",
        )
        mem.add(
            "roll back deploys that touch the ledger client first",
            kind="operational_pattern",
            confidence="medium",
            evidence_refs=[guess.id],
            partition="ops",
        )
        mem.link(outage.id, pool.id, "caused_by", 0.9)
        # Later that night the leak theory is disproved: drop it and what rested on it.
        dropped = mem.refute(guess.id, "heap dumps show no leaked connections")
        print(f"refuted the leak theory; {len(dropped)} derived note(s) expired with it")
        mem.add(
            "the ledger pool is too small for peak traffic",
            kind="stable_fact",
            confidence="high",
            origin="verified",
            partition="ops",
        )


def morning(folder: str) -> None:
    with Memory(folder) as mem:  # a new process would do exactly this
        print("what do we know about the payment outage?")
        hits = mem.search("why did payments fail?", partition="ops", limit=3)
        for hit in hits:
            print(f"  [{hit.item.kind}] {hit.item.content}")
        _, related = mem.context(hits[0].item.id)  # what the top hit links to
        for r in related:
            print(f"  linked ({r.score:.2f}): {r.item.content}")


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="ops-memory-")
    night_shift(folder)
    morning(folder)
