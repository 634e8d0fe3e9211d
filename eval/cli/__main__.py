"""``python -m eval.cli``: the same as ``rwb``."""

import sys

from eval.cli import main

sys.exit(main())
