"""KEDA in the simulated cluster: the operator, the external-metrics adapter and the admission webhooks, built by
scripts/toolchain.sh from KEDA's Go module at the version the stacks' chart pins, run out of cluster on loopback.

What the in-cluster install (KEDA's config/ in its module) provides and how it is done here:
- certificates: the operator's own rotation is off (it would write a Secret and patch Services we do not route to);
  one throwaway CA signs a certificate for 127.0.0.1 and the Service names the clients check. The operator's gRPC
  metrics service and the adapter use it for mutual TLS, the adapter and the webhook server serve it.
- the APIService v1beta1.external.metrics.k8s.io: its Service keda/keda-metrics-apiserver is an ExternalName for
  `localhost`, which the API server's aggregator resolves to https://localhost:<APIService port> (no kube-proxy
  needed); the API server presents the front-proxy client certificate (tests/e2e/harness/control_plane.py).
- the ValidatingWebhookConfiguration `keda-admission` from KEDA's module, pointed at the webhook server by URL, with
  failurePolicy Fail instead of upstream's Ignore, so that a webhook that is down fails a test instead of passing it.
- every KEDA CRD from the module (the operator starts a controller for each kind and needs them all).
The horizontal-pod-autoscaler controller is the controller manager's, at its default 15 s sync period.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

from tests.toolchain import BINARIES, module_dir, pinned_versions
from .cluster import START_TIMEOUT_SECONDS, SimulatedCluster, serves_tls, serving_certificate
from .control_plane import free_port

KEDA_BINARIES = ("keda-operator", "keda-adapter", "keda-webhooks")
KEDA_MODULE = "github.com/kedacore/keda/v2"
KEDA_NAMESPACE = "keda"
METRICS_SERVICE = "keda-metrics-apiserver"
EXTERNAL_METRICS_API = "v1beta1.external.metrics.k8s.io"
# The names KEDA's clients and the aggregator check in the certificate (Service DNS names of the in-cluster install).
CERTIFICATE_NAMES = ("localhost", f"{METRICS_SERVICE}.{KEDA_NAMESPACE}.svc",
                     f"keda-operator.{KEDA_NAMESPACE}.svc", f"keda-admission-webhooks.{KEDA_NAMESPACE}.svc")


def keda_module() -> Path:
    return module_dir(KEDA_MODULE, pinned_versions()["KEDA_VERSION"])


def keda_crd_files() -> list[Path]:
    return sorted((keda_module() / "config" / "crd" / "bases").glob("*.yaml"))


def keda_webhook_configuration(port: int, ca_file: Path) -> dict[str, Any]:
    """KEDA's own ValidatingWebhookConfiguration (config/webhooks), pointed at the webhook server on loopback."""
    source = keda_module() / "config" / "webhooks" / "validation_webhooks.yaml"
    configuration = copy.deepcopy(yaml.safe_load(source.read_text()))
    ca_bundle = base64.b64encode(ca_file.read_bytes()).decode()
    for webhook in configuration["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        webhook["failurePolicy"] = "Fail"
    return configuration


def _api_service_available(cluster: SimulatedCluster) -> bool:
    service = cluster.find(f"/apis/apiregistration.k8s.io/v1/apiservices/{EXTERNAL_METRICS_API}") or {}
    conditions = {c["type"]: c["status"] for c in (service.get("status") or {}).get("conditions") or []}
    return conditions.get("Available") == "True"


def start_keda(cluster: SimulatedCluster, workdir: Path) -> None:
    """Start KEDA's three servers against ``cluster`` and register them; they stop with the cluster's processes."""
    missing = [name for name in KEDA_BINARIES if not (BINARIES / name).exists()]
    if missing:
        raise AssertionError(f"{', '.join(missing)} not built in {BINARIES}: run scripts/toolchain.sh")
    cluster.plane.install_crds(keda_crd_files())
    if cluster.find(f"/api/v1/namespaces/{KEDA_NAMESPACE}") is None:
        cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": KEDA_NAMESPACE}})
    cert_dir = workdir / "keda-certs"
    ca_file = serving_certificate(cert_dir, CERTIFICATE_NAMES)
    custom_ca_dir = workdir / "keda-custom-ca"  # CAs scalers trust beyond the system's: none needed here
    custom_ca_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = str(cluster.plane.kubeconfig)
    # Out of cluster, KEDA reads its namespace and the namespaces to watch from the environment ("" = all).
    env = {"KUBECONFIG": kubeconfig, "WATCH_NAMESPACE": "", "POD_NAMESPACE": KEDA_NAMESPACE,
           "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE}
    grpc_port, adapter_port, adapter_metrics_port, webhook_port = (free_port() for _ in range(4))
    cluster.processes.start("keda-operator", [
        str(BINARIES / "keda-operator"), "--leader-elect=false", f"--cert-dir={cert_dir}",
        f"--metrics-service-bind-address=127.0.0.1:{grpc_port}", "--metrics-bind-address=0",
        "--health-probe-bind-address=0", "--enable-cert-rotation=false", f"--ca-dir={custom_ca_dir}",
        "--zap-log-level=info",
    ], env=env)
    cluster.wait(lambda: serves_tls(grpc_port, ca_file), START_TIMEOUT_SECONDS, "KEDA's gRPC metrics service",
                 lambda: cluster.processes.log_tail("keda-operator"))
    cluster.processes.start("keda-adapter", [
        str(BINARIES / "keda-adapter"), f"--secure-port={adapter_port}", "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}", f"--tls-cert-file={cert_dir / 'tls.crt'}",
        f"--tls-private-key-file={cert_dir / 'tls.key'}", f"--port={adapter_metrics_port}",
        f"--metrics-service-address=127.0.0.1:{grpc_port}", f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--zap-log-level=info",
    ], env=env)
    cluster.processes.start("keda-webhooks", [
        str(BINARIES / "keda-webhooks"), f"--cert-dir={cert_dir}", f"--port={webhook_port}",
        "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=info",
    ], env=env)
    cluster.wait(lambda: serves_tls(adapter_port, ca_file) and serves_tls(webhook_port, ca_file),
                 START_TIMEOUT_SECONDS, "KEDA's metrics adapter and webhook server",
                 lambda: cluster.processes.log_tail("keda-adapter") + cluster.processes.log_tail("keda-webhooks"))
    cluster.create(f"/api/v1/namespaces/{KEDA_NAMESPACE}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": METRICS_SERVICE, "namespace": KEDA_NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "localhost"}})
    cluster.create("/apis/apiregistration.k8s.io/v1/apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": EXTERNAL_METRICS_API},
        "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                 "versionPriority": 100, "caBundle": base64.b64encode(ca_file.read_bytes()).decode(),
                 "service": {"name": METRICS_SERVICE, "namespace": KEDA_NAMESPACE, "port": adapter_port}}})
    cluster.create("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                   keda_webhook_configuration(webhook_port, ca_file))
    cluster.wait(lambda: _api_service_available(cluster), START_TIMEOUT_SECONDS,
                 f"APIService {EXTERNAL_METRICS_API} Available",
                 lambda: str(cluster.find(f"/apis/apiregistration.k8s.io/v1/apiservices/{EXTERNAL_METRICS_API}"))
                 + cluster.processes.log_tail("keda-adapter"))
