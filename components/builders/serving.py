"""The vLLM workload: a Deployment (one pod holds a replica's GPUs) or a LeaderWorkerSet (a replica spans nodes).

Every number comes from the ServingPlan; this module only places the numbers. What the seed's reference manifest got
wrong for vLLM 0.33 is fixed here and in pod.py (the containers): drain is ``--shutdown-timeout`` (in plan.args) plus
a native preStop sleep, the liveness window covers the grace period, the startup window covers the startup budget,
startup and liveness use /health and readiness /ping (the same engine check, distinct failure budgets).
"""

from __future__ import annotations

from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.linters import workload_exemptions
from vllm_pulumi.components.builders.modelconfig import model_config_annotation
from vllm_pulumi.components.builders.placement import do_not_disrupt_annotations
from vllm_pulumi.components.builders.pod import leader_container, pod_spec, server_container, worker_container
from vllm_pulumi.components.builders.secrets import api_key_secret_name, build_generated_secret
from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.planning.lifecycle import PDB_MAX_UNAVAILABLE
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.facts.models import catalog_id_for
from vllm_pulumi.runtime.vocabulary import (
    LWS_API_GROUP,
    LWS_NAME_LABEL,
    PROMETHEUS_PATH_ANNOTATION,
    PROMETHEUS_PORT_ANNOTATION,
    PROMETHEUS_SCRAPE_ANNOTATION,
    PULUMI_TIMEOUT_ANNOTATION,
)

SERVICE_PORT = 80
LWS_API_VERSION = f"{LWS_API_GROUP}/v1"


# ---- small pieces -------------------------------------------------------------------------------------------------
def workload_kind(plan: ServingPlan) -> tuple[str, str]:
    """(apiVersion, kind) of the workload the plan's layout calls for."""
    if plan.multi_node:
        return LWS_API_VERSION, "LeaderWorkerSet"
    return "apps/v1", "Deployment"


def version_label(plan: ServingPlan) -> str:
    return plan.spec.engine.vllm_version


def server_labels(plan: ServingPlan) -> dict[str, str]:
    return lbl.common_labels(plan.spec.name, lbl.SERVER, version_label(plan))


def rollout_annotations(plan: ServingPlan) -> dict[str, str]:
    """The pool facts the rollout was derived from, so the rollout policy judges the same numbers. Workload
    metadata only: on the pod template they would restart every pod whenever a pool changes size."""
    return {
        ann.NODE_POOL: plan.node_shape.pool,
        ann.POOL_MAX_NODES: str(plan.node_shape.max_nodes),
        ann.NODE_GPUS: str(plan.node_shape.gpus),
        ann.MAX_REPLICAS: str(plan.rollout.max_replicas),
        ann.REPLICA_CAPACITY: str(plan.rollout.replica_capacity),
    }


def rolling_update(plan: ServingPlan) -> dict[str, int]:
    """Surge while the pool has room for one more replica at max scale; else replace one at a time (plan.rollout)."""
    return {"maxSurge": plan.rollout.max_surge, "maxUnavailable": plan.rollout.max_unavailable}


def project_annotations(plan: ServingPlan) -> dict[str, str]:
    """Facts the policies read back instead of guessing (runtime/annotations.py)."""
    spec = plan.spec
    catalog_id = catalog_id_for(spec.model)
    result = {
        ann.MODEL: catalog_id or plan.hf_repo or spec.model,
        ann.GPU: plan.gpu.id,
        ann.STORAGE_KIND: spec.storage.kind,
        ann.STARTUP_BUDGET_SECONDS: str(plan.startup_budget_seconds),
    }
    if catalog_id is None:
        # The config.json fields the planner read, so a policy can re-plan without the file.
        result[ann.MODEL_CONFIG] = model_config_annotation(plan.model)
    return result


def scrape_annotations(plan: ServingPlan) -> dict[str, str]:
    return {
        PROMETHEUS_SCRAPE_ANNOTATION: "true",
        PROMETHEUS_PORT_ANNOTATION: str(plan.spec.engine.port),
        PROMETHEUS_PATH_ANNOTATION: "/metrics",
    }


def _template(plan: ServingPlan, pod_labels: dict[str, str], spec: dict[str, Any], *,
              serves_metrics: bool = True) -> dict[str, Any]:
    """Pod template metadata; scrape annotations only where vLLM's HTTP server (and its /metrics) runs."""
    annotations = {**(scrape_annotations(plan) if serves_metrics else {}), **project_annotations(plan),
                   **do_not_disrupt_annotations(plan.node_shape)}
    return {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": spec}


def _workload_metadata(plan: ServingPlan) -> dict[str, Any]:
    annotations = {**project_annotations(plan), **rollout_annotations(plan)}
    # Pulumi waits as long as the rollout may take (ServingPlan.progress_deadline_seconds), not its 10-minute default.
    annotations[PULUMI_TIMEOUT_ANNOTATION] = str(plan.progress_deadline_seconds)
    annotations.update(workload_exemptions(plan))  # on the workload, not the pod template: no restart for a linter
    return lbl.metadata(plan.spec.name, plan.namespace, server_labels(plan), annotations)


def replicas_field(plan: ServingPlan) -> dict[str, Any]:
    """`replicas` only when no autoscaler owns it (otherwise every `pulumi up` would reset KEDA's count)."""
    if plan.spec.autoscaling is not None:
        return {}
    return {"replicas": plan.spec.replicas}


# ---- workloads ----------------------------------------------------------------------------------------------------
def build_deployment(plan: ServingPlan) -> dict[str, Any]:
    """All of a replica's GPUs in one pod; vLLM's own multiprocessing handles tensor parallelism."""
    container = server_container(plan, "vllm", ["vllm", "serve"], list(plan.args))
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _workload_metadata(plan),
        "spec": {
            **replicas_field(plan),
            "selector": {"matchLabels": lbl.selector_labels(plan.spec.name, lbl.SERVER)},
            # With room for a surge replica, a new pod is Ready before an old one drains; without, one at a time.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update(plan)},
            "progressDeadlineSeconds": plan.progress_deadline_seconds,
            "template": _template(plan, server_labels(plan), pod_spec(plan, container)),
        },
    }


def build_leader_worker_set(plan: ServingPlan) -> dict[str, Any]:
    """A replica over `size` whole-node pods joined by Ray; the leader serves HTTP with single-pod safety."""
    worker_labels = lbl.common_labels(plan.spec.name, lbl.WORKER, version_label(plan))
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": _workload_metadata(plan),
        "spec": {
            **replicas_field(plan),
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling_update(plan)},
            # Workers start with the leader: LeaderReady would deadlock (the leader is ready only once they joined).
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": plan.layout.size,
                # One lost pod breaks the NCCL/Ray group: restart the whole group rather than leave it hung.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _template(plan, server_labels(plan), pod_spec(plan, leader_container(plan))),
                "workerTemplate": _template(plan, worker_labels, pod_spec(plan, worker_container(plan)),
                                            serves_metrics=False),
            },
        },
    }


def build_workload(plan: ServingPlan) -> dict[str, Any]:
    if plan.multi_node:
        return build_leader_worker_set(plan)
    return build_deployment(plan)


# ---- around the workload ------------------------------------------------------------------------------------------
def service_selector(plan: ServingPlan) -> dict[str, str]:
    """Serving pods only: for an LWS the leaders (workers have no HTTP server)."""
    selector = lbl.selector_labels(plan.spec.name, lbl.SERVER)
    if plan.multi_node:
        selector[LWS_NAME_LABEL] = plan.spec.name
    return selector


def pdb_selector(plan: ServingPlan) -> dict[str, str]:
    """Exactly the serving pods: the Deployment's own selector, or every pod of the LeaderWorkerSet (leaders and
    workers; LWS labels them all with its name).

    Never the instance's name + instance labels alone: the hydration Job's pod carries those too, and the Job keeps
    its Succeeded pod. With maxUnavailable the disruption controller needs the scale of every pod's controller; a
    Job has none, so it never computes the budget, disruptionsAllowed stays 0 and every eviction is refused (drains,
    cluster upgrades and GPU node scale-in hang). An LWS's pods are owned by StatefulSets, which have a scale.
    """
    if plan.multi_node:
        return {LWS_NAME_LABEL: plan.spec.name}
    return lbl.selector_labels(plan.spec.name, lbl.SERVER)


def build_pod_disruption_budget(plan: ServingPlan) -> dict[str, Any]:
    """maxUnavailable 1 with unhealthy pods always evictable: voluntary evictions take one replica at a time, and
    never block a node drain.

    The same bound the rollout keeps: a surging rollout takes no replica down, a replace-one-at-a-time rollout one,
    and while it has one down the budget allows no eviction (a drain waits for that step). A single healthy replica
    may be evicted (1 of 1 allowed), so cluster upgrades and GPU node scale-down proceed. A not-ready pod (still
    loading, or broken) is evictable too (unhealthyPodEvictionPolicy AlwaysAllow), where the default policy would
    block the drain until it turned ready. For an LWS the budget covers every pod of the set: evicting a worker
    restarts its whole group. It selects the serving pods and nothing else (``pdb_selector`` says why).
    """
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": lbl.metadata(plan.spec.name, plan.namespace, server_labels(plan)),
        "spec": {
            "maxUnavailable": PDB_MAX_UNAVAILABLE,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": {"matchLabels": pdb_selector(plan)},
        },
    }


def build_serving_secrets(plan: ServingPlan) -> list[dict[str, Any]]:
    """Secrets this model's serving needs created (from Pulumi secrets), without their data."""
    spec = plan.spec
    result = []
    if spec.api_key is not None and spec.api_key.pulumi_secret is not None:
        result.append(build_generated_secret(api_key_secret_name(spec.name), plan.namespace,
                                             server_labels(plan)))
    return result


def build_serving(plan: ServingPlan) -> list[dict[str, Any]]:
    """Workload and PodDisruptionBudget of one model (Service and NetworkPolicy: network.py)."""
    return [build_workload(plan), build_pod_disruption_budget(plan)]
