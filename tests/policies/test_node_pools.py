"""The node-pool rules' view of pools: the policy pack's stand-in for an EKS managed node group (built from the same
arguments the program gives pulumi-aws), and NodePools, against the pods each reference stack renders."""

from __future__ import annotations

import pytest

from vllm_pulumi.components.builders.nodes import build_node_group, node_group_args
from vllm_pulumi.components.manifests import build_manifests, load_stack
from vllm_pulumi.policies.aws_objects import managed_node_group_manifest
from vllm_pulumi.policies.node_pools import MANAGED_NODE_GROUP_KIND, pool_admits
from vllm_pulumi.policies.rules.placement import gpu_nodepool_consolidation, gpu_pod_matches_a_node_pool
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.planning.deployment import plan_deployment
from vllm_pulumi.runtime.spec.cluster import EksCluster


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


@pytest.mark.parametrize("stack", ["prod", "multinode"])
@pytest.mark.parametrize("spelling", ["snake_case", "camelCase"])
def test_managed_node_group_stand_in_admits_the_stacks_gpu_pods(stack: str, spelling: str) -> None:
    spec = load_stack(stack)
    assert isinstance(spec.cluster, EksCluster)
    args = node_group_args(build_node_group(spec.cluster.node_pools[0], spec.cluster.cluster_name,
                                            plan_deployment(spec)))
    props = {(_camel(k) if spelling == "camelCase" else k): v for k, v in args.items()}
    stand_in = managed_node_group_manifest("aws:eks/nodeGroup:NodeGroup", props, "h100")
    assert stand_in is not None and stand_in["kind"] == MANAGED_NODE_GROUP_KIND
    pool = Resource(stand_in)
    resources = [Resource(o) for o in build_manifests(spec)] + [pool]
    gpu_pods = [t for r in resources for t in r.templates if t.gpus > 0]
    assert gpu_pods and all(pool_admits(pool, t.spec) for t in gpu_pods)
    assert list(gpu_pod_matches_a_node_pool(resources, {})) == []


def test_other_resources_get_no_stand_in() -> None:
    assert managed_node_group_manifest("aws:ec2/launchTemplate:LaunchTemplate", {"labels": {}}) is None


def test_karpenter_stack_passes_both_node_pool_rules_and_a_foreign_pool_fails_the_first() -> None:
    resources = [Resource(o) for o in build_manifests(load_stack("karpenter"))]
    assert list(gpu_pod_matches_a_node_pool(resources, {})) == []
    assert list(gpu_nodepool_consolidation(resources, {})) == []
    foreign = [r for r in resources if r.kind != "NodePool"] + [
        Resource(managed_node_group_manifest("aws:eks/nodeGroup:NodeGroup",
                                             {"labels": {}, "instanceTypes": ["g6.4xlarge"]}, "l4") or {})]
    violations = list(gpu_pod_matches_a_node_pool(foreign, {}))
    assert violations and "stays Pending" in violations[0].message
