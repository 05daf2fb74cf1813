"""The object tree of one stack, composed once: what ``build_manifests`` returns and what ``VllmStack`` registers.

Every object is grouped by the stage it belongs to and the component that registers it, in the order things must
exist: GPU nodes (EKS managed node groups, or Karpenter / Auto Mode NodePools) -> add-ons (their CRDs) -> namespace
-> per model: storage secrets, storage, serving secrets, serving, autoscaling, observability. Plain Python, no
pulumi import: the shells in stack.py and its components only register what is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_pulumi.components.builders.addons import AddonRelease, build_addons, registered_releases, render_mode_notes
from vllm_pulumi.components.builders.autoscaling import build_scaled_object
from vllm_pulumi.components.builders.karpenter import build_karpenter_objects
from vllm_pulumi.components.builders.labels import with_stack_labels
from vllm_pulumi.components.builders.network import build_namespace, build_network
from vllm_pulumi.components.builders.nodes import NodeGroupDescription, build_node_group
from vllm_pulumi.components.builders.observability import build_observability
from vllm_pulumi.components.builders.serving import build_serving, build_serving_secrets
from vllm_pulumi.components.builders.storage import build_storage, build_storage_secrets
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.node_pools import ManagedNodeGroupPool

# A model's stages in the order they are applied (each stage of every model before the next stage of any).
MODEL_STAGES = ("storage_secrets", "storage", "serving_secrets", "serving", "autoscaling", "observability")


@dataclass(frozen=True)
class ModelObjects:
    """One model's objects, grouped by the component that registers them (ModelStore: storage secrets and storage;
    VllmService: serving secrets and serving; QueueAutoscaler: autoscaling; Observability: observability)."""

    plan: ServingPlan
    storage_secrets: list[dict[str, Any]] = field(default_factory=list)
    storage: list[dict[str, Any]] = field(default_factory=list)
    serving_secrets: list[dict[str, Any]] = field(default_factory=list)
    serving: list[dict[str, Any]] = field(default_factory=list)
    """Workload and PodDisruptionBudget, then the Service and NetworkPolicy."""
    autoscaling: list[dict[str, Any]] = field(default_factory=list)
    observability: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StackObjects:
    """Every object of one stack, by stage."""

    node_groups: list[NodeGroupDescription]
    """EKS managed node groups (pulumi-aws resources, not Kubernetes objects), one GpuNodePool each."""
    node_pools: list[dict[str, Any]]
    """EC2NodeClasses, then NodePools of the karpenter and auto-mode pools (cluster-scoped, first: the serving
    pods' nodes come from them)."""
    addons: list[AddonRelease]
    """The Helm releases as registered (none installed in render mode)."""
    addon_notes: list[str]
    """What the user should know about the add-ons (render mode cannot install a requested one)."""
    namespace: list[dict[str, Any]]
    models: list[ModelObjects]

    def manifests(self) -> list[dict[str, Any]]:
        """The Kubernetes objects in dependency order: node pools, namespace, then per stage every model's objects.
        Helm add-ons are not in the list (their objects come from the upstream charts)."""
        objects = [*self.node_pools, *self.namespace]
        for stage in MODEL_STAGES:
            for model in self.models:
                objects.extend(getattr(model, stage))
        return objects


def compose_model(spec: DeploymentSpec, plan: ServingPlan, *, skip_await_hydration: bool = False) -> ModelObjects:
    scaled = build_scaled_object(plan)
    return ModelObjects(
        plan=plan,
        storage_secrets=_labelled(spec, build_storage_secrets(plan)),
        storage=_labelled(spec, build_storage(plan, skip_await=skip_await_hydration)),
        serving_secrets=_labelled(spec, build_serving_secrets(plan)),
        serving=_labelled(spec, build_serving(plan) + build_network(plan)),
        autoscaling=_labelled(spec, [scaled] if scaled is not None else []),
        observability=_labelled(spec, build_observability(plan, spec.observability)),
    )


def compose_stack(spec: DeploymentSpec, plans: list[ServingPlan], *,
                  skip_await_hydration: bool = False) -> StackObjects:
    """The whole tree of a parsed and planned stack, every object with the stack's labels. ``skip_await_hydration``
    is for tests against a cluster that cannot download (the hydration Job gets ``pulumi.com/skipAwait``); never set
    it in a stack."""
    cluster = spec.cluster
    node_groups: list[NodeGroupDescription] = []
    node_pools: list[dict[str, Any]] = []
    if isinstance(cluster, EksCluster):
        # Karpenter or Auto Mode launches the nodes of the other pools, from their NodePools.
        node_groups = [build_node_group(pool, cluster.cluster_name, plans)
                       for pool in cluster.node_pools if isinstance(pool, ManagedNodeGroupPool)]
        node_pools = _labelled(spec, build_karpenter_objects(cluster, plans).all)
    releases = build_addons(spec, plans)
    return StackObjects(
        node_groups=node_groups,
        node_pools=node_pools,
        addons=registered_releases(spec, releases),
        addon_notes=render_mode_notes(spec, releases),
        namespace=_labelled(spec, [build_namespace(spec.namespace)] if spec.create_namespace else []),
        models=[compose_model(spec, plan, skip_await_hydration=skip_await_hydration) for plan in plans],
    )


def _labelled(spec: DeploymentSpec, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The builders leave the stack's labels out; they are added here, once, over every built object."""
    return [with_stack_labels(obj, spec.labels) for obj in objects]
