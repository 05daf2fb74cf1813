"""Planning runs once per program: parsing returns the plans the program then uses (issue 20)."""

from __future__ import annotations

import pytest

from tests.components.mocking import run_program
from vllm_pulumi.components.manifests import read_stack_config
from vllm_pulumi.runtime.planning import deployment, pods
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec

SECRETS = {"vllmApiKey": "sk-test-plan-once", "hfToken": "hf_test_plan_once"}


@pytest.mark.parametrize("stack", ["local", "prod", "multinode", "karpenter"])
def test_one_program_run_plans_each_model_once(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    plan_pods = pods.plan_pods

    def counting(spec: DeploymentSpec, index: int, shape: NodeShape) -> ServingPlan:
        calls.append(spec.models[index].name)
        return plan_pods(spec, index, shape)

    monkeypatch.setattr(deployment, "plan_pods", counting)
    raw = read_stack_config(stack)
    run_program(raw, SECRETS, stack=stack)
    names = [model["name"] for model in raw["models"]]
    assert calls == names, f"planned {calls} for models {names}"
