"""ModelStore: the model's PVC and the one-shot Job that hydrates it (or nothing, for S3 streaming)."""

from __future__ import annotations

import pulumi

from vllm_pulumi.runtime.derive import ServingPlan
from vllm_pulumi.components.builders.secrets import HF_TOKEN_SECRET_KEY
from vllm_pulumi.components.builders.storage import build_storage, build_storage_secrets, claim_name
from vllm_pulumi.components.kube import inherited_depends_on, register_objects, register_secret


class ModelStore(pulumi.ComponentResource):
    """Registers the storage objects of one model. The serving workload depends on this component, so Pulumi waits
    for the hydration Job to complete before the pods that read the volume are created.

    ``skip_await_hydration`` is for tests against a cluster that cannot download (adds ``pulumi.com/skipAwait``);
    never set it in a stack.
    """

    claim_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: ServingPlan,
        *,
        labels: dict[str, str] | None = None,
        hf_token: pulumi.Input[str] | None = None,
        skip_await_hydration: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:ModelStore", name, None, opts)
        after = inherited_depends_on(opts)
        secrets: list[pulumi.Resource] = []
        for obj in build_storage_secrets(plan, labels):
            if hf_token is None:
                raise ValueError(f"{name}: hf-token is a Pulumi secret but no value was passed in")
            secrets.append(register_secret(f"{name}-hf-token", obj, HF_TOKEN_SECRET_KEY, hf_token, self, after))
        register_objects(f"{name}-storage", build_storage(plan, labels, skip_await=skip_await_hydration), self,
                         after + secrets)
        self.claim_name = pulumi.Output.from_input(claim_name(plan) if plan.uses_pvc else "")
        self.register_outputs({"claim_name": self.claim_name})
