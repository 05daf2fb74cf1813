"""docs/policies.md is generated from the rule registry; regenerate with `python -m policies.docs`."""

from __future__ import annotations

from pathlib import Path

from vllm_pulumi.policies.docs import render
from vllm_pulumi.policies.registry import all_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def test_docs_are_up_to_date() -> None:
    assert DOC.read_text() == render(), "docs/policies.md is stale: run `.venv/bin/python -m policies.docs`"


def test_every_rule_is_documented_with_why_and_fix() -> None:
    text = DOC.read_text()
    for rule in all_rules().values():
        assert f"### `{rule.name}`" in text
        assert rule.why and rule.fix and rule.description
