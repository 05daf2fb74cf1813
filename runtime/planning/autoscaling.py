"""KEDA queue autoscaling of one model: how fast replicas come and go, computed here so the ScaledObject builder
only writes the numbers down."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec

# KEDA must not remove a replica faster than a drain takes, nor flap in under two minutes (seed: 120 s).
MIN_COOLDOWN_SECONDS = 120
# HPA behavior policies accept periodSeconds up to 1800 (autoscaling/v2 validation).
HPA_MAX_POLICY_PERIOD_SECONDS = 1800


@dataclass(frozen=True)
class AutoscalingPlan:
    """The derived numbers of a model's ScaledObject (its other settings are the stack's autoscaling section)."""

    min_replica_count: int
    """minReplicaCount: autoscaling.min_replicas; with scale_to_zero at least 1, since KEDA requires its idle count
    (0) below it and returns to it once a trigger activates."""
    cooldown_seconds: int
    """One replica removed per this many seconds: the stack's cooldown_seconds, else max(MIN_COOLDOWN_SECONDS, the
    grace period); with scale_to_zero also KEDA's cooldownPeriod, the idle time before dropping to zero."""
    scale_down_period_seconds: int
    """The HPA's scale-down policy period: at most one replica fewer per cooldown. The HPA counts from the replicas
    at the period's start, so replicas added within the period may go together (seen in the simulated cluster); each
    still drains on its own."""
    scale_up_period_seconds: int
    """The HPA's scale-up policy period: one replica per startup budget. A new replica needs a whole budget before it
    takes load and the queue does not shrink meanwhile, so without a limit the HPA would keep adding replicas for the
    same backlog. The node phases (provisioning, image pull; ServingPlan.startup.node_phases) are left out: they
    happen only when no node is free, and adding them to every period would slow a surge on free nodes by minutes; a
    replica still waiting for its node costs at most one extra replica per budget, bounded by max_replicas."""


def plan_autoscaling(model: ModelDeploymentSpec, grace_seconds: int, startup_budget_seconds: int,
                     path: str) -> AutoscalingPlan | None:
    """The ScaledObject's numbers (None without autoscaling); refuses a cooldown shorter than a drain."""
    autoscaling = model.autoscaling
    if autoscaling is None:
        return None
    floor = max(MIN_COOLDOWN_SECONDS, grace_seconds)
    cooldown = autoscaling.cooldown_seconds or floor
    if cooldown < floor:
        raise PlanningError(
            f"{path}.autoscaling.cooldown_seconds", cooldown,
            f"shorter than max({MIN_COOLDOWN_SECONDS} s, the {grace_seconds} s grace period): replicas would be "
            "removed while they still drain", f"use at least {floor}",
        )
    return AutoscalingPlan(
        min_replica_count=max(1, autoscaling.min_replicas) if autoscaling.scale_to_zero else autoscaling.min_replicas,
        cooldown_seconds=cooldown,
        # HPA caps a policy period at 30 min.
        scale_down_period_seconds=min(cooldown, HPA_MAX_POLICY_PERIOD_SECONDS),
        scale_up_period_seconds=min(startup_budget_seconds, HPA_MAX_POLICY_PERIOD_SECONDS),
    )


def autoscaling_warnings(model: ModelDeploymentSpec, path: str, startup_budget_seconds: int,
                         node_seconds: int) -> list[str]:
    """What scaling to zero costs a first request, and a polling interval that does nothing above zero."""
    autoscaling = model.autoscaling
    if autoscaling is not None and autoscaling.scale_to_zero:
        return [
            f"scale to zero: the first request after idle waits a cold start of about {startup_budget_seconds} s, "
            f"and about {node_seconds} s more when a GPU node must be provisioned and the image pulled first"
        ]
    if autoscaling is not None and "polling_interval_seconds" in autoscaling.model_fields_set:
        return [
            f"{path}.autoscaling.polling_interval_seconds is set but has no effect without scale_to_zero: KEDA "
            "polls Prometheus itself only to wake a model from zero; above zero the HPA controller's sync period "
            "(15 s by default) paces the queries"
        ]
    return []
