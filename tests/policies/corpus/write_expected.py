"""Writes <manifest>.expected beside each corpus manifest: the checker's findings as `enforcement policy kind/name`
lines, each mandatory one followed by the reviewer's reason from REVIEWED (a finding without one stops the script, so a
new mandatory finding is never accepted unread).

    .venv/bin/python tests/policies/corpus/write_expected.py
"""
# ruff: noqa: E501
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parents[2]))

from vllm_pulumi.policies.engine import evaluate  # noqa: E402
from vllm_pulumi.policies.loader import load_paths  # noqa: E402

# (project folder, policy) -> why the mandatory finding is right, after reading the manifest.
REVIEWED: dict[tuple[str, str], str] = {
    ("gke-samples", "shutdown-timeout"): "v0.8.5/v0.10.0 predate --shutdown-timeout (v0.18.0): SIGTERM aborts in-flight answers; the fix says upgrade first",
    ("gke-samples", "startup-probe-covers-load"): "no startupProbe: a multi-GB load runs under liveness/readiness",
    ("gke-samples", "readiness-probe"): "no readinessProbe: the Service sends traffic to a pod still loading weights",
    ("gke-samples", "rollout-no-unavailable"): "no strategy: the Deployment default maxUnavailable 25% takes replicas down before new ones load",
    ("lws", "shutdown-timeout"): "the leader's vllm serve has no --shutdown-timeout (v0.8.5 lacks it: upgrade first; the TPU image is :latest, assumed current)",
    ("lws", "startup-probe-covers-load"): "no startupProbe on the leader of a 405B/70B multi-node load",
    ("lws", "gpu-product-selector"): "nvidia.com/gpu requested, no GPU-naming label selected: any GPU node may take the group",
    ("lws", "no-plaintext-secrets"): "HF_TOKEN is a literal env value ($HF_TOKEN filled by envsubst before apply): the token lands in the object in plain text",
    ("lws", "rollout-no-unavailable"): "LWS rollouts default to maxUnavailable 1, maxSurge 0: a group stops before its replacement loads",
    ("lws", "image-pinned"): "vllm/vllm-tpu:latest changes under the running group",
    ("kserve", "gpu-product-selector"): "the LLMInferenceService template requests nvidia.com/gpu and selects no GPU model",
    ("kserve", "shutdown-timeout"): "the runtime starts the API server without --shutdown-timeout: every InferenceService on it drops answers on SIGTERM",
    ("kuberay", "gpu-product-selector"): "the worker group requests GPUs and selects no GPU model",
    ("ai-on-eks", "gpu-product-selector"): "the GPU worker group selects no GPU model, so Karpenter may provision any GPU instance",
    ("ai-on-eks", "image-pinned"): "the Ray image is pinned to :latest",
    ("ai-on-eks", "lws-restart-policy"): "restartPolicy Default is LWS's deprecated name for None: a restarted pod leaves the 4-pod group hanging",
    ("production-stack", "gpus-match-parallelism"): "as published (a TODO says adjust) the vLLM container requests no GPU for TP 1",
    ("production-stack", "memory-limit-covers-shm"): "the 128Gi memory-backed /dev/shm is charged to a 30Gi memory limit: the pod is OOM-killed when shm fills",
    ("production-stack", "shutdown-timeout"): "vllm serve without --shutdown-timeout (image ubuntu:22.04 installs vLLM: version assumed current)",
    ("production-stack", "rollout-no-unavailable"): "no strategy: the default maxUnavailable 25% stops replicas before replacements serve",
    ("vllm", "kv-cache-fits"): "Qwen3-235B-A22B in BF16 over TP 4 is ~110 GiB of weights per 80 GB H100: vLLM runs out of memory loading it",
    ("vllm", "liveness-probe-safe"): "livenessProbe without startupProbe: 330 s of a 470 GB load, then the kubelet restarts it",
    ("vllm", "startup-probe-covers-load"): "no startupProbe for a multi-minute load",
    ("vllm", "image-pinned"): "vllm/vllm-openai:latest (the comment itself says to pin it)",
    ("vllm", "shutdown-timeout"): "vllm serve without --shutdown-timeout (image :latest, assumed current)",
    ("vllm", "rollout-no-unavailable"): "no strategy: the default maxUnavailable 25% takes 10 of 40 replicas down before replacements load",
}


def expected_lines(manifest: Path) -> list[str]:
    findings = evaluate(load_paths([str(manifest)]))
    return sorted(f"{f.enforcement} {f.policy} {f.resource['kind']}/{f.resource['name']}" for f in findings)


def main() -> int:
    missing = set()
    for manifest in sorted(p for p in ROOT.glob("*/*") if p.suffix in (".yaml", ".yml")):
        lines = []
        for line in expected_lines(manifest):
            if line.startswith("mandatory "):
                reason = REVIEWED.get((manifest.parent.name, line.split()[1]))
                if reason is None:
                    missing.add((manifest.parent.name, line.split()[1]))
                lines.append(f"{line}  # {reason}")
            else:
                lines.append(line)
        manifest.with_name(manifest.name + ".expected").write_text(
            f"# vllm-pulumi-check findings on {manifest.name}, reviewed by hand (tests/policies/test_corpus.py)\n"
            + "".join(f"{line}\n" for line in lines))
    if missing:
        print("mandatory findings nobody reviewed:", sorted(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
