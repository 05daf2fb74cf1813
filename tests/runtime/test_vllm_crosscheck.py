"""Cross-check against vLLM 0.33 itself: per-token KV bytes, TP verdicts and the rendered argument lists.

vLLM runs in its own venv (scripts/vllm-crosscheck-env.sh; `make test` sets it up and exports
VLLM_CROSSCHECK_PYTHON). One subprocess answers every case (scripts/vllm_facts_probe.py --batch), on CPU, offline:
each catalog model is written out as a config.json and loaded by vllm.config.ModelConfig.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.runtime.derive import plan_deployment
from vllm_pulumi.runtime.engine import EngineSettings
from vllm_pulumi.runtime.models import CATALOG, catalog_model
from vllm_pulumi.runtime.parallelism import tensor_parallel_problems
from vllm_pulumi.runtime.planner import kv_bytes_per_token_per_gpu
from vllm_pulumi.runtime.spec import parse_deployment

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "scripts" / "vllm_facts_probe.py"
DEFAULT_PYTHON = Path.home() / ".cache" / "vllm-pulumi" / "vllm-venv" / "bin" / "python"

pytestmark = pytest.mark.vllm

# (tp, pp, kv cache dtype) per model: one plain, one split across GPUs with fp8, one size vLLM refuses for most.
LAYOUTS = [(1, 1, "auto"), (8, 2, "fp8"), (5, 1, "auto")]


def vllm_python() -> Path:
    configured = os.environ.get("VLLM_CROSSCHECK_PYTHON")
    python = Path(configured) if configured else DEFAULT_PYTHON
    if not python.exists():
        pytest.skip(f"vLLM is not installed for the cross-check ({python}); run scripts/vllm-crosscheck-env.sh")
    return python


@cache
def _answers(python: str, config_root: str) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []
    for catalog_id, (_, config) in CATALOG.items():
        directory = Path(config_root) / catalog_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(_language_model_config(config)))
        for tp, pp, kv in LAYOUTS:
            requests.append({"facts": {"config_dir": str(directory), "tp": tp, "pp": pp, "kv_cache_dtype": kv}})
    for stack in ("local", "edge", "prod", "multinode", "karpenter"):
        for plan in plan_deployment(_stack_spec(stack)):
            requests.append({"parse": plan.args})
    requests.append({"parse": EngineSettings(extra_args=[]).to_args("m") + ["--disable-graceful-shutdown"]})
    result = subprocess.run(
        [python, str(PROBE), "--batch"], input=json.dumps(requests), capture_output=True, text=True, check=False,
        timeout=1800, env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
                           "TRANSFORMERS_OFFLINE": "1"},
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
    return parse_deployment(raw)


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


def test_every_reference_stack_argument_list_parses_with_vllm(answers: list[dict[str, Any]]) -> None:
    parsed = [answer for answer in answers if "namespace" in answer][:-1]
    assert parsed and all(answer["ok"] for answer in parsed), [a["error"] for a in parsed if not a["ok"]]
    assert all(answer["namespace"]["shutdown_timeout"] > 0 for answer in parsed)


def test_vllm_rejects_the_seed_drain_flag(answers: list[dict[str, Any]]) -> None:
    assert "--disable-graceful-shutdown" in (answers[-1]["error"] or "")
