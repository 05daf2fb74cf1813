"""The offline checker's entry points: the ``vllm-pulumi-check`` command, ``python -m vllm_pulumi.policies.check``
and, in a checkout, ``python -m policies.check`` (the work is in ``cli``)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from vllm_pulumi.policies.cli import MODULE_PROG, main

COMMAND = "vllm-pulumi-check"
"""The console script's name: beside ``vllm-pulumi-plan``, the package's other command."""


def exit_after(code: int) -> NoReturn:
    """Exit without tearing the interpreter down: freeing the parsed YAML object by object would add a fifth to a
    large run, and there is nothing left to clean up (output flushed, no files open for writing)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def command() -> NoReturn:
    """The ``vllm-pulumi-check`` console script (pyproject ``[project.scripts]``)."""
    exit_after(main(prog=COMMAND))


if __name__ == "__main__":
    exit_after(main(prog=MODULE_PROG))
