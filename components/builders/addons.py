"""Cluster add-ons from their upstream Helm charts: chart references pinned in one place, values built here."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.components.builders.placement import gpu_toleration
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.deployment import AddonSpec, DeploymentSpec, GpuOperatorSpec, ObservabilitySpec


@dataclass(frozen=True)
class ChartRef:
    release: str
    chart: str
    """Chart name in ``repository``, or a full ``oci://`` reference (then ``repository`` is None)."""
    repository: str | None
    version: str
    namespace: str


# GPU Operator: last release verified with the EKS NVIDIA AMIs' driver branch and Kubernetes 1.32-1.34 here.
GPU_OPERATOR_CHART = ChartRef("gpu-operator", "gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v25.3.4",
                              "gpu-operator")
# KEDA 2.21: the version the simulated cluster runs (scripts/toolchain.versions KEDA_VERSION; a test keeps them equal).
KEDA_CHART = ChartRef("keda", "keda", "https://kedacore.github.io/charts", "2.21.0", "keda")
# LWS 0.8: v1 API with rolloutStrategy.maxSurge and the hpaPodSelector scale subresource KEDA targets.
LWS_CHART = ChartRef("lws", "oci://registry.k8s.io/lws/charts/lws", None, "0.8.0", "lws-system")

# Karpenter is not installed by the stacks (it runs before any GPU node exists, usually from the cluster's own
# infrastructure code); this is the release the rendered NodePools and EC2NodeClasses are validated against
# (scripts/toolchain.versions KARPENTER_AWS_VERSION, whose CRDs the tests read; a test keeps them equal).
KARPENTER_CHART = ChartRef("karpenter", "oci://public.ecr.aws/karpenter/karpenter", None, "1.15.0", "kube-system")


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``, recursively for nested mappings; neither argument is modified."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def chart_for(default: ChartRef, addon: AddonSpec) -> ChartRef:
    """The pinned chart, with the stack's version / namespace when it sets them."""
    return ChartRef(default.release, default.chart, default.repository, addon.version or default.version,
                    addon.namespace or default.namespace)


def gpu_operator_driver_enabled(spec: GpuOperatorSpec, cluster_mode: str) -> bool:
    """EKS NVIDIA AMIs ship the driver and the container toolkit; elsewhere the operator installs both."""
    if spec.driver_enabled is not None:
        return spec.driver_enabled
    return cluster_mode != "eks"


def gpu_operator_values(spec: GpuOperatorSpec, cluster_mode: str, observability: ObservabilitySpec,
                        provisioners: Sequence[str] = ()) -> dict[str, Any]:
    """``provisioners``: of the stack's GPU pools. EKS Auto Mode nodes come with the NVIDIA driver, container toolkit
    and device plugin, managed by AWS; a second device plugin would advertise the same GPUs twice, so on Auto Mode the
    operator runs only GPU Feature Discovery and the DCGM exporter (the spec refuses mixing Auto Mode with other pools
    while the operator is installed). Karpenter nodes on the EKS NVIDIA AMIs are like managed node groups: driver and
    toolkit off, device plugin on."""
    auto_mode = bool(provisioners) and all(kind == "auto-mode" for kind in provisioners)
    on_host = auto_mode or not gpu_operator_driver_enabled(spec, cluster_mode)
    values: dict[str, Any] = {
        "driver": {"enabled": not on_host},
        "toolkit": {"enabled": not on_host},
        "devicePlugin": {"enabled": not auto_mode},
        # GPU Feature Discovery writes nvidia.com/gpu.product, which the vLLM pods select nodes by.
        "gfd": {"enabled": True},
        "nfd": {"enabled": True},
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": {
                "enabled": observability.monitor != "none",
                "interval": f"{observability.scrape_interval_seconds}s",
                # Keep DCGM's own pod/namespace labels (the pod using the GPU), not the exporter's.
                "honorLabels": True,
                "additionalLabels": dict(observability.monitor_labels),
            },
        },
        "daemonsets": {
            "tolerations": [gpu_toleration()],
        },
    }
    return deep_merge(values, spec.values)


def keda_values(spec: AddonSpec) -> dict[str, Any]:
    return deep_merge({}, spec.values)


def lws_values(spec: AddonSpec) -> dict[str, Any]:
    return deep_merge({}, spec.values)


def pool_provisioners(spec: DeploymentSpec) -> list[str]:
    """The provisioner of each GPU pool the stack declares (none outside EKS)."""
    return [pool.provisioner for pool in spec.cluster.node_pools] if isinstance(spec.cluster, EksCluster) else []


@dataclass(frozen=True)
class AddonRelease:
    """One Helm release to create: chart, values, and whether the stack installs it at all."""

    key: str
    chart: ChartRef
    values: dict[str, Any]
    install: bool


def build_addons(spec: DeploymentSpec, plans: list[ServingPlan]) -> list[AddonRelease]:
    """GPU Operator always; KEDA when a model autoscales; LWS when a model spans nodes.

    ``install`` is False when the stack marks the add-on as already installed (then nothing is created).
    """
    addons = spec.addons
    releases = [AddonRelease("gpu-operator", chart_for(GPU_OPERATOR_CHART, addons.gpu_operator),
                             gpu_operator_values(addons.gpu_operator, spec.cluster.mode, spec.observability,
                                                 pool_provisioners(spec)),
                             addons.gpu_operator.install)]
    if any(plan.spec.autoscaling is not None for plan in plans):
        releases.append(AddonRelease("keda", chart_for(KEDA_CHART, addons.keda), keda_values(addons.keda),
                                     addons.keda.install))
    if any(plan.multi_node for plan in plans):
        releases.append(AddonRelease("lws", chart_for(LWS_CHART, addons.lws), lws_values(addons.lws),
                                     addons.lws.install))
    return releases


def registered_releases(spec: DeploymentSpec, releases: list[AddonRelease]) -> list[AddonRelease]:
    """The releases as the stack registers them: in render mode there is nothing to install into (the manifests are
    written to a directory; render_mode_notes tells the user), so every add-on's component stays, not installed."""
    if spec.cluster.mode != "render":
        return list(releases)
    return [dataclasses.replace(release, install=False) for release in releases]


def render_mode_notes(spec: DeploymentSpec, releases: list[AddonRelease]) -> list[str]:
    """Render mode writes manifests only; a Helm release needs a cluster, so installed add-ons cannot be rendered."""
    if spec.cluster.mode != "render":
        return []
    return [
        f"addons.{release.key.replace('-', '_')}.install is true in render mode: Helm releases are not written to "
        f"{getattr(spec.cluster, 'directory', 'the directory')}; install {release.chart.chart} {release.chart.version} "
        "separately or set install: false"
        for release in releases if release.install
    ]
