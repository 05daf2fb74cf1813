"""EC2 instance facts: every instance a GPU lists has its vCPUs, memory, local NVMe and pod limit, once."""

from __future__ import annotations

import pytest

from vllm_pulumi.runtime.facts.gpus import GPUS, find_gpu, gpu_for_instance_type
from vllm_pulumi.runtime.facts.instances import INSTANCES, InstanceFacts, find_instance


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: i.instance_type)
def test_every_instance_has_its_node_facts(instance: InstanceFacts) -> None:
    assert find_gpu(instance.gpu_id).id == instance.gpu_id
    assert instance.gpus >= 1 and instance.vcpus >= 4 and instance.memory_gib >= 16
    assert instance.local_nvme_gb >= 0 and instance.eks_max_pods >= 8
    # Memory and vCPUs per GPU as AWS sizes them: at least 4 vCPUs and 16 GiB for each GPU.
    assert instance.vcpus >= 4 * instance.gpus and instance.memory_gib >= 16 * instance.gpus


@pytest.mark.parametrize(("instance_type", "gpus", "vcpus", "memory_gib", "local_nvme_gb"), [
    ("p5.48xlarge", 8, 192, 2048, 8 * 3800),
    ("p4d.24xlarge", 8, 96, 1152, 8 * 1000),
    ("g5.xlarge", 1, 4, 16, 250),
    ("g5.48xlarge", 8, 192, 768, 2 * 3800),
    ("g6e.xlarge", 1, 4, 32, 250),
    ("g6.12xlarge", 4, 48, 192, 4 * 940),
    ("p5.4xlarge", 1, 16, 256, 3800),
])
def test_published_instance_facts(instance_type: str, gpus: int, vcpus: int, memory_gib: int,
                                  local_nvme_gb: int) -> None:
    instance = find_instance(instance_type)
    assert (instance.gpus, instance.vcpus, instance.memory_gib, instance.local_nvme_gb) == (
        gpus, vcpus, memory_gib, local_nvme_gb)


def test_gpu_facts_list_exactly_the_instances_of_the_one_table() -> None:
    listed = {name: (gpu.id, count) for gpu in GPUS for name, count in gpu.aws_instance_types.items()}
    assert listed == {i.instance_type: (i.gpu_id, i.gpus) for i in INSTANCES}
    assert gpu_for_instance_type("p5.48xlarge")[0].id == "h100-sxm"
