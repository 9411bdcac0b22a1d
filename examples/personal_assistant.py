"""A personal assistant with private memory per user.

Two users share one assistant. What they tell it about themselves is private
to each; what the household shares is visible to both. Restating a fact
updates it instead of piling up near-copies.

    python examples/personal_assistant.py [FOLDER]
"""

from __future__ import annotations

import sys
import tempfile

from memstore import Memory


def main(folder: str) -> None:
    with Memory(folder) as mem:
        # Household facts: visible to everyone in the "home" partition.
        mem.add("The family car is due for its service in June.", partition="home")
        # Private notes: each user's own.
        mem.add("My dentist appointment is Tuesday at 9.", private_to="ana", partition="home")
        mem.add("My dentist appointment is Friday at 4.", private_to="ben", partition="home")
        # Knowledge cells merge restatements instead of duplicating them.
        first = mem.add(
            "Ana prefers window seats on long flights and always books them early.",
            kind="stable_fact",
            confidence="high",
            partition="home",
        )
        again = mem.add(
            "Ana prefers window seats on long flights and always books them early!",
            kind="stable_fact",
            confidence="high",
            partition="home",
        )
        print("restatement merged:", again.id == first.id)

        for user in ("ana", "ben"):
            hits = mem.search("when is my dentist appointment?", partition="home", user=user)
            print(f"{user}: {hits[0].item.content}")
        print("without a user:", [h.item.content for h in mem.search("dentist", partition="home")])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="pa-memory-"))
