"""What the simulated-cluster tests share: a reference stack turned into one that runs against the simulated cluster,
the objects it serves, and readings of them (serving pods, groups, endpoints) taken the way a user would check.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.manifests import CONFIG_KEY, build_manifests, read_stack_config
from vllm_pulumi.runtime.planning.deployment import load_deployment, node_shapes, plan_deployment
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.vocabulary import LWS_NAME_LABEL

from .cluster import SimulatedCluster, pod_ready
from .engine import copy_project, output_of, run_pulumi, write_stack

CONTEXT = "edge"  # the context name tests/e2e/harness/control_plane.py writes into the kubeconfig


def stated_nodes(shapes: list[NodeShape]) -> list[dict[str, Any]]:
    """The node pools of a stack, stated the way a kubeconfig stack states the nodes it runs on."""
    stated = []
    for shape in shapes:
        entry: dict[str, Any] = {"name": shape.pool, "count": shape.max_nodes}
        if shape.instance_type:
            entry["instance_type"] = shape.instance_type
        else:
            entry.update({"gpu": shape.gpu.id, "gpus_per_node": shape.gpus,
                          "vcpus": shape.capacity_cpu_millicores // 1000,
                          "memory_gib": shape.capacity_memory_mib // 1024})
        entry.update({"ephemeral_storage_gib": shape.capacity_ephemeral_storage_gib, "max_pods": shape.max_pods,
                      "labels": dict(shape.extra_labels)})
        stated.append(entry)
    return stated


def simulated_variant(name: str, kubeconfig: Path) -> tuple[dict[str, Any], list[NodeShape]]:
    """Reference stack ``name`` against the simulated cluster: the same models and engine settings, the nodes its
    node pools (or its stated nodes) describe, reached through a kubeconfig; add-ons are not installed (the harness
    runs the LWS controller itself; the GPU Operator's device plugin is what the nodes' allocatable GPUs stand for)."""
    raw = copy.deepcopy(read_stack_config(name))
    shapes = node_shapes(load_deployment(read_stack_config(name)).spec)
    raw["cluster"] = {"mode": "kubeconfig", "kubeconfig": str(kubeconfig), "context": CONTEXT,
                      "nodes": stated_nodes(shapes)}
    raw["addons"] = {"gpu_operator": {"install": False}, "keda": {"install": False}, "lws": {"install": False}}
    return raw, shapes


def secrets_by_reference(raw: dict[str, Any]) -> None:
    """Point every model's API key and HF token at a Secret by name (for tests that apply manifests without the
    program, which would create the Secrets of Pulumi secrets)."""
    for model in raw["models"]:
        for holder, key in ((model, "api_key"), (model.get("storage", {}), "hf_token")):
            if key in holder:
                holder[key] = {"existing_secret": {"name": key.replace("_", "-"), "key": "value"}}


@dataclass
class Deployed:
    """A stack as the tests deploy it: its spec, plans and objects, and where its pulumi project lives."""

    name: str
    project: Path
    raw: dict[str, Any]
    spec: DeploymentSpec
    plans: list[ServingPlan]
    manifests: list[dict[str, Any]]
    env: dict[str, str] = field(default_factory=dict)
    secret_values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def prepare(cls, name: str, project: Path, raw: dict[str, Any], kubeconfig: Path) -> Deployed:
        spec = load_deployment(raw).spec
        plans = plan_deployment(spec)
        deployed = cls(name, project, raw, spec, plans, build_manifests(spec, plans),
                       env={"KUBECONFIG": str(kubeconfig)})
        write_stack(project, name, raw)
        result = run_pulumi(project, "stack", "init", name, env=deployed.env)
        assert result.returncode == 0, output_of(result)
        for model in raw["models"]:  # Pulumi secrets, set the way the stack files tell a user to
            refs = [model.get("api_key"), (model.get("storage") or {}).get("hf_token")]
            for ref in refs:
                if ref and "pulumi_secret" in ref:
                    key = ref["pulumi_secret"]
                    value = deployed.secret_values.setdefault(key, f"sim-{key}-{secrets.token_hex(12)}")
                    result = run_pulumi(project, "config", "set", "--secret", "--stack", name,
                                        f"vllm-pulumi:{key}", value, env=deployed.env)
                    assert result.returncode == 0, output_of(result)
        return deployed

    def update(self, raw: dict[str, Any]) -> None:
        """New settings for the next `pulumi up` (the stack file a user edits)."""
        self.raw = raw
        self.spec = load_deployment(raw).spec
        self.plans = plan_deployment(self.spec)
        self.manifests = build_manifests(self.spec, self.plans)
        # Only the deployment setting changes: the file also holds the encrypted Pulumi secrets and their salt.
        path = self.project / "stacks" / f"Pulumi.{self.name}.yaml"
        document = yaml.safe_load(path.read_text())
        document["config"][CONFIG_KEY] = raw
        path.write_text(yaml.safe_dump(document, sort_keys=False))

    def pulumi(self, *args: str, timeout: int = 900) -> str:
        result = run_pulumi(self.project, *args, "--stack", self.name, env=self.env, timeout=timeout)
        assert result.returncode == 0, f"pulumi {' '.join(args)}:\n{output_of(result)[-8000:]}"
        return output_of(result)

    def up(self) -> str:
        return self.pulumi("up", "--yes", "--non-interactive", "--skip-preview")


def deploy_on(name: str, cluster: SimulatedCluster, tmp_path: Path,
            adjust: Callable[[dict[str, Any]], None] | None = None) -> Deployed:
    """Reference stack ``name`` (changed by ``adjust``) ready for `pulumi up` on ``cluster``: its nodes and the system
    nodes registered, its volumes provided, its Pulumi project and stack (with secrets) in ``tmp_path``/project."""
    raw, _ = simulated_variant(name, cluster.plane.kubeconfig)
    if adjust is not None:
        adjust(raw)
    cluster.add_system_nodes()
    for shape in node_shapes(load_deployment(raw).spec):
        cluster.add_nodes(shape)
    (tmp_path / "project").mkdir()
    deployed = Deployed.prepare(name, copy_project(tmp_path / "project"), raw, cluster.plane.kubeconfig)
    cluster.provide_volumes(deployed.manifests)
    if not deployed.spec.create_namespace:
        _prepare_namespace(cluster, deployed)
    return deployed


def _prepare_namespace(cluster: SimulatedCluster, deployed: Deployed) -> None:
    """What a stack that uses an existing namespace expects to find there: the namespace, and a Secret (with a
    throwaway value) for every secret it references by name."""
    namespace = deployed.spec.namespace
    cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    referenced: dict[str, set[str]] = {}
    for model in deployed.spec.models:
        for ref in (model.api_key, model.storage.hf_token):
            if ref is not None and ref.existing_secret is not None:
                referenced.setdefault(ref.existing_secret.name, set()).add(ref.existing_secret.key)
    for name, keys in sorted(referenced.items()):
        cluster.create(f"/api/v1/namespaces/{namespace}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "stringData": {key: secrets.token_hex(16) for key in sorted(keys)}})


# ---- readings ---------------------------------------------------------------------------------------------------------
def serving_selector(plan: ServingPlan) -> str:
    """Label selector of every serving pod of a model (leaders and workers of an LWS; the server pods otherwise)."""
    if plan.multi_node:
        return f"{LWS_NAME_LABEL}={plan.spec.name}"
    return ",".join(f"{k}={v}" for k, v in lbl.selector_labels(plan.spec.name, lbl.SERVER).items())


def serving_pods(cluster: SimulatedCluster, plan: ServingPlan) -> list[dict[str, Any]]:
    return [pod for pod in cluster.pods(plan.namespace, serving_selector(plan))
            if not pod["metadata"].get("deletionTimestamp")]


def ready_replicas(cluster: SimulatedCluster, plan: ServingPlan) -> int:
    """Replicas that can serve: Ready single pods, or LWS groups whose leader and every worker are Ready."""
    pods = serving_pods(cluster, plan)
    if not plan.multi_node:
        return sum(pod_ready(pod) for pod in pods)
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/group-index", "?"),
                          []).append(pod)
    return sum(len(members) == plan.layout.size and all(pod_ready(pod) for pod in members)
               for members in groups.values())


def lws_groups(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"], []).append(pod)
    return groups


def ready_endpoint_addresses(cluster: SimulatedCluster, namespace: str, service: str) -> list[str]:
    """Addresses the EndpointSlice controller lists as ready for a Service (what kube-proxy would route to)."""
    slices = cluster.items(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                           f"kubernetes.io/service-name={service}")
    return sorted(address for item in slices for endpoint in item.get("endpoints") or []
                  if (endpoint.get("conditions") or {}).get("ready") for address in endpoint["addresses"])


def timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def diagnose(cluster: SimulatedCluster, namespace: str) -> Callable[[], str]:
    def report() -> str:
        pods = [f"{p['metadata']['name']} {p['status'].get('phase')} on {p['spec'].get('nodeName')}"
                for p in cluster.pods(namespace)]
        return "pods:\n  " + "\n  ".join(pods) + "\nevents:\n  " + "\n  ".join(cluster.events(namespace)[-25:])
    return report


@dataclass
class Sampler:
    """Reads a number from the cluster every ``period`` seconds on a thread while a change is under way."""

    read: Callable[[], int]
    period_seconds: float = 0.1
    samples: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.monotonic() of each sample
    errors: list[str] = field(default_factory=list)

    @contextmanager
    def running(self) -> Iterator[Sampler]:
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    value = self.read()
                    self.times.append(time.monotonic())
                    self.samples.append(value)
                except Exception as error:  # noqa: BLE001 - reported by the test after the run
                    self.errors.append(repr(error))
                stop.wait(self.period_seconds)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(timeout=10)
