"""Which vLLM an image runs, and what that release has (policies.versions)."""

from __future__ import annotations

import pytest

from vllm_pulumi.policies.versions import (
    ASSUMED_VERSION,
    FLAGS,
    METRICS,
    REMOVED_METRICS,
    flag_missing_in,
    image_version,
)


@pytest.mark.parametrize(("image", "version", "known"), [
    ("vllm/vllm-openai:v0.8.5", (0, 8, 5), True),
    ("docker.io/vllm/vllm-openai:v0.10.0", (0, 10, 0), True),
    ("vllm/vllm-openai:0.33.0", (0, 33, 0), True),
    ("lmcache/vllm-openai:v0.9.2", (0, 9, 2), True),
    ("vllm/vllm-tpu:latest", ASSUMED_VERSION, False),
    ("vllm/vllm-openai@sha256:" + "a" * 64, ASSUMED_VERSION, False),
    ("registry.example.com/team/vllm-server:0.4.1", ASSUMED_VERSION, False),
    ("ubuntu:22.04", ASSUMED_VERSION, False),
])
def test_image_version(image: str, version: tuple[int, int, int], known: bool) -> None:
    found = image_version(image)
    assert (found.version, found.known) == (version, known)
    assert bool(found.note) != known


@pytest.mark.parametrize(("version", "missing"), [((0, 8, 5), True), ((0, 17, 1), True), ((0, 18, 0), False),
                                                  ((0, 33, 0), False)])
def test_shutdown_timeout_exists_from_v0_18(version: tuple[int, int, int], missing: bool) -> None:
    assert (flag_missing_in("shutdown-timeout", version) is not None) == missing


def test_every_row_cites_vllm_history() -> None:
    for name, change in {**FLAGS, **METRICS}.items():
        assert "#" in change.source, name
        assert change.added is not None or change.removed is not None, name


def test_every_metric_gone_by_the_pinned_release_names_its_replacement() -> None:
    gone = {name for name, change in METRICS.items() if change.removed is not None and change.removed <= ASSUMED_VERSION}
    assert set(REMOVED_METRICS) == gone
    assert all(REMOVED_METRICS.values())
