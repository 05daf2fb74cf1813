"""VllmService: the serving workload (Deployment or LeaderWorkerSet), its Service, PDB and NetworkPolicy."""

from __future__ import annotations

import pulumi

from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.components.builders.network import build_network
from vllm_pulumi.components.builders.secrets import API_KEY_SECRET_KEY
from vllm_pulumi.components.builders.serving import (
    SERVICE_PORT,
    build_serving,
    build_serving_secrets,
    workload_kind,
)
from vllm_pulumi.components.kube import inherited_depends_on, register_objects, register_secret


class VllmService(pulumi.ComponentResource):
    url: pulumi.Output[str]
    workload_kind: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: ServingPlan,
        *,
        labels: dict[str, str] | None = None,
        api_key: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:VllmService", name, None, opts)
        after = inherited_depends_on(opts)
        secrets: list[pulumi.Resource] = []
        for obj in build_serving_secrets(plan, labels):
            if api_key is None:
                raise ValueError(f"{name}: api-key is a Pulumi secret but no value was passed in")
            secrets.append(register_secret(f"{name}-api-key", obj, API_KEY_SECRET_KEY, api_key, self, after))
        objects = build_serving(plan, labels) + build_network(plan, labels)
        register_objects(f"{name}-serving", objects, self, after + secrets)
        host = f"{plan.spec.name}.{plan.namespace}.svc.cluster.local"
        self.url = pulumi.Output.from_input(f"http://{host}:{SERVICE_PORT}/v1")
        self.workload_kind = pulumi.Output.from_input(workload_kind(plan)[1])
        self.register_outputs({"url": self.url, "workload_kind": self.workload_kind})
