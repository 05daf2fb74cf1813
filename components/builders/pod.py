"""The vLLM pod of a serving workload: its containers (the OpenAI server, and a LeaderWorkerSet's Ray workers), their
env, resources, probes, drain and volumes, and where the pod runs.

Every number comes from the ServingPlan; serving.py wraps these pods in a Deployment or a LeaderWorkerSet.
"""

from __future__ import annotations

import copy
from typing import Any

from vllm_pulumi.components.builders.placement import gpu_pool_scheduling
from vllm_pulumi.components.builders.secrets import (
    API_KEY_SECRET_KEY,
    HF_TOKEN_SECRET_KEY,
    api_key_secret_name,
    hf_token_secret_name,
    secret_env,
)
from vllm_pulumi.components.builders.storage import claim_name
from vllm_pulumi.runtime.planning.lifecycle import LIVENESS_PROBE_PERIOD_SECONDS, PROBE_TIMEOUT_SECONDS, READINESS_PROBE_PERIOD_SECONDS, STARTUP_PROBE_PERIOD_SECONDS
from vllm_pulumi.runtime.planning.plans import ServingPlan, compile_cache_key, runai_streamer_concurrency
from vllm_pulumi.runtime.planning.storage import MODEL_MOUNT_PATH
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE, GPU_RESOURCE

HTTP_PORT_NAME = "http"
# Readiness drops a pod from the Service after 3 failed polls (15 s): long enough to ride out one slow /health.
READINESS_FAILURE_THRESHOLD = 3
CACHE_DIR = "/cache"
RAY_PORT = 6379
# Every cache location vLLM and its libraries read from an env var points into the cache emptyDir.
CACHE_ENV = {
    "HOME": "/cache",
    "XDG_CACHE_HOME": "/cache",
    "HF_HOME": "/cache/huggingface",
    "VLLM_CACHE_ROOT": "/cache/vllm",
    "TRITON_CACHE_DIR": "/cache/triton",
    "TORCHINDUCTOR_CACHE_DIR": "/cache/torchinductor",
    "FLASHINFER_WORKSPACE_BASE": "/cache/flashinfer",
    "NUMBA_CACHE_DIR": "/cache/numba",
    "OUTLINES_CACHE_DIR": "/cache/outlines",
}

# The leader's fixed bootstrap: start the Ray head, wait for every pod of the group to join, then hand PID 1 to
# `vllm serve` (so SIGTERM reaches vLLM and --shutdown-timeout drains). vLLM's arguments arrive as "$@" (the
# container's args), never spliced into this text.
LEADER_SCRIPT = """set -euo pipefail
ray start --head --port=6379 --disable-usage-stats
until python3 -c '
import os, sys, ray
ray.init(address="auto", logging_level="ERROR")
alive = sum(1 for node in ray.nodes() if node["Alive"])
sys.exit(0 if alive >= int(os.environ["LWS_GROUP_SIZE"]) else 1)
'; do
  echo "waiting for ${LWS_GROUP_SIZE} Ray nodes"
  sleep 5
done
exec vllm serve "$@"
"""

# A worker waits for the leader's Ray head instead of failing: with RecreateGroupOnPodRestart a worker that exits
# because the leader is still pulling its image would restart the whole group, over and over.
WORKER_SCRIPT = """set -euo pipefail
until ray health-check --address "${LWS_LEADER_ADDRESS}:6379" >/dev/null 2>&1; do
  echo "waiting for the Ray head at ${LWS_LEADER_ADDRESS}:6379"
  sleep 5
done
exec ray start --address="${LWS_LEADER_ADDRESS}:6379" --block --disable-usage-stats
"""

# Hardening the upstream image allows. Not set, and why:
# - runAsNonRoot / runAsUser: vllm/vllm-openai runs as root and keeps its Python environment under root-owned paths;
#   a numeric non-root user breaks Ray and pip-installed extensions at start. Capabilities are dropped instead, so
#   root in the container has no privileges beyond file ownership in its own filesystem.
# - readOnlyRootFilesystem: vLLM 0.33, torch.compile, Triton, FlashInfer, Ray and the HF hub write caches and
#   sockets; we redirect every one with a setting (CACHE_ENV, /tmp) to emptyDirs, but several libraries still write
#   under site-packages or unlisted paths on some code paths, and a read-only root turns that into a crash after
#   minutes of loading. The redirected caches keep the writable layer small; the root stays writable.
CONTAINER_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "privileged": False,
    "readOnlyRootFilesystem": False,
}
POD_SECURITY_CONTEXT: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}


# vLLM 0.33 answers both from the same engine check (200, or 503 once the engine is dead). Readiness asks /ping, the
# route hosting platforms poll before sending traffic; liveness and startup ask /health. Distinct paths keep linters
# that compare probes (kube-score's pod-probes-identical) honest about what differs: the failure budgets.
READINESS_PATH = "/ping"
LIVENESS_PATH = "/health"


def http_get(plan: ServingPlan, path: str = LIVENESS_PATH) -> dict[str, Any]:
    return {"path": path, "port": HTTP_PORT_NAME}


def probes(plan: ServingPlan) -> dict[str, Any]:
    """startup covers the startup budget; liveness only starts after it and outlasts a drain (plan thresholds);
    readiness drops a pod from the Service after 15 s, long before liveness would restart it."""
    return {
        "startupProbe": {
            "httpGet": http_get(plan),
            "periodSeconds": STARTUP_PROBE_PERIOD_SECONDS,
            "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
            "failureThreshold": plan.startup_probe_failure_threshold,
        },
        "readinessProbe": {
            "httpGet": http_get(plan, READINESS_PATH),
            "periodSeconds": READINESS_PROBE_PERIOD_SECONDS,
            "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
            "failureThreshold": READINESS_FAILURE_THRESHOLD,
        },
        "livenessProbe": {
            "httpGet": http_get(plan),
            "periodSeconds": LIVENESS_PROBE_PERIOD_SECONDS,
            "timeoutSeconds": PROBE_TIMEOUT_SECONDS,
            "failureThreshold": plan.liveness_probe_failure_threshold,
        },
    }


def lifecycle(pre_stop_sleep_seconds: int) -> dict[str, Any]:
    """Native preStop sleep: the pod leaves the endpoints before SIGTERM starts vLLM's drain."""
    if pre_stop_sleep_seconds <= 0:
        return {}
    return {"lifecycle": {"preStop": {"sleep": {"seconds": pre_stop_sleep_seconds}}}}


def resources(plan: ServingPlan) -> dict[str, Any]:
    """GPUs: requests = limits = GPUs per pod. CPU/memory requests from the plan; limits only where the spec sets
    them (a CPU limit throttles vLLM's scheduler loop; a memory limit must cover /dev/shm, which the plan checks)."""
    # A quantity's canonical form is a string: the LWS webhook rewrites an integer 8 to "8", and Pulumi would then
    # see a change on every `up` (found by the simulated cluster).
    gpus = str(plan.layout.gpus_per_pod)
    # Disk: the emptyDirs and the writable layer, requested (the scheduler reserves it beside the ~20 GB image) and
    # limited alike (plan.ephemeral_storage_gib), so disk pressure evicts pods that exceed their requests first.
    disk = f"{plan.ephemeral_storage_gib}Gi"
    requests: dict[str, Any] = {
        "cpu": plan.cpu_request,
        "memory": f"{plan.memory_request_gib}Gi",
        "ephemeral-storage": disk,
        GPU_RESOURCE: gpus,
    }
    limits: dict[str, Any] = {"ephemeral-storage": disk, GPU_RESOURCE: gpus}
    if plan.efa_devices_per_pod:
        # A replica spanning EFA nodes: every EFA interface of the node, so NCCL's traffic crosses all of them.
        requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = str(plan.efa_devices_per_pod)
    if plan.cpu_limit is not None:
        limits["cpu"] = plan.cpu_limit
    if plan.memory_limit_gib is not None:
        limits["memory"] = f"{plan.memory_limit_gib}Gi"
    return {"requests": requests, "limits": limits}


def efa_env(plan: ServingPlan) -> list[dict[str, Any]]:
    """libfabric's EFA provider for the AWS OFI NCCL plugin (in the efa_image), rather than probing the others."""
    return [{"name": "FI_PROVIDER", "value": "efa"}] if plan.efa_devices_per_pod else []


# With a shared compile cache (runtime.planning.plans.compile_cache_key) these point at the model volume instead: the first
# pod compiles, later pods and restarts of the same model, vLLM version, layout and GPU load the artifacts.
COMPILE_CACHE_MOUNT = "/compile-cache"
SHARED_COMPILE_CACHE_ENV = {
    "VLLM_CACHE_ROOT": f"{COMPILE_CACHE_MOUNT}/vllm",
    "TRITON_CACHE_DIR": f"{COMPILE_CACHE_MOUNT}/triton",
    "TORCHINDUCTOR_CACHE_DIR": f"{COMPILE_CACHE_MOUNT}/torchinductor",
    "FLASHINFER_WORKSPACE_BASE": f"{COMPILE_CACHE_MOUNT}/flashinfer",
}


def cache_env(plan: ServingPlan) -> list[dict[str, Any]]:
    """Cache locations (shared compile cache or the pod's emptyDir); leader and workers alike, since every rank
    compiles and reads weights."""
    values = dict(CACHE_ENV)
    if compile_cache_key(plan) is not None:
        values.update(SHARED_COMPILE_CACHE_ENV)
    items = [{"name": key, "value": value} for key, value in values.items()]
    concurrency = runai_streamer_concurrency(plan)
    if concurrency is not None:
        items.append({"name": "RUNAI_STREAMER_CONCURRENCY", "value": str(concurrency)})
    return items


def env(plan: ServingPlan) -> list[dict[str, Any]]:
    spec = plan.spec
    items: list[dict[str, Any]] = cache_env(plan)
    if spec.api_key is not None:
        items.append(secret_env("VLLM_API_KEY", spec.api_key, api_key_secret_name(spec.name), API_KEY_SECRET_KEY))
    items += efa_env(plan)
    if spec.storage.kind == "hf-download" and spec.storage.hf_token is not None:
        # No shared store: vLLM downloads from the hub itself at every start, so it needs the token.
        items.append(secret_env("HF_TOKEN", spec.storage.hf_token, hf_token_secret_name(spec.name),
                                HF_TOKEN_SECRET_KEY))
    return items


def volume_mounts(plan: ServingPlan) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "cache", "mountPath": CACHE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if plan.uses_pvc:
        mounts.append({"name": "models", "mountPath": MODEL_MOUNT_PATH, "readOnly": True})
    key = compile_cache_key(plan)
    if key is not None:
        # Writable, but only this model's cache directory: the weights stay mounted read-only above.
        mounts.append({"name": "models", "mountPath": COMPILE_CACHE_MOUNT, "subPath": key})
    return mounts


def volumes(plan: ServingPlan) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        # vLLM's engine-core IPC and NCCL's shared-memory transport; the container default is 64 MiB.
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{plan.shm_size_gib}Gi"}},
        # Compile caches, and with hf-download the weights too (the plan sizes it for them).
        {"name": "cache", "emptyDir": {"sizeLimit": f"{plan.cache_size_gib}Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": f"{plan.tmp_size_gib}Gi"}},
    ]
    if plan.uses_pvc:
        # readOnly on the claim would make the compile-cache mount read-only too; the weights mount sets it instead.
        claim: dict[str, Any] = {"claimName": claim_name(plan)}
        if compile_cache_key(plan) is None:
            claim["readOnly"] = True
        items.append({"name": "models", "persistentVolumeClaim": claim})
    return items


def pod_spec(plan: ServingPlan, container: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        # vLLM never calls the Kubernetes API; no token in the pod. (IRSA and EKS Pod Identity inject their own
        # projected AWS token, so a named ServiceAccount still gets S3 access without this one.)
        "automountServiceAccountToken": False,
        **({"serviceAccountName": plan.spec.service_account_name} if plan.spec.service_account_name else {}),
        # Service links put an env var per Service of the namespace into the engine's environment; not needed.
        "enableServiceLinks": False,
        "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
        **gpu_pool_scheduling(plan),
        "terminationGracePeriodSeconds": plan.termination_grace_period_seconds,
        "containers": [container],
        "volumes": volumes(plan),
    }
    return spec


def server_container(plan: ServingPlan, name: str, command: list[str], args: list[str]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "args": args,
        "ports": [{"name": HTTP_PORT_NAME, "containerPort": plan.spec.engine.port, "protocol": "TCP"}],
        "env": env(plan),
        "resources": resources(plan),
        **probes(plan),
        **lifecycle(plan.pre_stop_sleep_seconds),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "volumeMounts": volume_mounts(plan),
    }
    return container


def leader_container(plan: ServingPlan) -> dict[str, Any]:
    """The OpenAI server of a LeaderWorkerSet group, which also runs the group's Ray head (LEADER_SCRIPT)."""
    leader = server_container(plan, "vllm-leader", ["bash", "-c", LEADER_SCRIPT, "vllm-leader"], list(plan.args))
    leader["ports"].append({"name": "ray-gcs", "containerPort": RAY_PORT, "protocol": "TCP"})
    return leader


def worker_container(plan: ServingPlan) -> dict[str, Any]:
    """A Ray worker of a LeaderWorkerSet group: no HTTP server, the same GPUs, caches and volumes as the leader."""
    return {
        "name": "vllm-worker",
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", WORKER_SCRIPT, "vllm-worker"],
        "env": cache_env(plan) + efa_env(plan),
        "resources": resources(plan),
        # Workers outlive the leader's drain: the leader's engine still needs their GPUs while requests finish.
        **lifecycle(plan.worker_pre_stop_sleep_seconds),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "volumeMounts": volume_mounts(plan),
    }
