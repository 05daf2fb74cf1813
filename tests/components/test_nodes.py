"""The serving pods and the GPU nodes agree: the pods' node selector is on the nodes' labels, the nodes' taints are
tolerated, and the EKS node group carries the same labels and taints the planner placed pods on."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.components.builders import nodes
from vllm_pulumi.components.manifests import STACKS_DIR, build_manifests, load_stack
from vllm_pulumi.runtime.planning.deployment import node_shape_for, plan_deployment
from vllm_pulumi.runtime.planning.pools import pool_shape
from vllm_pulumi.runtime.spec.cluster import EksCluster

STACKS = sorted(path.name.removeprefix("Pulumi.").removesuffix(".yaml") for path in STACKS_DIR.glob("Pulumi.*.yaml"))


def _pod_specs(workload: dict[str, Any]) -> list[dict[str, Any]]:
    if workload["kind"] == "Deployment":
        return [workload["spec"]["template"]["spec"]]
    templates = workload["spec"]["leaderWorkerTemplate"]
    return [templates["leaderTemplate"]["spec"], templates["workerTemplate"]["spec"]]


def _tolerates(tolerations: list[dict[str, str]], taint: dict[str, str]) -> bool:
    return any(
        (t.get("key") in (None, taint["key"]))
        and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
        and t.get("effect") in (None, taint["effect"])
        for t in tolerations
    )


@pytest.mark.parametrize("stack", STACKS)
def test_serving_pods_select_and_tolerate_the_nodes_of_their_pool(stack: str) -> None:
    spec = load_stack(stack)
    workloads = {o["metadata"]["name"]: o for o in build_manifests(spec) if o["kind"] in ("Deployment",
                                                                                       "LeaderWorkerSet")}
    for index, model in enumerate(spec.models):
        shape = node_shape_for(spec, index)
        for pod in _pod_specs(workloads[model.name]):
            assert pod["nodeSelector"].items() <= shape.labels.items(), (stack, pod["nodeSelector"])
            for taint in shape.taints:
                if taint["effect"] == "NoSchedule":
                    assert _tolerates(pod["tolerations"], taint), (stack, taint)


@pytest.mark.parametrize("stack", [s for s in STACKS if isinstance(load_stack(s).cluster, EksCluster)])
def test_node_group_carries_the_labels_and_taints_the_planner_placed_pods_on(stack: str) -> None:
    spec = load_stack(stack)
    assert isinstance(spec.cluster, EksCluster)
    plans = plan_deployment(spec)
    for index, pool in enumerate(spec.cluster.node_pools):
        if pool.provisioner != "managed-node-group":
            continue  # a NodePool: tests/components/test_karpenter.py
        shape = pool_shape(pool, index)
        description = nodes.build_node_group(pool, spec.cluster.cluster_name, plans)
        assert description.labels.items() <= shape.labels.items()
        assert description.taints == [nodes.eks_taint(taint) for taint in shape.taints]
        assert nodes.node_group_args(description)["taints"] == [
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
        assert (description.gpus_per_node, description.max_size) == (shape.gpus, shape.max_nodes)
        assert description.disk_size_gib == shape.capacity_ephemeral_storage_gib
