"""Whole pods on identical nodes: how many nodes a set of pods needs, and how many more pods a pool has room for.

The scheduler places a pod on one node whose free GPUs, CPU, memory and ephemeral storage all cover its requests.
``Packing`` does the same, first fit over the nodes in the order they were filled, so it counts what the scheduler
can do: several one-GPU pods share an eight-GPU node, a pod whose memory request takes most of a node leaves its
other GPUs idle. Nodes are kept as groups of identical leftovers, so a pool of thousands of nodes costs no more than
one of ten.
"""

from __future__ import annotations

import math

from vllm_pulumi.runtime.planning.nodes import Resources


class Packing:
    """Pods placed on up to ``max_nodes`` identical nodes (``None``: as many nodes as it takes)."""

    def __init__(self, node: Resources, max_nodes: int | None) -> None:
        self.node = node
        self.max_nodes = max_nodes
        self.used_nodes = 0
        # Leftover on a node -> how many opened nodes have exactly that left, in the order they were first filled.
        self._groups: dict[Resources, int] = {}

    def copy(self) -> Packing:
        other = Packing(self.node, self.max_nodes)
        other.used_nodes = self.used_nodes
        other._groups = dict(self._groups)
        return other

    def _closed_nodes_left(self) -> int | None:
        return None if self.max_nodes is None else max(0, self.max_nodes - self.used_nodes)

    def room_for(self, pod: Resources) -> int | None:
        """How many more such pods fit (None: without limit, when the node count is not bounded)."""
        on_open = sum(count * left.how_many(pod) for left, count in self._groups.items())
        per_new_node = self.node.how_many(pod)
        closed = self._closed_nodes_left()
        if closed is None:
            return None if per_new_node else on_open
        return on_open + closed * per_new_node

    def place(self, pod: Resources, count: int) -> int:
        """Place up to ``count`` pods, open nodes first; returns how many were placed."""
        remaining = count
        for left, nodes in list(self._groups.items()):
            if remaining == 0:
                break
            per_node = left.how_many(pod)
            if per_node == 0:
                continue
            taken = min(remaining, nodes * per_node)
            full, rest = divmod(taken, per_node)
            self._move(left, full, left.minus(pod, per_node))
            if rest:
                self._move(left, 1, left.minus(pod, rest))
            remaining -= taken
        per_new_node = self.node.how_many(pod)
        if remaining and per_new_node:
            wanted = math.ceil(remaining / per_new_node)
            closed = self._closed_nodes_left()
            opened = wanted if closed is None else min(wanted, closed)
            taken = min(remaining, opened * per_new_node)
            full, rest = divmod(taken, per_new_node)
            self.used_nodes += opened
            if full:
                self._add(self.node.minus(pod, per_new_node), full)
            if rest:
                self._add(self.node.minus(pod, rest), 1)
            remaining -= taken
        return count - remaining

    def _move(self, left: Resources, nodes: int, to: Resources) -> None:
        if nodes == 0:
            return
        self._groups[left] -= nodes
        if self._groups[left] == 0:
            del self._groups[left]
        self._add(to, nodes)

    def _add(self, left: Resources, nodes: int) -> None:
        self._groups[left] = self._groups.get(left, 0) + nodes


def nodes_needed(node: Resources, pods: list[tuple[Resources, int]]) -> int | None:
    """Nodes the pods take when placed in this order; None when one of them fits no node."""
    packing = Packing(node, None)
    for pod, count in pods:
        if packing.place(pod, count) < count:
            return None
    return packing.used_nodes
