"""Everything of one model's plan but its rollout (which depends on every model on the same pool): each concern's
module in the order its checks run, so a model with several problems reports the same first one every time."""

from __future__ import annotations

from vllm_pulumi.runtime.planning.autoscaling import autoscaling_warnings, plan_autoscaling
from vllm_pulumi.runtime.planning.interconnect import efa_devices_per_pod, parallelism_warnings, serving_image
from vllm_pulumi.runtime.planning.lifecycle import plan_lifecycle, serving_startup_budget
from vllm_pulumi.runtime.planning.node_fit import check_pod_fits_node
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.plans import RolloutPlan, ServingPlan
from vllm_pulumi.runtime.planning.replica import plan_replica, serve_args
from vllm_pulumi.runtime.planning.resources import TMP_SIZE_GIB, cache_size_gib, plan_cpu_request, plan_memory
from vllm_pulumi.runtime.planning.secrets import secret_warnings
from vllm_pulumi.runtime.planning.storage import plan_pvc_size_gib, plan_weights_source, storage_warnings
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec

# What a plan carries until the pool's rollout is decided (planning/rollout.py).
_UNDECIDED = RolloutPlan(1, 0, "not decided yet", 0, 0)


def plan_pods(spec: DeploymentSpec, index: int, shape: NodeShape) -> ServingPlan:
    """One model's serving pods on their pool; raises the model's first PlanningError."""
    model, path = spec.models[index], f"models[{index}]"
    replica = plan_replica(model, shape, path)
    source = plan_weights_source(model, replica.model, path)
    budget = serving_startup_budget(model, replica, shape, source.runai_streamer)
    lifecycle = plan_lifecycle(model, budget, path)
    memory = plan_memory(model, replica.layout, path)
    pvc_gib = plan_pvc_size_gib(model.storage, replica.model, path)
    autoscaling = plan_autoscaling(model, lifecycle.termination_grace_period_seconds,
                                   lifecycle.startup_budget_seconds, path)
    backend, args = serve_args(model, source.model_ref, replica, source.runai_streamer)
    efa_devices = efa_devices_per_pod(spec, shape, replica.layout.layout == "leader-worker-set")
    image, image_warnings = serving_image(model, efa_devices, path)
    warnings = (list(replica.capacity.warnings) + parallelism_warnings(replica.layout, replica.gpu, efa_devices)
                + image_warnings + storage_warnings(model) + secret_warnings(spec, model)
                + autoscaling_warnings(model, path, lifecycle.startup_budget_seconds, budget.node_seconds))
    cpu_request, cpu_millicores = plan_cpu_request(model, replica.layout, path)
    plan = ServingPlan(
        spec=model, namespace=spec.namespace, model=replica.model, gpu=replica.gpu, layout=replica.layout,
        capacity=replica.capacity, startup=budget, hf_repo=source.hf_repo, model_ref=source.model_ref, image=image,
        args=args, executor_backend=backend, startup_budget_seconds=lifecycle.startup_budget_seconds,
        pre_stop_sleep_seconds=lifecycle.pre_stop_sleep_seconds,
        shutdown_timeout_seconds=lifecycle.shutdown_timeout_seconds,
        termination_grace_period_seconds=lifecycle.termination_grace_period_seconds,
        shm_size_gib=memory.shm_size_gib, cpu_request=cpu_request, cpu_request_millicores=cpu_millicores,
        memory_request_gib=memory.memory_request_gib, cpu_limit=model.resources.cpu_limit,
        memory_limit_gib=model.resources.memory_limit_gib, cache_size_gib=cache_size_gib(model.storage, pvc_gib),
        tmp_size_gib=TMP_SIZE_GIB, pvc_size_gib=pvc_gib, autoscaling=autoscaling, node_shape=shape,
        rollout=_UNDECIDED, warnings=warnings, efa_devices_per_pod=efa_devices,
    )
    check_pod_fits_node(spec, index, plan)
    return plan
