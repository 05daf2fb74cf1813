"""The typed spec: every bad input gets one line naming the setting, the value, the reason and an alternative."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.spec.validation import SpecError


def valid_spec(**model_overrides: Any) -> dict[str, Any]:
    model: dict[str, Any] = {
        "name": "llama", "model": "llama-3.1-8b", "gpu": "rtx-4090",
        "engine": {"max_model_len": 32768, "kv_cache_dtype": "fp8"},
        "storage": {"kind": "local-nvme"},
    }
    model.update(model_overrides)
    return {"cluster": {"mode": "render", "directory": "out"}, "models": [model]}


def problems(raw: object) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_deployment(raw)
    return [issue.message for issue in raised.value.issues]


def test_valid_spec_parses_and_plans() -> None:
    spec = load_deployment(valid_spec()).spec
    (plan,) = plan_deployment(spec)
    assert plan.layout.layout == "single-pod"
    assert plan.image == "vllm/vllm-openai:v0.33.0"


@pytest.mark.parametrize(
    ("case", "raw", "expected"),
    [
        ("typo in a field", valid_spec(replics=2), "models[0].replics=2: unknown setting; did you mean replicas"),
        ("typo in a nested field", valid_spec(engine={"tensor_paralel_size": 2}),
         "models[0].engine.tensor_paralel_size=2: unknown setting; did you mean tensor_parallel_size"),
        ("typo under the cluster union", {**valid_spec(), "cluster": {"mode": "render", "dir": "x"}},
         "cluster.dir='x': unknown setting; did you mean directory"),
        ("unknown cluster mode", {**valid_spec(), "cluster": {"mode": "gke"}},
         "set mode to render, kubeconfig or eks"),
        ("seed scenario b tp=5", valid_spec(model="llama-3-70b", gpu="h100", engine={"tensor_parallel_size": 5}),
         "models[0].engine.tensor_parallel_size=5: total number of attention heads (64) must be divisible by "
         "tensor parallel size (5)"),
        ("unknown gpu", valid_spec(gpu="rtx-5090x"), "models[0].gpu='rtx-5090x': unknown gpu; closest known"),
        ("unknown model", valid_spec(model="llama-9-8b"), "models[0].model='llama-9-8b': unknown model"),
        ("kv cache too small", valid_spec(engine={"max_model_len": 131072}),
         "models[0].engine.max_model_len=131072: the KV cache holds"),
        ("grace shorter than drain", valid_spec(lifecycle={"termination_grace_period_seconds": 60}),
         "models[0].lifecycle.termination_grace_period_seconds=60: the pod is killed before preStop"),
        ("cooldown shorter than grace",
         valid_spec(autoscaling={"min_replicas": 1, "max_replicas": 2, "cooldown_seconds": 30}),
         "models[0].autoscaling.cooldown_seconds=30: shorter than max(120 s, the 135 s grace period)"),
        ("scale to zero not asked for", valid_spec(autoscaling={"min_replicas": 0}),
         "min_replicas 0 needs scale_to_zero: true"),
        ("pulumi secret in render mode", valid_spec(api_key={"pulumi_secret": "apiKey"}),
         "models[0].api_key.pulumi_secret='apiKey': render mode writes Secret values"),
        ("secret with both sources",
         valid_spec(api_key={"pulumi_secret": "k", "existing_secret": {"name": "s", "key": "k"}}),
         "give exactly one of pulumi_secret or existing_secret"),
        ("stale vllm version", valid_spec(engine={"vllm_version": "0.6.3"}), "use 0.33.0 or newer"),
        ("removed flag in extra args", valid_spec(engine={"extra_args": ["--disable-graceful-shutdown"]}),
         "--disable-graceful-shutdown does not exist in vLLM 0.33"),
        ("memory limit below request", valid_spec(resources={"memory_limit_gib": 8}),
         "models[0].resources.memory_limit_gib=8: below the memory request"),
        ("missing model", {"cluster": {"mode": "render"}, "models": [{"name": "x", "gpu": "l4"}]},
         "models[0].model=None: required setting is missing"),
        ("duplicate names", {"cluster": {"mode": "render"}, "models": [valid_spec()["models"][0]] * 2},
         "model name 'llama' is used twice"),
        ("not a mapping", ["models"], "deployment='list': must be a mapping"),
        ("model volume smaller than the checkpoint", valid_spec(storage={"kind": "efs", "size_gib": 1}),
         "models[0].storage.size_gib=1: the model volume of 1 GiB cannot hold llama-3.1-8b's checkpoint of 15.0 GiB "
         "plus 20% headroom (tokenizer and config files, a second revision during an update), 18 GiB"),
        ("download cache smaller than the checkpoint", valid_spec(storage={"kind": "hf-download", "size_gib": 17}),
         "models[0].storage.size_gib=17: the pod's download cache of 17 GiB cannot hold"),
        ("config.json model with nothing to download", valid_spec(model="tests/runtime/no-such/config.json"),
         "models[0].model='tests/runtime/no-such/config.json': no config.json there"),
    ],
)
def test_bad_spec_names_setting_value_reason_and_alternative(case: str, raw: object, expected: str) -> None:
    found = problems(raw)
    assert any(expected in line for line in found), found


def test_a_model_volume_of_exactly_the_checkpoint_plus_headroom_is_enough() -> None:
    (plan,) = load_deployment(valid_spec(storage={"kind": "efs", "size_gib": 18})).plans
    assert plan.pvc_size_gib == 18


def test_every_problem_is_reported_at_once() -> None:
    raw = valid_spec(replics=2, engine={"tensor_paralel_size": 2})
    assert len(problems(raw)) == 2


def test_eks_gpu_comes_from_the_node_pool() -> None:
    raw = {
        "cluster": {"mode": "eks", "cluster_name": "c", "region": "us-east-1", "node_pools": [
            {"name": "h100", "instance_type": "p5.48xlarge", "subnet_ids": ["subnet-1"], "max_size": 2}]},
        "models": [{"name": "llama", "model": "llama-3.3-70b", "engine": {"tensor_parallel_size": 8,
                                                                           "max_model_len": 32768}}],
    }
    (plan,) = load_deployment(raw).plans
    assert (plan.gpu.id, plan.layout.gpus_per_pod) == ("h100-sxm", 8)
    bad = copy.deepcopy(raw)
    bad["cluster"]["node_pools"][0]["instance_type"] = "p5.96xlarge"
    assert any("cluster.node_pools[0].instance_type='p5.96xlarge': unknown instance type" in line
               for line in problems(bad))


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False),
                  st.text(max_size=12), st.lists(st.integers(), max_size=2))


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    raw = valid_spec(autoscaling={"min_replicas": 1, "max_replicas": 3})
    paths = [("models", 0, "engine", "tensor_parallel_size"), ("models", 0, "engine", "max_model_len"),
             ("models", 0, "gpu"), ("models", 0, "model"), ("models", 0, "name"), ("cluster", "mode"),
             ("models", 0, "autoscaling", "max_replicas"), ("models", 0, "storage", "kind"),
             ("models", 0, "engine", "gpu_memory_utilization"), ("models", 0, "engine", "kv_cache_dtype")]
    path = draw(st.sampled_from(paths))
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = draw(_leaf)
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
def test_mutated_specs_either_parse_or_fail_with_located_messages(raw: dict[str, Any]) -> None:
    """No mutation escapes as a traceback: it parses, or every issue names a setting path."""
    try:
        load_deployment(raw)
    except SpecError as error:
        assert error.issues
        for issue in error.issues:
            assert issue.setting and ":" in issue.message


def test_settings_reference_is_generated_from_the_spec() -> None:
    """docs/spec.md is `python -m runtime.docs` output: the field descriptions stay the one source."""
    from pathlib import Path

    from vllm_pulumi.runtime import docs

    checked_in = (Path(__file__).resolve().parents[2] / "docs" / "spec.md").read_text()
    assert checked_in == docs.render(), "docs/spec.md is stale: run `python -m runtime.docs`"
    assert "| `tensor_parallel_size` | int | `1` |" in checked_in
