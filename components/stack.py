"""VllmStack: the whole program for one stack, in the order things must exist:
GPU nodes -> add-ons (their CRDs) -> namespace and storage -> serving -> autoscaling -> observability.

What each stage registers comes from the stack's one composition (composition.py); this shell wires the components
and the ``depends_on`` between the stages.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from vllm_pulumi.components.addons import ADDON_CLASSES, HelmAddon
from vllm_pulumi.components.autoscaler import QueueAutoscaler
from vllm_pulumi.components.composition import StackObjects, compose_stack
from vllm_pulumi.components.kube import register_objects
from vllm_pulumi.components.nodes import GpuNodePool
from vllm_pulumi.components.observability import Observability
from vllm_pulumi.components.service import VllmService
from vllm_pulumi.components.store import ModelStore
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.common import SecretRef
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec


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
    """Registers every component of a parsed stack with explicit ``depends_on`` between the stages.

    ``objects``: the stack's composition when the caller already has it (``__main__`` logs its add-on notes first);
    by default composed here from ``spec`` and ``plans``. ``skip_await_hydration`` is for tests against a cluster that
    cannot download (composition.compose_stack); never set it in a stack.
    """

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
        objects: StackObjects | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:VllmStack", name, None, opts)
        if objects is None:
            objects = compose_stack(spec, plans, skip_await_hydration=skip_await_hydration)
        self.node_pools = [
            GpuNodePool(description.name, description, cluster_security_group_id=cluster_security_group_id,
                        opts=self._after())
            for description in objects.node_groups
        ]
        # Karpenter's CRDs come with Karpenter (installed on the cluster, or Auto Mode's): no add-on to wait for.
        nodes: list[pulumi.Resource] = [*self.node_pools, *(
            resource for obj in objects.node_pools
            for resource in register_objects(f"karpenter-{obj['metadata']['name']}", [obj], self))]
        self.addons = [ADDON_CLASSES[addon.key](addon.key, addon, opts=self._after(nodes)) for addon in objects.addons]
        addons: list[pulumi.Resource] = list(self.addons)
        namespace = register_objects("namespace", objects.namespace, self, nodes) if objects.namespace else []
        self.services = self._register_models(objects, secrets or {}, addons, namespace)
        self.register_outputs({name: service.url for name, service in self.services.items()})

    def _after(self, *stages: list[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, depends_on=[r for stage in stages for r in stage])

    def _register_models(
        self, objects: StackObjects, secrets: Mapping[str, pulumi.Input[str]], addons: list[pulumi.Resource],
        namespace: list[pulumi.Resource],
    ) -> dict[str, VllmService]:
        """Per model: the store, then the service that reads it, then what watches the service."""
        services: dict[str, VllmService] = {}
        for model in objects.models:
            spec = model.plan.spec
            store = ModelStore(spec.name, model, hf_token=_secret(spec.storage.hf_token, secrets),
                               opts=self._after(addons, namespace))
            service = VllmService(spec.name, model, api_key=_secret(spec.api_key, secrets),
                                  opts=self._after(addons, namespace, [store]))
            services[spec.name] = service
            if spec.autoscaling is not None:
                QueueAutoscaler(spec.name, model, opts=self._after(addons, [service]))
            Observability(spec.name, model, opts=self._after(addons, [service]))
        return services
