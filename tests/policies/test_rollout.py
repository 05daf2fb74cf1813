"""rollout-no-unavailable agrees with the program: given the pool facts the program wrote, the strategy the planner
chose passes, and the other form fires (a surge with no room deadlocks; an unavailable replica with room is avoidable).
Without pool facts the rule asks for surge, as it always did; the offline checker's settings supply the facts for
manifests written by others."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_pulumi.components.manifests import build_manifests, read_stack_config
from vllm_pulumi.policies.engine import Config, evaluate_objects
from vllm_pulumi.runtime.planning.deployment import load_deployment

RULE = "rollout-no-unavailable"
REFERENCE = Path(__file__).parent / "fixtures" / "reference" / "single-node.yaml"


def _stack(name: str, max_size: int | None = None, replicas: int | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(read_stack_config(name))
    if max_size is not None:
        raw["cluster"]["node_pools"][0]["max_size"] = max_size
    if replicas is not None:
        raw["models"][0]["replicas"] = replicas
    return raw


def _two_models_on_four_nodes() -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(read_stack_config("edge"))
    second = copy.deepcopy(raw["models"][0])
    second["name"] = "second"
    for model in (raw["models"][0], second):
        model["autoscaling"] = {**model["autoscaling"], "max_replicas": 2}
    raw["models"].append(second)
    return raw


def _workloads(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in build_manifests(load_deployment(raw).spec) if o["kind"] in ("Deployment", "LeaderWorkerSet")]


def _rolling(workload: dict[str, Any]) -> dict[str, Any]:
    if workload["kind"] == "Deployment":
        return dict(workload["spec"]["strategy"]["rollingUpdate"])
    return dict(workload["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"])


def _with_rolling(workload: dict[str, Any], rolling: dict[str, int]) -> dict[str, Any]:
    flipped = copy.deepcopy(workload)
    if flipped["kind"] == "Deployment":
        flipped["spec"]["strategy"]["rollingUpdate"] = rolling
    else:
        flipped["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = rolling
    return flipped


UNAVAILABLE = "replicas stop before their replacements serve"
DEADLOCK = "the rollout deadlocks"
NEVER_STARTS = "this rollout never starts"


@pytest.mark.parametrize(("case", "raw", "surges", "other_form"), [
    ("prod with a spare node", _stack("prod"), [True], UNAVAILABLE),
    ("prod at max_size 8", _stack("prod", max_size=8), [False], DEADLOCK),
    ("multinode: a single group is replaced, room or not", _stack("multinode"), [False], NEVER_STARTS),
    ("multinode at 2 groups with room for a third", _stack("multinode", max_size=6, replicas=2), [True], UNAVAILABLE),
    ("multinode at 2 groups filling the pool", _stack("multinode", max_size=4, replicas=2), [False], DEADLOCK),
    ("two models sharing four nodes at two replicas each", _two_models_on_four_nodes(), [False, False], DEADLOCK),
])
def test_the_planners_strategy_passes_and_the_other_form_fires(case: str, raw: dict[str, Any],
                                                                surges: list[bool], other_form: str) -> None:
    workloads = _workloads(raw)
    assert [_rolling(w)["maxSurge"] == 1 for w in workloads] == surges, case
    assert not evaluate_objects(workloads, only=[RULE]), case
    for workload, surge in zip(workloads, surges):
        other = {"maxSurge": 0, "maxUnavailable": 1} if surge else {"maxSurge": 1, "maxUnavailable": 0}
        findings = evaluate_objects([_with_rolling(workload, other)], only=[RULE])
        assert findings, (case, other)
        assert all(other_form in f.message for f in findings), (case, [f.message for f in findings])


@pytest.mark.parametrize(("case", "settings", "rolling", "fires"), [
    ("no facts: surge asked for", {}, {"maxSurge": 1, "maxUnavailable": 0}, False),
    ("no facts: one unavailable fires as before", {}, {"maxSurge": 0, "maxUnavailable": 1}, True),
    ("one one-gpu node for one replica: surge deadlocks", {"pool_max_nodes": 1, "gpus_per_node": 1},
     {"maxSurge": 1, "maxUnavailable": 0}, True),
    ("one one-gpu node for one replica: replace it", {"pool_max_nodes": 1, "gpus_per_node": 1},
     {"maxSurge": 0, "maxUnavailable": 1}, False),
    ("two one-gpu nodes for one replica: surge", {"pool_max_nodes": 2, "gpus_per_node": 1},
     {"maxSurge": 1, "maxUnavailable": 0}, False),
    ("an eight-gpu node holds 8 one-gpu replicas: surge fits 4 + 1", {"pool_max_nodes": 1, "gpus_per_node": 8,
                                                                    "max_replicas": 4},
     {"maxSurge": 1, "maxUnavailable": 0}, False),
    ("an eight-gpu node at 8 replicas: no room", {"pool_max_nodes": 1, "gpus_per_node": 8, "max_replicas": 8},
     {"maxSurge": 1, "maxUnavailable": 0}, True),
    ("no room: two unavailable at once fires", {"pool_max_nodes": 1, "gpus_per_node": 8, "max_replicas": 8},
     {"maxSurge": 0, "maxUnavailable": 2}, True),
])
def test_offline_settings_supply_pool_facts_for_manifests_without_annotations(
        case: str, settings: dict[str, int], rolling: dict[str, int], fires: bool) -> None:
    deployment = next(d for d in yaml.safe_load_all(REFERENCE.read_text()) if d and d["kind"] == "Deployment")
    findings = evaluate_objects([_with_rolling(deployment, rolling)], Config.from_mapping({RULE: settings}),
                                only=[RULE])
    assert bool(findings) == fires, (case, [f.message for f in findings])
