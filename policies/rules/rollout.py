"""Rolling updates of a vLLM Deployment or LeaderWorkerSet: no replica stops before its replacement serves, unless
the pool has no room for a surge replica at max scale (then one replica at a time)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, rule
from vllm_pulumi.policies.values import as_float, as_int, mapping
from vllm_pulumi.policies.workload import Resource, gpu_templates
from vllm_pulumi.runtime import annotations as ann


def _is_zero(value: object) -> bool:
    return value == 0 or (isinstance(value, str) and value.strip() in ("0", "0%"))


def _positive(value: object) -> bool:
    if isinstance(value, str) and value.strip().endswith("%"):
        number = as_float(value.strip()[:-1])
        return number is not None and number > 0
    number = as_int(value)
    return number is not None and number >= 1


@dataclass(frozen=True)
class RolloutRoom:
    """Replicas the workload's pool holds at max scale, replicas at max scale, and where the numbers come from."""

    capacity: int
    max_replicas: int
    basis: str

    @property
    def has_room(self) -> bool:
        """Room for one more replica at max scale: a surge replica can be placed."""
        return self.capacity > self.max_replicas


def rollout_room(res: Resource, settings: Mapping[str, Any]) -> RolloutRoom | None:
    """The pool facts the program wrote on the workload (runtime/annotations.py), or the rule's settings for
    manifests without them; None when they do not say (the rule then asks for surge, as without facts)."""
    notes = res.annotations
    max_replicas = as_int(notes.get(ann.MAX_REPLICAS)) or as_int(settings.get("max_replicas")) or as_int(
        res.spec.get("replicas"))
    if not max_replicas:
        return None
    capacity = as_int(notes.get(ann.REPLICA_CAPACITY))
    if capacity is not None:
        return RolloutRoom(capacity, max_replicas, f"the {ann.REPLICA_CAPACITY} annotation")
    nodes = as_int(notes.get(ann.POOL_MAX_NODES)) or as_int(settings.get("pool_max_nodes"))
    node_gpus = as_int(notes.get(ann.NODE_GPUS)) or as_int(settings.get("gpus_per_node"))
    pod_gpus = max((t.gpus for t in gpu_templates(res)), default=0)
    if not nodes or not node_gpus or not pod_gpus:
        return None
    size = (res.lws_size or 1) if res.is_lws else 1
    per_node = node_gpus // pod_gpus
    group = f", {size} pods per replica" if size > 1 else ""
    return RolloutRoom(nodes * per_node // size, max_replicas,
                       f"{nodes} node(s) of {node_gpus} GPUs, each holding {per_node} pod(s) of {pod_gpus} GPU(s)"
                       f"{group}")


@rule(
    "rollout-no-unavailable", group="Rollout", enforcement="mandatory", severity="high",
    kinds=("Deployment", "LeaderWorkerSet"),
    settings={
        "pool_max_nodes": Setting(0, "Nodes of the pool, for workloads without the pool annotations (0: unknown)."),
        "gpus_per_node": Setting(0, "GPUs of one node of the pool, for workloads without the pool annotations "
                                    "(0: unknown)."),
        "max_replicas": Setting(0, "Replicas at max scale, for workloads without the max-replicas annotation (0: "
                                   "the replicas field)."),
    },
    text_values={"capacity": ann.REPLICA_CAPACITY, "max_nodes": ann.POOL_MAX_NODES, "node_gpus": ann.NODE_GPUS,
                 "max_replicas": ann.MAX_REPLICAS},
)
def rollout_no_unavailable(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """Rolling updates keep every replica serving: maxUnavailable 0 and maxSurge >= 1 (Deployment
    spec.strategy.rollingUpdate; LeaderWorkerSet spec.rolloutStrategy.rollingUpdateConfiguration). When the pool facts
    say there is no room for one more replica at max scale (the {capacity} annotation, or {max_nodes} and {node_gpus}
    with {max_replicas}, or this rule's settings), a surge would deadlock: then the rule asks for maxSurge 0 and
    maxUnavailable 1 instead, and fires on the surging form.

    Why: A replica taken down before its replacement has loaded the model (minutes) drops capacity and in-flight
    sessions; Deployments default to 25% unavailable, LeaderWorkerSets to 1 group unavailable and no surge. But a surge
    replica needs a node: when the pool is full at max scale it stays Pending, the rollout never progresses, and the
    old version runs until someone notices.

    Fix: Set maxUnavailable: 0 and maxSurge: 1 when the pool holds one more replica at max scale; when it cannot, add a
    node, or set maxSurge: 0 and maxUnavailable: 1 (one replica at a time out of service).
    """
    if not res.is_vllm:
        return
    if res.kind == "Deployment":
        strategy = mapping(res.spec.get("strategy"))
        if strategy.get("type") == "Recreate":
            yield Violation("strategy.type Recreate stops every replica before starting new ones",
                            "use strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}")
            return
        rolling = mapping(strategy.get("rollingUpdate"))
        path, unavailable, surge = "spec.strategy.rollingUpdate", rolling.get("maxUnavailable", "25%"), \
            rolling.get("maxSurge", "25%")
    else:
        rolling = mapping(mapping(res.spec.get("rolloutStrategy")).get("rollingUpdateConfiguration"))
        path = "spec.rolloutStrategy.rollingUpdateConfiguration"
        unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
    groups = as_int(res.spec.get("replicas")) if res.kind == "LeaderWorkerSet" else None
    if groups is not None and groups <= max(1, as_int(surge) or 0):
        yield from _few_groups_rollout(path, unavailable, surge, groups)
        return
    room = rollout_room(res, settings)
    if room is not None and not room.has_room:
        yield from _rollout_without_room(path, unavailable, surge, room)
        return
    if not _is_zero(unavailable):
        yield Violation(f"{path}.maxUnavailable is {unavailable!r}: replicas stop before their replacements serve",
                        f"set {path}.maxUnavailable: 0" + ("" if _positive(surge) else " and maxSurge: 1") + (
                            f" (the pool holds {room.capacity} replicas at max scale, {room.max_replicas} needed: "
                            "room for a surge replica)" if room is not None else ""))
    elif not _positive(surge):
        yield Violation(f"{path}.maxSurge is {surge!r}: with maxUnavailable 0 the rollout cannot make progress",
                        f"set {path}.maxSurge: 1")


def _few_groups_rollout(path: str, unavailable: object, surge: object, groups: int) -> Iterator[Violation]:
    """LeaderWorkerSet (0.8) starts a surge group only while more groups than maxSurge are out of date: with
    replicas <= maxSurge (a single group, typically) a surging rollout never starts, whatever the pool's room, and
    replacing the group (maxUnavailable 1) is the only form that progresses."""
    if _is_zero(unavailable):
        yield Violation(
            f"{path}: maxSurge {surge!r} and maxUnavailable 0 with {groups} group(s): LeaderWorkerSet surges only while "
            "more groups than maxSurge are out of date, so this rollout never starts",
            f"set {path}.maxSurge: 0 and maxUnavailable: 1 (the group is replaced, an outage of one start), or run "
            f"more than {max(1, as_int(surge) or 0)} replicas on a pool with room for one more group")


def _rollout_without_room(path: str, unavailable: object, surge: object, room: RolloutRoom) -> Iterator[Violation]:
    """No room for a surge replica at max scale: replacing one replica at a time is the form that progresses."""
    numbers = (f"the pool holds {room.capacity} replica(s) at max scale and {room.max_replicas} are needed "
               f"({room.basis})")
    if _is_zero(unavailable):
        if _positive(surge):
            yield Violation(
                f"{path}.maxSurge is {surge!r} with maxUnavailable 0, but {numbers}: the surge replica can never be "
                "placed at full scale, so the rollout deadlocks",
                f"set {path}.maxSurge: 0 and maxUnavailable: 1 (one replica at a time), or add nodes so the pool "
                f"holds {room.max_replicas + 1} replicas")
        else:
            yield Violation(f"{path}: maxSurge {surge!r} and maxUnavailable 0 cannot make progress",
                            f"set {path}.maxSurge: 0 and maxUnavailable: 1 ({numbers})")
    elif as_int(unavailable) != 1:
        yield Violation(f"{path}.maxUnavailable is {unavailable!r}: more than one replica may stop at once",
                        f"set {path}.maxUnavailable: 1 ({numbers}, so replace one replica at a time)")


RULES: tuple[Rule, ...] = (rollout_no_unavailable,)
"""This topic's rules, in the order the registry lists them."""
