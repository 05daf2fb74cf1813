"""The pack as the Pulumi engine runs it: ``python -m pulumi.policy ENGINE_ADDRESS policies`` in a child process, then
the engine's own gRPC calls (GetAnalyzerInfo, Configure, Analyze, AnalyzeStack). Nothing is instantiated in-process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.rule_types import CANNOT_CHECK_POLICY

from .cases import fixture_tree

REPO = Path(__file__).resolve().parents[2]
FIXTURES = fixture_tree()
MANDATORY = 1  # proto EnforcementLevel: ADVISORY 0, MANDATORY 1, DISABLED 2, REMEDIATE 3


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pulumi.policy", "127.0.0.1:1", str(REPO / "policies")],
        cwd=REPO / "policies", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        if not port.isdigit():
            _, err = process.communicate(timeout=10)
            pytest.fail(f"the policy pack did not start: {port!r} {err[-2000:]}")
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _first(path: Path, kind: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == kind)


def test_analyzer_info_lists_every_rule_with_its_level(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "vllm-pulumi"
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert set(levels) == set(all_rules()) | {CANNOT_CHECK_POLICY}
    for name, rule in all_rules().items():
        assert (levels[name] == MANDATORY) == (rule.enforcement == "mandatory"), name


def test_analyze_reports_a_mandatory_violation(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    deployment = _first(FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml", "Deployment")
    response = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(
        type="kubernetes:apps/v1:Deployment", properties=_struct(deployment),
        urn="urn:pulumi:dev::vllm-pulumi::kubernetes:apps/v1:Deployment::vllm", name="vllm"))
    by_policy = {d.policyName: d for d in response.diagnostics}
    assert set(by_policy) == {"shutdown-timeout"}
    assert by_policy["shutdown-timeout"].enforcementLevel == MANDATORY
    assert "--shutdown-timeout is missing" in by_policy["shutdown-timeout"].message


def test_analyze_passes_the_reference(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    for path in sorted((FIXTURES / "reference").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            group = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
            response = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(
                type=f"kubernetes:{group}:{obj['kind']}", properties=_struct(obj), urn=f"urn:x::{obj['kind']}",
                name=obj["metadata"]["name"]))
            assert list(response.diagnostics) == [], (path.name, obj["kind"])


def test_analyze_stack_and_policy_config(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    objects = [d for d in yaml.safe_load_all(
        (FIXTURES / "autoscaler-cooldown" / "fires" / "cooldown-below-grace.yaml").read_text()) if d]
    resources = [analyzer_pb2.AnalyzerResource(
        type=f"kubernetes:{o['apiVersion']}:{o['kind']}", properties=_struct(o), urn=f"urn:x::{o['kind']}",
        name=o["metadata"]["name"]) for o in objects]
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    cooldown = [d for d in response.diagnostics if d.policyName == "autoscaler-cooldown"]
    assert [(d.urn, d.enforcementLevel) for d in cooldown] == [("urn:x::ScaledObject", MANDATORY)]
    assert "cooldownPeriod 130 s" in cooldown[0].message

    # CrossGuard pack config: the engine sends per-policy properties; the rule reads its setting from them.
    config = analyzer_pb2.PolicyConfig(enforcementLevel=0, properties=_struct({"min_cooldown_seconds": 100}))
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={"autoscaler-cooldown": config}))
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    cooldown = [d for d in response.diagnostics if d.policyName == "autoscaler-cooldown"]
    assert [d.enforcementLevel for d in cooldown] == [0]  # configured down to advisory
    assert "max(100 s" in cooldown[0].message
