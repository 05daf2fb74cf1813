"""A throwaway Kubernetes control plane for tests: etcd and kube-apiserver on loopback.

Flags as envtest uses them (scripts/TOOLCHAIN.md has the ones verified on these builds). Static-token auth for an
admin in system:masters; the API server's self-signed serving certificate is the kubeconfig's CA.

``control_plane(..., controllers=False)`` is the API server alone: no `default` ServiceAccount (its admission plugin
is off), no PVC-protection finalizer remover (that admission plugin is off too), no namespace finalizer remover (a
deleted Namespace stays Terminating). With ``controllers=True`` every default admission plugin and the garbage
collector stay on, for the simulated cluster (tests/e2e/harness/cluster.py) whose controller manager handles them.
"""

from __future__ import annotations

import ctypes
import json
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

READY_TIMEOUT_SECONDS = 90


def _decode(body: bytes) -> Any:
    """JSON answers as data; plain-text ones (/readyz) as text."""
    try:
        return json.loads(body or b"null")
    except json.JSONDecodeError:
        return body.decode(errors="replace")


def die_with_parent() -> None:
    """``preexec_fn`` of every server a test starts: the kernel sends it SIGTERM when the test process dies, so a
    killed pytest (a CI timeout, a ^C during start-up) leaves nothing running (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ControlPlane:
    url: str
    token: str
    ca_file: Path
    kubeconfig: Path
    workdir: Path

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(self, method: str, path: str, body: object | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=30) as response:
                return response.status, _decode(response.read())
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read())

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)

    def install_crds(self, paths: list[Path]) -> list[str]:
        """Create the CRDs and wait until each is Established (then its custom resources are served)."""
        names = []
        for path in paths:
            for crd in yaml.safe_load_all(path.read_text()):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                status, answer = self.request(
                    "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                assert status in (201, 409), f"{path.name}: {status} {answer}"
                names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        for name in names:
            while True:
                _, crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
                if conditions.get("Established") == "True":
                    break
                assert time.monotonic() < deadline, f"CRD {name} not Established"
                time.sleep(0.5)
        return names


def object_path(obj: dict[str, Any]) -> str:
    """REST path of a namespaced or cluster-scoped object of the kinds this project renders."""
    group_version = obj["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    kind = obj["kind"].lower()
    plural = kind[:-1] + "ies" if kind.endswith("y") else kind + ("es" if kind.endswith("s") else "s")
    namespace = obj["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace and obj["kind"] != "Namespace" else ""
    return f"{base}{scope}/{plural}/{obj['metadata']['name']}"


FRONT_PROXY_CLIENT = "front-proxy-client"


def front_proxy_certificates(directory: Path) -> list[str]:
    """The aggregation layer's flags: a CA for the request-header client and the client certificate the API server
    presents when it proxies to an extension API server (KEDA's external-metrics adapter). The extension server reads
    the CA and the header names from kube-system/extension-apiserver-authentication, which the API server publishes."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ca_key, ca_cert = directory / "front-proxy-ca.key", directory / "front-proxy-ca.crt"
    key, csr, cert = (directory / f"{FRONT_PROXY_CLIENT}.{ext}" for ext in ("key", "csr", "crt"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_cert),
            "-subj", "/CN=front-proxy-ca", "-days", "2")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", f"/CN={FRONT_PROXY_CLIENT}")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert), "-days", "2")
    return [
        f"--requestheader-client-ca-file={ca_cert}", f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={cert}", f"--proxy-client-key-file={key}",
    ]


def _wait_until_ready(plane: ControlPlane, apiserver: subprocess.Popen[bytes]) -> None:
    """Until /readyz answers 200 (the serving certificate exists first); fails with the log's tail if the API server
    exits or is not ready in READY_TIMEOUT_SECONDS."""
    log = plane.workdir / "kube-apiserver.log"
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while True:
        assert apiserver.poll() is None, log.read_text()[-3000:]
        if plane.ca_file.exists():
            try:
                if plane.get("/readyz")[0] == 200:
                    return
            except (OSError, ssl.SSLError):
                pass
        assert time.monotonic() < deadline, "kube-apiserver not ready: " + log.read_text()[-3000:]
        time.sleep(0.5)


@contextmanager
def control_plane(binaries: Path, workdir: Path, *, controllers: bool = False) -> Iterator[ControlPlane]:
    """Start etcd and kube-apiserver on free loopback ports; stop both (and forget their data) afterwards."""
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "genrsa", "-out", str(workdir / "sa.key"), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(workdir / "sa.key"), "-pubout", "-out", str(workdir / "sa.pub")],
                   check=True, capture_output=True)
    token = subprocess.run(["openssl", "rand", "-hex", "16"], check=True, capture_output=True,
                           text=True).stdout.strip()
    (workdir / "tokens.csv").write_text(f"{token},admin,admin-uid,system:masters\n")
    client, peer, secure = free_port(), free_port(), free_port()
    logs = [open(workdir / name, "w") for name in ("etcd.log", "kube-apiserver.log")]  # noqa: SIM115
    etcd = subprocess.Popen([
        str(binaries / "etcd"), "--name", "e2e", "--data-dir", str(workdir / "etcd-data"),
        "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"e2e=http://127.0.0.1:{peer}", "--unsafe-no-fsync", "--log-level", "warn",
    ], stdout=logs[0], stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    apiserver = subprocess.Popen([
        str(binaries / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{client}",
        f"--cert-dir={workdir / 'certs'}", f"--secure-port={secure}", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
        "--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={workdir / 'sa.pub'}", f"--service-account-signing-key-file={workdir / 'sa.key'}",
        f"--token-auth-file={workdir / 'tokens.csv'}",
        # The simulated cluster serves external.metrics.k8s.io through KEDA's adapter: the aggregation layer.
        *(front_proxy_certificates(workdir / "front-proxy") if controllers else (
            "--enable-garbage-collector=false",
            "--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection",
        )),
    ], stdout=logs[1], stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    try:
        plane = ControlPlane(f"https://127.0.0.1:{secure}", token, workdir / "certs" / "apiserver.crt",
                             workdir / "kubeconfig", workdir)
        _wait_until_ready(plane, apiserver)
        plane.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "edge",
            "clusters": [{"name": "e2e", "cluster": {
                "server": plane.url, "certificate-authority": str(plane.ca_file)}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "edge", "context": {"cluster": "e2e", "user": "admin"}}],
        }))
        yield plane
    finally:
        # The API server first, etcd once it is gone: an API server whose etcd vanished under it retries its storage
        # calls until its shutdown timeout instead of exiting.
        for process in (apiserver, etcd):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in logs:
            log.close()
