"""How fast the reference stacks' autoscaling reacts to a queue, measured in the simulated cluster with the real KEDA,
Prometheus and HPA controller, on the stacks' own settings.

    scripts/isolated.sh .venv/bin/python bench/bench_autoscaling.py [--stacks edge prod] [--factor 10] [--runs 3]

Not run by pytest; run it by hand (it re-runs itself through scripts/isolated.sh when it is not already in a network
namespace of its own). Needs the toolchain (scripts/toolchain.sh).

For each stack: `pulumi up` in a fresh simulated cluster (tests/e2e/harness/autoscaled.py with compress=False: the
stack's scrape interval, thresholds and windows; only the Prometheus address points at the test's Prometheus), then, per
run, the first replica's queue goes from 0 to twice the threshold, and the bench polls every 0.1 s for:
  scrape     - Prometheus returns the new queue (the ScaledObject's own query),
  keda+hpa   - the HPA controller, fed by KEDA's adapter, has raised the target's replicas,
  scheduling - the new pod is bound to a GPU node,
  startup    - the new pod is Ready. KWOK holds it for the plan's startup budget divided by --factor; the line shows
               the measured time times the factor, the start a real vLLM pod would need.
Between runs the queue goes back to 0 and the scale-down completes (the stack's own window: minutes).

The reference beside the measurement is the bound the settings imply for the reaction (queue to new replicas asked):
one scrape interval plus one HPA sync period (15 s, the controller manager's default), both worst cases; the ratio
measured / bound should stay at or below 1. Absolute times are context (machines differ).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
from tests.e2e.harness.autoscaled import Autoscaled, autoscaled, scraped  # noqa: E402
from tests.e2e.harness.cluster import missing_binaries, network_is_isolated, pod_ready, simulated_cluster  # noqa: E402
from tests.e2e.harness.engine import TOOLS  # noqa: E402
from tests.e2e.harness.keda import KEDA_BINARIES, start_keda  # noqa: E402
from tests.e2e.harness.simulation import serving_pods, simulated_variant  # noqa: E402
from tests.schema import crd_files  # noqa: E402

HPA_SYNC_PERIOD_SECONDS = 15  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default
POLL_SECONDS = 0.1
PHASES = ("scrape", "keda+hpa", "scheduling", "startup")


def _until(condition, timeout_seconds: float, what: str) -> float:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_autoscaling: timed out waiting for {what}")
        time.sleep(POLL_SECONDS)
    return time.monotonic()


def one_reaction(scaled: Autoscaled, factor: int) -> dict[str, float]:
    from vllm_pulumi.components.builders.autoscaling import queue_query

    plan, cluster = scaled.plan, scaled.cluster
    assert plan.spec.autoscaling is not None
    before = scaled.replicas()
    known = {pod["metadata"]["name"] for pod in serving_pods(cluster, plan)}
    queue = 2 * plan.spec.autoscaling.queue_threshold
    start = time.monotonic()
    scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=queue)
    scraped_at = _until(lambda: any(value >= queue for _, value in scaled.prometheus.vector(queue_query(plan))),
                        300, "Prometheus to see the queue")
    asked_at = _until(lambda: scaled.replicas() > before, 300, "the HPA to raise the replicas")

    def new_pods() -> list[dict]:  # type: ignore[type-arg]
        return [pod for pod in serving_pods(cluster, plan) if pod["metadata"]["name"] not in known]

    bound_at = _until(lambda: any(pod["spec"].get("nodeName") for pod in new_pods()), 300, "the new pod bound")
    ready_at = _until(lambda: any(pod_ready(pod) for pod in new_pods()), 300 + plan.startup_budget_seconds,
                      "the new pod Ready")
    return {"scrape": scraped_at - start, "keda+hpa": asked_at - scraped_at, "scheduling": bound_at - asked_at,
            "startup": (ready_at - bound_at) * factor}


def back_to_min(scaled: Autoscaled) -> None:
    plan = scaled.plan
    assert plan.spec.autoscaling is not None and plan.cooldown_seconds is not None
    scaled.metrics.set(plan.namespace, scaled.first_pod(), waiting=0)
    timeout = plan.spec.autoscaling.scale_down_stabilization_seconds + 4 * plan.cooldown_seconds + 120
    _until(lambda: scaled.replicas() == plan.spec.autoscaling.min_replicas  # type: ignore[union-attr]
           and len(serving_pods(scaled.cluster, plan)) == plan.spec.autoscaling.min_replicas,  # type: ignore[union-attr]
           timeout, "the scale-down back to min_replicas")


def bench_stack(name: str, factor: int, runs: int, work: Path) -> None:
    from vllm_pulumi.runtime.planning.deployment import plan_deployment
    from vllm_pulumi.runtime.planning.deployment import load_deployment

    raw, _ = simulated_variant(name, work / "unused-kubeconfig")
    plan = load_deployment(raw).plans[0]
    delay_ms = plan.startup_budget_seconds * 1000 // factor
    with simulated_cluster(work / name / "cluster", pod_ready_delay_milliseconds=delay_ms,
                           crd_files=crd_files()) as cluster:
        start_keda(cluster, work / name / "cluster")
        with autoscaled(name, cluster, work / name, compress=False) as scaled:
            scraped(scaled)
            observability = scaled.deployed.spec.observability
            bound = observability.scrape_interval_seconds + HPA_SYNC_PERIOD_SECONDS
            results = []
            for run in range(runs):
                if run:
                    back_to_min(scaled)
                results.append(one_reaction(scaled, factor))
                print(f"  {name} run {run + 1}: " + ", ".join(f"{p} {results[-1][p]:.1f} s" for p in PHASES))
    medians = {phase: statistics.median(r[phase] for r in results) for phase in PHASES}
    reaction = medians["scrape"] + medians["keda+hpa"]
    print(f"{name}: scrape interval {observability.scrape_interval_seconds} s, threshold "
          f"{plan.spec.autoscaling.queue_threshold if plan.spec.autoscaling else '-'}, startup budget "
          f"{plan.startup_budget_seconds} s (KWOK delay {delay_ms / 1000:.1f} s x {factor}), {runs} run(s), medians:")
    for phase in PHASES:
        print(f"  {phase:<11} {medians[phase]:7.1f} s")
    print(f"  queue -> replicas asked: {reaction:.1f} s; bound scrape + HPA sync = {bound} s; "
          f"ratio {reaction / bound:.2f} (target <= 1)")
    print(f"  queue -> new replica Ready: {reaction + medians['scheduling'] + medians['startup']:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", nargs="+", default=["edge", "prod"])
    parser.add_argument("--factor", type=int, default=10, help="startup budget / KWOK pod-ready delay")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not network_is_isolated():
        os.execv(str(REPO / "scripts" / "isolated.sh"), [str(REPO / "scripts" / "isolated.sh"), sys.executable,
                                                          *sys.argv])
    missing = missing_binaries() + [tool for tool in ("pulumi", "pulumi-resource-kubernetes", "prometheus",
                                                      *KEDA_BINARIES) if not (TOOLS / tool).exists()]
    if missing:
        print(f"bench_autoscaling: not built: {', '.join(missing)}; run scripts/toolchain.sh first", file=sys.stderr)
        return 2
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench-autoscaling-") as work:
        for name in args.stacks:
            bench_stack(name, args.factor, args.runs, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
