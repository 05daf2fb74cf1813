"""CPU, memory, /dev/shm and node disk of a serving pod: derived from its GPUs unless the stack sets them.

GPUs come from the parallel layout (runtime/planning/parallelism.py), never from here. Memory requests include
/dev/shm, since a memory-backed emptyDir is charged to the pod's memory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec, StorageSpec

# /dev/shm: vLLM's engine-core IPC needs ~1 GiB; NCCL's shared-memory transport adds buffers per peer GPU.
SHM_BASE_GIB = 1
SHM_PER_EXTRA_GPU_GIB = 2
# Host memory: tokenizer, HTTP server and the safetensors page cache, plus CPU-side buffers per GPU worker.
MEMORY_BASE_GIB = 16
MEMORY_PER_GPU_GIB = 8
# CPU: tokenisation, scheduling and the HTTP server, plus one worker process per GPU.
CPU_BASE_MILLICORES = 4000
CPU_PER_GPU_MILLICORES = 2000
# Disk-backed emptyDirs of a serving pod: compile caches (torch.compile, Triton, FlashInfer JIT; a cold compile
# writes a few GB) and /tmp. With hf-download the cache also holds the weights, so it is sized like the PVC.
CACHE_SIZE_GIB = 20
TMP_SIZE_GIB = 4
# Beside the emptyDirs, the container's writable layer (libraries writing outside the redirected caches) and its logs.
WRITABLE_LAYER_GIB = 2

_CPU_QUANTITY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(m?)\s*")


def cpu_millicores(quantity: str, setting: str) -> int:
    """A Kubernetes CPU quantity (``6``, ``4.5``, ``500m``) in millicores, rounded up like the API server does."""
    match = _CPU_QUANTITY.fullmatch(quantity)
    if match is None:
        raise PlanningError(setting, quantity, "not a CPU quantity", 'use cores ("6", "4.5") or millicores ("500m")')
    number = float(match.group(1))
    return math.ceil(number if match.group(2) else number * 1000)


def format_cpu(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


@dataclass(frozen=True)
class MemoryPlan:
    shm_size_gib: int
    memory_request_gib: int
    """Includes /dev/shm."""


def plan_memory(model: ModelDeploymentSpec, layout: ParallelLayout, path: str) -> MemoryPlan:
    """/dev/shm and the memory request; refuses a memory limit below the request."""
    shm = model.lifecycle.shm_size_gib or SHM_BASE_GIB + SHM_PER_EXTRA_GPU_GIB * (layout.gpus_per_pod - 1)
    resources = model.resources
    memory = resources.memory_request_gib or MEMORY_BASE_GIB + MEMORY_PER_GPU_GIB * layout.gpus_per_pod + shm
    if resources.memory_limit_gib is not None and resources.memory_limit_gib < memory:
        raise PlanningError(
            f"{path}.resources.memory_limit_gib", resources.memory_limit_gib,
            f"below the memory request of {memory} GiB (which includes {shm} GiB of /dev/shm, counted against the "
            "limit)", f"use at least {memory}, or leave it unset",
        )
    return MemoryPlan(shm, memory)


def plan_cpu_request(model: ModelDeploymentSpec, layout: ParallelLayout, path: str) -> tuple[str, int]:
    """The CPU request as written in the pod (the stack's quantity, or the derived one) and in millicores."""
    request = model.resources.cpu_request
    if request is not None:
        return request, cpu_millicores(request, f"{path}.resources.cpu_request")
    millicores = CPU_BASE_MILLICORES + CPU_PER_GPU_MILLICORES * layout.gpus_per_pod
    return format_cpu(millicores), millicores


def cache_size_gib(storage: StorageSpec, pvc_size_gib: int) -> int:
    """The pod's cache emptyDir: the compile caches, and with hf-download the weights too (sized like the PVC)."""
    return pvc_size_gib if storage.kind == "hf-download" else CACHE_SIZE_GIB
