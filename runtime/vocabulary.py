"""Every upstream key the package writes or reads, defined once: extended resource names, node labels, taints,
annotations and label keys of the projects we deploy (Kubernetes, NVIDIA GPU Feature Discovery, Karpenter, EKS Auto
Mode, GKE, LeaderWorkerSet, the AWS EFA device plugin, Prometheus, Pulumi).

runtime/, components/, policies/ and the tests import these names; tests/test_vocabulary.py fails when one of these
strings appears as a literal anywhere else in the package. Values are the upstream spelling, verbatim.
"""

from __future__ import annotations

# ---- extended resources (device plugins) ----------------------------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"
"""The NVIDIA device plugin's extended resource."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""The AWS EFA device plugin's extended resource: one per EFA interface of the node."""
OTHER_ACCELERATOR_RESOURCES = ("google.com/tpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "amd.com/gpu",
                               "habana.ai/gaudi", "gpu.intel.com/i915")
"""Device resources of accelerators other than NVIDIA GPUs: vLLM's parallel sizes count those devices instead."""

# ---- node labels set by NVIDIA GPU Feature Discovery (part of the GPU Operator) ---------------------------------------
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

# ---- well-known labels the kubelet and cloud providers set (k8s.io/api/core/v1 well_known_labels.go) ------------------
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every Namespace: what a NetworkPolicy's namespaceSelector matches by name."""
AWS_ZONE_ID_LABEL = "topology.k8s.aws/zone-id"

# ---- taints ----------------------------------------------------------------------------------------------------------
GPU_TAINT: dict[str, str] = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
"""The GPU nodes' taint (the GPU Operator's and EKS's convention): keeps pods that do not ask for GPUs off GPU nodes;
the serving pods tolerate it."""

# ---- Karpenter (sigs.k8s.io/karpenter pkg/apis/v1/labels.go, karpenter-provider-aws pkg/apis/v1/labels.go) -----------
# Karpenter and EKS Auto Mode put these on the nodes they launch and know their values before a node exists, so a pod
# that selects by them (or by a label of the NodePool's template) can make it launch one; GFD's nvidia.com/gpu.product
# appears only after the node runs, so a Karpenter pool's pods must not select by it.
KARPENTER_GROUP = "karpenter.sh"
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
KARPENTER_AWS_GROUP = "karpenter.k8s.aws"
"""API group of the AWS provider's EC2NodeClass."""
KARPENTER_AWS_LABEL_PREFIX = "karpenter.k8s.aws/"
KARPENTER_GPU_NAME_LABEL = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"

# ---- EKS Auto Mode ---------------------------------------------------------------------------------------------------
AUTO_MODE_GROUP = "eks.amazonaws.com"
AUTO_MODE_LABEL_PREFIX = "eks.amazonaws.com/"
AUTO_MODE_GPU_NAME_LABEL = "eks.amazonaws.com/instance-gpu-name"
AUTO_MODE_GPU_COUNT_LABEL = "eks.amazonaws.com/instance-gpu-count"

# ---- GKE -------------------------------------------------------------------------------------------------------------
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"

# ---- LeaderWorkerSet (sigs.k8s.io/lws api/leaderworkerset/v1 leaderworkerset_types.go) --------------------------------
LWS_API_GROUP = "leaderworkerset.x-k8s.io"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
"""Set by the LWS controller on every pod of the set."""
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""0 on the leader pod of a group, 1..size-1 on its workers."""

# ---- Kubernetes recommended labels (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels) ---------
APP_NAME_LABEL = "app.kubernetes.io/name"
APP_INSTANCE_LABEL = "app.kubernetes.io/instance"
APP_COMPONENT_LABEL = "app.kubernetes.io/component"
APP_PART_OF_LABEL = "app.kubernetes.io/part-of"
APP_MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
APP_VERSION_LABEL = "app.kubernetes.io/version"

# ---- API groups of the add-ons' custom resources -----------------------------------------------------------------------
KEDA_API_GROUP = "keda.sh"
"""KEDA's ScaledObject."""
PROMETHEUS_OPERATOR_API_GROUP = "monitoring.coreos.com"
"""Prometheus Operator's ServiceMonitor, PodMonitor and PrometheusRule."""

# ---- Prometheus scrape annotations (the community convention the Prometheus chart's kubernetes-pods job reads) -------
PROMETHEUS_SCRAPE_ANNOTATION = "prometheus.io/scrape"
PROMETHEUS_PORT_ANNOTATION = "prometheus.io/port"
PROMETHEUS_PATH_ANNOTATION = "prometheus.io/path"

# ---- Pulumi ----------------------------------------------------------------------------------------------------------
PULUMI_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
"""pulumi-kubernetes' await timeout for the annotated object."""
PULUMI_SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
"""pulumi-kubernetes does not wait for the annotated object to become ready."""

# ---- kube-score (github.com/zegl/kube-score) ---------------------------------------------------------------------------
KUBE_SCORE_IGNORE_ANNOTATION = "kube-score/ignore"
"""Comma-separated check ids kube-score skips on the annotated object."""
