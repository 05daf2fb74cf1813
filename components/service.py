"""VllmService: the serving workload (Deployment or LeaderWorkerSet), its Service, PDB and NetworkPolicy."""

from __future__ import annotations

import pulumi

from vllm_pulumi.components.builders.network import service_url
from vllm_pulumi.components.builders.secrets import API_KEY_SECRET_KEY
from vllm_pulumi.components.builders.serving import workload_kind
from vllm_pulumi.components.composition import ModelObjects
from vllm_pulumi.components.kube import inherited_depends_on, register_objects, register_secrets


class VllmService(pulumi.ComponentResource):
    url: pulumi.Output[str]
    workload_kind: pulumi.Output[str]

    def __init__(self, name: str, model: ModelObjects, *, api_key: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("vllm-pulumi:index:VllmService", name, None, opts)
        after = inherited_depends_on(opts)
        secrets = register_secrets(name, "api-key", model.serving_secrets, API_KEY_SECRET_KEY, api_key, self, after)
        register_objects(f"{name}-serving", model.serving, self, after + secrets)
        self.url = pulumi.Output.from_input(service_url(model.plan))
        self.workload_kind = pulumi.Output.from_input(workload_kind(model.plan)[1])
        self.register_outputs({"url": self.url, "workload_kind": self.workload_kind})
