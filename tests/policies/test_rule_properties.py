"""The arithmetic rules agree with their definitions for any numbers, not only the fixtures'."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_pulumi.policies.engine import evaluate
from vllm_pulumi.policies.workload import Resource

REFERENCE = [d for d in yaml.safe_load_all(
    (Path(__file__).parent / "fixtures" / "reference" / "single-node.yaml").read_text()) if d]
DEPLOYMENT = REFERENCE[0]
SCALED_OBJECT = next(d for d in REFERENCE if d["kind"] == "ScaledObject")


def _with(grace: int, pre_stop: int, shutdown: int) -> dict[str, Any]:
    obj = copy.deepcopy(DEPLOYMENT)
    pod = obj["spec"]["template"]["spec"]
    pod["terminationGracePeriodSeconds"] = grace
    container = pod["containers"][0]
    container["lifecycle"]["preStop"] = {"sleep": {"seconds": pre_stop}}
    container["args"] = [a for a in container["args"] if not a.startswith("--shutdown-timeout")]
    container["args"].append(f"--shutdown-timeout={shutdown}")
    return obj


def _fires(rule: str, *objects: dict[str, Any]) -> bool:
    return bool(evaluate([Resource(o) for o in objects], only=[rule]))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 600), st.integers(0, 120), st.integers(0, 600))
def test_grace_covers_drain(grace: int, pre_stop: int, shutdown: int) -> None:
    assert _fires("grace-covers-drain", _with(grace, pre_stop, shutdown)) == (grace < pre_stop + shutdown + 10)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(1, 120), st.integers(0, 300))
def test_startup_window_against_budget(period: int, threshold: int, delay: int) -> None:
    obj = copy.deepcopy(DEPLOYMENT)
    obj["spec"]["template"]["spec"]["containers"][0]["startupProbe"] = {
        "httpGet": {"path": "/health", "port": 8000}, "periodSeconds": period, "failureThreshold": threshold,
        "initialDelaySeconds": delay}
    obj["metadata"]["annotations"] = {"vllm-pulumi.dev/startup-budget-seconds": "300"}
    assert _fires("startup-probe-covers-load", obj) == (delay + period * threshold < 300)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 600), st.integers(0, 600), st.integers(0, 2), st.booleans())
def test_keda_cooldown_against_grace(cooldown: int, grace: int, min_replicas: int, idle: bool) -> None:
    deployment = _with(grace, 0, 0)
    scaled = copy.deepcopy(SCALED_OBJECT)
    scaled["spec"].update(cooldownPeriod=cooldown, minReplicaCount=min_replicas)
    if idle:
        scaled["spec"]["idleReplicaCount"] = 0
    needed = max(120, grace)
    # KEDA's cooldownPeriod counts only when the ScaledObject scales to zero; the HPA scale-down window, left at
    # Kubernetes' 300 s default, always does.
    cooldown_counts = min_replicas == 0 or idle
    assert _fires("autoscaler-cooldown", deployment, scaled) == ((cooldown_counts and cooldown < needed)
                                                                  or 300 < needed)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(1, 30), st.integers(1, 600))
def test_liveness_window_against_grace(period: int, threshold: int, grace: int) -> None:
    obj = _with(grace, 0, 0)
    obj["spec"]["template"]["spec"]["containers"][0]["livenessProbe"].update(
        periodSeconds=period, failureThreshold=threshold)
    assert _fires("liveness-probe-safe", obj) == (period * threshold < grace)
    if period * threshold < grace:
        fix = evaluate([Resource(obj)], only=["liveness-probe-safe"])[0].fix
        assert fix.endswith(str(math.ceil(grace / period) + 1))
