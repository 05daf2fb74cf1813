"""Generate docs/spec.md, the stack settings reference, from the spec's own field descriptions.

``python -m runtime.docs [OUTPUT]`` (default docs/spec.md). A test fails when the checked-in file differs, so the
pydantic models stay the one source of every setting, its default and its reason.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from vllm_pulumi.runtime.spec.cluster import EksCluster, GpuNodesSpec, KubeconfigCluster, RenderCluster
from vllm_pulumi.runtime.spec.common import ExistingSecret, SecretRef
from vllm_pulumi.runtime.spec.deployment import (
    AddonSpec,
    AddonsSpec,
    DeploymentSpec,
    GpuOperatorSpec,
    ObservabilitySpec,
)
from vllm_pulumi.runtime.spec.engine import EngineSettings
from vllm_pulumi.runtime.spec.model import (
    AutoscalingSpec,
    LifecycleSpec,
    ModelDeploymentSpec,
    NetworkSpec,
    ResourcesSpec,
    StorageSpec,
)
from vllm_pulumi.runtime.spec.node_pools import ManagedNodeGroupPool, NodePoolBase, node_pool_settings

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "spec.md"

# Each section: the YAML path it documents and its model, in the order a stack file reads. A node pool's section is
# opened by the default provisioner's class.
SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("vllm-pulumi:deployment", DeploymentSpec),
    ("cluster (mode: render)", RenderCluster),
    ("cluster (mode: kubeconfig)", KubeconfigCluster),
    ("cluster.nodes[] (render, kubeconfig)", GpuNodesSpec),
    ("cluster (mode: eks)", EksCluster),
    ("cluster.node_pools[]", ManagedNodeGroupPool),
    ("addons", AddonsSpec),
    ("addons.gpu_operator", GpuOperatorSpec),
    ("addons.keda, addons.lws", AddonSpec),
    ("models[]", ModelDeploymentSpec),
    ("models[].engine", EngineSettings),
    ("models[].storage", StorageSpec),
    ("models[].autoscaling", AutoscalingSpec),
    ("models[].network", NetworkSpec),
    ("models[].resources", ResourcesSpec),
    ("models[].lifecycle", LifecycleSpec),
    ("models[].api_key, models[].storage.hf_token", SecretRef),
    ("...existing_secret", ExistingSecret),
    ("observability", ObservabilitySpec),
]


def _settings(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's settings; a node pool's are those of every provisioner's class, in one table."""
    return node_pool_settings() if issubclass(model, NodePoolBase) else dict(model.model_fields)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in args)
    if origin in (typing.Union, types.UnionType):
        names = dict.fromkeys(_type_name(arg) for arg in args if arg is not type(None))  # ordered, no repeats
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(arg) for arg in args)}]"
    if isinstance(annotation, type):
        return "mapping" if issubclass(annotation, BaseModel) else annotation.__name__
    return str(annotation)


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        return f"`{field.default!r}`" if field.default is not None else "derived" if "None:" in (
            field.description or "") else "none"
    if field.default_factory is not None:
        value = field.default_factory()
        return "(section)" if isinstance(value, BaseModel) else f"`{value!r}`"
    return "required"


def render() -> str:
    lines = [
        "# Stack settings", "",
        "<!-- Generated from runtime/spec/ by `python -m runtime.docs`; do not edit. -->", "",
        "A stack file holds one setting, `vllm-pulumi:deployment`, validated by "
        "`runtime.planning.deployment.load_deployment`: "
        "unknown keys are refused (with the closest valid name), and settings are checked against each other and "
        "against the model and GPU facts before anything is registered. \"derived\" defaults are computed from "
        "the model and hardware (`runtime/planning/`); set them to override.", "",
    ]
    for path, model in SECTIONS:
        lines += [f"## `{path}`", "", (model.__doc__ or "").strip().splitlines()[0], "",
                  "| setting | type | default | why |", "|---|---|---|---|"]
        for name, field in _settings(model).items():
            lines.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | "
                         f"{(field.description or '').replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    output = Path(args[0]) if args else DEFAULT_OUTPUT
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render())
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
