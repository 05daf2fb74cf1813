"""Table tests for the pure builders: each case names the rule it checks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.schema import validate_all
from vllm_pulumi.components.builders import addons, autoscaling, network, nodes, observability, serving, storage
from vllm_pulumi.components.builders.modelconfig import config_fields
from vllm_pulumi.components.manifests import build_manifests
from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.facts.model_catalog import CATALOG
from vllm_pulumi.runtime.facts.models import catalog_model, parse_config
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.startup import STORAGE_READ_GB_PER_SECOND
from vllm_pulumi.runtime.spec.node_pools import ManagedNodeGroupPool

from .specs import MULTINODE_MODEL, plan, stack

AUTOSCALED = {"autoscaling": {"min_replicas": 1, "max_replicas": 4}}


def pod_spec(workload: dict[str, Any], template: str = "leaderTemplate") -> dict[str, Any]:
    if workload["kind"] == "Deployment":
        return dict(workload["spec"]["template"]["spec"])
    return dict(workload["spec"]["leaderWorkerTemplate"][template]["spec"])


def container(workload: dict[str, Any], template: str = "leaderTemplate") -> dict[str, Any]:
    return dict(pod_spec(workload, template)["containers"][0])


# ---- workload choice and replicas ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "model", "base", "kind"), [
    ("one-gpu-fits-one-pod", {}, None, "Deployment"),
    ("tp4-on-one-node-stays-one-pod", {"gpu": "h100-sxm", "gpus_per_node": 8, "model": "llama-3.1-70b",
                                       "engine": {"tensor_parallel_size": 4}}, None, "Deployment"),
    ("tp8-pp2-over-8-gpu-nodes-is-lws", {}, MULTINODE_MODEL, "LeaderWorkerSet"),
])
def test_workload_kind_follows_the_plan_layout(case: str, model: dict[str, Any], base: dict[str, Any] | None,
                                               kind: str) -> None:
    workload = serving.build_workload(plan(model, base))
    assert workload["kind"] == kind, case


@pytest.mark.parametrize(("case", "model", "base", "replicas"), [
    ("fixed-replicas-deployment", {"replicas": 2}, None, 2),
    ("autoscaled-deployment-omits-replicas", AUTOSCALED, None, None),
    ("fixed-replicas-lws", {}, MULTINODE_MODEL, 1),
    ("autoscaled-lws-omits-replicas", AUTOSCALED, MULTINODE_MODEL, None),
])
def test_replicas_omitted_when_an_autoscaler_owns_them(case: str, model: dict[str, Any],
                                                       base: dict[str, Any] | None, replicas: int | None) -> None:
    assert serving.build_workload(plan(model, base))["spec"].get("replicas") == replicas, case


def _nodes(instance_type: str, count: int) -> dict[str, Any]:
    return {"mode": "kubeconfig", "nodes": [{"name": "gpu", "instance_type": instance_type, "count": count}]}


@pytest.mark.parametrize(("case", "model", "base", "nodes", "rolling"), [
    ("deployment-with-a-spare-node-surges", {"autoscaling": {"min_replicas": 1, "max_replicas": 2}}, None,
     _nodes("g6.2xlarge", 3), {"maxSurge": 1, "maxUnavailable": 0}),
    ("deployment-at-full-scale-replaces-one", {"autoscaling": {"min_replicas": 1, "max_replicas": 3}}, None,
     _nodes("g6.2xlarge", 3), {"maxSurge": 0, "maxUnavailable": 1}),
    ("lws-of-two-groups-with-room-for-a-third-surges", {"replicas": 2}, MULTINODE_MODEL, _nodes("p5.48xlarge", 6),
     {"maxSurge": 1, "maxUnavailable": 0}),
    ("lws-of-one-group-is-replaced-even-with-room", {}, MULTINODE_MODEL, _nodes("p5.48xlarge", 4),
     {"maxSurge": 0, "maxUnavailable": 1}),
    ("lws-with-one-group-of-nodes-replaces-it", {}, MULTINODE_MODEL, _nodes("p5.48xlarge", 2),
     {"maxSurge": 0, "maxUnavailable": 1}),
])
def test_rollout_strategy_comes_from_the_plan(case: str, model: dict[str, Any], base: dict[str, Any] | None,
                                             nodes: dict[str, Any], rolling: dict[str, int]) -> None:
    serving_plan = plan(model, base, cluster=nodes)
    workload = serving.build_workload(serving_plan)
    if workload["kind"] == "Deployment":
        assert workload["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": rolling}, case
    else:
        assert workload["spec"]["rolloutStrategy"] == {"type": "RollingUpdate",
                                                       "rollingUpdateConfiguration": rolling}, case
    # The budget keeps evictions to one replica's pod, the bound the rollout itself keeps in either form.
    assert serving.build_pod_disruption_budget(serving_plan)["spec"]["maxUnavailable"] == 1
    notes = workload["metadata"]["annotations"]
    assert notes[ann.POOL_MAX_NODES] == str(nodes["nodes"][0]["count"])
    assert notes[ann.MAX_REPLICAS] == str(serving_plan.max_replicas)
    single_group = serving_plan.multi_node and serving_plan.min_replicas == 1  # replaced whatever the room
    assert (int(notes[ann.REPLICA_CAPACITY]) > serving_plan.max_replicas and not single_group) == \
        (rolling["maxSurge"] == 1)
    # Pool facts stay off the pod template: a pool resize must not restart every pod.
    templates = [workload["spec"]["template"]] if "template" in workload["spec"] else [
        workload["spec"]["leaderWorkerTemplate"][key] for key in ("leaderTemplate", "workerTemplate")]
    assert all(ann.POOL_MAX_NODES not in t["metadata"]["annotations"] for t in templates)


# ---- probes, drain, resources --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "model", "base"), [
    ("derived-budget", {}, None),
    ("explicit-budget-and-grace", {"lifecycle": {"startup_budget_seconds": 1800,
                                                 "termination_grace_period_seconds": 400}}, None),
    ("slow-nfs", {"storage": {"kind": "nfs", "read_gb_per_second": 0.05}}, None),
    ("lws-leader", {}, MULTINODE_MODEL),
])
def test_probe_windows_come_from_the_plan(case: str, model: dict[str, Any], base: dict[str, Any] | None) -> None:
    serving_plan = plan(model, base)
    main = container(serving.build_workload(serving_plan))
    startup, liveness = main["startupProbe"], main["livenessProbe"]
    assert startup["failureThreshold"] == serving_plan.startup_probe_failure_threshold, case
    assert startup["periodSeconds"] * startup["failureThreshold"] >= serving_plan.startup_budget_seconds, case
    assert liveness["failureThreshold"] == serving_plan.liveness_probe_failure_threshold, case
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= serving_plan.termination_grace_period_seconds
    # Readiness on /ping, startup and liveness on /health: the same engine check in vLLM 0.33, distinct paths so a
    # linter comparing probes (kube-score's pod-probes-identical) sees they differ; their failure budgets differ too.
    assert main["readinessProbe"]["httpGet"] == {"path": "/ping", "port": "http"}, case
    for probe in ("startupProbe", "livenessProbe"):
        assert main[probe]["httpGet"] == {"path": "/health", "port": "http"}, (case, probe)
    readiness = main["readinessProbe"]
    assert (readiness["periodSeconds"] * readiness["failureThreshold"]
            < liveness["periodSeconds"] * liveness["failureThreshold"]), case


@pytest.mark.parametrize("base", [None, MULTINODE_MODEL], ids=["deployment", "lws"])
def test_drain_prestop_grace_and_shutdown_timeout(base: dict[str, Any] | None) -> None:
    serving_plan = plan({}, base)
    workload = serving.build_workload(serving_plan)
    main = container(workload)
    assert main["lifecycle"] == {"preStop": {"sleep": {"seconds": serving_plan.pre_stop_sleep_seconds}}}
    assert pod_spec(workload)["terminationGracePeriodSeconds"] == serving_plan.termination_grace_period_seconds
    assert f"--shutdown-timeout={serving_plan.shutdown_timeout_seconds}" in main["args"]
    assert serving_plan.shutdown_timeout_seconds > 0


def test_no_prestop_when_the_spec_sets_zero() -> None:
    main = container(serving.build_workload(plan({"lifecycle": {"pre_stop_sleep_seconds": 0}})))
    assert "lifecycle" not in main


@pytest.mark.parametrize(("case", "model", "limits"), [
    ("no-cpu-memory-limits-by-default", {}, {"nvidia.com/gpu": "1", "ephemeral-storage": "26Gi"}),
    ("limits-only-when-set", {"resources": {"cpu_limit": "12", "memory_limit_gib": 64}},
     {"nvidia.com/gpu": "1", "ephemeral-storage": "26Gi", "cpu": "12", "memory": "64Gi"}),
])
def test_resources(case: str, model: dict[str, Any], limits: dict[str, Any]) -> None:
    serving_plan = plan(model)
    resources = container(serving.build_workload(serving_plan))["resources"]
    assert resources["limits"] == limits, case
    assert resources["requests"] == {"cpu": serving_plan.cpu_request, "memory": f"{serving_plan.memory_request_gib}Gi",
                                     "ephemeral-storage": "26Gi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(("case", "model", "base", "disk_gib"), [
    # cache 20 + /tmp 4 + writable layer 2
    ("pvc-weights", {}, None, 26),
    # hf-download: the cache emptyDir holds the weights, sized like the PVC would be
    ("hf-download-weights-in-the-cache", {"storage": {"kind": "hf-download"}}, None, None),
    ("lws-leader-and-worker", {}, MULTINODE_MODEL, 26),
])
def test_ephemeral_storage_covers_every_empty_dir_and_the_writable_layer(
        case: str, model: dict[str, Any], base: dict[str, Any] | None, disk_gib: int | None) -> None:
    """Requested (the scheduler reserves it beside the image) and limited alike, on every serving container."""
    serving_plan = plan(model, base)
    workload = serving.build_workload(serving_plan)
    spec = pod_spec(workload)
    empty_dirs = sum(int(v["emptyDir"]["sizeLimit"].removesuffix("Gi")) for v in spec["volumes"]
                     if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory")
    expected = disk_gib if disk_gib is not None else empty_dirs + 2
    assert serving_plan.ephemeral_storage_gib == expected == empty_dirs + 2, case
    templates = ([workload["spec"]["leaderWorkerTemplate"][k] for k in ("leaderTemplate", "workerTemplate")]
                 if workload["kind"] == "LeaderWorkerSet" else [workload["spec"]["template"]])
    for template in templates:
        for item in template["spec"]["containers"]:
            assert item["resources"]["requests"]["ephemeral-storage"] == f"{expected}Gi", (case, item["name"])
            assert item["resources"]["limits"]["ephemeral-storage"] == f"{expected}Gi", (case, item["name"])
    assert serving_plan.pod_resources.ephemeral_storage_gib == expected, case


def test_shm_gpu_selector_toleration_and_read_only_models() -> None:
    serving_plan = plan({"gpu": "h100-sxm", "gpus_per_node": 8, "model": "llama-3.1-70b",
                         "engine": {"tensor_parallel_size": 4}})
    workload = serving.build_workload(serving_plan)
    spec = pod_spec(workload)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{serving_plan.shm_size_gib}Gi"}
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "llm-models"}
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    mounts = {m["mountPath"]: m for m in container(workload)["volumeMounts"]}
    assert mounts["/models"] == {"name": "models", "mountPath": "/models", "readOnly": True}
    assert mounts["/dev/shm"]["name"] == "shm"
    assert container(workload)["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert "--tensor-parallel-size=4" in container(workload)["args"]


def test_hardened_security_context_and_redirected_caches() -> None:
    workload = serving.build_workload(plan())
    main = container(workload)
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod_spec(workload)["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    env = {e["name"]: e.get("value") for e in main["env"]}
    for variable in ("HF_HOME", "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME"):
        assert env[variable].startswith(("/cache", "/compile-cache/")), variable
    assert {m["mountPath"] for m in main["volumeMounts"]} >= {"/cache", "/tmp"}


def test_labels_annotations_and_scrape_hints() -> None:
    workload = serving.build_workload(plan())
    labels = workload["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "vllm" and labels["app.kubernetes.io/instance"] == "llm"
    assert labels["app.kubernetes.io/component"] == "server"
    assert labels["app.kubernetes.io/managed-by"] == "pulumi" and labels["app.kubernetes.io/version"] == "0.33.0"
    template = workload["spec"]["template"]["metadata"]["annotations"]
    assert template["prometheus.io/scrape"] == "true" and template["prometheus.io/port"] == "8000"
    for meta in (workload["metadata"]["annotations"], template):
        assert meta[ann.MODEL] == "llama-3.1-8b" and meta[ann.GPU] == "l4"
        assert meta[ann.STORAGE_KIND] == "efs" and meta[ann.STARTUP_BUDGET_SECONDS].isdigit()
        assert ann.MODEL_CONFIG not in meta, "catalog models need no config annotation"


def test_model_outside_the_catalog_carries_its_config(tmp_path: Path) -> None:
    hf_id, config = CATALOG["llama-3.1-8b"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    serving_plan = plan({"model": str(path), "hf_repo": "acme/my-llama"})
    workload = serving.build_workload(serving_plan)
    config_json = json.loads(workload["metadata"]["annotations"][ann.MODEL_CONFIG])
    assert parse_config(config_json, serving_plan.model.name, serving_plan.model.hf_id) == serving_plan.model
    assert workload["metadata"]["annotations"][ann.MODEL] == "acme/my-llama"


@pytest.mark.parametrize("catalog_id", sorted(CATALOG))
def test_model_config_annotation_reads_back_to_the_same_facts(catalog_id: str) -> None:
    facts = catalog_model(catalog_id)
    assert parse_config(config_fields(facts), facts.name, facts.hf_id) == facts


# ---- LeaderWorkerSet -----------------------------------------------------------------------------------------------
def test_lws_leader_runs_ray_head_then_vllm_with_args_passed_safely() -> None:
    serving_plan = plan(AUTOSCALED, MULTINODE_MODEL)
    lws = serving.build_workload(serving_plan)
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == serving_plan.layout.size == 2
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = container(lws)
    assert leader["command"][:2] == ["bash", "-c"]
    script = leader["command"][2]
    assert "ray start --head --port=6379" in script and 'exec vllm serve "$@"' in script
    assert "LWS_GROUP_SIZE" in script
    assert serving_plan.spec.name not in script, "no user value is spliced into the script"
    assert leader["args"] == serving_plan.args
    assert "--distributed-executor-backend=ray" in leader["args"]
    assert "--tensor-parallel-size=8" in leader["args"] and "--pipeline-parallel-size=2" in leader["args"]


def test_lws_workers_join_the_leader_and_keep_gpus_through_the_drain() -> None:
    serving_plan = plan({}, MULTINODE_MODEL)
    lws = serving.build_workload(serving_plan)
    worker = container(lws, "workerTemplate")
    worker_pod = pod_spec(lws, "workerTemplate")
    assert worker["command"][:2] == ["bash", "-c"]
    assert 'exec ray start --address="${LWS_LEADER_ADDRESS}:6379" --block' in worker["command"][2]
    assert worker["command"][2].index("ray health-check") < worker["command"][2].index("exec ray start")
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert worker_pod["terminationGracePeriodSeconds"] == serving_plan.termination_grace_period_seconds
    assert {v["name"] for v in worker_pod["volumes"]} >= {"shm", "models"}
    sleep = worker["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert serving_plan.pre_stop_sleep_seconds + serving_plan.shutdown_timeout_seconds == sleep
    assert sleep < serving_plan.termination_grace_period_seconds
    assert "startupProbe" not in worker
    labels = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "worker"


@pytest.mark.parametrize(("case", "base", "selector_extra"), [
    ("deployment-selects-server-pods", None, {}),
    ("lws-selects-leaders-only", MULTINODE_MODEL, {"leaderworkerset.sigs.k8s.io/name": "big"}),
])
def test_service_selects_ready_serving_pods(case: str, base: dict[str, Any] | None,
                                            selector_extra: dict[str, str]) -> None:
    serving_plan = plan({}, base)
    service = network.build_service(serving_plan)
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    expected = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": serving_plan.spec.name,
                "app.kubernetes.io/component": "server", **selector_extra}
    assert service["spec"]["selector"] == expected, case


# ---- PDB, NetworkPolicy, secrets -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "model", "base"), [
    ("single-replica-evictable-so-node-drains-proceed", {}, None),
    ("autoscaled-one-at-a-time", AUTOSCALED, None),
    ("lws-covers-leaders-and-workers", {}, MULTINODE_MODEL),
])
def test_pod_disruption_budget_never_blocks_a_drain(case: str, model: dict[str, Any],
                                                    base: dict[str, Any] | None) -> None:
    serving_plan = plan(model, base)
    pdb = serving.build_pod_disruption_budget(serving_plan)
    assert pdb["spec"]["maxUnavailable"] == 1, case
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def _pod_labels(workload: dict[str, Any]) -> list[dict[str, str]]:
    """Labels each of a workload's pods carries, with the one LeaderWorkerSet adds to every pod of the set."""
    if workload["kind"] != "LeaderWorkerSet":
        return [workload["spec"]["template"]["metadata"]["labels"]]
    group = workload["spec"]["leaderWorkerTemplate"]
    return [{**group[t]["metadata"]["labels"], "leaderworkerset.sigs.k8s.io/name": workload["metadata"]["name"]}
            for t in ("leaderTemplate", "workerTemplate")]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize(("case", "base", "selector"), [
    ("deployment-the-deployments-own-selector", None,
     {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "llm", "app.kubernetes.io/component": "server"}),
    ("lws-leaders-and-workers-of-the-set", MULTINODE_MODEL, {"leaderworkerset.sigs.k8s.io/name": "big"}),
])
def test_pod_disruption_budget_selects_the_serving_pods_and_not_the_hydration_job(
        case: str, base: dict[str, Any] | None, selector: dict[str, str]) -> None:
    """The hydration Job keeps its Succeeded pod; a budget selecting it cannot be sized (a Job has no scale), so the
    disruption controller allows no eviction at all."""
    serving_plan = plan({}, base)
    pdb_selector = serving.build_pod_disruption_budget(serving_plan)["spec"]["selector"]["matchLabels"]
    assert pdb_selector == selector, case
    workload = serving.build_workload(serving_plan)
    if workload["kind"] == "Deployment":
        assert pdb_selector == workload["spec"]["selector"]["matchLabels"]
    assert all(_selects(pdb_selector, labels) for labels in _pod_labels(workload)), case
    job = storage.build_hydration_job(serving_plan)
    assert not _selects(pdb_selector, job["spec"]["template"]["metadata"]["labels"]), case


@pytest.mark.parametrize(("case", "model", "base", "peers"), [
    ("prometheus-only", {}, None, 1),
    ("namespaces-and-prometheus", {"network": {"allowed_namespaces": ["apps"]}}, None, 2),
    ("pods-in-namespaces", {"network": {"allowed_namespaces": ["apps"], "allowed_pod_labels": {"app": "gw"}}},
     None, 2),
    ("lws-group-traffic", {}, MULTINODE_MODEL, 2),
])
def test_network_policy(case: str, model: dict[str, Any], base: dict[str, Any] | None, peers: int) -> None:
    policy = network.build_network_policy(plan(model, base))
    assert policy is not None
    ingress = policy["spec"]["ingress"]
    assert len(ingress) == peers, case
    prometheus = [rule for rule in ingress if rule["from"][0].get("namespaceSelector", {}).get(
        "matchExpressions", [{}])[0].get("values") == ["monitoring"]]
    assert prometheus and prometheus[0]["ports"] == [{"protocol": "TCP", "port": 8000}]
    if base is MULTINODE_MODEL:
        assert {"from": [{"podSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "big"}}}]} in ingress
    if model.get("network", {}).get("allowed_pod_labels"):
        peer = ingress[0]["from"][0]
        assert peer["podSelector"] == {"matchLabels": {"app": "gw"}} and "namespaceSelector" in peer


def test_network_policy_can_be_turned_off() -> None:
    assert network.build_network_policy(plan({"network": {"network_policy": False}})) is None


@pytest.mark.parametrize(("case", "api_key", "secret_name", "creates"), [
    ("existing-secret", {"existing_secret": {"name": "keys", "key": "vllm"}}, ("keys", "vllm"), False),
    ("pulumi-secret", {"pulumi_secret": "vllmApiKey"}, ("llm-api-key", "api-key"), True),
])
def test_api_key_from_a_secret_key_ref(case: str, api_key: dict[str, Any], secret_name: tuple[str, str],
                                       creates: bool) -> None:
    serving_plan = plan({"api_key": api_key})
    env = {e["name"]: e for e in container(serving.build_workload(serving_plan))["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": secret_name[0], "key": secret_name[1]}
    generated = serving.build_serving_secrets(serving_plan)
    assert bool(generated) == creates, case
    for secret in generated:
        assert "data" not in secret and "stringData" not in secret, "values are added by the shell, as secrets"


# ---- storage -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "storage_spec", "kinds"), [
    ("pvc-and-hydration", {}, ["PersistentVolumeClaim", "Job"]),
    ("existing-claim-hydrated", {"existing_claim": "weights"}, ["Job"]),
    ("existing-claim-as-is", {"existing_claim": "weights", "hydrate": False}, []),
    ("s3-streamer-no-volume", {"kind": "s3-runai-streamer", "s3_uri": "s3://bucket/llama"}, []),
])
def test_storage_objects(case: str, storage_spec: dict[str, Any], kinds: list[str]) -> None:
    serving_plan = plan({"storage": storage_spec})
    assert [o["kind"] for o in storage.build_storage(serving_plan)] == kinds, case


def test_pvc_size_access_mode_and_class_from_spec_and_plan() -> None:
    serving_plan = plan({"storage": {"access_mode": "ReadOnlyMany"}})
    pvc = storage.build_pvc(serving_plan)
    assert pvc["spec"] == {"accessModes": ["ReadOnlyMany"], "storageClassName": "efs-sc",
                           "resources": {"requests": {"storage": f"{serving_plan.pvc_size_gib}Gi"}}}


def test_s3_streamer_loads_with_runai_and_mounts_no_pvc() -> None:
    serving_plan = plan({"storage": {"kind": "s3-runai-streamer", "s3_uri": "s3://bucket/llama"}})
    main = container(serving.build_workload(serving_plan))
    assert main["args"][0] == "s3://bucket/llama" and "--load-format=runai_streamer" in main["args"]
    assert "models" not in {m["name"] for m in main["volumeMounts"]}


@pytest.mark.parametrize(("case", "skip_await"), [("default-awaited", False), ("test-flag", True)])
def test_hydration_job(case: str, skip_await: bool) -> None:
    serving_plan = plan({"storage": {"hf_token": {"existing_secret": {"name": "hf", "key": "token"}}}})
    job = storage.build_hydration_job(serving_plan, skip_await=skip_await)
    annotations = job["metadata"]["annotations"]
    assert ("pulumi.com/skipAwait" in annotations) == skip_await, case
    main = job["spec"]["template"]["spec"]["containers"][0]
    assert ":" in main["image"] and not main["image"].endswith(":latest")
    script = main["command"][2]
    assert script.index('[ -f "$MODEL_DIR/$MARKER_FILE" ]') < script.index("snapshot_download")
    assert script.index("snapshot_download") < script.index('> "$MODEL_DIR/$MARKER_FILE"')
    env = {e["name"]: e for e in main["env"]}
    assert env["HF_REPO"]["value"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert env["MODEL_DIR"]["value"] == serving_plan.model_ref
    assert main["image"] == serving_plan.image, "the serving image: its HF client, and pre-pulled for the server"
    assert "pip install" not in script, "nothing is installed at run time"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": serving_plan.gpu.product_label}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
    assert "meta-llama" not in script, "repo ids travel in env vars, never in the script"


# ---- autoscaling ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "base", "target"), [
    ("deployment-target", None, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"}),
    ("lws-target", MULTINODE_MODEL, {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                     "name": "big"}),
])
def test_scaled_object_targets_the_workload(case: str, base: dict[str, Any] | None, target: dict[str, str]) -> None:
    scaled = autoscaling.build_scaled_object(plan(AUTOSCALED, base))
    assert scaled is not None and scaled["spec"]["scaleTargetRef"] == target, case


def test_scaled_object_queue_trigger_and_windows() -> None:
    serving_plan = plan({"served_model_name": "chat", "autoscaling": {
        "min_replicas": 1, "max_replicas": 6, "queue_threshold": 7, "scale_down_stabilization_seconds": 600,
        "fallback_replicas": 2}})
    scaled = autoscaling.build_scaled_object(serving_plan)
    assert scaled is not None
    spec = scaled["spec"]
    trigger = spec["triggers"][0]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == 'sum(vllm:num_requests_waiting{namespace="inference",model_name="chat"})'
    assert trigger["metadata"]["threshold"] == "7"
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 6)
    # Above zero KEDA ignores both (its webhook warns): the HPA's window and policies pace the scale-down.
    assert "cooldownPeriod" not in spec and "pollingInterval" not in spec
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 1,
                                                  "periodSeconds": serving_plan.cooldown_seconds}]
    assert behavior["scaleUp"]["policies"] == [{"type": "Pods", "value": 1,
                                                "periodSeconds": min(1800, serving_plan.startup_budget_seconds)}]
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2}
    assert all(t["type"] not in ("cpu", "memory") for t in spec["triggers"])
    assert "idleReplicaCount" not in spec


@pytest.mark.parametrize(("case", "extra", "triggers", "idle"), [
    ("queue-only", {}, ["queue"], None),
    ("with-kv-cache-trigger", {"kv_cache_trigger": True}, ["queue", "kv-cache"], None),
    ("scale-to-zero-when-asked", {"min_replicas": 0, "scale_to_zero": True}, ["queue"], 0),
])
def test_scaled_object_variants(case: str, extra: dict[str, Any], triggers: list[str], idle: int | None) -> None:
    serving_plan = plan({"autoscaling": {"min_replicas": 1, "max_replicas": 3, **extra}})
    scaled = autoscaling.build_scaled_object(serving_plan)
    assert scaled is not None
    assert [t["name"] for t in scaled["spec"]["triggers"]] == triggers, case
    assert scaled["spec"].get("idleReplicaCount") == idle, case
    if idle is not None:
        assert scaled["spec"]["minReplicaCount"] >= 1 and any("scale to zero" in w for w in serving_plan.warnings)
    if "kv-cache" in triggers:
        assert "vllm:kv_cache_usage_perc" in scaled["spec"]["triggers"][1]["metadata"]["query"]


def test_no_scaled_object_without_autoscaling() -> None:
    assert autoscaling.build_scaled_object(plan()) is None


# ---- observability -------------------------------------------------------------------------------------------------
def _all_exprs(objects: list[dict[str, Any]]) -> str:
    return json.dumps(objects)


def test_metric_names_are_the_ones_vllm_033_exports() -> None:
    serving_plan = plan()
    text = _all_exprs(observability.build_observability(serving_plan, stack().observability))
    for name in ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:inter_token_latency_seconds_bucket", "vllm:generation_tokens_total",
                 "vllm:num_preemptions_total", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                 "DCGM_FI_PROF_DRAM_ACTIVE"):
        assert name in text, name
    for gone in ("gpu_cache_usage_perc", "time_per_output_token_seconds_bucket", 'generation_tokens{'):
        assert gone not in text, gone


def test_alerts() -> None:
    rule = observability.build_prometheus_rule(plan(), stack().observability)
    assert rule is not None
    alerts = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    assert set(alerts) == {"VllmQueueGrowing", "VllmKvCacheHigh", "VllmTtftP95High", "VllmPreemptions",
                           "VllmEngineDown"}
    assert "histogram_quantile(0.95" in alerts["VllmTtftP95High"]["expr"]
    assert alerts["VllmTtftP95High"]["expr"].endswith("> 2.0")
    assert "absent(up" in alerts["VllmEngineDown"]["expr"] and "== 0" in alerts["VllmEngineDown"]["expr"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"


def test_dashboard_has_six_panels_and_the_sidecar_label() -> None:
    config_map = observability.build_dashboard_config_map(plan(), stack().observability)
    assert config_map is not None and config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(next(iter(config_map["data"].values())))
    assert len(board["panels"]) == 6 and len(board["uid"]) <= 40


@pytest.mark.parametrize(("case", "monitor", "kind"), [
    ("service-monitor", "ServiceMonitor", "ServiceMonitor"),
    ("pod-monitor", "PodMonitor", "PodMonitor"),
    ("none", "none", None),
])
def test_monitor_kind_per_spec(case: str, monitor: str, kind: str | None) -> None:
    spec = stack(observability={"monitor": monitor, "monitor_labels": {"team": "ml"}})
    serving_plan = plan(observability={"monitor": monitor})
    built = observability.build_monitor(serving_plan, spec.observability)
    assert (built["kind"] if built else None) == kind, case
    if built is not None:
        assert built["metadata"]["labels"]["team"] == "ml"


# ---- add-ons and nodes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "mode", "override", "driver"), [
    ("eks-ami-ships-the-driver", "eks", None, False),
    ("elsewhere-the-operator-installs-it", "kubeconfig", None, True),
    ("spec-wins", "eks", True, True),
])
def test_gpu_operator_driver(case: str, mode: str, override: bool | None, driver: bool) -> None:
    from vllm_pulumi.runtime.spec.deployment import GpuOperatorSpec, ObservabilitySpec

    values = addons.gpu_operator_values(GpuOperatorSpec(driver_enabled=override), mode, ObservabilitySpec())
    assert values["driver"]["enabled"] is driver, case
    assert values["dcgmExporter"]["enabled"] and values["dcgmExporter"]["serviceMonitor"]["enabled"]
    assert values["devicePlugin"]["enabled"] and values["gfd"]["enabled"]


def test_addon_values_merge_over_ours_without_mutating() -> None:
    base = {"a": {"b": 1, "c": 2}}
    assert addons.deep_merge(base, {"a": {"c": 3}, "d": 4}) == {"a": {"b": 1, "c": 3}, "d": 4}
    assert base == {"a": {"b": 1, "c": 2}}


@pytest.mark.parametrize(("case", "model", "base", "keys"), [
    ("fixed-single-pod-only-gpu-operator", {}, None, ["gpu-operator"]),
    ("autoscaled-adds-keda", AUTOSCALED, None, ["gpu-operator", "keda"]),
    ("multi-node-adds-lws", {}, MULTINODE_MODEL, ["gpu-operator", "lws"]),
])
def test_addons_installed_only_when_needed(case: str, model: dict[str, Any], base: dict[str, Any] | None,
                                           keys: list[str]) -> None:
    spec = stack(model, base)
    serving_plan = plan(model, base)
    assert [a.key for a in addons.build_addons(spec, [serving_plan])] == keys, case


def _pool(**settings: Any) -> ManagedNodeGroupPool:
    return ManagedNodeGroupPool.model_validate({"name": "gpu", "instance_type": "p5.48xlarge",
                                           "subnet_ids": ["subnet-1"], **settings})


@pytest.mark.parametrize(("case", "pool", "plans_base", "efa", "placement"), [
    ("single-node-no-efa", {}, None, False, False),
    ("multi-node-efa-and-placement", {}, MULTINODE_MODEL, True, True),
    ("efa-forced-off", {"efa": False}, MULTINODE_MODEL, False, False),
])
def test_node_group(case: str, pool: dict[str, Any], plans_base: dict[str, Any] | None, efa: bool,
                    placement: bool) -> None:
    plans: list[ServingPlan] = [plan({}, plans_base)] if plans_base else []
    description = nodes.build_node_group(_pool(**pool), "cluster", plans)
    assert (description.efa, description.placement_group) == (efa, placement), case
    args = nodes.node_group_args(description)
    assert args["ami_type"] == "AL2023_x86_64_NVIDIA" and args["instance_types"] == ["p5.48xlarge"]
    assert args["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    template = nodes.launch_template_args(description)
    assert template["block_device_mappings"][0]["ebs"]["volume_size"] == 200
    assert ("network_interfaces" in template) == efa
    assert (nodes.placement_group_args(description) is not None) == placement


def test_capacity_block_goes_through_the_launch_template() -> None:
    description = nodes.build_node_group(
        _pool(capacity_type="CAPACITY_BLOCK", capacity_reservation_id="cr-0123"), "cluster", [])
    template = nodes.launch_template_args(description)
    assert template["capacity_reservation_specification"]["capacity_reservation_target"] == {
        "capacity_reservation_id": "cr-0123"}
    assert template["instance_market_options"] == {"market_type": "capacity-block"}


# ---- whole stacks --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "model", "base"), [
    ("autoscaled-deployment", AUTOSCALED, None),
    ("lws-with-api-key", {"api_key": {"existing_secret": {"name": "k", "key": "v"}}}, MULTINODE_MODEL),
    ("s3-streamer", {"storage": {"kind": "s3-runai-streamer", "s3_uri": "s3://b/m"}}, None),
    ("pod-monitor-no-alerts", {}, None),
])
def test_variants_validate_against_schemas(case: str, model: dict[str, Any], base: dict[str, Any] | None) -> None:
    validate_all(build_manifests(stack(model, base, observability={"monitor": "PodMonitor", "alerts": False})))


def test_namespace_only_when_asked() -> None:
    assert build_manifests(stack())[0]["kind"] == "Namespace"
    assert all(o["kind"] != "Namespace" for o in build_manifests(stack(create_namespace=False)))


def test_builders_do_not_mutate_the_plan() -> None:
    serving_plan = plan(AUTOSCALED)
    before = list(serving_plan.args)
    objects = build_manifests(stack(AUTOSCALED), [serving_plan])
    container(objects[[o["kind"] for o in objects].index("Deployment")])["args"].append("--mutated")
    assert serving_plan.args == before


def test_render_mode_notes_name_the_addon_setting() -> None:
    spec = stack(AUTOSCALED, cluster={"mode": "render", "directory": "out"},
                 addons={"gpu_operator": {"install": True}, "keda": {"install": True}})
    notes = addons.render_mode_notes(spec, addons.build_addons(spec, [plan(AUTOSCALED)]))
    assert [note.split(" ")[0] for note in notes] == ["addons.gpu_operator.install", "addons.keda.install"]
    assert addons.render_mode_notes(stack(), addons.build_addons(stack(), [plan()])) == []


def test_hpa_policy_periods_stay_within_the_api_limit() -> None:
    serving_plan = plan({"engine": {"shutdown_timeout_seconds": 3000}, "lifecycle": {"startup_budget_seconds": 4000},
                         "autoscaling": {"min_replicas": 0, "max_replicas": 2, "scale_to_zero": True}})
    scaled = autoscaling.build_scaled_object(serving_plan)
    assert scaled is not None
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["policies"][0]["periodSeconds"] == 1800
    assert behavior["scaleDown"]["policies"][0]["periodSeconds"] == 1800
    assert scaled["spec"]["cooldownPeriod"] == serving_plan.cooldown_seconds > 1800
    validate_all([scaled])


def _run_hydration(tmp_path: Path, repo: str, fail: bool = False) -> tuple[str, int]:
    """Run the hydration script with python3 stubbed (the stub "downloads" by writing one file per call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text('#!/bin/sh\nmkdir -p "$MODEL_DIR"\n'
                                     'echo "$HF_REPO" >> "$MODEL_DIR/model.safetensors"\n'
                                     'echo call >> "$CALLS"\n' + ("exit 1\n" if fail else ""))
    (bin_dir / "python3").chmod(0o755)
    root = tmp_path / "models"
    script = storage.HYDRATION_SCRIPT.replace("/models/", f"{root}/")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "MODEL_DIR": str(root / "llm"), "HF_REPO": repo,
           "MARKER_FILE": storage.MARKER_FILE, "IGNORE_PATTERNS": "",
           "CALLS": str(tmp_path / "calls")}
    result = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=not fail)
    calls = (tmp_path / "calls").read_text().count("call") if (tmp_path / "calls").exists() else 0
    return result.stdout, calls


def test_hydration_script_is_idempotent_and_replaces_another_repo(tmp_path: Path) -> None:
    out, calls = _run_hydration(tmp_path, "org/a")
    assert calls == 1 and "hydrated: org/a" in out
    out, calls = _run_hydration(tmp_path, "org/a")
    assert calls == 1 and "already hydrated" in out, "second run with the marker downloads nothing"
    out, calls = _run_hydration(tmp_path, "org/b")
    assert calls == 2 and "replacing org/a with org/b" in out
    weights = (tmp_path / "models" / "llm" / "model.safetensors").read_text()
    assert weights == "org/b\n", "the old model's files are gone"
    assert (tmp_path / "models" / "llm" / storage.MARKER_FILE).read_text() == "org/b\n"


def test_failed_hydration_writes_no_marker_and_retries(tmp_path: Path) -> None:
    _run_hydration(tmp_path, "org/a", fail=True)
    assert not (tmp_path / "models" / "llm" / storage.MARKER_FILE).exists()
    out, calls = _run_hydration(tmp_path, "org/a")
    assert calls == 2 and "hydrated: org/a" in out


def test_only_lws_leaders_carry_scrape_annotations() -> None:
    """Workers run a Ray node, no HTTP server: a scrape hint there points Prometheus at nothing."""
    group = serving.build_workload(plan({}, MULTINODE_MODEL))["spec"]["leaderWorkerTemplate"]
    assert group["leaderTemplate"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert not any(key.startswith("prometheus.io/") for key in group["workerTemplate"]["metadata"]["annotations"])


@pytest.mark.parametrize(
    ("case", "model", "service_account", "warns"),
    [
        ("s3 with an IRSA service account", {"service_account_name": "vllm-s3-reader"}, "vllm-s3-reader", False),
        ("s3 without one warns before the 403", {}, None, True),
    ],
)
def test_s3_streaming_pods_run_as_the_named_service_account(case: str, model: dict[str, Any],
                                                            service_account: str | None, warns: bool) -> None:
    storage = {"storage": {"kind": "s3-runai-streamer", "s3_uri": "s3://bucket/llama"}}
    serving_plan = plan({**storage, **model})
    spec = pod_spec(serving.build_workload(serving_plan))
    assert spec.get("serviceAccountName") == service_account
    assert spec["automountServiceAccountToken"] is False
    assert any("service_account_name" in warning for warning in serving_plan.warnings) == warns


@pytest.mark.parametrize("stack_name", ["local", "edge", "prod", "multinode", "karpenter"])
def test_service_monitor_selects_the_service_by_its_own_labels(stack_name: str) -> None:
    """The Prometheus Operator matches a ServiceMonitor's selector against Service labels, not the Service's pod
    selector: the multi-node stack's monitor once carried the LWS pod label and scraped nothing (simulated cluster)."""
    from vllm_pulumi.components.manifests import read_stack_config
    from vllm_pulumi.runtime.planning.deployment import plan_deployment
    from vllm_pulumi.runtime.planning.deployment import load_deployment

    spec = load_deployment(read_stack_config(stack_name)).spec
    manifests = build_manifests(spec, plan_deployment(spec))
    monitors = [o for o in manifests if o["kind"] == "ServiceMonitor"]
    assert monitors
    for monitor in monitors:
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        selected = [o for o in manifests if o["kind"] == "Service" and o["metadata"]["namespace"] in
                    monitor["spec"]["namespaceSelector"]["matchNames"] and o["metadata"]["labels"].items() >= wanted]
        assert [s["metadata"]["name"] for s in selected] == [monitor["metadata"]["name"]]


@pytest.mark.parametrize(("case", "model", "settings", "expected"), [
    ("secret-by-name-in-created-namespace", {"api_key": {"existing_secret": {"name": "key", "key": "k"}}}, {},
     "Secrets key are referenced by name in namespace"),
    ("secret-by-name-in-existing-namespace", {"api_key": {"existing_secret": {"name": "key", "key": "k"}}},
     {"create_namespace": False}, None),
    ("polling-interval-without-scale-to-zero", {"autoscaling": {"max_replicas": 2, "polling_interval_seconds": 5}},
     {}, "polling_interval_seconds is set but has no effect"),
    ("polling-interval-with-scale-to-zero", {"autoscaling": {
        "min_replicas": 0, "max_replicas": 2, "scale_to_zero": True, "polling_interval_seconds": 5}}, {}, None),
    ("polling-interval-left-at-its-default", {"autoscaling": {"max_replicas": 2}}, {}, None),
])
def test_plan_warns_about_settings_kubernetes_or_keda_would_defeat(
    case: str, model: dict[str, Any], settings: dict[str, Any], expected: str | None
) -> None:
    warnings = " | ".join(plan(model, **settings).warnings)
    if expected is None:
        assert "referenced by name" not in warnings and "polling_interval_seconds" not in warnings, warnings
    else:
        assert expected in warnings, warnings


@pytest.mark.parametrize(("case", "model", "cache_dir", "claim_read_only"), [
    ("default: compile cache on the model volume, keyed", {},
     ".compile-cache/llm/vllm-{version}/tp1-pp1/l4", False),
    ("shared cache switched off: the pod's emptyDir", {"storage": {"shared_compile_cache": False}}, None, True),
    ("s3 has no volume to share", {"storage": {"kind": "s3-runai-streamer", "s3_uri": "s3://b/m"}}, None, None),
    ("a read-only-many claim takes no writes", {"storage": {"access_mode": "ReadOnlyMany"}}, None, True),
])
def test_shared_compile_cache_mount_and_env(case: str, model: dict[str, Any], cache_dir: str | None,
                                            claim_read_only: bool | None) -> None:
    serving_plan = plan(model)
    workload = serving.build_workload(serving_plan)
    server = container(workload)
    env = {e["name"]: e.get("value") for e in server["env"]}
    mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    if cache_dir is None:
        assert "/compile-cache" not in mounts, case
        assert env["VLLM_CACHE_ROOT"] == "/cache/vllm", case
    else:
        expected = cache_dir.format(version=serving_plan.spec.engine.vllm_version)
        assert mounts["/compile-cache"] == {"name": "models", "mountPath": "/compile-cache", "subPath": expected}
        assert "readOnly" not in mounts["/compile-cache"], case
        assert mounts["/models"]["readOnly"] is True, "the weights stay read-only"
        for name in ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
            assert env[name].startswith("/compile-cache/"), (case, name)
    if claim_read_only is not None:
        assert ("readOnly" in volumes["models"]["persistentVolumeClaim"]) == claim_read_only, case


@pytest.mark.parametrize(("case", "storage_spec", "engine", "flag", "concurrency"), [
    ("lustre streams with 32 threads", {"kind": "fsx-lustre"}, {}, "--load-format=runai_streamer", "32"),
    ("efs streams with 16 threads", {"kind": "efs"}, {}, "--load-format=runai_streamer", "16"),
    ("stated concurrency wins", {"kind": "efs", "runai_streamer_concurrency": 4}, {},
     "--load-format=runai_streamer", "4"),
    ("local nvme keeps the default loader", {"kind": "local-nvme"}, {}, None, None),
    ("a stated load format is kept", {"kind": "fsx-lustre"}, {"load_format": "safetensors"},
     "--load-format=safetensors", None),
])
def test_runai_streamer_on_shared_file_systems(case: str, storage_spec: dict[str, Any], engine: dict[str, Any],
                                               flag: str | None, concurrency: str | None) -> None:
    serving_plan = plan({"storage": storage_spec, "engine": engine})
    server = container(serving.build_workload(serving_plan))
    load_flags = [arg for arg in server["args"] if arg.startswith("--load-format")]
    assert load_flags == ([flag] if flag else []), case
    env = {e["name"]: e.get("value") for e in server["env"]}
    assert env.get("RUNAI_STREAMER_CONCURRENCY") == concurrency, case
    assert (serving_plan.startup.read_gb_per_second > STORAGE_READ_GB_PER_SECOND[storage_spec["kind"]]) == (
        concurrency is not None), "the budget reads at the streamer's speed exactly when it streams"


@pytest.mark.parametrize(("case", "model", "error"), [
    ("cold by default", {}, None),
    ("declared warm on a shared volume", {"lifecycle": {"compile_cache_warm": True}}, None),
    ("declared warm without a shared cache",
     {"lifecycle": {"compile_cache_warm": True}, "storage": {"shared_compile_cache": False}},
     "models[0].lifecycle.compile_cache_warm"),
    ("declared warm streaming from s3",
     {"lifecycle": {"compile_cache_warm": True}, "storage": {"kind": "s3-runai-streamer", "s3_uri": "s3://b/m"}},
     "models[0].lifecycle.compile_cache_warm"),
    ("declared warm on a read-only-many claim",
     {"lifecycle": {"compile_cache_warm": True}, "storage": {"access_mode": "ReadOnlyMany"}},
     "models[0].lifecycle.compile_cache_warm"),
])
def test_warm_compile_budget_only_when_declared_on_a_shared_cache(case: str, model: dict[str, Any],
                                                                  error: str | None) -> None:
    from vllm_pulumi.runtime.spec.validation import SpecError

    if error is not None:
        with pytest.raises(SpecError) as raised:
            plan(model)
        assert [issue.setting for issue in raised.value.issues] == [error], case
        assert "every pod compiles cold" in str(raised.value), case
        return
    serving_plan = plan(model)
    warm = model.get("lifecycle", {}).get("compile_cache_warm", False)
    startup = serving_plan.startup
    assert serving_plan.startup_budget_seconds == (startup.warm_total_seconds if warm
                                                   else startup.cold_total_seconds), case
    probe = container(serving.build_workload(serving_plan))["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= serving_plan.startup_budget_seconds, case
