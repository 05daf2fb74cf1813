"""The metric path of the autoscaling tests: Prometheus (built from its Go module by scripts/toolchain.sh) discovers the
serving pods through the simulated cluster's API the way the Prometheus Operator configures it for the stack's
ServiceMonitor, and scrapes a stand-in for their /metrics that serves vLLM 0.33's metric families with the values a
test sets.

The one departure from a real cluster: pod addresses are not loopback (tests/e2e/harness/cluster.py), so the scrape
address of each discovered pod is rewritten to the stand-in on 127.0.0.1, with the pod in the path. Everything else
(which Services the ServiceMonitor selects, the port name, the `namespace`/`service`/`pod`/`job` target labels, the
scrape interval) comes from the rendered ServiceMonitor through the Operator's relabelling rules.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.toolchain import BINARIES
from .cluster import START_TIMEOUT_SECONDS, SimulatedCluster
from .control_plane import free_port

# vLLM 0.33's gauges the stacks' queries read; `engine` is the engine-core index (0 with one engine per server).
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
GAUGES = {
    WAITING: "Number of requests waiting to be processed.",
    RUNNING: "Number of requests in model execution batches.",
    KV_CACHE: "KV-cache usage. 1 means 100 percent usage.",
}
IDLE = {WAITING: 0.0, RUNNING: 0.0, KV_CACHE: 0.0}
# Prometheus 3 refuses a scrape without a known Content-Type; this is the text format vLLM's client library serves.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
PATH_PATTERN = re.compile(r"^/pods/(?P<namespace>[^/]+)/(?P<pod>[^/]+)/metrics$")


@dataclass
class VllmMetrics:
    """The stand-in for every vLLM server's /metrics. A pod reports ``IDLE`` until a test sets its values; it serves
    the series of the model whose name prefixes the pod's (``serve``), with vLLM's label set."""

    models: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, workload name) -> model_name
    values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    scrapes: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, namespace: str, workload: str, model_name: str) -> None:
        with self.lock:
            self.models[(namespace, workload)] = model_name

    def set(self, namespace: str, pod: str, **values: float) -> None:
        """Values for one pod, by gauge: waiting=, running=, kv_cache= (the rest stay as they were)."""
        names = {"waiting": WAITING, "running": RUNNING, "kv_cache": KV_CACHE}
        with self.lock:
            current = self.values.setdefault((namespace, pod), dict(IDLE))
            current.update({names[key]: float(value) for key, value in values.items()})

    def reset(self) -> None:
        with self.lock:
            self.values.clear()

    def exposition(self, namespace: str, pod: str) -> str | None:
        with self.lock:
            model = next((name for (ns, workload), name in self.models.items()
                          if ns == namespace and pod.startswith(workload + "-")), None)
            if model is None:
                return None
            self.scrapes[(namespace, pod)] = self.scrapes.get((namespace, pod), 0) + 1
            values = self.values.get((namespace, pod), IDLE)
        labels = f'engine="0",model_name={json.dumps(model)}'
        lines = []
        for name, help_text in GAUGES.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {values[name]}"]
        return "\n".join(lines) + "\n"


@contextmanager
def metrics_server(metrics: VllmMetrics) -> Iterator[str]:
    """Serve ``metrics`` on loopback; yields host:port. Stops the server afterwards."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            match = PATH_PATTERN.match(self.path)
            body = metrics.exposition(match["namespace"], match["pod"]) if match else None
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", TEXT_FORMAT)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # the scrapes every second are not worth a log line each
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _label_name(key: str) -> str:
    """A Kubernetes label key as Prometheus's service discovery names it (every other character becomes `_`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def service_monitor_scrape_config(monitor: dict[str, Any], kubeconfig: Path, stand_in: str) -> dict[str, Any]:
    """The scrape job the Prometheus Operator generates for one ServiceMonitor with one endpoint (the relabelling of
    its generator for endpointslice discovery), then the rewrite of the pod address to the loopback stand-in."""
    metadata, spec = monitor["metadata"], monitor["spec"]
    [endpoint] = spec["endpoints"]
    namespaces = spec.get("namespaceSelector", {}).get("matchNames") or [metadata["namespace"]]
    relabel: list[dict[str, Any]] = []
    for key, value in sorted(spec["selector"].get("matchLabels", {}).items()):
        name = _label_name(key)
        relabel.append({"action": "keep", "source_labels": [f"__meta_kubernetes_service_label_{name}",
                                                           f"__meta_kubernetes_service_labelpresent_{name}"],
                        "regex": f"({re.escape(value)});true"})
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
         "regex": re.escape(endpoint["port"])},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
        # The stand-in: the pod's address (not loopback) becomes the loopback server, the pod goes into the path.
        {"source_labels": ["namespace", "pod"], "regex": "(.+);(.+)", "target_label": "__metrics_path__",
         "replacement": "/pods/${1}/${2}" + endpoint.get("path", "/metrics")},
        {"target_label": "__address__", "replacement": stand_in},
    ]
    return {
        "job_name": f"serviceMonitor/{metadata['namespace']}/{metadata['name']}/0",
        "scrape_interval": endpoint.get("interval", "30s"),
        "honor_labels": False,
        "kubernetes_sd_configs": [{"role": "endpointslice", "kubeconfig_file": str(kubeconfig),
                                   "namespaces": {"names": namespaces}}],
        "relabel_configs": relabel,
    }


@dataclass
class Prometheus:
    """A running Prometheus server and its HTTP API, as KEDA's Prometheus scaler calls it."""

    address: str
    cluster: SimulatedCluster

    def query(self, expression: str) -> dict[str, Any]:
        url = f"http://{self.address}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=10) as response:
            return dict(json.load(response))

    def vector(self, expression: str) -> list[tuple[dict[str, str], float]]:
        answer = self.query(expression)
        assert answer["status"] == "success" and answer["data"]["resultType"] == "vector", answer
        return [(item["metric"], float(item["value"][1])) for item in answer["data"]["result"]]

    def targets_up(self, job: str) -> list[dict[str, str]]:
        return [labels for labels, value in self.vector(f'up{{job="{job}"}}') if value == 1]


def prometheus_config(monitors: list[dict[str, Any]], kubeconfig: Path, stand_in: str) -> dict[str, Any]:
    unsupported = sorted({m["kind"] for m in monitors} - {"ServiceMonitor"})
    if unsupported:
        raise AssertionError(f"the simulated Prometheus configures ServiceMonitors only, not {unsupported}")
    return {"global": {"scrape_interval": "1m", "evaluation_interval": "1m"},
            "scrape_configs": [service_monitor_scrape_config(m, kubeconfig, stand_in) for m in monitors]}


@contextmanager
def prometheus(cluster: SimulatedCluster, workdir: Path, monitors: list[dict[str, Any]], stand_in: str,
               port: int | None = None) -> Iterator[Prometheus]:
    """Run Prometheus on 127.0.0.1:``port`` for ``monitors``; stop it (and forget its data) afterwards."""
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yaml"
    config.write_text(yaml.safe_dump(prometheus_config(monitors, cluster.plane.kubeconfig, stand_in)))
    name = f"prometheus-{port}"
    cluster.processes.start(name, [
        str(BINARIES / "prometheus"), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ])
    server = Prometheus(f"127.0.0.1:{port}", cluster)

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://{server.address}/-/ready", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    try:
        cluster.wait(ready, START_TIMEOUT_SECONDS, "Prometheus ready", lambda: cluster.processes.log_tail(name))
        yield server
    finally:
        cluster.processes.stop(name)
