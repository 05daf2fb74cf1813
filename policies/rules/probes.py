"""Probes of the vLLM container: the startup probe covers the model's load, liveness never kills a loading or
draining server, readiness exists, and every probe reaches vLLM's port."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.facts import startup_budget_for
from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.pods import container_port, probe_timing, probe_window_seconds
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, cannot_check, rule
from vllm_pulumi.policies.values import mapping
from vllm_pulumi.policies.workload import Resource, vllm_port
from vllm_pulumi.runtime.planning.startup import STORAGE_READ_GB_PER_SECOND


@rule(
    "startup-probe-covers-load", group="Probes and lifecycle", enforcement="mandatory", severity="high",
    kinds=SERVING_KINDS,
    settings={"default_storage_kind": Setting(
        "local-nvme", "Storage assumed for a model read from a mounted path when the storage-kind annotation is "
                      f"absent; one of {', '.join(sorted(STORAGE_READ_GB_PER_SECOND))}.")},
)
def startup_probe_covers_load(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The vLLM container has a startupProbe whose window (initialDelaySeconds + periodSeconds x failureThreshold)
    covers the model's startup budget, by phase: bootstrap, the weight bytes over the storage's read speed, a cold
    torch.compile, KV profiling and CUDA graph capture by the model's layers and captured batch sizes, with a safety
    factor (runtime.planning.startup, docs/startup.md).

    Why: Loading tens of GB of weights and compiling CUDA graphs takes minutes. Until the startup probe succeeds,
    liveness and readiness are held back; a window shorter than the load restarts the pod in a loop (CrashLoopBackOff
    during every rollout).

    Fix: Add a startupProbe on /health and raise failureThreshold until the window covers the budget.
    """
    for server in res.servers:
        probe = mapping(server.container.get("startupProbe"))
        budget = startup_budget_for(res, server, settings)
        if not probe:
            needed = f" (the startup budget is {budget.seconds} s: {budget.basis})" if budget.seconds else ""
            yield Violation(
                f"{server.where} has no startupProbe: liveness and readiness run while the weights load{needed}",
                "add startupProbe: {httpGet: {path: /health, port: <vLLM port>}, periodSeconds: 10, failureThreshold: "
                f"{math.ceil((budget.seconds or 600) / 10)}}}",
            )
            continue
        if budget.seconds is None:
            yield cannot_check("the startup probe window", budget.basis)
            continue
        window = probe_window_seconds(probe)
        if window < budget.seconds:
            delay, period, threshold = probe_timing(probe)
            yield Violation(
                f"{server.where}: startupProbe window {window} s (initialDelaySeconds {delay} + periodSeconds "
                f"{period} x failureThreshold {threshold}) is shorter than the "
                f"{budget.seconds} s startup budget ({budget.basis})",
                f"set startupProbe.failureThreshold to at least {math.ceil((budget.seconds - delay) / period)} "
                f"(periodSeconds {period})",
            )


@rule(
    "liveness-probe-safe", group="Probes and lifecycle", enforcement="mandatory", severity="high", kinds=SERVING_KINDS,
)
def liveness_probe_safe(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A livenessProbe on the vLLM container cannot kill it during model load (a startupProbe is present) or during a
    drain (its failure window, periodSeconds x failureThreshold, is not shorter than terminationGracePeriodSeconds).

    Why: A liveness probe that fires while vLLM loads weights restarts it forever; one that fires before the grace
    period ends kills a pod that is still finishing in-flight generations, so rollouts cut answers off.

    Fix: Add a startupProbe, and set livenessProbe.failureThreshold to at least terminationGracePeriodSeconds /
    periodSeconds + 1.
    """
    for server in res.servers:
        probe = mapping(server.container.get("livenessProbe"))
        if not probe:
            continue
        if not server.container.get("startupProbe"):
            yield Violation(
                f"{server.where} has a livenessProbe but no startupProbe: it restarts the pod after "
                f"{probe_window_seconds(probe)} s of model loading",
                "add a startupProbe sized to the startup budget (liveness waits for it)",
            )
        _, period, threshold = probe_timing(probe)
        grace = server.template.grace_seconds
        if period * threshold < grace:
            yield Violation(
                f"{server.where}: livenessProbe kills after periodSeconds {period} x failureThreshold {threshold} = "
                f"{period * threshold} s, shorter than terminationGracePeriodSeconds {grace} s",
                f"set livenessProbe.failureThreshold to at least {math.ceil(grace / period) + 1}",
            )


@rule("readiness-probe", group="Probes and lifecycle", enforcement="mandatory", severity="medium", kinds=SERVING_KINDS)
def readiness_probe(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The vLLM container has a readinessProbe.

    Why: Without one, the Service sends requests to a pod as soon as the container starts, minutes before the model is
    loaded, and keeps sending them to a draining pod.

    Fix: Add readinessProbe: {httpGet: {path: /health, port: <vLLM port>}, periodSeconds: 5}.
    """
    for server in res.servers:
        if not server.container.get("readinessProbe"):
            yield Violation(f"{server.where} has no readinessProbe",
                            "add readinessProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 5}")


@rule(
    "probes-target-vllm-port", group="Probes and lifecycle", enforcement="mandatory", severity="high", kinds=SERVING_KINDS,
)
def probes_target_vllm_port(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The vLLM container's startup, readiness and liveness probes reach vLLM's own port (--port, default 8000), by
    number or by the name of a container port.

    Why: A probe on another port (or a port name the container does not declare) never succeeds: the pod never becomes
    ready, or the startup probe restarts it forever.

    Fix: Point httpGet.port at the vLLM port (e.g. 8000 or the name of the containerPort that is 8000).
    """
    for server in res.servers:
        port = vllm_port(server)
        if port is None:
            continue
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = mapping(server.container.get(kind))
            action = mapping(probe.get("httpGet")) or mapping(probe.get("tcpSocket"))
            if "port" not in action:
                continue
            target = container_port(server.container, action["port"])
            if target != port:
                reached = f"port {target}" if target is not None else "no port of the container"
                yield Violation(f"{server.where}: {kind} port {action['port']!r} is {reached}, but vLLM listens on "
                                f"{port}", f"set {kind}.{'httpGet' if 'httpGet' in probe else 'tcpSocket'}.port: {port}")


RULES: tuple[Rule, ...] = (startup_probe_covers_load, liveness_probe_safe, readiness_probe, probes_target_vllm_port)
"""This topic's rules, in the order the registry lists them."""
