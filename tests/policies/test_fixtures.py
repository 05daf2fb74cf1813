"""Every rule has manifests that must make it fire and manifests that must not (the Polaris / kube-linter way).

tests/policies/fixtures/<rule>/fires/*.yaml and passes/*.yaml; a fixture named cannot-check-* must produce only the
advisory "cannot check" finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_pulumi.policies.engine import evaluate
from vllm_pulumi.policies.loader import load_paths
from vllm_pulumi.policies.registry import all_rules

FIXTURES = Path(__file__).parent / "fixtures"
RULES = all_rules()


def _cases(kind: str) -> list[tuple[str, Path]]:
    return [(rule, path) for rule in RULES for path in sorted((FIXTURES / rule / kind).glob("*.yaml"))]


def _id(case: tuple[str, Path]) -> str:
    return f"{case[0]}/{case[1].stem}"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_has_fixtures_that_fire_and_that_pass(rule: str) -> None:
    for kind in ("fires", "passes"):
        assert list((FIXTURES / rule / kind).glob("*.yaml")), f"{rule} has no fixture in fixtures/{rule}/{kind}/"


def test_no_fixture_directory_without_a_rule() -> None:
    orphans = {p.name for p in FIXTURES.iterdir() if p.is_dir()} - set(RULES) - {"reference"}
    assert not orphans, f"fixture folders for rules that do not exist: {sorted(orphans)}"


@pytest.mark.parametrize("case", _cases("fires"), ids=_id)
def test_fires(case: tuple[str, Path]) -> None:
    rule, path = case
    findings = evaluate(load_paths([str(path)]), only=[rule])
    assert findings, f"{rule} did not fire on {path.name}"
    assert all(f.policy == rule for f in findings)
    assert all(f.message and f.fix for f in findings)
    if path.stem.startswith("cannot-check"):
        assert all(f.enforcement == "advisory" and f.message.startswith("cannot check") for f in findings), findings
    else:
        assert any(not f.message.startswith("cannot check") for f in findings), findings
        assert all(f.enforcement == RULES[rule].enforcement for f in findings)


@pytest.mark.parametrize("case", _cases("passes"), ids=_id)
def test_passes(case: tuple[str, Path]) -> None:
    rule, path = case
    findings = evaluate(load_paths([str(path)]), only=[rule])
    assert not findings, "\n".join(f"{f.policy}: {f.message}" for f in findings)


def test_reference_manifests_have_no_findings() -> None:
    findings = evaluate(load_paths([str(FIXTURES / "reference")]))
    assert not findings, "\n".join(f"{f.policy} {f.resource['name']}: {f.message}" for f in findings)
