"""Golden rendered manifests of every reference stack, each object validated against its schema.

`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/components/test_golden.py` rewrites tests/golden/<stack>/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.schema import validate_all
from vllm_pulumi.components.manifests import STACKS_DIR, build_manifests, load_stack

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STACKS = sorted(path.name.removeprefix("Pulumi.").removesuffix(".yaml") for path in STACKS_DIR.glob("Pulumi.*.yaml"))


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, width=120, explicit_start=True)


def test_reference_stacks_present() -> None:
    assert {"local", "edge", "prod", "multinode", "karpenter"} <= set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_golden_manifests(stack: str) -> None:
    objects = build_manifests(load_stack(stack))
    text = render(objects)
    path = GOLDEN / stack / "manifests.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file for {stack}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{stack} manifests changed: review the diff, then UPDATE_GOLDEN=1"
    # The golden text parses back to the same objects (what a reviewer reads is what is applied).
    assert list(yaml.safe_load_all(text)) == objects


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_objects_match_their_schemas(stack: str) -> None:
    validate_all(build_manifests(load_stack(stack)))


@pytest.mark.parametrize("stack", STACKS)
def test_rendering_is_deterministic(stack: str) -> None:
    assert render(build_manifests(load_stack(stack))) == render(build_manifests(load_stack(stack)))
