"""The links between a replica's GPUs: what tensor and pipeline parallelism cost over them, the EFA devices a replica
that spans nodes requests, and the image that can use them."""

from __future__ import annotations

import math

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts
from vllm_pulumi.runtime.facts.instances import INSTANCES, efa_interfaces_for, find_instance
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.node_pools import ManagedNodeGroupPool
from vllm_pulumi.runtime.spec.engine import DEFAULT_IMAGE_REPOSITORY
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE


def parallelism_warnings(layout: ParallelLayout, gpu: GpuFacts, efa_devices: int = 0) -> list[str]:
    """What the links between a replica's GPUs cost, named by the kind of parallelism that uses them."""
    tp, pp = layout.tensor_parallel_size, layout.pipeline_parallel_size
    warnings = []
    if tp > layout.gpus_per_pod:
        network = (f"over EFA ({efa_devices} {EFA_RESOURCE} devices per pod), still far slower than NVLink"
                   if efa_devices else
                   f"and the pods request no {EFA_RESOURCE} devices, so NCCL falls back to TCP sockets")
        warnings.append(
            f"tensor parallelism over {tp} GPUs spans {math.ceil(tp / layout.gpus_per_pod)} nodes: its all-reduce at "
            f"every layer crosses the network, {network}; keep tensor_parallel_size within one node "
            f"({layout.gpus_per_pod} GPUs) and use pipeline parallelism across nodes"
        )
    elif tp > 1 and gpu.interconnect == "pcie":
        warnings.append(
            f"tensor parallelism over {tp} {gpu.id} GPUs that share only PCIe: all-reduce traffic will dominate; "
            "prefer NVLink GPUs or pipeline parallelism"
        )
    if pp > 1 and gpu.interconnect == "pcie":
        where = (f"in {layout.size} pods on separate nodes, joined by Ray over the node network" if layout.size > 1
                 else "in one pod, over PCIe")
        warnings.append(
            f"pipeline parallelism over {pp} stages of {gpu.id} GPUs {where}: stages pass only activations (far "
            "less traffic than tensor parallelism), but each step runs the stages one after another, so the time "
            "per token grows with the stage count"
        )
    return warnings


def efa_devices_per_pod(spec: DeploymentSpec, shape: NodeShape, multi_node: bool) -> int:
    """EFA devices each pod of a replica that spans nodes requests: all its node's EFA interfaces (the pod has the
    whole node), when the pool has EFA; 0 otherwise (a single-node replica's NCCL stays inside)."""
    if not multi_node or shape.setting is None:
        return 0
    index = int(shape.setting.rsplit("[", 1)[1].rstrip("]"))
    if isinstance(spec.cluster, EksCluster):
        pool = spec.cluster.node_pools[index]
        # A managed node group gets EFA unless the stack turns it off (components/builders/nodes.py, same default);
        # Karpenter and Auto Mode pools have none (the spec refuses efa there).
        if not isinstance(pool, ManagedNodeGroupPool) or pool.instance_type is None or pool.efa is False:
            return 0
        return efa_interfaces_for(pool.instance_type)
    nodes = spec.cluster.nodes[index]
    if not nodes.efa:
        return 0
    interfaces = find_instance(nodes.instance_type).efa_interfaces if nodes.instance_type else 0
    if not interfaces:
        with_efa = ", ".join(i.instance_type for i in INSTANCES if i.efa_interfaces)
        raise PlanningError(f"{shape.setting}.efa", True,
                            f"the plan takes the EFA interface count from the instance facts, and "
                            f"{nodes.instance_type or 'a node without instance_type'} has none there",
                            f"set instance_type to one with EFA ({with_efa}), or efa: false")
    return interfaces


def serving_image(model: ModelDeploymentSpec, efa_devices: int, path: str) -> tuple[str, list[str]]:
    """The serving image (the tag follows engine.vllm_version), and a warning when pods on EFA run an image that
    cannot use it."""
    repository = model.image or DEFAULT_IMAGE_REPOSITORY
    warnings = []
    if efa_devices and model.efa_image is not None:
        repository = model.efa_image
    elif efa_devices and repository == DEFAULT_IMAGE_REPOSITORY:
        warnings.append(
            f"the pods request {efa_devices} {EFA_RESOURCE} devices each, but run the upstream "
            f"{DEFAULT_IMAGE_REPOSITORY} image, which has neither libfabric nor the AWS OFI NCCL plugin: NCCL "
            f"between the nodes falls back to TCP sockets; set {path}.efa_image to an image that adds them "
            "(README: multi-node on EFA)"
        )
    return f"{repository}:{model.engine.image_tag}", warnings
