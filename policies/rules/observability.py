"""Metrics: vLLM pods are scraped (annotations, a PodMonitor, or a ServiceMonitor over their Service), and scrape
annotations point at a port where a vLLM server serves /metrics."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.kinds import PLAIN_SERVING_KINDS
from vllm_pulumi.policies.label_selectors import monitored, services_selecting
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import as_int
from vllm_pulumi.policies.workload import Resource, serving_templates, vllm_port
from vllm_pulumi.runtime.vocabulary import PROMETHEUS_PORT_ANNOTATION, PROMETHEUS_SCRAPE_ANNOTATION


@rule(
    "scrape-annotation-port", group="Observability", enforcement="advisory", severity="low",
    kinds=PLAIN_SERVING_KINDS,
)
def scrape_annotation_port(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A pod template of a vLLM workload annotated prometheus.io/scrape: 'true' runs a vLLM server on the annotated
    prometheus.io/port (default: the server's --port).

    Why: Prometheus scrapes every annotated pod; on pods where nothing serves that port (LeaderWorkerSet workers run
    only Ray) the target is down forever, which pages whoever alerts on `up == 0`.

    Fix: Remove the prometheus.io annotations from templates without a vLLM server, or point them at a port that serves
    /metrics.
    """
    if not res.is_vllm:
        return
    for template in res.templates:
        notes = template.annotations
        if notes.get(PROMETHEUS_SCRAPE_ANNOTATION) != "true":
            continue
        servers = [s for s in res.servers if s.template is template]
        annotated = as_int(notes.get(PROMETHEUS_PORT_ANNOTATION))
        ports = {vllm_port(s) for s in servers}
        if not servers:
            yield Violation(f"{template.path} is annotated prometheus.io/scrape but runs no vLLM server "
                            f"(port {notes.get(PROMETHEUS_PORT_ANNOTATION, 'unset')} serves no /metrics there)",
                            f"remove the prometheus.io annotations from {template.path}")
        elif annotated is not None and annotated not in ports:
            yield Violation(f"{template.path}: prometheus.io/port {annotated} but vLLM serves /metrics on "
                            f"{', '.join(map(str, sorted(p for p in ports if p)))}",
                            f"set prometheus.io/port: '{min(p for p in ports if p)}'")


@rule(
    "metrics-scraped", group="Observability", enforcement="advisory", severity="medium", scope="stack",
    kinds=(*PLAIN_SERVING_KINDS, "ServiceMonitor", "PodMonitor", "Service"),
)
def metrics_scraped(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """vLLM pods are scraped: prometheus.io/scrape annotations on the pod template, or a PodMonitor, or a ServiceMonitor
    selecting a Service that selects the pods, in the same input.

    Why: Queue depth, KV-cache use and TTFT exist only in vLLM's /metrics; without scraping, KEDA scales on nothing and
    no alert can fire.

    Fix: Add a ServiceMonitor (or PodMonitor) whose selector matches the vLLM Service (or pods).
    """
    for workload in resources:
        if not workload.servers:
            continue
        for template in serving_templates(workload):
            if template.annotations.get(PROMETHEUS_SCRAPE_ANNOTATION) == "true":
                continue
            labels = workload.pod_labels(template)
            ns = workload.namespace
            if monitored(resources, "PodMonitor", ns, labels):
                continue
            selecting = services_selecting(resources, ns, labels)
            if any(monitored(resources, "ServiceMonitor", ns, s.labels) for s in selecting):
                continue
            services_text = ", ".join(s.name for s in selecting) or "none"
            yield Violation(
                f"nothing scrapes the vLLM pods of {template.path}: no prometheus.io/scrape annotation, no PodMonitor "
                f"and no ServiceMonitor over a Service selecting them in the input (Services selecting them: "
                f"{services_text})",
                "add a ServiceMonitor whose selector matches the vLLM Service's labels", resource=workload,
            )


RULES: tuple[Rule, ...] = (scrape_annotation_port, metrics_scraped)
"""This topic's rules, in the order the registry lists them."""
