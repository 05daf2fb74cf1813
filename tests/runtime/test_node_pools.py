"""Node pools as a union by provisioner: each input keeps the messages the single pool class gave (issue 20)."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.node_pools import AutoModePool, KarpenterPool, ManagedNodeGroupPool
from vllm_pulumi.runtime.spec.validation import SpecError, parse_spec

KARPENTER = {"name": "gpu", "provisioner": "karpenter", "subnet_ids": ["s"], "gpu": "l4",
             "node_role_arn": "arn:aws:iam::1:role/r", "security_group_ids": ["sg-1"]}


def parse_pool(pool: Any) -> Any:
    spec = parse_spec({"cluster": {"mode": "eks", "cluster_name": "c", "region": "us-east-1", "node_pools": [pool]},
                       "models": [{"name": "m", "model": "meta-llama/Llama-3.1-8B-Instruct"}]})
    assert isinstance(spec.cluster, EksCluster)
    return spec.cluster.node_pools[0]


def messages(pool: Any) -> list[str]:
    with pytest.raises(SpecError) as error:
        parse_pool(pool)
    return [issue.message for issue in error.value.issues]


@pytest.mark.parametrize(("pool", "kind"), [
    pytest.param({"name": "gpu", "instance_type": "p5.48xlarge", "subnet_ids": ["s"]}, ManagedNodeGroupPool,
                 id="no-provisioner-is-a-managed-node-group"),
    pytest.param(KARPENTER, KarpenterPool, id="karpenter"),
    pytest.param({"name": "gpu", "provisioner": "auto-mode", "subnet_ids": ["s"], "gpu": "l4"}, AutoModePool,
                 id="auto-mode"),
])
def test_the_provisioner_picks_the_class(pool: dict[str, Any], kind: type) -> None:
    assert type(parse_pool(pool)) is kind


def test_an_unknown_provisioner_is_reported_at_its_setting_with_every_other_problem() -> None:
    found = messages({"name": "gpu", "provisioner": "karpentr", "subnet_ids": [], "instance_type": "p5.48xlarge"})
    assert found == [
        "cluster.node_pools[0].subnet_ids=[]: List should have at least 1 item after validation, not 0",
        "cluster.node_pools[0].provisioner='karpentr': Input should be 'managed-node-group', 'karpenter' or "
        "'auto-mode'; valid: 'managed-node-group', 'karpenter' or 'auto-mode'",
    ]


def test_another_provisioners_setting_is_checked_by_its_type_in_the_settings_order() -> None:
    found = messages({"name": "gpu", "instance_type": "p5.48xlarge", "subnet_ids": ["s"], "gpus_per_node": 0,
                      "min_size": -1})
    assert [message.split(":", 1)[0] for message in found] == [
        "cluster.node_pools[0].min_size=-1", "cluster.node_pools[0].gpus_per_node=0"]


def test_another_provisioners_setting_is_refused_by_name_and_passes_when_empty() -> None:
    node_group = {"name": "gpu", "instance_type": "p5.48xlarge", "subnet_ids": ["s"]}
    assert messages({**node_group, "max_gpus": 8, "ami_alias": "al2023@latest"}) == [
        "cluster.node_pools[0]='{...}': max_gpus, ami_alias apply to provisioner karpenter or auto-mode only; set provisioner: "
        "karpenter, or remove them"]
    assert type(parse_pool({**node_group, "instance_types": [], "gpu": None, "disruption_budget_nodes": 3})) is (
        ManagedNodeGroupPool)
    assert messages({**KARPENTER, "efa": True})[0].startswith(
        "cluster.node_pools[0]='{...}': efa and placement_group are built for managed node groups only")


def test_an_unknown_pool_setting_lists_every_provisioners_settings() -> None:
    (found,) = messages({**KARPENTER, "zzz": 1})
    assert found.startswith("cluster.node_pools[0].zzz=1: unknown setting; valid here: name, instance_type, min_size,")
    assert found.endswith("instance_profile, security_group_ids, security_group_tags, ami_alias")


def test_a_pool_that_is_not_a_mapping() -> None:
    assert messages("gpu") == [
        "cluster.node_pools[0]='gpu': Input should be a valid dictionary or instance of GpuNodePoolSpec"]
