"""Entry point of ``python -m runtime``."""

import sys

from .cli import main

sys.exit(main())
