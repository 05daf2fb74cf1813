"""Each disagreement the differential test (test_vllm_differential.py) found between the spec and vLLM 0.33, pinned.

A case is a stack the spec used to accept (or refuse) while vLLM's configuration code decided otherwise. Here the spec
must give vLLM's verdict, naming the setting; `vllm_message` is what vLLM 0.33 itself says, which the differential
test module checks against the installed vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.spec.validation import SpecError


@dataclass(frozen=True)
class Pinned:
    name: str
    model: str
    gpu: str
    engine: dict[str, Any]
    setting: str | None
    """The setting our refusal names; None when vLLM accepts and the spec must too."""
    vllm_message: str | None
    """vLLM 0.33's own words (a part of them) when it refuses."""
    gpus_per_node: int = 8


PINNED = [
    Pinned("chunked_prefill_off_with_batch_smaller_than_max_model_len", "llama-3.1-8b", "h100-sxm",
           {"enable_chunked_prefill": False, "max_num_batched_tokens": 2048, "max_model_len": 32768},
           "models[0].engine.max_num_batched_tokens",
           "max_num_batched_tokens (2048) is smaller than max_model_len (32768)"),
    Pinned("chunked_prefill_off_defaults_batch_to_max_model_len", "llama-3.1-8b", "h100-sxm",
           {"enable_chunked_prefill": False, "max_model_len": 32768}, None, None),
    Pinned("batch_tokens_below_max_num_seqs", "llama-3.1-8b", "h100-sxm",
           {"max_num_seqs": 1024, "max_num_batched_tokens": 512}, "models[0].engine.max_num_batched_tokens",
           "max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024)"),
    Pinned("max_num_seqs_above_the_a100_default_batch", "llama-3.1-8b", "a100-80gb", {"max_num_seqs": 4096},
           "models[0].engine.max_num_seqs",
           "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)"),
    Pinned("lora_rank_not_one_of_vllms_choices", "llama-3.1-8b", "h100-sxm",
           {"enable_lora": True, "max_lora_rank": 7}, "models[0].engine.max_lora_rank",
           "argument --max-lora-rank: invalid choice: 7"),
    Pinned("lora_rank_ignored_without_lora", "llama-3.1-8b", "h100-sxm", {"max_lora_rank": 7}, None, None),
    Pinned("swap_space_flag_removed", "llama-3.1-8b", "h100-sxm", {"extra_args": ["--swap-space=4"]},
           "models[0].engine.extra_args", "unrecognized arguments: --swap-space=4"),
    Pinned("unknown_extra_flag", "llama-3.1-8b", "h100-sxm", {"extra_args": ["--not-a-flag"]},
           "models[0].engine.extra_args", "unrecognized arguments: --not-a-flag"),
    Pinned("flag_newer_than_vllm_0_33", "llama-3.1-8b", "h100-sxm", {"extra_args": ["--max-num-partial-prefills=2"]},
           "models[0].engine.extra_args", "unrecognized arguments: --max-num-partial-prefills=2"),
    Pinned("humming_is_a_moe_backend_for_gpt_oss", "gpt-oss-120b", "h200", {"quantization": "humming"},
           "models[0].engine.quantization", "use '--moe-backend humming' instead of '--quantization humming'"),
    Pinned("gemma_3_in_float16", "gemma-3-27b", "h100-sxm", {"dtype": "float16"}, "models[0].engine.dtype",
           "The model type 'gemma3_text' does not support float16"),
    Pinned("bfloat16_kv_cache_under_float16", "llama-3.1-8b", "h100-sxm",
           {"dtype": "float16", "kv_cache_dtype": "bfloat16"}, "models[0].engine.kv_cache_dtype",
           'kv_cache_dtype="bfloat16" is incompatible with dtype="float16"'),
    Pinned("underscored_extra_flag_is_known", "llama-3.1-8b", "h100-sxm",
           {"extra_args": ["--enforce_eager", "--no-enable-log-requests"]}, None, None),
    Pinned("unknown_quantization_method", "llama-3.1-8b", "h100-sxm", {"quantization": "bitsandbytes"},
           "models[0].engine.quantization", "Unknown quantization method: bitsandbytes"),
    Pinned("gptq_on_an_unquantized_checkpoint", "llama-3.1-8b", "h100-sxm", {"quantization": "gptq"},
           "models[0].engine.quantization", "Cannot find the config file for gptq"),
    Pinned("deprecated_quantization_method", "llama-3.1-8b", "h100-sxm", {"quantization": "fbgemm_fp8"},
           "models[0].engine.quantization", "The quantization method %s is deprecated"),
    Pinned("quantization_other_than_the_checkpoints", "deepseek-v3", "h200", {"quantization": "awq"},
           "models[0].engine.quantization", "does not match the quantization method specified in the `quantization`"),
    Pinned("gpt_oss_keeps_its_mxfp4_whatever_is_asked", "gpt-oss-20b", "h100-sxm",
           {"quantization": "not-a-method"}, None, None),
    Pinned("float16_kv_cache_under_a_bfloat16_model", "llama-3.1-8b", "h100-sxm", {"kv_cache_dtype": "float16"},
           "models[0].engine.kv_cache_dtype",
           'kv_cache_dtype="float16" is incompatible with dtype="bfloat16"'),
    Pinned("gemma_2_in_float16", "gemma-2-9b", "h100-sxm", {"dtype": "float16"}, "models[0].engine.dtype",
           "The model type 'gemma2' does not support float16"),
    Pinned("gpt_oss_mxfp4_in_float16", "gpt-oss-20b", "h100-sxm", {"dtype": "float16"}, "models[0].engine.dtype",
           "torch.float16 is not supported for quantization method gpt_oss_mxfp4"),
]


def pinned_stack(case: Pinned) -> dict[str, Any]:
    return {
        "cluster": {"mode": "render", "nodes": [{
            "name": "gpus", "gpu": case.gpu, "gpus_per_node": case.gpus_per_node, "vcpus": 256, "memory_gib": 4096,
            "count": 64,
        }]},
        "models": [{"name": "m", "model": case.model, "engine": case.engine}],
    }


@pytest.mark.parametrize("case", PINNED, ids=[case.name for case in PINNED])
def test_spec_gives_vllms_verdict(case: Pinned) -> None:
    if case.setting is None:
        assert load_deployment(pinned_stack(case)).plans
        return
    with pytest.raises(SpecError) as raised:
        load_deployment(pinned_stack(case))
    settings = [issue.setting for issue in raised.value.issues]
    assert case.setting in settings, raised.value
    # The message names the value and says what would work.
    assert all(issue.alternative or any(word in issue.reason for word in ("use ", "did you mean", "drop "))
               for issue in raised.value.issues), raised.value
