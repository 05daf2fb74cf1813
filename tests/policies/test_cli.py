"""The offline checker: exit codes, output shapes, input errors, directory layouts, --config and exemptions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_pulumi.policies.cli import main

from .cases import fixture_tree

FIXTURES = fixture_tree()
REPO = Path(__file__).resolve().parents[2]
REFERENCE = FIXTURES / "reference"
NO_SHUTDOWN_TIMEOUT = FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_input_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(REFERENCE))
    assert code == 0
    assert "0 mandatory" in out


def test_mandatory_finding_exits_1_and_text_names_rule_resource_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT))
    assert code == 1
    assert "MANDATORY [high] shutdown-timeout: Deployment inference/vllm-llama3-8b" in out
    assert "fix: add --shutdown-timeout=90" in out


def test_advisory_findings_only_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(FIXTURES / "gpu-toleration" / "fires" / "no-toleration.yaml"))
    assert code == 0
    assert "ADVISORY [low] gpu-toleration" in out


def test_json_output_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT), "--format", "json")
    assert code == 1
    findings = json.loads(out)
    assert isinstance(findings, list) and findings
    for finding in findings:
        assert {"policy", "enforcement", "severity", "resource", "message", "fix"} <= set(finding)
        assert finding["enforcement"] in ("mandatory", "advisory")
        assert finding["severity"] in ("low", "medium", "high", "critical")
        assert set(finding["resource"]) == {"apiVersion", "kind", "namespace", "name"}
    shutdown = next(f for f in findings if f["policy"] == "shutdown-timeout")
    assert shutdown["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "inference",
                                    "name": "vllm-llama3-8b"}
    assert "default 0" in shutdown["message"]


def test_json_output_of_clean_input_is_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(REFERENCE), "--format", "json")
    assert (code, json.loads(out)) == (0, [])


def test_invalid_yaml_exits_2_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: [unclosed\n  namespace: x\n")
    code, out, err = run(capsys, str(bad))
    assert code == 2
    assert f"{bad}:" in err
    assert "Traceback" not in err
    line = int(err.split(f"{bad}:")[1].split(":")[0])
    assert 4 <= line <= 6


def test_document_that_is_not_an_object_exits_2_with_its_line(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n- just\n- a list\n")
    code, _, err = run(capsys, str(bad))
    assert code == 2
    assert f"{bad}:4:" in err


def test_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file" in err


def test_walks_a_pulumi_render_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The pulumi-kubernetes renderYamlToDirectory layout: CRDs in 0-crd/, the rest in 1-manifest/, one object per
    file; a stack rule (cooldown vs the target's grace) must see objects from different files."""
    (tmp_path / "0-crd").mkdir()
    (tmp_path / "1-manifest").mkdir()
    shutil.copy("/work/shared/crds/keda.sh_scaledobjects.yaml", tmp_path / "0-crd" / "keda.yaml") \
        if Path("/work/shared/crds/keda.sh_scaledobjects.yaml").exists() else None
    fires = FIXTURES / "autoscaler-cooldown" / "fires" / "short-cooldown.yaml"
    text = fires.read_text()
    for index, document in enumerate(text.split("\n---\n")):
        (tmp_path / "1-manifest" / f"v1-object-{index}.yaml").write_text(document)
    code, out, _ = run(capsys, str(tmp_path), "--format", "json")
    findings = json.loads(out)
    assert code == 1
    assert any(f["policy"] == "autoscaler-cooldown" and f["resource"]["kind"] == "ScaledObject" for f in findings)
    assert all(f["file"].startswith(str(tmp_path / "1-manifest")) for f in findings)


def test_helm_template_output_with_comments_and_empty_documents(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    body = (FIXTURES / "reference" / "single-node.yaml").read_text()
    helm = "---\n# Source: vllm/templates/empty.yaml\n---\n" + body.replace("\n---\n", "\n---\n# Source: vllm/x.yaml\n")
    (tmp_path / "out.yaml").write_text(helm)
    code, out, _ = run(capsys, str(tmp_path / "out.yaml"))
    assert code == 0, out


def test_config_overrides_enforcement_and_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text("rules:\n  shutdown-timeout: {enforcement: advisory}\n")
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT), "--config", str(config), "--format", "json")
    assert code == 0
    assert {f["enforcement"] for f in json.loads(out) if f["policy"] == "shutdown-timeout"} == {"advisory"}

    config.write_text("rules:\n  grace-covers-drain: {margin_seconds: 40}\n  gpu-toleration: disabled\n")
    code, out, _ = run(capsys, str(REFERENCE), "--config", str(config), "--format", "json")
    findings = json.loads(out)
    assert code == 1  # 135 s < 15 + 90 + 40
    assert {f["policy"] for f in findings} == {"grace-covers-drain"}
    assert any("margin 40 s = 145 s" in f["message"] for f in findings)

    config.write_text("rules:\n  metrics-scraped: mandatory\n")
    code, _, _ = run(capsys, str(FIXTURES / "metrics-scraped" / "fires" / "no-monitor.yaml"), "--config", str(config))
    assert code == 1


@pytest.mark.parametrize("body, expected", [
    ("rules:\n  no-such-rule: {enforcement: advisory}\n", "unknown rule 'no-such-rule'"),
    ("rules:\n  shutdown-timeout: {enforcement: sometimes}\n", "enforcement 'sometimes'"),
    ("rules:\n  grace-covers-drain: {margin: 5}\n", "unknown setting 'margin'"),
    ("rules:\n  grace-covers-drain: {margin_seconds: soon}\n", "must be an integer"),
    ("rules: [\n", "invalid YAML"),
])
def test_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, expected: str) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text(body)
    code, _, err = run(capsys, str(REFERENCE), "--config", str(config))
    assert code == 2
    assert str(config) in err and expected in err


def test_exemption_annotation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = NO_SHUTDOWN_TIMEOUT.read_text().replace(
        "  name: vllm-llama3-8b\n",
        "  name: vllm-llama3-8b\n  annotations:\n    vllm-pulumi.dev/policy-exempt: shutdown-timeout, grace-covers-drain\n",
        1,
    )
    exempt = tmp_path / "exempt.yaml"
    exempt.write_text(text)
    code, out, _ = run(capsys, str(exempt), "--format", "json")
    assert code == 0
    assert not [f for f in json.loads(out) if f["policy"] == "shutdown-timeout"]


def test_exemption_of_a_stack_rule_is_read_from_the_object_at_fault(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fires = FIXTURES / "autoscaler-cooldown" / "fires" / "short-cooldown.yaml"
    text = fires.read_text().replace(
        "kind: ScaledObject\nmetadata:\n",
        "kind: ScaledObject\nmetadata:\n  annotations: {vllm-pulumi.dev/policy-exempt: autoscaler-cooldown}\n")
    exempt = tmp_path / "exempt.yaml"
    exempt.write_text(text)
    code, out, _ = run(capsys, str(exempt), "--format", "json")
    assert not [f for f in json.loads(out) if f["policy"] == "autoscaler-cooldown"]


def test_module_entry_point_runs_from_the_repo_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "policies.check", str(NO_SHUTDOWN_TIMEOUT), "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert any(f["policy"] == "shutdown-timeout" for f in json.loads(result.stdout))


def test_crossguard_policy_config_file_works_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same JSON a `pulumi preview --policy-pack-config` gets: `all`, enforcementLevel, settings, cannot-check."""
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({
        "all": "advisory",
        "grace-covers-drain": {"enforcementLevel": "mandatory", "margin_seconds": 130},
        "vllm-cannot-check": "advisory",
    }))
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT), "--config", str(config), "--format", "json")
    levels = {f["policy"]: f["enforcement"] for f in json.loads(out)}
    assert levels["shutdown-timeout"] == "advisory"
    assert levels["grace-covers-drain"] == "mandatory"
    assert code == 1


def test_jobs_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(4):
        (tmp_path / f"{i}.yaml").write_text(NO_SHUTDOWN_TIMEOUT.read_text())
    outputs = []
    for jobs in ("1", "2"):
        code, out, _ = run(capsys, str(tmp_path), "--jobs", jobs, "--format", "json")
        assert code == 1
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1] and len(outputs[0]) >= 4


def test_standard_input_for_helm_template_pipes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "policies.check", "-", "--format", "json"], input=NO_SHUTDOWN_TIMEOUT.read_text(),
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)
    assert any(f["policy"] == "shutdown-timeout" and f["file"] == "<stdin>" for f in findings)


def test_a_directory_without_yaml_is_an_error_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("nothing to check")
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and "no .yaml, .yml or .json files" in err
