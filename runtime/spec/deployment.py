"""The whole deployment: cluster, add-ons, models and observability, checked across each other."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vllm_pulumi.runtime.spec.cluster import ClusterSpec, EksCluster
from vllm_pulumi.runtime.spec.common import DNS_LABEL, K8S_NAME, StrictModel
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


# ---- add-ons -------------------------------------------------------------------------------------------------------
class AddonSpec(StrictModel):
    """A cluster add-on installed from its upstream Helm chart at a pinned version, or marked as already there."""

    install: bool = Field(True, description="False when the add-on is already installed in the cluster.")
    version: str | None = Field(None, description="Chart version; None uses the pinned default.")
    namespace: str | None = Field(None, pattern=K8S_NAME, description="Namespace; None uses the usual one.")
    values: dict[str, Any] = Field(default_factory=dict, description="Extra Helm values merged over ours.")


class GpuOperatorSpec(AddonSpec):
    """The NVIDIA GPU Operator add-on: device plugin, GPU Feature Discovery, DCGM exporter, driver when needed."""

    driver_enabled: bool | None = Field(
        None, description="Install the driver; None: off on EKS NVIDIA AMIs that ship it, on elsewhere."
    )


class AddonsSpec(StrictModel):
    """Cluster add-ons, each installed from its pinned upstream chart or marked as already installed."""

    gpu_operator: GpuOperatorSpec = Field(default_factory=GpuOperatorSpec, description="NVIDIA GPU Operator.")
    keda: AddonSpec = Field(default_factory=AddonSpec, description="KEDA, for queue-based autoscaling.")
    lws: AddonSpec = Field(default_factory=AddonSpec, description="LeaderWorkerSet controller, for multi-node.")


class ObservabilitySpec(StrictModel):
    """Scraping, alerts and the Grafana dashboard for every model of the stack."""

    monitor: Literal["ServiceMonitor", "PodMonitor", "none"] = Field(
        "ServiceMonitor", description="Prometheus Operator object that scrapes vLLM."
    )
    monitor_labels: dict[str, str] = Field(
        default_factory=lambda: {"release": "prometheus"}, description="Labels the Prometheus selects monitors by."
    )
    alerts: bool = Field(True, description="PrometheusRule with queue, KV cache, TTFT, preemption, down alerts.")
    ttft_p95_slo_seconds: float = Field(2.0, gt=0, description="Alert when p95 time to first token exceeds this.")
    kv_cache_alert_threshold: float = Field(0.8, gt=0, lt=1, description="Sustained KV cache use that alerts.")
    dashboard: bool = Field(True, description="Grafana dashboard ConfigMap for the sidecar.")
    dashboard_labels: dict[str, str] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"}, description="Label the Grafana sidecar watches."
    )
    scrape_interval_seconds: int = Field(15, ge=1, description="Scrape interval of vLLM's /metrics.")


class DeploymentSpec(StrictModel):
    """Everything one stack deploys, in order: nodes, add-ons, storage, serving, autoscaling, observability."""

    namespace: str = Field("inference", pattern=DNS_LABEL, description="Namespace of the serving objects.")
    create_namespace: bool = Field(True, description="Create the namespace (False when it exists).")
    cluster: ClusterSpec = Field(description="render, kubeconfig or eks.")
    addons: AddonsSpec = Field(default_factory=AddonsSpec, description="GPU Operator, KEDA, LWS.")
    models: list[ModelDeploymentSpec] = Field(min_length=1, description="Models to serve.")
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec, description="Metrics, alerts.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on every object.")

    @model_validator(mode="after")
    def _auto_mode_not_mixed(self) -> DeploymentSpec:
        """Auto Mode nodes have AWS's device plugin; the GPU Operator's would run on the other pools' nodes only if
        the two kinds of pools were told apart, which the operator's one set of Helm values cannot do."""
        if not isinstance(self.cluster, EksCluster) or not self.addons.gpu_operator.install:
            return self
        kinds = {pool.provisioner for pool in self.cluster.node_pools}
        if "auto-mode" in kinds and len(kinds) > 1:
            raise ValueError("cluster.node_pools mixes provisioner auto-mode with "
                             f"{', '.join(sorted(kinds - {'auto-mode'}))} while addons.gpu_operator.install is true: "
                             "Auto Mode nodes bring their own device plugin, the others need the operator's; put the "
                             "Auto Mode pools in a stack of their own, or set addons.gpu_operator.install: false")
        return self

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[ModelDeploymentSpec]) -> list[ModelDeploymentSpec]:
        seen: set[str] = set()
        for model in models:
            if model.name in seen:
                raise ValueError(f"model name {model.name!r} is used twice; names must be unique")
            seen.add(model.name)
        return models
