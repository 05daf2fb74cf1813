"""GPU facts: memory, HBM bandwidth, interconnect, the GFD product label, and (from runtime/facts/instances.py) the AWS
instances that carry each GPU.

Memory is what the CUDA driver reports as total device memory (``torch.cuda.mem_get_info()[1]``,
``nvidia-smi`` "MiB" column), because that is the number vLLM multiplies by ``gpu_memory_utilization``.
Bandwidth is the vendor's peak HBM/GDDR figure in decimal GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vllm_pulumi.runtime.errors import UnknownIdError, closest
from vllm_pulumi.runtime.facts.instances import find_instance, instances_with

MIB = 1024**2
GIB = 1024**3

Interconnect = Literal["nvlink", "pcie"]


@dataclass(frozen=True)
class GpuFacts:
    id: str
    """Short catalog id used in stack files, e.g. ``h100-sxm``."""
    product_label: str
    """GPU Feature Discovery ``nvidia.com/gpu.product`` value (sanitised product name)."""
    memory_mib: int
    """Total device memory as the driver reports it."""
    hbm_bandwidth_gb_per_second: float
    """Peak device-memory bandwidth; bounds the decode step time."""
    interconnect: Interconnect
    """How GPUs of one node talk for tensor-parallel all-reduce."""
    interconnect_gb_per_second: float
    """Per-GPU bandwidth of that interconnect (NVLink total, or PCIe x16 one direction)."""
    aliases: tuple[str, ...] = ()

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def aws_instance_types(self) -> dict[str, int]:
        """EC2 instance type -> GPUs of this kind it carries (runtime/facts/instances.py is the one table)."""
        return {instance.instance_type: instance.gpus for instance in instances_with(self.id)}

    @property
    def aws_gpu_name(self) -> str | None:
        """The GPU's name in EC2 DescribeInstanceTypes, lower-kebab-cased as Karpenter's and Auto Mode's
        ``instance-gpu-name`` node labels carry it; None when no EC2 instance carries the GPU."""
        return AWS_GPU_NAMES.get(self.id)

    @property
    def max_gpus_per_node(self) -> int:
        """Largest GPU count of one known node carrying this GPU (8 when no instance is listed: HGX/PCIe servers)."""
        return max(self.aws_instance_types.values(), default=8)


GPUS: tuple[GpuFacts, ...] = (
    GpuFacts("rtx-4090", "NVIDIA-GeForce-RTX-4090", 24564, 1008, "pcie", 32, aliases=("4090",)),
    GpuFacts("a10g", "NVIDIA-A10G", 23028, 600, "pcie", 32),
    GpuFacts("l4", "NVIDIA-L4", 23034, 300, "pcie", 32),
    GpuFacts("l40s", "NVIDIA-L40S", 46068, 864, "pcie", 32),
    GpuFacts("rtx-6000-ada", "NVIDIA-RTX-6000-Ada-Generation", 49140, 960, "pcie", 32),
    GpuFacts("a100-40gb", "NVIDIA-A100-SXM4-40GB", 40960, 1555, "nvlink", 600, ("a100",)),
    GpuFacts("a100-80gb", "NVIDIA-A100-SXM4-80GB", 81920, 2039, "nvlink", 600),
    GpuFacts("h100-pcie", "NVIDIA-H100-PCIe", 81559, 2000, "pcie", 64),
    GpuFacts("h100-sxm", "NVIDIA-H100-80GB-HBM3", 81559, 3350, "nvlink", 900, ("h100",)),
    GpuFacts("h200", "NVIDIA-H200", 143771, 4800, "nvlink", 900),
    GpuFacts("b200", "NVIDIA-B200", 183359, 8000, "nvlink", 1800),
)

# EC2's GpuInfo name of each GPU an instance carries (both A100 sizes are "A100"; the label is lower-case).
AWS_GPU_NAMES: dict[str, str] = {
    "a10g": "a10g", "l4": "l4", "l40s": "l40s", "a100-40gb": "a100", "a100-80gb": "a100", "h100-sxm": "h100",
    "h200": "h200", "b200": "b200",
}

_BY_KEY: dict[str, GpuFacts] = {}
for _gpu in GPUS:
    for _key in (_gpu.id, _gpu.product_label, *_gpu.aliases):
        _BY_KEY[_key.lower()] = _gpu


def gpu_ids() -> list[str]:
    return [gpu.id for gpu in GPUS]


def find_gpu(key: str) -> GpuFacts:
    """Look a GPU up by catalog id, alias, or GFD product label (case-insensitive; ``-SHARED`` suffix ignored)."""
    normalised = key.strip().lower().removesuffix("-shared")
    gpu = _BY_KEY.get(normalised)
    if gpu is None:
        raise UnknownIdError("gpu", key, closest(key, list(_BY_KEY)), valid=gpu_ids())
    return gpu


def gpu_for_instance_type(instance_type: str) -> tuple[GpuFacts, int]:
    """The GPU an EC2 instance type carries and how many."""
    instance = find_instance(instance_type)
    return find_gpu(instance.gpu_id), instance.gpus
