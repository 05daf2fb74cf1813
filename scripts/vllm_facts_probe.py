#!/usr/bin/env python
"""Ask vLLM itself (no GPU, no network) for KV-cache facts and CLI validity.

Run with the python of the venv made by scripts/vllm-crosscheck-env.sh.

Modes (exactly one):

  --config-dir DIR [--tp N] [--pp N] [--kv-cache-dtype D] [--dtype auto]
      DIR holds only a Hugging Face config.json. Builds
      vllm.config.ModelConfig(model=DIR, skip_tokenizer_init=True) and
      vllm.config.ParallelConfig(tensor_parallel_size=N, pipeline_parallel_size=N)
      and prints JSON with vLLM's own view of the per-rank KV-cache shape.

  --parse-args -- ARG...
      Parses ARG... (what follows `vllm serve`) with vLLM's own serve parser
      (vllm.entrypoints.common.cli_args.make_arg_parser) and prints JSON
      {ok, error, namespace}.

  --serve
      Long-lived: reads one JSON request per line on stdin and writes one JSON answer per line on stdout (flushed),
      until stdin closes. Requests are those of --batch, plus {"engine": {config_dir, args, gpu_memory_gib,
      gpu_name}}: the `vllm serve` argument list ARGS (its first item, the model, replaced by config_dir) parsed by
      vLLM's serve parser and built into the engine configuration by EngineArgs.create_engine_config, with the
      API server's batch defaults of the named GPU (see engine_verdict). Answer: {ok, stage, error}.
      And {"serve_facts": {}}: the serve parser's flags and the quantization methods (runtime/vllm_flags.py).

  --batch
      Reads a JSON list of requests on stdin, each {"facts": {config_dir, tp, pp, kv_cache_dtype, dtype}},
      {"kv_capacity": {config_dir, tp, pp, kv_cache_dtype, max_model_len, max_num_batched_tokens,
      available_memory_bytes}} or {"parse": [ARG...]}, and prints the JSON list of answers: one vLLM import for
      many cases. kv_capacity runs vLLM's own v1 KV-cache planner (get_global_kv_cache_groups,
      get_kv_cache_configs, get_kv_cache_capacity) and reports the "GPU KV cache size" tokens and the
      "Maximum concurrency" it would log.

stdout carries only the JSON document; vLLM/torch logging goes to stderr.
Exit status is 0 whenever the JSON was produced (check "ok"/"verify_ok").

The host CPU never decides an answer: vLLM's CPU platform picks some settings by the CPU it runs on (AMX, AVX-512,
the architecture); the probe restores what a GPU platform leaves in their place (see HOST_DEPENDENT_SETTINGS). For
the test that proves it (tests/runtime/test_vllm_host_independence.py), VLLM_PROBE_HOST_CPU names the CPU the probe
makes vLLM see (one of HOST_CPUS; unset: the real one) and VLLM_PROBE_PIN_HOST=0 turns the restoring off.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys

# Offline, CPU-only, quiet: must be set before vllm is imported.
for _k, _v in {
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

# --------------------------------------------------------------------------
# The host CPU: what vLLM's CPU platform decides by it, and what a GPU decides instead
# --------------------------------------------------------------------------
# CpuPlatform.check_and_update_config (vllm/platforms/cpu.py) changes these after the engine arguments are resolved,
# by the CPU it runs on; CudaPlatform.check_and_update_config (vllm/platforms/cuda.py) leaves every one of them as the
# arguments set it (the GPU backend's block size is resolved later, at executor start-up, by
# update_block_size_for_backend, which no probe path runs). So after the CPU platform's hook each is put back.
HOST_DEPENDENT_SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("scheduler_config", "enable_chunked_prefill",
     "an MLA model without AMX MLA (torch.cpu._is_amx_tile_supported() false on x86, or not x86) is forced off"),
    ("scheduler_config", "max_num_batched_tokens",
     "the same MLA branch raises it to max(max_model_len, SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS)"),
    ("cache_config", "enable_prefix_caching", "the same MLA branch forces it off"),
    ("cache_config", "block_size",
     "reference CPU MLA (no AMX) forces 16 and DeepSeek-V4 256, whatever was asked"),
    ("cache_config", "mamba_ssm_cache_dtype",
     "hosts with AVX-512 BF16 reset it to float32 unless the GDN backend keeps fp16/bf16"),
    ("cache_config", "kv_cache_memory_bytes", "VLLM_CPU_KVCACHE_SPACE in the host's environment sets it"),
)
# What CudaPlatform.supported_dtypes answers on compute capability >= 8.0 (every GPU of the catalog), and what the CPU
# platform answers on x86 and aarch64 Linux; PowerPC, RISC-V and macOS answer other lists or orders, which change the
# dtype vLLM resolves for `--dtype auto`.
GPU_SUPPORTED_DTYPES = ("bfloat16", "float16", "float32")

# The CPUs the independence test makes vLLM see: (AMX tiles, AVX-512 BF16, AVX-512, architecture), as
# torch.cpu._is_amx_tile_supported / _is_avx512_bf16_supported / _is_avx512_supported and
# Platform.get_cpu_architecture report them. Sapphire Rapids and later; AMD Zen 4/5 (EPYC Genoa/Turin); Skylake to
# Cascade Lake; AVX2 only; Graviton.
HOST_CPUS: dict[str, tuple[bool, bool, bool, str]] = {
    "amx": (True, True, True, "X86"),
    "avx512-bf16": (False, True, True, "X86"),
    "avx512": (False, False, True, "X86"),
    "avx2": (False, False, False, "X86"),
    "aarch64": (False, False, False, "ARM"),
}
HOST_CPU_ENV = "VLLM_PROBE_HOST_CPU"
PIN_HOST_ENV = "VLLM_PROBE_PIN_HOST"


def simulate_host_cpu(name: str) -> None:
    """Make vLLM see the CPU ``name`` of HOST_CPUS (before vLLM's platform is resolved): the tests' way to run the
    probe under each branch of the CPU platform's host checks on any machine."""
    import torch
    from vllm.platforms.interface import CpuArchEnum, Platform

    if name not in HOST_CPUS:
        raise SystemExit(f"{HOST_CPU_ENV}={name!r}: not one of {', '.join(HOST_CPUS)}")
    amx, avx512_bf16, avx512, architecture = HOST_CPUS[name]
    torch.cpu._is_amx_tile_supported = lambda: amx
    torch.cpu._is_avx512_bf16_supported = lambda: avx512_bf16
    torch.cpu._is_avx512_supported = lambda: avx512
    Platform.get_cpu_architecture = classmethod(lambda cls: CpuArchEnum[architecture])  # type: ignore[method-assign]


def pin_host_decisions() -> None:
    """Wrap the CPU platform's config hook so that it keeps HOST_DEPENDENT_SETTINGS as the arguments set them, and
    answer the GPU's dtypes: every figure and verdict of the probe is then the same on any host CPU."""
    import torch
    from vllm.platforms.cpu import CpuPlatform

    hook = CpuPlatform.__dict__["check_and_update_config"].__func__

    def as_a_gpu_leaves_them(cls, vllm_config):
        kept = {(part, name): getattr(getattr(vllm_config, part), name) for part, name, _ in HOST_DEPENDENT_SETTINGS}
        hook(cls, vllm_config)
        for (part, name), value in kept.items():
            setattr(getattr(vllm_config, part), name, value)

    CpuPlatform.check_and_update_config = classmethod(as_a_gpu_leaves_them)
    CpuPlatform.supported_dtypes = property(lambda self: [getattr(torch, name) for name in GPU_SUPPORTED_DTYPES])


def host_pinned() -> bool:
    return os.environ.get(PIN_HOST_ENV, "1") != "0"


def prepare_host() -> None:
    if os.environ.get(HOST_CPU_ENV):
        simulate_host_cpu(os.environ[HOST_CPU_ENV])
    if host_pinned():
        pin_host_decisions()


# Namespace keys reported by --parse-args (all others are omitted).
NAMESPACE_KEYS = (
    "model_tag",
    "model",
    "served_model_name",
    "host",
    "port",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "block_size",
    "dtype",
    "quantization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "shutdown_timeout",
    "trust_remote_code",
    "download_dir",
    "load_format",
    "swap_space",
    "seed",
    "api_key",
    "disable_log_stats",
    "enforce_eager",
    "distributed_executor_backend",
)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------
# --parse-args
# --------------------------------------------------------------------------
class _ParseFailure(Exception):
    def __init__(self, status: int, message: str | None):
        super().__init__(message or "")
        self.status = status
        self.message = (message or "").strip()


_PARSERS: list = []


def _serve_parser():
    """vLLM's serve parser, built once (building it takes a good fraction of a second)."""
    if not _PARSERS:
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        class _Parser(FlexibleArgumentParser):
            # argparse reports every problem through exit(); raise instead so
            # the probe can return JSON.
            def exit(self, status=0, message=None):  # noqa: A003
                raise _ParseFailure(status, message)

        _PARSERS.append(make_arg_parser(_Parser(prog="vllm serve")))
    return _PARSERS[0]


def parse_serve_args(argv: list[str], keep: dict | None = None) -> dict:
    from vllm.entrypoints.common.cli_args import validate_parsed_serve_args

    parser = _serve_parser()
    out: dict = {"ok": False, "error": None, "namespace": None}
    usage = io.StringIO()
    try:
        with contextlib.redirect_stderr(usage):
            ns = parser.parse_args(argv)
    except _ParseFailure as exc:
        out["error"] = exc.message or f"argparse exit status {exc.status}"
        return out
    # `vllm serve` does this in ServeSubcommand.cmd.
    if getattr(ns, "model_tag", None) is not None:
        ns.model = ns.model_tag
    out["namespace"] = {k: _jsonable(getattr(ns, k)) for k in NAMESPACE_KEYS if hasattr(ns, k)}
    try:
        validate_parsed_serve_args(ns)
    except Exception as exc:  # serve's own pre-load validation
        out["error"] = _err(exc)
        return out
    if keep is not None:
        keep["namespace"] = ns
    # Not done here: AsyncEngineArgs.from_cli_args(ns) -- its __post_init__
    # resolves the model name through the Hugging Face hub (get_model_path),
    # which fails offline for a hub id.
    out["ok"] = True
    return out


# --------------------------------------------------------------------------
# --config-dir
# --------------------------------------------------------------------------
def model_facts(config_dir: str, tp: int, pp: int, kv_cache_dtype: str, dtype: str) -> dict:
    import torch
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    out: dict = {
        "vllm_version": None,
        "config_dir": os.path.abspath(config_dir),
        "tp": tp,
        "pp": pp,
        "kv_cache_dtype": kv_cache_dtype,
    }
    import vllm

    out["vllm_version"] = vllm.__version__

    try:
        CacheConfig(cache_dtype=kv_cache_dtype)
    except Exception as exc:
        out["ok"] = False
        out["error"] = "CacheConfig: " + _err(exc)
        return out

    try:
        mc = ModelConfig(
            model=config_dir,
            tokenizer=config_dir,
            skip_tokenizer_init=True,
            dtype=dtype,
            trust_remote_code=False,
        )
    except Exception as exc:
        out["ok"] = False
        out["error"] = "ModelConfig: " + _err(exc)
        return out

    try:
        pc = ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp)
    except Exception as exc:
        out["ok"] = False
        out["error"] = "ParallelConfig: " + _err(exc)
        return out

    out["ok"] = True
    out["architectures"] = list(mc.architectures or [])
    out["dtype"] = str(mc.dtype).removeprefix("torch.")
    out["use_mla"] = bool(mc.use_mla)
    out["total_num_hidden_layers"] = mc.get_total_num_hidden_layers()
    out["total_num_attention_heads"] = mc.model_arch_config.total_num_attention_heads
    out["total_num_kv_heads"] = mc.get_total_num_kv_heads()
    out["num_kv_heads_per_rank"] = mc.get_num_kv_heads(pc)
    out["head_size"] = mc.get_head_size()
    out["max_model_len"] = mc.max_model_len

    # Layers per pipeline stage, vLLM's own split (ModelConfig.get_num_layers
    # reads the stage from parallel_config.rank; layout is DP x PP x TP).
    per_stage = []
    for pp_rank in range(pp):
        pc.rank = pp_rank * tp
        per_stage.append(mc.get_num_layers(pc))
    pc.rank = 0
    out["num_layers_per_stage"] = per_stage
    out["num_layers_worst_stage"] = max(per_stage)
    out["num_attention_layers_worst_stage"] = None
    try:
        attn = []
        for pp_rank in range(pp):
            pc.rank = pp_rank * tp
            attn.append(mc.get_num_layers_by_block_type(pc, "attention"))
        pc.rank = 0
        out["num_attention_layers_worst_stage"] = max(attn)
    except Exception as exc:
        out["num_attention_layers_error"] = _err(exc)

    # KV element dtype / size as vLLM resolves --kv-cache-dtype.
    try:
        kv_dtype = kv_cache_dtype_str_to_dtype(kv_cache_dtype, mc)
        out["kv_cache_torch_dtype"] = str(kv_dtype).removeprefix("torch.")
        out["kv_cache_elem_bytes"] = torch.empty((), dtype=kv_dtype).element_size()
    except Exception as exc:
        out["kv_cache_dtype_error"] = _err(exc)
        kv_dtype = None

    # Bytes per token per rank from vLLM's own KV-cache spec classes
    # (plain layout: no backend padding / packed formats such as fp8_ds_mla).
    if kv_dtype is not None:
        try:
            from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec

            block = 16
            if mc.use_mla:
                spec = MLAAttentionSpec(
                    block_size=block,
                    num_kv_heads=mc.get_num_kv_heads(pc),
                    head_size=mc.get_head_size(),
                    dtype=kv_dtype,
                    cache_dtype_str=kv_cache_dtype,
                )
            else:
                spec = FullAttentionSpec(
                    block_size=block,
                    num_kv_heads=mc.get_num_kv_heads(pc),
                    head_size=mc.get_head_size(),
                    dtype=kv_dtype,
                )
            per_layer = spec.page_size_bytes // block
            layers = out["num_attention_layers_worst_stage"] or out["num_layers_worst_stage"]
            out["spec_class"] = type(spec).__name__
            out["kv_bytes_per_token_per_layer_per_rank"] = per_layer
            out["kv_bytes_per_token_per_rank_worst_stage"] = per_layer * layers
        except Exception as exc:
            out["spec_error"] = _err(exc)

    try:
        mc.verify_with_parallel_config(pc)
        out["verify_ok"] = True
        out["verify_error"] = None
    except Exception as exc:
        out["verify_ok"] = False
        out["verify_error"] = _err(exc)
    return out


# --------------------------------------------------------------------------
# kv_capacity
# --------------------------------------------------------------------------
def _layer_windows(mc, cache_config, num_layers: int) -> list:
    """Sliding window per layer as vLLM's attention layers receive it: models reading config.layer_types
    (Gemma 2/3, gpt-oss, Llama/Mistral with layer_types) pass config.sliding_window to the layers marked
    "sliding_attention"; otherwise CacheConfig.sliding_window (set by EngineArgs only when no layer_types exist
    or all are sliding) applies to every layer."""
    layer_types = getattr(mc.hf_text_config, "layer_types", None)
    window = mc.get_sliding_window()
    if layer_types and window:
        return [window if kind == "sliding_attention" else None for kind in layer_types[:num_layers]]
    return [cache_config.sliding_window] * num_layers


def kv_capacity(request: dict) -> dict:
    """vLLM's own KV-cache planner over the per-layer specs its attention layers would report.

    Building the model (and so calling Attention.get_kv_cache_spec) needs a GPU backend, so the specs are made
    here with the same constructor arguments get_kv_cache_spec uses: FullAttentionSpec / SlidingWindowSpec
    (MLAAttentionSpec for MLA) with num_kv_heads = ModelConfig.get_num_kv_heads(parallel_config), head_size =
    get_head_size(), the resolved KV dtype, and block_size 16 (vLLM's default; a sliding-window layer takes the
    largest kernel block within the primary page, which is 16 for backends accepting multiples of 16, such as
    FlashAttention). The CUDA defaults the CPU platform would not pick are set explicitly: async scheduling with
    model runner V2 (pipeline_parallel_size + 1 batches in flight), hybrid KV-cache manager on, and the NHD
    layout (with one page size per layer every layout gives the same bytes per block); the settings the CPU platform
    picks by the host CPU (batched tokens and chunked prefill for MLA, block size) are kept as asked by
    pin_host_decisions."""
    previous = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"  # the CUDA default (Triton present); read when the config is used
    try:
        return _kv_capacity(request)
    finally:
        if previous is None:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        else:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = previous


def _kv_capacity(request: dict) -> dict:
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig, VllmConfig
    from vllm.distributed.utils import get_pp_indices
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config, get_kv_cache_capacity
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec

    tp, pp = int(request.get("tp", 1)), int(request.get("pp", 1))
    kv_cache_dtype = request.get("kv_cache_dtype", "auto")
    max_model_len = int(request["max_model_len"])
    out: dict = {"ok": False, "error": None}
    try:
        mc = ModelConfig(model=request["config_dir"], tokenizer=request["config_dir"], skip_tokenizer_init=True,
                         max_model_len=max_model_len, trust_remote_code=False)
        cache_config = CacheConfig(block_size=16, cache_dtype=kv_cache_dtype)
        layer_types = getattr(mc.hf_text_config, "layer_types", None)
        if layer_types is None or all(kind == "sliding_attention" for kind in layer_types):
            cache_config.sliding_window = mc.get_sliding_window()  # what EngineArgs.create_engine_config does
        pc = ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp)
        batched = int(request["max_num_batched_tokens"])
        sc = SchedulerConfig(max_num_batched_tokens=batched, max_num_seqs=256, max_model_len=max_model_len,
                             is_encoder_decoder=False, enable_chunked_prefill=True)
        vc = VllmConfig(model_config=mc, cache_config=cache_config, parallel_config=pc, scheduler_config=sc)
        vc.scheduler_config.async_scheduling = True
        vc.scheduler_config.disable_hybrid_kv_cache_manager = False
        vc.cache_config.kv_cache_layout = "NHD"
        out["max_concurrent_batches"] = vc.max_concurrent_batches
        out["max_in_flight_tokens"] = vc.max_in_flight_tokens
        dtype = kv_cache_dtype_str_to_dtype(kv_cache_dtype, mc)
        num_layers = mc.get_total_num_hidden_layers()
        windows = _layer_windows(mc, cache_config, num_layers)
        specs_per_worker = []
        for stage in range(pp):
            start, end = get_pp_indices(num_layers, stage, pp)
            specs = {}
            for index in range(start, end):
                name = f"model.layers.{index}.self_attn.attn"
                common = {"block_size": 16, "num_kv_heads": mc.get_num_kv_heads(pc), "head_size": mc.get_head_size(),
                          "dtype": dtype}
                if mc.use_mla:
                    specs[name] = MLAAttentionSpec(**common, cache_dtype_str=kv_cache_dtype)
                elif windows[index] is not None:
                    specs[name] = SlidingWindowSpec(**common, sliding_window=windows[index])
                else:
                    specs[name] = FullAttentionSpec(**common)
            specs_per_worker.append(specs)
        out["sliding_layers"] = sum(1 for window in windows if window is not None)
        groups = get_global_kv_cache_groups(vc, specs_per_worker)
        out["num_groups"] = len(groups)
        out["group_windows"] = [getattr(g.kv_cache_spec, "sliding_window", None) for g in groups]
        available = [int(request["available_memory_bytes"])] * pp
        try:
            configs = get_kv_cache_configs(vc, specs_per_worker, available, groups)
        except ValueError as exc:
            out["fits"] = False
            out["error"] = str(exc)
            out["ok"] = True
            return out
        scheduler_config = generate_scheduler_kv_cache_config(configs)
        tokens, concurrency = get_kv_cache_capacity(vc, scheduler_config)
        out.update(ok=True, fits=True, num_blocks=scheduler_config.num_blocks, kv_cache_tokens=tokens,
                   max_concurrency=concurrency, logged_max_concurrency=f"{concurrency:.2f}")
    except Exception as exc:
        out["error"] = _err(exc)
    return out


# --------------------------------------------------------------------------
# --serve: engine configuration verdicts
# --------------------------------------------------------------------------
@contextlib.contextmanager
def _gpu_batch_defaults(memory_gib: float, name: str):
    """vLLM picks max_num_seqs / max_num_batched_tokens defaults by the device's memory and name
    (EngineArgs.get_batch_defaults). On CPU it would use its CPU defaults; for the duration of that one call the
    platform answers as the target GPU would, so vLLM's own tiering code decides."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform

    original = EngineArgs.__dict__["get_batch_defaults"]
    platform_cls = type(current_platform)
    patched_names = ("get_device_total_memory", "get_device_name", "is_device_capability", "is_cpu", "is_tpu")
    saved = {key: platform_cls.__dict__.get(key) for key in patched_names}

    def as_gpu(cls, world_size):
        replacements = {
            "get_device_total_memory": classmethod(lambda c, device_id=0: int(memory_gib * (1 << 30))),
            "get_device_name": classmethod(lambda c, device_id=0: name),
            "is_device_capability": classmethod(lambda c, capability, device_id=0: False),
            "is_cpu": lambda self: False,
            "is_tpu": lambda self: False,
        }
        for key, value in replacements.items():
            setattr(platform_cls, key, value)
        try:
            return original.__func__(cls, world_size)
        finally:
            for key in patched_names:
                if saved[key] is None:
                    delattr(platform_cls, key)
                else:
                    setattr(platform_cls, key, saved[key])

    EngineArgs.get_batch_defaults = classmethod(as_gpu)
    try:
        yield
    finally:
        EngineArgs.get_batch_defaults = original


def engine_verdict(config_dir: str, args: list[str], gpu_memory_gib: float, gpu_name: str) -> dict:
    """Does vLLM build an engine configuration from this `vllm serve` argument list?

    What runs: the serve parser, serve's own argument validation, AsyncEngineArgs.from_cli_args and
    create_engine_config (ModelConfig, CacheConfig, ParallelConfig, SchedulerConfig, LoRAConfig, VllmConfig and its
    cross-checks). What cannot be judged here, on CPU: the device itself (the platform's check_and_update_config runs
    as the CPU platform's; kernels and compute capability are chosen at load time) and memory (profiling a step and
    sizing the KV cache need the GPU).
    """
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    kept: dict = {}
    parsed = parse_serve_args([config_dir, *args[1:]], kept)
    if not parsed["ok"]:
        return {"ok": False, "stage": "parse", "error": parsed["error"]}
    namespace = kept["namespace"]
    try:
        engine_args = AsyncEngineArgs.from_cli_args(namespace)
        engine_args.skip_tokenizer_init = True  # the directory holds only config.json
        with _gpu_batch_defaults(gpu_memory_gib, gpu_name):
            engine_args.create_engine_config(UsageContext.OPENAI_API_SERVER)
    except Exception as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic: the config class and vLLM's own sentence, without pydantic's decoration
            first = errors()[0]
            message = f"{getattr(exc, 'title', type(exc).__name__)}: {first['msg'].removeprefix('Value error, ')}"
        else:
            message = _err(exc)
        return {"ok": False, "stage": "config", "error": message}
    return {"ok": True, "stage": "config", "error": None}


def serve_facts() -> dict:
    """What runtime/vllm_flags.py records: the serve parser's long options and the quantization methods."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    parser = _serve_parser()
    flags = sorted({o for a in parser._actions for o in a.option_strings if o.startswith("--")})
    return {"serve_flags": flags, "quantization_methods": list(QUANTIZATION_METHODS)}


def host_facts() -> dict:
    """The CPU as vLLM sees it (after VLLM_PROBE_HOST_CPU), and whether its host decisions are pinned."""
    import torch
    from vllm.platforms.interface import Platform

    return {"amx": bool(torch.cpu._is_amx_tile_supported()),
            "avx512_bf16": bool(torch.cpu._is_avx512_bf16_supported()),
            "avx512": bool(torch.cpu._is_avx512_supported()),
            "architecture": Platform.get_cpu_architecture().name,
            "pinned": host_pinned(), "host_cpus": list(HOST_CPUS)}


def _answer(request: dict) -> dict:
    if "host" in request:
        return host_facts()
    if "serve_facts" in request:
        return serve_facts()
    if "parse" in request:
        return parse_serve_args(list(request["parse"]))
    if "kv_capacity" in request:
        return kv_capacity(request["kv_capacity"])
    if "engine" in request:
        engine = request["engine"]
        return engine_verdict(engine["config_dir"], list(engine["args"]), float(engine["gpu_memory_gib"]),
                              str(engine["gpu_name"]))
    facts = request["facts"]
    return model_facts(facts["config_dir"], int(facts.get("tp", 1)), int(facts.get("pp", 1)),
                       facts.get("kv_cache_dtype", "auto"), facts.get("dtype", "auto"))


def serve() -> int:
    """One answer line per request line; vLLM's own output (fd 1 included) goes to stderr."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = _answer(json.loads(line))
        except Exception as exc:  # a probe bug must not hang the caller waiting for a line
            answer = {"ok": False, "stage": "probe", "error": _err(exc)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--config-dir", help="directory holding a HF config.json")
    mode.add_argument("--batch", action="store_true", help="answer a JSON list of requests read on stdin")
    mode.add_argument("--serve", action="store_true", help="answer JSON requests line by line until stdin closes")
    mode.add_argument(
        "--parse-args",
        action="store_true",
        help="parse the arguments after `--` with vLLM's serve parser",
    )
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--kv-cache-dtype", default="auto")
    ap.add_argument("--dtype", default="auto")
    opts = ap.parse_args(argv)

    prepare_host()
    if opts.serve:
        return serve()
    if opts.batch:
        answers: list = []
        with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not mix with the JSON answer
            for request in json.load(sys.stdin):
                answers.append(_answer(request))
        result = answers
    elif opts.parse_args:
        result = parse_serve_args(rest)
    else:
        if rest:
            ap.error("arguments after -- are only used with --parse-args")
        result = model_facts(opts.config_dir, opts.tp, opts.pp, opts.kv_cache_dtype, opts.dtype)
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
