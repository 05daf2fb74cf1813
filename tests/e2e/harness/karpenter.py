"""Karpenter in the simulated cluster: Karpenter core with its KWOK cloud provider (``sigs.k8s.io/karpenter/kwok``,
built by scripts/toolchain.sh at KARPENTER_VERSION), run out of cluster against the simulated API server.

What runs and how (checked against the module's source at that version):
- Karpenter's provisioner, disruption (emptiness, drift, consolidation), NodeClaim lifecycle and termination
  controllers, unchanged. The KWOK provider's Create() makes a Node named after the NodeClaim with the label and
  annotation ``kwok.x-k8s.io/node=fake`` (what the harness's KWOK manages: it makes the Node Ready and runs the pods
  bound to it), the provider id ``kwok://<node>``, the NodeClaim's labels, the chosen offering's requirements as
  labels, the ``karpenter.sh/unregistered`` taint (Karpenter's registration removes it and applies the NodePool's
  taints), and the instance type's allocatable resources.
- Its instance types come from a JSON file (``INSTANCE_TYPES_FILE_PATH``) that :func:`instance_types` writes from
  the project's own EC2 facts (runtime/instances.py, runtime/gpus.py, runtime/nodes.py), never from a second copy.
- Out of cluster it has no ``--kubeconfig`` flag (controller-runtime reads ``KUBECONFIG``); leader election off
  (``DISABLE_LEADER_ELECTION``). Its metrics and health servers bind ``:<port>`` on every interface with no flag to
  choose the address: the harness gives them free ports, and the simulated cluster runs only in a network namespace
  whose sole interface is loopback (scripts/isolated.sh), so "every interface" is 127.0.0.1 there.
- The CRDs it watches (NodePool, NodeClaim, NodeOverlay, CapacityBuffer) and its KWOKNodeClass come from the same
  module (toolchain.sh ``build karpenter-kwok-crds``).
"""

from __future__ import annotations

import copy
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

from vllm_pulumi.runtime.facts.gpus import find_gpu
from vllm_pulumi.runtime.facts.instances import INSTANCES, InstanceFacts
from vllm_pulumi.runtime.planning.nodes import NODE_DISK_GIB, allocatable_ephemeral_storage_gib, reserved_cpu_millicores, reserved_memory_mib
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    CAPACITY_TYPE_LABEL,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    KARPENTER_AWS_LABEL_PREFIX,
    KARPENTER_GPU_COUNT_LABEL,
    KARPENTER_GPU_NAME_LABEL,
    KARPENTER_NODEPOOL_LABEL,
    OS_LABEL,
    ZONE_LABEL,
)

from tests.toolchain import BINARIES, CACHE
from .cluster import START_TIMEOUT_SECONDS, SimulatedCluster
from .control_plane import free_port

KARPENTER_BINARY = "karpenter-kwok"
KARPENTER_CRD_DIR = CACHE / "crds-karpenter-kwok"

NODEPOOL_API = "/apis/karpenter.sh/v1/nodepools"
NODECLAIM_API = "/apis/karpenter.sh/v1/nodeclaims"
KWOK_NODE_CLASS_API = "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses"
KWOK_NODE_CLASS_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass"}

# EC2 instance type names: category letters, an optional "-<n>tb" (high-memory types), the generation digits
# (the AWS provider's own pattern for instance-category and instance-generation).
_INSTANCE_TYPE_SCHEME = re.compile(r"(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\.")

# Simulation only (nothing here reaches AWS, and these are not AWS's figures): zones named like the KWOK provider's own
# instance types name theirs, and prices that order the types the way their cost does: 1 $/h per GPU per TB/s of the
# GPU's memory bandwidth plus 0.01 $/h per vCPU, spot at 40 % of on-demand. Karpenter launches the cheapest offering
# a NodePool allows, so the order, not the amount, is what the simulation needs.
SIMULATION_ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")
SIMULATION_SPOT_FRACTION = 0.4
CAPACITY_TYPES = ("spot", "on-demand")

# What the KWOK provider subtracts from an instance type's resources for every node (kwok/cloudprovider/helpers.go:
# kube-reserved 100m CPU and 10Mi memory; no eviction threshold).
KWOK_KUBE_RESERVED_CPU_MILLICORES = 100
KWOK_KUBE_RESERVED_MEMORY_MIB = 10


# The labels the AWS provider derives from DescribeInstanceTypes for every instance type (karpenter-provider-aws
# pkg/apis/v1/labels.go, pkg/providers/instancetype/types.go); NodePools and pods select on them. The KWOK provider
# knows only the upstream well-known labels, so the file carries these as requirements of every offering: KWOK's
# provider then treats them as well-known (schedulable) keys and puts the single-valued ones on the Node, as the AWS
# provider does. Only labels the project's facts determine exactly are carried (not instance-gpu-memory: EC2 reports
# a GPU's memory differently from the driver figure runtime/gpus.py holds).
def aws_instance_labels(instance: InstanceFacts) -> dict[str, str]:
    """The AWS provider's instance labels for ``instance``, as far as runtime/instances.py and runtime/gpus.py
    determine them."""
    family, _, size = instance.instance_type.partition(".")
    gpu_name = find_gpu(instance.gpu_id).aws_gpu_name
    assert gpu_name is not None, f"{instance.instance_type}: runtime.gpus has no EC2 name for {instance.gpu_id}"
    labels = {
        f"{KARPENTER_AWS_LABEL_PREFIX}instance-family": family,
        f"{KARPENTER_AWS_LABEL_PREFIX}instance-size": size,
        f"{KARPENTER_AWS_LABEL_PREFIX}instance-cpu": str(instance.vcpus),
        f"{KARPENTER_AWS_LABEL_PREFIX}instance-memory": str(instance.memory_gib * 1024),
        KARPENTER_GPU_NAME_LABEL: gpu_name,
        f"{KARPENTER_AWS_LABEL_PREFIX}instance-gpu-manufacturer": "nvidia",
        KARPENTER_GPU_COUNT_LABEL: str(instance.gpus),
    }
    scheme = _INSTANCE_TYPE_SCHEME.match(instance.instance_type)
    if scheme:
        labels[f"{KARPENTER_AWS_LABEL_PREFIX}instance-category"] = scheme.group(1)
        labels[f"{KARPENTER_AWS_LABEL_PREFIX}instance-generation"] = scheme.group(3)
    if instance.local_nvme_gb:
        labels[f"{KARPENTER_AWS_LABEL_PREFIX}instance-local-nvme"] = str(instance.local_nvme_gb)
    return labels


def simulation_price(instance: InstanceFacts, capacity_type: str) -> float:
    """A simulation price in $/h (see SIMULATION_ZONES): ordered like the instance types' real cost."""
    gpu = find_gpu(instance.gpu_id)
    on_demand = instance.gpus * gpu.hbm_bandwidth_gb_per_second / 1000 + 0.01 * instance.vcpus
    return round(on_demand * (SIMULATION_SPOT_FRACTION if capacity_type == "spot" else 1.0), 4)


def instance_type(instance: InstanceFacts, disk_gib: int = NODE_DISK_GIB) -> dict[str, Any]:
    """One entry of the KWOK provider's instance-types file (kwok/cloudprovider/helpers.go InstanceTypeOptions).

    Resources are chosen so that the Node Karpenter launches has exactly the allocatable resources the planner places
    pods on (runtime/nodes.py: capacity less the EKS AMI's kubelet reserve, as the AWS provider computes it): the KWOK
    provider subtracts only its fixed 100m/10Mi, so that is added back. Ephemeral storage is the root disk
    (``disk_gib``, the EC2NodeClass's block device) less the kubelet's reserve and eviction threshold.
    """
    labels = aws_instance_labels(instance)
    offerings = []
    for capacity_type in CAPACITY_TYPES:
        for zone in SIMULATION_ZONES:
            offerings.append({
                "Price": simulation_price(instance, capacity_type),
                "Available": True,
                "Requirements": [
                    {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type]},
                    {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
                    *({"key": key, "operator": "In", "values": [value]} for key, value in sorted(labels.items())),
                ],
            })
    cpu_millicores = instance.vcpus * 1000 - reserved_cpu_millicores(instance.vcpus)
    memory_mib = instance.memory_gib * 1024 - reserved_memory_mib(instance.eks_max_pods)
    return {
        "name": instance.instance_type,
        "offerings": offerings,
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {
            "cpu": f"{cpu_millicores + KWOK_KUBE_RESERVED_CPU_MILLICORES}m",
            "memory": f"{memory_mib + KWOK_KUBE_RESERVED_MEMORY_MIB}Mi",
            "ephemeral-storage": f"{allocatable_ephemeral_storage_gib(disk_gib)}Gi",
            "pods": str(instance.eks_max_pods),
            GPU_RESOURCE: str(instance.gpus),
        },
    }


def instance_types(disk_gib: int = NODE_DISK_GIB) -> list[dict[str, Any]]:
    """Every GPU instance type the project knows (runtime.instances.INSTANCES), in the KWOK provider's format."""
    return [instance_type(instance, disk_gib) for instance in INSTANCES]


def write_instance_types(path: Path, disk_gib: int = NODE_DISK_GIB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(instance_types(disk_gib), indent=1))
    return path


# ---- the test-only transform: a KWOKNodeClass in place of the EC2NodeClass ------------------------------------------
def with_kwok_node_class(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered objects with every EC2NodeClass replaced by a KWOKNodeClass of the same name and every NodePool's
    nodeClassRef pointed at it; nothing else changes. (An EC2NodeClass describes AMIs, subnets, security groups and
    an IAM role, which the KWOK provider has no use for; its node class only delays registration, here not at all.)"""
    result = []
    for obj in manifests:
        obj = copy.deepcopy(obj)
        if obj["kind"] == "EC2NodeClass":
            obj = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                   "metadata": {"name": obj["metadata"]["name"]}, "spec": {}}
        elif obj["kind"] == "NodePool":
            ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
            obj["spec"]["template"]["spec"]["nodeClassRef"] = {**KWOK_NODE_CLASS_REF, "name": ref["name"]}
        result.append(obj)
    return result


def with_consolidate_after(manifests: list[dict[str, Any]], seconds: int) -> list[dict[str, Any]]:
    """The objects with every NodePool's ``disruption.consolidateAfter`` set to ``seconds``: the one time compression a
    test may add (the stacks keep an empty GPU node for a whole startup budget, minutes); nothing else changes."""
    result = copy.deepcopy(manifests)
    for obj in result:
        if obj["kind"] == "NodePool":
            obj["spec"]["disruption"]["consolidateAfter"] = f"{seconds}s"
    return result


def root_disk_gib(manifests: list[dict[str, Any]], node_class: str) -> int:
    """The disk an EC2NodeClass gives its nodes' ephemeral storage, as the AWS provider picks it: the block device
    marked ``rootVolume``, else the AMI family's (Bottlerocket's data volume /dev/xvdb, AL2023's /dev/xvda);
    NODE_DISK_GIB when the class sets none."""
    for obj in manifests:
        if obj["kind"] == "EC2NodeClass" and obj["metadata"]["name"] == node_class:
            mappings = obj["spec"].get("blockDeviceMappings") or []
            aliases = [term.get("alias", "") for term in obj["spec"].get("amiSelectorTerms") or []]
            device = "/dev/xvdb" if any(alias.startswith("bottlerocket") for alias in aliases) else "/dev/xvda"
            chosen = [m for m in mappings if m.get("rootVolume")] or [m for m in mappings if m["deviceName"] == device]
            if chosen and (chosen[0].get("ebs") or {}).get("volumeSize"):
                return int(str(chosen[0]["ebs"]["volumeSize"]).removesuffix("Gi"))
    return NODE_DISK_GIB


# ---- running it ----------------------------------------------------------------------------------------------------
def karpenter_crd_files() -> list[Path]:
    if not (KARPENTER_CRD_DIR / "SOURCES.tsv").is_file():
        raise AssertionError(f"Karpenter's CRDs not found in {KARPENTER_CRD_DIR}: run "
                             "`scripts/toolchain.sh build karpenter-kwok-crds` (`make test` does)")
    return sorted(KARPENTER_CRD_DIR.glob("*.yaml"))


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def start_karpenter(cluster: SimulatedCluster, workdir: Path, disk_gib: int = NODE_DISK_GIB) -> Path:
    """Install Karpenter's CRDs and start the controller against ``cluster`` (it stops with the cluster's processes);
    returns the instance-types file it reads."""
    binary = BINARIES / KARPENTER_BINARY
    if not binary.exists():
        raise AssertionError(f"{KARPENTER_BINARY} not built in {BINARIES}: run scripts/toolchain.sh")
    cluster.plane.install_crds(karpenter_crd_files())
    types_file = write_instance_types(workdir / "karpenter-instance-types.json", disk_gib)
    health_port = free_port()
    cluster.processes.start(KARPENTER_BINARY, [str(binary)], env={
        "KUBECONFIG": str(cluster.plane.kubeconfig),
        "DISABLE_LEADER_ELECTION": "true",
        "INSTANCE_TYPES_FILE_PATH": str(types_file),
        "HEALTH_PROBE_PORT": str(health_port),
        "METRICS_PORT": str(free_port()),
        "LOG_LEVEL": "debug",
    })
    cluster.wait(lambda: _ready(health_port), START_TIMEOUT_SECONDS, "Karpenter's readiness (/readyz)",
                 lambda: cluster.processes.log_tail(KARPENTER_BINARY))
    return types_file


def apply_node_classes(cluster: SimulatedCluster, manifests: list[dict[str, Any]]) -> None:
    """Create the KWOKNodeClasses of ``manifests`` (after :func:`with_kwok_node_class`)."""
    for obj in manifests:
        if obj["kind"] == "KWOKNodeClass":
            cluster.create(KWOK_NODE_CLASS_API, obj)


def nodeclaims(cluster: SimulatedCluster) -> list[dict[str, Any]]:
    return cluster.items(NODECLAIM_API)


def karpenter_nodes(cluster: SimulatedCluster, nodepool: str) -> list[dict[str, Any]]:
    return cluster.items("/api/v1/nodes", f"{KARPENTER_NODEPOOL_LABEL}={nodepool}")


def node_labels_expected(instance: InstanceFacts) -> dict[str, str]:
    """Labels a node of ``instance`` carries whatever the NodePool adds (kubelet's and the AWS provider's)."""
    return {INSTANCE_TYPE_LABEL: instance.instance_type, ARCH_LABEL: "amd64", OS_LABEL: "linux",
            **aws_instance_labels(instance)}
