"""A reference stack up in the simulated cluster with KEDA (tests/e2e/harness/keda.py), Prometheus and the vLLM metrics
stand-in (tests/e2e/harness/metrics.py): what the autoscaling tests and bench/bench_autoscaling.py share.

Time is compressed (``compress=True``, the tests) only through settings the stacks expose: the scrape interval, the
startup budget (which paces the scale-up policy: one replica per budget) and the HPA's scale-down window. KEDA and the
HPA controller run with their defaults (the controller manager's HPA sync period is 15 s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_pulumi.components.builders.autoscaling import scaled_object_name, served_model_name
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.vocabulary import LWS_WORKER_INDEX_LABEL

from .cluster import SimulatedCluster
from .control_plane import free_port
from .metrics import Prometheus, VllmMetrics, metrics_server, prometheus
from .simulation import Deployed, deploy_on, diagnose, ready_replicas, serving_pods

# The compressed windows (see the module docstring). The startup budget's floor is 30 s (spec: ge=30).
SCRAPE_INTERVAL_SECONDS = 1
STARTUP_BUDGET_SECONDS = 30
SCALE_DOWN_WINDOW_SECONDS = 20
# One HPA sync (15 s) + one Prometheus scrape + KEDA's query, with room for a loaded CI machine.
REACTION_TIMEOUT_SECONDS = 90
SCALE_TIMEOUT_SECONDS = 240


@dataclass
class Autoscaled:
    """A stack up in the simulated cluster with KEDA, Prometheus and the vLLM metrics stand-in."""

    cluster: SimulatedCluster
    deployed: Deployed
    plan: ServingPlan
    metrics: VllmMetrics
    prometheus: Prometheus
    stop_prometheus: Callable[[], None]

    @property
    def namespace(self) -> str:
        return self.plan.namespace

    def target_path(self) -> str:
        if self.plan.multi_node:
            return f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{self.namespace}/leaderworkersets/{self.plan.spec.name}"
        return f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.plan.spec.name}"

    def replicas(self) -> int:
        """The replicas the autoscaler asked for: the target's spec.replicas (LWS: groups)."""
        return int(self.cluster.get(self.target_path())["spec"]["replicas"])

    def hpa(self) -> dict[str, Any]:
        """The HPA KEDA made for the ScaledObject (waiting for KEDA to create it after `pulumi up`)."""
        path = (f"/apis/autoscaling/v2/namespaces/{self.namespace}/horizontalpodautoscalers/"
                f"keda-hpa-{scaled_object_name(self.plan)}")
        return dict(self.cluster.wait(lambda: self.cluster.find(path), REACTION_TIMEOUT_SECONDS,
                                      "KEDA to create the HPA", self.diagnose))

    def scaled_object(self) -> dict[str, Any]:
        return dict(self.cluster.get(f"/apis/keda.sh/v1alpha1/namespaces/{self.namespace}/scaledobjects/"
                                     f"{scaled_object_name(self.plan)}"))

    def condition(self, kind: str) -> str | None:
        conditions = self.scaled_object().get("status", {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == kind), None)

    def first_pod(self) -> str:
        pods = sorted(serving_pods(self.cluster, self.plan), key=lambda p: p["metadata"]["creationTimestamp"])
        return str(pods[0]["metadata"]["name"])

    def wait_replicas(self, expected: int, what: str, timeout: float = SCALE_TIMEOUT_SECONDS) -> None:
        """Until the target asks for ``expected`` replicas and that many serve (Ready pods; LWS: whole groups)."""
        self.cluster.wait(lambda: self.replicas() == expected and ready_replicas(self.cluster, self.plan) == expected,
                          timeout, f"{what}: {expected} replicas Ready", self.diagnose)

    def diagnose(self) -> str:
        hpa = self.cluster.find(f"/apis/autoscaling/v2/namespaces/{self.namespace}/horizontalpodautoscalers/"
                                f"keda-hpa-{scaled_object_name(self.plan)}") or {}
        return (f"HPA status: {hpa.get('status')}\n" + diagnose(self.cluster, self.namespace)()
                + "\nkeda-operator:\n" + self.cluster.processes.log_tail("keda-operator", 2000))


def _compressed(raw: dict[str, Any]) -> None:
    raw.setdefault("observability", {})["scrape_interval_seconds"] = SCRAPE_INTERVAL_SECONDS
    for model in raw["models"]:
        if model.get("autoscaling") is not None:
            model["autoscaling"]["scale_down_stabilization_seconds"] = SCALE_DOWN_WINDOW_SECONDS
            model.setdefault("lifecycle", {})["startup_budget_seconds"] = STARTUP_BUDGET_SECONDS


@contextmanager
def autoscaled(name: str, cluster: SimulatedCluster, tmp_path: Path,
               adjust: Callable[[dict[str, Any]], None] | None = None, compress: bool = True) -> Iterator[Autoscaled]:
    """Reference stack ``name`` up through `pulumi up`, its first model autoscaled by KEDA on Prometheus; with
    ``compress``, on the compressed windows above, else on the stack's own settings (the Prometheus address aside)."""
    port = free_port()

    def change(raw: dict[str, Any]) -> None:
        if adjust is not None:
            adjust(raw)
        if compress:
            _compressed(raw)
        for model in raw["models"]:
            if model.get("autoscaling") is not None:
                model["autoscaling"]["prometheus_address"] = f"http://127.0.0.1:{port}"

    deployed = deploy_on(name, cluster, tmp_path, change)
    plan = deployed.plans[0]
    assert plan.spec.autoscaling is not None, f"{name}'s first model is not autoscaled"
    metrics = VllmMetrics()
    for each in deployed.plans:
        metrics.serve(each.namespace, each.spec.name, served_model_name(each))
    monitors = [obj for obj in deployed.manifests if obj["kind"] in ("ServiceMonitor", "PodMonitor")]
    with metrics_server(metrics) as stand_in, \
            prometheus(cluster, tmp_path / "prometheus", monitors, stand_in, port) as server:
        deployed.up()
        yield Autoscaled(cluster, deployed, plan, metrics, server,
                         lambda: cluster.processes.stop(f"prometheus-{port}"))


def scraped(scaled: Autoscaled) -> None:
    """Prometheus has discovered every serving pod through the ServiceMonitor and scrapes it, with the target labels
    the Prometheus Operator gives it, and the HPA has read the queue through KEDA."""
    plan = scaled.plan
    servers = {pod["metadata"]["name"] for pod in serving_pods(scaled.cluster, plan)
               if not plan.multi_node or pod["metadata"]["labels"].get(LWS_WORKER_INDEX_LABEL) == "0"}

    def targets() -> bool:
        up = scaled.prometheus.targets_up(plan.spec.name)
        return {labels.get("pod") for labels in up} == servers and all(
            labels["namespace"] == plan.namespace and labels["service"] == plan.spec.name for labels in up)

    scaled.cluster.wait(targets, REACTION_TIMEOUT_SECONDS, f"Prometheus scraping {sorted(servers)}",
                        lambda: str(scaled.prometheus.query("up")))
    scaled.cluster.wait(lambda: (scaled.hpa().get("status", {}).get("currentMetrics") or [None])[0],
                        REACTION_TIMEOUT_SECONDS, "the HPA reading the queue metric through KEDA", scaled.diagnose)
