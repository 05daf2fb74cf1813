"""Every PromQL query the program renders parses with Prometheus's own parser (scripts/promql-check, built by
scripts/toolchain.sh from the Prometheus module the autoscaling tests run): KEDA triggers, alert rules and dashboard
panels, over the reference stacks and the variants that change a query (the KV-cache trigger, PodMonitor jobs, scale
to zero, a model name that needs escaping). A typo in any of them fails here, not in a dashboard or an autoscaler.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vllm_pulumi.components.manifests import build_manifests, read_stack_config
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment

from ..toolchain import BINARIES

pytestmark = [pytest.mark.e2e]

PROMQL_CHECK = BINARIES / "promql-check"


def _first_model(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(raw: dict[str, Any]) -> None:
        change(raw["models"][0])
    return apply


VARIANTS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "local": ("local", lambda raw: None),
    "edge": ("edge", lambda raw: None),
    "prod": ("prod", lambda raw: None),
    "multinode": ("multinode", lambda raw: None),
    "karpenter": ("karpenter", lambda raw: None),
    "edge-kv-cache-trigger": ("edge", _first_model(lambda m: m["autoscaling"].update(kv_cache_trigger=True))),
    "edge-scale-to-zero": ("edge", _first_model(
        lambda m: m["autoscaling"].update(min_replicas=0, scale_to_zero=True))),
    "prod-pod-monitor": ("prod", lambda raw: raw.setdefault("observability", {}).update(monitor="PodMonitor")),
    "edge-model-name-needing-escapes": ("edge", _first_model(
        lambda m: m.update(served_model_name='org/model "v2" \\ test'))),
}


def rendered_queries(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, str, str]]:
    """(where, kind of query, query) for every PromQL expression in the manifests."""
    for obj in manifests:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "ScaledObject":
            for trigger in obj["spec"]["triggers"]:
                if trigger["type"] == "prometheus":
                    yield f"{name} trigger {trigger.get('name')}", "keda-trigger", trigger["metadata"]["query"]
        elif obj["kind"] == "PrometheusRule":
            for group in obj["spec"]["groups"]:
                for rule in group["rules"]:
                    yield f"{name} rule {rule.get('alert') or rule.get('record')}", "rule", rule["expr"]
        elif obj["kind"] == "ConfigMap":
            for key, text in (obj.get("data") or {}).items():
                if key.endswith(".json"):
                    for panel in json.loads(text).get("panels", []):
                        for target in panel.get("targets", []):
                            yield f"{name} panel {panel['title']!r} {target['refId']}", "panel", target["expr"]


def parse_with_prometheus(queries: list[str]) -> list[dict[str, str]]:
    if not PROMQL_CHECK.exists():
        pytest.fail(f"{PROMQL_CHECK} not built: run scripts/toolchain.sh (`make test` does)", pytrace=False)
    result = subprocess.run([str(PROMQL_CHECK)], input="".join(json.dumps(q) + "\n" for q in queries),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [v["query"] for v in verdicts] == queries
    return verdicts


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_query_parses_with_prometheus(variant: str) -> None:
    """Prometheus's parser accepts each query; KEDA triggers and alert rules are instant vectors (KEDA's Prometheus
    scaler decodes only a vector, and an alert fires per element of one)."""
    stack, change = VARIANTS[variant]
    raw = copy.deepcopy(read_stack_config(stack))
    change(raw)
    spec = load_deployment(raw).spec
    found = list(rendered_queries(build_manifests(spec, plan_deployment(spec))))
    kinds = {kind for _, kind, _ in found}
    assert {"rule", "panel"} <= kinds, f"{variant}: expected alert rules and dashboard panels, found {kinds}"
    if any(model.autoscaling for model in spec.models):
        assert "keda-trigger" in kinds
    verdicts = parse_with_prometheus([query for _, _, query in found])
    refused = [f"{where}: {verdict['error']}\n    {verdict['query']}"
               for (where, _, _), verdict in zip(found, verdicts, strict=True) if verdict["error"]]
    assert not refused, "Prometheus refuses:\n" + "\n".join(refused)
    not_vectors = [f"{where}: {verdict['type']}" for (where, kind, _), verdict in zip(found, verdicts, strict=True)
                   if kind in ("keda-trigger", "rule") and verdict["type"] != "vector"]
    assert not not_vectors, not_vectors


@pytest.mark.parametrize(("query", "problem"), [
    ("sum(vllm:num_requests_waiting{namespace=\"a\"}", "unclosed parenthesis"),
    ("sum(vllm:num_requests_waiting{namespace=a})", "unquoted label value"),
    ("histogram_quantil(0.95, x)", "misspelt function"),
    ("rate(vllm:prompt_tokens_total)", "range function on an instant vector"),
])
def test_the_parser_refuses_broken_queries(query: str, problem: str) -> None:
    """The check can fail: Prometheus's parser refuses each of these ({problem})."""
    [verdict] = parse_with_prometheus([query])
    assert verdict["error"], problem
