"""How long a vLLM pod takes to become ready, from the weight bytes and the storage they are read from.

Probes, grace periods and autoscaler cooldowns are sized from this budget instead of guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

StorageKind = Literal["local-nvme", "fsx-lustre", "efs", "nfs", "s3-runai-streamer", "hf-download"]

# Sustained read throughput one pod gets, decimal GB/s; conservative figures, overridable per stack.
STORAGE_READ_GB_PER_SECOND: dict[str, float] = {
    "local-nvme": 2.0,  # one NVMe SSD reads 2-7 GB/s; page cache and safetensors mmap rarely reach the peak
    "fsx-lustre": 1.0,  # FSx for Lustre per-client throughput on typical PERSISTENT_2 sizes
    "efs": 0.3,  # EFS elastic throughput per client is a few hundred MB/s
    "nfs": 0.3,  # a generic NFS share over 10 GbE, shared by readers
    "s3-runai-streamer": 1.0,  # runai_streamer's concurrent S3 range reads from one pod
    "hf-download": 0.05,  # downloading from the Hugging Face hub at every start (no shared store)
}
# Profiling, CUDA graph capture and torch.compile of vLLM 0.33 on a cold compile cache.
ENGINE_INIT_SECONDS = 120
# Slack on top of the arithmetic: storage is shared and throughput varies.
SAFETY_FACTOR = 1.5


@dataclass(frozen=True)
class StartupBudget:
    weight_bytes_read_per_pod: int
    read_gb_per_second: float
    load_seconds: float
    engine_init_seconds: int
    safety_factor: float

    @property
    def total_seconds(self) -> int:
        return math.ceil((self.load_seconds + self.engine_init_seconds) * self.safety_factor)


def startup_budget(
    checkpoint_bytes: int,
    storage: StorageKind,
    *,
    pods_per_replica: int = 1,
    read_gb_per_second: float | None = None,
    engine_init_seconds: int = ENGINE_INIT_SECONDS,
) -> StartupBudget:
    """Seconds from container start to /health answering 200: read this pod's share of the weights, then init.

    In a LeaderWorkerSet each pod loads only its own shards, so pods read ``checkpoint / pods_per_replica``.
    """
    bandwidth = read_gb_per_second or STORAGE_READ_GB_PER_SECOND[storage]
    per_pod = math.ceil(checkpoint_bytes / pods_per_replica)
    return StartupBudget(per_pod, bandwidth, per_pod / (bandwidth * 1e9), engine_init_seconds, SAFETY_FACTOR)
