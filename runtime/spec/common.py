"""What every part of the spec shares: the strict base model, name patterns, and secret references."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

DNS_LABEL = r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$"
K8S_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- secrets -------------------------------------------------------------------------------------------------------
class ExistingSecret(StrictModel):
    """A Kubernetes Secret that already exists in the namespace; its value never passes through Pulumi."""

    name: str = Field(pattern=K8S_NAME, description="Secret name in the deployment namespace.")
    key: str = Field(description="Key inside the Secret's data.")


class SecretRef(StrictModel):
    """Where a secret value comes from: exactly one of a Pulumi secret config key or an existing Secret."""

    pulumi_secret: str | None = Field(
        None, description="Stack config key set with `pulumi config set --secret KEY`; stays encrypted in state."
    )
    existing_secret: ExistingSecret | None = Field(None, description="Reference to a Secret created elsewhere.")

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.pulumi_secret is None) == (self.existing_secret is None):
            raise ValueError("give exactly one of pulumi_secret or existing_secret")
        return self
