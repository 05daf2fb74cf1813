"""The offline checker on real vLLM manifests published by other projects (tests/policies/corpus/, listed with repo,
path, commit and licence in corpus/SOURCES): it never crashes, never passes a vLLM workload silently, and finds
exactly what the hand-reviewed <manifest>.expected says (every mandatory finding there carries the reviewer's reason).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from vllm_pulumi.policies.engine import evaluate
from vllm_pulumi.policies.loader import load_paths
from vllm_pulumi.policies.offline import Coverage
from vllm_pulumi.policies.kinds import NON_WORKLOAD_KINDS, POD_KINDS
from vllm_pulumi.policies.vllm_command import vllm_containers

CORPUS = Path(__file__).parent / "corpus"
SOURCES = yaml.safe_load((CORPUS / "SOURCES").read_text(encoding="utf-8"))
MANIFESTS = [CORPUS / row["file"] for row in SOURCES["manifests"]]


def test_sources_name_every_manifest_and_six_projects() -> None:
    on_disk = {p for p in CORPUS.glob("*/*") if p.suffix in (".yaml", ".yml")}
    assert on_disk == set(MANIFESTS)
    assert len(MANIFESTS) >= 20
    projects = {row["repo"] for row in SOURCES["manifests"]}
    assert len(projects) >= 6
    for row in SOURCES["manifests"]:
        assert len(row["commit"]) == 40 and row["licence"] in ("Apache-2.0", "MIT"), row
    assert {p["name"] for p in SOURCES["projects"]} == {Path(row["file"]).parts[0] for row in SOURCES["manifests"]}


def _expected(manifest: Path) -> list[str]:
    lines = manifest.with_name(manifest.name + ".expected").read_text(encoding="utf-8").splitlines()
    entries = [line for line in lines if line and not line.startswith("#")]
    for line in entries:
        if line.startswith("mandatory "):
            reason = line.partition("  # ")[2]
            assert reason and reason != "None", f"{manifest.name}: mandatory finding without a review: {line}"
    return sorted(line.partition("  # ")[0] for line in entries)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_findings_are_the_reviewed_ones(manifest: Path) -> None:
    findings = evaluate(load_paths([str(manifest)]))
    found = sorted(f"{f.enforcement} {f.policy} {f.resource['kind']}/{f.resource['name']}" for f in findings)
    expected = _expected(manifest)
    assert Counter(found) == Counter(expected), (
        f"new: {sorted((Counter(found) - Counter(expected)).elements())}; "
        f"gone: {sorted((Counter(expected) - Counter(found)).elements())}"
    )


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_vllm_workload_passes_silently(manifest: Path) -> None:
    resources = load_paths([str(manifest)])
    findings = evaluate(resources, only=["vllm-workload-readable"])
    flagged = {(f.resource["kind"], f.resource["name"]) for f in findings}
    for resource in resources:
        if resource.kind in NON_WORKLOAD_KINDS:
            continue
        if resource.kind in POD_KINDS:
            if resource.is_vllm and not resource.servers:
                assert (resource.kind, resource.name) in flagged, f"{resource.describe()}: engine unread, not said"
        elif next(vllm_containers(resource.spec), None) is not None:
            assert (resource.kind, resource.name) in flagged, f"{resource.describe()}: unreadable kind, not said"


def test_summary_counts_every_vllm_workload() -> None:
    coverage = Coverage()
    coverage.add([r for manifest in MANIFESTS for r in load_paths([str(manifest)])])
    assert coverage.unreadable >= 1  # production-stack's VLLMRuntime
    assert coverage.partly >= 5  # Ray Serve apps and LLMInferenceServices
    assert coverage.checked >= 10
    assert "not checked" in coverage.summary()


def test_text_summary_says_how_many_workloads_were_and_were_not_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_pulumi.policies.cli import main

    files = [str(m) for m in MANIFESTS if m.parent.name in ("production-stack", "kuberay")]
    assert main([*files, "--no-hub"]) == 1
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.endswith("6 vLLM workload(s): 2 checked, 3 checked without their engine flags, 1 not checked "
                            "(kind unreadable)"), summary
