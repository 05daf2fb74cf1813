"""Replicas that span nodes: the plan's word on tensor parallelism over the network, and EFA in the pods."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.components.builders.serving import build_workload
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.spec.validation import SpecError
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE


def eks_stack(*, tp: int, pp: int, efa: bool | None = None, **model: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "h100", "instance_type": "p5.48xlarge", "min_size": 2, "desired_size": 2,
                            "max_size": 4, "subnet_ids": ["subnet-1"]}
    if efa is not None:
        pool["efa"] = efa
    return {
        "cluster": {"mode": "eks", "cluster_name": "c", "region": "us-east-1", "node_pools": [pool]},
        "models": [{"name": "llama", "model": "llama-3.3-70b", "gpu": "h100-sxm", "storage": {"kind": "efs"},
                    "engine": {"tensor_parallel_size": tp, "pipeline_parallel_size": pp, "max_model_len": 8192},
                    **model}],
    }


def render_stack(*, efa: bool, instance_type: str | None = "p5.48xlarge") -> dict[str, Any]:
    nodes: dict[str, Any] = {"name": "h100", "count": 4, "efa": efa}
    if instance_type:
        nodes["instance_type"] = instance_type
    else:
        nodes.update(gpu="h100-sxm", gpus_per_node=8, vcpus=192, memory_gib=2048)
    return {"cluster": {"mode": "render", "nodes": [nodes]},
            "models": [{"name": "llama", "model": "llama-3.3-70b", "storage": {"kind": "efs"},
                        "engine": {"tensor_parallel_size": 16, "max_model_len": 8192}}]}


def plan_of(raw: dict[str, Any]) -> Any:
    (plan,) = load_deployment(raw).plans
    return plan


@pytest.mark.parametrize(
    ("case", "raw", "devices", "warned"),
    [
        ("tp 16 on 8-gpu efa nodes, upstream image", eks_stack(tp=16, pp=1), 32,
         ["spans 2 nodes: its all-reduce at every layer crosses the network, over EFA (32 vpc.amazonaws.com/efa "
          "devices per pod)", "run the upstream vllm/vllm-openai image, which has neither libfabric nor the AWS OFI "
          "NCCL plugin"]),
        ("tp 16 with efa turned off", eks_stack(tp=16, pp=1, efa=False), 0,
         ["and the pods request no vpc.amazonaws.com/efa devices, so NCCL falls back to TCP sockets"]),
        ("tp 16 with an efa image", eks_stack(tp=16, pp=1, efa_image="registry.example/vllm-efa"), 32,
         ["over EFA (32 vpc.amazonaws.com/efa devices per pod)"]),
        ("tp 8 x pp 2 across nodes: efa, no tensor-parallel warning", eks_stack(tp=8, pp=2), 32,
         ["AWS OFI NCCL plugin"]),
        ("single-node replica on an efa pool: nothing to request", eks_stack(tp=8, pp=1), 0, []),
        ("stated p5 nodes with efa", render_stack(efa=True), 32, ["over EFA (32"]),
        ("stated p5 nodes without efa", render_stack(efa=False), 0, ["pods request no vpc.amazonaws.com/efa"]),
    ],
)
def test_efa_devices_and_interconnect_warnings(case: str, raw: dict[str, Any], devices: int,
                                               warned: list[str]) -> None:
    plan = plan_of(raw)
    assert plan.efa_devices_per_pod == devices
    for text in warned:
        assert any(text in warning for warning in plan.warnings), plan.warnings
    if not warned:
        assert not any("EFA" in warning or "efa" in warning for warning in plan.warnings), plan.warnings


def test_pods_of_a_replica_on_efa_nodes_request_every_interface_and_run_the_efa_image() -> None:
    plan = plan_of(eks_stack(tp=16, pp=1, efa_image="registry.example/vllm-efa"))
    workload = build_workload(plan)
    template = workload["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        (container,) = template[role]["spec"]["containers"]
        assert container["resources"]["requests"][EFA_RESOURCE] == "32"
        assert container["resources"]["limits"][EFA_RESOURCE] == "32"
        assert container["image"] == "registry.example/vllm-efa:v0.33.0"
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


def test_efa_image_is_not_used_by_a_single_node_replica() -> None:
    plan = plan_of(eks_stack(tp=8, pp=1, efa_image="registry.example/vllm-efa"))
    assert plan.image == "vllm/vllm-openai:v0.33.0" and plan.efa_devices_per_pod == 0


def test_efa_on_stated_nodes_needs_an_instance_type_with_efa() -> None:
    with pytest.raises(SpecError) as raised:
        load_deployment(render_stack(efa=True, instance_type=None))
    assert "cluster.nodes[0].efa=True: the plan takes the EFA interface count from the instance facts" in \
        str(raised.value)
    assert "p5.48xlarge" in str(raised.value)
