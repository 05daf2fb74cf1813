"""Random mutations of valid stacks: the program stops with a SpecError message naming the field path
(as pulumi.RunError, so users get no traceback) and registers nothing."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_pulumi.components.manifests import read_stack_config
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.spec.validation import SpecError

from .mocking import run_program_expecting_error

ROOT = "vllm-pulumi:deployment"
BASES = {name: read_stack_config(name) for name in ("local", "edge", "prod", "multinode", "karpenter")}
Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> tuple[list[Path], list[Path]]:
    """(leaf paths, mapping paths) of a config tree."""
    leaves: list[Path] = []
    mappings: list[Path] = []
    if isinstance(value, dict):
        mappings.append(prefix)
        for key, item in value.items():
            sub_leaves, sub_mappings = _paths(item, (*prefix, key))
            leaves += sub_leaves
            mappings += sub_mappings
    elif isinstance(value, list):
        for index, item in enumerate(value):
            sub_leaves, sub_mappings = _paths(item, (*prefix, index))
            leaves += sub_leaves
            mappings += sub_mappings
    else:
        leaves.append(prefix)
    return leaves, mappings


def render_path(path: Path) -> str:
    text = ROOT
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _set(tree: Any, path: Path, value: Any) -> None:
    for part in path[:-1]:
        tree = tree[part]
    tree[path[-1]] = value


def _get(tree: Any, path: Path) -> Any:
    for part in path:
        tree = tree[part]
    return tree


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, Any, str]:
    """(description, mutated config, the path the error must name)."""
    stack = draw(st.sampled_from(sorted(BASES)))
    raw = copy.deepcopy(BASES[stack])
    leaves, mappings = _paths(raw)
    kind = draw(st.sampled_from(["unknown-key", "wrong-type", "bad-tensor-parallel", "negative-count"]))
    if kind == "unknown-key":
        where = draw(st.sampled_from(mappings))
        key = draw(st.sampled_from(["replica", "gpus", "max_len", "tensor_parallel", "storageClass", "extra"]))
        _get(raw, where)[key] = 1
        return f"{stack}: unknown {key} at {where}", raw, render_path((*where, key))
    if kind == "wrong-type":
        # A mapping where a scalar (str, int, float, bool) belongs is invalid for every scalar setting.
        where = draw(st.sampled_from(leaves))
        _set(raw, where, {"not": "a scalar"})
        # The cluster's `mode` picks the variant: pydantic reports a bad tag on the cluster itself.
        named = where[:-1] if where[-1] == "mode" else where
        return f"{stack}: mapping at {where}", raw, render_path(named)
    if kind == "bad-tensor-parallel":
        # Llama attention heads (32/64/128) are never divisible by these.
        size = draw(st.sampled_from([3, 5, 6, 7]))
        raw["models"][0].setdefault("engine", {})["tensor_parallel_size"] = size
        return f"{stack}: tensor_parallel_size {size}", raw, render_path(("models", 0, "engine",
                                                                          "tensor_parallel_size"))
    field = draw(st.sampled_from(["replicas", "gpus_per_node"]))
    raw["models"][0][field] = draw(st.integers(max_value=0))
    return f"{stack}: {field} <= 0", raw, render_path(("models", 0, field))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_mutated_stack_is_rejected_with_its_path_and_registers_nothing(case: tuple[str, Any, str]) -> None:
    description, raw, path = case
    with pytest.raises(SpecError) as spec_error:
        load_deployment(raw, root=ROOT)
    assert any(issue.setting == path or issue.setting.startswith(path + ".") for issue in spec_error.value.issues), (
        f"{description}: {[issue.setting for issue in spec_error.value.issues]}")
    error, monitor = run_program_expecting_error(raw, {"vllmApiKey": "k", "hfToken": "t"})
    assert isinstance(error, pulumi.RunError), f"{description}: {type(error).__name__}: {error}"
    message = str(error)
    assert message.startswith(("1 problem", "2 problem", "3 problem")) or "problem(s)" in message
    assert path in message, f"{description}: expected {path} in:\n{message}"
    assert monitor.registrations == [], f"{description}: registered {[r.name for r in monitor.registrations]}"


def test_not_a_mapping_is_rejected() -> None:
    error, monitor = run_program_expecting_error(["not", "a", "mapping"])
    assert isinstance(error, pulumi.RunError)
    assert ROOT in str(error)
    assert monitor.registrations == []
