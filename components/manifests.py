"""Every Kubernetes object a stack renders, as plain dicts in dependency order, and the stack loader.

``build_manifests(load_stack("prod"))`` is what the policy checks and the golden tests read; the component shells
register exactly these objects, from the same composition (composition.py; Secrets get their data from Pulumi
secrets in the shell). Helm add-ons are not in the list: their objects come from the upstream charts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vllm_pulumi.components.composition import compose_stack
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec

CONFIG_KEY = "vllm-pulumi:deployment"
STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


def build_manifests(spec: DeploymentSpec, plans: list[ServingPlan] | None = None) -> list[dict[str, Any]]:
    """Node pools, namespace, then per stage (storage, serving, autoscaling, observability) every model's objects:
    the Kubernetes objects of the stack's one composition (composition.py)."""
    plans = plans if plans is not None else plan_deployment(spec)
    return compose_stack(spec, plans).manifests()


def read_stack_config(name: str, stacks_dir: Path | None = None) -> Any:
    """The raw ``vllm-pulumi:deployment`` value of stacks/Pulumi.<name>.yaml."""
    path = (stacks_dir or STACKS_DIR) / f"Pulumi.{name}.yaml"
    document = yaml.safe_load(path.read_text()) or {}
    config = document.get("config") or {}
    return config.get(CONFIG_KEY)


def load_stack(name: str, stacks_dir: Path | None = None) -> DeploymentSpec:
    """Parse and plan a reference stack through ``load_deployment`` (raises SpecError, like ``pulumi up`` would)."""
    return load_deployment(read_stack_config(name, stacks_dir)).spec
