"""Every Kubernetes object a stack renders, as plain dicts in dependency order, and the stack loader.

``build_manifests(load_stack("prod"))`` is what the policy checks and the golden tests read; the component shells
register exactly these objects (Secrets get their data from Pulumi secrets in the shell). Helm add-ons are not in the
list: their objects come from the upstream charts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vllm_pulumi.runtime.derive import ServingPlan, plan_deployment
from vllm_pulumi.runtime.spec import DeploymentSpec, EksCluster, parse_deployment
from vllm_pulumi.components.builders.autoscaling import build_scaled_object
from vllm_pulumi.components.builders.karpenter import build_karpenter_objects
from vllm_pulumi.components.builders.network import build_namespace, build_network
from vllm_pulumi.components.builders.observability import build_observability
from vllm_pulumi.components.builders.serving import build_serving, build_serving_secrets
from vllm_pulumi.components.builders.storage import build_storage, build_storage_secrets

CONFIG_KEY = "vllm-pulumi:deployment"
STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


@dataclass(frozen=True)
class ModelObjects:
    """One model's objects, grouped by the component that registers them."""

    plan: ServingPlan
    storage_secrets: list[dict[str, Any]] = field(default_factory=list)
    storage: list[dict[str, Any]] = field(default_factory=list)
    serving_secrets: list[dict[str, Any]] = field(default_factory=list)
    serving: list[dict[str, Any]] = field(default_factory=list)
    autoscaling: list[dict[str, Any]] = field(default_factory=list)
    observability: list[dict[str, Any]] = field(default_factory=list)


def build_model_objects(spec: DeploymentSpec, plan: ServingPlan, *, skip_await: bool = False) -> ModelObjects:
    labels = spec.labels
    scaled = build_scaled_object(plan, labels)
    return ModelObjects(
        plan=plan,
        storage_secrets=build_storage_secrets(plan, labels),
        storage=build_storage(plan, labels, skip_await=skip_await),
        serving_secrets=build_serving_secrets(plan, labels),
        serving=build_serving(plan, labels) + build_network(plan, labels),
        autoscaling=[scaled] if scaled is not None else [],
        observability=build_observability(plan, spec.observability, labels),
    )


def namespace_objects(spec: DeploymentSpec) -> list[dict[str, Any]]:
    return [build_namespace(spec.namespace, spec.labels)] if spec.create_namespace else []


def node_objects(spec: DeploymentSpec, plans: list[ServingPlan]) -> list[dict[str, Any]]:
    """EC2NodeClasses and NodePools of the stack's karpenter and auto-mode pools (cluster-scoped, first: the serving
    pods' nodes come from them). Managed node groups are AWS resources, not Kubernetes objects."""
    if not isinstance(spec.cluster, EksCluster):
        return []
    return build_karpenter_objects(spec.cluster, plans, spec.labels).all


def build_manifests(spec: DeploymentSpec, plans: list[ServingPlan] | None = None) -> list[dict[str, Any]]:
    """Namespace, then per stage (storage, serving, autoscaling, observability) every model's objects."""
    plans = plans if plans is not None else plan_deployment(spec)
    models = [build_model_objects(spec, plan) for plan in plans]
    objects = node_objects(spec, plans) + namespace_objects(spec)
    for stage in ("storage_secrets", "storage", "serving_secrets", "serving", "autoscaling", "observability"):
        for model in models:
            objects.extend(getattr(model, stage))
    return objects


def read_stack_config(name: str, stacks_dir: Path | None = None) -> Any:
    """The raw ``vllm-pulumi:deployment`` value of stacks/Pulumi.<name>.yaml."""
    path = (stacks_dir or STACKS_DIR) / f"Pulumi.{name}.yaml"
    document = yaml.safe_load(path.read_text()) or {}
    config = document.get("config") or {}
    return config.get(CONFIG_KEY)


def load_stack(name: str, stacks_dir: Path | None = None) -> DeploymentSpec:
    """Parse a reference stack through ``parse_deployment`` (raises SpecError, like ``pulumi up`` would)."""
    return parse_deployment(read_stack_config(name, stacks_dir))
