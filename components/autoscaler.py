"""QueueAutoscaler: a KEDA ScaledObject on vLLM's waiting queue for one model's workload."""

from __future__ import annotations

import pulumi

from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.components.builders.autoscaling import build_scaled_object
from vllm_pulumi.components.kube import inherited_depends_on, register_objects


class QueueAutoscaler(pulumi.ComponentResource):
    def __init__(
        self, name: str, plan: ServingPlan, *, labels: dict[str, str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:QueueAutoscaler", name, None, opts)
        after = inherited_depends_on(opts)
        scaled = build_scaled_object(plan, labels)
        register_objects(f"{name}-autoscaling", [scaled] if scaled is not None else [], self, after)
        self.register_outputs({})
