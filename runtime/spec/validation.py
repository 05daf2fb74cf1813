"""From a stack's raw ``deployment`` value to a DeploymentSpec, and every problem found on the way.

``parse_spec(raw)`` validates the shape (pydantic, ``extra="forbid"``) and each object's own checks, and raises
``SpecError`` listing every problem with the field path as written in the stack file, the value, the reason and a
valid alternative. The checks of the settings against each other and against the model and GPU facts need the
planner: runtime/planning/deployment.py (``load_deployment``) runs them next, reporting through the same SpecError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from vllm_pulumi.runtime.errors import PlanningError, closest
from vllm_pulumi.runtime.spec.cluster import EksCluster, KubeconfigCluster, RenderCluster
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.node_pools import POOL_CLASSES, NodePoolBase, node_pool_settings

# The tags of the spec's unions (cluster mode, pool provisioner): in an error's location, not in the stack file.
_TAGGED: dict[str, type[BaseModel]] = {
    "render": RenderCluster, "kubeconfig": KubeconfigCluster, "eks": EksCluster, **POOL_CLASSES,
}


class SpecError(ValueError):
    """All problems found in a stack's settings; the message lists one per line."""

    def __init__(self, issues: list[PlanningError]) -> None:
        self.issues = issues
        lines = [f"{len(issues)} problem(s) in the stack settings:"] + [f"  - {issue.message}" for issue in issues]
        super().__init__("\n".join(lines))


def _path(loc: tuple[int | str, ...], root: str) -> str:
    text = root
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in _TAGGED or part == "function-after[_exactly_one(), SecretRef]":
            continue  # discriminator tags and validator names are not part of what the user wrote
        elif part.startswith(("function-", "constrained-")):
            continue
        else:
            text += f".{part}" if text else part
    return text


def _model_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names valid where an unknown key was written, to suggest the closest."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        if part in _TAGGED:
            current = _TAGGED[part]
            continue
        field = current.model_fields.get(part)
        if field is None:
            return []
        current = next(
            (c for c in _types_in(field.annotation) if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    if current is not None and issubclass(current, NodePoolBase):
        return list(node_pool_settings())  # a pool may name any provisioner's setting; its class refuses it by name
    return list(current.model_fields) if current is not None else []


def _types_in(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _types_in(arg)


def issues_from_validation(error: ValidationError, root: str = "") -> list[PlanningError]:
    issues: list[PlanningError] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _path(loc, root) or "(top level)"
        value = item.get("input")
        message = item["msg"].removeprefix("Value error, ")
        alternative = ""
        if item["type"] == "extra_forbidden":
            known = _model_fields(DeploymentSpec, loc)
            near = closest(str(loc[-1]), known)
            message = "unknown setting"
            alternative = f"did you mean {', '.join(near)}?" if near else f"valid here: {', '.join(known)}"
        elif item["type"] == "missing":
            value = None
            message = "required setting is missing"
        elif item["type"] == "union_tag_invalid":
            alternative = "set mode to render, kubeconfig or eks"
        elif item["type"] == "literal_error":
            alternative = f"valid: {item.get('ctx', {}).get('expected', '')}"
        if isinstance(value, dict):
            value = "{...}"
        issues.append(PlanningError(path, value, message, alternative))
    return issues


def parse_spec(raw: object, root: str = "") -> DeploymentSpec:
    """Validate a stack's ``deployment`` config (a plain dict) into a DeploymentSpec, or raise SpecError."""
    if not isinstance(raw, dict):
        raise SpecError([PlanningError(root or "deployment", type(raw).__name__, "must be a mapping of settings",
                                       "see stacks/Pulumi.local.yaml for an example")])
    try:
        return DeploymentSpec.model_validate(raw)
    except ValidationError as error:
        raise SpecError(issues_from_validation(error, root)) from None
