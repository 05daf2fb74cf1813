"""EC2 GPU instance facts: the GPU and its count, vCPUs, memory, local NVMe and the EKS pod limit.

One table, read by the GPU facts (which instances carry a GPU), the node shapes the planner places pods on, and the
EKS node group builder. Numbers are as EC2's DescribeInstanceTypes reports them: memory in GiB, local NVMe instance
storage in decimal GB (total of all disks; the product pages round p5's 8 x 3800 GB to "8 x 3.84 TB"), and the
pod limit the EKS AMIs give the kubelet without prefix delegation (amazon-eks-ami eni-max-pods.txt: ENIs x (IPv4
addresses per ENI - 1) + 2, counted on the first network card only).
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_pulumi.runtime.errors import UnknownIdError, closest


@dataclass(frozen=True)
class InstanceFacts:
    instance_type: str
    gpu_id: str
    """Catalog id of the GPU it carries (runtime/facts/gpus.py)."""
    gpus: int
    vcpus: int
    memory_gib: int
    local_nvme_gb: int
    """Instance-store NVMe, decimal GB over all disks; 0 when the instance has none."""
    eks_max_pods: int
    """Pods the EKS AMI's kubelet admits (and reserves memory for)."""
    efa_interfaces: int = 0
    """EFA-capable network cards (EC2's maximum EFA interfaces); NCCL spreads traffic over all of them. 0: no EFA
    in this table (the instance may still take one interface; the node group then gives it one)."""


def _family(gpu_id: str, prefix: str, rows: dict[str, tuple[int, int, int, int, int]]) -> list[InstanceFacts]:
    """rows: size -> (GPUs, vCPUs, memory GiB, local NVMe GB, EKS max pods)."""
    return [InstanceFacts(f"{prefix}.{size}", gpu_id, *row) for size, row in rows.items()]


INSTANCES: tuple[InstanceFacts, ...] = (
    *_family("a10g", "g5", {
        "xlarge": (1, 4, 16, 250, 58), "2xlarge": (1, 8, 32, 450, 58), "4xlarge": (1, 16, 64, 600, 234),
        "8xlarge": (1, 32, 128, 900, 234), "16xlarge": (1, 64, 256, 1900, 234),
        "12xlarge": (4, 48, 192, 3800, 737), "24xlarge": (4, 96, 384, 3800, 737), "48xlarge": (8, 192, 768, 7600, 345),
    }),
    *_family("l4", "g6", {
        "xlarge": (1, 4, 16, 250, 58), "2xlarge": (1, 8, 32, 450, 58), "4xlarge": (1, 16, 64, 600, 234),
        "8xlarge": (1, 32, 128, 900, 234), "16xlarge": (1, 64, 256, 1880, 737),
        "12xlarge": (4, 48, 192, 3760, 234), "24xlarge": (4, 96, 384, 3760, 737), "48xlarge": (8, 192, 768, 7520, 737),
    }),
    *_family("l40s", "g6e", {
        "xlarge": (1, 4, 32, 250, 58), "2xlarge": (1, 8, 64, 450, 58), "4xlarge": (1, 16, 128, 600, 234),
        "8xlarge": (1, 32, 256, 900, 234), "16xlarge": (1, 64, 512, 1900, 737),
        "12xlarge": (4, 48, 384, 3800, 292), "24xlarge": (4, 96, 768, 3800, 492),
        "48xlarge": (8, 192, 1536, 7600, 492),
    }),
    InstanceFacts("p4d.24xlarge", "a100-40gb", 8, 96, 1152, 8000, 737, efa_interfaces=4),
    InstanceFacts("p4de.24xlarge", "a100-80gb", 8, 96, 1152, 8000, 737, efa_interfaces=4),
    InstanceFacts("p5.4xlarge", "h100-sxm", 1, 16, 256, 3800, 118),
    InstanceFacts("p5.48xlarge", "h100-sxm", 8, 192, 2048, 30400, 100, efa_interfaces=32),
    InstanceFacts("p5e.48xlarge", "h200", 8, 192, 2048, 30400, 100, efa_interfaces=32),
    InstanceFacts("p5en.48xlarge", "h200", 8, 192, 2048, 30400, 198, efa_interfaces=16),
    InstanceFacts("p6-b200.48xlarge", "b200", 8, 192, 2048, 30400, 198, efa_interfaces=8),
)

_BY_TYPE = {instance.instance_type: instance for instance in INSTANCES}


def instance_types() -> list[str]:
    return sorted(_BY_TYPE)


def find_instance(instance_type: str) -> InstanceFacts:
    instance = _BY_TYPE.get(instance_type)
    if instance is None:
        raise UnknownIdError("instance type", instance_type, closest(instance_type, list(_BY_TYPE)),
                             valid=instance_types())
    return instance


def efa_interfaces_for(instance_type: str) -> int:
    """EFA interfaces a node group with EFA gives this instance type: all its EFA cards, or one when the table
    knows none."""
    instance = _BY_TYPE.get(instance_type)
    return (instance.efa_interfaces if instance is not None else 0) or 1


def instances_with(gpu_id: str) -> list[InstanceFacts]:
    """Every known instance carrying this GPU, in table order."""
    return [instance for instance in INSTANCES if instance.gpu_id == gpu_id]
