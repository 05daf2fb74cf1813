"""Where a secret value is read from inside the cluster: an existing Secret, or one the components create.

Builders only ever render a ``secretKeyRef``; a value given as a Pulumi secret is put into a Secret by the component
shell as a secret Output, so it never passes through a builder, a golden file or rendered YAML.
"""

from __future__ import annotations

from typing import Any

from vllm_pulumi.runtime.spec import SecretRef

API_KEY_SECRET_KEY = "api-key"
HF_TOKEN_SECRET_KEY = "token"


def api_key_secret_name(deployment: str) -> str:
    return f"{deployment}-api-key"


def hf_token_secret_name(deployment: str) -> str:
    return f"{deployment}-hf-token"


def secret_key_ref(ref: SecretRef, generated_name: str, generated_key: str) -> dict[str, Any]:
    """The ``secretKeyRef`` for a SecretRef: the existing Secret, or the one created from the Pulumi secret."""
    if ref.existing_secret is not None:
        return {"name": ref.existing_secret.name, "key": ref.existing_secret.key}
    return {"name": generated_name, "key": generated_key}


def secret_env(env_name: str, ref: SecretRef, generated_name: str, generated_key: str) -> dict[str, Any]:
    return {"name": env_name, "valueFrom": {"secretKeyRef": secret_key_ref(ref, generated_name, generated_key)}}


def build_generated_secret(
    name: str, namespace: str, labels: dict[str, str]
) -> dict[str, Any]:
    """The Secret a component creates for a Pulumi secret value; data is filled in by the shell (secret Output)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
    }
