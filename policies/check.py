"""``python -m policies.check PATH...``: the offline checker's entry point (the work is in ``cli``)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
