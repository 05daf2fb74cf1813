"""The two ways a shell registers Kubernetes objects: a ConfigGroup of plain dicts, or a Secret holding a secret."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def inherited_depends_on(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The component's own ``depends_on``, for its children: the engine orders a component's children only by
    their own dependencies, so a component that must come after X passes X on to what it creates."""
    depends_on: Any = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    return [resource for resource in depends_on if isinstance(resource, pulumi.Resource)]


# API groups the Kubernetes provider knows without asking a cluster; anything else is a custom resource.
BUILTIN_GROUPS = frozenset({
    "", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
    "storage.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io", "admissionregistration.k8s.io",
    "coordination.k8s.io", "discovery.k8s.io", "node.k8s.io", "certificates.k8s.io",
})


def is_custom_resource(obj: dict[str, Any]) -> bool:
    return str(obj["apiVersion"]).rpartition("/")[0] not in BUILTIN_GROUPS


def register_objects(
    name: str, objects: Sequence[dict[str, Any]], parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> list[pulumi.Resource]:
    """Register a component's objects: built-in kinds in one ConfigGroup (the provider applies them in order and
    awaits each), custom resources (LWS, ScaledObject, monitors, rules) one ``CustomResource`` each.

    A ConfigGroup must look up whether a custom kind is namespaced, which fails when its CRD is not served yet: at
    preview before the add-on's chart is installed, and always in render mode (pulumi-kubernetes issue 3176).
    """
    opts = pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on))
    builtin = [obj for obj in objects if not is_custom_resource(obj)]
    resources: list[pulumi.Resource] = []
    if builtin:
        resources.append(k8s.yaml.v2.ConfigGroup(name, yaml=yaml_stream(builtin), opts=opts))
    for obj in objects:
        if is_custom_resource(obj):
            extra = set(obj) - {"apiVersion", "kind", "metadata", "spec"}
            if extra:
                raise ValueError(f"{obj['kind']}/{obj['metadata']['name']}: only metadata and spec are registered, "
                                 f"not {sorted(extra)}")
            resources.append(k8s.apiextensions.CustomResource(
                f"{name}-{str(obj['kind']).lower()}", api_version=obj["apiVersion"], kind=obj["kind"],
                metadata=obj["metadata"], spec=obj.get("spec"), opts=opts,
            ))
    return resources


def yaml_stream(objects: Sequence[dict[str, Any]]) -> str:
    """A multi-document YAML stream, each document the object as JSON (valid YAML, quoted strings, key order kept).

    A ConfigGroup gets its objects this way rather than as ``objs``: the SDK serializes one string in constant time but
    walks every nested field of ``objs``, about 4x the CPU per group, which dominated a program with many models.
    Secrets never travel this way (register_secret)."""
    return "".join(f"---\n{json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n" for obj in objects)


def register_secret(
    name: str, obj: dict[str, Any], key: str, value: pulumi.Input[str], parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
) -> k8s.core.v1.Secret:
    """A Secret built from the builder's metadata, its one value a secret Output (encrypted in state, never logged)."""
    metadata = obj["metadata"]
    return k8s.core.v1.Secret(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=metadata["name"], namespace=metadata.get("namespace"), labels=metadata.get("labels")
        ),
        type=obj.get("type", "Opaque"),
        string_data={key: pulumi.Output.secret(value)},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on),
                                    additional_secret_outputs=["data", "stringData"]),
    )


def register_secrets(
    name: str, setting: str, objects: Sequence[dict[str, Any]], key: str, value: pulumi.Input[str] | None,
    parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = (),
) -> list[pulumi.Resource]:
    """The Secrets a component creates for one Pulumi secret (``<name>-<setting>``); a stack that refers to a Pulumi
    secret must have passed its value in."""
    if not objects:
        return []
    if value is None:
        raise ValueError(f"{name}: {setting} is a Pulumi secret but no value was passed in")
    return [register_secret(f"{name}-{setting}", obj, key, value, parent, depends_on) for obj in objects]
