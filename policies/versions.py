"""When the vLLM flags and metrics the rules rely on appeared or went away, and which vLLM a container runs, so that
findings and fixes fit the image's version (or say to upgrade first).

Each row names the vLLM pull requests it was read from. Metrics follow vLLM's deprecation policy: deprecated in X.Y,
hidden in X.Y+1 (``--show-hidden-metrics-for-version=X.Y`` brings them back), removed in X.Y+2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vllm_pulumi.runtime.spec.engine import DEFAULT_VLLM_VERSION, parse_version

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Change:
    added: Version | None
    """First release with it (None: older than anything the rules care about)."""
    removed: Version | None
    """First release without it (for metrics: the release that stopped exporting it by default, i.e. hid it)."""
    source: str
    """Where in vLLM's history this was read."""
    replaced_by: str = ""
    """For a metric gone by vLLM 0.33: what to query instead (the removed-vllm-metrics rule's fix)."""


FLAGS: dict[str, Change] = {
    "shutdown-timeout": Change((0, 18, 0), None, "vllm-project/vllm#34730, re-landed in #36666 (v0.18.0)"),
    "swap-space": Change(None, (0, 18, 0), "removed from EngineArgs by vllm-project/vllm#36216 (v0.18.0)"),
}
_METRICS_ADDED: dict[str, Change] = {
    "vllm:kv_cache_usage_perc": Change((0, 9, 2), None, "vllm-project/vllm#18354 (v0.9.2)"),
    "vllm:prefix_cache_queries": Change((0, 9, 2), None, "vllm-project/vllm#18354 (v0.9.2)"),
    "vllm:prefix_cache_hits": Change((0, 9, 2), None, "vllm-project/vllm#18354 (v0.9.2)"),
}
_METRICS_GONE: dict[tuple[Version, str], dict[str, str]] = {
    ((0, 11, 0), "deprecated by #18354, hidden in v0.11 by #24245, removed in v0.12 by #29330"): {
        "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc (0..1)",
    },
    ((0, 11, 0), "hidden in v0.11 by #24245, removed by #29330"): {
        "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
        "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    },
    ((0, 9, 0), "deprecated in v0.8 (#14136), hidden by #15458, removed by #18837"): {
        "vllm:num_requests_swapped": "nothing (no swapping in the V1 engine); use vllm:num_preemptions",
        "vllm:cpu_cache_usage_perc": "nothing (the V1 engine has no CPU swap space); drop the query",
    },
    ((0, 9, 0), "hidden by #15458, removed by #18837"): {
        "vllm:gpu_prefix_cache_hit_rate": "rate(vllm:prefix_cache_hits) / rate(vllm:prefix_cache_queries)",
    },
    ((0, 12, 0), "deprecated by #24110, hidden by #29330"): {
        "vllm:time_per_output_token_seconds": "vllm:request_time_per_output_token_seconds or "
                                              "vllm:inter_token_latency_seconds",
    },
}
"""Metrics vLLM stopped exporting, grouped by their history (the release that hid them, the pull requests it was
read from), each with what to query instead."""
METRICS: dict[str, Change] = {**_METRICS_ADDED, **{
    name: Change(None, removed, source, replaced_by=replacement)
    for (removed, source), replacements in _METRICS_GONE.items() for name, replacement in replacements.items()
}}
"""Every metric the rules know, in the order docs/policies.md lists them: those added, then those gone."""

ASSUMED_VERSION: Version = parse_version(DEFAULT_VLLM_VERSION)
"""What an image whose tag names no vLLM release is taken to run: the release the package pins."""
REMOVED_METRICS: dict[str, str] = {name: change.replaced_by for name, change in METRICS.items()
                                   if change.removed is not None and change.removed <= ASSUMED_VERSION}
"""Metrics the pinned vLLM (0.33) no longer exports, with what replaced them."""

# Repositories whose tags are vLLM release numbers: the project's vllm-openai image and rebuilds of it under that
# name (lmcache/vllm-openai). Other vllm-named images (vllm-tpu nightlies, in-house builds) carry their own numbers.
_VLLM_REPOSITORY = re.compile(r"(^|/)vllm-openai$")


@dataclass(frozen=True)
class ImageVersion:
    version: Version
    known: bool
    """False: the tag names no vLLM release (a custom image, a digest, ``latest``): ``version`` is assumed."""

    @property
    def text(self) -> str:
        return "v" + ".".join(str(part) for part in self.version)

    @property
    def note(self) -> str:
        """What a message adds when the version was assumed."""
        return "" if self.known else f" (image version unknown: assumed vLLM {self.text}, the pinned default)"


def image_version(image: object) -> ImageVersion:
    """The vLLM release of an image: the tag of a vllm-openai repository when it is a release
    number like v0.8.5; else the pinned default, marked as assumed."""
    if isinstance(image, str) and "@" not in image:
        last = image.rsplit("/", 1)[-1]
        if ":" in last:
            repository, tag = image.rsplit(":", 1)
            if _VLLM_REPOSITORY.search(repository.lower()):
                try:
                    return ImageVersion(parse_version(tag), True)
                except ValueError:
                    pass
    return ImageVersion(ASSUMED_VERSION, False)


def flag_missing_in(flag: str, version: Version) -> Change | None:
    """The table row when ``--flag`` does not exist in ``version``; None when it does (or the table does not say)."""
    change = FLAGS.get(flag)
    if change is None:
        return None
    if change.added is not None and version < change.added:
        return change
    if change.removed is not None and version >= change.removed:
        return change
    return None


def release(version: Version) -> str:
    return "v" + ".".join(str(part) for part in version)
