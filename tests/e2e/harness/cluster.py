"""A simulated GPU cluster for end-to-end tests, started and stopped by the tests themselves.

The real control plane, built from Go modules by scripts/toolchain.sh: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager (every default controller: Deployment, ReplicaSet, StatefulSet, Job, disruption, endpoints,
garbage collector, namespace, ServiceAccount, PV binder, ...), the LeaderWorkerSet controller with its admission
webhooks, and KWOK in place of kubelets: it marks the fake nodes Ready, and moves the pods the scheduler binds to
them through Running/Ready (and Job pods to Succeeded), using the Stage files that ship in KWOK's module.

Nodes are made from the same facts the program plans with (``runtime.nodes.NodeShape``: GPU Feature Discovery
labels, the pool's labels and taints, allocatable GPUs, CPU, memory and ephemeral storage), never from a second copy.

Addresses: every server listens on 127.0.0.1. Pods get addresses from POD_CIDR, outside 127.0.0.0/8 because the API
server refuses loopback addresses in Endpoints and EndpointSlices (``ValidateEndpointIP``). Nothing connects to them
(no kube-proxy, no kubelet, no probes), and the tests run in a network namespace with only `lo`
(scripts/isolated.sh, as `make test` runs pytest), so an address outside loopback has no route at all: the harness
refuses to start anywhere else.
"""

from __future__ import annotations

import base64
import copy
import os
import socket
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml

from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    LWS_NAME_LABEL,
    OS_LABEL,
)

from tests.toolchain import BINARIES, module_dir, pinned_versions
from .control_plane import ControlPlane, control_plane, die_with_parent, free_port

CLUSTER_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "lws-controller")

# RFC 2544's benchmarking range: not loopback (Endpoints refuse loopback), and unrouted in the isolated namespace.
POD_CIDR = "198.18.0.0/16"
# What KWOK reports as every node's InternalIP; nothing dials a kubelet there (no logs, exec or metrics server).
NODE_IP = "127.0.0.1"
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# Every wait of the harness polls this often: a condition, never a fixed sleep.
POLL_SECONDS = 0.2
START_TIMEOUT_SECONDS = 120

T = TypeVar("T")


def network_is_isolated() -> bool:
    """True inside a network namespace whose only interface is loopback (scripts/isolated.sh)."""
    interfaces = [line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]]
    return interfaces == ["lo"]


def missing_binaries() -> list[str]:
    return [name for name in CLUSTER_BINARIES if not (BINARIES / name).exists()]


class Processes:
    """The cluster's processes: started with a log each, checked while tests wait, stopped in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.running: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop_all
        environment = {**os.environ, **(env or {})}
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=environment,
                                   preexec_fn=die_with_parent)
        self.running.append((name, process, log))

    def log_tail(self, name: str, characters: int = 3000) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-characters:] if path.exists() else ""

    def check(self) -> None:
        for name, process, _ in self.running:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{self.log_tail(name)}")

    def stop(self, name: str) -> None:
        """Stop one process (a test taking a server away); nothing when it is not running."""
        entries = [entry for entry in self.running if entry[0] == name]
        _stop(entries)
        for entry in entries:
            self.running.remove(entry)

    def stop_all(self) -> None:
        _stop(list(reversed(self.running)))
        self.running.clear()


def _stop(entries: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]]) -> None:
    """SIGTERM to all first (they stop in parallel), then wait for each, SIGKILL after 20 s; close the logs."""
    for _, process, _ in entries:
        if process.poll() is None:
            process.terminate()
    for _, process, log in entries:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@dataclass
class SimulatedCluster:
    plane: ControlPlane
    processes: Processes
    nodes: list[str] = field(default_factory=list)

    # ---- API access ---------------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: object | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        return self.plane.request(method, path, body, content_type)

    def get(self, path: str) -> Any:
        status, answer = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {answer}"
        return answer

    def find(self, path: str) -> Any | None:
        status, answer = self.request("GET", path)
        return answer if status == 200 else None

    def items(self, path: str, label_selector: str = "") -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"labelSelector": label_selector}) if label_selector else ""
        answer = self.get(f"{path}?{query}" if query else path)
        return list(answer.get("items") or [])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, answer = self.request("POST", path, body)
        assert status in (200, 201), f"POST {path}: {status} {answer}"
        return dict(answer)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        status, answer = self.request("PATCH", path, patch, "application/merge-patch+json")
        assert status == 200, f"PATCH {path}: {status} {answer}"
        return dict(answer)

    def pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        return self.items(f"/api/v1/namespaces/{namespace}/pods", label_selector)

    def evict(self, namespace: str, pod: str) -> int:
        """POST an Eviction (what `kubectl drain` does): 201 when allowed, 429 when a PodDisruptionBudget says no."""
        status, _ = self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
        return status

    def events(self, namespace: str) -> list[str]:
        return [f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}: {e.get('reason')} "
                f"{e.get('message', '')}".strip()
                for e in self.items(f"/api/v1/namespaces/{namespace}/events")]

    def wait(self, condition: Callable[[], T | None], timeout_seconds: float, what: str,
             diagnose: Callable[[], str] | None = None) -> T:
        """Poll ``condition`` until it returns something other than None/False; fail with ``what`` on timeout.
        Every poll also checks that no cluster process has died."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            self.processes.check()
            result = condition()
            if result is not None and result is not False:
                return result
            if time.monotonic() > deadline:
                detail = diagnose() if diagnose else ""
                raise AssertionError(f"timed out after {timeout_seconds:.0f} s waiting for {what}\n{detail}")
            time.sleep(POLL_SECONDS)

    # ---- nodes and volumes ----------------------------------------------------------------------------------------
    def add_nodes(self, shape: NodeShape, count: int | None = None) -> list[str]:
        """``count`` (default: the pool's maximum) KWOK nodes of one pool, as the cloud and GFD would label them."""
        return self._register([node_object(shape, f"{shape.pool}-{index}")
                               for index in range(shape.max_nodes if count is None else count)])

    def add_system_nodes(self, count: int = 2) -> list[str]:
        """The cluster's own CPU nodes for pods that need no GPU (the hydration Job, add-ons): every cluster has them
        (EKS clusters keep a small managed node group for system pods), though no stack declares them. Untainted, so
        they take exactly the pods that do not tolerate the GPU taint."""
        key, value = KWOK_NODE_ANNOTATION
        resources = {"cpu": "7910m", "memory": "30000Mi", "ephemeral-storage": "80Gi", "pods": "58"}
        return self._register([{
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"system-{index}", "annotations": {key: value}, "labels": {
                HOSTNAME_LABEL: f"system-{index}", OS_LABEL: "linux", ARCH_LABEL: "amd64",
                INSTANCE_TYPE_LABEL: "m6i.2xlarge"}},
            "status": {"capacity": {**resources, "cpu": "8", "memory": "32Gi"}, "allocatable": resources},
        } for index in range(count)])

    def _register(self, nodes: list[dict[str, Any]]) -> list[str]:
        """Create KWOK nodes and wait until KWOK has made every one of them Ready."""
        names = [node["metadata"]["name"] for node in nodes]
        for node in nodes:
            self.create("/api/v1/nodes", node)
        self.wait(lambda: all(_node_ready(self.find(f"/api/v1/nodes/{name}")) for name in names),
                  START_TIMEOUT_SECONDS, f"nodes {names} Ready")
        self.nodes += names
        return names

    def provide_volumes(self, manifests: list[dict[str, Any]]) -> None:
        """A PersistentVolume pre-bound to each PVC of ``manifests`` (what the CSI driver of the storage class would
        provision); the controller manager's PV binder binds them, the scheduler then places the pods."""
        claims = [obj for obj in manifests if obj["kind"] == "PersistentVolumeClaim"]
        for storage_class in sorted({c["spec"].get("storageClassName") for c in claims} - {None, ""}):
            if self.find(f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}") is None:
                # The class the stack names, binding at once (as NFS, EFS and FSx classes do); volumes are static.
                self.create("/apis/storage.k8s.io/v1/storageclasses", {
                    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
                    "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"})
        for claim in claims:
            metadata, spec = claim["metadata"], claim["spec"]
            self.create("/api/v1/persistentvolumes", {
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": f"sim-{metadata['namespace']}-{metadata['name']}"},
                "spec": {
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "accessModes": list(spec["accessModes"]),
                    "storageClassName": spec.get("storageClassName", ""),
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": metadata["namespace"], "name": metadata["name"]},
                    "hostPath": {"path": f"/sim/{metadata['namespace']}/{metadata['name']}"},
                },
            })

    def node_of(self, pod: dict[str, Any]) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/nodes/{pod['spec']['nodeName']}"))


def node_object(shape: NodeShape, name: str) -> dict[str, Any]:
    """A v1 Node as the cloud, the kubelet and GPU Feature Discovery would register one of ``shape``."""
    resources = {
        "cpu": f"{shape.allocatable_cpu_millicores}m",
        "memory": f"{shape.allocatable_memory_mib}Mi",
        "ephemeral-storage": f"{shape.allocatable_ephemeral_storage_gib}Gi",
        GPU_RESOURCE: str(shape.gpus),
        "pods": str(shape.max_pods),
    }
    capacity = {
        **resources,
        "cpu": f"{shape.capacity_cpu_millicores}m",
        "memory": f"{shape.capacity_memory_mib}Mi",
        "ephemeral-storage": f"{shape.capacity_ephemeral_storage_gib}Gi",
    }
    key, value = KWOK_NODE_ANNOTATION
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**shape.labels, HOSTNAME_LABEL: name},
            "annotations": {key: value},
        },
        "spec": {"taints": [dict(taint) for taint in shape.taints]},
        "status": {"capacity": capacity, "allocatable": resources},
    }


def _node_ready(node: dict[str, Any] | None) -> bool:
    conditions = {c["type"]: c["status"] for c in ((node or {}).get("status") or {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions", [])}
    return conditions.get("Ready") == "True" and not pod["metadata"].get("deletionTimestamp")


# ---- certificates -----------------------------------------------------------------------------------------------------
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def serving_certificate(directory: Path, dns_names: Sequence[str] = ()) -> Path:
    """A throwaway CA and a certificate for 127.0.0.1 and ``dns_names`` (tls.crt / tls.key, controller-runtime's
    names). It has no extended key usage, so it serves as a client certificate too (KEDA's mutual-TLS gRPC)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = directory / "ca.key", directory / "ca.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_cert),
             "-subj", "/CN=simulated-cluster-webhook-ca", "-days", "2")
    names = ",".join(["IP:127.0.0.1", *(f"DNS:{name}" for name in dns_names)])
    (directory / "san.ext").write_text(f"subjectAltName={names}\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "tls.key"),
             "-out", str(directory / "tls.csr"), "-subj", "/CN=127.0.0.1")
    _openssl("x509", "-req", "-in", str(directory / "tls.csr"), "-CA", str(ca_cert), "-CAkey", str(ca_key),
             "-CAcreateserial", "-out", str(directory / "tls.crt"), "-days", "2", "-extfile",
             str(directory / "san.ext"))
    return ca_cert


def serves_tls(port: int, ca_file: Path) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
            with ssl.create_default_context(cafile=str(ca_file)).wrap_socket(raw, server_hostname="127.0.0.1"):
                return True
    except OSError:
        return False


# ---- the LeaderWorkerSet controller -----------------------------------------------------------------------------------
def lws_webhook_configurations(port: int, ca_file: Path) -> list[dict[str, Any]]:
    """LWS's own webhook configurations (config/webhook in its module), as its kustomization shapes them (the `lws-`
    name prefix, pod webhooks only for LWS pods), pointed at the controller on loopback instead of its Service."""
    source = module_dir("sigs.k8s.io/lws", pinned_versions()["LWS_VERSION"]) / "config" / "webhook" / "manifests.yaml"
    ca_bundle = base64.b64encode(ca_file.read_bytes()).decode()
    configurations = []
    for document in yaml.safe_load_all(source.read_text()):
        if not document:
            continue
        document = copy.deepcopy(document)
        document["metadata"]["name"] = "lws-" + document["metadata"]["name"]
        for webhook in document["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            if path.endswith("-v1-pod"):
                webhook["objectSelector"] = {"matchExpressions": [{"key": LWS_NAME_LABEL, "operator": "Exists"}]}
        configurations.append(document)
    return configurations


def _start_lws(cluster: SimulatedCluster, workdir: Path) -> None:
    port = free_port()
    cert_dir = workdir / "lws-certs"
    ca_file = serving_certificate(cert_dir)
    config = workdir / "lws-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": "0"},
    }))
    cluster.processes.start("lws-controller", [str(BINARIES / "lws-controller"), f"--config={config}"],
                            env={"KUBECONFIG": str(cluster.plane.kubeconfig)})
    cluster.wait(lambda: serves_tls(port, ca_file), START_TIMEOUT_SECONDS, "the LWS webhook server",
                 lambda: cluster.processes.log_tail("lws-controller"))
    for configuration in lws_webhook_configurations(port, ca_file):
        kind = configuration["kind"].lower() + "s"
        cluster.create(f"/apis/admissionregistration.k8s.io/v1/{kind}", configuration)


# ---- KWOK ----------------------------------------------------------------------------------------------------------
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat/node-heartbeat.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


def kwok_stages(pod_ready_delay_milliseconds: int, running_while_loading: bool = False) -> list[dict[str, Any]]:
    """KWOK's own fast Stages (they ship in its module), with a delay before a bound pod turns Ready: the time a
    vLLM pod would spend loading, compressed, so that rollouts and drains have a window in which to be observed.

    KWOK's pods stay in phase Pending until they turn Ready. With ``running_while_loading`` a bound pod is Running at
    once, its container started but not Ready (as a kubelet reports vLLM while it loads, behind its startup probe),
    and turns Ready after the delay: controllers that tell a pod still pending from a running one (Karpenter's
    disruption) then see what they would see in a real cluster."""
    root = module_dir("sigs.k8s.io/kwok", pinned_versions()["KWOK_VERSION"]) / "kustomize" / "stage"
    stages = []
    for relative in KWOK_STAGES:
        stage = yaml.safe_load((root / relative).read_text())
        if stage["metadata"]["name"] == "pod-ready":
            if running_while_loading:
                stages.append(POD_START_STAGE)
                stage = copy.deepcopy(POD_LOADED_STAGE)
            if pod_ready_delay_milliseconds:
                stage["spec"]["delay"] = {"durationMilliseconds": pod_ready_delay_milliseconds}
        stages.append(stage)
    return stages


# A bound pod starts running at once, not Ready yet (kwok_stages, running_while_loading): its containers started, its
# addresses assigned, phase Running, Ready and ContainersReady False. KWOK's pod-ready stage then finishes it.
POD_START_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-start"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
        ]},
        "next": {"statusTemplate": "\n".join([
            "{{ $now := Now }}",
            "conditions:",
            "- {type: Initialized, status: 'True', lastTransitionTime: {{ $now | Quote }}}",
            "- {type: Ready, status: 'False', reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}",
            "- {type: ContainersReady, status: 'False', reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}",
            "containerStatuses:",
            "{{ range .spec.containers }}",
            "- name: {{ .name | Quote }}",
            "  image: {{ .image | Quote }}",
            "  ready: false",
            "  started: true",
            "  restartCount: 0",
            "  state: {running: {startedAt: {{ $now | Quote }}}}",
            "{{ end }}",
            "{{ with NodeIPsWith .spec.nodeName }}",
            "hostIP: {{ index . 0 | Quote }}",
            "hostIPs:",
            "{{ range . }}",
            "- ip: {{ . | Quote }}",
            "{{ end }}",
            "{{ end }}",
            "{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid \"\" ) "
            "( or .metadata.name \"\" ) ( or .metadata.namespace \"\" ) }}",
            "podIP: {{ index . 0 | Quote }}",
            "podIPs:",
            "{{ range . }}",
            "- ip: {{ . | Quote }}",
            "{{ end }}",
            "{{ end }}",
            "phase: Running",
            "startTime: {{ $now | Quote }}",
        ])},
    },
}
# ... and once loaded (after the pod-ready delay) it turns Ready: its containers ready, addresses and start time kept.
POD_LOADED_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-loaded"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "NotIn",
             "values": ["True"]},
        ]},
        "next": {"statusTemplate": "\n".join([
            "{{ $now := Now }}",
            "{{ $root := . }}",
            "conditions:",
            "- {type: Ready, status: 'True', lastTransitionTime: {{ $now | Quote }}}",
            "- {type: ContainersReady, status: 'True', lastTransitionTime: {{ $now | Quote }}}",
            "containerStatuses:",
            "{{ range $index, $container := .spec.containers }}",
            "{{ $was := index $root.status.containerStatuses $index }}",
            "- name: {{ $container.name | Quote }}",
            "  image: {{ $container.image | Quote }}",
            "  ready: true",
            "  started: true",
            "  restartCount: 0",
            "  state: {running: {startedAt: {{ $was.state.running.startedAt | Quote }}}}",
            "{{ end }}",
        ])},
    },
}


# ---- the whole cluster ----------------------------------------------------------------------------------------------
@contextmanager
def simulated_cluster(workdir: Path, *, pod_ready_delay_milliseconds: int = 500, running_while_loading: bool = False,
                      crd_files: Sequence[Path] = ()) -> Iterator[SimulatedCluster]:
    """Start the control plane, the controllers and KWOK; stop every process afterwards, also on failure."""
    if not network_is_isolated():
        raise AssertionError(
            "the simulated cluster runs only in a network namespace with nothing but loopback: run the tests through "
            "`make test`, or `scripts/isolated.sh .venv/bin/python -m pytest ...`")
    missing = missing_binaries()
    if missing:
        raise AssertionError(f"{', '.join(missing)} not built in {BINARIES}: run scripts/toolchain.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        plane = stack.enter_context(control_plane(BINARIES, workdir, controllers=True))
        processes = Processes(workdir)
        stack.callback(processes.stop_all)
        cluster = SimulatedCluster(plane, processes)
        if crd_files:
            plane.install_crds(list(crd_files))
        kubeconfig = str(plane.kubeconfig)

        scheduler_config = workdir / "kube-scheduler.yaml"
        scheduler_config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig}, "leaderElection": {"leaderElect": False},
        }))
        processes.start("kube-scheduler", [
            str(BINARIES / "kube-scheduler"), f"--config={scheduler_config}", "--secure-port=0"])
        processes.start("kube-controller-manager", [
            str(BINARIES / "kube-controller-manager"), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            "--controllers=*", "--secure-port=0", f"--service-account-private-key-file={workdir / 'sa.key'}",
            f"--root-ca-file={plane.ca_file}",
            # KWOK's heartbeat stage renews node status every 20-45 s; node failures are not what these tests study.
            "--node-monitor-grace-period=10m",
        ])
        stages = workdir / "kwok-stages.yaml"
        stages.write_text(yaml.safe_dump_all(kwok_stages(pod_ready_delay_milliseconds, running_while_loading)))
        key, value = KWOK_NODE_ANNOTATION
        processes.start("kwok", [
            str(BINARIES / "kwok"), f"--kubeconfig={kubeconfig}", f"--config={stages}",
            f"--manage-nodes-with-annotation-selector={key}={value}", f"--cidr={POD_CIDR}", f"--node-ip={NODE_IP}",
        ])
        _start_lws(cluster, workdir)
        # The ServiceAccount controller is up once `default` has its ServiceAccount (pods need it to be admitted).
        cluster.wait(lambda: cluster.find("/api/v1/namespaces/default/serviceaccounts/default"),
                     START_TIMEOUT_SECONDS, "the controller manager (default ServiceAccount)",
                     lambda: processes.log_tail("kube-controller-manager"))
        yield cluster
