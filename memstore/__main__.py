"""``python -m memstore``: the ``memstore`` command, for a venv whose scripts are not on PATH."""

import sys

from memstore.cli import main

sys.exit(main())
