"""Whether one serving pod fits one node of its pool: a pod no single node can take would stay Pending, so the plan
refuses it, addressed to the request or the node size to change."""

from __future__ import annotations

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.planning.nodes import NODEPOOL_PROVISIONERS, NodeShape
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.resources import WRITABLE_LAYER_GIB, format_cpu
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


def node_setting(shape: NodeShape, quantity: str) -> str | None:
    """The setting that sizes a stated node (None when the shape is assumed)."""
    if shape.setting is None:
        return None
    if shape.setting.startswith("cluster.node_pools"):
        kind = "instance_types" if shape.provisioner in NODEPOOL_PROVISIONERS else "instance_type"
        return f"{shape.setting}.{'disk_size_gib' if quantity == 'ephemeral_storage_gib' else kind}"
    if shape.instance_type is not None and quantity != "ephemeral_storage_gib":
        return f"{shape.setting}.instance_type"
    return f"{shape.setting}.{quantity}"


def check_pod_fits_node(spec: DeploymentSpec, index: int, plan: ServingPlan) -> None:
    """Refuse a serving pod that no single node of its pool can take: the scheduler would leave it Pending."""
    model, path = spec.models[index], f"models[{index}]"
    pod, node = plan.pod_resources, plan.node_shape.allocatable
    if pod.cpu_millicores > node.cpu_millicores:
        raise _cpu_refusal(model, path, plan)
    if pod.memory_mib > node.memory_mib:
        raise _memory_refusal(model, path, plan)
    if plan.ephemeral_storage_gib > node.ephemeral_storage_gib:
        raise _disk_refusal(model, path, plan)


def _where(shape: NodeShape) -> str:
    return f"one node of {shape.pool} ({shape.describe()})"


def _cpu_refusal(model: ModelDeploymentSpec, path: str, plan: ServingPlan) -> PlanningError:
    shape = plan.node_shape
    have = format_cpu(shape.allocatable.cpu_millicores)
    reason = (f"a serving pod requests {plan.cpu_request} CPU but {_where(shape)} has {have} allocatable (capacity "
              "minus the kubelet reserve)")
    request = f"{path}.resources.cpu_request"
    stated = node_setting(shape, "vcpus")
    if model.resources.cpu_request is not None or stated is None:
        return PlanningError(request, plan.cpu_request, reason, f"use at most {have}, or nodes with more CPUs")
    return PlanningError(stated, shape.instance_type or shape.capacity_cpu_millicores // 1000, reason,
                         f"use nodes with more CPUs, or set {request} to at most {have}")


def _memory_refusal(model: ModelDeploymentSpec, path: str, plan: ServingPlan) -> PlanningError:
    shape = plan.node_shape
    node = shape.allocatable
    have_gib = node.memory_mib // 1024
    reason = (f"a serving pod requests {plan.memory_request_gib} GiB of memory (including {plan.shm_size_gib} "
              f"GiB of /dev/shm) but {_where(shape)} has {node.memory_mib / 1024:.1f} GiB allocatable (capacity "
              "minus the kubelet reserve)")
    request = f"{path}.resources.memory_request_gib"
    stated = node_setting(shape, "memory_gib")
    if model.resources.memory_request_gib is not None:
        return PlanningError(request, plan.memory_request_gib, reason,
                             f"use at most {have_gib}, or nodes with more memory")
    without_shm = plan.memory_request_gib - plan.shm_size_gib
    if model.lifecycle.shm_size_gib is not None and without_shm <= have_gib:
        return PlanningError(f"{path}.lifecycle.shm_size_gib", plan.shm_size_gib, reason,
                             f"use at most {have_gib - without_shm}, or leave it unset to derive it")
    if stated is None:
        return PlanningError(request, plan.memory_request_gib, reason,
                             f"set it to at most {have_gib}, or state nodes with more memory")
    return PlanningError(stated, shape.instance_type or shape.capacity_memory_mib // 1024, reason,
                         f"use nodes with more memory, or set {request} to at most {have_gib}")


def _disk_refusal(model: ModelDeploymentSpec, path: str, plan: ServingPlan) -> PlanningError:
    shape = plan.node_shape
    disk = shape.allocatable.ephemeral_storage_gib
    reason = (f"a serving pod requests {plan.ephemeral_storage_gib} GiB of node disk (cache "
              f"{plan.cache_size_gib} GiB + /tmp {plan.tmp_size_gib} GiB + writable layer {WRITABLE_LAYER_GIB} "
              f"GiB) but {_where(shape)} has {disk} GiB "
              "allocatable (capacity minus the kubelet reserve and eviction threshold)")
    stated = node_setting(shape, "ephemeral_storage_gib")
    kind = model.storage.kind
    if kind == "hf-download" or stated is None:
        return PlanningError(f"{path}.storage.kind", kind, reason + (
            "; hf-download keeps the weights in the pod's cache" if kind == "hf-download" else ""),
            "read the weights from a shared volume (nfs, efs, fsx-lustre) or S3, or use nodes with larger disks")
    return PlanningError(stated, shape.capacity_ephemeral_storage_gib, reason,
                         f"use at least {shape.capacity_ephemeral_storage_gib + plan.ephemeral_storage_gib - disk} "
                         "GiB")
