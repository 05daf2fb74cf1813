"""Where the tests find what scripts/toolchain.sh built: the cache, the binaries, the Go modules, and the pins."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("VLLM_PULUMI_CACHE", Path.home() / ".cache" / "vllm-pulumi"))
BINARIES = CACHE / "tools" / "bin"
VERSIONS_FILE = REPO / "scripts" / "toolchain.versions"


def pinned_versions() -> dict[str, str]:
    """scripts/toolchain.versions as a dict (the pins the binaries were built from and the CRDs read at)."""
    versions: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            versions[key.strip()] = value.strip()
    return versions


def module_dir(module: str, version: str) -> Path:
    """A module's extracted source in the toolchain's Go module cache (lower-case paths need no escaping)."""
    path = CACHE / "go" / "mod" / f"{module}@v{version}"
    if not path.is_dir():
        raise AssertionError(f"{module}@v{version} is not in {path.parent}: run scripts/toolchain.sh")
    return path
