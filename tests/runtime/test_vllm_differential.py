"""Differential test: the spec's verdict on generated engine settings equals vLLM 0.33's own configuration code.

Hypothesis generates a model deployment (catalog model, GPU, node size and the engine settings: TP, PP,
max_model_len, max_num_seqs, max_num_batched_tokens, chunked prefill, prefix caching, kv_cache_dtype, dtype,
quantization, gpu_memory_utilization, LoRA, extra_args). Ours: `load_deployment` (spec and planning) accept or
refuse. vLLM's: the same settings as a `vllm serve` argument list, parsed by vLLM's serve parser and built into an
engine configuration by `EngineArgs.create_engine_config`, in one long-lived vLLM process
(scripts/vllm_facts_probe.py --serve, one JSON line per case) on CPU, offline, against a directory holding the
model's config.json. For every accepted stack, vLLM's parser must also accept the argument list the plan renders.

What vLLM cannot judge on CPU, and so is not compared (`UNJUDGEABLE` below, each case counted):
- memory: whether weights + KV cache fit the GPU (vLLM profiles a step on the device and sizes the KV cache there);
- the device: kernels, compute capability and the platform's own config adjustments run as the CPU platform's;
- weight loading: a TP size that divides the attention heads but not the KV heads or the MLP width passes vLLM's
  configuration and fails later, when the checkpoint's shards are loaded;
- the cluster: a replica that cannot be split into whole-node pods is a Kubernetes layout problem, not vLLM's.
vLLM's batch defaults (max_num_seqs, max_num_batched_tokens) depend on the GPU's memory and name: the probe runs
vLLM's own tiering code with the generated GPU's answers (see engine_verdict in the probe).

Settings the spec refuses by design, beyond vLLM, are not generated: flags in extra_args that a typed setting
manages (two sources of truth). extra_args are judged by their flag names (vLLM 0.33's parser knows them, or not):
the values given to flags the spec does not manage are vLLM's to check, so the generated ones are valid. The cross-check venv has no Ray: `--distributed-executor-backend=ray` is judged as
`mp` (the parser still sees the rendered `ray`).

Each disagreement found on the way is a named case in tests/runtime/test_vllm_verdicts.py (the spec's refusal, no vLLM
needed) with vLLM's own message, which test_pinned_cases_are_refused_by_vllm_with_its_message checks here.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.runtime.test_vllm_crosscheck import PROBE, _language_model_config, vllm_python
from tests.runtime.test_vllm_verdicts import PINNED, Pinned, pinned_stack
from vllm_pulumi.runtime.facts.gpus import find_gpu, gpu_ids
from vllm_pulumi.runtime.facts.model_catalog import CATALOG
from vllm_pulumi.runtime.facts.vllm_flags import QUANTIZATION_METHODS, SERVE_FLAGS
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.spec.validation import SpecError

pytestmark = pytest.mark.vllm

# Cases per run: thousands, within CI's budget (vLLM answers a case in a few ms; ours is the planner's cost).
CASES = 5000
SEED = 20261201

# Our refusals that vLLM's configuration code cannot judge on CPU (see the module docstring), by their reasons.
UNJUDGEABLE = (
    "no memory left for the KV cache",  # memory
    "the KV cache holds",  # memory
    "KV heads",  # weight loading
    "MLP width",  # weight loading
    "cannot be split into whole-node pods",  # cluster layout
)

# A TP refusal that names the attention heads is one vLLM's configuration makes too (VllmConfig), even when the
# message also names the KV heads or MLP width.
JUDGEABLE_TP = "total number of attention heads"

EXTRA_ARGS = [
    "--enforce-eager", "--seed=1", "--block-size=32", "--disable-log-stats", "--swap-space=4",
    "--max-num-partial-prefills=2", "--not-a-flag", "--disable-graceful-shutdown", "--enforce_eager",
    "--no-enable-log-requests",
]


def _engine_settings() -> st.SearchStrategy[dict[str, Any]]:
    optional = {
        "tensor_parallel_size": st.sampled_from([1, 2, 3, 4, 8, 16]),
        "pipeline_parallel_size": st.sampled_from([1, 2, 3, 4]),
        "max_model_len": st.sampled_from([512, 2048, 4096, 8192, 32768, 131072, 200000]),
        "max_num_seqs": st.sampled_from([16, 128, 256, 1024, 4096]),
        "max_num_batched_tokens": st.sampled_from([256, 512, 2048, 8192, 65536]),
        "enable_chunked_prefill": st.booleans(),
        "enable_prefix_caching": st.booleans(),
        "kv_cache_dtype": st.sampled_from(["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
        "dtype": st.sampled_from(["auto", "bfloat16", "float16"]),
        "quantization": st.sampled_from(["fp8", "awq", "gptq", "mxfp4", "experts_int8", "humming", "fbgemm_fp8",
                                          "bitsandbytes", "not-a-method"]),
        "gpu_memory_utilization": st.sampled_from([0.5, 0.9, 0.95, 1.0]),
        "enable_lora": st.booleans(),
        "max_loras": st.sampled_from([1, 4, 8]),
        "max_lora_rank": st.sampled_from([7, 8, 16, 64, 512]),
        "extra_args": st.lists(st.sampled_from(EXTRA_ARGS), max_size=2, unique=True),
    }
    return st.fixed_dictionaries({}, optional=optional)


def _stacks() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "model": st.sampled_from(sorted(CATALOG)),
        "gpu": st.sampled_from(gpu_ids()),
        "gpus_per_node": st.sampled_from([1, 2, 4, 8]),
        "engine": _engine_settings(),
    })


def _raw_stack(case: dict[str, Any]) -> dict[str, Any]:
    """Nodes large enough in CPU, memory and count that only GPUs and the engine settings decide."""
    return {
        "cluster": {"mode": "render", "nodes": [{
            "name": "gpus", "gpu": case["gpu"], "gpus_per_node": case["gpus_per_node"], "vcpus": 256,
            "memory_gib": 4096, "count": 64,
        }]},
        "models": [{"name": "m", "model": case["model"], "engine": case["engine"]}],
    }


def _args_from_settings(engine: dict[str, Any]) -> list[str]:
    """The settings as `vllm serve` flags, written out here (not by the spec) for the stacks the spec refuses."""
    args = ["/models/m"]
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "max_num_seqs",
                "max_num_batched_tokens", "kv_cache_dtype", "dtype", "quantization", "gpu_memory_utilization"):
        if key in engine:
            args.append(f"--{key.replace('_', '-')}={engine[key]}")
    for key in ("enable_chunked_prefill", "enable_prefix_caching"):
        if key in engine:
            args.append(f"--{'' if engine[key] else 'no-'}{key.replace('_', '-')}")
    if engine.get("enable_lora"):
        args.append("--enable-lora")
        args += [f"--{key.replace('_', '-')}={engine[key]}" for key in ("max_loras", "max_lora_rank") if key in engine]
    return args + list(engine.get("extra_args", []))


class Probe:
    """One vLLM process for the whole run: a JSON line per case in, a JSON line per verdict out."""

    def __init__(self, python: Path, stderr: Any) -> None:
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_LOGGING_LEVEL": "ERROR"}
        env.pop("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None)
        self.process = subprocess.Popen(
            [str(python), str(PROBE), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True, env=env,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the vLLM probe exited ({self.process.poll()}); see its stderr"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Probe, Path]]:
    python = vllm_python()
    root = tmp_path_factory.mktemp("differential")
    for catalog_id, (_, config) in CATALOG.items():
        (root / catalog_id).mkdir()
        (root / catalog_id / "config.json").write_text(json.dumps(_language_model_config(config)))
    with tempfile.TemporaryFile("w+") as stderr:
        running = Probe(python, stderr)
        try:
            yield running, root
        finally:
            running.close()


def our_verdict(raw: dict[str, Any]) -> tuple[str, list[str], list[str] | None]:
    """("accept" | "refuse" | "unjudgeable", our messages, the plan's argument list when accepted)."""
    try:
        plans = load_deployment(raw).plans
    except SpecError as error:
        messages = [issue.message for issue in error.issues]
        if all(any(marker in message for marker in UNJUDGEABLE) and JUDGEABLE_TP not in message
               for message in messages):
            return "unjudgeable", messages, None
        return "refuse", messages, None
    return "accept", [], plans[0].args


def vllm_verdict(probe: Probe, root: Path, case: dict[str, Any], args: list[str]) -> dict[str, Any]:
    gpu = find_gpu(case["gpu"])
    judged = [arg.replace("--distributed-executor-backend=ray", "--distributed-executor-backend=mp") for arg in args]
    return probe.ask({"engine": {"config_dir": str(root / case["model"]), "args": judged,
                                 "gpu_memory_gib": gpu.memory_gib, "gpu_name": gpu.product_label.replace("-", " ")}})


def test_spec_verdicts_equal_vllm_configuration_verdicts(probe: tuple[Probe, Path]) -> None:
    running, root = probe
    tally: Counter[str] = Counter()
    disagreements: list[str] = []

    @seed(SEED)
    @settings(max_examples=CASES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(_stacks())
    def check(case: dict[str, Any]) -> None:
        tally["cases"] += 1
        raw = _raw_stack(case)
        ours, messages, rendered = our_verdict(raw)
        tally[ours] += 1
        if ours == "unjudgeable":
            return
        answer = vllm_verdict(running, root, case, rendered if rendered is not None else
                              _args_from_settings(case["engine"]))
        theirs = "accept" if answer["ok"] else "refuse"
        if rendered is not None and answer["stage"] == "parse":
            tally["rendered arguments vLLM's parser rejects"] += 1
        if ours != theirs:
            disagreements.append(f"{json.dumps(case)}\n    ours: {ours} {messages}\n    vLLM: {answer['error']}")

    check()
    print(f"\ndifferential: {dict(tally)}; disagreements: {len(disagreements)}")
    assert tally["cases"] == CASES
    assert tally["rendered arguments vLLM's parser rejects"] == 0
    assert not disagreements, f"{len(disagreements)} disagreement(s):\n" + "\n".join(disagreements[:15])


@pytest.mark.parametrize("case", PINNED, ids=[case.name for case in PINNED])
def test_pinned_cases_are_judged_by_vllm_with_its_message(probe: tuple[Probe, Path], case: Pinned) -> None:
    running, root = probe
    raw = pinned_stack(case)
    generated = {"model": case.model, "gpu": case.gpu, "gpus_per_node": case.gpus_per_node, "engine": case.engine}
    ours, messages, rendered = our_verdict(raw)
    answer = vllm_verdict(running, root, generated,
                          rendered if rendered is not None else _args_from_settings(case.engine))
    if case.vllm_message is None:
        assert ours == "accept" and answer["ok"], (messages, answer)
    else:
        assert ours == "refuse" and not answer["ok"], (messages, answer)
        assert case.vllm_message in answer["error"], answer


def test_recorded_serve_flags_and_quantization_methods_are_vllms(probe: tuple[Probe, Path]) -> None:
    running, _ = probe
    facts = running.ask({"serve_facts": {}})
    assert set(facts["serve_flags"]) == SERVE_FLAGS
    assert tuple(facts["quantization_methods"]) == QUANTIZATION_METHODS
