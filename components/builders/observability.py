"""Scrape config, alerts and a Grafana dashboard for one model, with metric names as vLLM 0.33 exports them.

Prometheus exposes counters with a `_total` suffix (vllm:generation_tokens -> vllm:generation_tokens_total);
histograms as `_bucket`/`_sum`/`_count`. The KV cache gauge is vllm:kv_cache_usage_perc (0..1) since the V1 engine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.autoscaling import metric_selector, promql_string
from vllm_pulumi.components.builders.pod import HTTP_PORT_NAME
from vllm_pulumi.components.builders.serving import service_selector
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.deployment import ObservabilitySpec
from vllm_pulumi.runtime.vocabulary import PROMETHEUS_OPERATOR_API_GROUP

OBSERVABILITY_COMPONENT = "observability"
# Queue depth above which a growing queue pages when the model is not autoscaled (KEDA's threshold otherwise).
DEFAULT_QUEUE_ALERT_THRESHOLD = 5
MONITORING_API_VERSION = f"{PROMETHEUS_OPERATOR_API_GROUP}/v1"


def _labels(plan: ServingPlan, more: dict[str, str] | None = None) -> dict[str, str]:
    result = lbl.common_labels(plan.spec.name, OBSERVABILITY_COMPONENT)
    result.update(more or {})
    return result


def scrape_job(plan: ServingPlan, observability: ObservabilitySpec) -> str:
    """The `job` label Prometheus Operator gives the scraped series."""
    if observability.monitor == "PodMonitor":
        return f"{plan.namespace}/{plan.spec.name}"
    return plan.spec.name


# The monitor kinds of Prometheus Operator, and the field each lists its scrape endpoints in.
MONITOR_ENDPOINTS_FIELD = {"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}


def build_monitor(plan: ServingPlan, observability: ObservabilitySpec) -> dict[str, Any] | None:
    if observability.monitor not in MONITOR_ENDPOINTS_FIELD:
        return None
    interval = f"{observability.scrape_interval_seconds}s"
    endpoint = {"port": HTTP_PORT_NAME, "path": "/metrics", "interval": interval}
    # vLLM serves /metrics on the OpenAI port of the server pod (the LWS leader); workers have none. A PodMonitor
    # selects those pods; a ServiceMonitor selects the Service by the Service's own labels, which lack the LWS name
    # label of its pod selector (with it, nothing was scraped: found in the simulated cluster).
    selector = {"matchLabels": service_selector(plan)}
    if observability.monitor == "ServiceMonitor":
        selector = {"matchLabels": lbl.selector_labels(plan.spec.name, lbl.SERVER)}
    return {
        "apiVersion": MONITORING_API_VERSION,
        "kind": observability.monitor,
        "metadata": lbl.metadata(plan.spec.name, plan.namespace, _labels(plan, observability.monitor_labels)),
        "spec": {"selector": selector, "namespaceSelector": {"matchNames": [plan.namespace]},
                 MONITOR_ENDPOINTS_FIELD[observability.monitor]: [endpoint]},
    }


def alert_rules(plan: ServingPlan, observability: ObservabilitySpec) -> list[dict[str, Any]]:
    sel = metric_selector(plan)
    up = f"up{{namespace={promql_string(plan.namespace)},job={promql_string(scrape_job(plan, observability))}}}"
    autoscaling = plan.spec.autoscaling
    queue_threshold = autoscaling.queue_threshold if autoscaling else DEFAULT_QUEUE_ALERT_THRESHOLD
    queue = f"sum(vllm:num_requests_waiting{{{sel}}})"
    name = plan.spec.name
    common = {"namespace": plan.namespace, "deployment": name}

    def rule(alert: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, Any]:
        return {
            "alert": alert,
            "expr": expr,
            "for": duration,
            "labels": {"severity": severity, **common},
            "annotations": {"summary": summary},
        }

    down = f"{up} == 0"
    if not (autoscaling and autoscaling.scale_to_zero):
        # No target at all (every pod gone) is "down" too, unless zero replicas is the intended idle state.
        down = f"({down}) or absent({up})"
    return [
        rule("VllmQueueGrowing", f"{queue} > {queue_threshold} and deriv({queue}[10m:1m]) > 0", "10m", "warning",
             f"{name}: requests are queueing and the queue keeps growing; add replicas or raise max_replicas"),
        rule("VllmKvCacheHigh",
             f"max(vllm:kv_cache_usage_perc{{{sel}}}) > {observability.kv_cache_alert_threshold}", "15m",
             "warning", f"{name}: KV cache above {observability.kv_cache_alert_threshold:.0%} for 15 minutes; "
             "preemptions follow"),
        rule("VllmTtftP95High",
             f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{sel}}}[5m]))) > "
             f"{observability.ttft_p95_slo_seconds}", "10m", "warning",
             f"{name}: p95 time to first token above the {observability.ttft_p95_slo_seconds} s SLO"),
        rule("VllmPreemptions", f"sum(increase(vllm:num_preemptions_total{{{sel}}}[10m])) > 0", "10m", "warning",
             f"{name}: the engine preempts sequences (KV cache exhausted); lower max_num_seqs or add capacity"),
        rule("VllmEngineDown", down, "5m", "critical", f"{name}: the vLLM engine is not answering /metrics"),
    ]


def build_prometheus_rule(plan: ServingPlan, observability: ObservabilitySpec) -> dict[str, Any] | None:
    if not observability.alerts:
        return None
    return {
        "apiVersion": MONITORING_API_VERSION,
        "kind": "PrometheusRule",
        "metadata": lbl.metadata(plan.spec.name, plan.namespace,
                                 _labels(plan, observability.monitor_labels)),
        "spec": {"groups": [{"name": f"vllm.{plan.namespace}.{plan.spec.name}",
                             "rules": alert_rules(plan, observability)}]},
    }


def _panel(panel_id: int, title: str, unit: str, targets: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(targets)],
    }


def dashboard(plan: ServingPlan) -> dict[str, Any]:
    """Six panels: TTFT, inter-token latency, tokens/s, queue depth, KV cache, GPU memory and HBM use (DCGM)."""
    sel = metric_selector(plan)
    # DCGM exporter labels GPU series with the pod using the GPU (honorLabels on its ServiceMonitor keeps them).
    gpu_sel = f"namespace={promql_string(plan.namespace)},pod=~{promql_string(plan.spec.name + '-.*')}"

    def quantile(q: str, metric: str) -> str:
        return f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{sel}}}[5m])))"

    panels = [
        _panel(1, "Time to first token", "s", [
            (quantile("0.5", "vllm:time_to_first_token_seconds"), "p50"),
            (quantile("0.95", "vllm:time_to_first_token_seconds"), "p95"),
        ], 0, 0),
        _panel(2, "Inter-token latency", "s", [
            (quantile("0.5", "vllm:inter_token_latency_seconds"), "p50"),
            (quantile("0.95", "vllm:inter_token_latency_seconds"), "p95"),
        ], 12, 0),
        _panel(3, "Tokens per second", "short", [
            (f"sum(rate(vllm:generation_tokens_total{{{sel}}}[1m]))", "generated"),
            (f"sum(rate(vllm:prompt_tokens_total{{{sel}}}[1m]))", "prompt"),
        ], 0, 8),
        _panel(4, "Queue depth", "short", [
            (f"sum(vllm:num_requests_waiting{{{sel}}})", "waiting"),
            (f"sum(vllm:num_requests_running{{{sel}}})", "running"),
        ], 12, 8),
        _panel(5, "KV cache usage", "percentunit", [
            (f"vllm:kv_cache_usage_perc{{{sel}}}", "{{pod}}"),
        ], 0, 16),
        _panel(6, "GPU memory and HBM bandwidth use", "short", [
            (f"sum by (pod, gpu) (DCGM_FI_DEV_FB_USED{{{gpu_sel}}})", "used MiB {{pod}}/{{gpu}}"),
            (f"sum by (pod, gpu) (DCGM_FI_DEV_FB_FREE{{{gpu_sel}}})", "free MiB {{pod}}/{{gpu}}"),
            (f"avg by (pod, gpu) (DCGM_FI_PROF_DRAM_ACTIVE{{{gpu_sel}}})", "HBM active {{pod}}/{{gpu}}"),
        ], 12, 16),
    ]
    uid = "vllm-" + hashlib.sha256(f"{plan.namespace}/{plan.spec.name}".encode()).hexdigest()[:16]
    return {
        "uid": uid,
        "title": f"vLLM {plan.namespace}/{plan.spec.name}",
        "tags": ["vllm", "vllm-pulumi"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
        }]},
        "panels": panels,
    }


def build_dashboard_config_map(plan: ServingPlan, observability: ObservabilitySpec) -> dict[str, Any] | None:
    if not observability.dashboard:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": lbl.metadata(f"{plan.spec.name}-dashboard", plan.namespace,
                                 _labels(plan, observability.dashboard_labels)),
        # Compact JSON: Grafana does not care, and an indented dump runs Python's slow pure-Python encoder.
        "data": {f"vllm-{plan.spec.name}.json": json.dumps(dashboard(plan), sort_keys=True, separators=(",", ":"))},
    }


def build_observability(plan: ServingPlan, observability: ObservabilitySpec) -> list[dict[str, Any]]:
    objects = [
        build_monitor(plan, observability),
        build_prometheus_rule(plan, observability),
        build_dashboard_config_map(plan, observability),
    ]
    return [obj for obj in objects if obj is not None]
