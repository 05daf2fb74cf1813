"""kube-score, the linter many platform teams gate manifests on, over every reference stack's golden output.

A finding is either fixed in the builders or stays with a reason in docs/linters.md and a ``kube-score/ignore``
annotation on the object (components/builders/linters.py). Two runs per golden: as a platform's CI runs kube-score
(nothing below OK may remain), and with the annotations disabled (every finding must be documented, with a message
the docs list for it, on an object whose annotation names it). kube-score is built by scripts/toolchain.sh, which
`make test` runs first; a missing binary fails here instead of skipping.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.components.specs import plan
from tests.toolchain import BINARIES, REPO, pinned_versions
from vllm_pulumi.components.builders import network, serving
from vllm_pulumi.components.builders.linters import KUBE_SCORE_REASONS
from vllm_pulumi.components.manifests import STACKS_DIR
from vllm_pulumi.runtime.vocabulary import KUBE_SCORE_IGNORE_ANNOTATION as KUBE_SCORE_IGNORE

KUBE_SCORE = BINARIES / "kube-score"
GOLDEN = REPO / "tests" / "golden"
DOCS = REPO / "docs" / "linters.md"
# Stacks enumerated as tests/components/test_golden.py does: every stacks/Pulumi.<stack>.yaml has a golden.
STACKS = sorted(path.name.removeprefix("Pulumi.").removesuffix(".yaml") for path in STACKS_DIR.glob("Pulumi.*.yaml"))
# kube-score grades: 1 CRITICAL, 5 WARNING, 7 and 10 OK.
GRADE_OK = 7


@dataclass(frozen=True)
class Finding:
    obj: str
    check: str
    summary: str
    annotation: frozenset[str]


def kube_score() -> Path:
    if not KUBE_SCORE.is_file():
        raise AssertionError(f"{KUBE_SCORE} is missing: run scripts/toolchain.sh (make test does) to build kube-score "
                             f"{pinned_versions()['KUBE_SCORE_VERSION']}")
    return KUBE_SCORE


@cache
def optional_checks() -> tuple[str, ...]:
    """The checks kube-score runs only when asked (`kube-score list`: id,target,comment,optional|default)."""
    result = subprocess.run([str(kube_score()), "list"], capture_output=True, text=True, timeout=60, check=True)
    rows = [line.split(",") for line in result.stdout.splitlines()]
    return tuple(row[0] for row in rows if row and row[-1] == "optional")


def score(path: Path, *, honour_annotations: bool) -> list[dict[str, Any]]:
    """kube-score as the strictest platform CI runs it: every optional check enabled too."""
    command = [str(kube_score()), "score", "--output-format", "json", str(path)]
    for check in optional_checks():
        command += ["--enable-optional-test", check]
    if not honour_annotations:
        command.insert(2, "--disable-ignore-checks-annotations")
    # Exit status 1 means "a CRITICAL finding"; the JSON says which, so judge that instead.
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), f"{' '.join(command)}: exit {result.returncode}: {result.stderr[-2000:]}"
    return list(json.loads(result.stdout))


def findings(report: list[dict[str, Any]]) -> list[Finding]:
    """Every comment of every check graded below OK and not skipped, one Finding per message."""
    result = []
    for obj in report:
        annotations = (obj["object_meta"].get("annotations") or {})
        ignored = frozenset(item.strip() for item in annotations.get(KUBE_SCORE_IGNORE, "").split(",") if item.strip())
        for check in obj["checks"]:
            if check["skipped"] or check["grade"] >= GRADE_OK:
                continue
            for comment in check["comments"] or [{"summary": ""}]:
                result.append(Finding(obj["object_name"], check["check"]["id"], comment["summary"], ignored))
    return result


def documented() -> tuple[dict[str, set[str]], set[str]]:
    """From docs/linters.md: {check that stays: the messages it may give} and the checks listed as fixed."""
    staying: dict[str, set[str]] = {}
    fixed: set[str] = set()
    section = None
    for line in DOCS.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        row = re.match(r"\| `([a-z0-9-]+)` \| (.*?) \|", line)
        if not row:
            continue
        if section == "Fixed":
            fixed.add(row.group(1))
        elif section == "Findings that stay":
            staying[row.group(1)] = set(re.findall(r"`([^`]+)`", row.group(2)))
    return staying, fixed


def undocumented(found: list[Finding]) -> list[str]:
    """Findings neither fixed nor documented as staying (with their message) and exempted on their object."""
    staying, _ = documented()
    problems = []
    for item in found:
        if item.check not in staying:
            problems.append(f"{item.obj}: {item.check} ({item.summary}) is not fixed and not in {DOCS.name}")
        elif item.summary not in staying[item.check]:
            problems.append(f"{item.obj}: {item.check} says {item.summary!r}, which {DOCS.name} does not list")
        elif item.check not in item.annotation:
            problems.append(f"{item.obj}: {item.check} is documented but the object has no {KUBE_SCORE_IGNORE} for it")
    return problems


def golden(stack: str) -> Path:
    path = GOLDEN / stack / "manifests.yaml"
    assert path.is_file(), f"no golden for {stack}: UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/components/test_golden.py"
    return path


def test_every_reference_stack_is_scored() -> None:
    assert {"local", "edge", "prod", "multinode"} <= set(STACKS)


def test_optional_checks_are_found() -> None:
    """The strict runs enable kube-score's optional checks; an empty list would quietly drop them."""
    assert {"container-seccomp-profile", "container-cpu-requests-equal-limits"} <= set(optional_checks())


@pytest.mark.parametrize("stack", STACKS)
def test_kube_score_passes_as_a_platform_ci_runs_it(stack: str) -> None:
    remaining = findings(score(golden(stack), honour_annotations=True))
    assert not remaining, "\n".join(f"{f.obj}: {f.check}: {f.summary}" for f in remaining)


@pytest.mark.parametrize("stack", STACKS)
def test_every_finding_is_fixed_or_documented_and_exempted(stack: str) -> None:
    found = findings(score(golden(stack), honour_annotations=False))
    assert not undocumented(found), "\n".join(undocumented(found))
    _, fixed = documented()
    assert not {f.check for f in found} & fixed, "a check docs/linters.md lists as fixed fires again"


def test_docs_and_builders_list_the_same_exemptions_and_each_is_needed() -> None:
    """The docs table, the builders' reasons and the annotations agree, and no exemption silences nothing."""
    staying, fixed = documented()
    assert set(staying) == set(KUBE_SCORE_REASONS), "docs/linters.md and components/builders/linters.py disagree"
    assert not set(staying) & fixed
    annotated, fired = set(), set()
    for stack in STACKS:
        for obj in yaml.safe_load_all(golden(stack).read_text()):
            value = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(KUBE_SCORE_IGNORE)
            if value:
                annotated.update(value.split(","))
        fired.update(f.check for f in findings(score(golden(stack), honour_annotations=False)))
    assert annotated <= set(staying), annotated - set(staying)
    assert set(staying) <= fired, f"documented but never reported on any stack: {set(staying) - fired}"


# ---- the check above can fail: undo a fix, or drop an exemption, and it reports it --------------------------------
def _mutated(objects: list[dict[str, Any]], kind: str, change: Any, tmp_path: Path) -> Path:
    objects = copy.deepcopy(objects)
    for obj in objects:
        if obj and obj.get("kind") == kind:
            change(obj)
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def _drop_ephemeral_storage(obj: dict[str, Any]) -> None:
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"].pop("ephemeral-storage")
    resources["limits"].pop("ephemeral-storage")


def _same_probe_paths(obj: dict[str, Any]) -> None:
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["httpGet"]["path"] = container["livenessProbe"]["httpGet"]["path"]


def _drop_exemptions(obj: dict[str, Any]) -> None:
    obj["metadata"]["annotations"].pop(KUBE_SCORE_IGNORE)


def _drop_memory_request(obj: dict[str, Any]) -> None:
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].pop("memory")


@pytest.mark.parametrize(("case", "kind", "change", "expected"), [
    ("ephemeral storage removed again", "Deployment", _drop_ephemeral_storage,
     "container-ephemeral-storage-request-and-limit (Ephemeral Storage request is not set) is not fixed"),
    ("readiness back on the liveness path", "Deployment", _same_probe_paths,
     "pod-probes-identical (Container has the same readiness and liveness probe) is not fixed"),
    ("exemption annotation dropped", "Deployment", _drop_exemptions,
     "container-image-pull-policy is documented but the object has no kube-score/ignore for it"),
    ("a request missing: a message the docs do not list", "Job", _drop_memory_request,
     "container-resources says 'Memory request is not set'"),
])
def test_undoing_a_fix_or_an_exemption_is_reported(case: str, kind: str, change: Any, expected: str,
                                                    tmp_path: Path) -> None:
    objects = list(yaml.safe_load_all(golden("prod").read_text()))
    path = _mutated(objects, kind, change, tmp_path)
    problems = undocumented(findings(score(path, honour_annotations=False)))
    assert any(expected in problem for problem in problems), (case, problems)


def test_limits_equal_to_requests_leave_kube_score_nothing_to_exempt_on_resources(tmp_path: Path) -> None:
    """A stack that sets CPU and memory limits to the requests (Guaranteed QoS) gets no resource exemptions, and
    kube-score, every optional check on, still passes: the exemptions follow the settings, they are not blanket."""
    derived = plan()
    guaranteed = plan({"resources": {"cpu_limit": derived.cpu_request, "memory_limit_gib": derived.memory_request_gib}})
    workload = serving.build_workload(guaranteed)
    exempted = set(workload["metadata"]["annotations"][KUBE_SCORE_IGNORE].split(","))
    assert not {check for check in exempted if "resource" in check or "requests-equal-limits" in check}, exempted
    path = tmp_path / "guaranteed.yaml"
    # With its Service and NetworkPolicy, as the stack renders it (kube-score matches pods to them).
    path.write_text(yaml.safe_dump_all([workload, *network.build_network(guaranteed)], sort_keys=False))
    assert not findings(score(path, honour_annotations=True))
    assert not undocumented(findings(score(path, honour_annotations=False)))
