"""Which Kubernetes kinds hold pods, which of them serve, and which never hold a container: the sets the workload
reader and the rules select by, each defined once (tuples where the order shows in docs/policies.md)."""

from __future__ import annotations

RAY_KINDS = frozenset({"RayService", "RayCluster", "RayJob"})
KSERVE_KINDS = frozenset({"InferenceService", "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService"})
SERVING_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet", "Pod", "RayService", "RayCluster", "InferenceService",
                 "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService")
"""Kinds that serve traffic for a long time; a Job (or RayJob) runs a vLLM image only for batch work, so serving rules
skip it. In the order the per-object rules list them."""
POD_KINDS = (*SERVING_KINDS, "DaemonSet", "ReplicaSet", "Job", "CronJob", "RayJob")
"""Kinds that carry pod templates (``pods.pod_templates`` reads each): the serving kinds and the batch and per-node
ones."""
PLAIN_SERVING_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet", "Pod")
"""The serving kinds the stack rules compare with the Services, monitors, budgets, NetworkPolicies and node pools that
select their pods: Kubernetes' own workload kinds and LeaderWorkerSet, whose pods carry their template's labels as
written (the Ray and KServe kinds are checked per object only)."""
CONTROLLER_FILLED_KINDS = frozenset({"LLMInferenceService"})
"""Kinds whose controller writes the serving command, probes and drain settings into the pods from its own config
(KServe's LLMInferenceServiceConfig / ServingRuntime): the manifest shows only part of the container."""
NON_WORKLOAD_KINDS = frozenset({
    "Secret", "ConfigMap", "Service", "ServiceAccount", "PersistentVolumeClaim", "PersistentVolume", "Namespace",
    "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy", "PodDisruptionBudget",
    "HorizontalPodAutoscaler", "Ingress", "IngressClass", "StorageClass", "PriorityClass", "CustomResourceDefinition",
    "ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject", "ScaledJob", "TriggerAuthentication",
    "ClusterTriggerAuthentication", "HTTPRoute", "GRPCRoute", "Gateway", "GatewayClass", "ReferenceGrant",
    "InferencePool", "InferenceModel", "InferenceObjective", "NodePool", "EC2NodeClass", "NodeClaim",
    "ResourceQuota", "LimitRange", "Endpoints", "EndpointSlice", "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration", "APIService", "Certificate", "Issuer", "ClusterIssuer", "VerticalPodAutoscaler",
    "LLMInferenceServiceConfig", "List",
})
"""Kinds that never hold a container, so an unknown-kind scan need not look at them even when they mention vLLM."""
