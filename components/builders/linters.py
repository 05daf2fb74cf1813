"""Exemptions for the linters platform teams run over manifests, in the form each linter reads.

kube-score (github.com/zegl/kube-score) skips a check on an object whose ``kube-score/ignore`` annotation lists the
check's id (comma-separated; for pod checks the workload's own metadata counts), optional checks a platform enables
included. Every id here is a finding that
stays on purpose; docs/linters.md gives the reason at length, and tests/policies/test_kube_score.py fails on any
finding that is neither fixed nor listed there. Findings that were right to fix are fixed in the builders instead
(ephemeral-storage requests and limits, distinct readiness and liveness probes).
"""

from __future__ import annotations

from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.vocabulary import KUBE_SCORE_IGNORE_ANNOTATION

# Why each stays, in one line (docs/linters.md has the long form).
KUBE_SCORE_REASONS: dict[str, str] = {
    "container-resources": "CPU limits throttle vLLM's scheduler loop; memory limits are set where the spec sets them",
    # Optional checks (off unless a platform enables them): Guaranteed QoS needs CPU limits, see container-resources.
    "container-resource-requests-equal-limits": "no CPU limit (throttling), so requests cannot equal limits",
    "container-cpu-requests-equal-limits": "no CPU limit (throttling), so requests cannot equal limits",
    "container-memory-requests-equal-limits": "a memory limit only where the spec sets one",
    "container-image-pull-policy": "images are pinned release tags; IfNotPresent starts pods from pre-pulled ~20 GB "
                                   "images without a registry round trip",
    "container-security-context-user-group-id": "the upstream images run as root (Ray, site-packages); every "
                                                "capability is dropped instead",
    "container-security-context-readonlyrootfilesystem": "libraries still write outside the redirected caches; "
                                                         "the writable layer is bounded by ephemeral-storage",
    "pod-networkpolicy": "ingress is covered; egress destinations (DNS, hub, S3, proxies) are the cluster's, and a "
                         "NetworkPolicy cannot name hosts",
    "deployment-replicas": "a replica is whole GPUs; the count is the capacity plan's or the autoscaler's",
    "deployment-has-host-podantiaffinity": "GPU requests already bound pods per node; anti-affinity would forbid "
                                           "packing small replicas on multi-GPU nodes",
    "service-targets-pod": "the Service selects LeaderWorkerSet leader pods, a kind kube-score does not read",
}

# Pod checks that stay on every pod this package renders (serving pods and the hydration Job alike).
_POD_CHECKS = ("container-image-pull-policy", "container-security-context-user-group-id",
               "container-security-context-readonlyrootfilesystem")
# The hydration Job has a memory limit above its request and no CPU limit (storage.py).
_HYDRATION_RESOURCE_CHECKS = ("container-resources", "container-resource-requests-equal-limits",
                              "container-cpu-requests-equal-limits", "container-memory-requests-equal-limits")
_DEPLOYMENT_CHECKS = ("deployment-replicas", "deployment-has-host-podantiaffinity")


def _annotation(checks: list[str]) -> dict[str, str]:
    return {KUBE_SCORE_IGNORE_ANNOTATION: ",".join(checks)} if checks else {}


def _network_checks(plan: ServingPlan) -> list[str]:
    # Only where the stack renders the ingress NetworkPolicy: without it kube-score's ingress finding is right.
    return ["pod-networkpolicy"] if plan.spec.network.network_policy else []


def _serving_resource_checks(plan: ServingPlan) -> list[str]:
    """Only what the stack's limits leave open: a stack that sets both limits to the requests exempts nothing."""
    checks = []
    if plan.cpu_limit is None or plan.memory_limit_gib is None:
        checks.append("container-resources")
    cpu_equal = plan.cpu_limit == plan.cpu_request
    memory_equal = plan.memory_limit_gib == plan.memory_request_gib
    if not (cpu_equal and memory_equal):
        checks.append("container-resource-requests-equal-limits")
    if not cpu_equal:
        checks.append("container-cpu-requests-equal-limits")
    if not memory_equal:
        checks.append("container-memory-requests-equal-limits")
    return checks


def workload_exemptions(plan: ServingPlan) -> dict[str, str]:
    """The serving Deployment's or LeaderWorkerSet's annotation (kube-score reads no LeaderWorkerSet today; the
    annotation says the same for a linter that does)."""
    return _annotation(_serving_resource_checks(plan) + list(_POD_CHECKS) + _network_checks(plan)
                       + ([] if plan.multi_node else list(_DEPLOYMENT_CHECKS)))


def hydration_exemptions(plan: ServingPlan) -> dict[str, str]:
    return _annotation(list(_HYDRATION_RESOURCE_CHECKS) + list(_POD_CHECKS) + _network_checks(plan))


def service_exemptions(plan: ServingPlan) -> dict[str, str]:
    return _annotation(["service-targets-pod"] if plan.multi_node else [])
