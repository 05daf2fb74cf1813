"""Where a serving pod reads the weights from: what ``vllm serve`` loads, the model volume's size, the Run:ai
streamer, and vLLM's compile caches shared on the model volume."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GIB
from vllm_pulumi.runtime.facts.models import ModelFacts
from vllm_pulumi.runtime.planning.startup import RUNAI_STREAMER_KINDS
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec, StorageSpec

MODEL_MOUNT_PATH = "/models"
# PVC headroom over the checkpoint: tokenizer and config files, a second revision during a model update.
PVC_HEADROOM_FRACTION = 0.2
PVC_MIN_GIB = 10
# The shared compile caches live beside the weights on the model volume, under this directory (outside any model's
# hydrated directory, so a re-hydration does not delete them).
COMPILE_CACHE_DIR = ".compile-cache"
# Storage kinds without a model volume: S3 streams into memory, hf-download fills the pod's own emptyDir.
VOLUMELESS_STORAGE_KINDS = ("s3-runai-streamer", "hf-download")


@dataclass(frozen=True)
class WeightsSource:
    hf_repo: str
    """The Hugging Face repo the weights are downloaded from (empty for a local config without one)."""
    model_ref: str
    """What ``vllm serve`` loads: the hydrated directory, the S3 URI, or the Hugging Face id."""
    runai_streamer: bool
    """Whether vLLM reads the weights with the Run:ai streamer (uses_runai_streamer)."""


def plan_weights_source(model: ModelDeploymentSpec, facts: ModelFacts, path: str) -> WeightsSource:
    """What the pods load and from where; refuses a download without a repo, and a warm compile cache declared
    where no cache is shared."""
    hf_repo = model.hf_repo or facts.hf_id
    storage = model.storage
    if storage.kind == "s3-runai-streamer":
        model_ref = storage.s3_uri or ""
    elif storage.kind == "hf-download":
        model_ref = hf_repo
    else:
        model_ref = f"{MODEL_MOUNT_PATH}/{model.name}"
    if not hf_repo and (storage.kind == "hf-download" or (storage.hydrate and not storage.existing_claim
                                                           and storage.kind != "s3-runai-streamer")):
        raise PlanningError(
            f"{path}.hf_repo", None, f"{model.model} is not a catalog model, so there is no repo to download",
            "set hf_repo to its Hugging Face id, or storage.existing_claim to a PVC that holds it with hydrate: false",
        )
    if model.lifecycle.compile_cache_warm and not shares_compile_cache(storage):
        raise PlanningError(
            f"{path}.lifecycle.compile_cache_warm", True,
            f"storage kind {storage.kind} ({storage.access_mode}) with shared_compile_cache "
            f"{storage.shared_compile_cache} keeps no compile cache across pods, so every pod compiles cold",
            "leave compile_cache_warm false, or use a ReadWriteMany volume kind (local-nvme, fsx-lustre, efs, nfs) "
            "with shared_compile_cache: true",
        )
    return WeightsSource(hf_repo, model_ref, uses_runai_streamer(model))


def plan_pvc_size_gib(storage: StorageSpec, facts: ModelFacts, path: str) -> int:
    """The model volume (or hf-download cache) size: the stack's, else the checkpoint plus headroom; refuses a size
    the download would overfill."""
    weights_with_headroom_gib = math.ceil(facts.checkpoint_bytes * (1 + PVC_HEADROOM_FRACTION) / GIB)
    if storage.size_gib is not None and storage.kind != "s3-runai-streamer" \
            and storage.size_gib < weights_with_headroom_gib:
        where = "the pod's download cache" if storage.kind == "hf-download" else "the model volume"
        raise PlanningError(
            f"{path}.storage.size_gib", storage.size_gib,
            f"{where} of {storage.size_gib} GiB cannot hold {facts.name}'s checkpoint of "
            f"{facts.checkpoint_bytes / GIB:.1f} GiB plus {PVC_HEADROOM_FRACTION:.0%} headroom (tokenizer and config "
            f"files, a second revision during an update), {weights_with_headroom_gib} GiB: the download would fill it "
            "and fail", f"use at least {weights_with_headroom_gib}, or leave it unset to derive it",
        )
    return storage.size_gib or max(PVC_MIN_GIB, weights_with_headroom_gib)


def storage_warnings(model: ModelDeploymentSpec) -> list[str]:
    if model.storage.kind == "s3-runai-streamer" and model.service_account_name is None:
        return [
            "weights stream from S3 with the pod's AWS credentials, and no service_account_name is set: bind an IAM "
            "role to a ServiceAccount (IRSA or EKS Pod Identity) and name it there, or loading fails with 403"
        ]
    return []


def uses_model_volume(storage: StorageSpec) -> bool:
    """Whether the pods mount a model volume (a PVC): every kind but S3 streaming and hf-download."""
    return storage.kind not in VOLUMELESS_STORAGE_KINDS


def uses_runai_streamer(spec: ModelDeploymentSpec) -> bool:
    """S3 always streams; a shared file system streams too unless the stack picked a load format itself (vLLM 0.33's
    runai_streamer reads local safetensors directories, with many reader threads per file)."""
    kind, load_format = spec.storage.kind, spec.engine.load_format
    if load_format.startswith("runai_streamer"):
        return True
    return load_format == "auto" and (kind == "s3-runai-streamer" or kind in RUNAI_STREAMER_KINDS)


def streamer_concurrency(spec: ModelDeploymentSpec) -> int | None:
    """RUNAI_STREAMER_CONCURRENCY when the pods stream: the stack's, else the shared file system's (None on S3, where
    vLLM's own default applies)."""
    if not uses_runai_streamer(spec):
        return None
    storage = spec.storage
    by_kind = RUNAI_STREAMER_KINDS[storage.kind][1] if storage.kind in RUNAI_STREAMER_KINDS else None
    return storage.runai_streamer_concurrency or by_kind


def shares_compile_cache(storage: StorageSpec) -> bool:
    """Whether pods keep vLLM's compile caches on the model volume: asked for, a volume exists, and it takes writes
    (a ReadOnlyMany claim cannot: those pods compile into their emptyDir)."""
    return (storage.shared_compile_cache and storage.kind not in VOLUMELESS_STORAGE_KINDS
            and storage.access_mode != "ReadOnlyMany")


def compile_cache_dir(spec: ModelDeploymentSpec, gpu_id: str) -> str | None:
    """Directory of the shared compile cache on the model volume: one per model, vLLM version, parallel layout and
    GPU (vLLM hashes its own config into torch_compile_cache too; this keeps Triton and Inductor caches, which it
    does not key by model, apart as well). None: pods keep their caches in their own emptyDir."""
    if not shares_compile_cache(spec.storage):
        return None
    engine = spec.engine
    return (f"{COMPILE_CACHE_DIR}/{spec.name}/vllm-{engine.vllm_version}/"
            f"tp{engine.tensor_parallel_size}-pp{engine.pipeline_parallel_size}/{gpu_id}")
