"""Secrets a model references: refused where render mode would write them in plain text, and a warning where they
cannot exist yet when the pods start."""

from __future__ import annotations

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.spec.common import SecretRef
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


def secret_issues(spec: DeploymentSpec, path: str, ref: SecretRef | None) -> list[PlanningError]:
    if ref is not None and ref.pulumi_secret and spec.cluster.mode == "render":
        return [PlanningError(
            f"{path}.pulumi_secret", ref.pulumi_secret,
            "render mode writes Secret values into the YAML files in plain text",
            "reference a Secret that exists in the cluster with existing_secret: {name, key}",
        )]
    return []


def secret_warnings(spec: DeploymentSpec, model: ModelDeploymentSpec) -> list[str]:
    referenced = [ref.existing_secret.name for ref in (model.api_key, model.storage.hf_token)
                  if ref is not None and ref.existing_secret is not None]
    if referenced and spec.cluster.mode != "render" and spec.create_namespace:
        return [
            f"Secrets {', '.join(sorted(set(referenced)))} are referenced by name in namespace {spec.namespace}, "
            "which this stack creates: they cannot exist before `pulumi up` makes it, so pods wait for them "
            "(KEDA, which reads the serving container's env, fails too) until something creates them (an "
            "ExternalSecret, a sealed secret); when they are created by hand, make the namespace first and set "
            "create_namespace: false"
        ]
    return []
