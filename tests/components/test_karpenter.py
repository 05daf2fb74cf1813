"""Karpenter and EKS Auto Mode pools: NodePools and EC2NodeClasses built from the GPU facts, the serving pods'
selection agreeing with the NodePool for every GPU of the catalog, disruption that fits vLLM, and the schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.schema import validate_all
from vllm_pulumi.components.builders.addons import deep_merge, gpu_operator_values
from vllm_pulumi.components.builders.serving import build_workload
from vllm_pulumi.components.builders.storage import build_storage
from vllm_pulumi.components.manifests import build_manifests, load_stack
from vllm_pulumi.runtime.facts.gpus import GPUS
from vllm_pulumi.runtime.facts.instances import instances_with
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.planning.nodes import NODE_POOL_LABEL
from vllm_pulumi.runtime.planning.pools import pool_shape
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec, ObservabilitySpec
from vllm_pulumi.runtime.spec.node_pools import GpuNodePoolSpec
from vllm_pulumi.runtime.spec.validation import SpecError

from .specs import MODEL

ROLE = "arn:aws:iam::111122223333:role/KarpenterNodeRole-ml"
KARPENTER_POOL: dict[str, Any] = {
    "name": "gpu", "provisioner": "karpenter", "subnet_ids": ["subnet-1"], "node_role_arn": ROLE,
    "security_group_ids": ["sg-1"],
}
AUTO_MODE_POOL: dict[str, Any] = {"name": "gpu", "provisioner": "auto-mode", "subnet_ids": ["subnet-1"]}
EC2_GPUS = [gpu for gpu in GPUS if instances_with(gpu.id)]


def eks_stack(pool: dict[str, Any], model: dict[str, Any] | None = None, **settings: Any) -> DeploymentSpec:
    raw = deep_merge({
        "namespace": "inference",
        "cluster": {"mode": "eks", "cluster_name": "ml", "region": "us-east-1", "node_pools": [pool]},
        "addons": {"gpu_operator": {"install": False}, "keda": {"install": False}, "lws": {"install": False}},
    }, settings)
    raw["models"] = [deep_merge(copy.deepcopy(MODEL), model or {})]
    return load_deployment(raw).spec


def only_pool(spec: DeploymentSpec) -> GpuNodePoolSpec:
    assert isinstance(spec.cluster, EksCluster)
    return spec.cluster.node_pools[0]


def node_pools(spec: DeploymentSpec) -> list[dict[str, Any]]:
    return [o for o in build_manifests(spec) if o["kind"] == "NodePool"]


def selector_satisfied_by(pod: dict[str, Any], node_pool: dict[str, Any]) -> bool:
    """Can Karpenter launch a node for this pod from this NodePool? Every nodeSelector key must be a template label
    with that value or a requirement allowing it, and every required affinity expression must overlap the
    NodePool's requirement on the same key (Karpenter rejects a pod needing a label the NodePool does not define)."""
    template = node_pool["spec"]["template"]
    labels = template["metadata"]["labels"]
    requirements = {r["key"]: set(r["values"]) for r in template["spec"]["requirements"]}
    for key, value in pod.get("nodeSelector", {}).items():
        if labels.get(key) != value and value not in requirements.get(key, set()):
            return False
    terms = (pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    for term in terms:
        for expression in term["matchExpressions"]:
            assert expression["operator"] == "In"
            allowed = requirements.get(expression["key"], {labels[expression["key"]]} if expression["key"] in labels
                                       else set())
            if not allowed & set(expression["values"]):
                return False
    return True


def pod_spec(spec: DeploymentSpec) -> dict[str, Any]:
    return build_workload(plan_deployment(spec)[0])["spec"]["template"]["spec"]


@pytest.mark.parametrize("provisioner", ["karpenter", "auto-mode"])
@pytest.mark.parametrize("gpu", [gpu.id for gpu in EC2_GPUS])
def test_pod_selector_and_node_pool_agree_for_every_gpu_of_the_catalog(gpu: str, provisioner: str) -> None:
    def stack_on(gpu_id: str) -> DeploymentSpec:
        count = min(i.gpus for i in instances_with(gpu_id))
        pool = {**(KARPENTER_POOL if provisioner == "karpenter" else AUTO_MODE_POOL), "gpu": gpu_id,
                "gpus_per_node": count}
        return eks_stack(pool, {"gpu": gpu_id, "gpus_per_node": count, "engine": {"tensor_parallel_size": count}})

    name = next(g.aws_gpu_name for g in EC2_GPUS if g.id == gpu)
    other = next(g.id for g in EC2_GPUS if g.aws_gpu_name != name)
    spec = stack_on(gpu)
    pools = node_pools(spec)
    assert pools and all(selector_satisfied_by(pod_spec(spec), p) for p in pools)
    # The check can fail: a pool of another GPU does not satisfy this pod's selector (pool label made equal).
    foreign = node_pools(stack_on(other))
    assert not any(selector_satisfied_by(pod_spec(spec), p) for p in foreign)


def test_the_gfd_product_selector_of_a_node_group_would_match_no_node_pool() -> None:
    """Why Karpenter pools get their own selector: GFD's label appears only on a running node."""
    spec = eks_stack({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1}, {"gpu": "l4"})
    pod = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}
    assert not selector_satisfied_by(pod, node_pools(spec)[0])


def test_node_pool_requirements_come_from_the_instance_facts() -> None:
    spec = eks_stack({**KARPENTER_POOL, "instance_types": ["g6e.12xlarge", "g6e.24xlarge"]},
                     {"gpu": "l40s", "gpus_per_node": 4, "model": "llama-3.1-8b"})
    requirements = {r["key"]: r["values"] for r in node_pools(spec)[0]["spec"]["template"]["spec"]["requirements"]}
    assert requirements == {
        "node.kubernetes.io/instance-type": ["g6e.12xlarge", "g6e.24xlarge"],
        "karpenter.k8s.aws/instance-gpu-name": ["l40s"],
        "karpenter.k8s.aws/instance-gpu-count": ["4"],
        "kubernetes.io/arch": ["amd64"],
        "kubernetes.io/os": ["linux"],
        "karpenter.sh/capacity-type": ["on-demand"],
    }


@pytest.mark.parametrize(("capacity_types", "expected"), [
    pytest.param(["spot", "on-demand"], [("gpu", ["spot", "on-demand"], None)],
                 id="spot-then-on-demand-is-karpenters-own-order-one-nodepool"),
    pytest.param(["reserved", "spot", "on-demand"], [("gpu", ["reserved", "spot", "on-demand"], None)],
                 id="reserved-spot-on-demand-one-nodepool"),
    pytest.param(["on-demand", "spot"], [("gpu-on-demand", ["on-demand"], 100), ("gpu-spot", ["spot"], 90)],
                 id="on-demand-before-spot-needs-weighted-nodepools"),
])
def test_capacity_type_preference(capacity_types: list[str], expected: list[tuple[str, list[str], int | None]]) -> None:
    pool = {**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1, "capacity_types": capacity_types,
            **({"capacity_reservation_id": "cr-0123"} if "reserved" in capacity_types else {})}
    got = []
    for node_pool in node_pools(eks_stack(pool)):
        requirement = next(r for r in node_pool["spec"]["template"]["spec"]["requirements"]
                           if r["key"] == "karpenter.sh/capacity-type")
        got.append((node_pool["metadata"]["name"], requirement["values"], node_pool["spec"].get("weight")))
        # Every weighted NodePool carries the pool label the pods select.
        assert node_pool["spec"]["template"]["metadata"]["labels"][NODE_POOL_LABEL] == "gpu"
    assert got == expected


def test_disruption_waits_a_startup_budget_and_takes_one_node_at_a_time() -> None:
    spec = eks_stack({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1})
    budget = plan_deployment(spec)[0].startup_budget_seconds
    disruption = node_pools(spec)[0]["spec"]["disruption"]
    assert disruption == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{budget}s",
                          "budgets": [{"nodes": "1"}]}


def test_gpu_limit_is_max_size_nodes_or_max_gpus() -> None:
    pool = {**KARPENTER_POOL, "gpu": "a10g", "gpus_per_node": 4, "max_size": 3}
    spec = eks_stack(pool, {"gpu": "a10g", "gpus_per_node": 4})
    assert node_pools(spec)[0]["spec"]["limits"] == {"nvidia.com/gpu": "12"}
    spec = eks_stack({**pool, "max_gpus": 8}, {"gpu": "a10g", "gpus_per_node": 4})
    assert node_pools(spec)[0]["spec"]["limits"] == {"nvidia.com/gpu": "8"}
    assert pool_shape(only_pool(spec), 0).max_nodes == 2


@pytest.mark.parametrize(("ami_type", "alias", "devices"), [
    pytest.param("AL2023_x86_64_NVIDIA", "al2023@latest", ["/dev/xvda"], id="al2023-root-volume"),
    pytest.param("BOTTLEROCKET_x86_64_NVIDIA", "bottlerocket@latest", ["/dev/xvda", "/dev/xvdb"],
                 id="bottlerocket-os-and-data-volume"),
])
def test_ec2_node_class_from_the_pool(ami_type: str, alias: str, devices: list[str]) -> None:
    spec = eks_stack({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1, "ami_type": ami_type, "disk_size_gib": 300})
    node_class = next(o for o in build_manifests(spec) if o["kind"] == "EC2NodeClass")["spec"]
    assert node_class["role"] == "KarpenterNodeRole-ml"
    assert node_class["amiSelectorTerms"] == [{"alias": alias}]
    assert node_class["subnetSelectorTerms"] == [{"id": "subnet-1"}]
    assert node_class["securityGroupSelectorTerms"] == [{"id": "sg-1"}]
    assert [d["deviceName"] for d in node_class["blockDeviceMappings"]] == devices
    assert node_class["blockDeviceMappings"][-1]["ebs"]["volumeSize"] == "300Gi"


def test_auto_mode_points_at_the_built_in_node_class_and_renders_no_ec2_node_class() -> None:
    objects = build_manifests(eks_stack({**AUTO_MODE_POOL, "gpu": "l4", "gpus_per_node": 1}))
    assert not [o for o in objects if o["kind"] == "EC2NodeClass"]
    node_pool = next(o for o in objects if o["kind"] == "NodePool")["spec"]["template"]["spec"]
    assert node_pool["nodeClassRef"] == {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}
    assert {r["key"] for r in node_pool["requirements"]} >= {"eks.amazonaws.com/instance-gpu-name",
                                                              "eks.amazonaws.com/instance-gpu-count"}


@pytest.mark.parametrize("provisioner", ["karpenter", "auto-mode"])
def test_serving_pods_are_not_voluntarily_disrupted_on_karpenter_pools(provisioner: str) -> None:
    pool = {**(KARPENTER_POOL if provisioner == "karpenter" else AUTO_MODE_POOL), "gpu": "l4", "gpus_per_node": 1}
    workload = build_workload(plan_deployment(eks_stack(pool))[0])
    assert workload["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


def test_managed_node_group_pods_keep_the_gfd_selector_and_no_karpenter_annotation() -> None:
    pool = {"name": "gpu", "instance_type": "g6.4xlarge", "subnet_ids": ["subnet-1"]}
    workload = build_workload(plan_deployment(eks_stack(pool))[0])
    assert workload["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L4"}
    assert "karpenter.sh/do-not-disrupt" not in workload["spec"]["template"]["metadata"]["annotations"]


def test_local_nvme_hydration_job_lands_on_the_same_pool() -> None:
    spec = eks_stack({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1},
                     {"storage": {"kind": "local-nvme", "storage_class": "local-sc"}})
    plan = plan_deployment(spec)[0]
    job = next(o for o in build_storage(plan) if o["kind"] == "Job")["spec"]["template"]["spec"]
    assert all(selector_satisfied_by(job, p) for p in node_pools(spec))


@pytest.mark.parametrize(("provisioners", "device_plugin", "driver"), [
    pytest.param(["auto-mode"], False, False, id="auto-mode-nodes-have-aws-device-plugin-and-driver"),
    pytest.param(["karpenter"], True, False, id="karpenter-on-eks-nvidia-ami-driver-off-as-node-groups"),
    pytest.param(["managed-node-group"], True, False, id="node-groups-unchanged"),
])
def test_gpu_operator_follows_the_provisioner(provisioners: list[str], device_plugin: bool, driver: bool) -> None:
    from vllm_pulumi.runtime.spec.deployment import GpuOperatorSpec

    values = gpu_operator_values(GpuOperatorSpec(), "eks", ObservabilitySpec(), provisioners)
    assert (values["devicePlugin"]["enabled"], values["driver"]["enabled"], values["toolkit"]["enabled"]) == (
        device_plugin, driver, driver)


@pytest.mark.parametrize(("pool", "settings", "message"), [
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "node_role_arn": None}, {}, "exactly one of node_role_arn",
                 id="karpenter-without-node-identity"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "security_group_ids": []}, {},
                 "security_group_ids or security_group_tags",
                 id="karpenter-without-security-groups"),
    pytest.param({**KARPENTER_POOL}, {}, "exactly one of instance_type, instance_types or gpu",
                 id="karpenter-without-instance-types"),
    pytest.param({**KARPENTER_POOL, "instance_types": ["g6.xlarge", "g6.12xlarge"]}, {}, "different GPU counts",
                 id="types-with-different-gpu-counts"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "min_size": 1}, {}, "Karpenter keeps no minimum",
                 id="karpenter-min-size"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "capacity_types": ["reserved"]}, {}, "capacity_reservation_id",
                 id="reserved-without-reservation"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "capacity_reservation_id": "cr-1"}, {}, "go together",
                 id="reservation-without-reserved-capacity"),
    pytest.param({**AUTO_MODE_POOL, "gpu": "l4", "disk_size_gib": 300}, {}, "disk_size_gib",
                 id="auto-mode-disk-is-the-node-class's"),
    pytest.param({**AUTO_MODE_POOL, "gpu": "l4", "security_group_ids": ["sg-1"]}, {}, "auto-mode does not use",
                 id="auto-mode-with-ec2-node-class-settings"),
    pytest.param({"name": "gpu", "subnet_ids": ["s"], "gpu": "l4"}, {}, "needs instance_type",
                 id="node-group-without-instance-type"),
    pytest.param({**AUTO_MODE_POOL, "gpu": "l4"}, {"addons": {"gpu_operator": {"install": True}}}, None,
                 id="auto-mode-alone-with-the-operator-is-fine"),
])
def test_bad_pool_settings_are_refused_with_the_reason(pool: dict[str, Any], settings: dict[str, Any],
                                                        message: str | None) -> None:
    if message is None:
        eks_stack(pool, **settings)
        return
    with pytest.raises(SpecError) as error:
        eks_stack(pool, **settings)
    assert message in str(error.value)
    assert "cluster.node_pools[0]" in str(error.value)


def test_mixing_auto_mode_with_other_pools_under_the_operator_is_refused() -> None:
    raw_pool = {**AUTO_MODE_POOL, "gpu": "l4"}
    with pytest.raises(SpecError, match="mixes provisioner auto-mode with managed-node-group"):
        spec = eks_stack(raw_pool, addons={"gpu_operator": {"install": True}})
        raw = spec.model_dump()
        raw["cluster"]["node_pools"].append({"name": "ng", "instance_type": "g6.xlarge", "subnet_ids": ["s"]})
        load_deployment(raw)


def test_unknown_gpu_of_a_pool_names_the_setting() -> None:
    with pytest.raises(SpecError) as error:
        eks_stack({**KARPENTER_POOL, "gpu": "h100-pcie"})
    assert "cluster.node_pools[0].gpu" in str(error.value)


def test_karpenter_stack_validates_against_the_pinned_crds_and_plans_on_the_smaller_gpu() -> None:
    spec = load_stack("karpenter")
    objects = build_manifests(spec)
    validate_all([o for o in objects if o["kind"] in ("NodePool", "EC2NodeClass")])
    shape = plan_deployment(spec)[0].node_shape
    assert (shape.instance_type, shape.gpu.id, shape.gpu_names, shape.provisioner) == (
        "p5.48xlarge", "h100-sxm", ("h100", "h200"), "karpenter")


@pytest.mark.parametrize("pool", [
    pytest.param({**KARPENTER_POOL, "gpu": "l40s"}, id="karpenter-by-gpu"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1, "capacity_types": ["on-demand", "spot"]},
                 id="karpenter-weighted"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1, "capacity_types": ["reserved", "on-demand"],
                  "capacity_reservation_id": "cr-0123456789abcdef0"}, id="karpenter-reserved"),
    pytest.param({**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1, "security_group_ids": [],
                  "security_group_tags": {"karpenter.sh/discovery": "ml"}, "node_role_arn": None,
                  "instance_profile": "KarpenterNodeInstanceProfile", "ami_type": "BOTTLEROCKET_x86_64_NVIDIA",
                  "ami_alias": "bottlerocket@v1.40.0"}, id="karpenter-bottlerocket-instance-profile-tags"),
    pytest.param({**AUTO_MODE_POOL, "gpu": "l4", "gpus_per_node": 1, "capacity_types": ["spot", "on-demand"]},
                 id="auto-mode"),
])
def test_every_rendered_node_pool_and_node_class_validates_against_the_pinned_crds(pool: dict[str, Any]) -> None:
    objects = [o for o in build_manifests(eks_stack(pool)) if o["kind"] in ("NodePool", "EC2NodeClass")]
    assert objects
    validate_all(objects)


def test_restricted_template_labels_are_refused() -> None:
    with pytest.raises(SpecError, match="karpenter.sh"):
        eks_stack({**KARPENTER_POOL, "gpu": "l4", "labels": {"karpenter.sh/nodepool": "x"}})


@pytest.mark.parametrize(("consolidate_after_seconds", "warned"), [
    pytest.param(60, True, id="shorter-than-the-startup-budget-warns"),
    pytest.param(3600, False, id="longer-is-fine"),
    pytest.param(None, False, id="derived-is-the-budget"),
])
def test_consolidate_after_set_by_hand_below_the_startup_budget_is_warned(consolidate_after_seconds: int | None,
                                                                          warned: bool) -> None:
    pool = {**KARPENTER_POOL, "gpu": "l4", "gpus_per_node": 1,
            **({"consolidate_after_seconds": consolidate_after_seconds} if consolidate_after_seconds else {})}
    plan = plan_deployment(eks_stack(pool))[0]
    assert any("consolidate_after_seconds" in warning for warning in plan.warnings) == warned
