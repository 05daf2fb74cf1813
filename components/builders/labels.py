"""Labels and metadata shared by every object: the Kubernetes recommended labels, one place.

Selectors use only the labels that never change for the life of a workload (name, instance, component), because a
Deployment's selector is immutable; the version label changes with the vLLM release and stays out of selectors.
"""

from __future__ import annotations

from typing import Any

APP_NAME = "vllm"
PART_OF = "vllm-pulumi"
MANAGED_BY = "pulumi"
# Role of a pod in a replica: the OpenAI server (single pod, or the LWS leader) or a Ray worker of an LWS group.
SERVER = "server"
WORKER = "worker"
COMPONENT = "app.kubernetes.io/component"
INSTANCE = "app.kubernetes.io/instance"
NAME = "app.kubernetes.io/name"
# LeaderWorkerSet sets this label on every pod of the set (upstream vocabulary, kept verbatim).
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"


def selector_labels(instance: str, component: str | None = None) -> dict[str, str]:
    """Labels a selector matches: stable for the workload's lifetime."""
    labels = {NAME: APP_NAME, INSTANCE: instance}
    if component is not None:
        labels[COMPONENT] = component
    return labels


def common_labels(
    instance: str, component: str, version: str | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """Recommended labels (plus the stack's extra labels, which never override ours)."""
    labels = dict(extra or {})
    labels.update(selector_labels(instance, component))
    labels["app.kubernetes.io/part-of"] = PART_OF
    labels["app.kubernetes.io/managed-by"] = MANAGED_BY
    if version is not None:
        labels["app.kubernetes.io/version"] = version
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
