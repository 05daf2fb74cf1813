"""Placement: a pod no node can take is refused before anything is deployed, and the rollout strategy follows the
room the pool has at max scale (docs/placement.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vllm_pulumi.components.manifests import read_stack_config
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.planning.nodes import Resources
from vllm_pulumi.runtime.planning.placement import Packing, nodes_needed
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.validation import SpecError

MODEL: dict[str, Any] = {
    "name": "llama", "model": "llama-3.1-8b", "gpu": "rtx-4090",
    "engine": {"max_model_len": 32768, "kv_cache_dtype": "fp8"}, "storage": {"kind": "nfs"},
}
WORKSTATION: dict[str, Any] = {"name": "ws", "gpu": "rtx-4090", "gpus_per_node": 1, "vcpus": 32,
                               "memory_gib": 128, "count": 4}


def raw_stack(nodes: list[dict[str, Any]] | None = None, models: list[dict[str, Any]] | None = None,
              **model: Any) -> dict[str, Any]:
    cluster: dict[str, Any] = {"mode": "render"}
    if nodes is not None:
        cluster["nodes"] = nodes
    return {"cluster": cluster, "models": models or [{**MODEL, **model}]}


def plans_of(raw: dict[str, Any]) -> list[ServingPlan]:
    return load_deployment(raw).plans


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_deployment(raw)
    return [issue.message for issue in raised.value.issues]


def eks(pool: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": {"mode": "eks", "cluster_name": "c", "region": "us-east-1",
                        "node_pools": [{"name": "gpu", "subnet_ids": ["s"], **pool}]}, "models": [model]}


def stack(name: str, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(read_stack_config(name))
    for path, value in changes.items():
        target = raw
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        target[keys[-1]] = value
    return raw


# ---- a pod that no node can take is refused --------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "raw", "expected"), [
    ("more gpus than a node", raw_stack([WORKSTATION], gpus_per_node=2),
     "models[0].gpus_per_node=2: larger than the 1 rtx-4090 GPU(s) of one node of cluster.nodes[0] (ws)"),
    ("explicit cpu request above the node",
     raw_stack([{**WORKSTATION, "vcpus": 8}], resources={"cpu_request": "16"}),
     "models[0].resources.cpu_request='16': a serving pod requests 16 CPU but one node of ws (1 x rtx-4090, 8 "
     "vCPUs, 128 GiB memory, 200 GiB disk) has 7910m allocatable (capacity minus the kubelet reserve); use at most "
     "7910m"),
    ("derived cpu request above a small instance",
     raw_stack([{"name": "g6", "instance_type": "g6.xlarge", "count": 4}], gpu="l4"),
     "cluster.nodes[0].instance_type='g6.xlarge': a serving pod requests 6 CPU but one node of g6 (g6.xlarge: 1 x "
     "l4, 4 vCPUs, 16 GiB memory, 200 GiB disk) has 3920m allocatable"),
    ("derived cpu request above an eks pool's instance",
     eks({"instance_type": "g5.xlarge"}, {**MODEL, "gpu": None}),
     "cluster.node_pools[0].instance_type='g5.xlarge': a serving pod requests 6 CPU"),
    ("explicit memory request above the node",
     raw_stack([WORKSTATION], resources={"memory_request_gib": 200}),
     "models[0].resources.memory_request_gib=200: a serving pod requests 200 GiB of memory (including 1 GiB of "
     "/dev/shm) but one node of ws"),
    ("derived memory request above a small node", raw_stack([{**WORKSTATION, "memory_gib": 16}]),
     "cluster.nodes[0].memory_gib=16: a serving pod requests 25 GiB of memory (including 1 GiB of /dev/shm) but "
     "one node of ws (1 x rtx-4090, 32 vCPUs, 16 GiB memory, 200 GiB disk) has 14.5 GiB allocatable"),
    ("/dev/shm pushes the memory request over the node",
     raw_stack([WORKSTATION], lifecycle={"shm_size_gib": 120}),
     "models[0].lifecycle.shm_size_gib=120: a serving pod requests 144 GiB of memory (including 120 GiB of "
     "/dev/shm)"),
    ("emptyDirs larger than the node's disk", raw_stack([{**WORKSTATION, "ephemeral_storage_gib": 20}]),
     "cluster.nodes[0].ephemeral_storage_gib=20: a serving pod requests 26 GiB of node disk (cache 20 "
     "GiB + /tmp 4 GiB + writable layer 2 GiB) but one node of ws"),
    ("hf-download keeps 405b weights on the node's disk",
     eks({"instance_type": "p5.48xlarge", "max_size": 4}, {"name": "big", "model": "llama-3.1-405b", "storage": {
         "kind": "hf-download"}, "engine": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2,
                                            "max_model_len": 16384}}),
     "models[0].storage.kind='hf-download': a serving pod requests"),
])
def test_a_pod_no_node_can_take_is_refused_with_the_numbers(case: str, raw: dict[str, Any], expected: str) -> None:
    found = problems(raw)
    assert any(expected in line for line in found), (case, found)


@pytest.mark.parametrize(("case", "raw"), [
    ("workstation node", raw_stack([WORKSTATION])),
    ("small instance with a cpu request it can hold",
     raw_stack([{"name": "g6", "instance_type": "g6.xlarge", "count": 2}], gpu="l4",
               resources={"cpu_request": "3500m", "memory_request_gib": 12})),
    ("shm that still fits", raw_stack([WORKSTATION], lifecycle={"shm_size_gib": 64})),
])
def test_a_pod_that_fits_one_node_is_accepted(case: str, raw: dict[str, Any]) -> None:
    (plan,) = plans_of(raw)
    assert plan.node_shape.allocatable.how_many(plan.pod_resources) >= 1, case


# ---- pipeline parallelism on one-GPU nodes ---------------------------------------------------------------------------
def test_pp7_on_the_local_stacks_one_gpu_nodes_is_a_group_of_seven_pods_and_warns_about_pipelines() -> None:
    raw = stack("local")
    raw["cluster"]["nodes"][0]["count"] = 14  # a group of 7 at max scale, and a second group to surge
    raw["models"][0].update(engine={**raw["models"][0]["engine"], "pipeline_parallel_size": 7},
                            autoscaling={"min_replicas": 1, "max_replicas": 1})
    (plan,) = plans_of(raw)
    assert (plan.layout.layout, plan.layout.size, plan.layout.gpus_per_pod) == ("leader-worker-set", 7, 1)
    assert any(w.startswith("pipeline parallelism over 7 stages of rtx-4090 GPUs in 7 pods on separate nodes")
               for w in plan.warnings), plan.warnings
    assert not any(w.startswith("tensor parallelism") for w in plan.warnings)
    # One group: LeaderWorkerSet would never start a surge group, so the group is replaced (and the plan says so).
    assert (plan.rollout.max_surge, plan.rollout.max_unavailable) == (0, 1)


def test_pp7_on_the_local_stacks_four_nodes_is_refused_with_the_reason() -> None:
    raw = stack("local")
    raw["models"][0]["engine"]["pipeline_parallel_size"] = 7
    assert any(line.startswith("cluster.nodes[0].count=4: llama-3-1-8b needs 7 node(s) of rtx4090 at its minimum "
                               "replicas (llama-3-1-8b: 1 x 7 pod(s)") for line in problems(raw)), problems(raw)


def test_pp7_without_stated_nodes_is_planned_on_an_assumed_server_and_says_so() -> None:
    (plan,) = plans_of(raw_stack(engine={**MODEL["engine"], "pipeline_parallel_size": 7}))
    assert (plan.layout.layout, plan.layout.gpus_per_pod) == ("single-pod", 7)
    assert not plan.node_shape.stated
    assert any(w.startswith("pipeline parallelism over 7 stages of rtx-4090 GPUs in one pod, over PCIe")
               for w in plan.warnings)
    assert any("the stack states no nodes for rtx-4090, so the plan assumes pool assumed-rtx-4090" in w
               and "state them in cluster.nodes" in w for w in plan.warnings), plan.warnings


@pytest.mark.parametrize(("case", "raw", "hint"), [
    ("render stack", raw_stack(), "state them in cluster.nodes"),
    ("eks stack without a pool for the gpu", eks({"instance_type": "p5.48xlarge"}, MODEL),
     "add a cluster.node_pools entry with an instance type carrying rtx-4090"),
])
def test_an_assumed_shape_is_named_in_the_plan(case: str, raw: dict[str, Any], hint: str) -> None:
    (plan,) = plans_of(raw)
    assumed = [w for w in plan.warnings if w.startswith("the stack states no nodes for")]
    assert len(assumed) == 1 and hint in assumed[0], (case, plan.warnings)
    assert "1 node(s) of 8 x rtx-4090, 128 vCPUs, 1024 GiB memory, 200 GiB disk" in assumed[0]


def test_tensor_parallelism_over_pcie_is_named_as_such() -> None:
    (plan,) = plans_of(raw_stack([{**WORKSTATION, "gpus_per_node": 2, "count": 2}],
                                 engine={**MODEL["engine"], "tensor_parallel_size": 2}))
    assert any(w.startswith("tensor parallelism over 2 rtx-4090 GPUs that share only PCIe") for w in plan.warnings)
    assert not any(w.startswith("pipeline parallelism") for w in plan.warnings)


# ---- the rollout follows the room at max scale -----------------------------------------------------------------------
def autoscaled(name: str, max_replicas: int) -> dict[str, Any]:
    return {**MODEL, "name": name, "autoscaling": {"min_replicas": 1, "max_replicas": max_replicas}}


@pytest.mark.parametrize(("case", "raw", "rollouts", "capacities", "warns"), [
    ("prod: a spare node for the surge", stack("prod"), [(1, 0)], [9], []),
    ("prod at max_size 8: no room, replace one at a time", stack("prod", cluster__node_pools__0__max_size=8),
     [(0, 1)], [8], ["raise cluster.node_pools[0].max_size to 9 to restore surge"]),
    ("multinode: a single group is replaced even with room for a second (LWS surges only above maxSurge groups)",
     stack("multinode", cluster__node_pools__0__max_size=4), [(0, 1)], [2],
     ["a surging rollout of one group would never start",
                                         "run at least 2 replicas, on a pool with room for a third group"]),
    ("multinode as it stands (max_size 2): one group, replaced",
     stack("multinode"), [(0, 1)], [1],
     ["a surging rollout of one group would never start"]),
    ("multinode at two groups with room for a third: surge",
     stack("multinode", cluster__node_pools__0__max_size=6, models__0__replicas=2), [(1, 0)], [3], []),
    ("multinode at two groups filling the pool: replace one group at a time",
     stack("multinode", cluster__node_pools__0__max_size=4, models__0__replicas=2), [(0, 1)], [2],
     ["raise cluster.node_pools[0].max_size to 6 to restore surge"]),
    ("edge: four nodes for three replicas", stack("edge"), [(1, 0)], [4], []),
    ("one-gpu pods share an eight-gpu node: 7 + 1 surge fit",
     raw_stack([{"name": "g6", "instance_type": "g6.48xlarge", "count": 1, "ephemeral_storage_gib": 300}],
               models=[{**autoscaled("llama", 7), "gpu": "l4"}]), [(1, 0)], [8], []),
    ("one-gpu pods share an eight-gpu node: 8 fill it",
     raw_stack([{"name": "g6", "instance_type": "g6.48xlarge", "count": 1, "ephemeral_storage_gib": 300}],
               models=[{**autoscaled("llama", 8), "gpu": "l4"}]), [(0, 1)], [8],
     ["raise cluster.nodes[0].count to 2 to restore surge"]),
    ("two models share a pool with no room", raw_stack([WORKSTATION], models=[
        autoscaled("a", 2), autoscaled("b", 2)]), [(0, 1), (0, 1)], [2, 2],
     ["shared with b", "raise cluster.nodes[0].count to 5 to restore surge",
      "shared with a", "raise cluster.nodes[0].count to 5 to restore surge"]),
    ("two models share a pool with room for one surge", raw_stack([{**WORKSTATION, "count": 5}], models=[
        autoscaled("a", 2), autoscaled("b", 2)]), [(1, 0), (0, 1)], [3, 2],
     ["raise cluster.nodes[0].count to 6 to restore surge"]),
    ("two models share a pool with room for both surges", raw_stack([{**WORKSTATION, "count": 6}], models=[
        autoscaled("a", 2), autoscaled("b", 2)]), [(1, 0), (1, 0)], [4, 3], []),
])
def test_rollout_surges_only_with_room_for_one_more_replica_at_max_scale(
        case: str, raw: dict[str, Any], rollouts: list[tuple[int, int]], capacities: list[int],
        warns: list[str]) -> None:
    plans = plans_of(raw)
    assert [(p.rollout.max_surge, p.rollout.max_unavailable) for p in plans] == rollouts, case
    assert [p.rollout.replica_capacity for p in plans] == capacities, case
    rollout_warnings = [w for p in plans for w in p.warnings
                        if "replace one replica" in w or "single replica" in w or "replace the group" in w]
    for expected in warns:
        assert any(expected in w for w in rollout_warnings), (case, expected, rollout_warnings)
    if not warns:
        assert not rollout_warnings, (case, rollout_warnings)


def test_max_scale_beyond_the_pool_is_a_warning_and_min_scale_beyond_it_an_error() -> None:
    (plan,) = plans_of(raw_stack([WORKSTATION], models=[autoscaled("llama", 6)]))
    assert any("holds only 4 replica(s) of llama: the others would stay Pending; raise cluster.nodes[0].count to 6"
               in w for w in plan.warnings), plan.warnings
    assert (plan.rollout.max_surge, plan.rollout.max_unavailable) == (0, 1)
    fixed = {**MODEL, "replicas": 5}
    assert any(line.startswith("cluster.nodes[0].count=4: llama needs 5 node(s) of ws at its minimum replicas")
               for line in problems(raw_stack([WORKSTATION], models=[fixed])))


# ---- packing ---------------------------------------------------------------------------------------------------------
def test_packing_places_whole_pods_first_fit_and_counts_room() -> None:
    node = Resources(8, 96_000, 1_000_000, 179)
    packing = Packing(node, max_nodes=2)
    assert packing.place(Resources(3, 10_000, 10_000, 24), 3) == 3  # 2 on the first node, 1 on the second
    assert packing.used_nodes == 2
    assert packing.room_for(Resources(2, 1, 1, 1)) == 1 + 2  # 2 GPUs left on the first node, 5 on the second
    assert packing.room_for(Resources(3, 1, 1, 1)) == 1
    assert nodes_needed(node, [(Resources(1, 1, 1, 1), 1_000_000)]) == 125_000
    assert nodes_needed(node, [(Resources(9, 1, 1, 1), 1)]) is None


def test_a_disk_that_holds_fewer_pods_than_the_gpus_bounds_the_packing_and_warns() -> None:
    """Eight 1-GPU pods on a g6.48xlarge with the default 200 GiB disk: each requests 26 GiB of ephemeral storage
    (cache 20 + /tmp 4 + writable layer 2), 179 GiB allocatable holds 6, so the scheduler leaves 2 GPUs idle."""
    (plan,) = plans_of(raw_stack([{"name": "g6", "instance_type": "g6.48xlarge", "count": 2}], models=[
        {**autoscaled("llama", 8), "gpu": "l4"}]))
    assert plan.rollout.replica_capacity == 2 * 6, plan.rollout
    assert any(w.startswith("8 pods of llama fit one node of g6 by GPUs, CPU and memory, but only 6 by disk (each "
                            "requests 26 GiB of ephemeral storage, the node has 179 GiB allocatable)")
               and "cluster.nodes[0].ephemeral_storage_gib" in w for w in plan.warnings), plan.warnings
