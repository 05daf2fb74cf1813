"""KEDA ScaledObject on vLLM's own queue (never CPU: the GPU does the work, the pod's CPU idles under full load)."""

from __future__ import annotations

from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.serving import workload_kind
from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.runtime.spec import AutoscalingSpec
from vllm_pulumi.runtime.vocabulary import KEDA_API_GROUP

AUTOSCALER_COMPONENT = "autoscaler"
# HPA behavior policies accept periodSeconds up to 1800 (autoscaling/v2 validation).
HPA_MAX_POLICY_PERIOD_SECONDS = 1800
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
    autoscaling = plan.spec.autoscaling
    if autoscaling is None:
        return None
    api_version, kind = workload_kind(plan)
    triggers = prometheus_triggers(plan, autoscaling)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": plan.spec.name},
        "minReplicaCount": autoscaling.min_replicas,
        "maxReplicaCount": autoscaling.max_replicas,
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": autoscaling.scale_down_stabilization_seconds,
                        # At most one replica fewer than a drain window ago (HPA caps a policy period at 30 min).
                        # The HPA counts from the replicas at the period's start, so replicas added within the
                        # period may go together (seen in the simulated cluster); each still drains on its own.
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": min(
                            plan.cooldown_seconds or HPA_MAX_POLICY_PERIOD_SECONDS, HPA_MAX_POLICY_PERIOD_SECONDS)}],
                    },
                    # A new replica needs a whole startup budget before it takes load, and the queue does not
                    # shrink meanwhile: without a limit the HPA would keep adding replicas for the same backlog. One
                    # replica per startup budget (HPA caps a period at 30 min) lets each new one count before the
                    # next. The node phases (provisioning, image pull; plan.startup.node_phases) are left out: they
                    # happen only when no node is free, and adding them to every period would slow a surge on free
                    # nodes by minutes; a replica still waiting for its node costs at most one extra replica per
                    # budget, bounded by max_replicas.
                    "scaleUp": {
                        "stabilizationWindowSeconds": 0,
                        "policies": [{
                            "type": "Pods",
                            "value": 1,
                            "periodSeconds": min(plan.startup_budget_seconds, HPA_MAX_POLICY_PERIOD_SECONDS),
                        }],
                    },
                },
            },
        },
        "triggers": triggers,
    }
    if autoscaling.scale_to_zero:
        # idleReplicaCount 0: KEDA drops to zero when every trigger is inactive and back to minReplicaCount (>= 1)
        # once one activates. KEDA requires idle < min, so min stays at least 1 (plan.warnings carries the cold-start
        # warning). Activation needs a waiting request Prometheus can see: with no pod, vLLM's own queue has no
        # series, so a queueing gateway (or the KEDA HTTP add-on) must hold requests while the first pod starts.
        spec["idleReplicaCount"] = 0
        spec["minReplicaCount"] = max(1, autoscaling.min_replicas)
        # Only here does KEDA poll Prometheus itself (to wake from zero) and wait cooldownPeriod (before dropping to
        # zero); above zero the HPA paces the queries and its scale-down window applies, and KEDA's admission webhook
        # warns that both settings are ignored. Never drop to zero faster than a replica drains.
        spec["pollingInterval"] = autoscaling.polling_interval_seconds
        spec["cooldownPeriod"] = plan.cooldown_seconds
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
