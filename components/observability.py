"""Observability: ServiceMonitor/PodMonitor, PrometheusRule alerts and the Grafana dashboard of one model."""

from __future__ import annotations

import pulumi

from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.runtime.spec import ObservabilitySpec
from vllm_pulumi.components.builders.observability import build_observability
from vllm_pulumi.components.kube import inherited_depends_on, register_objects


class Observability(pulumi.ComponentResource):
    def __init__(
        self, name: str, plan: ServingPlan, observability: ObservabilitySpec, *,
        labels: dict[str, str] | None = None, opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:Observability", name, None, opts)
        after = inherited_depends_on(opts)
        register_objects(f"{name}-observability", build_observability(plan, observability, labels), self, after)
        self.register_outputs({})
