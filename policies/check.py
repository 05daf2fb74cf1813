"""``python -m policies.check PATH...``: the offline checker's entry point (the work is in ``cli``)."""

from __future__ import annotations

import os
import sys

from .cli import main

if __name__ == "__main__":
    code = main()
    # Exit without tearing the interpreter down: freeing the parsed YAML object by object would add a fifth to a
    # large run, and there is nothing left to clean up (output flushed, no files open for writing).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
