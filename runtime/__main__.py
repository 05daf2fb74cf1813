"""Entry point of ``python -m runtime``."""

import sys

from vllm_pulumi.runtime.cli import main

sys.exit(main())
