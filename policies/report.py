"""How the offline checker prints its findings: text for people, JSON for scripts, SARIF 2.1.0 for code-scanning
services, and GitHub workflow commands, which GitHub Actions turns into annotations on the changed lines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path, PurePath
from typing import Any, Literal
from urllib.parse import quote

from vllm_pulumi.policies.engine import Finding
from vllm_pulumi.policies.offline import STDIN_NAME
from vllm_pulumi.policies.rule_types import Enforcement, Rule, Severity

FORMATS = ("text", "json", "sarif", "github")
TOOL_NAME = "vllm-pulumi-check"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SOURCE_ROOT = "%SRCROOT%"
"""SARIF's conventional base for relative paths: code-scanning services resolve it to the checked-out repository."""

SarifLevel = Literal["error", "warning", "note", "none"]


def sarif_level(enforcement: Enforcement, severity: Severity) -> SarifLevel:
    """A mandatory finding fails the run, so it is an error whatever its severity; an advisory one is a warning when
    its severity is high or critical and a note otherwise, so the serious advice stands out in a review."""
    if enforcement == "disabled":
        return "none"
    if enforcement == "mandatory":
        return "error"
    return "warning" if severity in ("high", "critical") else "note"


def _where(finding: Finding) -> str:
    """``file:line``, and for a piped stream the document too: a reader of ``helm template`` output counts those."""
    if not finding.file:
        return ""
    if not finding.line:
        return finding.file
    if finding.file == STDIN_NAME:
        return f"{finding.file}:{finding.line} (document {finding.document})"
    return f"{finding.file}:{finding.line}"


def _resource(finding: Finding) -> str:
    r = finding.resource
    return f"{r['kind']} {r['namespace']}/{r['name']}" if r["namespace"] else f"{r['kind']} {r['name']}"


def format_text(findings: Sequence[Finding], coverage: str = "") -> str:
    """Findings, then the count line; ``coverage`` (offline.Coverage.summary) follows it when given."""
    lines = []
    for f in findings:
        prefix = f"{_where(f)}: " if f.file else ""
        lines.append(f"{prefix}{f.enforcement.upper()} [{f.severity}] {f.policy}: {_resource(f)}: {f.message}")
        lines.append(f"    fix: {f.fix}")
    mandatory = sum(f.enforcement == "mandatory" for f in findings)
    lines.append(f"{len(findings)} finding(s), {mandatory} mandatory" + (f"; {coverage}" if coverage else ""))
    return "\n".join(lines)


def format_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2)


# ---- SARIF ------------------------------------------------------------------------------------------------------

def _version() -> str:
    try:
        return metadata.version("vllm-pulumi")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.name,
        "shortDescription": {"text": rule.description},
        "fullDescription": {"text": f"{rule.description} {rule.why}"},
        "help": {"text": f"{rule.why}\nFix: {rule.fix}", "markdown": f"{rule.why}\n\n**Fix:** {rule.fix}"},
        "defaultConfiguration": {"level": sarif_level(rule.enforcement, rule.severity)},
        "properties": {"tags": [rule.group], "enforcement": rule.enforcement, "severity": rule.severity,
                       "fix": rule.fix},
    }


def _artifact_location(file: str) -> dict[str, Any]:
    """Paths under the working directory relative to %SRCROOT% (what code scanning maps onto the repository), others
    as file URIs; standard input has no URI, so only a description."""
    if file == STDIN_NAME:
        return {"description": {"text": "standard input"}}
    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return {"uri": path.as_uri()}
    return {"uri": quote(PurePath(path).as_posix()), "uriBaseId": SOURCE_ROOT}


def _sarif_result(finding: Finding, rule_index: int) -> dict[str, Any]:
    logical = {"name": finding.resource["name"], "kind": "resource",
               "fullyQualifiedName": "/".join(part for part in (finding.resource["namespace"],
                                                                 finding.resource["kind"],
                                                                 finding.resource["name"]) if part)}
    location: dict[str, Any] = {"logicalLocations": [logical]}
    if finding.file:
        physical: dict[str, Any] = {"artifactLocation": _artifact_location(finding.file)}
        if finding.line:
            physical["region"] = {"startLine": finding.line}
        location["physicalLocation"] = physical
    properties: dict[str, Any] = {"enforcement": finding.enforcement, "severity": finding.severity,
                                  "resource": finding.resource, "fix": finding.fix}
    if finding.document:
        properties["document"] = finding.document
    return {
        "ruleId": finding.policy,
        "ruleIndex": rule_index,
        "level": sarif_level(finding.enforcement, finding.severity),
        "message": {"text": f"{_resource(finding)}: {finding.message}\nFix: {finding.fix}"},
        "locations": [location],
        "properties": properties,
    }


def format_sarif(findings: Sequence[Finding], rules: Iterable[Rule]) -> str:
    """One SARIF 2.1.0 log: every rule (so a service can show the ones that did not fire), one result per finding."""
    ordered = list(rules)
    index = {rule.name: position for position, rule in enumerate(ordered)}
    log = {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": _version(),
                                "rules": [_sarif_rule(rule) for rule in ordered]}},
            "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
            "results": [_sarif_result(f, index[f.policy]) for f in findings],
        }],
    }
    return json.dumps(log, indent=2)


# ---- GitHub workflow commands -------------------------------------------------------------------------------------

_GITHUB_LEVELS = {"error": "error", "warning": "warning", "note": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Sequence[Finding], coverage: str = "") -> str:
    """``::error file=F,line=L,title=T::message`` per finding. A finding from standard input has no file to annotate,
    so its place (line and document of the stream) goes into the message instead."""
    lines = []
    for f in findings:
        command = _GITHUB_LEVELS[sarif_level(f.enforcement, f.severity)]
        properties = []
        prefix = ""
        if f.file and f.file != STDIN_NAME:
            properties.append(f"file={_escape_property(f.file)}")
            if f.line:
                properties.append(f"line={f.line}")
        elif f.file:
            prefix = f"{_where(f)}: "
        properties.append(f"title={_escape_property(f'{f.policy} ({f.enforcement}, {f.severity})')}")
        body = _escape_data(f"{prefix}{_resource(f)}: {f.message}") + "%0A" + _escape_data(f"fix: {f.fix}")
        lines.append(f"::{command} {','.join(properties)}::{body}")
    mandatory = sum(f.enforcement == "mandatory" for f in findings)
    lines.append(f"{len(findings)} finding(s), {mandatory} mandatory" + (f"; {coverage}" if coverage else ""))
    return "\n".join(lines)
