"""The policy pack under the real Pulumi engine: `pulumi preview --policy-pack policies` on a reference stack, and the
offline checker on what `pulumi up` renders (the 0-crd/ 1-manifest/ layout).

Needs the offline toolchain (scripts/toolchain.sh); skipped with the reason when it is not built. Runs in a temporary
copy of the project with a file backend, so the repository's stacks and state are never touched.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from vllm_pulumi.policies.cli import main as check

from .harness.engine import REPO, render_variant, requires_engine, run_pulumi, write_stack

pytestmark = [pytest.mark.e2e, requires_engine]


def _stack(project: Path, name: str, deployment: dict[str, object]) -> None:
    write_stack(project, name, deployment)
    created = run_pulumi(project, "stack", "init", name)
    assert created.returncode == 0, created.stderr


def _local() -> dict[str, object]:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())
    return copy.deepcopy(document["config"]["vllm-pulumi:deployment"])  # type: ignore[no-any-return]


@pytest.mark.parametrize("stack", ["local", "edge", "prod", "multinode", "karpenter"])
def test_preview_with_the_pack_passes_every_reference_stack(project: Path, stack: str) -> None:
    """Rendered, so no cluster or cloud is needed: the same objects the stack deploys, through the same pack."""
    deployment = _local() if stack == "local" else render_variant(stack)
    _stack(project, f"policy-{stack}", deployment)
    result = run_pulumi(project, "preview", "--stack", f"policy-{stack}", "--policy-pack", "policies",
                        "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "vllm-pulumi@" in output  # the pack ran
    assert "[mandatory]" not in output


def test_preview_fails_on_a_mandatory_violation_and_honours_pack_config(project: Path) -> None:
    deployment = _local()
    deployment["models"][0]["engine"]["shutdown_timeout_seconds"] = 0  # type: ignore[index]
    _stack(project, "policy-abort", deployment)
    result = run_pulumi(project, "preview", "--stack", "policy-abort", "--policy-pack", "policies", "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "[mandatory]" in output and "shutdown-timeout" in output and "aborts in-flight requests" in output

    config = project / "policy-config.json"
    config.write_text(json.dumps({"shutdown-timeout": "advisory"}))
    result = run_pulumi(project, "preview", "--stack", "policy-abort", "--policy-pack", "policies",
                     "--policy-pack-config", str(config), "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "[advisory]" in output and "shutdown-timeout" in output


def test_offline_checker_on_the_render_directory(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _local()
    deployment["cluster"] = {"mode": "render", "directory": "rendered/policy-render"}
    _stack(project, "policy-render", deployment)
    result = run_pulumi(project, "up", "--stack", "policy-render", "--yes", "--non-interactive", "--skip-preview")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    rendered = project / "rendered" / "policy-render"
    assert (rendered / "1-manifest").is_dir()
    code = check([str(rendered), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)
    assert code == 0, findings
    assert {f["resource"]["kind"] for f in findings} <= {"Deployment"}
    assert all(f["file"].startswith(str(rendered / "1-manifest")) for f in findings)
