"""The YAML loader: same values as yaml.safe_load, right line numbers, the layouts manifests come in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_pulumi.policies import loader, offline
from vllm_pulumi.policies.loader import InputError, documents, load_paths, load_text
from vllm_pulumi.policies.registry import all_rules, reads

from .cases import fixture_tree

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["yes", "no", "on", "off", "0x1F", "007", "1_000", "12:30",
                                                           "~", "null", "True", "2026-01-01", "1e3", ".5", "-"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(values)
def test_values_are_exactly_what_safe_load_gives(value: Any) -> None:
    for style in (False, True, None):
        text = yaml.safe_dump({"v": value}, default_flow_style=style)
        assert loader._load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "a: [0, 007, 0x1F, 1_000, 12:30, yes, No, ~, null, '', 1.5, 2026-01-01, true, False, '1', \"true\"]\n",
    "b: &x {c: 1}\nd:\n  <<: *x\n  e: 2\n",
    "s: |\n  --- not a document marker (indented)\n  kind: Secret\n",
])
def test_yaml_1_1_edge_cases(text: str) -> None:
    assert loader._load(text) == yaml.safe_load(text)


def test_document_lines() -> None:
    text = "# header\n---\nkind: A\n---\n# only a comment\n---\nkind: B\nx: 1\n--- # trailing\nkind: C\n"
    assert [line for line, _ in documents(text)] == [2, 6, 9]


def test_syntax_error_line_is_counted_from_the_top_of_the_file() -> None:
    text = ("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: Deployment\n"
            "metadata:\n  name: b\n  labels: {a: [1, 2}\n")
    with pytest.raises(InputError, match=r"^x\.yaml:9:\d+: invalid YAML"):
        load_text(text, "x.yaml")


def test_documents_no_rule_reads_are_not_parsed() -> None:
    needed = reads(all_rules().values())
    text = ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: [unclosed\n---\n"
            "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec: {selector: {app: x}}\n")
    assert [r.kind for r in load_text(text, "x.yaml", needed)] == ["Service"]
    with pytest.raises(InputError):
        load_text(text, "x.yaml")  # without the filter every document is parsed


def test_dashboards_are_parsed_only_when_they_mention_a_removed_metric() -> None:
    needed = reads(all_rules().values())
    old = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: {d.json: 'vllm:gpu_cache_usage_perc'}\n"
    new = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: {d.json: 'vllm:kv_cache_usage_perc'}\n"
    assert len(load_text(old, "x", needed)) == 1
    assert load_text(new, "x", needed) == []


def test_list_kind_json_and_flow_style(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: a}}\n"
        "- {apiVersion: v1, kind: Service, metadata: {name: b}}\n")
    (tmp_path / "one.json").write_text('{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c"}}')
    (tmp_path / "notes.txt").write_text("ignored")
    resources = load_paths([str(tmp_path)], reads(all_rules().values()))
    assert sorted(r.name for r in resources) == ["a", "b", "c"]


def test_parallel_check_gives_the_same_findings(tmp_path: Path) -> None:
    """Forked workers run the per-object rules; the parent runs stack rules over what they send back."""
    fixtures = fixture_tree()
    sources = sorted(fixtures.glob("*/fires/*.yaml")) + sorted((fixtures / "reference").glob("*.yaml"))
    for i, file in enumerate(sources):
        (tmp_path / f"{i:03d}-{file.name}").write_text(file.read_text())
    serial = offline.check_paths([str(tmp_path)], jobs=1)
    if offline._workers(len(sources), jobs=2) == 1:
        pytest.skip("no fork start method here: no parallel path")
    parallel = offline.check_paths([str(tmp_path)], jobs=2)
    assert serial and sorted(map(repr, parallel)) == sorted(map(repr, serial))
    assert {f.policy for f in parallel} >= {"autoscaler-cooldown", "api-key-when-exposed", "shutdown-timeout"}


def test_parallel_check_reports_input_errors(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"{i}.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n")
    (tmp_path / "9.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: [a}\n")
    with pytest.raises(InputError, match=r"9\.yaml:3:"):
        offline.check_paths([str(tmp_path)], jobs=2)


def test_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offline.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(offline.os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert offline._workers(10) == 1  # few files: not worth a fork
    assert offline._workers(1000) == 4
    monkeypatch.setattr(offline.os, "getloadavg", lambda: (2.6, 0.0, 0.0))
    assert offline._workers(1000) == 1  # about one idle core left: parallel parsing would only add pickling
    monkeypatch.setattr(offline.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert offline._workers(1000) == 1
    assert offline._workers(1000, jobs=3) == 3  # --jobs decides
