"""The registry lists every rule from its topic modules, whatever was imported first, and every entry point loads the
rule modules under one name (``vllm_pulumi.policies``)."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.policies.cases import fixture_tree
from vllm_pulumi.policies import registry, rules
from vllm_pulumi.policies.registry import all_rules

REPO = Path(__file__).resolve().parents[2]
FIXTURE = fixture_tree() / "shutdown-timeout" / "fires" / "missing.yaml"
TOPICS = sorted(module.name for module in pkgutil.iter_modules(rules.__path__))


def _python(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter of this checkout (its ``src`` and root first on the path); its stdout."""
    path = os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


_RULES_AFTER_IMPORTING = """
import importlib, json, sys
for topic in sys.argv[1:]:
    importlib.import_module(f"vllm_pulumi.policies.rules.{topic}")
from vllm_pulumi.policies.registry import all_rules
print(json.dumps([[rule.name, rule.scope, rule.group] for rule in all_rules().values()]))
"""


@pytest.mark.parametrize("first", [[], ["placement"], ["coverage", "network_policies"], TOPICS[::-1]],
                         ids=["registry-only", "placement", "last-topics", "every-topic-reversed"])
def test_the_registry_is_the_same_whatever_is_imported_first(first: list[str]) -> None:
    found = json.loads(_python(_RULES_AFTER_IMPORTING, *first))
    assert found == [[rule.name, rule.scope, rule.group] for rule in all_rules().values()]


def test_every_topic_module_is_listed_and_every_rule_collected() -> None:
    listed = {module.__name__.rsplit(".", 1)[-1] for module in (*registry.PER_OBJECT_TOPICS, *registry.STACK_TOPICS)}
    assert listed == set(TOPICS)
    defined = [rule.name for module in dict.fromkeys((*registry.PER_OBJECT_TOPICS, *registry.STACK_TOPICS))
               for rule in module.RULES]
    assert sorted(defined) == sorted(all_rules())


def test_per_object_rules_come_before_stack_rules() -> None:
    scopes = [rule.scope for rule in all_rules().values()]
    assert scopes == sorted(scopes, key=["resource", "stack"].index)


_ENTRY_POINTS = """
import json, os, runpy, sys
import pulumi_policy

built = []


class RecordingPack:
    # Stands in for PolicyPack, which would start the analyzer's gRPC server and serve forever.
    def __init__(self, **kwargs):
        built.append(kwargs["policies"])


pulumi_policy.PolicyPack = RecordingPack
runpy.run_path("policies", run_name="__main__")  # as `python -m pulumi.policy ENGINE policies` runs the pack
assert built and built[0], "the pack built no policies"


def exit_raises(code):
    raise SystemExit(code)


os._exit = exit_raises  # check.py leaves through os._exit
codes = []
for module, argv in (("policies.check", [sys.argv[1], "--no-hub", "--format", "json"]),
                     ("vllm_pulumi.policies.check", [sys.argv[1], "--no-hub", "--format", "json"]),
                     ("policies.docs", [sys.argv[2]])):
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        codes.append(exit.code)
print(json.dumps({"codes": codes, "modules": sorted(sys.modules)}))
"""


def test_pack_and_checker_load_each_rule_module_once(tmp_path: Path) -> None:
    """The pack's entry module, ``python -m policies.check``, ``python -m vllm_pulumi.policies.check`` and
    ``python -m policies.docs`` in one interpreter: every policies module is loaded as ``vllm_pulumi.policies.X``
    only (the top-level ``policies`` package itself, which ``-m policies.check`` must import, holds nothing)."""
    out = json.loads(_python(_ENTRY_POINTS, str(FIXTURE), str(tmp_path / "policies.md")).splitlines()[-1])
    modules = set(out["modules"])
    assert out["codes"][:2] == [1, 1]  # the fixture's mandatory finding, through both checker names
    assert "vllm_pulumi.policies.rules.placement" in modules
    twice = sorted(name for name in modules if name.startswith("policies.") and f"vllm_pulumi.{name}" in modules)
    assert twice == []
    assert not [name for name in modules if name.startswith("policies.")]


def test_no_policies_module_shadows_the_standard_library() -> None:
    """The pack runs with policies/ first on sys.path (runpy.run_path), so a policies/secrets.py would shadow the
    standard library's ``secrets`` for everything the pack imports."""
    names = {path.stem for path in (REPO / "policies").iterdir()
             if path.suffix == ".py" or (path / "__init__.py").is_file()}
    assert not names & set(sys.stdlib_module_names)
