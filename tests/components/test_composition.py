"""The stack's one composition: its labels added once over the built objects, exactly where and how they belong."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.components.builders.labels import POD_TEMPLATE_PATHS, with_stack_labels
from vllm_pulumi.components.composition import compose_stack
from vllm_pulumi.components.manifests import build_manifests, load_stack
from vllm_pulumi.runtime.planning.deployment import plan_deployment

# A key of ours among them: the stack's labels never override the recommended ones.
STACK_LABELS = {"team": "ml", "app.kubernetes.io/name": "theirs", "cost-center": "42"}


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        obj = obj[key]
    return obj


def _label_sites(obj: dict[str, Any]) -> list[tuple[str, ...]]:
    return [("metadata",), *((*path, "metadata") for path in POD_TEMPLATE_PATHS.get(obj["kind"], ()))]


@pytest.mark.parametrize("stack", ["local", "prod", "multinode", "karpenter"])
def test_stack_labels_go_on_metadata_and_pod_templates_under_ours_and_nowhere_else(stack: str) -> None:
    plain_spec = load_stack(stack)
    labelled_spec = plain_spec.model_copy(update={"labels": dict(STACK_LABELS)})
    plain = build_manifests(plain_spec)
    labelled = build_manifests(labelled_spec)
    assert len(plain) == len(labelled)
    for before, after in zip(plain, labelled, strict=True):
        for site in _label_sites(before):
            ours = _at(before, site)["labels"]
            assert _at(after, site)["labels"] == {**STACK_LABELS, **ours}
            assert list(_at(after, site)["labels"]) == list({**STACK_LABELS, **ours}), "the stack's keys come first"
        assert _strip(after, before) == before, f"{after['kind']}: labels added outside metadata and pod templates (selectors?)"


def _strip(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``after`` with the label sets of ``before`` put back: what is left must be ``before`` itself."""
    result = after
    for site in _label_sites(before):
        node = _at(before, site)
        result = _replace(result, site, {**_at(result, site), "labels": node["labels"]})
    return result


def _replace(obj: dict[str, Any], path: tuple[str, ...], value: dict[str, Any]) -> dict[str, Any]:
    if len(path) == 1:
        return {**obj, path[0]: value}
    return {**obj, path[0]: _replace(obj[path[0]], path[1:], value)}


def test_labelling_copies_instead_of_changing_the_built_object() -> None:
    obj = {"kind": "Deployment", "metadata": {"name": "x", "labels": {"a": "1"}},
           "spec": {"selector": {"matchLabels": {"a": "1"}}, "template": {"metadata": {"labels": {"a": "1"}}}}}
    labelled = with_stack_labels(obj, {"b": "2"})
    assert obj["metadata"]["labels"] == {"a": "1"} and obj["spec"]["template"]["metadata"]["labels"] == {"a": "1"}
    assert labelled["spec"]["template"]["metadata"]["labels"] == {"b": "2", "a": "1"}
    assert labelled["spec"]["selector"] == {"matchLabels": {"a": "1"}}


def test_the_composition_computes_the_addon_releases_once_for_notes_and_registration() -> None:
    spec = load_stack("local")
    gpu_operator = spec.addons.gpu_operator.model_copy(update={"install": True})
    spec = spec.model_copy(update={"addons": spec.addons.model_copy(update={"gpu_operator": gpu_operator})})
    objects = compose_stack(spec, plan_deployment(spec))
    assert [release.install for release in objects.addons] == [False] * len(objects.addons), "render mode"
    assert any("addons.gpu_operator.install is true in render mode" in note for note in objects.addon_notes)
