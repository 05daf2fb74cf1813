"""Memory and CPU of the vLLM container: a memory-backed /dev/shm for multi-GPU replicas, a memory limit above
it, no CPU limit, and --gpu-memory-utilization with headroom."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.pods import PodTemplate, gpu_limit
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, rule
from vllm_pulumi.policies.values import as_float, mapping, parse_quantity, sequence
from vllm_pulumi.policies.vllm_command import is_vllm_image
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.spec.engine import DEFAULT_GPU_MEMORY_UTILIZATION, MAX_SAFE_GPU_MEMORY_UTILIZATION


def _shm_problem(template: PodTemplate, container: dict[str, Any]) -> str | None:
    if template.spec.get("hostIPC") is True:
        return None
    for mount in sequence(container.get("volumeMounts")):
        mount = mapping(mount)
        if mount.get("mountPath") == "/dev/shm":
            volume = template.volume(str(mount.get("name")))
            empty_dir = mapping(mapping(volume).get("emptyDir")) if volume else {}
            if volume and "emptyDir" in volume and empty_dir.get("medium") == "Memory":
                return None
            return f"/dev/shm is mounted from volume {mount.get('name')!r}, which is not an emptyDir with medium Memory"
    return "no /dev/shm mount (the container runtime gives 64 MiB)"


@rule("dev-shm-memory", group="Memory and CPU", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def dev_shm_memory(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """When a replica uses more than one GPU (TP or PP > 1, or a multi-node LeaderWorkerSet), the vLLM containers mount
    a memory-backed emptyDir at /dev/shm.

    Why: vLLM's worker processes and NCCL exchange data through shared memory; the container runtime's 64 MiB /dev/shm
    makes the engine crash on the first large batch.

    Fix: Add volume {name: shm, emptyDir: {medium: Memory, sizeLimit: <1 GiB + 2 GiB per extra GPU>} } mounted at
    /dev/shm.
    """
    checked: set[int] = set()
    multi_node = res.is_lws and (res.lws_size or 1) > 1
    for server in res.servers:
        tp, pp = server.tensor_parallel_size or 1, server.pipeline_parallel_size or 1
        gpus = gpu_limit(server.container) or 0
        if tp * pp > 1 or gpus > 1 or multi_node:
            checked.add(id(server.container))
            problem = _shm_problem(server.template, server.container)
            if problem:
                yield Violation(f"{server.where}: {problem}, and this replica uses {tp * pp} GPUs "
                                f"(TP {tp} x PP {pp})" + (" over several nodes" if multi_node else ""),
                                f"add an emptyDir volume with medium: Memory mounted at /dev/shm in "
                                f"{server.template.path}")
    if multi_node:
        for template in res.templates:
            for container in template.containers:
                if id(container) in checked or not (gpu_limit(container) or is_vllm_image(container.get("image"))):
                    continue
                problem = _shm_problem(template, container)
                if problem:
                    yield Violation(f"container {container.get('name')!r} ({template.role} template): {problem} in a "
                                    "multi-node group (Ray and NCCL use shared memory)",
                                    f"add an emptyDir volume with medium: Memory mounted at /dev/shm in "
                                    f"{template.path}")


def shm_size_limit(template: PodTemplate, container: dict[str, Any]) -> tuple[str, float | None] | None:
    """(written, bytes) of the memory-backed /dev/shm volume's sizeLimit, None without such a volume."""
    for mount in sequence(container.get("volumeMounts")):
        mount = mapping(mount)
        if mount.get("mountPath") != "/dev/shm":
            continue
        empty_dir = mapping(mapping(template.volume(str(mount.get("name")))).get("emptyDir"))
        if empty_dir.get("medium") == "Memory" and "sizeLimit" in empty_dir:
            return str(empty_dir["sizeLimit"]), parse_quantity(empty_dir["sizeLimit"])
    return None


@rule(
    "memory-limit-covers-shm", group="Memory and CPU", enforcement="mandatory", severity="medium", kinds=SERVING_KINDS,
)
def memory_limit_covers_shm(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """When the vLLM container has a memory limit, it is larger than its memory-backed /dev/shm sizeLimit.

    Why: A memory-backed emptyDir is charged to the pod's memory: with a limit at or below the /dev/shm size, filling
    shared memory (NCCL, worker IPC) gets the container OOM-killed instead of hitting the size limit.

    Fix: Raise resources.limits.memory above the /dev/shm sizeLimit plus the server's own memory, or drop the limit.
    """
    for server in res.servers:
        written_limit = mapping(mapping(server.container.get("resources")).get("limits")).get("memory")
        limit = parse_quantity(written_limit)
        shm = shm_size_limit(server.template, server.container)
        if limit is None or shm is None or shm[1] is None:
            continue
        if limit <= shm[1]:
            yield Violation(f"{server.where}: memory limit {written_limit} is not above the /dev/shm sizeLimit "
                            f"{shm[0]} (memory-backed, charged to the same limit)",
                            "raise resources.limits.memory well above the /dev/shm size, or remove the limit")


@rule("no-cpu-limit", group="Memory and CPU", enforcement="advisory", severity="low", kinds=SERVING_KINDS)
def no_cpu_limit(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The vLLM container sets no CPU limit (a CPU request only).

    Why: vLLM's scheduler, tokenizer and HTTP server run on the CPU between GPU steps; CFS throttling under a CPU limit
    stalls the engine loop and shows up as latency spikes while the GPU idles.

    Fix: Remove resources.limits.cpu and keep a CPU request sized for the GPUs (4 + 2 per GPU).
    """
    for server in res.servers:
        limit = mapping(mapping(server.container.get("resources")).get("limits")).get("cpu")
        if limit is not None:
            yield Violation(f"{server.where}: CPU limit {limit} throttles vLLM's engine loop",
                            "remove resources.limits.cpu (keep the request)")


@rule(
    "gpu-memory-utilization", group="Memory and CPU", enforcement="mandatory", severity="medium", kinds=SERVING_KINDS,
    settings={"max": Setting(MAX_SAFE_GPU_MEMORY_UTILIZATION, "Largest allowed --gpu-memory-utilization.")},
    text_values={"max_safe": MAX_SAFE_GPU_MEMORY_UTILIZATION, "default": DEFAULT_GPU_MEMORY_UTILIZATION},
)
def gpu_memory_utilization(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """--gpu-memory-utilization is at most {max_safe}.

    Why: vLLM takes this share of GPU memory up front; above {max_safe} nothing is left for allocator fragmentation,
    NCCL and CUDA graph buffers that grow later, and the engine runs out of memory under load.

    Fix: Use 0.90-{max_safe} (vLLM 0.33 defaults to {default}).
    """
    limit = float(settings.get("max", MAX_SAFE_GPU_MEMORY_UTILIZATION))
    for server in res.servers:
        value = as_float(server.command.value("gpu-memory-utilization"))
        if value is not None and value > limit:
            yield Violation(f"{server.where}: --gpu-memory-utilization {value} > {limit}",
                            f"set --gpu-memory-utilization to {limit} or less (default {DEFAULT_GPU_MEMORY_UTILIZATION})")


RULES: tuple[Rule, ...] = (dev_shm_memory, memory_limit_covers_shm, no_cpu_limit, gpu_memory_utilization)
"""This topic's rules, in the order the registry lists them."""
