"""Queue-based autoscaling for real: the stacks' ScaledObjects, applied by `pulumi up`, drive KEDA's operator, its
external-metrics adapter and admission webhooks (tests/e2e/harness/keda.py) and the controller manager's HPA controller,
on the queue Prometheus scrapes from a stand-in for vLLM's /metrics (tests/e2e/harness/metrics.py), in the simulated
cluster.

Time is compressed only through settings the stacks expose (tests/e2e/harness/autoscaled.py); KEDA and the HPA
controller run with their defaults.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.runtime.vocabulary import GPU_PRODUCT_LABEL

from .harness.autoscaled import (
    REACTION_TIMEOUT_SECONDS,
    SCALE_DOWN_WINDOW_SECONDS,
    SCALE_TIMEOUT_SECONDS,
    STARTUP_BUDGET_SECONDS,
    Autoscaled,
    autoscaled,
    scraped,
)
from .harness.cluster import SimulatedCluster
from .harness.engine import requires_engine
from .harness.simulation import Sampler, lws_groups, serving_pods

# Every test here runs KEDA in its simulated cluster (the `cluster` fixture, tests/e2e/conftest.py).
pytestmark = [pytest.mark.e2e, requires_engine, pytest.mark.cluster_options(keda=True)]


def _assert_the_hpa_has_the_stacks_bounds_metric_and_behaviour(scaled: Autoscaled) -> None:
    """The HPA KEDA made from the ScaledObject: the stack's target and bounds, the queue metric at the stack's
    threshold per replica, and the derived scale-down and scale-up behaviour."""
    plan, autoscaling = scaled.plan, scaled.plan.spec.autoscaling
    assert autoscaling is not None
    hpa = scaled.hpa()["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": plan.spec.name}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (autoscaling.min_replicas, autoscaling.max_replicas)
    [metric] = hpa["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == "s0-prometheus"
    assert metric["external"]["target"] == {"type": "AverageValue",
                                            "averageValue": str(autoscaling.queue_threshold)}
    scale_down = hpa["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] == SCALE_DOWN_WINDOW_SECONDS
    assert scale_down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": plan.cooldown_seconds}]
    assert hpa["behavior"]["scaleUp"]["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": STARTUP_BUDGET_SECONDS}]


def _assert_at_most_one_replica_removed_per_cooldown(sampler: Sampler, cooldown_seconds: int) -> None:
    """The scale-down policy (one Pod per cooldown) as the HPA applies it: never more than one replica below the
    count of one cooldown earlier. Replicas added within that period count from the period's start, so the two added
    during the test go together (3 -> 1): a rate limit, not one-at-a-time; each pod still drains."""
    for when, replicas in zip(sampler.times, sampler.samples, strict=True):
        earlier = [value for at, value in zip(sampler.times, sampler.samples, strict=True)
                   if at <= when - cooldown_seconds]
        before = earlier[-1] if earlier else sampler.samples[0]
        assert replicas >= before - 1, (replicas, before)


def test_keda_takes_the_scaled_object_and_scales_on_the_queue(cluster: SimulatedCluster, tmp_path: Path) -> None:
    """`edge`: KEDA accepts the ScaledObject (Ready) and creates its HPA with the stack's bounds, the queue metric at
    the stack's threshold per replica, and the derived scale-down behaviour. A queue of 8 (threshold 5) scales out to
    ceil(8/5) = 2, the new pod is scheduled on a GPU node of the pool and turns Ready; a queue of 100 stops at
    max_replicas 3. Back to an empty queue, no replica goes before the scale-down window has passed, never more than
    one below the count of one cooldown earlier (the scale-down policy), down to min_replicas and never below it. A second ScaledObject for the same
    Deployment is refused by KEDA's admission webhook."""
    with autoscaled("edge", cluster, tmp_path) as scaled:
        plan, autoscaling = scaled.plan, scaled.plan.spec.autoscaling
        assert autoscaling is not None and plan.cooldown_seconds is not None
        cluster.wait(lambda: scaled.condition("Ready") == "True", REACTION_TIMEOUT_SECONDS,
                     "KEDA to mark the ScaledObject Ready", scaled.diagnose)
        _assert_the_hpa_has_the_stacks_bounds_metric_and_behaviour(scaled)
        scraped(scaled)

        with Sampler(scaled.replicas, period_seconds=0.5).running() as sampler:
            scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=8)
            scaled.wait_replicas(2, "a queue of 8 at threshold 5")
            for pod in serving_pods(cluster, plan):
                labels = cluster.node_of(pod)["metadata"]["labels"]
                assert labels[GPU_PRODUCT_LABEL] == plan.gpu.product_label
                assert labels.items() >= pod["spec"]["nodeSelector"].items()
            assert max(sampler.samples) == 2, sampler.samples

            scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=100)
            scaled.wait_replicas(autoscaling.max_replicas, "a queue of 100, bounded by max_replicas")

            scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=0)
            emptied = time.monotonic()
            cluster.wait(lambda: scaled.replicas() < autoscaling.max_replicas, SCALE_TIMEOUT_SECONDS,
                         "the first replica removed after the queue emptied", scaled.diagnose)
            first_removal = time.monotonic()
            scaled.wait_replicas(autoscaling.min_replicas, "an empty queue",
                                 timeout=SCALE_TIMEOUT_SECONDS + plan.cooldown_seconds)
        assert max(sampler.samples) == autoscaling.max_replicas, sampler.samples
        assert min(sampler.samples) >= autoscaling.min_replicas, sampler.samples
        assert first_removal - emptied >= SCALE_DOWN_WINDOW_SECONDS - 1, first_removal - emptied
        _assert_at_most_one_replica_removed_per_cooldown(sampler, plan.cooldown_seconds)

        duplicate = copy.deepcopy(next(o for o in scaled.deployed.manifests if o["kind"] == "ScaledObject"))
        duplicate["metadata"] = {"name": "second-autoscaler", "namespace": plan.namespace}
        status, answer = cluster.request(
            "POST", f"/apis/keda.sh/v1alpha1/namespaces/{plan.namespace}/scaledobjects", duplicate)
        assert status >= 400 and "admission webhook" in str(answer) and plan.spec.name in str(answer), (status, answer)


def test_kv_cache_alone_then_the_queue_then_prometheus_down(cluster: SimulatedCluster, tmp_path: Path) -> None:
    """`prod` (KV-cache trigger on, fallback 2): a full KV cache on the one replica with nothing waiting scales out on
    vllm:kv_cache_usage_perc alone (0.95 at threshold 0.8 per replica: 2); a queue of 12 at threshold 5 then asks for
    ceil(12/5) = 3. With Prometheus gone, KEDA's scaler fails, the ScaledObject reports Fallback, and the HPA settles
    at fallback_replicas."""
    with autoscaled("prod", cluster, tmp_path) as scaled:
        plan, autoscaling = scaled.plan, scaled.plan.spec.autoscaling
        assert autoscaling is not None and autoscaling.kv_cache_trigger and autoscaling.fallback_replicas
        scraped(scaled)
        first = scaled.first_pod()
        scaled.metrics.set(plan.namespace, first, kv_cache=0.95)
        scaled.wait_replicas(2, "a KV cache 95% full, nothing waiting")

        scaled.metrics.set(plan.namespace, first, waiting=12)
        scaled.wait_replicas(3, "a queue of 12 at threshold 5")

        scaled.stop_prometheus()
        cluster.wait(lambda: scaled.condition("Fallback") == "True", SCALE_TIMEOUT_SECONDS,
                     "KEDA to fall back with Prometheus unreachable", scaled.diagnose)
        scaled.wait_replicas(autoscaling.fallback_replicas, "the fallback with Prometheus down")


def test_a_leader_worker_set_scales_by_whole_groups(cluster: SimulatedCluster, tmp_path: Path) -> None:
    """`multinode`, autoscaled 1..2 on four nodes (the planner warns that its two-node pool holds one group only): the
    HPA scales the LeaderWorkerSet through its scale subresource, so a queue of 6 at threshold 5 adds a whole group:
    leader and workers, each on its own node, all Ready."""

    def autoscale(raw: dict[str, Any]) -> None:
        raw["models"][0]["autoscaling"] = {"min_replicas": 1, "max_replicas": 2, "queue_threshold": 5}
        raw["models"][0].pop("replicas", None)
        raw["cluster"]["nodes"][0]["count"] = 4

    with autoscaled("multinode", cluster, tmp_path, autoscale) as scaled:
        plan = scaled.plan
        assert plan.multi_node
        hpa = scaled.hpa()["spec"]
        assert hpa["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
        scraped(scaled)
        scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=6)
        scaled.wait_replicas(2, "a queue of 6 at threshold 5")
        groups = lws_groups(serving_pods(cluster, plan))
        assert len(groups) == 2
        for index, members in groups.items():
            assert len(members) == plan.layout.size, (index, [p["metadata"]["name"] for p in members])
            assert len({pod["spec"]["nodeName"] for pod in members}) == plan.layout.size
