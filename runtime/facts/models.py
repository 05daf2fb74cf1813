"""Model facts: a catalog of common open models and a loader for any Hugging Face ``config.json``.

The catalog stores, for each model, the subset of its ``config.json`` the planner needs; the same parser reads a
user's ``config.json``, so catalog models and unknown models take one code path (and the vLLM cross-check test can
write each catalog entry back out as a ``config.json`` and compare vLLM's own view with ours).

Parameter counts are computed from the tensor shapes the way the checkpoint stores them (embeddings, attention,
dense or expert MLPs, norms, untied LM head), not copied from model cards; the tests compare them to the published
totals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_pulumi.runtime.errors import PlanningError, UnknownIdError, closest
from vllm_pulumi.runtime.facts.model_catalog import CATALOG

AttentionKind = Literal["mha", "gqa", "mqa", "mla"]

# Bytes per weight for a checkpoint's storage format. 4-bit formats carry a scale per group of 32 (MXFP4) or
# 128 (AWQ/GPTQ) weights, which is where the extra fraction comes from.
WEIGHT_BYTES_BY_FORMAT: dict[str, float] = {
    "float32": 4.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "fp8": 1.0,
    "mxfp4": 4.25 / 8,
    "int4": 4.125 / 8,
}

# Layer types vLLM allocates KV cache for differently from full attention. Sliding-window layers keep about
# `window` tokens (runtime/planning/kvcache.py does vLLM's arithmetic for them; chunked local attention is allocated
# as full).
# Linear-attention and state-space layers keep a fixed-size state instead of a KV cache: not modelled at all.
_SLIDING = {"sliding_attention", "sliding_window", "local", "chunked_attention"}
_FULL = {"full_attention", "attention", "global"}


@dataclass(frozen=True)
class ModelFacts:
    """What the planner needs to know about one model, read from its ``config.json``."""

    name: str
    """Catalog id or the path/id the user gave."""
    hf_id: str
    """Hugging Face repository id (``org/name``); empty for a local config without one."""
    architecture: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    weight_format: str
    """Storage format of the linear-layer weights: bfloat16, float16, float32, fp8, mxfp4, int4."""
    attention_bias: bool = False
    qk_norm: bool = False
    # Multi-head latent attention (DeepSeek V2/V3)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Mixture of experts
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    dense_layer_indices: tuple[int, ...] = ()
    """Layers that keep a dense MLP in an MoE model (DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers)."""
    layer_types: tuple[str, ...] = ()
    """Per-layer attention type; empty means every layer is full attention."""
    sliding_window: int | None = None
    notes: tuple[str, ...] = field(default=())
    model_type: str = ""
    """config.json's model_type (of the language model for multimodal wrappers); vLLM keys some refusals on it."""
    torch_dtype: str = "bfloat16"
    """The dtype vLLM runs with ``--dtype auto``: the checkpoint's 16-bit dtype (float32 checkpoints run in bf16)."""

    # ---- attention -------------------------------------------------------------------------------------------
    @property
    def attention(self) -> AttentionKind:
        if self.kv_lora_rank:
            return "mla"
        if self.num_key_value_heads == self.num_attention_heads:
            return "mha"
        if self.num_key_value_heads == 1:
            return "mqa"
        return "gqa"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def sliding_window_layers(self) -> int:
        return sum(1 for kind in self.layer_types if kind in _SLIDING)

    @property
    def unmodelled_layer_types(self) -> tuple[str, ...]:
        """Layer types that hold no per-token KV cache (linear attention, mamba): the planner refuses these."""
        return tuple(sorted({k for k in self.layer_types if k not in _SLIDING | _FULL}))

    @property
    def kv_head_size(self) -> int:
        """Size of one cached head per token: K and V each for MHA/GQA; the single latent for MLA."""
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.head_dim

    # ---- parameters ------------------------------------------------------------------------------------------
    def attention_parameters(self) -> int:
        h = self.hidden_size
        if self.attention == "mla":
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.num_attention_heads * qk_head
            else:
                q = h * self.num_attention_heads * qk_head
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * self.num_attention_heads * (self.qk_nope_head_dim + self.v_head_dim)
            )
            o = self.num_attention_heads * self.v_head_dim * h
            return q + kv + o
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_key_value_heads * self.head_dim
        weights = h * q_width + 2 * h * kv_width + q_width * h
        bias = (q_width + 2 * kv_width) if self.attention_bias else 0
        norms = 2 * self.head_dim if self.qk_norm else 0
        return weights + bias + norms

    def is_dense_layer(self, index: int) -> bool:
        return not self.is_moe or index in self.dense_layer_indices

    def mlp_parameters(self, index: int) -> int:
        h = self.hidden_size
        if self.is_dense_layer(index):
            return 3 * h * self.intermediate_size
        experts = self.num_experts * 3 * h * self.moe_intermediate_size
        shared = 3 * h * (self.shared_expert_intermediate_size or self.num_shared_experts * self.moe_intermediate_size)
        router = h * self.num_experts
        return experts + shared + router

    def active_mlp_parameters(self, index: int) -> int:
        """MLP weights one token reads: all of a dense MLP, only the routed-to and shared experts of an MoE."""
        if self.is_dense_layer(index):
            return self.mlp_parameters(index)
        h = self.hidden_size
        routed = self.num_experts_per_tok * 3 * h * self.moe_intermediate_size
        shared = 3 * h * (self.shared_expert_intermediate_size or self.num_shared_experts * self.moe_intermediate_size)
        return routed + shared + h * self.num_experts

    def layer_parameters(self, index: int) -> int:
        return self.attention_parameters() + self.mlp_parameters(index) + 2 * self.hidden_size

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_parameters(self) -> int:
        layers = sum(self.layer_parameters(i) for i in range(self.num_hidden_layers))
        head = 0 if self.tie_word_embeddings else self.embedding_parameters
        return self.embedding_parameters + layers + head + self.hidden_size

    @property
    def num_active_parameters(self) -> int:
        layers = sum(
            self.attention_parameters() + self.active_mlp_parameters(i) + 2 * self.hidden_size
            for i in range(self.num_hidden_layers)
        )
        return self.embedding_parameters + layers + (0 if self.tie_word_embeddings else self.embedding_parameters)

    @property
    def weight_bytes_per_parameter(self) -> float:
        return WEIGHT_BYTES_BY_FORMAT[self.weight_format]

    @property
    def embedding_bytes_per_parameter(self) -> float:
        """Embeddings and LM head stay in 16 bits in quantised checkpoints (FP8, MXFP4, AWQ/GPTQ)."""
        return 4.0 if self.weight_format == "float32" else 2.0

    @property
    def checkpoint_bytes(self) -> int:
        """Bytes of weights on disk and in GPU memory for one full copy of the model."""
        embeddings = self.embedding_parameters * (1 if self.tie_word_embeddings else 2)
        rest = self.num_parameters - embeddings
        return int(rest * self.weight_bytes_per_parameter + embeddings * self.embedding_bytes_per_parameter)

    @property
    def native_dtype_bytes(self) -> int:
        """Bytes of the activation / KV dtype vLLM picks with ``--dtype auto`` (fp32 checkpoints run in bf16)."""
        return 2


def _get(config: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if key in config and config[key] is not None:
            return config[key]
    return default


def _weight_format(config: dict[str, Any]) -> str:
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "modelopt") or (method == "compressed-tensors" and "fp8" in json.dumps(quant)):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "bitsandbytes"):
        return "int4"
    if method:
        raise PlanningError(
            "quantization_config.quant_method", method, "the planner has no weight size for this quantisation",
            "use a bfloat16/float16, fp8, mxfp4, AWQ or GPTQ checkpoint",
        )
    dtype = str(_get(config, "torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")
    return dtype if dtype in WEIGHT_BYTES_BY_FORMAT else "bfloat16"


def _layer_types(config: dict[str, Any], layers: int) -> tuple[str, ...]:
    explicit = config.get("layer_types")
    if isinstance(explicit, list) and explicit:
        return tuple(str(kind) for kind in explicit[:layers])
    window = config.get("sliding_window")
    if not window or config.get("use_sliding_window") is False:
        return ()
    pattern = config.get("sliding_window_pattern")
    model_type = str(config.get("model_type", ""))
    if pattern:  # Gemma 3: every `pattern`-th layer is global, the rest local
        return tuple("full_attention" if (i + 1) % int(pattern) == 0 else "sliding_attention" for i in range(layers))
    if model_type == "gemma2":  # alternating, starting with a local layer
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers))
    max_window_layers = config.get("max_window_layers")
    if model_type.startswith("qwen") and max_window_layers is not None:
        return tuple("sliding_attention" if i >= int(max_window_layers) else "full_attention" for i in range(layers))
    return tuple("sliding_attention" for _ in range(layers))


def parse_config(config: dict[str, Any], name: str, hf_id: str = "") -> ModelFacts:
    """Read a Hugging Face ``config.json`` (as a dict) into ModelFacts."""
    text = config.get("text_config")
    if isinstance(text, dict):  # multimodal wrappers (Gemma 3, Llama 4, ...) keep the language model here
        merged = {**config, **text}
        merged.setdefault("architectures", config.get("architectures"))
        config = merged
    architectures = config.get("architectures") or [str(config.get("model_type", "unknown"))]
    try:
        layers = int(_get(config, "num_hidden_layers", "n_layer", "num_layers"))
        hidden = int(_get(config, "hidden_size", "d_model", "n_embd"))
        heads = int(_get(config, "num_attention_heads", "n_head"))
    except (TypeError, ValueError) as exc:
        raise PlanningError(
            "model", name, "config.json lacks num_hidden_layers / hidden_size / num_attention_heads",
            "point to a decoder-only transformer config.json",
        ) from exc
    kv_heads = int(_get(config, "num_key_value_heads", "num_kv_heads", default=heads))
    head_dim = int(_get(config, "head_dim", default=hidden // heads))
    num_experts = int(_get(config, "num_experts", "n_routed_experts", "num_local_experts", default=0))
    model_type = str(config.get("model_type", ""))
    # Mixtral names its expert width intermediate_size; DeepSeek/Qwen use moe_intermediate_size.
    moe_width = int(_get(config, "moe_intermediate_size", default=0)) or (
        int(_get(config, "intermediate_size", default=0)) if num_experts else 0
    )
    facts = ModelFacts(
        name=name,
        hf_id=hf_id,
        architecture=str(architectures[0]),
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(_get(config, "intermediate_size", "ffn_dim", default=4 * hidden)),
        vocab_size=int(_get(config, "vocab_size", default=32000)),
        max_position_embeddings=int(_get(config, "max_position_embeddings", "n_positions", default=4096)),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        weight_format=_weight_format(config),
        attention_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        qk_norm=model_type.startswith("qwen3"),
        kv_lora_rank=int(_get(config, "kv_lora_rank", default=0)),
        q_lora_rank=int(_get(config, "q_lora_rank", default=0)),
        qk_rope_head_dim=int(_get(config, "qk_rope_head_dim", default=0)),
        qk_nope_head_dim=int(_get(config, "qk_nope_head_dim", default=0)),
        v_head_dim=int(_get(config, "v_head_dim", default=0)),
        num_experts=num_experts,
        num_experts_per_tok=int(_get(config, "num_experts_per_tok", "experts_per_token", default=0)),
        moe_intermediate_size=moe_width,
        num_shared_experts=int(_get(config, "n_shared_experts", default=0)),
        shared_expert_intermediate_size=int(_get(config, "shared_expert_intermediate_size", default=0)),
        dense_layer_indices=_dense_layer_indices(config, layers) if num_experts else (),
        layer_types=_layer_types(config, layers),
        sliding_window=config.get("sliding_window") if config.get("use_sliding_window") is not False else None,
        model_type=model_type,
        torch_dtype=_auto_dtype(config),
    )
    return facts


def _dense_layer_indices(config: dict[str, Any], layers: int) -> tuple[int, ...]:
    """The layers of an MoE model that keep a dense MLP: DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers,
    and with a decoder_sparse_step above 1 every layer between two sparse ones."""
    first_dense = int(_get(config, "first_k_dense_replace", default=0))
    mlp_only = [int(i) for i in (config.get("mlp_only_layers") or [])]
    step = int(_get(config, "decoder_sparse_step", default=1))
    dense_layers = set(range(first_dense)) | set(mlp_only)
    if step > 1:
        dense_layers |= {i for i in range(layers) if (i + 1) % step != 0}
    return tuple(sorted(dense_layers))


def _auto_dtype(config: dict[str, Any]) -> str:
    dtype = str(_get(config, "torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")
    return "float16" if dtype == "float16" else "bfloat16"


_BY_HF_ID = {hf_id.lower(): key for key, (hf_id, _) in CATALOG.items()}


def catalog_model(catalog_id: str) -> ModelFacts:
    hf_id, config = CATALOG[catalog_id]
    return parse_config(config, catalog_id, hf_id)


def catalog_id_for(reference: str) -> str | None:
    """The catalog id for a catalog id or a catalog model's Hugging Face id, else None."""
    key = reference.strip()
    if key.lower() in CATALOG:
        return key.lower()
    return _BY_HF_ID.get(key.lower())


def load_config_file(path: str | Path) -> ModelFacts:
    """Load a ``config.json`` file, or the ``config.json`` inside a directory."""
    location = Path(path)
    file = location / "config.json" if location.is_dir() else location
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError as exc:
        raise PlanningError("model", str(path), "no config.json there", "give a catalog id, a catalog model's "
                            "Hugging Face id, or a path to a config.json file or its directory") from exc
    except json.JSONDecodeError as exc:
        raise PlanningError("model", str(path), f"config.json is not valid JSON ({exc.msg} at line {exc.lineno})",
                            "point to the model's original config.json") from exc
    hf_id = str(config.get("_name_or_path", "")) if "/" in str(config.get("_name_or_path", "")) else ""
    return parse_config(config, str(path), hf_id)


def resolve_model(reference: str) -> ModelFacts:
    """A catalog id, a catalog model's Hugging Face id, or a path to a ``config.json`` (file or directory)."""
    catalog_id = catalog_id_for(reference)
    if catalog_id:
        return catalog_model(catalog_id)
    if Path(reference).exists() or reference.endswith(".json"):
        return load_config_file(reference)
    known = list(CATALOG) + [hf_id for hf_id, _ in CATALOG.values()]
    error = UnknownIdError("model", reference, closest(reference, known), valid=list(CATALOG))
    error.alternative += "; for a model outside the catalog, give the path to its config.json"
    raise error
