"""Cross-check against vLLM 0.33 itself: per-token KV bytes, TP verdicts, KV-cache capacity and the rendered argument
lists.

vLLM runs in its own venv (scripts/vllm-crosscheck-env.sh; `make test` sets it up and exports
VLLM_CROSSCHECK_PYTHON). One subprocess answers every case (scripts/vllm_facts_probe.py --batch), on CPU, offline:
each catalog model is written out as a config.json and loaded by vllm.config.ModelConfig.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.runtime.facts.gpus import GIB, find_gpu
from vllm_pulumi.runtime.facts.model_catalog import CATALOG
from vllm_pulumi.runtime.facts.models import ModelFacts, catalog_model, parse_config
from vllm_pulumi.runtime.planning.capacity import CapacityPlan, kv_bytes_per_token_per_gpu, plan_capacity
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.planning.parallelism import tensor_parallel_problems
from vllm_pulumi.runtime.spec.engine import EngineSettings

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "scripts" / "vllm_facts_probe.py"
DEFAULT_PYTHON = Path.home() / ".cache" / "vllm-pulumi" / "vllm-venv" / "bin" / "python"

pytestmark = pytest.mark.vllm

# (tp, pp, kv cache dtype) per model: one plain, one split across GPUs with fp8, one size vLLM refuses for most.
LAYOUTS = [(1, 1, "auto"), (8, 2, "fp8"), (5, 1, "auto")]

# KV capacity per model: (tp, pp, kv cache dtype, max_model_len or None for the model's own, max_num_batched_tokens,
# KV memory per GPU). A roomy single GPU at 32K, a TP x PP split at full context (three batches in flight), and a
# GPU too small for the full context, where vLLM refuses to start and suggests a max_model_len.
KV_LAYOUTS = [(1, 1, "auto", 32768, 8192, 20 * GIB), (8, 2, "fp8", None, 2048, 3 * GIB),
              (1, 1, "auto", None, 8192, 1 * GIB)]
# Configs outside the catalog whose KV layout the catalog lacks: a window on every layer and no layer_types
# (Mistral 7B v0.1 style), which vLLM applies through CacheConfig.sliding_window.
KV_EXTRA_CONFIGS: dict[str, dict[str, Any]] = {
    "mistral-7b-window-4096": {**CATALOG["mistral-7b"][1], "sliding_window": 4096},
}


def _kv_model(model_id: str) -> ModelFacts:
    if model_id in KV_EXTRA_CONFIGS:
        return parse_config(KV_EXTRA_CONFIGS[model_id], model_id)
    return catalog_model(model_id)


KV_CASES = [
    (model_id, *layout) for model_id in [*CATALOG, *KV_EXTRA_CONFIGS] for layout in KV_LAYOUTS
    if not tensor_parallel_problems(_kv_model(model_id), layout[0])
]


def _kv_max_model_len(model_id: str, max_model_len: int | None) -> int:
    return min(max_model_len or 10**9, _kv_model(model_id).max_position_embeddings)


def vllm_python() -> Path:
    configured = os.environ.get("VLLM_CROSSCHECK_PYTHON")
    python = Path(configured) if configured else DEFAULT_PYTHON
    if not python.exists():
        pytest.skip(f"vLLM is not installed for the cross-check ({python}); run scripts/vllm-crosscheck-env.sh")
    return python


@cache
def _answers(python: str, config_root: str) -> list[dict[str, Any]]:
    return run_probe_batch(Path(python), crosscheck_requests(Path(config_root)))


def write_model_configs(config_root: Path) -> None:
    """Every catalog model (as its language model) and each extra KV config, as DIR/<id>/config.json."""
    for model_id, config in [*((catalog_id, _language_model_config(config)) for catalog_id, (_, config)
                                 in CATALOG.items()), *KV_EXTRA_CONFIGS.items()]:
        directory = config_root / model_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config))


def crosscheck_requests(config_root: Path) -> list[dict[str, Any]]:
    """The probe requests of this module, in the order the tests index the answers."""
    write_model_configs(config_root)
    requests: list[dict[str, Any]] = []
    for catalog_id in CATALOG:
        for tp, pp, kv in LAYOUTS:
            requests.append({"facts": {"config_dir": str(config_root / catalog_id), "tp": tp, "pp": pp,
                                       "kv_cache_dtype": kv}})
    requests += [kv_capacity_request(config_root, case) for case in KV_CASES]
    for stack in ("local", "edge", "prod", "multinode", "karpenter"):
        for plan in plan_deployment(_stack_spec(stack)):
            requests.append({"parse": plan.args})
    requests.append({"parse": EngineSettings(extra_args=[]).to_args("m") + ["--disable-graceful-shutdown"]})
    return requests


def kv_capacity_request(config_root: Path, case: tuple[Any, ...]) -> dict[str, Any]:
    """The probe request of one KV_CASES entry."""
    catalog_id, tp, pp, kv, max_model_len, batched, available = case
    return {"kv_capacity": {
        "config_dir": str(config_root / catalog_id), "tp": tp, "pp": pp, "kv_cache_dtype": kv,
        "max_model_len": _kv_max_model_len(catalog_id, max_model_len), "max_num_batched_tokens": batched,
        "available_memory_bytes": available}}


def run_probe_batch(python: Path, requests: list[dict[str, Any]],
                    env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One probe process (--batch) answering ``requests``, on CPU, offline; ``env`` adds to its environment."""
    result = subprocess.run(
        [python, str(PROBE), "--batch"], input=json.dumps(requests), capture_output=True, text=True, check=False,
        timeout=1800, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
                           "TRANSFORMERS_OFFLINE": "1", **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answers: list[dict[str, Any]] = json.loads(result.stdout)
    return answers


def _language_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal wrapper's language model as its own text-only config: the cross-check venv lacks vLLM's
    multimodal dependencies (torchvision), and the KV cache is the language model's anyway (Gemma 3 ->
    Gemma3ForCausalLM, model_type gemma3_text)."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return config
    architecture = str(config["architectures"][0]).replace("ForConditionalGeneration", "ForCausalLM")
    return {**text, "architectures": [architecture], "torch_dtype": config.get("torch_dtype", "bfloat16")}


def _stack_spec(stack: str) -> Any:
    import yaml

    raw = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["vllm-pulumi:deployment"]
    return load_deployment(raw).spec


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _answers(str(vllm_python()), str(tmp_path_factory.mktemp("configs")))


CASES = [(catalog_id, *layout) for catalog_id in CATALOG for layout in LAYOUTS]


@pytest.mark.parametrize(("catalog_id", "tp", "pp", "kv"), CASES)
def test_kv_bytes_per_token_and_tp_verdict_match_vllm(answers: list[dict[str, Any]], catalog_id: str, tp: int,
                                                      pp: int, kv: str) -> None:
    answer = answers[CASES.index((catalog_id, tp, pp, kv))]
    assert "error" not in answer or answer["error"] is None, answer.get("error")
    model = catalog_model(catalog_id)
    ours = tensor_parallel_problems(model, tp)
    if not answer["verify_ok"]:
        assert any("must be divisible by tensor parallel size" in problem for problem in ours), answer
    elif ours:
        # vLLM's config check passed; ours must then be one of the weight-loading splits vLLM asserts later.
        assert all("KV heads" in p or "MLP width" in p for p in ours), ours
    if "kv_bytes_per_token_per_rank_worst_stage" in answer:
        dtype_bytes = EngineSettings(kv_cache_dtype=kv).kv_dtype_bytes()  # type: ignore[arg-type]
        assert kv_bytes_per_token_per_gpu(model, tp, pp, dtype_bytes) == \
            answer["kv_bytes_per_token_per_rank_worst_stage"], answer


def _plan_with_kv_memory(catalog_id: str, tp: int, pp: int, kv: str, max_model_len: int, batched: int,
                         available: int) -> CapacityPlan:
    """The planner's figures with exactly ``available`` bytes of KV memory per GPU: the overhead is chosen to leave
    it (negative where the weights alone exceed one GPU; only the KV arithmetic is under test here)."""
    model, gpu = _kv_model(catalog_id), find_gpu("h100")
    engine = EngineSettings(tensor_parallel_size=tp, pipeline_parallel_size=pp, kv_cache_dtype=kv,  # type: ignore[arg-type]
                            max_model_len=max_model_len, max_num_batched_tokens=batched)
    roomy = plan_capacity(model, gpu, engine, overhead_bytes=0)
    usable = math.ceil(roomy.gpu_memory_bytes * roomy.gpu_memory_utilization)
    plan = plan_capacity(model, gpu, engine, overhead_bytes=usable - roomy.weights_bytes_per_gpu - available)
    assert plan.kv_cache_bytes_per_gpu == available
    return plan


@pytest.mark.parametrize(("catalog_id", "tp", "pp", "kv", "max_model_len", "batched", "available"), KV_CASES)
def test_kv_cache_tokens_and_concurrency_match_vllm(answers: list[dict[str, Any]], catalog_id: str, tp: int, pp: int,
                                                    kv: str, max_model_len: int | None, batched: int,
                                                    available: int) -> None:
    """vLLM's planner (get_global_kv_cache_groups -> get_kv_cache_configs -> get_kv_cache_capacity) over the specs
    its attention layers would report: the "GPU KV cache size" tokens, the "Maximum concurrency" figure, the
    blocks, the groups, and the start-up verdict with vLLM's suggested max_model_len."""
    answer = answers[len(CASES) + KV_CASES.index((catalog_id, tp, pp, kv, max_model_len, batched, available))]
    assert answer["ok"], answer["error"]
    length = _kv_max_model_len(catalog_id, max_model_len)
    plan = _plan_with_kv_memory(catalog_id, tp, pp, kv, length, batched, available)
    assert answer["max_concurrent_batches"] == pp + 1 and plan.max_in_flight_tokens == answer["max_in_flight_tokens"]
    assert plan.kv_cache_group_windows == answer["group_windows"]
    assert plan.fits is answer["fits"], answer["error"]
    if answer["fits"]:
        assert (plan.kv_cache_blocks, plan.kv_cache_tokens, plan.max_concurrency) == \
            (answer["num_blocks"], answer["kv_cache_tokens"], round(answer["max_concurrency"], 2)), answer
        assert f"{plan.max_concurrency:.2f}" == answer["logged_max_concurrency"]
    else:
        suggested = re.search(r"estimated maximum model length is (\d+)", answer["error"])
        assert plan.estimated_max_model_len == (int(suggested.group(1)) if suggested else 0), answer["error"]


def test_every_reference_stack_argument_list_parses_with_vllm(answers: list[dict[str, Any]]) -> None:
    parsed = [answer for answer in answers if "namespace" in answer][:-1]
    assert parsed and all(answer["ok"] for answer in parsed), [a["error"] for a in parsed if not a["ok"]]
    assert all(answer["namespace"]["shutdown_timeout"] > 0 for answer in parsed)


def test_vllm_rejects_the_seed_drain_flag(answers: list[dict[str, Any]]) -> None:
    assert "--disable-graceful-shutdown" in (answers[-1]["error"] or "")
