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


def register_objects(
    name: str, objects: Sequence[dict[str, Any]], parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> k8s.yaml.v2.ConfigGroup | None:
    """One ConfigGroup for a component's objects; the provider applies them in order and awaits each one.

    The objects go in as one YAML stream of JSON documents rather than as ``objs``: the SDK serializes a string in
    constant time but walks every nested field of ``objs`` (about 4x the CPU per group, which dominated a program
    with many models). Secrets never travel this way (see register_secret).
    """
    if not objects:
        return None
    return k8s.yaml.v2.ConfigGroup(
        name,
        yaml=yaml_stream(objects),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )


def yaml_stream(objects: Sequence[dict[str, Any]]) -> str:
    """A multi-document YAML stream, each document the object as JSON (valid YAML, quoted strings, key order kept)."""
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
