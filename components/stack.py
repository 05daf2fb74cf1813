"""VllmStack: the whole program for one stack, in the order things must exist:
GPU nodes -> add-ons (their CRDs) -> namespace and storage -> serving -> autoscaling -> observability.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pulumi

from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.runtime.spec import DeploymentSpec, EksCluster, SecretRef
from vllm_pulumi.components.addons import ADDON_CLASSES, HelmAddon
from vllm_pulumi.components.autoscaler import QueueAutoscaler
from vllm_pulumi.components.builders.addons import build_addons
from vllm_pulumi.components.builders.karpenter import build_karpenter_objects, is_karpenter_pool
from vllm_pulumi.components.builders.network import build_namespace
from vllm_pulumi.components.builders.nodes import build_node_group
from vllm_pulumi.components.kube import register_objects
from vllm_pulumi.components.nodes import GpuNodePool
from vllm_pulumi.components.observability import Observability
from vllm_pulumi.components.service import VllmService
from vllm_pulumi.components.store import ModelStore


def pulumi_secret_keys(spec: DeploymentSpec) -> list[str]:
    """Config keys of every Pulumi secret the stack refers to, in first-use order."""
    keys: list[str] = []
    for model in spec.models:
        for ref in (model.api_key, model.storage.hf_token):
            if ref is not None and ref.pulumi_secret is not None and ref.pulumi_secret not in keys:
                keys.append(ref.pulumi_secret)
    return keys


def _secret(ref: SecretRef | None, secrets: Mapping[str, pulumi.Input[str]]) -> pulumi.Input[str] | None:
    if ref is None or ref.pulumi_secret is None:
        return None
    return secrets[ref.pulumi_secret]


class VllmStack(pulumi.ComponentResource):
    """Registers every component of a parsed stack with explicit ``depends_on`` between the stages."""

    node_pools: list[GpuNodePool]
    addons: list[HelmAddon]
    services: dict[str, VllmService]

    def __init__(
        self,
        name: str,
        spec: DeploymentSpec,
        plans: list[ServingPlan],
        *,
        secrets: Mapping[str, pulumi.Input[str]] | None = None,
        cluster_security_group_id: pulumi.Input[str] | None = None,
        skip_await_hydration: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:VllmStack", name, None, opts)
        secrets = secrets or {}
        labels = spec.labels

        def after(*stages: list[pulumi.Resource]) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=[r for stage in stages for r in stage])

        nodes: list[pulumi.Resource] = []
        self.node_pools = []
        if isinstance(spec.cluster, EksCluster):
            for pool in spec.cluster.node_pools:
                if is_karpenter_pool(pool):
                    continue  # a NodePool (below): Karpenter or Auto Mode launches the nodes
                node_pool = GpuNodePool(
                    pool.name, build_node_group(pool, spec.cluster.cluster_name, plans),
                    cluster_security_group_id=cluster_security_group_id, opts=after(),
                )
                self.node_pools.append(node_pool)
        nodes.extend(self.node_pools)
        if isinstance(spec.cluster, EksCluster):
            # Karpenter's CRDs come with Karpenter (installed on the cluster, or Auto Mode's): no add-on to wait for.
            for obj in build_karpenter_objects(spec.cluster, plans, labels).all:
                nodes.extend(register_objects(f"karpenter-{obj['metadata']['name']}", [obj], self))

        releases = build_addons(spec, plans)
        if spec.cluster.mode == "render":
            # Nothing to install into: the manifests are written to a directory (render_mode_notes tells the user).
            releases = [dataclasses.replace(release, install=False) for release in releases]
        self.addons = [ADDON_CLASSES[addon.key](addon.key, addon, opts=after(nodes)) for addon in releases]
        addons: list[pulumi.Resource] = list(self.addons)

        namespace: list[pulumi.Resource] = []
        if spec.create_namespace:
            namespace = register_objects("namespace", [build_namespace(spec.namespace, labels)], self, nodes)

        self.services = {}
        for plan in plans:
            model = plan.spec
            store = ModelStore(
                model.name, plan, labels=labels, hf_token=_secret(model.storage.hf_token, secrets),
                skip_await_hydration=skip_await_hydration, opts=after(addons, namespace),
            )
            service = VllmService(
                model.name, plan, labels=labels, api_key=_secret(model.api_key, secrets),
                opts=after(addons, namespace, [store]),
            )
            self.services[model.name] = service
            if model.autoscaling is not None:
                QueueAutoscaler(model.name, plan, labels=labels, opts=after(addons, [service]))
            Observability(model.name, plan, spec.observability, labels=labels, opts=after(addons, [service]))

        self.register_outputs({name: service.url for name, service in self.services.items()})
