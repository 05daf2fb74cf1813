"""Validate rendered Kubernetes dicts: core kinds against the Kubernetes OpenAPI schema (kubernetes-validate, strict),
custom resources against the upstream CRDs in <repo>/../shared/crds (jsonschema on the served version's schema).

Shared helper for every test that renders manifests. When shared/ is absent the CRD checks ``pytest.skip`` with the
reason instead of passing silently.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

# The newest Kubernetes minor kubernetes-validate 1.37 bundles that the EKS and kind clusters we target run (1.34).
KUBERNETES_VERSION = "1.34"
REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CRD_DIR = SHARED / "crds"


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema of every served version of every CRD in shared/crds."""
    if not CRD_DIR.is_dir():
        pytest.skip(f"CRD schemas not found at {CRD_DIR} (shared/ is laid beside the repo in sessions and CI)")
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not document or document.get("kind") != "CustomResourceDefinition":
                continue
            spec = document["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    api_version = f"{spec['group']}/{version['name']}"
                    schemas[(api_version, spec["names"]["kind"])] = _closed(version["schema"]["openAPIV3Schema"])
    return schemas


def _closed(schema: Any) -> Any:
    """The API server prunes unknown fields of a structural schema; a typo would vanish silently. Reject them."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: _closed(value) for key, value in schema.items()}
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        result["additionalProperties"] = False
    return result


def _is_core(obj: dict[str, Any]) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io") and not group.startswith(
        ("leaderworkerset.", "inference.networking.")
    )


def validate_object(obj: dict[str, Any]) -> None:
    """Raise AssertionError naming the object and the schema violation."""
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    key = (obj["apiVersion"], obj["kind"])
    if _is_core(obj):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{name}: {error.message} at {'.'.join(map(str, error.path))}") from None
        return
    schemas = crd_schemas()
    if key not in schemas:
        raise AssertionError(f"{name}: no CRD schema for {key} in {CRD_DIR}")
    validator = jsonschema.Draft7Validator(schemas[key])
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        details = "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
        raise AssertionError(f"{name}: {details}")


def validate_all(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        validate_object(obj)
