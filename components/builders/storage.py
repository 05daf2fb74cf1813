"""Model storage: a PVC sized by the plan and a one-shot Job that downloads the weights into it once.

Kinds: a PVC this stack creates (local-nvme, fsx-lustre, efs, nfs), an existing claim, or no volume at all
(s3-runai-streamer: vLLM streams from S3; hf-download: vLLM downloads at each start).
"""

from __future__ import annotations

from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.linters import hydration_exemptions
from vllm_pulumi.components.builders.placement import gpu_pool_scheduling
from vllm_pulumi.components.builders.secrets import (
    HF_TOKEN_SECRET_KEY,
    build_generated_secret,
    hf_token_secret_name,
    secret_env,
)
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.storage import MODEL_MOUNT_PATH
from vllm_pulumi.runtime.vocabulary import PULUMI_SKIP_AWAIT_ANNOTATION, PULUMI_TIMEOUT_ANNOTATION

STORAGE_COMPONENT = "model-store"
# The hydration Job runs the serving image itself (plan.image, pinned by the vLLM version): it ships the Hugging Face
# client vLLM downloads with (huggingface_hub 2.4.0 in vLLM 0.33), so nothing is pip-installed at run time, and
# the Job runs on a node of the serving GPU pool (tolerating its taint, asking for no GPU): the ~10 GB image it pulls
# there is the one the first serving pod needs, and a node provisioned for the Job is the one that pod lands on, so
# node provisioning and image pull overlap the download instead of following it.
# Written only after a complete download, holding the repo id: a re-run for the same repo is a no-op, a different
# repo in the same directory replaces the old weights instead of mixing with them.
MARKER_FILE = ".vllm-pulumi-complete"
# Long enough for a 405B checkpoint (~800 GB) at ~100 MB/s; Pulumi and the Job give up after this.
HYDRATION_TIMEOUT_SECONDS = 6 * 3600
# Disk outside the volume: HOME=/tmp, the hub client's small caches and the logs. The download itself lands on the
# volume (snapshot_download's local_dir keeps its partial files there too).
HYDRATION_EPHEMERAL_STORAGE = "2Gi"
# Llama repos also ship the original PyTorch checkpoint under original/: vLLM reads the safetensors only.
IGNORE_PATTERNS = "original/*,*.pth"

# Fixed script; the repo, the target and the versions come from env vars, never spliced into the text.
HYDRATION_SCRIPT = """set -eu
case "$MODEL_DIR" in /models/?*) ;; *) echo "refusing to write outside /models: $MODEL_DIR" >&2; exit 1 ;; esac
if [ -f "$MODEL_DIR/$MARKER_FILE" ]; then
  if [ "$(cat "$MODEL_DIR/$MARKER_FILE")" = "$HF_REPO" ]; then
    echo "already hydrated: $HF_REPO in $MODEL_DIR"
    exit 0
  fi
  echo "replacing $(cat "$MODEL_DIR/$MARKER_FILE") with $HF_REPO in $MODEL_DIR"
  rm -rf "$MODEL_DIR"
fi
python3 -c '
import os
from huggingface_hub import snapshot_download
snapshot_download(
    repo_id=os.environ["HF_REPO"],
    local_dir=os.environ["MODEL_DIR"],
    ignore_patterns=os.environ["IGNORE_PATTERNS"].split(","),
)
'
printf '%s\\n' "$HF_REPO" > "$MODEL_DIR/$MARKER_FILE"
echo "hydrated: $HF_REPO in $MODEL_DIR"
"""


def claim_name(plan: ServingPlan) -> str:
    return plan.spec.storage.existing_claim or f"{plan.spec.name}-models"


def mounted_claim_name(plan: ServingPlan) -> str:
    """The claim the serving pods mount the weights from ("" when they read no volume)."""
    return claim_name(plan) if plan.uses_pvc else ""


def creates_claim(plan: ServingPlan) -> bool:
    return plan.uses_pvc and plan.spec.storage.existing_claim is None


def hydrates(plan: ServingPlan) -> bool:
    return plan.uses_pvc and plan.spec.storage.hydrate


def storage_labels(plan: ServingPlan) -> dict[str, str]:
    return lbl.common_labels(plan.spec.name, STORAGE_COMPONENT)


def build_pvc(plan: ServingPlan) -> dict[str, Any]:
    storage = plan.spec.storage
    spec: dict[str, Any] = {
        "accessModes": [storage.access_mode],
        "resources": {"requests": {"storage": f"{plan.pvc_size_gib}Gi"}},
    }
    if storage.storage_class is not None:
        spec["storageClassName"] = storage.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": lbl.metadata(claim_name(plan), plan.namespace, storage_labels(plan)),
        "spec": spec,
    }


def hydration_job_name(plan: ServingPlan) -> str:
    return f"{plan.spec.name}-hydrate"


def hydration_env(plan: ServingPlan) -> list[dict[str, Any]]:
    """What the fixed HYDRATION_SCRIPT downloads and where, as env vars (never spliced into the script's text)."""
    storage = plan.spec.storage
    env: list[dict[str, Any]] = [
        {"name": "HF_REPO", "value": plan.hf_repo},
        {"name": "MODEL_DIR", "value": plan.model_ref},
        {"name": "MARKER_FILE", "value": MARKER_FILE},
        {"name": "IGNORE_PATTERNS", "value": IGNORE_PATTERNS},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {"name": "HOME", "value": "/tmp"},
        # The Xet client's chunk cache (10 GB by default, under HOME) speeds re-reads; a one-shot download has none.
        {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"},
    ]
    if storage.hf_token is not None:
        env.append(secret_env("HF_TOKEN", storage.hf_token, hf_token_secret_name(plan.spec.name),
                              HF_TOKEN_SECRET_KEY))
    return env


def hydration_pod_spec(plan: ServingPlan) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "hydrate",
            "image": plan.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", HYDRATION_SCRIPT],
            "env": hydration_env(plan),
            "resources": {"requests": {"cpu": "1", "memory": "2Gi", "ephemeral-storage": HYDRATION_EPHEMERAL_STORAGE},
                          "limits": {"memory": "4Gi", "ephemeral-storage": HYDRATION_EPHEMERAL_STORAGE}},
            # Runs as root like the serving container (the image's Python lives under root-owned paths).
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "models", "mountPath": MODEL_MOUNT_PATH}],
        }],
        "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": claim_name(plan)}}],
    }
    # On the serving GPU pool, placed like the serving pods (see the image comment above); for local-nvme also
    # because a node-local volume binds where its first pod runs.
    pod_spec.update(gpu_pool_scheduling(plan))
    return pod_spec


def build_hydration_job(plan: ServingPlan, *, skip_await: bool = False) -> dict[str, Any]:
    """Download the model into the PVC once. Idempotent: a marker file written after success short-circuits reruns.

    ``skip_await`` (tests only) adds ``pulumi.com/skipAwait``; by default Pulumi waits for the Job to complete, so
    the serving workload (which depends on it) never starts on a half-written volume.
    """
    annotations = {PULUMI_TIMEOUT_ANNOTATION: str(HYDRATION_TIMEOUT_SECONDS), **hydration_exemptions(plan)}
    if skip_await:
        annotations[PULUMI_SKIP_AWAIT_ANNOTATION] = "true"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": lbl.metadata(hydration_job_name(plan), plan.namespace, storage_labels(plan), annotations),
        # No ttlSecondsAfterFinished: a Job the cluster deletes is one Pulumi recreates on the next `up` (the marker
        # makes that run a no-op, but it still schedules a pod).
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": HYDRATION_TIMEOUT_SECONDS,
            "template": {"metadata": {"labels": storage_labels(plan)}, "spec": hydration_pod_spec(plan)},
        },
    }


def build_storage_secrets(plan: ServingPlan) -> list[dict[str, Any]]:
    """The HF-token Secret to create from a Pulumi secret (data filled in by the shell), if any."""
    token = plan.spec.storage.hf_token
    if token is None or token.pulumi_secret is None:
        return []
    if not (hydrates(plan) or plan.spec.storage.kind == "hf-download"):
        return []
    return [build_generated_secret(hf_token_secret_name(plan.spec.name), plan.namespace,
                                   storage_labels(plan))]


def build_storage(plan: ServingPlan, *, skip_await: bool = False) -> list[dict[str, Any]]:
    """PVC then hydration Job (no Secrets: see build_storage_secrets)."""
    objects: list[dict[str, Any]] = []
    if creates_claim(plan):
        objects.append(build_pvc(plan))
    if hydrates(plan):
        objects.append(build_hydration_job(plan, skip_await=skip_await))
    return objects
