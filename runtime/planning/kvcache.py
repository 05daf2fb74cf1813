"""KV-cache groups, blocks, "GPU KV cache size" and "Maximum concurrency", computed the way vLLM 0.33's v1 engine does.

vLLM's engine core asks every worker for one KV-cache spec per attention layer, groups the layers of the whole model,
turns each worker's free memory into a number of blocks and logs two figures::

    GPU KV cache size: <tokens> tokens, Maximum concurrency for <max_model_len> tokens per request: <x>x

The facts of that arithmetic (vllm/v1/core/kv_cache_planning.py, kv_cache_utils.py, kv_cache_interface.py), as this
module applies them to the models the planner describes:

* Spec per layer. A full-attention layer (MHA/GQA/MQA, or MLA's single latent) needs ``cdiv(max_model_len,
  block_size)`` pages per request. A sliding-window layer keeps only the last ``window - 1`` tokens plus the tokens
  still in flight (``max_in_flight_tokens``: one ``max_num_batched_tokens`` batch per concurrently scheduled step),
  never more than ``max_model_len``, plus one page because the window need not start on a page boundary. Every
  layer of the models here has the same page size (one head size, one KV-head count), so pages are interchangeable.
* Groups. When all layers share one spec they form one group. Otherwise layers are bucketed by spec (in the order
  the model first uses each), and every bucket is cut into groups of ``group_size`` layers, layer ``i`` of a bucket
  going to group ``i mod n``: ``group_size`` is the smallest bucket's layer count, or the largest bucket's when that is
  under 1.5 times the smallest (less padding). A group's page holds one page of each of its layers, so one block of
  the shared pool costs ``page x (layers of the widest group on this worker)``.
* Blocks. Each worker (pipeline stage) gets ``available_memory // bytes_per_block`` blocks and every worker then uses
  the smallest count. A request at ``max_model_len`` takes, from each group, the pages its spec needs; the scheduler's
  groups are the whole model's, so ``concurrency = num_blocks / sum(pages per group)`` and the logged size is
  ``int(concurrency x max_model_len)`` tokens.
* Start-up check. vLLM refuses to start when one request at ``max_model_len`` needs more than the available memory
  minus the one block the pool holds back (the null block), and then suggests the longest ``max_model_len`` that
  would fit (a binary search over the same formula).

Hybrid KV-cache manager: on by default with CUDA. With ``--disable-hybrid-kv-cache-manager`` (or chunked local
attention, which vLLM switches it off for) sliding-window layers are allocated as full attention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Attention-type names of config.json ``layer_types`` that vLLM's models build as sliding-window layers.
SLIDING_LAYER_TYPES = frozenset({"sliding_attention", "sliding_window", "local"})
# Steps scheduled before the previous one settled: vLLM 0.33 on CUDA defaults to async scheduling with model runner
# V2, which keeps pipeline_parallel_size + 1 batches in flight (pipeline_parallel_size without async scheduling).
ASYNC_SCHEDULING_EXTRA_BATCHES = 1
# A group may be padded up to the largest bucket when that bucket has under this many times the smallest's layers.
_GROUP_SIZE_SLACK = 1.5


@dataclass(frozen=True)
class KvCacheGroup:
    """Layers (model-wide indices) that share one block table; ``sliding_window_tokens`` None is full attention."""

    sliding_window_tokens: int | None
    layers: tuple[int, ...]

    def pages_per_request(self, max_model_len: int, block_size: int, max_in_flight_tokens: int) -> int:
        if self.sliding_window_tokens is None:
            return math.ceil(max_model_len / block_size)
        held = min(self.sliding_window_tokens - 1 + max_in_flight_tokens, max_model_len)
        return math.ceil(held / block_size) + 1


@dataclass(frozen=True)
class KvCacheCapacity:
    """What vLLM's KV-cache planner would allocate and log for one replica."""

    groups: tuple[KvCacheGroup, ...]
    bytes_per_block_by_stage: tuple[int, ...]
    num_blocks: int
    blocks_per_request: int
    max_in_flight_tokens: int
    max_concurrency: float
    """vLLM's "Maximum concurrency for max_model_len tokens per request" (unrounded)."""
    kv_cache_tokens: int
    """vLLM's "GPU KV cache size: N tokens"."""
    fits: bool
    """vLLM's start-up check: one max_model_len request fits next to the null block on every worker."""
    estimated_max_model_len: int
    """Longest max_model_len that passes the start-up check (vLLM's suggestion), at most ``search_limit``."""


def layer_sliding_windows(layer_types: Sequence[str], num_layers: int, sliding_window: int | None,
                          *, hybrid_kv_cache_manager: bool = True) -> tuple[int | None, ...]:
    """Per layer, the sliding window vLLM gives its KV-cache spec (None: full attention).

    ``layer_types`` empty means uniform: sliding everywhere when the config sets a window (Mistral v0.1 style, which
    vLLM applies through CacheConfig.sliding_window), else full attention."""
    if not sliding_window:
        return (None,) * num_layers
    kinds = tuple(layer_types) or ("sliding_attention",) * num_layers
    windows = tuple(sliding_window if kind in SLIDING_LAYER_TYPES else None for kind in kinds)
    if not hybrid_kv_cache_manager and len(set(windows)) > 1:
        # Without the hybrid manager vLLM promotes sliding-window layers to full attention for allocation.
        return (None,) * num_layers
    return windows


def kv_cache_groups(windows: Sequence[int | None]) -> tuple[KvCacheGroup, ...]:
    """Group layers the way vLLM's engine core does for one page size (see the module docstring)."""
    if not windows:
        return ()
    buckets: dict[int | None, list[int]] = {}
    for index, window in enumerate(windows):
        buckets.setdefault(window, []).append(index)
    if len(buckets) == 1:
        window, layers = next(iter(buckets.items()))
        return (KvCacheGroup(window, tuple(layers)),)
    smallest = min(len(layers) for layers in buckets.values())
    largest = max(len(layers) for layers in buckets.values())
    group_size = largest if largest < smallest * _GROUP_SIZE_SLACK else smallest
    groups: list[KvCacheGroup] = []
    for window, layers in buckets.items():
        count = math.ceil(len(layers) / group_size)
        groups.extend(KvCacheGroup(window, tuple(layers[i::count])) for i in range(count))
    return tuple(groups)


def plan_kv_cache(
    windows: Sequence[int | None],
    stage_layer_counts: Sequence[int],
    page_bytes: int,
    available_bytes: int,
    max_model_len: int,
    max_num_batched_tokens: int,
    *,
    block_size: int,
    max_concurrent_batches: int,
    search_limit: int | None = None,
) -> KvCacheCapacity:
    """Blocks, concurrency and token capacity for a model whose layers have the given sliding windows, split into
    pipeline stages of ``stage_layer_counts`` layers, with ``available_bytes`` of KV memory on every GPU and
    ``page_bytes`` per layer page (one block of one layer on one tensor-parallel rank)."""
    groups = kv_cache_groups(windows)
    in_flight = max_concurrent_batches * max_num_batched_tokens
    stages = []
    first = 0
    for count in stage_layer_counts:
        stages.append(range(first, first + count))
        first += count
    bytes_per_block = tuple(
        page_bytes * max(sum(1 for layer in group.layers if layer in stage) for group in groups) for stage in stages
    )

    def pages(model_len: int) -> int:
        return sum(group.pages_per_request(model_len, block_size, in_flight) for group in groups)

    def fits(model_len: int) -> bool:
        return all(0 < available_bytes - block_bytes and block_bytes * pages(model_len) <= available_bytes - block_bytes
                   for block_bytes in bytes_per_block)

    num_blocks = min(max(0, available_bytes) // block_bytes for block_bytes in bytes_per_block)
    per_request = pages(max_model_len)
    concurrency = num_blocks / per_request
    limit = max(search_limit or max_model_len, 1)
    estimate = 0
    if fits(1):
        low, high = 1, limit
        while low <= high:
            middle = (low + high) // 2
            if fits(middle):
                estimate, low = middle, middle + 1
            else:
                high = middle - 1
    return KvCacheCapacity(
        groups=groups,
        bytes_per_block_by_stage=bytes_per_block,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_in_flight_tokens=in_flight,
        max_concurrency=concurrency,
        kv_cache_tokens=int(concurrency * max_model_len),
        fits=fits(max_model_len),
        estimated_max_model_len=estimate,
    )
