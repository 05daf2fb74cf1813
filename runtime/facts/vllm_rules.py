"""What vLLM 0.33's engine configuration refuses at start, checked before a pod would crash-loop on it.

Each rule mirrors a check in vLLM's own configuration code (SchedulerConfig, ModelConfig, VllmConfig, the serve
parser); tests/runtime/test_vllm_differential.py compares the verdicts with vLLM's on thousands of generated
settings, and test_spec.py pins each disagreement it found with vLLM's message.
"""

from __future__ import annotations

from vllm_pulumi.runtime.errors import PlanningError, closest
from vllm_pulumi.runtime.facts.gpus import GpuFacts
from vllm_pulumi.runtime.facts.models import ModelFacts
from vllm_pulumi.runtime.facts.vllm_flags import (
    DEPRECATED_QUANTIZATION_METHODS,
    FLOAT16_UNSUPPORTED_MODEL_TYPES,
    ONLINE_QUANTIZATION_METHODS,
    QUANTIZATION_METHODS,
)
from vllm_pulumi.runtime.spec.engine import EngineSettings

# The checkpoint's own quantization (ModelFacts.weight_format) as vLLM names the method of its quantization config.
_CHECKPOINT_METHOD = {"fp8": "fp8", "mxfp4": "mxfp4"}
# --quantization values vLLM maps onto a checkpoint quantized with the key's method (its override_quantization_method
# hooks), besides the method itself. gpt-oss's MXFP4 checkpoints keep their own method whatever is asked, except
# humming, which vLLM sends to --moe-backend for gpt-oss.
_ACCEPTED_OVER_CHECKPOINT = {
    "fp8": frozenset({"fp8", "humming", "deepseek_v4_fp8"}),
    "mxfp4": frozenset(QUANTIZATION_METHODS) - {"humming"},
}


def engine_config_problem(engine: EngineSettings, model: ModelFacts, gpu: GpuFacts, path: str) -> PlanningError | None:
    """The first setting of ``engine`` (at ``{path}.engine``) vLLM 0.33 would refuse for this model and GPU."""
    at = f"{path}.engine"
    return (_quantization_problem(engine, model, at) or _dtype_problem(engine, model, at)
            or _scheduler_problem(engine, model, gpu, at))


def _quantization_problem(engine: EngineSettings, model: ModelFacts, at: str) -> PlanningError | None:
    method = engine.quantization
    if method is None:
        return None
    setting = f"{at}.quantization"
    if model.weight_format == "mxfp4":
        if method == "humming":
            return PlanningError(setting, method, f"for {model.name}'s MXFP4 checkpoint vLLM takes humming as a MoE "
                                 "backend, not a quantization method (it refuses --quantization humming)",
                                 "leave quantization unset and pass --moe-backend=humming in extra_args")
        return None  # vLLM keeps an MXFP4 (gpt-oss) checkpoint's own method whatever --quantization says
    if method not in QUANTIZATION_METHODS:
        near = closest(method, list(QUANTIZATION_METHODS))
        return PlanningError(setting, method, "vLLM 0.33 has no such quantization method",
                             f"did you mean {', '.join(near)}?" if near else
                             f"valid: {', '.join(QUANTIZATION_METHODS)}")
    checkpoint = _CHECKPOINT_METHOD.get(model.weight_format)
    if model.weight_format == "int4":
        checkpoint = "awq/gptq"
    if checkpoint is None:
        if method in DEPRECATED_QUANTIZATION_METHODS:
            return PlanningError(setting, method, "vLLM 0.33 refuses this deprecated quantization method",
                                 "use fp8, or a checkpoint quantized with a current method (its config.json says "
                                 "which)")
        if method not in ONLINE_QUANTIZATION_METHODS:
            return PlanningError(
                setting, method,
                f"{model.name} is an unquantized checkpoint and {method} reads its parameters from the checkpoint's "
                f"quantization config (vLLM: \"Cannot find the config file for {method}\")",
                f"use a method that quantizes while loading ({', '.join(sorted(ONLINE_QUANTIZATION_METHODS))}), "
                "or a checkpoint quantized with it",
            )
        return None
    accepted = _ACCEPTED_OVER_CHECKPOINT.get(checkpoint, frozenset({checkpoint}))
    if method not in accepted:
        return PlanningError(
            setting, method,
            f"{model.name}'s checkpoint is quantized with {checkpoint} (its config.json's quantization_config), and "
            "vLLM refuses a different --quantization (\"Quantization method specified in the model config does not "
            "match\")", "leave quantization unset: vLLM reads the method from the checkpoint",
        )
    return None


def _dtype_problem(engine: EngineSettings, model: ModelFacts, at: str) -> PlanningError | None:
    dtype = engine.dtype if engine.dtype != "auto" else model.torch_dtype
    if dtype == "float16" and model.model_type in FLOAT16_UNSUPPORTED_MODEL_TYPES:
        return PlanningError(f"{at}.dtype", engine.dtype,
                             f"vLLM refuses float16 for model type {model.model_type} (numerical instability)",
                             "use bfloat16 or auto")
    if dtype == "float16" and model.weight_format == "mxfp4":
        return PlanningError(f"{at}.dtype", engine.dtype,
                             f"{model.name}'s MXFP4 checkpoint runs only in bfloat16 (vLLM: float16 is not supported "
                             "for quantization method gpt_oss_mxfp4)", "use bfloat16 or auto")
    if engine.kv_cache_dtype in ("bfloat16", "float16") and engine.kv_cache_dtype != dtype:
        return PlanningError(
            f"{at}.kv_cache_dtype", engine.kv_cache_dtype,
            f"a 16-bit KV cache must have the model's dtype, which is {dtype} here (vLLM: kv_cache_dtype is "
            "incompatible with dtype)", f"use auto or {dtype}",
        )
    return None


def _scheduler_problem(engine: EngineSettings, model: ModelFacts, gpu: GpuFacts, at: str) -> PlanningError | None:
    """SchedulerConfig's checks on the batch sizes, after vLLM filled in its defaults for this GPU."""
    max_model_len = engine.max_model_len or model.max_position_embeddings
    max_num_seqs, batched = engine.batch_sizes(gpu.memory_gib, gpu.product_label, max_model_len)
    if not engine.enable_chunked_prefill and batched < max_model_len:
        return PlanningError(
            f"{at}.max_num_batched_tokens", batched,
            f"without chunked prefill a prompt must fit one scheduler step, and max_num_batched_tokens ({batched}) "
            f"is smaller than max_model_len ({max_model_len}) (vLLM's SchedulerConfig refuses it)",
            f"use max_num_batched_tokens >= {max_model_len}, lower max_model_len to {batched}, or set "
            "enable_chunked_prefill: true",
        )
    if batched < max_num_seqs:
        if engine.max_num_batched_tokens is None:  # vLLM's default step is what is too small: the sequences are set
            return PlanningError(
                f"{at}.max_num_seqs", max_num_seqs,
                f"more than the {batched} tokens of vLLM's default step on {gpu.id} (max_num_batched_tokens unset): "
                "vLLM's SchedulerConfig needs at least one token per sequence in a step",
                f"use max_num_seqs <= {batched}, or set max_num_batched_tokens >= {max_num_seqs}",
            )
        return PlanningError(
            f"{at}.max_num_batched_tokens", batched,
            f"smaller than max_num_seqs ({max_num_seqs}): vLLM's SchedulerConfig needs at least one token per "
            "sequence in a step",
            f"use max_num_batched_tokens >= {max_num_seqs}, or max_num_seqs <= {batched}",
        )
    return None
