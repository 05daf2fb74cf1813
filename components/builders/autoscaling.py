"""KEDA ScaledObject on vLLM's own queue (never CPU: the GPU does the work, the pod's CPU idles under full load)."""

from __future__ import annotations

from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.serving import workload_kind
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.model import AutoscalingSpec
from vllm_pulumi.runtime.vocabulary import KEDA_API_GROUP

AUTOSCALER_COMPONENT = "autoscaler"
# KEDA's fallback engages after this many failed Prometheus queries in a row.
FALLBACK_FAILURE_THRESHOLD = 3


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def served_model_name(plan: ServingPlan) -> str:
    return plan.spec.served_model_name or plan.spec.name


def metric_selector(plan: ServingPlan) -> str:
    """Label matchers for this model's vLLM series (Prometheus adds `namespace` from the scrape target)."""
    return f"namespace={promql_string(plan.namespace)},model_name={promql_string(served_model_name(plan))}"


def queue_query(plan: ServingPlan) -> str:
    return f"sum(vllm:num_requests_waiting{{{metric_selector(plan)}}})"


def kv_cache_query(plan: ServingPlan) -> str:
    """Summed over pods: with KEDA's default AverageValue the HPA divides by the replica count, so the threshold is
    the KV cache use per replica (and KEDA's fallback, which refuses Value-type triggers, keeps working)."""
    return f"sum(vllm:kv_cache_usage_perc{{{metric_selector(plan)}}})"


def scaled_object_name(plan: ServingPlan) -> str:
    return plan.spec.name


def prometheus_triggers(plan: ServingPlan, autoscaling: AutoscalingSpec) -> list[dict[str, Any]]:
    """The queue trigger, and the KV cache trigger when the stack asks for it."""
    triggers: list[dict[str, Any]] = [{
        "type": "prometheus",
        "name": "queue",
        "metadata": {
            "serverAddress": autoscaling.prometheus_address,
            "query": queue_query(plan),
            # Per replica (AverageValue): replicas = ceil(waiting / threshold).
            "threshold": str(autoscaling.queue_threshold),
            # With no series (no pod scraped yet), treat the queue as empty rather than failing the scaler.
            "ignoreNullValues": "true",
        },
    }]
    if autoscaling.kv_cache_trigger:
        triggers.append({
            "type": "prometheus",
            "name": "kv-cache",
            "metadata": {
                "serverAddress": autoscaling.prometheus_address,
                "query": kv_cache_query(plan),
                "threshold": str(autoscaling.kv_cache_threshold),
                "ignoreNullValues": "true",
            },
        })
    return triggers


def build_scaled_object(plan: ServingPlan) -> dict[str, Any] | None:
    autoscaling, scaling = plan.spec.autoscaling, plan.autoscaling
    if autoscaling is None or scaling is None:
        return None
    api_version, kind = workload_kind(plan)
    triggers = prometheus_triggers(plan, autoscaling)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": plan.spec.name},
        "minReplicaCount": scaling.min_replica_count,
        "maxReplicaCount": autoscaling.max_replicas,
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": autoscaling.scale_down_stabilization_seconds,
                        # At most one replica fewer than a drain window ago (AutoscalingPlan says why).
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": scaling.scale_down_period_seconds}],
                    },
                    # One replica per startup budget, so each new one counts before the next (AutoscalingPlan).
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": scaling.scale_up_period_seconds}],
                    },
                },
            },
        },
        "triggers": triggers,
    }
    if autoscaling.scale_to_zero:
        # idleReplicaCount 0: KEDA drops to zero when every trigger is inactive and back to minReplicaCount (>= 1,
        # AutoscalingPlan.min_replica_count) once one activates (plan.warnings carries the cold-start warning).
        # Activation needs a waiting request Prometheus can see: with no pod, vLLM's own queue has no series, so a
        # queueing gateway (or the KEDA HTTP add-on) must hold requests while the first pod starts.
        spec["idleReplicaCount"] = 0
        # Only here does KEDA poll Prometheus itself (to wake from zero) and wait cooldownPeriod (before dropping to
        # zero); above zero the HPA paces the queries and its scale-down window applies, and KEDA's admission webhook
        # warns that both settings are ignored. Never drop to zero faster than a replica drains.
        spec["pollingInterval"] = autoscaling.polling_interval_seconds
        spec["cooldownPeriod"] = scaling.cooldown_seconds
        spec["triggers"][0]["metadata"]["activationThreshold"] = "0"
    if autoscaling.fallback_replicas is not None:
        spec["fallback"] = {"failureThreshold": FALLBACK_FAILURE_THRESHOLD, "replicas": autoscaling.fallback_replicas}
    return {
        "apiVersion": f"{KEDA_API_GROUP}/v1alpha1",
        "kind": "ScaledObject",
        "metadata": lbl.metadata(scaled_object_name(plan), plan.namespace,
                                 lbl.common_labels(plan.spec.name, AUTOSCALER_COMPONENT)),
        "spec": spec,
    }
