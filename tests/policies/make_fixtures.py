"""Writes tests/policies/fixtures/<rule>/{fires,passes}/*.yaml: each one the reference manifests
(fixtures/reference/*.yaml) with the one change that makes a rule fire, or an edge case it must accept.

    .venv/bin/python tests/policies/make_fixtures.py

The files are what the tests read (and what a reader opens to see a rule's cases); this script only keeps them
consistent with the reference when that changes. A hand-written fixture in those folders works just as well.
"""
# ruff: noqa: E501, E702
import copy
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent / "fixtures"
ref1 = [d for d in yaml.safe_load_all((ROOT/"reference/single-node.yaml").read_text()) if d]
ref2 = [d for d in yaml.safe_load_all((ROOT/"reference/multi-node.yaml").read_text()) if d]

def base(*kinds, multi=False):
    docs = copy.deepcopy(ref2 if multi else ref1)
    return [d for d in docs if not kinds or d["kind"] in kinds]

def dep(docs): return next(d for d in docs if d["kind"] in ("Deployment",))
def lws(docs): return next(d for d in docs if d["kind"] == "LeaderWorkerSet")
def pod(docs): return dep(docs)["spec"]["template"]["spec"]
def vllm(docs): return pod(docs)["containers"][0]
def leader(docs): return lws(docs)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
def worker(docs): return lws(docs)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
def setarg(docs, flag, value=None, remove=False):
    args = vllm(docs)["args"]
    args[:] = [a for a in args if not a.startswith(flag + "=") and a != flag]
    if not remove:
        args.append(flag if value is None else f"{flag}={value}")
def ann(docs, key, value):
    dep(docs).setdefault("metadata", {}).setdefault("annotations", {})[key] = value

out = {}
def fx(rule, kind, name, desc, docs):
    out[(rule, kind, name)] = (desc, docs)

# ---- startup-probe-covers-load
R = "startup-probe-covers-load"
d = base("Deployment"); del vllm(d)["startupProbe"]
fx(R, "fires", "no-startup-probe", "No startupProbe at all.", d)
d = base("Deployment"); vllm(d)["startupProbe"]["failureThreshold"] = 6
fx(R, "fires", "window-shorter-than-load", "10 s x 6 = 60 s, but 16 GB from local NVMe + engine init needs ~192 s.", d)
d = base("Deployment"); vllm(d)["args"][0] = "meta-llama/Llama-3.1-8B-Instruct"
fx(R, "fires", "hf-download-at-every-start", "Weights downloaded from the Hub at every start (~0.05 GB/s): 600 s is too short.", d)
d = base("Deployment"); vllm(d)["args"][0] = "/models/my-finetune"
fx(R, "fires", "cannot-check-unknown-model", "A model outside the catalog without annotations: reported as advisory 'cannot check'.", d)
fx(R, "passes", "reference", "The reference Deployment: 600 s window over a ~192 s budget.", base("Deployment"))
d = base("Deployment"); vllm(d)["args"][0] = "/models/my-finetune"; ann(d, "vllm-pulumi.dev/startup-budget-seconds", "300")
fx(R, "passes", "declared-budget", "Unknown model, but the startup-budget-seconds annotation says what the probe was sized for.", d)

R = "liveness-probe-safe"
d = base("Deployment"); del vllm(d)["startupProbe"]
fx(R, "fires", "liveness-without-startup", "Liveness runs during model load because there is no startupProbe.", d)
d = base("Deployment"); vllm(d)["livenessProbe"].update(periodSeconds=10, failureThreshold=3)
fx(R, "fires", "liveness-shorter-than-grace", "Liveness kills after 30 s, grace is 135 s (the seed's trap 5).", d)
fx(R, "passes", "reference", "Liveness window 150 s >= grace 135 s, startup probe present.", base("Deployment"))
d = base("Deployment"); del vllm(d)["livenessProbe"]
fx(R, "passes", "no-liveness", "No livenessProbe: nothing can kill the pod early.", d)

R = "readiness-probe"
d = base("Deployment"); del vllm(d)["readinessProbe"]
fx(R, "fires", "missing", "No readinessProbe.", d)
fx(R, "passes", "reference", "readinessProbe on /health.", base("Deployment"))

R = "shutdown-timeout"
d = base("Deployment"); setarg(d, "--shutdown-timeout", remove=True)
fx(R, "fires", "missing", "No --shutdown-timeout: vLLM 0.33 aborts in-flight requests on SIGTERM.", d)
d = base("Deployment"); setarg(d, "--shutdown-timeout", 0)
fx(R, "fires", "zero", "--shutdown-timeout=0 aborts in-flight requests.", d)
fx(R, "passes", "reference", "--shutdown-timeout=90.", base("Deployment"))
fx(R, "passes", "lws-leader-script", "The LWS leader passes --shutdown-timeout inside its bash -c script.", base("LeaderWorkerSet", multi=True))

R = "grace-covers-drain"
d = base("Deployment"); del pod(d)["terminationGracePeriodSeconds"]
fx(R, "fires", "default-grace", "Default 30 s grace < preStop 15 + drain 90 + margin 10.", d)
d = base("Deployment"); vllm(d)["lifecycle"]["preStop"] = {"exec": {"command": ["sh", "-c", "sleep 60"]}}
fx(R, "fires", "long-prestop", "preStop sleeps 60 s: 60 + 90 + 10 = 160 > 135.", d)
fx(R, "passes", "reference", "135 s >= 15 + 90 + 10.", base("Deployment"))
d = base("Deployment"); pod(d)["terminationGracePeriodSeconds"] = 115
fx(R, "passes", "exactly-enough", "115 s = 15 + 90 + 10.", d)

R = "rollout-no-unavailable"
d = base("Deployment"); del dep(d)["spec"]["strategy"]
fx(R, "fires", "default-strategy", "Deployment default: maxUnavailable 25%.", d)
d = base("Deployment"); dep(d)["spec"]["strategy"] = {"type": "Recreate"}
fx(R, "fires", "recreate", "Recreate stops every replica first.", d)
d = base("LeaderWorkerSet", multi=True); del lws(d)["spec"]["rolloutStrategy"]
fx(R, "fires", "lws-default", "LeaderWorkerSet default: maxUnavailable 1, maxSurge 0.", d)
fx(R, "passes", "reference", "maxUnavailable 0, maxSurge 1.", base("Deployment"))
d = base("Deployment"); dep(d)["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = "100%"
fx(R, "passes", "percent-surge", "maxSurge 100% (production-stack's choice).", d)
fx(R, "passes", "lws-reference", "LWS of 2 groups with maxUnavailable 0, maxSurge 1.", base("LeaderWorkerSet", multi=True))
def pool(docs, **facts):
    for key, value in facts.items(): ann(docs, f"vllm-pulumi.dev/{key.replace('_', '-')}", str(value))
def lws_pool(docs, **facts):
    for key, value in facts.items(): lws(docs).setdefault("metadata", {}).setdefault("annotations", {})[f"vllm-pulumi.dev/{key.replace('_', '-')}"] = str(value)
def replace_one(rolling): rolling.update(maxSurge=0, maxUnavailable=1)
d = base("Deployment"); pool(d, max_replicas=8, replica_capacity=8)
fx(R, "fires", "surge-at-no-headroom", "maxSurge 1 while the pool holds exactly the 8 replicas of max scale: the surge pod is never placed, the rollout deadlocks.", d)
d = base("Deployment"); replace_one(dep(d)["spec"]["strategy"]["rollingUpdate"]); pool(d, max_replicas=8, replica_capacity=9)
fx(R, "fires", "unavailable-with-headroom", "maxUnavailable 1 although the pool has room for a 9th replica: surge instead.", d)
d = base("LeaderWorkerSet", multi=True); lws_pool(d, pool_max_nodes=4, node_gpus=8, max_replicas=2)
fx(R, "fires", "lws-surge-at-no-headroom-from-node-facts", "Two groups of 2 whole-node pods on a pool of 4 nodes: no room for a surge group.", d)
d = base("LeaderWorkerSet", multi=True); lws(d)["spec"]["replicas"] = 1
fx(R, "fires", "lws-single-group-surge", "One group with maxSurge 1, maxUnavailable 0: LeaderWorkerSet 0.8 surges only while more groups than maxSurge are out of date, so the rollout never starts.", d)
d = base("LeaderWorkerSet", multi=True); lws(d)["spec"]["replicas"] = 1; replace_one(lws(d)["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]); lws_pool(d, pool_max_nodes=4, node_gpus=8, max_replicas=1)
fx(R, "passes", "lws-single-group-replaced", "One group, replaced (maxSurge 0, maxUnavailable 1) even with room for a second: the only rollout of one group that progresses.", d)
d = base("Deployment"); replace_one(dep(d)["spec"]["strategy"]["rollingUpdate"]); pool(d, max_replicas=8, replica_capacity=8)
fx(R, "passes", "replace-one-at-no-headroom", "No room for a surge replica at max scale: maxSurge 0, maxUnavailable 1 replaces one at a time.", d)
d = base("Deployment"); pool(d, max_replicas=8, replica_capacity=9)
fx(R, "passes", "surge-with-headroom", "maxSurge 1 with room for a 9th replica at max scale.", d)
d = base("LeaderWorkerSet", multi=True); replace_one(lws(d)["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]); lws_pool(d, pool_max_nodes=4, node_gpus=8, max_replicas=2)
fx(R, "passes", "lws-replace-one-at-no-headroom-from-node-facts", "Two groups filling their 4-node pool, replaced one group at a time.", d)
d = base("LeaderWorkerSet", multi=True); lws_pool(d, pool_max_nodes=6, node_gpus=8, max_replicas=2)
fx(R, "passes", "lws-surge-with-headroom-from-node-facts", "Two groups of 2 whole-node pods on a pool of 6 nodes: room for a surge group.", d)

R = "dev-shm-memory"
d = base("Deployment"); setarg(d, "--tensor-parallel-size", 2); vllm(d)["resources"]["limits"]["nvidia.com/gpu"] = 2
vllm(d)["resources"]["requests"]["nvidia.com/gpu"] = 2
vllm(d)["volumeMounts"] = [m for m in vllm(d)["volumeMounts"] if m["name"] != "shm"]
pod(d)["volumes"] = [v for v in pod(d)["volumes"] if v["name"] != "shm"]
fx(R, "fires", "tp2-without-shm", "TP 2 in one pod without /dev/shm.", d)
d = base("Deployment"); setarg(d, "--tensor-parallel-size", 2); pod(d)["volumes"][1]["emptyDir"] = {}
fx(R, "fires", "shm-on-disk", "/dev/shm from an emptyDir on disk, not memory.", d)
d = base("LeaderWorkerSet", multi=True); w = worker(d); w["containers"][0]["volumeMounts"] = w["containers"][0]["volumeMounts"][:1]
fx(R, "fires", "lws-worker-without-shm", "Multi-node: the worker pods lack /dev/shm.", d)
fx(R, "passes", "reference", "TP 1 with a memory /dev/shm.", base("Deployment"))
d = base("Deployment"); vllm(d)["volumeMounts"] = vllm(d)["volumeMounts"][:1]; pod(d)["volumes"] = pod(d)["volumes"][:1]
fx(R, "passes", "single-gpu-no-shm", "One GPU, no /dev/shm: not needed.", d)
fx(R, "passes", "multi-node", "Leader and workers mount a memory /dev/shm.", base("LeaderWorkerSet", multi=True))

R = "gpu-memory-utilization"
d = base("Deployment"); setarg(d, "--gpu-memory-utilization", 0.98)
fx(R, "fires", "too-high", "0.98 leaves no room for fragmentation.", d)
fx(R, "passes", "reference", "0.92.", base("Deployment"))

R = "gpu-requests-equal-limits"
d = base("Deployment"); vllm(d)["resources"]["limits"]["nvidia.com/gpu"] = 2
fx(R, "fires", "different", "Request 1, limit 2.", d)
d = base("Job"); d[0]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 1}}
fx(R, "fires", "request-without-limit", "A Job requesting a GPU without a limit.", d)
fx(R, "passes", "reference", "Request 1 = limit 1.", base("Deployment"))
fx(R, "passes", "limit-only", "LWS pods set only the limit (the request defaults to it).", base("LeaderWorkerSet", multi=True))

R = "gpus-match-parallelism"
d = base("Deployment"); setarg(d, "--tensor-parallel-size", 2)
fx(R, "fires", "tp2-one-gpu", "TP 2 with one GPU.", d)
d = base("LeaderWorkerSet", multi=True); a = leader(d)["containers"][0]["args"]; a[0] = a[0].replace("--pipeline-parallel-size 2", "--pipeline-parallel-size 4")
fx(R, "fires", "lws-pp-too-large", "TP 8 x PP 4 = 32 GPUs, the group has 2 x 8.", d)
fx(R, "passes", "reference", "TP 1, one GPU.", base("Deployment"))
fx(R, "passes", "multi-node", "TP 8 x PP 2 = 16 = 2 pods x 8 GPUs.", base("LeaderWorkerSet", multi=True))

R = "tensor-parallel-divides-heads"
d = base("Deployment"); vllm(d)["args"][0] = "/models/llama-3-70b"; setarg(d, "--tensor-parallel-size", 5)
pod(d)["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
fx(R, "fires", "seed-scenario-b", "The seed's scenario B: Llama 3 70B (64 heads) with TP 5.", d)
d = base("Deployment"); vllm(d)["args"][0] = "/models/my-finetune"; setarg(d, "--tensor-parallel-size", 2)
fx(R, "fires", "cannot-check-unknown-model", "TP 2 on a model the rule cannot resolve: advisory 'cannot check'.", d)
d = base("Deployment"); setarg(d, "--tensor-parallel-size", 2)
fx(R, "passes", "tp2", "Llama 3.1 8B (32 heads, 8 KV heads) with TP 2.", d)
d = base("Deployment"); vllm(d)["args"][0] = "/models/my-finetune"
fx(R, "passes", "tp1-unknown-model", "TP 1 always divides: no model facts needed.", d)

R = "tensor-parallel-interconnect"
d = base("Deployment"); setarg(d, "--tensor-parallel-size", 2)
fx(R, "fires", "tp2-on-pcie", "TP 2 over RTX 4090s (PCIe only).", d)
fx(R, "passes", "multi-node-nvlink", "TP 8 over H100 SXM (NVLink).", base("LeaderWorkerSet", multi=True))
fx(R, "passes", "reference", "TP 1.", base("Deployment"))

R = "kv-cache-fits"
d = base("Deployment"); vllm(d)["args"][0] = "/models/llama-3.1-70b"
fx(R, "fires", "70b-on-one-4090", "70B weights (141 GB) on one 24 GB GPU: no memory for a KV cache.", d)
d = base("Deployment"); setarg(d, "--max-model-len", 131072); setarg(d, "--kv-cache-dtype", remove=True)
fx(R, "fires", "128k-context-bf16", "131,072-token context with a BF16 KV cache on a 24 GB GPU.", d)
d = base("Deployment"); del pod(d)["nodeSelector"]
fx(R, "fires", "cannot-check-unknown-gpu", "No GPU product selector: advisory 'cannot check'.", d)
fx(R, "passes", "reference", "8B, FP8 KV cache, 32K context on a 4090: ~101K tokens of cache.", base("Deployment"))
d = base("Deployment"); setarg(d, "--max-model-len", "32k")
fx(R, "passes", "human-readable-length", "--max-model-len=32k (vLLM's human-readable form).", d)
fx(R, "passes", "multi-node", "405B over 16 H100s.", base("LeaderWorkerSet", multi=True))

R = "kv-cache-concurrency"
d = base("Deployment"); setarg(d, "--max-num-seqs", 8)
fx(R, "fires", "eight-full-length", "8 sequences of 32K tokens; the cache holds about 3.", d)
fx(R, "passes", "reference", "3 sequences of 32K tokens fit.", base("Deployment"))
d = base("Deployment"); setarg(d, "--max-num-seqs", remove=True)
fx(R, "passes", "not-configured", "No --max-num-seqs: nothing configured to compare.", d)

R = "gpu-product-selector"
d = base("Deployment"); del pod(d)["nodeSelector"]
fx(R, "fires", "no-selector", "GPU pod without a GPU product selector.", d)
fx(R, "passes", "reference", "nodeSelector nvidia.com/gpu.product.", base("Deployment"))
d = base("Deployment"); del pod(d)["nodeSelector"]
pod(d)["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-GeForce-RTX-4090"]}]}]}}}
fx(R, "passes", "node-affinity", "Required node affinity on nvidia.com/gpu.product.", d)

R = "gpu-toleration"
d = base("Deployment"); del pod(d)["tolerations"]
fx(R, "fires", "no-toleration", "No toleration for the nvidia.com/gpu taint.", d)
fx(R, "passes", "reference", "Tolerates nvidia.com/gpu.", base("Deployment"))
d = base("Deployment"); pod(d)["tolerations"] = [{"operator": "Exists"}]
fx(R, "passes", "tolerate-all", "operator Exists without a key tolerates every taint.", d)

R = "model-volume-read-only"
d = base("Deployment"); del vllm(d)["volumeMounts"][0]["readOnly"]
fx(R, "fires", "writable", "The model volume is mounted writable.", d)
d = base("LeaderWorkerSet", multi=True); del worker(d)["containers"][0]["volumeMounts"][0]["readOnly"]
fx(R, "fires", "lws-worker-writable", "The LWS workers mount the model volume writable.", d)
fx(R, "passes", "reference", "readOnly: true.", base("Deployment"))
d = base("Deployment"); del vllm(d)["volumeMounts"][0]["readOnly"]; pod(d)["volumes"][0]["persistentVolumeClaim"]["readOnly"] = True
fx(R, "passes", "claim-read-only", "The PVC volume source is readOnly.", d)
d = base("Deployment"); vllm(d)["args"][0] = "meta-llama/Llama-3.1-8B-Instruct"; vllm(d)["volumeMounts"][0] = {"name": "models", "mountPath": "/root/.cache/huggingface"}
fx(R, "passes", "hub-cache", "A Hub id: the cache volume must stay writable, and is not the model path.", d)

R = "image-pinned"
d = base("Deployment"); vllm(d)["image"] = "vllm/vllm-openai:latest"
fx(R, "fires", "latest", ":latest.", d)
d = base("Job"); d[0]["spec"]["template"]["spec"]["containers"][0]["image"] = "ghcr.io/huggingface/huggingface-cli"
fx(R, "fires", "job-without-tag", "A hydration Job image without a tag.", d)
fx(R, "passes", "reference", "Version tags everywhere.", base("Deployment", "Job"))
d = base("Deployment"); vllm(d)["image"] = "vllm/vllm-openai@sha256:" + "a" * 64
fx(R, "passes", "digest", "Pinned by digest.", d)

R = "vllm-image-version"
d = base("Deployment"); vllm(d)["image"] = "vllm/vllm-openai:v0.6.3"
fx(R, "fires", "seed-image", "The seed's vllm/vllm-openai:v0.6.3.", d)
fx(R, "passes", "reference", "v0.33.0.", base("Deployment"))

R = "lws-restart-policy"
d = base("LeaderWorkerSet", multi=True); lws(d)["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "None"
fx(R, "fires", "none", "restartPolicy None: a restarted worker leaves the group hanging.", d)
fx(R, "passes", "reference", "RecreateGroupOnPodRestart.", base("LeaderWorkerSet", multi=True))
d = base("LeaderWorkerSet", multi=True); del lws(d)["spec"]["leaderWorkerTemplate"]["restartPolicy"]
fx(R, "passes", "default", "Not set: the default is RecreateGroupOnPodRestart.", d)

R = "no-privileged"
d = base("Deployment"); vllm(d)["securityContext"] = {"privileged": True}
fx(R, "fires", "privileged", "A privileged vLLM container.", d)
d = base("Deployment"); vllm(d)["securityContext"] = {"allowPrivilegeEscalation": True}
fx(R, "fires", "escalation", "allowPrivilegeEscalation: true.", d)
fx(R, "passes", "reference", "allowPrivilegeEscalation: false.", base("Deployment"))

R = "no-plaintext-secrets"
d = base("Deployment"); vllm(d)["env"] = [{"name": "VLLM_API_KEY", "value": "sk-123"}]
fx(R, "fires", "api-key-env-literal", "VLLM_API_KEY as a literal env value.", d)
d = base("Deployment"); setarg(d, "--api-key", "sk-123")
fx(R, "fires", "api-key-arg-literal", "--api-key=sk-123 in the arguments.", d)
d = base("Job"); d[0]["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": "hf_abc"}]
fx(R, "fires", "hf-token-literal", "HF_TOKEN as a literal in the hydration Job.", d)
fx(R, "passes", "reference", "Secrets from secretKeyRef.", base("Deployment", "Job"))
d = base("Deployment"); setarg(d, "--api-key", "$(VLLM_API_KEY)")
fx(R, "passes", "api-key-from-env", "--api-key=$(VLLM_API_KEY), the variable from a Secret.", d)

R = "removed-vllm-flags"
d = base("Deployment"); setarg(d, "--disable-graceful-shutdown")
fx(R, "fires", "disable-graceful-shutdown", "The seed-era --disable-graceful-shutdown.", d)
fx(R, "passes", "reference", "vLLM 0.33 flags only.", base("Deployment"))

R = "removed-vllm-metrics"
d = base("ScaledObject"); d[0]["spec"]["triggers"][0]["metadata"]["query"] = "avg(vllm:gpu_cache_usage_perc)"
fx(R, "fires", "keda-gpu-cache-usage", "KEDA on vllm:gpu_cache_usage_perc, gone in vLLM 0.33.", d)
d = base("PrometheusRule"); d[0]["spec"]["groups"][0]["rules"][0]["expr"] = "histogram_quantile(0.95, rate(vllm:time_per_output_token_seconds_bucket[5m])) > 0.1"
fx(R, "fires", "alert-tpot", "An alert on vllm:time_per_output_token_seconds.", d)
fx(R, "passes", "reference", "vllm:num_requests_waiting and vllm:kv_cache_usage_perc.", base("ScaledObject", "PrometheusRule"))

R = "no-cpu-autoscaling"
d = base("Deployment"); d.append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "vllm-llama3-8b", "namespace": "inference"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm-llama3-8b"}, "minReplicas": 1, "maxReplicas": 8,
             "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}})
fx(R, "fires", "hpa-cpu", "The seed's trap: an HPA at 50% CPU on a vLLM Deployment.", d)
d = base("Deployment", "ScaledObject"); next(x for x in d if x["kind"] == "ScaledObject")["spec"]["triggers"] = [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}]
fx(R, "fires", "keda-cpu", "A KEDA cpu trigger.", d)
fx(R, "passes", "reference", "KEDA on vllm:num_requests_waiting.", base("Deployment", "ScaledObject"))
d = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "inference"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}},
     {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "namespace": "inference"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 4, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}]
fx(R, "passes", "cpu-hpa-on-other-workload", "CPU autoscaling of a non-vLLM workload is not this pack's business.", d)

R = "autoscaler-cooldown"
def so(docs): return next(x for x in docs if x["kind"] == "ScaledObject")
d = base("Deployment", "ScaledObject"); so(d)["spec"].update(cooldownPeriod=60, idleReplicaCount=0)
fx(R, "fires", "short-cooldown", "Scales to zero when idle, cooldownPeriod 60 s < 120 s.", d)
d = base("Deployment", "ScaledObject"); so(d)["spec"].update(cooldownPeriod=130, minReplicaCount=0)
fx(R, "fires", "cooldown-below-grace", "minReplicaCount 0, cooldownPeriod 130 s < the target's 135 s grace period.", d)
d = base("Deployment", "ScaledObject"); so(d)["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}}
fx(R, "fires", "short-stabilization", "The HPA KEDA creates removes replicas after 30 s.", d)
fx(R, "passes", "reference", "cooldownPeriod 135 s = grace.", base("Deployment", "ScaledObject"))
d = base("Deployment", "ScaledObject"); del so(d)["spec"]["cooldownPeriod"]; so(d)["spec"]["idleReplicaCount"] = 0
fx(R, "passes", "keda-default", "Scales to zero with KEDA's default cooldownPeriod, 300 s.", d)
d = base("Deployment", "ScaledObject"); so(d)["spec"]["cooldownPeriod"] = 60
fx(R, "passes", "cooldown-ignored-above-zero", "minReplicaCount 1 and no idleReplicaCount: KEDA ignores cooldownPeriod (the HPA's window applies).", d)

R = "metrics-scraped"
fx(R, "fires", "no-monitor", "A vLLM Deployment and its Service, but nothing scrapes them.", base("Deployment", "Service"))
d = base("Deployment", "Service", "ServiceMonitor"); next(x for x in d if x["kind"] == "ServiceMonitor")["spec"]["selector"] = {"matchLabels": {"app": "other"}}
fx(R, "fires", "monitor-selects-nothing", "A ServiceMonitor whose selector matches no Service of the vLLM pods.", d)
fx(R, "passes", "reference", "ServiceMonitor -> Service -> pods.", base("Deployment", "Service", "ServiceMonitor"))
d = base("Deployment"); dep(d)["spec"]["template"]["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "prometheus.io/port": "8000", "prometheus.io/path": "/metrics"}
fx(R, "passes", "prometheus-annotations", "The seed's prometheus.io annotations on the pod template.", d)
fx(R, "passes", "multi-node-podmonitor", "A PodMonitor selecting the LWS leader.", base("LeaderWorkerSet", "PodMonitor", multi=True))

R = "api-key-when-exposed"
d = base("Deployment", "Service"); vllm(d)["env"] = []; next(x for x in d if x["kind"] == "Service")["spec"]["type"] = "LoadBalancer"
fx(R, "fires", "loadbalancer-without-key", "A LoadBalancer Service in front of vLLM without an API key.", d)
d = base("Deployment", "Service"); vllm(d)["env"] = []
d.append({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "vllm", "namespace": "inference"},
          "spec": {"rules": [{"host": "llm.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "vllm-llama3-8b", "port": {"number": 80}}}}]}}]}})
fx(R, "fires", "ingress-without-key", "An Ingress to the vLLM Service without an API key.", d)
d = base("Deployment", "Service"); vllm(d)["env"] = []
fx(R, "passes", "cluster-ip-only", "ClusterIP only: reachable inside the cluster (NetworkPolicy's job).", d)
fx(R, "passes", "multi-node-loadbalancer-with-key", "LoadBalancer in front of the LWS leader, VLLM_API_KEY from a Secret.", base(multi=True))
d = base("Deployment", "Service"); vllm(d)["env"] = []; setarg(d, "--api-key", "$(API_KEY)"); vllm(d)["env"] = [{"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "k"}}}]
next(x for x in d if x["kind"] == "Service")["spec"]["type"] = "NodePort"
fx(R, "passes", "api-key-flag-from-secret", "NodePort, --api-key=$(API_KEY) with API_KEY from a Secret.", d)

R = "lws-workers-outlive-drain"
d = base("LeaderWorkerSet", multi=True); del worker(d)["containers"][0]["lifecycle"]
fx(R, "fires", "workers-stop-at-once", "Workers without a preStop stop Ray as soon as the group is deleted.", d)
d = base("LeaderWorkerSet", multi=True); worker(d)["terminationGracePeriodSeconds"] = 100
fx(R, "fires", "worker-grace-below-sleep", "Worker grace 100 s ends before its 105 s preStop sleep.", d)
fx(R, "passes", "reference", "Workers sleep 105 s = leader preStop 15 + shutdown 90; grace 135 s.", base("LeaderWorkerSet", multi=True))
d = base("LeaderWorkerSet", multi=True); lws(d)["spec"]["leaderWorkerTemplate"]["size"] = 1
del worker(d)["containers"][0]["lifecycle"]
fx(R, "passes", "single-pod-group", "size 1: no workers to outlive anything.", d)

job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "offline-batch", "namespace": "inference"},
       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "batch", "image": "vllm/vllm-openai:v0.33.0",
                "command": ["vllm", "serve"], "args": ["/models/llama-3.1-8b"], "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
fx("shutdown-timeout", "passes", "batch-job", "A Job running vLLM is batch work: serving rules do not apply to it.", [job])
fx("readiness-probe", "passes", "batch-job", "A Job running vLLM is batch work: serving rules do not apply to it.", [job])
d = base("Deployment"); p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-debug", "namespace": "inference"}, "spec": copy.deepcopy(pod(d))}
del p["spec"]["containers"][0]["readinessProbe"]
fx("readiness-probe", "fires", "bare-pod", "A bare Pod running vLLM without a readinessProbe.", [p])
d = base("Deployment"); s = copy.deepcopy(dep(d)); s["kind"] = "StatefulSet"; del s["spec"]["strategy"]; s["spec"]["serviceName"] = "vllm"
s["spec"]["template"]["spec"]["containers"][0]["args"] = [a for a in s["spec"]["template"]["spec"]["containers"][0]["args"] if not a.startswith("--shutdown-timeout")]
fx("shutdown-timeout", "fires", "statefulset", "A StatefulSet running vLLM without --shutdown-timeout.", [s])

R = "probes-target-vllm-port"
d = base("Deployment"); vllm(d)["readinessProbe"]["httpGet"]["port"] = 8080
fx(R, "fires", "readiness-wrong-number", "readinessProbe on 8080, vLLM on 8000.", d)
d = base("Deployment"); vllm(d)["startupProbe"]["httpGet"]["port"] = "metrics"
fx(R, "fires", "startup-unknown-name", "startupProbe on a port name the container does not declare.", d)
d = base("Deployment"); setarg(d, "--port", 8080)
fx(R, "fires", "vllm-moved-port", "vLLM moved to --port=8080, probes still on 8000.", d)
fx(R, "passes", "reference", "Probes on 8000, vLLM's default port.", base("Deployment"))
d = base("Deployment")
for k in ("startupProbe", "readinessProbe", "livenessProbe"): vllm(d)[k]["httpGet"]["port"] = "http"
fx(R, "passes", "named-port", "Probes on the named containerPort http (8000).", d)

R = "service-targets-vllm-port"
d = base("Deployment", "Service"); next(x for x in d if x["kind"] == "Service")["spec"]["ports"][0]["targetPort"] = 8080
fx(R, "fires", "wrong-target-port", "The Service forwards to 8080; vLLM listens on 8000.", d)
d = base("Deployment", "Service"); next(x for x in d if x["kind"] == "Service")["spec"]["ports"][0]["targetPort"] = "api"
fx(R, "fires", "unknown-port-name", "targetPort names a port the vLLM container does not declare.", d)
fx(R, "passes", "reference", "targetPort 8000.", base("Deployment", "Service"))
d = base("Deployment", "Service"); next(x for x in d if x["kind"] == "Service")["spec"]["ports"] = [{"name": "http", "port": 8000}]
fx(R, "passes", "port-without-target", "No targetPort: it defaults to the port, 8000.", d)
fx(R, "passes", "multi-node", "A LoadBalancer in front of the LWS leader, targetPort 8000.", base("LeaderWorkerSet", "Service", multi=True))

R = "scrape-annotation-port"
d = base("LeaderWorkerSet", multi=True); worker(d).setdefault("metadata", {})
lws(d)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "prometheus.io/port": "8000"}
fx(R, "fires", "lws-workers-annotated", "LWS workers run only Ray, but are annotated for scraping on 8000.", d)
d = base("Deployment"); dep(d)["spec"]["template"]["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
fx(R, "fires", "wrong-port", "Annotated port 9090; vLLM serves /metrics on 8000.", d)
d = base("Deployment"); dep(d)["spec"]["template"]["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "prometheus.io/port": "8000", "prometheus.io/path": "/metrics"}
fx(R, "passes", "seed-annotations", "The seed's annotations: scrape on 8000, /metrics.", d)
fx(R, "passes", "no-annotations", "No prometheus.io annotations (a ServiceMonitor scrapes instead).", base("LeaderWorkerSet", multi=True))

R = "memory-limit-covers-shm"
d = base("Deployment"); vllm(d)["resources"]["limits"]["memory"] = "1Gi"
fx(R, "fires", "limit-equals-shm", "Memory limit 1Gi, /dev/shm sizeLimit 1Gi.", d)
d = base("Deployment"); vllm(d)["resources"]["limits"]["memory"] = "800Mi"
fx(R, "fires", "limit-below-shm", "Memory limit 800Mi under a 1Gi /dev/shm.", d)
fx(R, "passes", "reference", "No memory limit.", base("Deployment"))
d = base("Deployment"); vllm(d)["resources"]["limits"]["memory"] = "32Gi"
fx(R, "passes", "limit-above-shm", "Memory limit 32Gi over a 1Gi /dev/shm.", d)

R = "no-cpu-limit"
d = base("Deployment"); vllm(d)["resources"]["limits"]["cpu"] = "8"
fx(R, "fires", "cpu-limit", "The seed's CPU limit of 8 on the vLLM container.", d)
fx(R, "passes", "reference", "A CPU request, no limit.", base("Deployment"))

R = "pdb-allows-eviction"
pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "vllm-llama3-8b", "namespace": "inference"},
       "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "vllm-llama3-8b"}}}}
p0 = copy.deepcopy(pdb); p0["spec"]["maxUnavailable"] = 0
fx(R, "fires", "max-unavailable-zero", "maxUnavailable 0: no eviction ever.", base("Deployment") + [p0])
p1 = copy.deepcopy(pdb); del p1["spec"]["maxUnavailable"]; p1["spec"]["minAvailable"] = 1
fx(R, "fires", "min-available-all-replicas", "minAvailable 1 with 1 replica.", base("Deployment") + [p1])
fx(R, "passes", "max-unavailable-one", "maxUnavailable 1.", base("Deployment") + [copy.deepcopy(pdb)])
p2 = copy.deepcopy(pdb); p2["spec"]["maxUnavailable"] = 0; p2["spec"]["selector"] = {"matchLabels": {"app": "web"}}
fx(R, "passes", "other-pods", "A strict budget over other pods.", base("Deployment") + [p2])

R = "pdb-selects-scalable-pods"
from vllm_pulumi.components.manifests import build_manifests, load_stack  # noqa: E402
def rendered(stack, *kinds, old_selector=False):
    """Our own rendered objects; ``old_selector``: the budget as rendered before it selected only the serving pods."""
    docs = [d for d in build_manifests(load_stack(stack)) if d["kind"] in kinds]
    if old_selector:
        budget = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
        labels = budget["metadata"]["labels"]
        budget["spec"]["selector"] = {"matchLabels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}}
    return docs
fx(R, "fires", "old-rendered-selector", "What we rendered before: the budget over name + instance also selects the model's hydration Job, which keeps its Succeeded pod; the first eviction of the Deployment was refused in a simulated cluster.", rendered("local", "Deployment", "Job", "PodDisruptionBudget", old_selector=True))
fx(R, "fires", "old-rendered-selector-lws", "The same for a LeaderWorkerSet: name + instance also selects the hydration Job's pod.", rendered("multinode", "LeaderWorkerSet", "Job", "PodDisruptionBudget", old_selector=True))
fx(R, "passes", "rendered", "What we render now: the Deployment's own selector (component server); the hydration Job's pod is component model-store.", rendered("local", "Deployment", "Job", "PodDisruptionBudget"))
fx(R, "passes", "rendered-lws", "LeaderWorkerSet: leaderworkerset.sigs.k8s.io/name, which LWS sets on every pod of the set and on nothing else.", rendered("multinode", "LeaderWorkerSet", "Job", "PodDisruptionBudget"))
shared = {"app": "vllm-llama3-8b"}
def labelled(docs):
    job = next(d for d in docs if d["kind"] == "Job"); job["spec"]["template"]["metadata"] = {"labels": dict(shared)}; return docs
d = labelled(base("Deployment", "Job")) + [copy.deepcopy(pdb)]
fx(R, "fires", "job-max-unavailable", "maxUnavailable 1 over app: vllm-llama3-8b, which the model-download Job's pod carries too.", d)
cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "warm-cache", "namespace": "inference"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"metadata": {"labels": dict(shared)}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "warm", "image": "curlimages/curl:8.10.1", "args": ["-s", "http://vllm-llama3-8b/health"]}]}}}}}}
p3 = copy.deepcopy(pdb); del p3["spec"]["maxUnavailable"]; p3["spec"]["minAvailable"] = "50%"
fx(R, "fires", "cronjob-percent-min-available", "minAvailable 50% (a percentage needs scales too) over pods a CronJob's Jobs also create.", base("Deployment") + [cron, p3])
ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "model-prefetch", "namespace": "inference"},
      "spec": {"selector": {"matchLabels": {"app": "vllm-llama3-8b", "role": "prefetch"}}, "template": {"metadata": {"labels": {**shared, "role": "prefetch"}}, "spec": {
          "containers": [{"name": "prefetch", "image": "busybox:1.37.0", "command": ["sleep", "infinity"]}]}}}}
fx(R, "fires", "daemonset", "A DaemonSet's pods share the label: a DaemonSet has no scale.", base("Deployment") + [ds, copy.deepcopy(pdb)])
bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug", "namespace": "inference", "labels": dict(shared)},
        "spec": {"containers": [{"name": "debug", "image": "busybox:1.37.0", "command": ["sleep", "3600"]}]}}
fx(R, "fires", "bare-pod", "A bare debug Pod with the serving label: it has no controller, so the budget's count is wrong.", base("Deployment") + [bare, copy.deepcopy(pdb)])
p4 = copy.deepcopy(pdb); del p4["spec"]["maxUnavailable"]; p4["spec"]["minAvailable"] = 1
d = labelled(base("Deployment", "Job")) + [p4]; dep(d)["spec"]["replicas"] = 2
fx(R, "passes", "integer-min-available", "An integer minAvailable counts the selected pods and needs no scale: the Job's pod does no harm.", d)
fx(R, "passes", "job-not-selected", "The model-download Job's pod lacks the budget's label.", base("Deployment", "Job") + [copy.deepcopy(pdb)])
p5 = copy.deepcopy(pdb); p5["spec"]["selector"] = {"matchLabels": {"app": "batch"}}
job = copy.deepcopy(next(d for d in ref1 if d["kind"] == "Job")); job["spec"]["template"]["metadata"] = {"labels": {"app": "batch"}}
fx(R, "passes", "no-vllm-pods", "A budget over batch Jobs only selects no vLLM pod: not this pack's business.", base("Deployment") + [job, p5])

d = base("Deployment"); vllm(d)["image"] = "registry.example.com/team/vllm-server:0.4.1"
fx("vllm-image-version", "passes", "own-image-tag", "An in-house image whose tag is its own release number, not vLLM's.", d)

R = "network-policy-admits-prometheus"
np_ = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "vllm-llama3-8b", "namespace": "inference"},
       "spec": {"podSelector": {"matchLabels": {"app": "vllm-llama3-8b"}}, "policyTypes": ["Ingress"], "ingress": [
           {"from": [{"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["apps"]}]}}],
            "ports": [{"protocol": "TCP", "port": 8000}]}]}}
fx(R, "fires", "clients-only", "Only the apps namespace may reach vLLM: Prometheus in monitoring is cut off.", base("Deployment") + [copy.deepcopy(np_)])
n2 = copy.deepcopy(np_); n2["spec"]["ingress"].append({"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}], "ports": [{"port": 9090}]})
fx(R, "fires", "monitoring-wrong-port", "monitoring is admitted, but only to port 9090; /metrics is on 8000.", base("Deployment") + [n2])
n3 = copy.deepcopy(np_); n3["spec"]["ingress"].append({"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}], "ports": [{"port": "http"}]})
fx(R, "passes", "monitoring-admitted", "A second ingress rule admits the monitoring namespace to the named port http (8000).", base("Deployment") + [n3])
fx(R, "passes", "no-network-policy", "No NetworkPolicy: nothing isolates the pods.", base("Deployment"))
n4 = copy.deepcopy(np_); n4["spec"]["ingress"] = [{"from": [{"namespaceSelector": {}}]}]
fx(R, "passes", "all-namespaces", "An empty namespaceSelector admits every namespace.", base("Deployment") + [n4])

# ---- GPU node pools (issue 10): the karpenter reference stack's own NodePool and Deployment, then one change
def kp(*kinds): return rendered("karpenter", *kinds)
def nodepool(docs): return next(d for d in docs if d["kind"] == "NodePool")
def kpod(docs): return dep(docs)["spec"]["template"]["spec"]

R = "gpu-pod-matches-a-node-pool"
d = kp("NodePool", "Deployment"); kpod(d)["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}; del kpod(d)["affinity"]
fx(R, "fires", "gfd-product-selector-on-karpenter", "The node group habit on a Karpenter pool: GFD's nvidia.com/gpu.product exists only on a running node, so no NodePool can launch one and the pod stays Pending.", d)
d = kp("NodePool", "Deployment"); kpod(d)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["a10g"]
fx(R, "fires", "gpu-the-pool-does-not-have", "The pod asks for A10G nodes; the NodePool requires h100 or h200.", d)
d = kp("NodePool", "Deployment"); kpod(d)["nodeSelector"] = {"vllm-pulumi.dev/node-pool": "p4d"}
fx(R, "fires", "another-pools-label", "The pod selects pool p4d; the only NodePool's template says p5.", d)
mng = {"apiVersion": "vllm-pulumi.dev/v1", "kind": "ManagedNodeGroup", "metadata": {"name": "ml-prod-l4"}, "spec": {"labels": {"vllm-pulumi.dev/node-pool": "l4", "nvidia.com/gpu.product": "NVIDIA-L4", "node.kubernetes.io/instance-type": "g6.4xlarge"}}}
fx(R, "fires", "node-group-of-another-gpu", "The policy pack's stand-in for an EKS managed node group of L4 nodes; the pod wants an RTX 4090.", base("Deployment") + [copy.deepcopy(mng)])
fx(R, "passes", "rendered", "What the karpenter stack renders: pool label of the NodePool template, instance-gpu-name In [h100, h200].", kp("NodePool", "Deployment"))
d = kp("NodePool", "Deployment"); kpod(d)["nodeSelector"]["topology.kubernetes.io/zone"] = "us-east-1a"
fx(R, "passes", "well-known-zone", "A zone the NodePool does not constrain: a well-known label, Karpenter picks a node in that zone.", d)
d = kp("NodePool", "Deployment"); kpod(d)["nodeSelector"] = {"karpenter.sh/nodepool": "p5"}
fx(R, "passes", "karpenter-nodepool-label", "karpenter.sh/nodepool set to the NodePool's name.", d)
fx(R, "passes", "no-pools-declared", "The reference Deployment alone: the stack declares no pool to compare against.", base("Deployment"))
d = base("Deployment") + [copy.deepcopy(mng)]; d[-1]["spec"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-GeForce-RTX-4090"
fx(R, "passes", "node-group-with-the-gpu", "A managed node group whose nodes carry the GPU product the pod selects.", d)

R = "gpu-nodepool-consolidation"
d = kp("NodePool", "Deployment"); nodepool(d)["spec"]["disruption"]["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
fx(R, "fires", "when-underutilized", "WhenEmptyOrUnderutilized: Karpenter may delete a GPU node to repack its vLLM pods.", d)
d = kp("NodePool", "Deployment"); del nodepool(d)["spec"]["disruption"]
fx(R, "fires", "default-policy", "No disruption block: Karpenter's default policy is WhenEmptyOrUnderutilized.", d)
d = kp("NodePool", "Deployment"); nodepool(d)["spec"]["disruption"]["consolidateAfter"] = "1m"
fx(R, "fires", "consolidate-after-shorter-than-load", "consolidateAfter 1m, but Llama 3.3 70B needs 392 s to load from FSx for Lustre.", d)
fx(R, "passes", "rendered", "What the karpenter stack renders: WhenEmpty after the 392 s startup budget.", kp("NodePool", "Deployment"))
d = kp("NodePool", "Deployment"); nodepool(d)["spec"]["disruption"]["consolidateAfter"] = "Never"
fx(R, "passes", "never", "consolidateAfter Never: empty GPU nodes are kept.", d)
d = kp("NodePool"); np_cpu = nodepool(d); np_cpu["metadata"]["name"] = "general"; np_cpu["spec"] = {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "general"}, "requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m", "c"]}]}}, "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}}
fx(R, "passes", "cpu-nodepool", "A NodePool for CPU workloads: repacking is what it is for.", d)

for (rule, kind, name), (desc, docs) in out.items():
    path = ROOT / rule / kind / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "---\n".join(yaml.safe_dump(doc, sort_keys=False, width=120) for doc in docs)
    path.write_text(f"# {desc}\n" + body)
print(len(out), "fixtures")
