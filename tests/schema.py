"""Validate rendered Kubernetes dicts: core kinds against the Kubernetes OpenAPI schema (kubernetes-validate, strict),
custom resources against the upstream CRDs of the versions the project pins (jsonschema on the served version's schema).

The CRDs come from the Go modules of those versions: scripts/toolchain.sh (`build crds`, part of `make test`) copies
them out of the module cache into ``$VLLM_PULUMI_CACHE/crds`` with a SOURCES.tsv. A kind none of them defines is
looked up in ../shared/crds when that reference copy lies beside the repository. A kind found nowhere fails the test:
nothing is skipped.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from .toolchain import CACHE, REPO

# The newest Kubernetes minor kubernetes-validate 1.37 bundles that the EKS and kind clusters we target run (1.34).
KUBERNETES_VERSION = "1.34"
MODULE_CRD_DIR = CACHE / "crds"
"""CRDs copied from the pinned Go modules by scripts/toolchain.sh (authoritative)."""
SHARED_CRD_DIR = REPO.parent / "shared" / "crds"
"""The team's reference copies, used only for kinds the modules do not provide."""


def crd_files() -> list[Path]:
    """The CRD files to install or validate against: the modules' first; shared/ only for kinds they lack."""
    if not (MODULE_CRD_DIR / "SOURCES.tsv").is_file():
        pytest.fail(f"upstream CRDs not found in {MODULE_CRD_DIR}: run `scripts/toolchain.sh build crds` "
                    "(`make test` does)", pytrace=False)
    files = sorted(MODULE_CRD_DIR.glob("*.yaml"))
    names = {path.name for path in files}
    if SHARED_CRD_DIR.is_dir():
        files += [path for path in sorted(SHARED_CRD_DIR.glob("*.yaml")) if path.name not in names]
    return files


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema of every served version of every CRD; the first file defining a kind
    wins (the pinned modules' before shared/)."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in crd_files():
        for document in yaml.safe_load_all(path.read_text()):
            if not document or document.get("kind") != "CustomResourceDefinition":
                continue
            spec = document["spec"]
            for version in spec["versions"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                if version.get("served", True) and key not in schemas:
                    schemas[key] = _closed(version["schema"]["openAPIV3Schema"])
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
        raise AssertionError(f"{name}: no CRD schema for {key} in {MODULE_CRD_DIR} or {SHARED_CRD_DIR}")
    validator = jsonschema.Draft7Validator(schemas[key])
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        details = "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
        raise AssertionError(f"{name}: {details}")


def validate_all(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        validate_object(obj)
