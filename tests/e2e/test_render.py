"""The real Pulumi engine and Kubernetes provider in render mode: `pulumi up` writes exactly build_manifests().

Needs the offline toolchain (scripts/toolchain.sh: pulumi, the Python language host, pulumi-resource-kubernetes);
skipped with the reason when it is not built. Runs in a temporary copy of the project with a file backend, so the
repository's stack files and state are never touched.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_pulumi.components.manifests import build_manifests, read_stack_config
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.vocabulary import GPU_RESOURCE

from .harness.engine import render_variant, requires_engine, run_pulumi

pytestmark = [pytest.mark.e2e, requires_engine]


CASES = {"local": read_stack_config("local"), "multinode-render": render_variant("multinode"),
         "prod-render": render_variant("prod"), "karpenter-render": render_variant("karpenter")}
CASES["local"]["cluster"]["directory"] = "rendered/local"


def _quantities_as_strings(value: Any) -> Any:
    """The provider writes resource quantities as strings (nvidia.com/gpu: 8 -> "8")."""
    if isinstance(value, dict):
        return {key: str(item) if key == GPU_RESOURCE else _quantities_as_strings(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_quantities_as_strings(item) for item in value]
    return value


@pytest.mark.parametrize("case", sorted(CASES))
def test_pulumi_up_in_render_mode_writes_exactly_the_built_manifests(project: Path, case: str) -> None:
    raw = CASES[case]
    (project / "stacks" / f"Pulumi.{case}.yaml").write_text(
        yaml.safe_dump({"config": {"vllm-pulumi:deployment": raw}}, sort_keys=False))
    created = run_pulumi(project, "stack", "init", case)
    assert created.returncode == 0, created.stderr
    result = run_pulumi(project, "up", "--stack", case, "--yes", "--non-interactive", "--skip-preview")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]

    rendered_dir = project / "rendered" / case.removesuffix("-render")
    rendered = {}
    for path in sorted(rendered_dir.glob("*/*.yaml")):
        document = yaml.safe_load(path.read_text())
        rendered[(document["kind"], document["metadata"]["name"])] = document
    expected = {(o["kind"], o["metadata"]["name"]): o for o in build_manifests(load_deployment(raw).spec)}
    assert sorted(rendered) == sorted(expected)
    for key, document in rendered.items():
        assert _quantities_as_strings(document) == _quantities_as_strings(expected[key]), (
            f"{key} differs from build_manifests()")


def test_a_bad_spec_fails_with_the_field_path_and_no_traceback(project: Path) -> None:
    raw = copy.deepcopy(CASES["local"])
    raw["models"][0]["engine"]["tensor_parallel_size"] = 3
    raw["cluster"]["directory"] = "rendered/bad"
    (project / "stacks" / "Pulumi.bad.yaml").write_text(
        yaml.safe_dump({"config": {"vllm-pulumi:deployment": raw}}, sort_keys=False))
    assert run_pulumi(project, "stack", "init", "bad").returncode == 0
    result = run_pulumi(project, "up", "--stack", "bad", "--yes", "--non-interactive", "--skip-preview")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "vllm-pulumi:deployment.models[0].engine.tensor_parallel_size=3" in output
    assert "Traceback" not in output
    assert not (project / "rendered" / "bad").exists(), "nothing was rendered"
