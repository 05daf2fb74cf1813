"""Engine settings render the `vllm serve` argument list for vLLM 0.33 and refuse stale flags."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vllm_pulumi.runtime.spec.engine import EngineSettings


def test_default_settings_render_a_draining_argument_list() -> None:
    assert EngineSettings().to_args("/models/llama", served_model_name="llama") == [
        "/models/llama",
        "--served-model-name=llama",
        "--port=8000",
        "--tensor-parallel-size=1",
        "--gpu-memory-utilization=0.92",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--shutdown-timeout=90",
    ]


def test_every_typed_setting_reaches_the_argument_list() -> None:
    settings = EngineSettings(
        tensor_parallel_size=8, pipeline_parallel_size=2, max_model_len=32768, max_num_seqs=64,
        max_num_batched_tokens=4096, gpu_memory_utilization=0.9, kv_cache_dtype="fp8", dtype="bfloat16",
        quantization="fp8", load_format="runai_streamer", enable_prefix_caching=False, enable_chunked_prefill=False,
        shutdown_timeout_seconds=120, enable_lora=True, max_loras=4, max_lora_rank=64,
        extra_args=["--enable-auto-tool-choice"],
    )
    args = settings.to_args("s3://bucket/model", distributed_executor_backend="ray")
    assert args == [
        "s3://bucket/model", "--port=8000", "--tensor-parallel-size=8", "--pipeline-parallel-size=2",
        "--distributed-executor-backend=ray", "--max-model-len=32768", "--max-num-seqs=64",
        "--max-num-batched-tokens=4096", "--gpu-memory-utilization=0.9", "--kv-cache-dtype=fp8", "--dtype=bfloat16",
        "--quantization=fp8", "--load-format=runai_streamer", "--no-enable-prefix-caching",
        "--no-enable-chunked-prefill", "--enable-lora", "--max-loras=4", "--max-lora-rank=64",
        "--shutdown-timeout=120", "--enable-auto-tool-choice",
    ]


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("seed's removed drain flag", "--disable-graceful-shutdown", "does not exist in vLLM 0.33.*shutdown_timeout"),
        ("removed ray flag", "--worker-use-ray", "distributed-executor-backend=ray"),
        ("managed flag given twice", "--tensor-parallel-size=2", "set `tensor_parallel_size` instead"),
        ("api key in plain args", "--api-key=sk-123", "set `api_key` instead"),
    ],
)
def test_extra_args_refuse_removed_and_managed_flags(case: str, extra: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EngineSettings(extra_args=[extra])


@pytest.mark.parametrize(
    ("version", "tag"), [("0.33.0", "v0.33.0"), ("v0.34.1", "v0.34.1"), ("1.0", "v1.0")],
)
def test_vllm_version_is_a_setting_that_picks_the_image_tag(version: str, tag: str) -> None:
    assert EngineSettings(vllm_version=version).image_tag == tag


@pytest.mark.parametrize("version", ["0.6.3", "0.32.9", "latest"])
def test_versions_without_the_flags_we_render_are_refused(version: str) -> None:
    with pytest.raises(ValidationError, match="0.33.0"):
        EngineSettings(vllm_version=version)


def test_unknown_engine_setting_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden|Extra inputs"):
        EngineSettings.model_validate({"disable_graceful_shutdown": False})
