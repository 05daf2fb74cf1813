"""QueueAutoscaler: a KEDA ScaledObject on vLLM's waiting queue for one model's workload."""

from __future__ import annotations

import pulumi

from vllm_pulumi.components.composition import ModelObjects
from vllm_pulumi.components.kube import inherited_depends_on, register_objects


class QueueAutoscaler(pulumi.ComponentResource):
    def __init__(self, name: str, model: ModelObjects, *, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("vllm-pulumi:index:QueueAutoscaler", name, None, opts)
        register_objects(f"{name}-autoscaling", model.autoscaling, self, inherited_depends_on(opts))
        self.register_outputs({})
