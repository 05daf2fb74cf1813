"""The policy pack under the real Pulumi engine: `pulumi preview --policy-pack policies` on a reference stack, and the
offline checker on what `pulumi up` renders (the 0-crd/ 1-manifest/ layout).

Needs the offline toolchain (scripts/toolchain.sh); skipped with the reason when it is not built. Runs in a temporary
copy of the project with a file backend, so the repository's stacks and state are never touched.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vllm_pulumi.policies.cli import main as check

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("VLLM_PULUMI_CACHE", Path.home() / ".cache" / "vllm-pulumi")) / "tools" / "bin"
NEEDED = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-kubernetes")
COPIED = ("Pulumi.yaml", "__main__.py", "pyproject.toml", "components", "runtime", "policies", "src", "stacks")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not all((TOOLS / tool).exists() for tool in NEEDED) or not (REPO / "__main__.py").exists(),
                       reason=f"offline Pulumi toolchain not built in {TOOLS} (run scripts/toolchain.sh)"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("policy-project")
    for item in COPIED:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, root / item, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, root / item)
    (root / ".venv").symlink_to(Path(sys.prefix))  # PulumiPolicy.yaml: virtualenv ../.venv
    (root / ".state").mkdir()
    return root


def _pulumi(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update({
        "PATH": f"{TOOLS}{os.pathsep}{env.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{project / '.state'}",
        "PULUMI_CONFIG_PASSPHRASE": "",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": str(project / ".pulumi-home"),
    })
    return subprocess.run(["pulumi", *args], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def _stack(project: Path, name: str, deployment: dict[str, object]) -> None:
    (project / "stacks" / f"Pulumi.{name}.yaml").write_text(
        yaml.safe_dump({"config": {"vllm-pulumi:deployment": deployment}}, sort_keys=False))
    created = _pulumi(project, "stack", "init", name)
    assert created.returncode == 0, created.stderr


def _local() -> dict[str, object]:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())
    return copy.deepcopy(document["config"]["vllm-pulumi:deployment"])  # type: ignore[no-any-return]


def test_preview_with_the_pack_passes_the_local_stack(project: Path) -> None:
    _stack(project, "policy-local", _local())
    result = _pulumi(project, "preview", "--stack", "policy-local", "--policy-pack", "policies", "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "vllm-pulumi@" in output  # the pack ran
    assert "[mandatory]" not in output


def test_preview_fails_on_a_mandatory_violation_and_honours_pack_config(project: Path) -> None:
    deployment = _local()
    deployment["models"][0]["engine"]["shutdown_timeout_seconds"] = 0  # type: ignore[index]
    _stack(project, "policy-abort", deployment)
    result = _pulumi(project, "preview", "--stack", "policy-abort", "--policy-pack", "policies", "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "[mandatory]" in output and "shutdown-timeout" in output and "aborts in-flight requests" in output

    config = project / "policy-config.json"
    config.write_text(json.dumps({"shutdown-timeout": "advisory"}))
    result = _pulumi(project, "preview", "--stack", "policy-abort", "--policy-pack", "policies",
                     "--policy-pack-config", str(config), "--non-interactive")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "[advisory]" in output and "shutdown-timeout" in output


def test_offline_checker_on_the_render_directory(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _local()
    deployment["cluster"] = {"mode": "render", "directory": "rendered/policy-render"}
    _stack(project, "policy-render", deployment)
    result = _pulumi(project, "up", "--stack", "policy-render", "--yes", "--non-interactive", "--skip-preview")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    rendered = project / "rendered" / "policy-render"
    assert (rendered / "1-manifest").is_dir()
    code = check([str(rendered), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)
    assert code == 0, findings
    assert {f["resource"]["kind"] for f in findings} <= {"Deployment"}
    assert all(f["file"].startswith(str(rendered / "1-manifest")) for f in findings)
