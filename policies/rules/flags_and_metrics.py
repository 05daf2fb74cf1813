"""vLLM flags and metrics the pinned vLLM (0.33) no longer has: in the server's arguments, and in KEDA queries,
alert rules and dashboards."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import mapping, sequence
from vllm_pulumi.policies.versions import REMOVED_METRICS, flag_missing_in, release
from vllm_pulumi.policies.versions import FLAGS as FLAG_HISTORY
from vllm_pulumi.policies.versions import METRICS as METRIC_HISTORY
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.spec.engine import REMOVED_FLAGS

_METRIC = re.compile(r"vllm:[a-z_]+")
_REMOVED_METRIC = re.compile("|".join(re.escape(name) for name in REMOVED_METRICS))


@rule(
    "removed-vllm-flags", group="vLLM flags and metrics", enforcement="mandatory", severity="high", kinds=SERVING_KINDS,
)
def removed_vllm_flags(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """No vLLM flag that vLLM 0.33's parser rejects (runtime.spec.engine.REMOVED_FLAGS, e.g. --disable-graceful-shutdown).

    Why: vLLM exits at argument parsing, so every pod crash-loops; these flags come from older guides.

    Fix: Drop the flag; the message says what replaced it.
    """
    for server in res.servers:
        version = server.version
        for flag in dict.fromkeys(server.command.flag_names):
            replacement = REMOVED_FLAGS.get(f"--{flag}")
            if not replacement:
                continue
            if version.known and flag in FLAG_HISTORY and flag_missing_in(flag, version.version) is None:
                continue  # the image's own vLLM still has the flag (the version rule covers upgrading)
            removed = FLAG_HISTORY[flag].removed if flag in FLAG_HISTORY else None
            since = f" (removed in {release(removed)})" if removed else ""
            yield Violation(f"{server.where}: --{flag} does not exist in vLLM {version.text}{since}{version.note}",
                            replacement)


def _removed_metrics(text: str) -> list[str]:
    if not _REMOVED_METRIC.search(text):
        return []
    names = (re.sub(r"_(bucket|sum|count|total|created)$", "", m) for m in _METRIC.findall(text))
    return [m for m in dict.fromkeys(names) if m in REMOVED_METRICS]


@rule(
    "removed-vllm-metrics", group="vLLM flags and metrics", enforcement="mandatory", severity="medium",
    kinds=("ScaledObject", "PrometheusRule", "ConfigMap"), text_filter=tuple(REMOVED_METRICS),
)
def removed_vllm_metrics(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """KEDA queries, alert rules and dashboards do not use metrics vLLM 0.33 no longer exports
    (vllm:gpu_cache_usage_perc, vllm:time_per_output_token_seconds, ...).

    Why: A query on a metric that no longer exists returns nothing: the autoscaler never scales, the alert never fires,
    the panel stays empty, and nothing reports an error.

    Fix: Use the vLLM 0.33 name given in the message (vllm:kv_cache_usage_perc for KV-cache use).
    """
    texts: list[tuple[str, str]] = []
    if res.kind == "ScaledObject":
        for i, trigger in enumerate(sequence(res.spec.get("triggers"))):
            query = mapping(mapping(trigger).get("metadata")).get("query")
            if isinstance(query, str):
                texts.append((f"spec.triggers[{i}].metadata.query", query))
    elif res.kind == "PrometheusRule":
        for g, group in enumerate(sequence(res.spec.get("groups"))):
            for r, item in enumerate(sequence(mapping(group).get("rules"))):
                expr = mapping(item).get("expr")
                if isinstance(expr, str):
                    texts.append((f"spec.groups[{g}].rules[{r}].expr", expr))
    elif res.kind == "ConfigMap":
        for key, value in mapping(res.obj.get("data")).items():
            if isinstance(value, str) and "vllm:" in value:
                texts.append((f"data.{key}", value))
    for where, text in texts:
        for metric in _removed_metrics(text):
            history = METRIC_HISTORY.get(metric)
            since = f" (gone by default since {release(history.removed)}: {history.source})" if (
                history is not None and history.removed is not None) else ""
            yield Violation(f"{where} uses {metric}, which vLLM 0.33 no longer exports{since}",
                            f"replace it with {REMOVED_METRICS[metric]}")


RULES: tuple[Rule, ...] = (removed_vllm_flags, removed_vllm_metrics)
"""This topic's rules, in the order the registry lists them."""
