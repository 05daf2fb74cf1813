"""GPUs against parallelism: GPU requests equal limits, a replica's GPUs equal TP x PP (x DP), the tensor-parallel
size fits the model's heads, and tensor parallelism stays on NVLink inside a node (or on EFA across nodes)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import POD_KINDS, SERVING_KINDS
from vllm_pulumi.policies.pods import PodTemplate, gpu_limit, gpu_request
from vllm_pulumi.policies.rule_types import Rule, Violation, cannot_check, rule
from vllm_pulumi.policies.values import as_int, mapping
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.planning.parallelism import tensor_parallel_problems, valid_tensor_parallel_sizes
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE, GPU_RESOURCE, OTHER_ACCELERATOR_RESOURCES


@rule("gpu-requests-equal-limits", group="GPUs", enforcement="mandatory", severity="medium", kinds=POD_KINDS)
def gpu_requests_equal_limits(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """Containers that request nvidia.com/gpu set the same number as limit.

    Why: GPUs are an extended resource: Kubernetes rejects a request without a limit or different from it, and the
    device plugin allocates by the limit.

    Fix: Set resources.limits.nvidia.com/gpu equal to resources.requests.nvidia.com/gpu (or set only the limit).
    """
    for template in res.templates:
        for container in template.all_containers:
            requests = mapping(mapping(container.get("resources")).get("requests"))
            if GPU_RESOURCE not in requests:
                continue
            request, limit = gpu_request(container), gpu_limit(container)
            if limit is None or request != limit:
                yield Violation(
                    f"container {container.get('name')!r}: {GPU_RESOURCE} request {requests.get(GPU_RESOURCE)!r} "
                    f"!= limit {mapping(mapping(container.get('resources')).get('limits')).get(GPU_RESOURCE)!r}",
                    f"set resources.limits.{GPU_RESOURCE}: {requests.get(GPU_RESOURCE)}",
                )


def other_accelerator(template: PodTemplate) -> str | None:
    for container in template.containers:
        resources = mapping(container.get("resources"))
        for part in ("limits", "requests"):
            for name in mapping(resources.get(part)):
                if str(name) in OTHER_ACCELERATOR_RESOURCES:
                    return str(name)
    return None


@rule("gpus-match-parallelism", group="GPUs", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def gpus_match_parallelism(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The GPUs of a replica equal TP x PP (x DP): the vLLM container's nvidia.com/gpu limit for one pod; leader + (size
    - 1) x worker GPUs for a LeaderWorkerSet.

    Why: vLLM starts one worker per GPU of TP x PP; with fewer GPUs it fails at start, with more the extra GPUs sit idle
    and are paid for.

    Fix: Make nvidia.com/gpu (x LWS size) equal to --tensor-parallel-size x --pipeline-parallel-size.
    """
    if res.kind in ("ServingRuntime", "ClusterServingRuntime"):
        return  # a runtime is a template: the InferenceService that uses it sets the resources
    for server in res.servers:
        if any(other_accelerator(t) for t in res.templates):
            continue  # TPU / Neuron / ROCm pods: the parallel sizes count those devices, not nvidia.com/gpu
        tp, pp, dp = server.tensor_parallel_size, server.pipeline_parallel_size, server.data_parallel_size
        if tp is None or pp is None or dp is None:
            yield cannot_check("GPUs against parallelism", "the parallel sizes are not literal integers")
            continue
        wanted = tp * pp * dp
        shape = f"TP {tp} x PP {pp}" + (f" x DP {dp}" if dp > 1 else "")
        leader_gpus = gpu_limit(server.container)
        if res.is_lws and (res.lws_size or 1) != 1:
            size = res.lws_size
            if size is None:
                yield cannot_check("GPUs against parallelism", "leaderWorkerTemplate.size is not a literal integer")
                continue
            workers = [t for t in res.templates if t.role == "worker"]
            worker_gpus = workers[0].gpus if workers else 0
            total = (leader_gpus or 0) + (size - 1) * worker_gpus
            if total != wanted:
                yield Violation(
                    f"{server.where}: {shape} = {wanted} GPUs, but the group has {leader_gpus or 0} (leader) + "
                    f"{size - 1} x {worker_gpus} (workers) = {total}",
                    f"give each of the {size} pods {wanted // size if wanted % size == 0 else '?'} GPUs, or change "
                    "the parallel sizes",
                )
        elif leader_gpus != wanted:
            yield Violation(
                f"{server.where}: {shape} needs {wanted} GPUs but the container's {GPU_RESOURCE} limit is "
                f"{leader_gpus if leader_gpus is not None else 'not set'}",
                f"set resources.limits.{GPU_RESOURCE}: {wanted} (and the same request)",
            )


@rule("tensor-parallel-divides-heads", group="GPUs", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def tensor_parallel_divides_heads(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """--tensor-parallel-size divides the model's attention heads (and KV heads and MLP width), as vLLM requires
    (runtime.planning.parallelism).

    Why: vLLM refuses such a size at startup, after the pod was scheduled and the weights were read; e.g. Llama 3 70B
    with TP 5 (64 heads) never starts.

    Fix: Pick a tensor-parallel size from the valid list in the message.
    """
    for server in res.servers:
        tp = server.tensor_parallel_size
        if tp is None or tp == 1:
            continue
        if server.model is None:
            yield cannot_check("the tensor-parallel size against the model", server.model_problem)
            continue
        problems = tensor_parallel_problems(server.model, tp)
        if problems:
            valid = valid_tensor_parallel_sizes(server.model, max(16, tp))
            yield Violation(f"{server.where}: {'; '.join(problems)} ({server.model.name})",
                            f"use --tensor-parallel-size one of {', '.join(map(str, valid))}")


@rule("tensor-parallel-interconnect", group="GPUs", enforcement="advisory", severity="medium", kinds=SERVING_KINDS)
def tensor_parallel_interconnect(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """Tensor parallelism inside a pod runs on GPUs linked by NVLink, not PCIe only.

    Why: TP all-reduces activations at every layer; over PCIe this dominates the step time (about 3x lower throughput
    than expected).

    Fix: Use NVLink/NVSwitch GPUs for TP > 1, or pipeline parallelism, or fewer GPUs per replica.
    """
    for server in res.servers:
        tp = server.tensor_parallel_size or 1
        if tp == 1:
            continue
        if server.gpu is None:
            yield cannot_check("the GPU interconnect", server.gpu_problem)
        elif server.gpu.interconnect == "pcie":
            yield Violation(f"{server.where}: TP {tp} over {server.gpu.id} GPUs that share only PCIe "
                            f"({server.gpu.interconnect_gb_per_second} GB/s per GPU)",
                            "use NVLink GPUs (e.g. h100-sxm) for TP > 1, or --pipeline-parallel-size instead")


def _efa_devices(template: PodTemplate) -> int:
    return sum(as_int(mapping(mapping(c.get("resources")).get("limits")).get(EFA_RESOURCE)) or 0
               for c in template.containers)


@rule("tensor-parallel-across-nodes", group="GPUs", enforcement="advisory", severity="medium", kinds=SERVING_KINDS)
def tensor_parallel_across_nodes(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A LeaderWorkerSet's --tensor-parallel-size fits the GPUs of one pod (one node): tensor parallelism does not span
    nodes; when it must, the pods request the node's EFA devices (vpc.amazonaws.com/efa).

    Why: Tensor parallelism all-reduces activations at every layer. Inside a node that runs over NVLink (hundreds of
    GB/s); across nodes it runs over the network, a fraction of that even with EFA, and over TCP sockets without it (the
    pods request no EFA devices, or the image lacks the AWS OFI NCCL plugin).

    Fix: Keep --tensor-parallel-size within one node's GPUs and use --pipeline-parallel-size across nodes; if TP must
    span nodes, run on EFA nodes, request every vpc.amazonaws.com/efa device of the node and use an image with libfabric
    and the AWS OFI NCCL plugin (the spec's efa_image).
    """
    if not res.is_lws or (res.lws_size or 1) == 1:
        return
    for server in res.servers:
        tp = server.tensor_parallel_size
        gpus = gpu_limit(server.container)
        if tp is None or not gpus or tp <= gpus:
            continue
        nodes = -(-tp // gpus)
        efa = _efa_devices(server.template)
        network = (f"over {efa} EFA devices per pod" if efa else
                   f"and the pods request no {EFA_RESOURCE} devices (NCCL uses TCP sockets)")
        yield Violation(
            f"{server.where}: TP {tp} over pods of {gpus} GPUs spans {nodes} nodes: the all-reduce at every layer "
            f"crosses the network, {network}",
            f"use --tensor-parallel-size {gpus} and --pipeline-parallel-size {nodes * (server.pipeline_parallel_size or 1)}"
            " (pipeline stages across nodes)" + ("" if efa else f", or request the nodes' {EFA_RESOURCE} devices"),
        )


RULES: tuple[Rule, ...] = (
    gpu_requests_equal_limits, gpus_match_parallelism, tensor_parallel_divides_heads, tensor_parallel_interconnect,
    tensor_parallel_across_nodes,
)
"""This topic's rules, in the order the registry lists them."""
