"""Labels and metadata shared by every object: the Kubernetes recommended labels, one place, and the one pass that
adds the stack's own labels (``spec.labels``) over the built objects.

Selectors use only the labels that never change for the life of a workload (name, instance, component), because a
Deployment's selector is immutable; the version label changes with the vLLM release and stays out of selectors, and
so do the stack's labels.
"""

from __future__ import annotations

from typing import Any

from vllm_pulumi.runtime.vocabulary import (
    APP_COMPONENT_LABEL,
    APP_INSTANCE_LABEL,
    APP_MANAGED_BY_LABEL,
    APP_NAME_LABEL,
    APP_PART_OF_LABEL,
    APP_VERSION_LABEL,
)

APP_NAME = "vllm"
PART_OF = "vllm-pulumi"
MANAGED_BY = "pulumi"
# Role of a pod in a replica: the OpenAI server (single pod, or the LWS leader) or a Ray worker of an LWS group.
SERVER = "server"
WORKER = "worker"


def selector_labels(instance: str, component: str | None = None) -> dict[str, str]:
    """Labels a selector matches: stable for the workload's lifetime."""
    labels = {APP_NAME_LABEL: APP_NAME, APP_INSTANCE_LABEL: instance}
    if component is not None:
        labels[APP_COMPONENT_LABEL] = component
    return labels


def project_labels() -> dict[str, str]:
    """What every object of ours says about who made it (the Namespace carries only these)."""
    return {APP_PART_OF_LABEL: PART_OF, APP_MANAGED_BY_LABEL: MANAGED_BY}


def common_labels(instance: str, component: str, version: str | None = None) -> dict[str, str]:
    """Recommended labels of one component of one instance."""
    labels = selector_labels(instance, component)
    labels.update(project_labels())
    if version is not None:
        labels[APP_VERSION_LABEL] = version
    return labels


def metadata(
    name: str,
    namespace: str | None,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


# The pod templates of each kind we build: their pods are the stack's objects too. A NodePool's template describes
# nodes, not pods, and keeps only the node labels the pool declares.
POD_TEMPLATE_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "template"),),
    "Job": (("spec", "template"),),
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate", "leaderTemplate"),
                        ("spec", "leaderWorkerTemplate", "workerTemplate")),
}


def with_stack_labels(obj: dict[str, Any], stack_labels: dict[str, str]) -> dict[str, Any]:
    """``obj`` with the stack's labels on its metadata and on its pod templates' metadata, never on a selector.

    The stack's labels never override ours: a key the builder set keeps the builder's value, and the stack's keys
    come first. Only the dicts on the way to a label set are copied; ``obj`` is not modified.
    """
    if not stack_labels:
        return obj
    labelled = _with_labels_at(obj, ("metadata",), stack_labels)
    for path in POD_TEMPLATE_PATHS.get(obj["kind"], ()):
        labelled = _with_labels_at(labelled, (*path, "metadata"), stack_labels)
    return labelled


def _with_labels_at(node: dict[str, Any], path: tuple[str, ...], stack_labels: dict[str, str]) -> dict[str, Any]:
    if not path:
        return {**node, "labels": {**stack_labels, **node["labels"]}}
    return {**node, path[0]: _with_labels_at(node[path[0]], path[1:], stack_labels)}
