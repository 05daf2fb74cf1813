"""Which GPU a pod is pinned to, from every common node label that names one: GPU Feature Discovery's product label,
GKE's accelerator label, Karpenter's and EKS Auto Mode's GPU-name labels, and the well-known instance-type label
(through runtime.facts.instances). One table maps each label value to a GPU of runtime.facts.gpus.

A value the table knows but whose GPU is not in the catalog (a T4, a V100) still pins the GPU: the placement rule is
satisfied, and the capacity rules say the GPU is outside the catalog instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import AWS_GPU_NAMES, GpuFacts, find_gpu, gpu_for_instance_type
from vllm_pulumi.runtime.vocabulary import (
    AUTO_MODE_GPU_NAME_LABEL,
    GKE_ACCELERATOR_LABEL,
    GPU_PRODUCT_LABEL,
    INSTANCE_TYPE_LABEL,
    KARPENTER_GPU_NAME_LABEL,
)

# GKE's accelerator names (GKE node-pool `--accelerator type=`, also the Vertex AI AcceleratorType enum) -> catalog
# GPU id; None: a GPU GKE offers that the catalog does not describe. nvidia-tesla-a100 is the 40 GB part.
_GKE: dict[str, str | None] = {
    "nvidia-tesla-a100": "a100-40gb", "nvidia-a100-80gb": "a100-80gb", "nvidia-h100-80gb": "h100-sxm",
    "nvidia-h100-mega-80gb": "h100-sxm", "nvidia-h200-141gb": "h200", "nvidia-b200": "b200", "nvidia-l4": "l4",
    "nvidia-tesla-t4": None, "nvidia-tesla-v100": None, "nvidia-tesla-p100": None, "nvidia-tesla-p4": None,
    "nvidia-tesla-k80": None, "nvidia-gb200": None, "nvidia-rtx-pro-6000": None,
}
# Karpenter's (and EKS Auto Mode's, which uses the same names) lower-case GPU names from EC2 DescribeInstanceTypes:
# the catalog's (runtime.facts.gpus.AWS_GPU_NAMES, the names the NodePool builder requires) plus EC2 GPUs outside it.
# "a100" covers p4d (40 GB) and p4de (80 GB): the smaller one decides, as for several allowed products.
_AWS_GPU_NAME: dict[str, str | None] = {
    **{name: None for name in ("t4", "t4g", "v100", "k80", "m60", "b300")},
    **{name: min((gpu for gpu, n in AWS_GPU_NAMES.items() if n == name), key=lambda g: find_gpu(g).memory_mib)
       for name in set(AWS_GPU_NAMES.values())},
}

# EC2 GPU instance families runtime.facts.instances does not describe: pinning one still pins a (non-catalog) GPU.
_OTHER_GPU_INSTANCE_FAMILIES = ("g4dn.", "g4ad.", "g5g.", "p3.", "p3dn.", "p2.", "g3.", "g3s.", "g6f.", "gr6.",
                                "p6-b300.")

LABELS: tuple[str, ...] = (GPU_PRODUCT_LABEL, GKE_ACCELERATOR_LABEL, KARPENTER_GPU_NAME_LABEL,
                           AUTO_MODE_GPU_NAME_LABEL, INSTANCE_TYPE_LABEL)
"""Every node label that pins the GPU model, in the order messages name them."""


@dataclass(frozen=True)
class GpuPin:
    """One label value a pod selects, and the catalog GPU it means (None when the catalog has no such GPU)."""

    label: str
    value: str
    gpu: GpuFacts | None
    known_value: bool
    """The label's vocabulary has this value (False: a typo or a GPU newer than this table)."""

    def describe(self) -> str:
        return f"{self.label}={self.value}"


@lru_cache(maxsize=512)
def resolve(label: str, value: str) -> GpuPin:
    """What one label value says about the GPU."""
    key = value.strip().lower()
    if label == GPU_PRODUCT_LABEL:
        try:
            return GpuPin(label, value, find_gpu(value), True)
        except PlanningError:
            return GpuPin(label, value, None, False)
    if label == INSTANCE_TYPE_LABEL:
        try:
            return GpuPin(label, value, gpu_for_instance_type(key)[0], True)
        except PlanningError:
            return GpuPin(label, value, None, key.startswith(_OTHER_GPU_INSTANCE_FAMILIES))
    table = _GKE if label == GKE_ACCELERATOR_LABEL else _AWS_GPU_NAME
    if key not in table:
        return GpuPin(label, value, None, False)
    gpu_id = table[key]
    return GpuPin(label, value, find_gpu(gpu_id) if gpu_id else None, True)


def required_node_terms(spec: Mapping[str, Any]) -> list[Any]:
    """The nodeSelectorTerms of a pod spec's required node affinity (ORed by the scheduler); [] without any."""
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
                if isinstance(node_affinity, dict) else None)
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return terms if isinstance(terms, list) else []


def gpu_pins(spec: Mapping[str, Any]) -> list[GpuPin]:
    """Every GPU-naming label value a pod spec requires, by nodeSelector or required node affinity (``In``).

    The instance-type label counts only when it names an instance the catalog knows to carry a GPU, since CPU
    instance types are pinned for other reasons."""
    pins: list[GpuPin] = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        for label in LABELS:
            if selector.get(label):
                pins.append(resolve(label, str(selector[label])))
    for term in required_node_terms(spec):
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        for expression in expressions if isinstance(expressions, list) else []:
            if not isinstance(expression, dict) or expression.get("operator") != "In":
                continue
            key = expression.get("key")
            values = expression.get("values")
            if key in LABELS and isinstance(values, list):
                pins += [resolve(str(key), str(v)) for v in values]
    return [pin for pin in pins if pin.label != INSTANCE_TYPE_LABEL or pin.known_value]


def pinned_gpu(pins: list[GpuPin]) -> tuple[GpuFacts | None, str]:
    """The GPU the pins guarantee (the smallest when several are allowed) and, without one, why not."""
    known = [pin.gpu for pin in pins if pin.gpu is not None]
    if known and len(known) == len(pins):
        return min(known, key=lambda g: g.memory_mib), ""
    outside = [pin for pin in pins if pin.gpu is None]
    if known:
        return None, (f"the pod may also land on {', '.join(p.describe() for p in outside)}, a GPU outside the "
                      "catalog")
    if any(pin.known_value for pin in outside):
        return None, f"GPU {', '.join(p.describe() for p in outside)} is not in the GPU catalog"
    return None, f"{', '.join(p.describe() for p in outside)} is no GPU the label tables know"
