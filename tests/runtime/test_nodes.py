"""Node shapes: what one node of a pool has, what its kubelet keeps back, and which pool a model's pods land on."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.runtime.planning.deployment import load_deployment, node_shape_for, node_shapes
from vllm_pulumi.runtime.planning.nodes import (
    allocatable_ephemeral_storage_gib,
    reserved_cpu_millicores,
    reserved_memory_mib,
)
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.validation import SpecError

MODEL: dict[str, Any] = {
    "name": "llama", "model": "llama-3.1-8b", "gpu": "rtx-4090",
    "engine": {"max_model_len": 32768, "kv_cache_dtype": "fp8"}, "storage": {"kind": "nfs"},
}
WORKSTATIONS: dict[str, Any] = {"name": "ws", "gpu": "rtx-4090", "gpus_per_node": 1, "vcpus": 32,
                                "memory_gib": 128, "count": 4}


def spec_with(nodes: list[dict[str, Any]] | None = None, **model: Any) -> DeploymentSpec:
    cluster: dict[str, Any] = {"mode": "kubeconfig"}
    if nodes is not None:
        cluster["nodes"] = nodes
    return load_deployment({"cluster": cluster, "models": [{**MODEL, **model}]}).spec


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_deployment(raw)
    return [issue.message for issue in raised.value.issues]


@pytest.mark.parametrize(("vcpus", "reserved"), [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (192, 550)])
def test_cpu_reserve_follows_the_eks_ami_steps(vcpus: int, reserved: int) -> None:
    """6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest."""
    assert reserved_cpu_millicores(vcpus) == reserved


def test_memory_and_disk_reserve() -> None:
    assert reserved_memory_mib(100) == 255 + 11 * 100 + 100  # p5.48xlarge admits 100 pods
    assert allocatable_ephemeral_storage_gib(200) == 200 - 20 - 1  # 10% eviction threshold, 1 GiB kube-reserved


def test_eks_pool_shape_comes_from_the_instance_facts() -> None:
    spec = load_deployment({
        "cluster": {"mode": "eks", "cluster_name": "c", "region": "us-east-1", "node_pools": [
            {"name": "h100", "instance_type": "p5.48xlarge", "subnet_ids": ["s"], "min_size": 1, "max_size": 9,
             "labels": {"team": "ml"}}]},
        "models": [{"name": "llama", "model": "llama-3.3-70b", "engine": {"tensor_parallel_size": 8,
                                                                            "max_model_len": 32768}}],
    }).spec
    (shape,) = node_shapes(spec)
    assert (shape.pool, shape.gpus, shape.instance_type, shape.stated) == ("h100", 8, "p5.48xlarge", True)
    assert (shape.capacity_cpu_millicores, shape.allocatable_cpu_millicores) == (192_000, 192_000 - 550)
    assert (shape.capacity_memory_mib, shape.allocatable_memory_mib) == (2048 * 1024, 2048 * 1024 - 1455)
    assert (shape.capacity_ephemeral_storage_gib, shape.allocatable_ephemeral_storage_gib) == (200, 179)
    assert (shape.min_nodes, shape.max_nodes, shape.max_pods, shape.local_nvme_gb) == (1, 9, 100, 30400)
    assert shape.labels == {
        "team": "ml", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.present": "true", "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux", "vllm-pulumi.dev/node-pool": "h100",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
    }
    assert shape.taints == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert node_shape_for(spec, 0) == shape


@pytest.mark.parametrize(("case", "nodes", "pool", "gpus", "vcpus", "memory_gib", "max_pods"), [
    ("stated size", [WORKSTATIONS], "ws", 1, 32, 128, 110),
    ("stated instance type", [{"name": "g6e", "instance_type": "g6e.2xlarge", "count": 2}], None, None, None, None,
     None),
])
def test_stated_nodes(case: str, nodes: list[dict[str, Any]], pool: str | None, gpus: int | None,
                      vcpus: int | None, memory_gib: int | None, max_pods: int | None) -> None:
    model = {"gpu": "l40s"} if pool is None else {}
    shape = node_shape_for(spec_with(nodes, **model), 0)
    assert shape.stated and shape.setting == "cluster.nodes[0]" and shape.count_setting == "cluster.nodes[0].count"
    if pool is None:  # g6e.2xlarge: 1 x L40S, 8 vCPUs, 64 GiB, 58 pods
        assert (shape.pool, shape.gpus, shape.capacity_cpu_millicores, shape.capacity_memory_mib,
                shape.max_pods, shape.min_nodes, shape.max_nodes) == ("g6e", 1, 8000, 64 * 1024, 58, 2, 2)
        assert shape.labels["node.kubernetes.io/instance-type"] == "g6e.2xlarge"
    else:
        assert (shape.pool, shape.gpus, shape.capacity_cpu_millicores, shape.capacity_memory_mib,
                shape.max_pods) == (pool, gpus, (vcpus or 0) * 1000, (memory_gib or 0) * 1024, max_pods), case
        assert "node.kubernetes.io/instance-type" not in shape.labels


@pytest.mark.parametrize(("case", "model", "pool", "gpus"), [
    ("rtx 4090 has no ec2 instance: a generic 8-gpu server", {}, "assumed-rtx-4090", 8),
    ("explicit gpus_per_node sizes the assumed server", {"gpus_per_node": 1}, "assumed-rtx-4090", 1),
    ("l4: the largest instance carrying it", {"gpu": "l4"}, "assumed-l4", 8),
])
def test_unstated_nodes_are_assumed_and_named_so(case: str, model: dict[str, Any], pool: str, gpus: int) -> None:
    shape = node_shape_for(spec_with(**model), 0)
    assert (shape.pool, shape.gpus, shape.stated, shape.setting) == (pool, gpus, False, None), case
    assert shape.min_nodes == shape.max_nodes >= 1  # the planner's count: max scale plus a surge replica


def test_assumed_pools_of_different_gpu_counts_are_kept_apart() -> None:
    spec = load_deployment({"cluster": {"mode": "render"}, "models": [
        MODEL, {**MODEL, "name": "other", "gpus_per_node": 1}]}).spec
    assert [shape.pool for shape in node_shapes(spec)] == ["assumed-rtx-4090", "assumed-rtx-4090-1gpu"]


@pytest.mark.parametrize(("case", "nodes", "model", "expected"), [
    ("gpus_per_node larger than the stated node", [WORKSTATIONS], {"gpus_per_node": 2},
     "models[0].gpus_per_node=2: larger than the 1 rtx-4090 GPU(s) of one node of cluster.nodes[0] (ws); use at "
     "most 1"),
    ("model gpu on no stated node", [WORKSTATIONS], {"gpu": "l4"},
     "models[0].gpu='l4': no stated node carries l4 GPUs (cluster.nodes: ws (rtx-4090))"),
    ("unknown instance type", [{"name": "x", "instance_type": "g6.huge", "count": 1}], {},
     "cluster.nodes[0].instance_type='g6.huge': unknown instance type"),
    ("instance type and size both", [{**WORKSTATIONS, "instance_type": "g6.xlarge"}], {},
     "instance_type sets the node's size; remove gpu, gpus_per_node, vcpus, memory_gib"),
    ("size incomplete", [{"name": "x", "gpu": "l4", "count": 1}], {},
     "give instance_type, or all of gpu, gpus_per_node, vcpus and memory_gib"),
    ("names repeat", [WORKSTATIONS, WORKSTATIONS], {}, "node names must be unique; used twice: ws"),
])
def test_bad_stated_nodes_name_the_setting(case: str, nodes: list[dict[str, Any]], model: dict[str, Any],
                                           expected: str) -> None:
    found = problems({"cluster": {"mode": "render", "nodes": nodes}, "models": [{**MODEL, **model}]})
    assert any(expected in line for line in found), (case, found)


def test_models_gpu_may_be_left_to_the_stated_nodes() -> None:
    model = {key: value for key, value in MODEL.items() if key != "gpu"}
    spec = load_deployment({"cluster": {"mode": "render", "nodes": [WORKSTATIONS]}, "models": [model]}).spec
    assert node_shape_for(spec, 0).pool == "ws"
