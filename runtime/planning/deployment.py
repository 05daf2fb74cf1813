"""A stack's deployment from its raw config to its serving plans, planned once: ``load_deployment`` validates the
spec, plans every model (collecting every problem, each addressed to the setting to change) and decides each pool's
node count and rollouts; the program and the plan CLI use what it returns."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.pods import plan_pods
from vllm_pulumi.runtime.planning.pools import (
    by_pool,
    min_scale_issues,
    model_shapes,
    stated_node_issues,
    stated_shapes,
)
from vllm_pulumi.runtime.planning.rollout import pool_plans
from vllm_pulumi.runtime.planning.secrets import secret_issues
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.validation import SpecError, parse_spec


@dataclass(frozen=True)
class PlannedDeployment:
    """A validated stack and the serving plan of each of its models, in stack order."""

    spec: DeploymentSpec
    plans: list[ServingPlan]


def load_deployment(raw: object, root: str = "") -> PlannedDeployment:
    """Validate a stack's ``deployment`` config (a plain dict) and plan it, or raise SpecError listing every problem:
    the spec's own first, then the cross-setting ones (each model's first, then the pools' minimum scale)."""
    spec = parse_spec(raw, root)
    pods, issues = _plan_models(spec, f"{root}." if root else "")
    if issues:
        raise SpecError(issues)
    return PlannedDeployment(spec, _decide_pools(spec, pods))


def plan_deployment(spec: DeploymentSpec) -> list[ServingPlan]:
    """Serving plans for every model of a spec that plans cleanly (raises the first PlanningError otherwise)."""
    pods = []
    for index, shape in enumerate(model_shapes(spec)):
        if isinstance(shape, PlanningError):
            raise shape
        pods.append(plan_pods(spec, index, shape))
    return _decide_pools(spec, pods)


def plan_model(spec: DeploymentSpec, index: int) -> ServingPlan:
    """One model's plan (its rollout depends on the other models on its pool, so the whole stack is planned)."""
    return plan_deployment(spec)[index]


def node_shapes(spec: DeploymentSpec) -> list[NodeShape]:
    """Every pool of the stack, stated or assumed, in order: the stated pools, then the assumed ones by model.

    Assumed pools carry the node count the planner assumed for them (every model on them at max scale plus a surge
    replica each), so a simulated cluster built from these shapes is the cluster the plan was made for.
    """
    shapes = {shape.pool: shape for shape in stated_shapes(spec)}
    for plan in plan_deployment(spec):
        shapes.setdefault(plan.node_shape.pool, plan.node_shape)
    return list(shapes.values())


def node_shape_for(spec: DeploymentSpec, model_index: int) -> NodeShape:
    """The pool a model's serving pods land on (with the planner's node count when assumed)."""
    return plan_deployment(spec)[model_index].node_shape


def _plan_models(spec: DeploymentSpec, prefix: str) -> tuple[list[ServingPlan], list[PlanningError]]:
    """Each model's pods planned, and every cross-setting problem of the stack at its setting (``prefix`` the path
    of the deployment in the stack file)."""
    try:
        stated_shapes(spec)
    except PlanningError:
        unknown = stated_node_issues(spec, prefix)
        if unknown:
            return [], unknown
    pods: list[ServingPlan] = []
    issues: list[PlanningError] = []
    for index, shape in enumerate(model_shapes(spec)):
        model = spec.models[index]
        issues += secret_issues(spec, f"{prefix}models[{index}].api_key", model.api_key)
        issues += secret_issues(spec, f"{prefix}models[{index}].storage.hf_token", model.storage.hf_token)
        try:
            if isinstance(shape, PlanningError):
                raise shape
            pods.append(plan_pods(spec, index, shape))
        except PlanningError as error:
            issues.append(error.at(prefix + error.setting) if prefix else error)
    if not issues:
        issues += min_scale_issues(pods, prefix)
    return pods, issues


def _decide_pools(spec: DeploymentSpec, pods: list[ServingPlan]) -> list[ServingPlan]:
    """Every model's plan with its pool's node count (when assumed) and its rollout, in stack order."""
    indices = {model.name: index for index, model in enumerate(spec.models)}
    decided = {plan.spec.name: plan for on_pool in by_pool(pods).values()
               for plan in pool_plans(spec, on_pool[0].node_shape, on_pool, indices)}
    return [decided[plan.spec.name] for plan in pods]
