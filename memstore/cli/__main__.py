"""``python -m memstore.cli``: the ``memstore`` command."""

import sys

from memstore.cli import main

sys.exit(main())
