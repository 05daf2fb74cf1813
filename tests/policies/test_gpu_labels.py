"""GPU identity from every common placement label (policies.gpu_labels): one table, nodeSelector or required affinity."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.policies.gpu_labels import gpu_pins, pinned_gpu
from vllm_pulumi.runtime.vocabulary import (
    AUTO_MODE_GPU_NAME_LABEL,
    GKE_ACCELERATOR_LABEL,
    GPU_PRODUCT_LABEL,
    INSTANCE_TYPE_LABEL,
    KARPENTER_GPU_NAME_LABEL,
)


def _affinity(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}]}}}}


@pytest.mark.parametrize(("label", "value", "gpu_id"), [
    (GPU_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3", "h100-sxm"),
    (GPU_PRODUCT_LABEL, "NVIDIA-A100-SXM4-80GB-SHARED", "a100-80gb"),
    (GKE_ACCELERATOR_LABEL, "nvidia-a100-80gb", "a100-80gb"),
    (GKE_ACCELERATOR_LABEL, "nvidia-tesla-a100", "a100-40gb"),
    (GKE_ACCELERATOR_LABEL, "nvidia-h100-80gb", "h100-sxm"),
    (GKE_ACCELERATOR_LABEL, "nvidia-h100-mega-80gb", "h100-sxm"),
    (GKE_ACCELERATOR_LABEL, "nvidia-h200-141gb", "h200"),
    (GKE_ACCELERATOR_LABEL, "nvidia-l4", "l4"),
    (KARPENTER_GPU_NAME_LABEL, "a10g", "a10g"),
    (KARPENTER_GPU_NAME_LABEL, "l40s", "l40s"),
    (KARPENTER_GPU_NAME_LABEL, "a100", "a100-40gb"),
    (AUTO_MODE_GPU_NAME_LABEL, "h100", "h100-sxm"),
    (AUTO_MODE_GPU_NAME_LABEL, "l4", "l4"),
    (INSTANCE_TYPE_LABEL, "p5.48xlarge", "h100-sxm"),
    (INSTANCE_TYPE_LABEL, "g6e.12xlarge", "l40s"),
    (INSTANCE_TYPE_LABEL, "p4de.24xlarge", "a100-80gb"),
])
def test_each_label_in_a_node_selector_names_the_catalog_gpu(label: str, value: str, gpu_id: str) -> None:
    gpu, problem = pinned_gpu(gpu_pins({"nodeSelector": {label: value}}))
    assert gpu is not None and gpu.id == gpu_id, problem


def test_affinity_values_that_all_mean_one_gpu_resolve_to_it() -> None:
    gpu, _ = pinned_gpu(gpu_pins(_affinity(INSTANCE_TYPE_LABEL, "In", ["g5.xlarge", "g5.2xlarge", "g5.12xlarge"])))
    assert gpu is not None and gpu.id == "a10g"


def test_affinity_allowing_two_gpus_takes_the_smaller() -> None:
    gpu, _ = pinned_gpu(gpu_pins(_affinity(GKE_ACCELERATOR_LABEL, "In", ["nvidia-h100-80gb", "nvidia-l4"])))
    assert gpu is not None and gpu.id == "l4"


def test_a_known_gpu_outside_the_catalog_pins_the_gpu_but_resolves_to_none() -> None:
    pins = gpu_pins({"nodeSelector": {GKE_ACCELERATOR_LABEL: "nvidia-tesla-t4"}})
    assert pins and pins[0].known_value
    gpu, problem = pinned_gpu(pins)
    assert gpu is None and "not in the GPU catalog" in problem and "nvidia-tesla-t4" in problem


def test_one_catalog_gpu_beside_one_outside_is_unknown() -> None:
    gpu, problem = pinned_gpu(gpu_pins(_affinity(KARPENTER_GPU_NAME_LABEL, "In", ["l4", "t4"])))
    assert gpu is None and "outside the catalog" in problem


@pytest.mark.parametrize(("spec", "reason"), [
    ({"nodeSelector": {INSTANCE_TYPE_LABEL: "m5.large"}}, "a CPU instance type is no GPU pin"),
    (_affinity(GKE_ACCELERATOR_LABEL, "Exists", []), "Exists admits any accelerator"),
    (_affinity(GKE_ACCELERATOR_LABEL, "NotIn", ["nvidia-l4"]), "NotIn names what is excluded"),
    ({"nodeSelector": {"kubernetes.io/os": "linux"}}, "an unrelated label"),
    ({}, "nothing"),
])
def test_selections_that_do_not_pin_a_gpu(spec: dict[str, Any], reason: str) -> None:
    assert gpu_pins(spec) == [], reason


def test_gpu_instance_families_outside_the_catalog_still_pin_a_gpu() -> None:
    pins = gpu_pins({"nodeSelector": {INSTANCE_TYPE_LABEL: "g4dn.xlarge"}})
    assert len(pins) == 1 and pins[0].gpu is None and pins[0].known_value
