"""Where findings point (file, line, document of a piped stream) and the formats CI reads: SARIF 2.1.0 validated
against the OASIS schema, GitHub workflow commands, and the input a pipeline can hand the checker."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.policies.cli import main
from vllm_pulumi.policies.engine import Finding
from vllm_pulumi.policies.loader import load_text
from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.report import SARIF_SCHEMA_URI, format_github, sarif_level

from .cases import fixture_tree, tree_root
from .sarif import sarif_errors, sarif_schema

FIXTURES = fixture_tree()
REPO = Path(__file__).resolve().parents[2]
NO_SHUTDOWN_TIMEOUT = FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml"
REFERENCE = FIXTURES / "reference" / "single-node.yaml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data: bytes,
              *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return run(capsys, *argv)


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line equal to ``needle``: the expected line, found independently of the
    loader's document splitting."""
    found = [number for number, line in enumerate(text.splitlines(), start=1) if line == needle]
    return found[occurrence - 1]


def helm_stream(*manifests: Path) -> str:
    """What ``helm template`` prints: a leading empty document, each template after a ``# Source:`` comment."""
    parts = ["---\n# Source: vllm/templates/empty.yaml\n"]
    for index, manifest in enumerate(manifests):
        for document in manifest.read_text().split("\n---\n"):
            parts.append(f"---\n# Source: vllm/templates/t{index}.yaml\n{document.rstrip()}\n")
    return "".join(parts)


# ---- where findings point -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    pytest.param("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n", [("a", 1, 1)], id="one document"),
    pytest.param("# header comment\n\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n", [("a", 3, 1)],
                 id="leading comment: the object's first line, not the comment"),
    pytest.param("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n# Source: c/t.yaml\n---\n"
                 "# Source: c/u.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n",
                 [("a", 1, 1), ("b", 8, 2)], id="helm output: empty document not counted, comment skipped"),
    pytest.param("--- \napiVersion: v1\nkind: Service\nmetadata: {name: a}\n", [("a", 2, 1)],
                 id="marker with trailing space"),
    pytest.param("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: a}}\n"
                 "- {apiVersion: v1, kind: Service, metadata: {name: b}}\n", [("a", 1, 1), ("b", 1, 1)],
                 id="kind List: its items at the List's line"),
])
def test_each_object_knows_its_line_and_document(text: str, expected: list[tuple[str, int, int]]) -> None:
    assert [(r.name, r.line, r.document) for r in load_text(text, "x.yaml")] == expected


def test_findings_from_a_file_name_file_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    text = NO_SHUTDOWN_TIMEOUT.read_text()
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT), "--format", "json")
    shutdown = next(f for f in json.loads(out) if f["policy"] == "shutdown-timeout")
    assert code == 1
    assert (shutdown["file"], shutdown["line"], shutdown["document"]) == (
        str(NO_SHUTDOWN_TIMEOUT), line_of(text, "apiVersion: apps/v1"), 1)
    _, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT))
    assert f"{NO_SHUTDOWN_TIMEOUT}:{shutdown['line']}: MANDATORY [high] shutdown-timeout:" in out


def test_findings_from_standard_input_name_line_and_document(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    stream = helm_stream(REFERENCE, NO_SHUTDOWN_TIMEOUT)
    documents_of_reference = REFERENCE.read_text().count("\n---\n") + 1
    # The failing Deployment is the second `apiVersion: apps/v1` of the stream (the reference has one first).
    expected_line = line_of(stream, "apiVersion: apps/v1", occurrence=2)
    code, out, _ = run_stdin(monkeypatch, capsys, stream.encode(), "-", "--format", "json")
    shutdown = next(f for f in json.loads(out) if f["policy"] == "shutdown-timeout")
    assert code == 1
    assert (shutdown["file"], shutdown["line"], shutdown["document"]) == (
        "<stdin>", expected_line, documents_of_reference + 1)
    _, out, _ = run_stdin(monkeypatch, capsys, stream.encode(), "-")
    assert f"<stdin>:{expected_line} (document {documents_of_reference + 1}): MANDATORY" in out


@pytest.mark.parametrize("data, expected", [
    pytest.param(b"", "no YAML documents in the input", id="empty: the command before the pipe failed"),
    pytest.param(b"# Source: c/t.yaml\n---\n", "no YAML documents in the input", id="comments only"),
    pytest.param(b"apiVersion: v1\nkind: Service\nmetadata: {name: caf\xe9}\n", "not UTF-8 text (byte 0xe9",
                 id="not UTF-8"),
    pytest.param(b"apiVersion: v1\nkind: Service\nmetadata: {name: [a}\n", "<stdin>:3:", id="invalid YAML"),
])
def test_unusable_standard_input_exits_2_naming_the_problem(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str],
                                                           data: bytes, expected: str) -> None:
    code, out, err = run_stdin(monkeypatch, capsys, data, "-")
    assert (code, out) == (2, "")
    assert err.startswith("error: <stdin>") and expected in err


def test_other_yaml_of_a_repository_is_refused_unless_skipped(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "workflow.yaml").write_text("name: ci\non: [push]\njobs: {test: {runs-on: ubuntu-latest}}\n")
    (tmp_path / "values.yaml").write_text("replicaCount: 2\n---\n- a list\n")
    (tmp_path / "vllm.yaml").write_text(NO_SHUTDOWN_TIMEOUT.read_text())
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and "not a Kubernetes object" in err
    code, out, _ = run(capsys, str(tmp_path), "--skip-non-kubernetes", "--format", "json")
    assert code == 1
    assert {f["file"] for f in json.loads(out)} == {str(tmp_path / "vllm.yaml")}
    (tmp_path / "broken.yaml").write_text("key: [unclosed\n")
    code, _, err = run(capsys, str(tmp_path), "--skip-non-kubernetes")
    assert code == 2 and f"{tmp_path / 'broken.yaml'}:" in err and "invalid YAML" in err


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    stream = "\n---\n".join([NO_SHUTDOWN_TIMEOUT.read_text()] * 300)  # far more output than a pipe buffers
    process = subprocess.Popen([sys.executable, "-m", "vllm_pulumi.policies.check", "-"], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write(stream.encode())
    process.stdin.close()
    assert process.stdout.read(100)
    process.stdout.close()
    error = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert "Traceback" not in error


# ---- SARIF --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("enforcement, severity, level", [
    ("mandatory", "low", "error"),
    ("mandatory", "critical", "error"),
    ("advisory", "critical", "warning"),
    ("advisory", "high", "warning"),
    ("advisory", "medium", "note"),
    ("advisory", "low", "note"),
    ("disabled", "high", "none"),
])
def test_sarif_level_from_enforcement_and_severity(enforcement: Any, severity: Any, level: str) -> None:
    assert sarif_level(enforcement, severity) == level


def sarif_and_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], list[Any]]:
    code, out, _ = run(capsys, *argv, "--format", "sarif")
    json_code, json_out, _ = run(capsys, *argv, "--format", "json")
    assert code == json_code
    return code, json.loads(out), json.loads(json_out)


def test_sarif_of_every_fixture_is_valid_sarif_2_1_0(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = tree_root(FIXTURES)  # where the fixtures sit at tests/policies/fixtures, as in a checkout
    monkeypatch.chdir(root)
    code, log, findings = sarif_and_json(capsys, str(FIXTURES))
    assert code == 1 and findings
    assert sarif_errors(log) == []
    assert log["$schema"] == SARIF_SCHEMA_URI == sarif_schema()["id"]
    results = log["runs"][0]["results"]
    assert len(results) == len(findings)
    for result, finding in zip(results, findings):
        assert result["ruleId"] == finding["policy"]
        assert result["level"] == sarif_level(finding["enforcement"], finding["severity"])
        assert finding["message"] in result["message"]["text"] and finding["fix"] in result["message"]["text"]
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": Path(finding["file"]).relative_to(root).as_posix(),
                                                "uriBaseId": "%SRCROOT%"}
        assert physical["region"] == {"startLine": finding["line"]}
        assert result["properties"]["document"] == finding["document"]


def test_sarif_has_one_rule_per_policy_with_description_help_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    _, log, _ = sarif_and_json(capsys, str(REFERENCE))
    driver = log["runs"][0]["tool"]["driver"]
    rules = all_rules()
    assert [r["id"] for r in driver["rules"]] == list(rules)
    for sarif_rule in driver["rules"]:
        rule = rules[sarif_rule["id"]]
        assert sarif_rule["shortDescription"]["text"] == rule.description
        assert rule.why in sarif_rule["help"]["text"] and rule.fix in sarif_rule["help"]["text"]
        assert sarif_rule["properties"]["fix"] == rule.fix
        assert sarif_rule["defaultConfiguration"]["level"] == sarif_level(rule.enforcement, rule.severity)
    assert log["runs"][0]["results"] == []
    assert sarif_errors(log) == []


def test_sarif_paths_are_relative_to_the_working_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "deploy dir").mkdir()
    (tmp_path / "deploy dir" / "vllm.yaml").write_text(NO_SHUTDOWN_TIMEOUT.read_text())
    monkeypatch.chdir(tmp_path)
    _, log, _ = sarif_and_json(capsys, str(tmp_path / "deploy dir"))
    run_ = log["runs"][0]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run_["results"]} == {
        "deploy%20dir/vllm.yaml"}
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    assert sarif_errors(log) == []


def test_sarif_of_standard_input_is_valid_and_says_where(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    stream = helm_stream(NO_SHUTDOWN_TIMEOUT)
    code, out, _ = run_stdin(monkeypatch, capsys, stream.encode(), "-", "--format", "sarif")
    log = json.loads(out)
    assert code == 1 and sarif_errors(log) == []
    result = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "shutdown-timeout")
    physical = result["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"description": {"text": "standard input"}}
    assert physical["region"]["startLine"] == line_of(stream, "apiVersion: apps/v1")
    assert result["properties"]["document"] == 1
    assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == (
        "inference/Deployment/vllm-llama3-8b")


def test_the_schema_check_catches_a_broken_log(capsys: pytest.CaptureFixture[str]) -> None:
    """The validation above is only worth something if it can fail: a result without a message, a made-up level."""
    _, log, _ = sarif_and_json(capsys, str(NO_SHUTDOWN_TIMEOUT))
    result = log["runs"][0]["results"][0]
    del result["message"]
    result["level"] = "mandatory"
    assert len(sarif_errors(log)) == 2


# ---- GitHub workflow commands -------------------------------------------------------------------------------------

def _finding(file: str, line: int, document: int, message: str, enforcement: Any = "mandatory",
             severity: Any = "high") -> Finding:
    return Finding("shutdown-timeout", enforcement, severity,
                   {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "vllm"},
                   message, "add --shutdown-timeout=90", file, line, document)


@pytest.mark.parametrize("finding, expected", [
    pytest.param(_finding("deploy/a.yaml", 12, 1, "drain is 0 s"),
                 "::error file=deploy/a.yaml,line=12,title=shutdown-timeout (mandatory%2C high)::"
                 "Deployment ns/vllm: drain is 0 s%0Afix: add --shutdown-timeout=90", id="mandatory: error"),
    pytest.param(_finding("a,b:c%.yaml", 3, 1, "50% of\nthe budget", "advisory", "medium"),
                 "::notice file=a%2Cb%3Ac%25.yaml,line=3,title=shutdown-timeout (advisory%2C medium)::"
                 "Deployment ns/vllm: 50%25 of%0Athe budget%0Afix: add --shutdown-timeout=90",
                 id="advisory medium: notice, special characters escaped"),
    pytest.param(_finding("deploy/a.yaml", 12, 1, "x", "advisory", "critical"),
                 "::warning file=deploy/a.yaml,line=12,title=shutdown-timeout (advisory%2C critical)::"
                 "Deployment ns/vllm: x%0Afix: add --shutdown-timeout=90", id="advisory critical: warning"),
    pytest.param(_finding("<stdin>", 40, 3, "x"),
                 "::error title=shutdown-timeout (mandatory%2C high)::"
                 "<stdin>:40 (document 3): Deployment ns/vllm: x%0Afix: add --shutdown-timeout=90",
                 id="standard input: no file to annotate, its place in the message"),
])
def test_github_annotations(finding: Finding, expected: str) -> None:
    mandatory = int(finding.enforcement == "mandatory")
    assert format_github([finding]).splitlines() == [expected, f"1 finding(s), {mandatory} mandatory"]


def test_github_format_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(NO_SHUTDOWN_TIMEOUT), "--format", "github")
    line = line_of(NO_SHUTDOWN_TIMEOUT.read_text(), "apiVersion: apps/v1")
    assert code == 1
    assert out.startswith(f"::error file={NO_SHUTDOWN_TIMEOUT},line={line},"
                          "title=shutdown-timeout (mandatory%2C high)::")
