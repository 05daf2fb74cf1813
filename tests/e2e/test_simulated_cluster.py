"""The reference stacks in a simulated GPU cluster, with the real Pulumi engine and the real controllers.

`pulumi up` runs without `skipAwait`: the Kubernetes provider waits for the hydration Job to complete, the
Deployment or StatefulSets to roll out and the Service to get endpoints, exactly as in production. The scheduler
places every pod by the nodes' labels, taints and allocatable resources, made from the same node facts the planner
uses (tests/e2e/harness/cluster.py). What each test proves is in its docstring.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.components.manifests import build_manifests
from vllm_pulumi.runtime.planning.deployment import plan_deployment
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.deployment import node_shapes
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.vocabulary import GPU_PRODUCT_LABEL, GPU_RESOURCE, LWS_WORKER_INDEX_LABEL

from .harness.cluster import SimulatedCluster, pod_ready
from .harness.control_plane import object_path
from .harness.engine import requires_engine
from .harness.simulation import (
    Deployed,
    deploy_on,
    Sampler,
    diagnose,
    lws_groups,
    ready_endpoint_addresses,
    ready_replicas,
    secrets_by_reference,
    serving_pods,
    simulated_variant,
    timestamp,
)

pytestmark = [pytest.mark.e2e, requires_engine]

ROLLOUT_TIMEOUT_SECONDS = 300


def _assert_served(cluster: SimulatedCluster, deployed: Deployed) -> None:
    """Every serving pod Ready on a node of its GPU; LWS groups whole and spread; the Service routes to them."""
    for plan in deployed.plans:
        replicas = plan.spec.autoscaling.min_replicas if plan.spec.autoscaling else plan.spec.replicas
        pods = serving_pods(cluster, plan)
        assert len(pods) == replicas * plan.layout.size, [p["metadata"]["name"] for p in pods]
        for pod in pods:
            assert pod_ready(pod), pod["metadata"]["name"]
            node = cluster.node_of(pod)
            labels = node["metadata"]["labels"]
            assert labels[GPU_PRODUCT_LABEL] == plan.gpu.product_label, (pod["metadata"]["name"], labels)
            assert pod["spec"]["nodeSelector"].items() <= labels.items()
            requested = int(pod["spec"]["containers"][0]["resources"]["limits"][GPU_RESOURCE])
            assert requested == plan.layout.gpus_per_pod <= int(node["status"]["allocatable"][GPU_RESOURCE])
        if plan.multi_node:
            groups = lws_groups(pods)
            assert len(groups) == replicas
            for index, members in groups.items():
                assert len(members) == plan.layout.size, (index, [p["metadata"]["name"] for p in members])
                nodes = {pod["spec"]["nodeName"] for pod in members}
                assert len(nodes) == plan.layout.size, f"group {index} shares nodes: {nodes}"
        if plan.uses_pvc and plan.spec.storage.hydrate and not plan.spec.storage.existing_claim:
            job = next(o for o in deployed.manifests if o["kind"] == "Job" and o["metadata"]["name"].startswith(
                plan.spec.name))
            status = cluster.get(f"/apis/batch/v1/namespaces/{plan.namespace}/jobs/{job['metadata']['name']}")
            completed = status["status"].get("completionTime")
            assert completed, f"hydration Job {job['metadata']['name']} did not complete: {status['status']}"
            first_server = min(timestamp(pod["metadata"]["creationTimestamp"]) for pod in pods)
            assert timestamp(completed) <= first_server, "a serving pod was created before the weights were there"
        leaders = [pod for pod in pods if not plan.multi_node
                   or pod["metadata"]["labels"].get(LWS_WORKER_INDEX_LABEL) == "0"]
        addresses = ready_endpoint_addresses(cluster, plan.namespace, plan.spec.name)
        assert addresses == sorted(pod["status"]["podIP"] for pod in leaders)


@pytest.mark.parametrize("name", ["local", "edge", "prod", "multinode"])
def test_reference_stack_goes_up_on_its_nodes_and_is_destroyed_cleanly(
    name: str, cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """`pulumi up` of each reference stack completes with the provider awaiting real readiness: the hydration Job
    completes before any serving pod exists, every serving pod is scheduled onto a node of the planned GPU and turns
    Ready, LeaderWorkerSet groups form with `size` pods on distinct nodes, and the Service's EndpointSlices list the
    serving pods. A second `up` changes nothing, and `pulumi destroy` leaves none of our objects behind (the namespace too, when the
    stack created it; `edge` uses an existing one, with its Secrets, which stays)."""
    deployed = deploy_on(name, cluster, tmp_path)
    deployed.up()
    _assert_served(cluster, deployed)
    deployed.pulumi("preview", "--non-interactive", "--expect-no-changes", "--diff")

    deployed.pulumi("destroy", "--yes", "--non-interactive", "--skip-preview")
    namespace = deployed.spec.namespace
    if deployed.spec.create_namespace:
        cluster.wait(lambda: cluster.find(f"/api/v1/namespaces/{namespace}") is None, 120,
                     f"namespace {namespace} to be deleted", diagnose(cluster, namespace))
    else:  # the namespace was there before the stack (with the Secrets it references), and stays
        cluster.wait(lambda: not [pod for plan in deployed.plans for pod in serving_pods(cluster, plan)], 120,
                     "the serving pods to be deleted", diagnose(cluster, namespace))
        assert cluster.find(f"/api/v1/namespaces/{namespace}") is not None
    for obj in deployed.manifests:
        assert cluster.find(object_path(obj)) is None, f"{obj['kind']} {obj['metadata']['name']} left behind"


def _replicas_path(deployed: Deployed) -> tuple[str, str]:
    plan = deployed.plans[0]
    if plan.multi_node:
        return "/apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets"
    return "/apis/apps/v1", "deployments"


def _scale(cluster: SimulatedCluster, deployed: Deployed, replicas: int) -> None:
    """Set the replica count through the scale subresource, as KEDA's HPA does."""
    plan = deployed.plans[0]
    group, plural = _replicas_path(deployed)
    cluster.merge_patch(f"{group}/namespaces/{plan.namespace}/{plural}/{plan.spec.name}/scale",
                        {"spec": {"replicas": replicas}})
    cluster.wait(lambda: ready_replicas(cluster, plan) == replicas, ROLLOUT_TIMEOUT_SECONDS,
                 f"{replicas} ready replicas of {plan.spec.name}", diagnose(cluster, plan.namespace))


@pytest.mark.parametrize("name", ["edge", "multinode"])
def test_rollout_of_a_changed_engine_setting_keeps_every_replica_serving(
    name: str, cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """A changed engine setting rolls out through `pulumi up` (the provider awaits the rollout) and replaces every
    serving pod. For a Deployment (`edge`, scaled to 2 as KEDA would) the serving replicas sampled every 0.1 s never
    drop below the desired count. A LeaderWorkerSet (`multinode` at two groups on six nodes, so it surges; a single
    group is replaced by design) completes its rollout; LWS 0.8 does not keep every group serving (see below)."""

    def two_groups(raw: dict[str, Any]) -> None:
        raw["models"][0]["replicas"] = 2
        raw["cluster"]["nodes"][0]["count"] = 6

    deployed = deploy_on(name, cluster, tmp_path, two_groups if name == "multinode" else None)
    deployed.up()
    plan = deployed.plans[0]
    assert plan.rollout.max_surge == 1, plan.rollout.reason
    desired = 2
    if not plan.multi_node:
        _scale(cluster, deployed, desired)

    raw = copy.deepcopy(deployed.raw)
    engine = raw["models"][0].setdefault("engine", {})
    engine["max_num_seqs"] = int(engine.get("max_num_seqs", 256)) // 2
    deployed.update(raw)
    before = {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}
    with Sampler(lambda: ready_replicas(cluster, plan)).running() as sampler:
        deployed.up()
        cluster.wait(lambda: ready_replicas(cluster, plan) >= desired and not (
            before & {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}), ROLLOUT_TIMEOUT_SECONDS,
            "every old serving pod replaced", diagnose(cluster, plan.namespace))
    assert not sampler.errors, sampler.errors
    assert sampler.samples, "nothing was sampled during the rollout"
    if not plan.multi_node:
        assert min(sampler.samples) >= desired, sampler.samples
    # A LeaderWorkerSet is held to completion only: LWS 0.8 releases its surge group in the same step as it rolls the
    # last old group (rollingUpdateParameters: once at most maxSurge groups are out of date, the burst goes), and in
    # this simulation the ready groups then dipped below the desired count, once to 0 for one sample
    # (docs/placement.md). Its availability during a rollout is the upstream controller's, not ours to promise.
    for pod in serving_pods(cluster, plan):
        if "--max-num-seqs" in " ".join(pod["spec"]["containers"][0].get("args", [])):
            assert f"--max-num-seqs={engine['max_num_seqs']}" in pod["spec"]["containers"][0]["args"]


def test_node_drain_through_the_eviction_api_respects_the_pod_disruption_budget(
    cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """Draining the two nodes of a 2-replica `edge` at once (cordon, then an Eviction for each serving pod, as
    `kubectl drain` does): the PodDisruptionBudget lets one replica go, refuses the second eviction (429) until the
    first replica's replacement is Ready on a spare node, and the serving replicas never drop below desired - 1."""
    deployed = deploy_on("edge", cluster, tmp_path)
    deployed.up()
    plan = deployed.plans[0]
    desired = 2
    _scale(cluster, deployed, desired)
    pods = serving_pods(cluster, plan)
    victims = pods[:2]
    for pod in victims:
        cluster.merge_patch(f"/api/v1/nodes/{pod['spec']['nodeName']}", {"spec": {"unschedulable": True}})

    with Sampler(lambda: ready_replicas(cluster, plan)).running() as sampler:
        first = cluster.evict(plan.namespace, victims[0]["metadata"]["name"])
        second = cluster.evict(plan.namespace, victims[1]["metadata"]["name"])
        assert (first, second) == (201, 429), (first, second)
        cluster.wait(lambda: ready_replicas(cluster, plan) == desired, ROLLOUT_TIMEOUT_SECONDS,
                     "the evicted replica's replacement", diagnose(cluster, plan.namespace))
        cluster.wait(lambda: cluster.evict(plan.namespace, victims[1]["metadata"]["name"]) == 201, 60,
                     "the second eviction to be allowed once the PDB has room again")
        cluster.wait(lambda: ready_replicas(cluster, plan) == desired, ROLLOUT_TIMEOUT_SECONDS,
                     "the second replacement", diagnose(cluster, plan.namespace))
    assert min(sampler.samples) >= desired - 1, sampler.samples
    drained = {pod["spec"]["nodeName"] for pod in victims}
    assert not [pod for pod in serving_pods(cluster, plan) if pod["spec"]["nodeName"] in drained]


def test_pulumi_secrets_reach_the_cluster_and_nowhere_else(cluster: SimulatedCluster, tmp_path: Path) -> None:
    """The `prod` stack's API key and HF token are Pulumi secrets (`pulumi config set --secret`): the Secrets in the
    cluster hold the values, and neither `pulumi stack export` nor the output of any run contains them."""
    deployed = deploy_on("prod", cluster, tmp_path)
    assert deployed.secret_values, "prod is expected to use Pulumi secrets"
    outputs = [deployed.up()]
    secrets_in_cluster = cluster.items(f"/api/v1/namespaces/{deployed.spec.namespace}/secrets")
    stored = {base64.b64decode(value).decode() for item in secrets_in_cluster
              for value in (item.get("data") or {}).values()}
    for value in deployed.secret_values.values():
        assert value in stored, "a Pulumi secret did not reach its Kubernetes Secret"
    outputs.append(deployed.pulumi("stack", "export"))
    outputs.append(deployed.pulumi("stack", "output", "--json"))
    for text in outputs:
        for value in deployed.secret_values.values():
            assert value not in text


# ---- what the checks prevent: the failure without them, the working form with them -------------------------------------
def _apply(cluster: SimulatedCluster, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        path = object_path(obj).rsplit("/", 1)[0]
        cluster.create(path, obj)


def _without_program(cluster: SimulatedCluster, raw: dict[str, Any]) -> tuple[ServingPlan, list[dict[str, Any]],
                                                                             dict[str, Any]]:
    """For the tests that show what a check prevents by applying manifests themselves: the model's plan, after its
    nodes (system nodes included) and volumes are up; the Namespace and claims to apply; and the workload, for the
    test to change before applying it."""
    secrets_by_reference(raw)  # nothing here runs the program's Secret objects
    spec = load_deployment(raw).spec
    plan = plan_deployment(spec)[0]
    cluster.add_system_nodes()
    for shape in node_shapes(spec):
        cluster.add_nodes(shape)
    manifests = build_manifests(spec)
    cluster.provide_volumes(manifests)
    if not spec.create_namespace:  # a stack on an existing namespace (edge) renders none: make it, as its user would
        cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": spec.namespace}})
    return (plan, [o for o in manifests if o["kind"] in ("Namespace", "PersistentVolumeClaim")],
            next(o for o in manifests if o["kind"] in ("Deployment", "LeaderWorkerSet")))


def test_a_pod_larger_than_its_node_stays_pending_and_the_planner_refuses_it(
    cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """Without the placement check a serving pod asking for more memory than one node of its pool has is created and
    stays Pending (the scheduler reports Insufficient memory); with it, the stack is refused before deploying, naming
    the setting, the value and what would fit."""
    raw, _ = simulated_variant("edge", cluster.plane.kubeconfig)
    plan, base, deployment = _without_program(cluster, raw)
    node_memory_gib = plan.node_shape.allocatable_memory_mib // 1024
    too_big = copy.deepcopy(raw)
    too_big["models"][0].setdefault("resources", {})["memory_request_gib"] = node_memory_gib + 8
    with pytest.raises(ValueError, match=r"memory_request_gib"):
        load_deployment(too_big)

    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = \
        f"{node_memory_gib + 8}Gi"
    _apply(cluster, base + [deployment])
    cluster.wait(lambda: any("Insufficient memory" in event for event in cluster.events(plan.namespace)), 60,
                 "FailedScheduling: Insufficient memory", diagnose(cluster, plan.namespace))
    assert [pod["status"].get("phase") for pod in serving_pods(cluster, plan)] == ["Pending"]


def _rolled_out(cluster: SimulatedCluster, namespace: str, name: str, replicas: int) -> bool:
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    status = deployment.get("status") or {}
    return (status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas") == replicas == status.get("availableReplicas")
            and status.get("replicas") == replicas)


def test_a_surge_rollout_at_full_scale_hangs_without_spare_nodes_and_the_derived_strategy_completes(
    cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """`prod`'s shape with no spare node (2 p5.48xlarge, 2 replicas of 8 GPUs at full scale). Without the headroom
    check, the surge rollout (maxSurge 1, maxUnavailable 0) creates a pod no node can take: it stays Pending
    (Insufficient nvidia.com/gpu) and no old replica is ever replaced. The plan derives maxSurge 0 / maxUnavailable 1
    for this stack instead, and with it the same rollout completes."""
    raw, _ = simulated_variant("prod", cluster.plane.kubeconfig)
    raw["cluster"]["nodes"][0]["count"] = 2
    raw["models"][0]["autoscaling"].update({"min_replicas": 1, "max_replicas": 2, "fallback_replicas": 1})
    plan, base, deployment = _without_program(cluster, raw)
    assert (plan.rollout.max_surge, plan.rollout.max_unavailable) == (0, 1), plan.rollout
    derived_strategy = copy.deepcopy(deployment["spec"]["strategy"])
    deployment["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    deployment["spec"]["replicas"] = 2
    _apply(cluster, base + [deployment])
    namespace, name = plan.namespace, plan.spec.name
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    cluster.wait(lambda: _rolled_out(cluster, namespace, name, 2), ROLLOUT_TIMEOUT_SECONDS, "2 replicas Ready",
                 diagnose(cluster, namespace))
    first = {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}

    def change(value: str) -> None:  # what a changed engine setting does to the pod template
        cluster.merge_patch(path, {"spec": {"template": {"metadata": {"annotations": {"sim/revision": value}}}}})

    change("2")
    cluster.wait(lambda: any("Insufficient nvidia.com/gpu" in event for event in cluster.events(namespace)), 60,
                 "the surge pod to be unschedulable", diagnose(cluster, namespace))
    pods = serving_pods(cluster, plan)
    assert [pod["metadata"]["uid"] for pod in pods if pod["status"].get("phase") == "Pending"], pods
    assert first <= {pod["metadata"]["uid"] for pod in pods}, "an old replica was replaced: the rollout progressed"
    assert not _rolled_out(cluster, namespace, name, 2)

    cluster.merge_patch(path, {"spec": {"strategy": derived_strategy}})
    cluster.wait(lambda: _rolled_out(cluster, namespace, name, 2), ROLLOUT_TIMEOUT_SECONDS,
                 "the rollout with the derived strategy to complete", diagnose(cluster, namespace))
    assert not first & {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}


def test_a_single_group_leader_worker_set_never_surges_and_the_replaced_form_completes(
    cluster: SimulatedCluster, tmp_path: Path
) -> None:
    """`multinode` (one group of 2 pods) on 4 nodes, room for a surge group. With maxSurge 1 / maxUnavailable 0 the
    LWS controller starts no surge group: it reconciles the rollout again and again, the leader StatefulSet's
    partition stays at 1 and the old group is never replaced. The plan's form for one group (maxSurge 0,
    maxUnavailable 1) completes the same rollout."""
    raw, _ = simulated_variant("multinode", cluster.plane.kubeconfig)
    raw["cluster"]["nodes"][0]["count"] = 4
    plan, base, lws = _without_program(cluster, raw)
    assert (plan.rollout.max_surge, plan.rollout.max_unavailable) == (0, 1), plan.rollout
    rolling = lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    derived = {"rolloutStrategy": copy.deepcopy(lws["spec"]["rolloutStrategy"])}
    rolling.update(maxSurge=1, maxUnavailable=0)
    _apply(cluster, base + [lws])
    namespace, name = plan.namespace, plan.spec.name
    cluster.wait(lambda: ready_replicas(cluster, plan) == 1, ROLLOUT_TIMEOUT_SECONDS, "the group Ready",
                 diagnose(cluster, namespace))
    first = {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}
    path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{namespace}/leaderworkersets/{name}"

    def surge_releases() -> int:  # how often the controller decided against the burst (an aggregated event)
        return sum(int(e.get("count") or 1) for e in cluster.items(f"/api/v1/namespaces/{namespace}/events")
                   if "deleting surge replica" in (e.get("message") or ""))

    cluster.merge_patch(path, {"spec": {"leaderWorkerTemplate": {"leaderTemplate": {"metadata": {
        "annotations": {"sim/revision": "2"}}}}}})
    cluster.wait(lambda: surge_releases() >= 2, 120, "the LWS controller to reconcile the rollout twice",
                 diagnose(cluster, namespace))
    leader_set = cluster.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")
    assert leader_set["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 1
    assert leader_set["spec"]["replicas"] == 1, "a surge group was started"
    assert {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)} == first

    cluster.merge_patch(path, {"spec": derived})
    cluster.wait(lambda: ready_replicas(cluster, plan) == 1 and not (
        first & {pod["metadata"]["uid"] for pod in serving_pods(cluster, plan)}), ROLLOUT_TIMEOUT_SECONDS,
        "the group replaced with the plan's strategy", diagnose(cluster, namespace))
