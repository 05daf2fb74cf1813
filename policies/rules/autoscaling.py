"""Autoscaling of vLLM workloads: never on CPU or memory, and scale-down no faster than a drain."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.label_selectors import objects_by_key
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, rule
from vllm_pulumi.policies.values import as_int, mapping, sequence
from vllm_pulumi.policies.workload import Resource, serving_templates
from vllm_pulumi.runtime.planning.autoscaling import MIN_COOLDOWN_SECONDS

_RESOURCE_METRICS = frozenset({"cpu", "memory"})


def _target(autoscaler: Resource, by_key: Mapping[tuple[str, str, str], Resource]) -> Resource | None:
    ref = mapping(autoscaler.spec.get("scaleTargetRef"))
    kind = str(ref.get("kind") or "Deployment")
    return by_key.get((autoscaler.namespace, kind, str(ref.get("name", ""))))


def _autoscalers(resources: Sequence[Resource]) -> Iterator[tuple[Resource, Resource]]:
    by_key = objects_by_key(resources)
    for resource in resources:
        if resource.kind in ("ScaledObject", "HorizontalPodAutoscaler"):
            target = _target(resource, by_key)
            if target is not None and target.is_vllm:
                yield resource, target


@rule(
    "no-cpu-autoscaling", group="Autoscaling", enforcement="mandatory", severity="high", scope="stack",
    kinds=("HorizontalPodAutoscaler", "ScaledObject"),
)
def no_cpu_autoscaling(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """No HorizontalPodAutoscaler metric or KEDA trigger on cpu or memory targets a vLLM workload.

    Why: The GPU does the work: a vLLM pod's CPU sits at 5-10% at full load and its memory is fixed at start, so
    CPU/memory autoscaling either never scales or scales on noise. Queue depth is the signal.

    Fix: Scale with KEDA on vllm:num_requests_waiting (a prometheus trigger), optionally vllm:kv_cache_usage_perc.
    """
    for autoscaler, target in _autoscalers(resources):
        if autoscaler.kind == "ScaledObject":
            for i, trigger in enumerate(sequence(autoscaler.spec.get("triggers"))):
                kind = mapping(trigger).get("type")
                if kind in _RESOURCE_METRICS:
                    yield Violation(f"spec.triggers[{i}] scales {target.describe()} on {kind}",
                                    "replace it with a prometheus trigger on vllm:num_requests_waiting",
                                    resource=autoscaler)
            continue
        if autoscaler.spec.get("targetCPUUtilizationPercentage") is not None:
            yield Violation(f"autoscaling/v1 targetCPUUtilizationPercentage scales {target.describe()} on cpu",
                            "use KEDA on vllm:num_requests_waiting instead", resource=autoscaler)
        for i, metric in enumerate(sequence(autoscaler.spec.get("metrics"))):
            metric = mapping(metric)
            source = mapping(metric.get("resource") or metric.get("containerResource"))
            if metric.get("type") in ("Resource", "ContainerResource") and source.get("name") in _RESOURCE_METRICS:
                yield Violation(f"spec.metrics[{i}] scales {target.describe()} on {source.get('name')}",
                                "use KEDA on vllm:num_requests_waiting instead", resource=autoscaler)


@rule(
    "autoscaler-cooldown", group="Autoscaling", enforcement="mandatory", severity="medium", scope="stack",
    kinds=("ScaledObject", "HorizontalPodAutoscaler"),
    settings={"min_cooldown_seconds": Setting(MIN_COOLDOWN_SECONDS, "Floor for the scale-down delay.")},
)
def autoscaler_cooldown(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """An autoscaler of a vLLM workload waits at least max(120 s, the target's terminationGracePeriodSeconds) before
    scaling down: the HPA scale-down stabilization window (default 300), and KEDA's cooldownPeriod (default 300) when
    the ScaledObject scales to zero (KEDA applies cooldownPeriod only then: minReplicaCount 0 or idleReplicaCount set).

    Why: Removing replicas faster than a drain takes cuts long generations, and flapping costs a model load (minutes)
    for every replica re-added.

    Fix: Raise cooldownPeriod / behavior.scaleDown.stabilizationWindowSeconds to the number in the message.
    """
    floor = int(settings.get("min_cooldown_seconds", MIN_COOLDOWN_SECONDS))
    for autoscaler, target in _autoscalers(resources):
        grace = max((t.grace_seconds for t in serving_templates(target)), default=30)
        needed = max(floor, grace)
        checks: list[tuple[str, object]] = []
        if autoscaler.kind == "ScaledObject":
            # KEDA's own default minReplicaCount is 0.
            scales_to_zero = (as_int(autoscaler.spec.get("minReplicaCount", 0)) == 0
                              or autoscaler.spec.get("idleReplicaCount") is not None)
            if scales_to_zero:
                checks.append(("spec.cooldownPeriod", autoscaler.spec.get("cooldownPeriod", 300)))
            behavior = mapping(mapping(mapping(autoscaler.spec.get("advanced")).get("horizontalPodAutoscalerConfig"))
                               .get("behavior"))
            path = "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds"
        else:
            behavior = mapping(autoscaler.spec.get("behavior"))
            path = "spec.behavior.scaleDown.stabilizationWindowSeconds"
        checks.append((path, mapping(behavior.get("scaleDown")).get("stabilizationWindowSeconds", 300)))
        for where, raw in checks:
            value = as_int(raw)
            if value is not None and value < needed:
                yield Violation(
                    f"{where} {value} s is shorter than max({floor} s, {target.describe()}'s grace period {grace} s) "
                    f"= {needed} s", f"set {where}: {needed}", resource=autoscaler,
                )


RULES: tuple[Rule, ...] = (no_cpu_autoscaling, autoscaler_cooldown)
"""This topic's rules, in the order the registry lists them."""
