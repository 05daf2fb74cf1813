"""The Pulumi program: read the stack's `vllm-pulumi:deployment` once, plan it, register the stack, export the plan.

A bad spec stops here with every problem listed by field path (pulumi.RunError: no traceback) and nothing registered.
"""

from __future__ import annotations

import gc

import pulumi

from vllm_pulumi.components.composition import compose_stack
from vllm_pulumi.components.provider import build_provider
from vllm_pulumi.components.stack import VllmStack, pulumi_secret_keys
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.spec.validation import SpecError


def program() -> None:
    config = pulumi.Config("vllm-pulumi")
    try:
        planned = load_deployment(config.require_object("deployment"), root="vllm-pulumi:deployment")
    except SpecError as error:
        raise pulumi.RunError(str(error)) from None
    spec, plans = planned.spec, planned.plans
    secrets = {key: config.require_secret(key) for key in pulumi_secret_keys(spec)}
    for plan in plans:
        for warning in plan.warnings:
            pulumi.log.warn(f"{plan.spec.name}: {warning}")
    objects = compose_stack(spec, plans)
    for note in objects.addon_notes:
        pulumi.log.warn(note)

    connection = build_provider(spec.cluster)
    stack = VllmStack(
        pulumi.get_stack(), spec, plans, secrets=secrets, objects=objects,
        cluster_security_group_id=connection.cluster_security_group_id,
        opts=pulumi.ResourceOptions(providers=connection.providers),
    )
    # What is registered now lives until the process exits: keep the cyclic collector from rescanning it while the SDK
    # talks to the engine (about a fifth of the CPU of a 100-model program, see bench/bench_program.py).
    gc.freeze()
    pulumi.export("namespace", spec.namespace)
    pulumi.export("models", {
        plan.spec.name: {
            "url": stack.services[plan.spec.name].url,
            "workload": "LeaderWorkerSet" if plan.multi_node else "Deployment",
            "gpu": plan.gpu.id,
            "gpus_per_replica": plan.layout.gpus_per_replica,
            "tensor_parallel_size": plan.layout.tensor_parallel_size,
            "pipeline_parallel_size": plan.layout.pipeline_parallel_size,
            "max_model_len": plan.capacity.max_model_len,
            "kv_cache_tokens": plan.capacity.kv_cache_tokens,
            "max_concurrency": plan.capacity.max_concurrency,
            "startup_budget_seconds": plan.startup_budget_seconds,
            "termination_grace_period_seconds": plan.termination_grace_period_seconds,
            "pvc_size_gib": plan.pvc_size_gib if plan.uses_pvc else 0,
        }
        for plan in plans
    })


if __name__ == "__main__":
    program()
