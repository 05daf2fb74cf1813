"""How long a vLLM pod takes to become ready, phase by phase, calibrated on published measurements.

From container start to /health answering 200, vLLM 0.33 goes through: Python and framework bootstrap (imports, API
server, engine-core and worker processes), for more than one GPU the distributed init (NCCL, Ray), the weight read
(this pod's share of the checkpoint at the storage's read speed), torch.compile (cold, or a load from a warm compile
cache), KV-cache profiling plus warm-up (grows with the model's layers) and CUDA graph capture (grows with layers x
the batch sizes captured). Before the container starts, the node may be provisioned and initialised and the image
pulled: those node phases are outside the startup probe's clock but inside KEDA's and Pulumi's.

Every figure below cites the measurement it rests on; docs/startup.md has the table, and tests/runtime/
test_startup.py holds the published starts the budget must cover. Probes, grace periods, autoscaler periods and
Pulumi's await are sized from this budget instead of guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

StorageKind = Literal["local-nvme", "fsx-lustre", "efs", "nfs", "s3-runai-streamer", "hf-download"]

# Sustained read throughput one pod gets with vLLM's default safetensors loader, decimal GB/s; conservative,
# overridable per stack (storage.read_gb_per_second).
STORAGE_READ_GB_PER_SECOND: dict[str, float] = {
    "local-nvme": 2.0,  # one NVMe SSD reads 2-7 GB/s; vllm#44881 measured 21.82 GiB in ~18 s (1.3 GB/s) on one disk
    "fsx-lustre": 1.0,  # FSx for Lustre per-client throughput on typical PERSISTENT_2 sizes, one reader thread
    "efs": 0.3,  # EFS elastic throughput per client with one stream is a few hundred MB/s
    "nfs": 0.3,  # a generic NFS share over 10 GbE, shared by readers
    "s3-runai-streamer": 1.0,  # runai_streamer's concurrent S3 range reads from one pod
    "hf-download": 0.05,  # downloading from the Hugging Face hub at every start (no shared store)
}
# Shared file systems serve many concurrent streams per client far better than one: with --load-format
# runai_streamer vLLM reads each file with RUNAI_STREAMER_CONCURRENCY threads. Read speed and thread count per kind
# (the per-client ceilings: FSx for Lustre scales with client network, EFS elastic allows ~1.5 GB/s per client with
# parallel streams, plain NFS is bound by its one TCP connection unless nconnect is set, so it gains little).
RUNAI_STREAMER_KINDS: dict[str, tuple[float, int]] = {
    "fsx-lustre": (2.0, 32),
    "efs": (0.6, 16),
    "nfs": (0.4, 8),
}

# Imports, API server, engine-core and worker process start, config and tokenizer, up to the weight read. Published:
# 74 s + 21 s pre-load init (kaito#2325, vLLM 0.25.1, A100), ~16 s (vllm#44881), ~19 s (vllm#15225, 0.8.2); the
# slowest is taken whole.
BOOTSTRAP_SECONDS = 95
# NCCL communicators (and the Ray group of a LeaderWorkerSet) once a replica has more than one GPU; ~30 s measured
# for TP=2 on PCIe (mitchross/talos-argocd-proxmox#1848).
DISTRIBUTED_INIT_SECONDS = 30
# torch.compile on an empty cache: 43 s (vllm#44881, 35B MoE), 22.6 s (ai-dynamo/dynamo#10695); vLLM's own RFC
# (vllm#34956) puts cold compiles at 10 s - 1 min; 90 s leaves room for larger graphs.
COMPILE_COLD_SECONDS = 90
# torch.compile loading a warm cache (Dynamo transform + artifact load): 5 s (vllm#44881), 7.5 s (vllm#20264),
# 9.2 s (vllm#16848, Llama-3-8B), 9.6 s and 18.2 s (noonghunna/club-3090#142/#178, TP=2).
COMPILE_WARM_SECONDS = 20
# Memory profiling run and warm-up: ~9.5 s for 28 layers (vllm#20264: 34 s engine init - 7.5 s compile - 17 s
# graphs), 57 s (club-3090#142); a fixed part plus a per-layer part, so 28 layers -> 58 s, 64 layers -> 94 s.
PROFILE_SECONDS = 30
PROFILE_SECONDS_PER_LAYER = 1.0
# CUDA graph capture, per graph per layer: 17 s for 28 layers x 67 sizes (vllm#20264, piecewise graphs only) is
# 0.0091 s; rounded up.
CAPTURE_SECONDS_PER_GRAPH_LAYER = 0.01
# vLLM 0.33's default cudagraph_mode FULL_AND_PIECEWISE captures a piecewise and a full graph per decode size.
GRAPH_MODES_CAPTURED = 2
# vLLM 0.33's default largest capture size is min(2 x max_num_seqs, 512), 1024 on compute-capability-10 GPUs.
DEFAULT_MAX_CAPTURE_SIZE = 512
CAPABILITY_10_GPU_IDS = frozenset({"b200"})
CAPABILITY_10_MAX_CAPTURE_SIZE = 1024
# When the model is unknown to the caller (a policy over foreign YAML): a large dense model, vLLM's default batch.
FALLBACK_LAYERS = 80
FALLBACK_MAX_NUM_SEQS = 256
# Slack on top of the arithmetic: storage is shared, compile and profiling times vary by GPU and kernel JIT.
SAFETY_FACTOR = 1.5

# ---- before the container starts (outside the startup probe, inside KEDA's reaction and Pulumi's await) ---------
# A GPU node created on demand (cluster autoscaler or Karpenter): 284 s measured on AKS (kaito#2325).
NODE_PROVISIONING_SECONDS = 284
# GPU driver, device plugin and GPU feature discovery until the GPUs are allocatable: 126 s (kaito#2325).
NODE_INIT_SECONDS = 126
# Compressed size of vllm/vllm-openai for the pinned release (~20 GB unpacked, runtime/planning/nodes.py); an estimate.
VLLM_IMAGE_COMPRESSED_GB = 10.0
# Pull and unpack: kaito#2325 pulled a 5.60 GB image in 101 s, 0.055 GB/s.
IMAGE_PULL_GB_PER_SECOND = 0.055


def capture_sizes(max_num_seqs: int, gpu_id: str | None = None) -> list[int]:
    """vLLM 0.33's default cudagraph capture sizes: 1, 2, 4, then steps of 8 below 256 and of 16 above, up to
    min(2 x max_num_seqs, 512) (1024 on compute capability 10)."""
    limit = CAPABILITY_10_MAX_CAPTURE_SIZE if gpu_id in CAPABILITY_10_GPU_IDS else DEFAULT_MAX_CAPTURE_SIZE
    largest = min(2 * max_num_seqs, limit)
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, largest + 1, 16))
    return [size for size in sizes if size <= largest]


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    basis: str


@dataclass(frozen=True)
class StartupBudget:
    """The phases from container start to ready, cold (compile cache empty) and warm, and the node phases before."""

    weight_bytes_read_per_pod: int
    read_gb_per_second: float
    load_seconds: float
    safety_factor: float
    phases: tuple[Phase, ...]
    """From container start, with the compile phase as this budget counts it (cold unless declared warm)."""
    compile_cold_seconds: float
    compile_warm_seconds: float
    compile_cache_warm: bool
    node_phases: tuple[Phase, ...]

    @property
    def engine_init_seconds(self) -> int:
        """Everything but bootstrap and the weight read (compile, profiling, graphs, distributed init)."""
        return math.ceil(sum(p.seconds for p in self.phases if p.name not in ("bootstrap", "weight read")))

    @property
    def total_seconds(self) -> int:
        """The startup budget: what the startup probe, the rollout and the autoscaler wait for."""
        return math.ceil(sum(phase.seconds for phase in self.phases) * self.safety_factor)

    def _with_compile(self, seconds: float) -> int:
        other = sum(phase.seconds for phase in self.phases if phase.name != "torch.compile")
        return math.ceil((other + seconds) * self.safety_factor)

    @property
    def cold_total_seconds(self) -> int:
        return self._with_compile(self.compile_cold_seconds)

    @property
    def warm_total_seconds(self) -> int:
        return self._with_compile(self.compile_warm_seconds)

    @property
    def node_seconds(self) -> int:
        """Node provisioning, node init and image pull: before the container starts, when no node is free."""
        return math.ceil(sum(phase.seconds for phase in self.node_phases))


def startup_budget(
    checkpoint_bytes: int,
    storage: StorageKind,
    *,
    pods_per_replica: int = 1,
    read_gb_per_second: float | None = None,
    num_hidden_layers: int = FALLBACK_LAYERS,
    max_num_seqs: int = FALLBACK_MAX_NUM_SEQS,
    gpus_per_replica: int = 1,
    gpu_id: str | None = None,
    runai_streamer: bool = False,
    compile_cache_warm: bool = False,
    enforce_eager: bool = False,
    nodes_provisioned: bool = True,
) -> StartupBudget:
    """Seconds from container start to /health answering 200, by phase.

    In a LeaderWorkerSet each pod loads only its own shards, so pods read ``checkpoint / pods_per_replica``; all
    pods of a replica compile, profile and capture side by side, so those phases count once. ``compile_cache_warm``
    is a declaration (a first pod has filled the shared compile cache): it never comes from a guess.
    ``nodes_provisioned`` False: the nodes exist already (stated, not made by the stack or an autoscaler), so only the
    image pull comes before the container starts.
    """
    bandwidth = _read_gb_per_second(storage, read_gb_per_second, runai_streamer)
    per_pod = math.ceil(checkpoint_bytes / pods_per_replica)
    load = per_pod / (bandwidth * 1e9)
    graphs = 0 if enforce_eager else len(capture_sizes(max_num_seqs, gpu_id)) * GRAPH_MODES_CAPTURED
    compile_seconds = 0.0 if enforce_eager else float(COMPILE_WARM_SECONDS if compile_cache_warm
                                                      else COMPILE_COLD_SECONDS)
    phases = [Phase("bootstrap", BOOTSTRAP_SECONDS, "imports, API server, engine and worker processes")]
    if gpus_per_replica > 1:
        phases.append(Phase("distributed init", DISTRIBUTED_INIT_SECONDS, f"NCCL across {gpus_per_replica} GPUs"))
    phases += [
        Phase("weight read", load, f"{per_pod / 1e9:.1f} GB per pod from {storage} at {bandwidth:g} GB/s"
              + (" (runai_streamer)" if runai_streamer else "")),
        Phase("torch.compile", compile_seconds,
              "enforce_eager" if enforce_eager else ("warm cache (declared)" if compile_cache_warm else "cold cache")),
        Phase("KV profiling + warm-up", PROFILE_SECONDS + PROFILE_SECONDS_PER_LAYER * num_hidden_layers,
              f"{num_hidden_layers} layers"),
        Phase("CUDA graph capture", CAPTURE_SECONDS_PER_GRAPH_LAYER * graphs * num_hidden_layers,
              f"{graphs} graphs x {num_hidden_layers} layers"),
    ]
    return StartupBudget(
        weight_bytes_read_per_pod=per_pod, read_gb_per_second=bandwidth, load_seconds=load,
        safety_factor=SAFETY_FACTOR, phases=tuple(phases),
        compile_cold_seconds=0.0 if enforce_eager else COMPILE_COLD_SECONDS,
        compile_warm_seconds=0.0 if enforce_eager else COMPILE_WARM_SECONDS,
        compile_cache_warm=compile_cache_warm, node_phases=_node_phases(nodes_provisioned),
    )


def _read_gb_per_second(storage: StorageKind, measured: float | None, runai_streamer: bool) -> float:
    """The read speed of one pod: the stack's measurement, else the streamer's or the default loader's by kind."""
    if measured is not None:
        return measured
    if runai_streamer and storage in RUNAI_STREAMER_KINDS:
        return RUNAI_STREAMER_KINDS[storage][0]
    return STORAGE_READ_GB_PER_SECOND[storage]


def _node_phases(nodes_provisioned: bool) -> tuple[Phase, ...]:
    """Before the container starts: a new node and its GPU setup (unless the nodes exist), then the image pull."""
    pull = VLLM_IMAGE_COMPRESSED_GB / IMAGE_PULL_GB_PER_SECOND
    node_phases: tuple[Phase, ...] = (
        Phase("node provisioning", NODE_PROVISIONING_SECONDS, "a new GPU node (kaito#2325)"),
        Phase("node init", NODE_INIT_SECONDS, "driver, device plugin, GPU discovery (kaito#2325)"),
    ) if nodes_provisioned else ()
    return node_phases + (
        Phase("image pull", pull, f"~{VLLM_IMAGE_COMPRESSED_GB:g} GB vLLM image at {IMAGE_PULL_GB_PER_SECOND} GB/s"),
    )


def startup_budget_seconds(checkpoint_bytes: int, storage: StorageKind, **settings: object) -> int:
    """The total startup budget in seconds (stable name for callers that need only the number)."""
    return startup_budget(checkpoint_bytes, storage, **settings).total_seconds  # type: ignore[arg-type]
