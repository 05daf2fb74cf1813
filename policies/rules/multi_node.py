"""Multi-node LeaderWorkerSets: the whole group is recreated when one pod restarts, and the workers outlive the
leader's drain."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.pods import gpu_limit, pre_stop_seconds
from vllm_pulumi.policies.rule_types import Rule, Violation, cannot_check, rule
from vllm_pulumi.policies.values import mapping
from vllm_pulumi.policies.vllm_command import is_vllm_image
from vllm_pulumi.policies.workload import Resource


@rule("lws-restart-policy", group="Multi-node", enforcement="mandatory", severity="high", kinds=("LeaderWorkerSet",))
def lws_restart_policy(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A multi-node LeaderWorkerSet (size > 1) uses restartPolicy RecreateGroupOnPodRestart (the default).

    Why: A vLLM replica spread over pods is one Ray/NCCL group: when one pod restarts, the others hang on collectives
    forever unless the whole group is recreated.

    Fix: Set spec.leaderWorkerTemplate.restartPolicy: RecreateGroupOnPodRestart (or remove it).
    """
    if not res.is_lws or (res.lws_size or 2) <= 1:
        return
    policy = mapping(res.spec.get("leaderWorkerTemplate")).get("restartPolicy", "RecreateGroupOnPodRestart")
    if policy not in ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart"):
        yield Violation(f"spec.leaderWorkerTemplate.restartPolicy is {policy!r} for a group of {res.lws_size} pods",
                        "set spec.leaderWorkerTemplate.restartPolicy: RecreateGroupOnPodRestart")


@rule(
    "lws-workers-outlive-drain", group="Multi-node", enforcement="mandatory", severity="high",
    kinds=("LeaderWorkerSet",),
)
def lws_workers_outlive_drain(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """In a multi-node LeaderWorkerSet, the worker pods keep running while the leader drains: their preStop sleep covers
    the leader's preStop + --shutdown-timeout, and their grace period covers that sleep.

    Why: When a group is deleted every pod gets SIGTERM at once; workers that stop Ray right away take the model's other
    shards with them, so the leader's drain fails every in-flight request anyway.

    Fix: Give the worker containers preStop: {sleep: {seconds: <leader preStop + shutdown timeout>}} and a
    terminationGracePeriodSeconds above it.
    """
    if not res.is_lws or (res.lws_size or 2) <= 1:
        return
    leaders = [s for s in res.servers if s.template.role == "leader"]
    if not leaders:
        return
    leader = leaders[0]
    leader_pre_stop = pre_stop_seconds(leader.container)
    shutdown = leader.command.int_flag("shutdown-timeout", 0)
    if leader_pre_stop is None or shutdown is None:
        yield cannot_check("the workers' drain", "the leader's preStop or --shutdown-timeout is not a literal number")
        return
    needed = leader_pre_stop + shutdown
    for template in res.templates:
        if template.role != "worker":
            continue
        for container in template.containers:
            if not (gpu_limit(container) or is_vllm_image(container.get("image"))):
                continue
            worker_pre_stop = pre_stop_seconds(container)
            name = container.get("name")
            if worker_pre_stop is None:
                yield cannot_check("the workers' drain", f"worker container {name!r} has a preStop hook of unknown length")
            elif worker_pre_stop < needed:
                yield Violation(
                    f"worker container {name!r}: preStop sleeps {worker_pre_stop} s, but the leader drains for preStop "
                    f"{leader_pre_stop} s + --shutdown-timeout {shutdown} s = {needed} s",
                    f"set lifecycle.preStop.sleep.seconds: {needed} on {name!r} in {template.path}",
                )
            elif template.grace_seconds <= worker_pre_stop:
                yield Violation(
                    f"worker pods: terminationGracePeriodSeconds {template.grace_seconds} s does not outlast the "
                    f"{worker_pre_stop} s preStop sleep of {name!r}",
                    f"set terminationGracePeriodSeconds: {worker_pre_stop + 10} in {template.path}",
                )


RULES: tuple[Rule, ...] = (lws_restart_policy, lws_workers_outlive_drain)
"""This topic's rules, in the order the registry lists them."""
