"""Every rule has manifests that must make it fire and manifests that must not (the Polaris / kube-linter way).

tests/policies/fixtures/<rule>.yaml holds the rule's ``fires:`` and ``passes:`` cases, each a base manifest and the
changes that make it (cases.py builds them); a case named cannot-check-* must produce only the advisory "cannot check"
finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_pulumi.policies.engine import evaluate
from vllm_pulumi.policies.loader import load_paths
from vllm_pulumi.policies.registry import all_rules

from .cases import FIXTURES, KINDS, REFERENCE, Case, case_files, cases_of

RULES = all_rules()
CASES = {path.stem: cases_of(path.stem) for path in case_files()}


def _cases(kind: str) -> list[Case]:
    return [case for rule in RULES for case in CASES.get(rule, {}).get(kind, [])]


def _id(case: Case) -> str:
    return case.id


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_has_fixtures_that_fire_and_that_pass(rule: str) -> None:
    for kind in KINDS:
        assert CASES.get(rule, {}).get(kind), f"{rule} has no {kind} case in fixtures/{rule}.yaml"


def test_no_fixture_directory_without_a_rule() -> None:
    orphans = set(CASES) - set(RULES)
    assert not orphans, f"case files for rules that do not exist: {sorted(f'{o}.yaml' for o in orphans)}"
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir()} - {REFERENCE.name}
    assert not folders, f"fixture folders beside reference/ that no test reads: {sorted(folders)}"


@pytest.mark.parametrize("case", _cases("fires"), ids=_id)
def test_fires(case: Case, tmp_path: Path) -> None:
    rule, path = case.rule, case.write(tmp_path)
    findings = evaluate(load_paths([str(path)]), only=[rule])
    assert findings, f"{rule} did not fire on {case.name}"
    assert all(f.policy == rule for f in findings)
    assert all(f.message and f.fix for f in findings)
    if case.name.startswith("cannot-check"):
        assert all(f.enforcement == "advisory" and f.message.startswith("cannot check") for f in findings), findings
    else:
        assert any(not f.message.startswith("cannot check") for f in findings), findings
        assert all(f.enforcement == RULES[rule].enforcement for f in findings)


@pytest.mark.parametrize("case", _cases("passes"), ids=_id)
def test_passes(case: Case, tmp_path: Path) -> None:
    findings = evaluate(load_paths([str(case.write(tmp_path))]), only=[case.rule])
    assert not findings, "\n".join(f"{f.policy}: {f.message}" for f in findings)


def test_reference_manifests_have_no_findings() -> None:
    findings = evaluate(load_paths([str(REFERENCE)]))
    assert not findings, "\n".join(f"{f.policy} {f.resource['name']}: {f.message}" for f in findings)
