"""The ``memstore`` command: the engine from a shell, and its servers.

Every command works on a data folder (``--data``, default ``./data``), the
same one :class:`~memstore.memory.Memory` and the servers use. Exit status:
0 on success (a search or export that finds nothing included, with a note on
stderr), 1 when the thing asked for is not there or cannot be done now (no
journal, a destination already taken, a folder a server holds, an extra not
installed), 2 for a usage error (a flag or value that can never work: an
unknown kind, an export or backup into the folder it reads), 128 + N when
stopped by signal N (130 for Ctrl-C; what the command was writing is left as
it was); every error is one line on stderr that says what to do instead.

The command lives in one module per concern: :mod:`~memstore.cli.parser`
(the grammar), :mod:`~memstore.cli.records` (add, search, get, forget,
stats), :mod:`~memstore.cli.transfer` (export, import, backup),
:mod:`~memstore.cli.servers` (serve, mcp), and the running of one command
with its exit status and signals in ``_run``.
"""

from memstore.cli._run import main
from memstore.cli.parser import build_parser
from memstore.cli.transfer import BACKUP_HELP

__all__ = ["BACKUP_HELP", "build_parser", "main"]
