"""vLLM's KV-cache grouping, block and concurrency arithmetic (runtime.planning.kvcache), on hand-computed cases.

The same figures are compared with vLLM's own planner in tests/runtime/test_vllm_crosscheck.py."""

from __future__ import annotations

import math

import pytest

from vllm_pulumi.runtime.planning.kvcache import kv_cache_groups, layer_sliding_windows, plan_kv_cache
from vllm_pulumi.runtime.facts.models import catalog_model

PAGE = 16 * 4096  # any page size: every layer of a model shares it


def _windows(catalog_id: str) -> tuple[int | None, ...]:
    model = catalog_model(catalog_id)
    return layer_sliding_windows(model.layer_types, model.num_hidden_layers, model.sliding_window)


@pytest.mark.parametrize(
    ("case", "windows", "group_sizes"),
    [
        ("full attention everywhere: one group", (None,) * 32, [(None, 32)]),
        ("a window on every layer (Mistral v0.1 style): one group", (4096,) * 32, [(4096, 32)]),
        ("gpt-oss 1:1 alternation: a group per type", _windows("gpt-oss-20b"), [(128, 12), (None, 12)]),
        ("Gemma 3 5:1, 52 window and 10 full layers: the window layers split into 6 groups of at most 10",
         _windows("gemma-3-27b"), [(1024, 9)] * 4 + [(1024, 8)] * 2 + [(None, 10)]),
        ("12 window and 13 full layers (under 1.5x): padded to groups of 13, not 12",
         (7,) * 12 + (None,) * 13, [(7, 12), (None, 13)]),
        ("4 window and 8 full layers (2x): groups of 4", (7,) * 4 + (None,) * 8, [(7, 4), (None, 4), (None, 4)]),
    ],
)
def test_layers_are_grouped_like_vllm(case: str, windows: tuple[int | None, ...],
                                      group_sizes: list[tuple[int | None, int]]) -> None:
    groups = kv_cache_groups(windows)
    assert [(group.sliding_window_tokens, len(group.layers)) for group in groups] == group_sizes, case
    assert sorted(layer for group in groups for layer in group.layers) == list(range(len(windows)))


def test_a_bucket_is_split_round_robin_so_pipeline_stages_share_groups() -> None:
    groups = kv_cache_groups((9,) * 4 + (None,) * 2)
    assert [group.layers for group in groups] == [(0, 2), (1, 3), (4, 5)]


@pytest.mark.parametrize(
    ("case", "layer_types", "window", "hybrid", "expected"),
    [
        ("no window: full attention", ("sliding_attention", "full_attention"), None, True, (None, None)),
        ("layer types pick the window layers", ("sliding_attention", "full_attention"), 128, True, (128, None)),
        ("no layer types with a window: every layer", (), 4096, True, (4096, 4096)),
        ("chunked local attention is allocated as full attention", ("chunked_attention", "full_attention"), 8192,
         True, (None, None)),
        ("hybrid manager off: window layers allocated as full", ("sliding_attention", "full_attention"), 128, False,
         (None, None)),
        ("hybrid manager off, all windows: stays one window group", (), 4096, False, (4096, 4096)),
    ],
)
def test_layer_windows(case: str, layer_types: tuple[str, ...], window: int | None, hybrid: bool,
                       expected: tuple[int | None, ...]) -> None:
    assert layer_sliding_windows(layer_types, 2, window, hybrid_kv_cache_manager=hybrid) == expected, case


def test_full_attention_tokens_are_concurrency_times_max_model_len() -> None:
    """vLLM logs int(num_blocks / cdiv(max_model_len, 16) x max_model_len): with max_model_len not a multiple of
    16 that is fewer than num_blocks x 16."""
    capacity = plan_kv_cache((None,) * 2, [2], PAGE, 2 * PAGE * 1000, 1000, 2048, block_size=16,
                             max_concurrent_batches=2)
    assert capacity.num_blocks == 1000 and capacity.blocks_per_request == 63
    assert capacity.max_concurrency == 1000 / 63
    assert capacity.kv_cache_tokens == int(1000 / 63 * 1000) == 15873 < 1000 * 16


def test_window_pages_cover_window_and_in_flight_tokens_plus_a_straddling_page() -> None:
    capacity = plan_kv_cache((128, None), [2], PAGE, PAGE * 10_000, 32768, 8192, block_size=16,
                             max_concurrent_batches=2)
    window_pages = math.ceil((127 + 2 * 8192) / 16) + 1
    assert capacity.max_in_flight_tokens == 16384
    assert capacity.blocks_per_request == 2048 + window_pages
    assert capacity.num_blocks == 10_000


def test_window_pages_never_exceed_max_model_len_plus_one() -> None:
    capacity = plan_kv_cache((4096,), [1], PAGE, PAGE * 100, 1000, 8192, block_size=16, max_concurrent_batches=2)
    assert capacity.blocks_per_request == math.ceil(1000 / 16) + 1


def test_the_stage_holding_most_layers_of_one_group_sets_the_block_size() -> None:
    # Stages of 4 and 2 layers: each group has 2 layers on stage 0 and 1 on stage 1; every stage gets the fewest blocks.
    windows = (8, None, 8, None, 8, None)
    capacity = plan_kv_cache(windows, [4, 2], PAGE, PAGE * 100, 64, 16, block_size=16, max_concurrent_batches=3)
    assert capacity.bytes_per_block_by_stage == (2 * PAGE, PAGE)
    assert capacity.num_blocks == 50


@pytest.mark.parametrize(
    ("case", "spare_blocks", "fits"),
    [("one request plus the null block", 1, True), ("one request, no room for the null block", 0, False)],
)
def test_start_up_check_keeps_the_null_block(case: str, spare_blocks: int, fits: bool) -> None:
    per_request = math.ceil(4096 / 16)
    capacity = plan_kv_cache((None,), [1], PAGE, PAGE * (per_request + spare_blocks), 4096, 2048, block_size=16,
                             max_concurrent_batches=2)
    assert capacity.fits is fits, case


def test_estimated_max_model_len_is_the_longest_that_passes_the_check() -> None:
    capacity = plan_kv_cache((None,), [1], PAGE, PAGE * 101, 4096, 2048, block_size=16, max_concurrent_batches=2)
    assert not capacity.fits and capacity.estimated_max_model_len == 100 * 16


def test_no_memory_means_nothing_fits() -> None:
    capacity = plan_kv_cache((None,), [1], PAGE, 0, 4096, 2048, block_size=16, max_concurrent_batches=2)
    assert (capacity.num_blocks, capacity.kv_cache_tokens, capacity.fits, capacity.estimated_max_model_len) == \
        (0, 0, False, 0)
