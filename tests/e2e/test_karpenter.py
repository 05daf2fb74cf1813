"""The `karpenter` stack under Karpenter itself: Karpenter core with its KWOK cloud provider
(tests/e2e/harness/karpenter.py) launches and removes the simulated cluster's GPU nodes for the stack's NodePool and
vLLM Deployment.

The stack's objects are applied as rendered (``build_manifests``), not through `pulumi up`: the stack targets an EKS
cluster (its program would create AWS resources), and what matters here is what Karpenter does with the objects.
Two test-only transforms, and nothing else: a KWOKNodeClass in place of the EC2NodeClass (nodeClassRef rewritten),
and consolidateAfter shortened from the stack's startup budget (716 s) to CONSOLIDATE_AFTER_SECONDS so the test fits
its budget. Not applied: the hydration Job (the PersistentVolume is provided bound, as after hydration) and the
KEDA and Prometheus Operator objects (no such controllers run here; the test scales the Deployment as KEDA's HPA
would, through the scale subresource). Pods load for LOAD_SECONDS (KWOK's pod-ready delay): Running, not Ready, as a
kubelet reports vLLM behind its startup probe.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.components.manifests import build_manifests, read_stack_config
from vllm_pulumi.runtime.planning.deployment import plan_deployment
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.facts.instances import INSTANCES, find_instance
from vllm_pulumi.runtime.planning.pools import stated_nodes_shape
from vllm_pulumi.runtime.vocabulary import GPU_TAINT
from vllm_pulumi.runtime.spec.cluster import GpuNodesSpec
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.vocabulary import (
    APP_COMPONENT_LABEL,
    APP_INSTANCE_LABEL,
    CAPACITY_TYPE_LABEL,
    DO_NOT_DISRUPT_ANNOTATION,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    KARPENTER_AWS_LABEL_PREFIX,
    KARPENTER_GPU_NAME_LABEL,
    KARPENTER_NODEPOOL_LABEL,
)

from .harness.cluster import SimulatedCluster, pod_ready
from .harness.control_plane import object_path
from .harness.karpenter import (
    KWOK_KUBE_RESERVED_CPU_MILLICORES,
    KWOK_KUBE_RESERVED_MEMORY_MIB,
    NODECLAIM_API,
    NODEPOOL_API,
    apply_node_classes,
    instance_types,
    karpenter_nodes,
    node_labels_expected,
    nodeclaims,
    root_disk_gib,
    start_karpenter,
    with_consolidate_after,
    with_kwok_node_class,
)
from .harness.simulation import Sampler, diagnose, ready_endpoint_addresses, timestamp

STACK = "karpenter"
# A vLLM pod's load, compressed (the stack's startup budget is 716 s). Long enough for Karpenter to replace a drifted
# node while a pod on it still loads (about 30 s here: its 20 s nomination window, a 10 s disruption poll, the launch).
LOAD_SECONDS = 45
CONSOLIDATE_AFTER_SECONDS = 20
# Karpenter: batching (up to 10 s), launch and registration; then the scheduler binds.
PROVISION_TIMEOUT_SECONDS = 60
# After consolidateAfter: the 15 s validation of an empty-node command and up to one 10 s disruption poll, then drain.
REMOVAL_TIMEOUT_SECONDS = CONSOLIDATE_AFTER_SECONDS + 60
# Kinds not applied (see the module docstring).
NOT_APPLIED = ("Job", "ScaledObject", "ServiceMonitor", "PrometheusRule")
# The change a later `pulumi up` of the pool would make to the NodePool's node template: Karpenter sees every node
# launched before it as drifted and replaces it, unless a pod on it says otherwise.
TEMPLATE_CHANGE = {"spec": {"template": {"metadata": {"labels": {"vllm-pulumi.dev/simulated-update": "1"}}}}}


# ---- the instance-types file and the transform, without a cluster ----------------------------------------------------
def test_instance_types_file_offers_every_gpu_instance_with_the_planners_allocatable() -> None:
    """Every EC2 GPU type of runtime/instances.py is in the KWOK provider's file, with its GPUs and EKS pod limit,
    spot and on-demand in each zone (spot cheaper), the AWS provider's instance labels, and resources such that the
    Node Karpenter launches has exactly the allocatable CPU, memory and disk the planner places pods on."""
    entries = {entry["name"]: entry for entry in instance_types()}
    assert sorted(entries) == sorted(instance.instance_type for instance in INSTANCES)
    for name, entry in entries.items():
        instance = find_instance(name)
        shape = stated_nodes_shape(GpuNodesSpec(name="sim", instance_type=name, count=1), 0)
        resources = entry["resources"]
        assert resources[GPU_RESOURCE] == str(instance.gpus) and resources["pods"] == str(instance.eks_max_pods)
        assert int(resources["cpu"].removesuffix("m")) - KWOK_KUBE_RESERVED_CPU_MILLICORES == \
            shape.allocatable_cpu_millicores, name
        assert int(resources["memory"].removesuffix("Mi")) - KWOK_KUBE_RESERVED_MEMORY_MIB == \
            shape.allocatable_memory_mib, name
        assert resources["ephemeral-storage"] == f"{shape.allocatable_ephemeral_storage_gib}Gi", name
        prices: dict[str, set[float]] = {}
        for offering in entry["offerings"]:
            requirements = {r["key"]: r["values"] for r in offering["Requirements"]}
            prices.setdefault(requirements[CAPACITY_TYPE_LABEL][0], set()).add(offering["Price"])
            assert {key: values[0] for key, values in requirements.items()}.items() >= {
                k: v for k, v in node_labels_expected(instance).items()
                if k.startswith(KARPENTER_AWS_LABEL_PREFIX)}.items()
        assert max(prices["spot"]) < min(prices["on-demand"]), name
    assert entries["p5.48xlarge"]["offerings"][0]["Price"] < entries["p5e.48xlarge"]["offerings"][0]["Price"]


def test_kwok_transform_changes_only_the_node_class() -> None:
    """The test-only transform replaces the EC2NodeClass by a KWOKNodeClass of the same name and repoints the
    NodePool's nodeClassRef; every other rendered object and every other NodePool field is unchanged."""
    rendered = build_manifests(load_deployment(read_stack_config(STACK)).spec)
    transformed = with_kwok_node_class(rendered)
    assert [(o["kind"], o["metadata"]["name"]) for o in transformed] == [
        ("KWOKNodeClass" if o["kind"] == "EC2NodeClass" else o["kind"], o["metadata"]["name"]) for o in rendered]
    for before, after in zip(rendered, transformed, strict=True):
        if before["kind"] == "NodePool":
            ref = after["spec"]["template"]["spec"]["nodeClassRef"]
            assert ref == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                           "name": before["spec"]["template"]["spec"]["nodeClassRef"]["name"]}
            before, after = copy.deepcopy(before), copy.deepcopy(after)
            del before["spec"]["template"]["spec"]["nodeClassRef"], after["spec"]["template"]["spec"]["nodeClassRef"]
        if before["kind"] != "EC2NodeClass":
            assert after == before


@pytest.mark.parametrize(("ami_type", "disk_size_gib", "expected_gib"), [
    ("AL2023_x86_64_NVIDIA", None, 200),  # the project's GPU node disk, the root volume
    ("AL2023_x86_64_NVIDIA", 500, 500),
    ("BOTTLEROCKET_x86_64_NVIDIA", 300, 300),  # Bottlerocket's data volume, not its 4 GiB OS volume
])
def test_simulated_nodes_get_the_ephemeral_storage_of_the_ec2_node_class_disk(
    ami_type: str, disk_size_gib: int | None, expected_gib: int
) -> None:
    """The simulated instance types get the ephemeral storage of the disk the stack's EC2NodeClass gives its nodes
    (the one the AWS provider reports as the node's ephemeral storage)."""
    raw = copy.deepcopy(read_stack_config(STACK))
    raw["cluster"]["node_pools"][0].update(ami_type=ami_type, disk_size_gib=disk_size_gib)
    rendered = build_manifests(load_deployment(raw).spec)
    node_class = next(o for o in rendered if o["kind"] == "EC2NodeClass")["metadata"]["name"]
    assert root_disk_gib(rendered, node_class) == expected_gib


# ---- Karpenter in the simulated cluster -----------------------------------------------------------------------------
def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _requirement(nodepool: dict[str, Any], key: str) -> list[str]:
    return next(r["values"] for r in nodepool["spec"]["template"]["spec"]["requirements"] if r["key"] == key)


def _scale(cluster: SimulatedCluster, plan: ServingPlan, name: str, replicas: int) -> None:
    cluster.merge_patch(f"/apis/apps/v1/namespaces/{plan.namespace}/deployments/{name}/scale",
                        {"spec": {"replicas": replicas}})


def _pods(cluster: SimulatedCluster, plan: ServingPlan, instance: str) -> list[dict[str, Any]]:
    """The serving pods of the Deployment whose instance label is ``instance`` (not deleting)."""
    selector = f"{APP_INSTANCE_LABEL}={instance},{APP_COMPONENT_LABEL}=server"
    return [pod for pod in cluster.pods(plan.namespace, selector) if not pod["metadata"].get("deletionTimestamp")]


def _all_bound(pods: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    return pods if len(pods) == count and all(pod["spec"].get("nodeName") for pod in pods) else None


def _unprotected_copy(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    """The stack's Deployment under another name and instance label, without karpenter.sh/do-not-disrupt: what the
    stack's pods would be without the annotation (same node selection, requests, tolerations and probes)."""
    copied = copy.deepcopy(deployment)
    copied["metadata"]["name"] = name
    for labels in (copied["metadata"]["labels"], copied["spec"]["selector"]["matchLabels"],
                   copied["spec"]["template"]["metadata"]["labels"]):
        labels[APP_INSTANCE_LABEL] = name
    del copied["spec"]["template"]["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION]
    copied["spec"]["replicas"] = 1
    return copied


@dataclass
class KarpenterStack:
    """The `karpenter` stack applied under Karpenter: what the steps of the test below share."""

    cluster: SimulatedCluster
    plan: ServingPlan
    stack_nodepool: dict[str, Any]
    deployment: dict[str, Any]
    diagnosis: Callable[[], str]

    @property
    def name(self) -> str:
        return self.plan.spec.name

    @property
    def namespace(self) -> str:
        return self.plan.namespace

    @property
    def pool(self) -> str:
        return str(self.stack_nodepool["metadata"]["name"])

    @property
    def unprotected(self) -> str:
        """The name of the Deployment copy without karpenter.sh/do-not-disrupt."""
        return f"{self.name}-unannotated"

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.cluster.find(f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def drifted(self, nodes: set[str], status: str) -> bool:
        claims = {c["status"].get("nodeName"): c for c in nodeclaims(self.cluster)}
        return all(_condition(claims[node], "Drifted").get("status", "False") == status for node in nodes)


@dataclass
class Launched:
    """What step 1 launched: the stack's two serving pods and their nodes, the copy's pod and its node."""

    ours: list[dict[str, Any]]
    ours_nodes: set[str]
    copy_pod: dict[str, Any]
    copy_node: str


def _apply_the_stack_under_karpenter(cluster: SimulatedCluster, tmp_path: Path) -> KarpenterStack:
    """Karpenter started with the stack's disk, system nodes and volumes provided, every object applied but those
    not applied (NOT_APPLIED) and the node class; returns once the NodePool is Ready."""
    rendered = build_manifests(load_deployment(read_stack_config(STACK)).spec)
    plan = load_deployment(read_stack_config(STACK)).plans[0]
    stack_nodepool = next(o for o in rendered if o["kind"] == "NodePool")
    objects = with_consolidate_after(with_kwok_node_class(rendered), CONSOLIDATE_AFTER_SECONDS)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    node_class = stack_nodepool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
    start_karpenter(cluster, tmp_path / "cluster", root_disk_gib(rendered, node_class))
    cluster.add_system_nodes()
    cluster.provide_volumes(rendered)
    apply_node_classes(cluster, objects)
    for obj in objects:
        if obj["kind"] not in (*NOT_APPLIED, "KWOKNodeClass"):
            cluster.create(object_path(obj).rsplit("/", 1)[0], obj)
    report = diagnose(cluster, plan.namespace)

    def diagnosis() -> str:
        claims = [f"{c['metadata']['name']}: " + ", ".join(
            f"{x['type']}={x['status']}" for x in (c.get("status") or {}).get("conditions") or [])
            for c in nodeclaims(cluster)]
        return report() + "\nnodeclaims:\n  " + "\n  ".join(claims) + "\nkarpenter:\n" + \
            cluster.processes.log_tail("karpenter-kwok")

    stack = KarpenterStack(cluster, plan, stack_nodepool, deployment, diagnosis)
    pool = stack.pool
    cluster.wait(lambda: _condition(cluster.get(f"{NODEPOOL_API}/{pool}"), "Ready").get("status") == "True",
                 PROVISION_TIMEOUT_SECONDS, f"NodePool {pool} Ready", diagnosis)
    return stack


def _pending_pods_get_nodes_of_the_right_gpu_type(stack: KarpenterStack) -> Launched:
    """Step 1: no GPU node before a pod asks; then one node per pod, of an allowed type, labelled, tainted and with
    the allocatable the plan was made for."""
    cluster, plan, name, pool = stack.cluster, stack.plan, stack.name, stack.pool
    assert not karpenter_nodes(cluster, pool), "a GPU node exists before any pod asked for one"
    _scale(cluster, plan, name, 2)
    cluster.create(f"/apis/apps/v1/namespaces/{stack.namespace}/deployments",
                   _unprotected_copy(stack.deployment, stack.unprotected))
    cluster.wait(lambda: _all_bound(_pods(cluster, plan, name), 2)
                 and _all_bound(_pods(cluster, plan, stack.unprotected), 1),
                 PROVISION_TIMEOUT_SECONDS, "Karpenter to launch nodes for the 3 Pending serving pods", stack.diagnosis)
    ours, [copy_pod] = _pods(cluster, plan, name), _pods(cluster, plan, stack.unprotected)
    launched = Launched(ours, {p["spec"]["nodeName"] for p in ours}, copy_pod, copy_pod["spec"]["nodeName"])
    assert len(launched.ours_nodes | {launched.copy_node}) == 3 == len(nodeclaims(cluster)), "one node per 8-GPU pod"
    allowed_types = _requirement(stack.stack_nodepool, INSTANCE_TYPE_LABEL)
    first_capacity_type = _requirement(stack.stack_nodepool, CAPACITY_TYPE_LABEL)[0]
    for serving in ours:
        assert not pod_ready(serving)
        node = cluster.node_of(serving)
        labels = node["metadata"]["labels"]
        instance = find_instance(labels[INSTANCE_TYPE_LABEL])
        assert instance.instance_type in allowed_types and labels[CAPACITY_TYPE_LABEL] == first_capacity_type
        assert labels[KARPENTER_NODEPOOL_LABEL] == pool
        assert labels[KARPENTER_GPU_NAME_LABEL] in plan.node_shape.gpu_names
        assert labels.items() >= {**node_labels_expected(instance), **serving["spec"]["nodeSelector"]}.items()
        [term] = serving["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert all(labels.get(e["key"]) in e["values"] for e in term["matchExpressions"]), (term, labels)
        assert GPU_TAINT in node["spec"]["taints"]
        requested = int(serving["spec"]["containers"][0]["resources"]["limits"][GPU_RESOURCE])
        assert requested == plan.layout.gpus_per_pod <= int(node["status"]["allocatable"][GPU_RESOURCE])
        if instance.instance_type == plan.node_shape.instance_type:  # the type the plan was made for: its numbers
            allocatable = node["status"]["allocatable"]
            assert allocatable["cpu"] == f"{plan.node_shape.allocatable_cpu_millicores}m"
            assert allocatable["memory"] == f"{plan.node_shape.allocatable_memory_mib}Mi"
    return launched


def _drift_replaces_the_copys_node_mid_load_and_keeps_ours(stack: KarpenterStack, launched: Launched) -> None:
    """Step 2: drift while the pods load: the unannotated copy's node is replaced mid-load, the stack's nodes stay."""
    cluster, pool, ours, ours_nodes = stack.cluster, stack.pool, launched.ours, launched.ours_nodes
    cluster.merge_patch(f"{NODEPOOL_API}/{pool}", TEMPLATE_CHANGE)
    cluster.wait(lambda: stack.drifted(ours_nodes | {launched.copy_node}, "True"), 30,
                 "Karpenter to mark the nodes drifted", stack.diagnosis)
    ours_present = Sampler(lambda: len(ours_nodes & {n["metadata"]["name"] for n in karpenter_nodes(cluster, pool)}),
                           period_seconds=0.5)
    copy_states: list[bool] = []

    def copy_node_replaced() -> bool:
        seen = stack.pod(launched.copy_pod["metadata"]["name"])
        if seen is not None:
            copy_states.append(pod_ready(seen))
        return cluster.find(f"/api/v1/nodes/{launched.copy_node}") is None

    with ours_present.running():
        cluster.wait(copy_node_replaced, LOAD_SECONDS + 30, "Karpenter to replace the drifted node of the copy",
                     stack.diagnosis)
        assert not any(pod_ready(stack.pod(p["metadata"]["name"]) or {}) for p in ours), \
            "the stack's pods finished loading before the copy's node was replaced: nothing was compared"
        cluster.wait(lambda: all(pod_ready(stack.pod(p["metadata"]["name"]) or {}) for p in ours), LOAD_SECONDS + 30,
                     "the stack's pods to finish loading where they started", stack.diagnosis)
    assert copy_states and not any(copy_states), "the copy's pod was Ready before its node went: not mid-load"
    assert not ours_present.errors, ours_present.errors
    assert ours_present.samples and min(ours_present.samples) == 2, ours_present.samples
    assert ready_endpoint_addresses(cluster, stack.namespace, stack.name) == sorted(
        (stack.pod(p["metadata"]["name"]) or {})["status"]["podIP"] for p in ours)


def _the_emptied_node_goes_after_consolidate_after(stack: KarpenterStack, launched: Launched) -> None:
    """Step 3: the update rolled back, the copy deleted; scale-down: the emptied node goes after consolidateAfter."""
    cluster, plan, name, pool, ours_nodes = stack.cluster, stack.plan, stack.name, stack.pool, launched.ours_nodes
    cluster.merge_patch(f"{NODEPOOL_API}/{pool}", {"spec": {"template": {"metadata": {"labels": {
        key: None for key in TEMPLATE_CHANGE["spec"]["template"]["metadata"]["labels"]}}}}})
    status, answer = cluster.request(
        "DELETE", f"/apis/apps/v1/namespaces/{stack.namespace}/deployments/{stack.unprotected}")
    assert status == 200, answer
    cluster.wait(lambda: stack.drifted(ours_nodes, "False") and {n["metadata"]["name"] for n in karpenter_nodes(
        cluster, pool)} == ours_nodes, REMOVAL_TIMEOUT_SECONDS,
        "the stack's nodes no longer drifted, the copy's node gone", stack.diagnosis)
    claim_of = {c["status"]["nodeName"]: c["metadata"]["name"] for c in nodeclaims(cluster)}
    scaled_down_at = time.time()
    _scale(cluster, plan, name, 1)
    [kept] = cluster.wait(lambda: _all_bound(_pods(cluster, plan, name), 1), 30, "the Deployment at 1 replica",
                          stack.diagnosis)
    [emptied] = ours_nodes - {kept["spec"]["nodeName"]}
    emptied_claim = claim_of[emptied]
    deleted_at: list[str] = []

    def emptied_node_gone() -> bool:
        claim = cluster.find(f"{NODECLAIM_API}/{emptied_claim}")
        if claim and claim["metadata"].get("deletionTimestamp") and not deleted_at:
            deleted_at.append(claim["metadata"]["deletionTimestamp"])
        return claim is None and cluster.find(f"/api/v1/nodes/{emptied}") is None

    cluster.wait(emptied_node_gone, REMOVAL_TIMEOUT_SECONDS, f"Karpenter to remove the emptied node {emptied}",
                 stack.diagnosis)
    assert deleted_at, "the NodeClaim vanished without being seen deleting"
    assert timestamp(deleted_at[0]).timestamp() >= scaled_down_at + CONSOLIDATE_AFTER_SECONDS - 1, (
        f"removed {timestamp(deleted_at[0]).timestamp() - scaled_down_at:.0f} s after the scale-down, before "
        f"consolidateAfter {CONSOLIDATE_AFTER_SECONDS} s")
    reasons = [e.get("message", "") for e in cluster.items("/api/v1/namespaces/default/events")
               if e["involvedObject"].get("name") == emptied_claim and e.get("reason") == "DisruptionTerminating"]
    assert any("Empty" in message for message in reasons), reasons
    assert [n["metadata"]["name"] for n in karpenter_nodes(cluster, pool)] == [kept["spec"]["nodeName"]]
    assert pod_ready(stack.pod(kept["metadata"]["name"]) or {})


@pytest.mark.e2e
# Only the CRD of the LWS controller the harness always runs (start_karpenter installs Karpenter's); pods load for
# LOAD_SECONDS, Running and not Ready meanwhile.
@pytest.mark.cluster_options(crd_prefix="leaderworkerset.", pod_ready_delay_milliseconds=LOAD_SECONDS * 1000,
                             running_while_loading=True)
def test_karpenter_launches_gpu_nodes_for_pending_pods_removes_empty_ones_and_never_a_loading_one(
    cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """The `karpenter` stack's NodePool and Deployment with Karpenter 1.15 deciding:

    1. No GPU node exists until serving pods are Pending. For 2 replicas of the stack and a copy of its Deployment
       without karpenter.sh/do-not-disrupt, Karpenter launches one node per pod, of a type the NodePool allows (the
       cheapest: p5.48xlarge on spot, the stack's first capacity type), with the labels the pods select on, the GPU
       taint and the allocatable resources the plan was made for.
    2. While the pods load, the NodePool's template changes (as a later `pulumi up` of the pool would), so Karpenter
       sees every node as drifted. It replaces the copy's node while its pod is still loading (the failure the
       annotation prevents), and removes no node that runs a pod of the stack: both finish loading and turn Ready
       where they started, and the Service routes to them.
    3. With the change rolled back and the copy gone, the stack is scaled to 1 replica: Karpenter's emptiness
       consolidation removes the emptied node, not before consolidateAfter has passed since the pod left, and the
       node still serving stays.
    """
    stack = _apply_the_stack_under_karpenter(cluster, tmp_path)
    launched = _pending_pods_get_nodes_of_the_right_gpu_type(stack)
    _drift_replaces_the_copys_node_mid_load_and_keeps_ours(stack, launched)
    _the_emptied_node_goes_after_consolidate_after(stack, launched)
