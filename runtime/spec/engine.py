"""vLLM engine settings for the pinned vLLM version, rendered to the ``vllm serve`` argument list.

The list is a list of strings handed to the container as ``args`` (never a shell string). Every managed flag has a
typed field; ``extra_args`` carries anything else, checked against the flags this module manages and the flags that
no longer exist.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from vllm_pulumi.runtime.errors import closest
from vllm_pulumi.runtime.facts.vllm_flags import LORA_RANKS, SERVE_FLAGS

# The vLLM release this project is built and tested against; a stack may pin another supported one.
DEFAULT_VLLM_VERSION = "0.33.0"
# Oldest release whose flags and metrics this project renders (`--shutdown-timeout`, `vllm:kv_cache_usage_perc`).
MIN_VLLM_VERSION = (0, 33)
DEFAULT_IMAGE_REPOSITORY = "vllm/vllm-openai"

KvCacheDtype = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]
LoadFormat = Literal["auto", "safetensors", "pt", "runai_streamer", "runai_streamer_sharded", "dummy"]
ExecutorBackend = Literal["mp", "ray", "uni", "external_launcher"]

# vLLM 0.33's own defaults, which the rules assume when a manifest leaves the flag out.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_PORT = 8000
# Above this share of GPU memory nothing is left for allocator fragmentation and OOMs follow under load.
MAX_SAFE_GPU_MEMORY_UTILIZATION = 0.95

KV_DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}

# Flags older guides use that vLLM 0.33's parser rejects, with what replaced them.
REMOVED_FLAGS: dict[str, str] = {
    "--disable-graceful-shutdown": "drain is `shutdown_timeout_seconds` (--shutdown-timeout N, N > 0 drains)",
    "--worker-use-ray": "use --distributed-executor-backend=ray (set by the LeaderWorkerSet layout)",
    "--engine-use-ray": "removed with the V0 engine; nothing replaces it",
    "--use-v2-block-manager": "the V1 engine always uses its block manager; drop the flag",
    "--swap-space": "the V1 engine recomputes preempted requests instead of swapping them to CPU; drop the flag "
                    "(--kv-offloading-size offloads KV cache to CPU memory)",
}

# Flags rendered from typed settings; setting them again in extra_args would make two sources of truth.
MANAGED_FLAGS = frozenset({
    "--model", "--served-model-name", "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len",
    "--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization", "--kv-cache-dtype",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-chunked-prefill",
    "--no-enable-chunked-prefill", "--dtype", "--quantization", "--load-format", "--shutdown-timeout", "--port",
    "--host", "--distributed-executor-backend", "--api-key", "--enable-lora", "--max-loras", "--max-lora-rank",
    "--download-dir",
})


def parse_version(version: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-].*)?", version.strip())
    if not match:
        raise ValueError(f"not a vLLM release number like {DEFAULT_VLLM_VERSION}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def vllm_batch_defaults(gpu_memory_gib: float, gpu_product: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM 0.33's API server picks when they are unset, by the GPU's memory
    and name (EngineArgs.get_batch_defaults): 160 GiB and up get 16384 tokens; A100s stay on the small tier."""
    if gpu_memory_gib >= 160:
        return 1024, 16384
    if gpu_memory_gib >= 70 and "a100" not in gpu_product.lower():
        return 1024, 8192
    return 256, 2048


class EngineSettings(BaseModel):
    """Settings of one vLLM engine (one replica). Field names are vLLM's own, units in names where vLLM has none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vllm_version: str = Field(DEFAULT_VLLM_VERSION, description="vLLM release to run; picks the image tag.")
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs each layer is split across.")
    pipeline_parallel_size: int = Field(1, ge=1, le=64, description="Stages the layers are split into.")
    max_model_len: int | None = Field(
        None, ge=16, description="Longest prompt + output, tokens. None: the model's max_position_embeddings."
    )
    max_num_seqs: int | None = Field(None, ge=1, description="Sequences in one batch. None: vLLM's GPU default.")
    max_num_batched_tokens: int | None = Field(
        None, ge=16, description="Tokens in one scheduler step. None: vLLM's GPU default."
    )
    gpu_memory_utilization: float = Field(
        DEFAULT_GPU_MEMORY_UTILIZATION, gt=0.0, le=1.0,
        description="Share of GPU memory vLLM may take (vLLM 0.33 default 0.92).",
    )
    kv_cache_dtype: KvCacheDtype = Field("auto", description="fp8 halves the KV cache at a small quality cost.")
    enable_prefix_caching: bool = Field(True, description="Reuse KV of shared prompt prefixes (vLLM default on).")
    enable_chunked_prefill: bool = Field(True, description="Mix prefill chunks with decodes (vLLM default on).")
    dtype: Literal["auto", "bfloat16", "float16"] = Field("auto", description="Activation dtype.")
    quantization: str | None = Field(None, description="Weight quantisation method when not in config.json.")
    load_format: LoadFormat = Field("auto", description="runai_streamer streams safetensors from S3.")
    shutdown_timeout_seconds: int = Field(
        90, ge=0, le=3600,
        description="Drain time on SIGTERM (covers a 2K-token answer at 40 ms/token); 0 aborts in-flight requests.",
    )
    port: int = Field(DEFAULT_PORT, ge=1024, le=65535, description="HTTP port of the OpenAI server and /metrics.")
    enable_lora: bool = Field(False, description="Serve LoRA adapters on top of the base model.")
    max_loras: int | None = Field(None, ge=1, description="LoRA adapters in one batch.")
    max_lora_rank: int | None = Field(None, ge=1, description="Largest LoRA rank served.")
    extra_args: list[str] = Field(default_factory=list, description="Further `vllm serve` flags, one per item.")

    @field_validator("vllm_version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        version = parse_version(value)
        if version[:2] < MIN_VLLM_VERSION:
            raise ValueError(
                f"vLLM {value} predates --shutdown-timeout and vllm:kv_cache_usage_perc that this project renders;"
                f" use {DEFAULT_VLLM_VERSION} or newer"
            )
        return value.lstrip("v")

    @field_validator("extra_args")
    @classmethod
    def _extra_args_not_managed(cls, value: list[str]) -> list[str]:
        for arg in value:
            flag = arg.split("=", 1)[0]
            if flag in REMOVED_FLAGS:
                raise ValueError(f"{flag} does not exist in vLLM 0.33: {REMOVED_FLAGS[flag]}")
            if flag in MANAGED_FLAGS:
                raise ValueError(f"{flag} is set by a typed setting; set `{_field_for(flag)}` instead")
            if flag.startswith("--") and not _known_flag(flag):
                near = closest(flag, sorted(SERVE_FLAGS))
                raise ValueError(f"{flag} is not a `vllm serve` flag of vLLM 0.33 (its parser exits with "
                                 "\"unrecognized arguments\")" + (f"; did you mean {', '.join(near)}?" if near else ""))
        return value

    @field_validator("max_lora_rank")
    @classmethod
    def _lora_rank_choice(cls, value: int | None, info: ValidationInfo) -> int | None:
        # Only rendered (and so only seen by vLLM) with enable_lora, which is validated before this field.
        if info.data.get("enable_lora") and value is not None and value not in LORA_RANKS:
            raise ValueError(f"vLLM 0.33's --max-lora-rank takes one of {', '.join(map(str, LORA_RANKS))}; use the "
                             "smallest of those >= your adapters' rank")
        return value

    @property
    def image_tag(self) -> str:
        return f"v{self.vllm_version}"

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def batch_sizes(self, gpu_memory_gib: float, gpu_product: str, max_model_len: int) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) as vLLM 0.33 resolves them on this GPU: the settings, else its
        defaults, a step that holds a whole prompt without chunked prefill, never more tokens than every sequence at
        full length, and no more default sequences than tokens in a step."""
        default_seqs, default_batched = vllm_batch_defaults(gpu_memory_gib, gpu_product)
        max_num_seqs = self.max_num_seqs or default_seqs
        batched = self.max_num_batched_tokens
        if batched is None:
            batched = default_batched if self.enable_chunked_prefill else max(max_model_len, default_batched)
            batched = min(max_num_seqs * max_model_len, batched)
        if self.max_num_seqs is None:
            max_num_seqs = min(max_num_seqs, batched)
        return max_num_seqs, batched

    def kv_dtype_bytes(self, model_dtype_bytes: int = 2) -> int:
        return KV_DTYPE_BYTES.get(self.kv_cache_dtype, model_dtype_bytes)

    def to_args(
        self,
        model: str,
        *,
        served_model_name: str | None = None,
        distributed_executor_backend: ExecutorBackend | None = None,
        max_model_len: int | None = None,
    ) -> list[str]:
        """The ``vllm serve`` argument list: the model first, then ``--flag=value`` items in a fixed order."""
        args = [model]

        def flag(name: str, value: object) -> None:
            if value is not None:
                args.append(f"--{name}={value}")

        flag("served-model-name", served_model_name)
        flag("port", self.port)
        flag("tensor-parallel-size", self.tensor_parallel_size)
        if self.pipeline_parallel_size > 1:
            flag("pipeline-parallel-size", self.pipeline_parallel_size)
        flag("distributed-executor-backend", distributed_executor_backend)
        flag("max-model-len", max_model_len if max_model_len is not None else self.max_model_len)
        flag("max-num-seqs", self.max_num_seqs)
        flag("max-num-batched-tokens", self.max_num_batched_tokens)
        flag("gpu-memory-utilization", self.gpu_memory_utilization)
        if self.kv_cache_dtype != "auto":
            flag("kv-cache-dtype", self.kv_cache_dtype)
        if self.dtype != "auto":
            flag("dtype", self.dtype)
        flag("quantization", self.quantization)
        if self.load_format != "auto":
            flag("load-format", self.load_format)
        args.append("--enable-prefix-caching" if self.enable_prefix_caching else "--no-enable-prefix-caching")
        args.append("--enable-chunked-prefill" if self.enable_chunked_prefill else "--no-enable-chunked-prefill")
        if self.enable_lora:
            args.append("--enable-lora")
            flag("max-loras", self.max_loras)
            flag("max-lora-rank", self.max_lora_rank)
        flag("shutdown-timeout", self.shutdown_timeout_seconds)
        args.extend(self.extra_args)
        return args


def _known_flag(flag: str) -> bool:
    """vLLM's parser takes underscores for hyphens, and `--no-enable-x` / `--no-disable-x` for backwards
    compatibility beside the listed `--disable-x` / `--enable-x`."""
    normalized = flag.replace("_", "-")
    if normalized in SERVE_FLAGS:
        return True
    base = normalized.removeprefix("--no-")
    return base != normalized.removeprefix("--") and base.startswith(("enable-", "disable-")) and \
        f"--{base}" in SERVE_FLAGS


def _field_for(flag: str) -> str:
    name = flag.removeprefix("--").removeprefix("no-").replace("-", "_")
    return {"model": "model", "shutdown_timeout": "shutdown_timeout_seconds", "api_key": "api_key"}.get(name, name)
