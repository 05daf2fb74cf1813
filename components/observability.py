"""Observability: ServiceMonitor/PodMonitor, PrometheusRule alerts and the Grafana dashboard of one model."""

from __future__ import annotations

import pulumi

from vllm_pulumi.components.composition import ModelObjects
from vllm_pulumi.components.kube import inherited_depends_on, register_objects


class Observability(pulumi.ComponentResource):
    def __init__(self, name: str, model: ModelObjects, *, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("vllm-pulumi:index:Observability", name, None, opts)
        register_objects(f"{name}-observability", model.observability, self, inherited_depends_on(opts))
        self.register_outputs({})
