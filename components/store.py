"""ModelStore: the model's PVC and the one-shot Job that hydrates it (or nothing, for S3 streaming)."""

from __future__ import annotations

import pulumi

from vllm_pulumi.components.builders.secrets import HF_TOKEN_SECRET_KEY
from vllm_pulumi.components.builders.storage import mounted_claim_name
from vllm_pulumi.components.composition import ModelObjects
from vllm_pulumi.components.kube import inherited_depends_on, register_objects, register_secrets


class ModelStore(pulumi.ComponentResource):
    """Registers the storage objects of one model. The serving workload depends on this component, so Pulumi waits
    for the hydration Job to complete before the pods that read the volume are created."""

    claim_name: pulumi.Output[str]

    def __init__(self, name: str, model: ModelObjects, *, hf_token: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("vllm-pulumi:index:ModelStore", name, None, opts)
        after = inherited_depends_on(opts)
        secrets = register_secrets(name, "hf-token", model.storage_secrets, HF_TOKEN_SECRET_KEY, hf_token, self, after)
        register_objects(f"{name}-storage", model.storage, self, after + secrets)
        self.claim_name = pulumi.Output.from_input(mounted_claim_name(model.plan))
        self.register_outputs({"claim_name": self.claim_name})
