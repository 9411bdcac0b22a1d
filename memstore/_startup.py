"""Ctrl-C while the ``memstore`` command is still starting: one line, exit 130.

The command's own handling of Ctrl-C (``memstore.cli._run.main``) starts only
once the package is imported, and importing it (numpy, pydantic, the engine)
takes a second or more. A SIGINT in that second used to print a Python
traceback from deep inside an import. Importing this module first thing in
``memstore/__init__.py`` closes the gap: when the process is the command
(``memstore ...``, ``python -m memstore ...`` or ``python -m memstore.cli ...``)
it installs a handler that prints ``memstore: stopped by SIGINT`` and exits 130,
as the command does later; ``main`` hands SIGINT back to Python's own handler
(:func:`take_back_sigint`) inside the ``try`` that reports it, and ignores it
once the command has finished (:func:`ignore_sigint_when_done`).

Nothing is written while the command starts, so leaving at once loses nothing.
A program that merely imports memstore is left alone: its signal handlers are
its own.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

#: The names under which ``python -m`` runs the command.
COMMAND_MODULES = frozenset(
    {"memstore", "memstore.__main__", "memstore.cli", "memstore.cli.__main__"}
)


def _stopped_while_starting(signum: int, frame: FrameType | None) -> None:
    """Leave as the command does when stopped: one line on stderr, 128 + SIGINT."""
    # os.write, not print: the signal may land inside a write to sys.stderr.
    os.write(2, b"memstore: stopped by SIGINT\n")
    os._exit(128 + signal.SIGINT)


def started_as_command() -> bool:
    """Whether this process is the ``memstore`` command (console script or ``python -m``).

    While ``python -m NAME`` imports NAME's package, ``sys.argv[0]`` is ``"-m"``
    and ``NAME`` is the word of ``sys.orig_argv`` just before the command's own
    arguments (``-mNAME`` when written as one word).
    """
    argv = sys.argv
    if not argv:
        return False
    if argv[0] == "-m":
        original = sys.orig_argv
        if len(original) < len(argv):
            return False
        word = original[len(original) - len(argv)]
        name = word.partition("m")[2] if word.startswith("-") else word
        return name in COMMAND_MODULES
    return os.path.basename(argv[0]) in ("memstore", "memstore.exe", "memstore-script.py")


#: Whether this process is the command and :func:`guard_startup` guarded it.
_guarded = False


def guard_startup() -> None:
    """In the command's process, make Ctrl-C during start-up end it as it ends later."""
    if (
        not started_as_command()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        return
    global _guarded
    try:
        signal.signal(signal.SIGINT, _stopped_while_starting)
    except ValueError:  # not the main thread: not the command starting
        return
    _guarded = True


def take_back_sigint() -> None:
    """Give SIGINT back to Python (KeyboardInterrupt), once the command can report it."""
    if signal.getsignal(signal.SIGINT) is _stopped_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def ignore_sigint_when_done() -> None:
    """The command has finished and said so: a late Ctrl-C leaves its exit status alone.

    Without this, Ctrl-C while the interpreter shuts down would kill the process
    by SIGINT after it printed its answer. Only in the command's own process.
    """
    if _guarded:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


guard_startup()
