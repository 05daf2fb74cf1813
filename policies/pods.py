"""Pod templates and containers as a manifest writes them: where each kind keeps its pod specs (Kubernetes workloads,
LeaderWorkerSet, KubeRay, KServe), and what a container says about GPUs, probes, drain, env and its image."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.policies.kinds import KSERVE_KINDS, RAY_KINDS
from vllm_pulumi.policies.values import as_int, mapping, sequence, string_map, strings
from vllm_pulumi.runtime.vocabulary import GPU_RESOURCE

_SLEEP = re.compile(r"\bsleep\s+(\d+)")
_SECRET_ENV = re.compile(r"(^|_)(API_KEY|TOKEN|SECRET|PASSWORD|SECRET_ACCESS_KEY)$")


class HasMetadata:
    """Labels and annotations of anything with a ``metadata`` mapping (an object or a pod template)."""

    metadata: dict[str, Any]

    @property
    def labels(self) -> dict[str, str]:
        return string_map(self.metadata.get("labels"))

    @property
    def annotations(self) -> dict[str, str]:
        return string_map(self.metadata.get("annotations"))


# ---- pod templates --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PodTemplate(HasMetadata):
    role: str
    """``pod`` for single-template kinds; ``leader`` / ``worker`` for a LeaderWorkerSet."""
    path: str
    """Where the pod spec sits in the manifest, for messages."""
    metadata: dict[str, Any]
    spec: dict[str, Any]

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [c for c in sequence(self.spec.get("containers")) if isinstance(c, dict)]

    @property
    def init_containers(self) -> list[dict[str, Any]]:
        return [c for c in sequence(self.spec.get("initContainers")) if isinstance(c, dict)]

    @property
    def all_containers(self) -> list[dict[str, Any]]:
        """Init containers, then containers: what rules about every container of the pod read."""
        return self.init_containers + self.containers

    @property
    def grace_seconds(self) -> int:
        value = as_int(self.spec.get("terminationGracePeriodSeconds"))
        return 30 if value is None else value  # the Kubernetes default

    @property
    def gpus(self) -> int:
        return sum(gpu_limit(c) or 0 for c in self.containers)

    def volume(self, name: str) -> dict[str, Any] | None:
        for volume in sequence(self.spec.get("volumes")):
            if isinstance(volume, dict) and volume.get("name") == name:
                return volume
        return None


def pod_templates(obj: dict[str, Any]) -> list[PodTemplate]:
    kind = obj.get("kind")
    spec = mapping(obj.get("spec"))
    if kind == "Pod":
        return [PodTemplate("pod", "spec", mapping(obj.get("metadata")), spec)]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        template = mapping(spec.get("template"))
        return [PodTemplate("pod", "spec.template.spec", mapping(template.get("metadata")),
                            mapping(template.get("spec")))]
    if kind == "CronJob":
        template = mapping(mapping(mapping(spec.get("jobTemplate")).get("spec")).get("template"))
        return [PodTemplate("pod", "spec.jobTemplate.spec.template.spec", mapping(template.get("metadata")),
                            mapping(template.get("spec")))]
    if kind == "LeaderWorkerSet":
        lwt = mapping(spec.get("leaderWorkerTemplate"))
        templates = []
        base = "spec.leaderWorkerTemplate"
        if isinstance(lwt.get("leaderTemplate"), dict):
            leader = lwt["leaderTemplate"]
            templates.append(PodTemplate("leader", f"{base}.leaderTemplate.spec", mapping(leader.get("metadata")),
                                         mapping(leader.get("spec"))))
        worker = mapping(lwt.get("workerTemplate"))
        templates.append(PodTemplate("worker", f"{base}.workerTemplate.spec", mapping(worker.get("metadata")),
                                     mapping(worker.get("spec"))))
        return templates
    if kind in RAY_KINDS:
        return _ray_templates(kind, spec)
    if kind in KSERVE_KINDS:
        return _kserve_templates(kind, spec)
    return []


def _template_at(role: str, path: str, template: object) -> PodTemplate | None:
    """A ``{metadata, spec}`` pod template found at ``path``, or None when absent."""
    if not isinstance(template, dict):
        return None
    return PodTemplate(role, f"{path}.spec", mapping(template.get("metadata")), mapping(template.get("spec")))


def _ray_templates(kind: str, spec: dict[str, Any]) -> list[PodTemplate]:
    """KubeRay: the head group and each worker group (RayService nests the cluster under rayClusterConfig, RayJob
    under rayClusterSpec)."""
    base = {"RayService": "spec.rayClusterConfig", "RayJob": "spec.rayClusterSpec"}.get(kind, "spec")
    cluster = {"RayService": mapping(spec.get("rayClusterConfig")),
               "RayJob": mapping(spec.get("rayClusterSpec"))}.get(kind, spec)
    templates = []
    head = _template_at("head", f"{base}.headGroupSpec.template",
                        mapping(cluster.get("headGroupSpec")).get("template"))
    if head is not None:
        templates.append(head)
    for i, group in enumerate(sequence(cluster.get("workerGroupSpecs"))):
        worker = _template_at("worker", f"{base}.workerGroupSpecs[{i}].template", mapping(group).get("template"))
        if worker is not None:
            templates.append(worker)
    return templates


def _kserve_templates(kind: str, spec: dict[str, Any]) -> list[PodTemplate]:
    """KServe: an InferenceService predictor (a pod spec inline, its ``model`` a container the ServingRuntime
    completes, ``workerSpec`` for multi-node), a (Cluster)ServingRuntime's inline pod spec, an LLMInferenceService's
    decode/prefill ``template`` and ``worker`` pod specs."""
    templates: list[PodTemplate] = []
    if kind == "InferenceService":
        predictor = mapping(spec.get("predictor"))
        pod = dict(predictor)
        if isinstance(predictor.get("model"), dict):
            model = {"name": "kserve-container", **predictor["model"]}
            pod["containers"] = [model, *sequence(predictor.get("containers"))]
        if pod:
            templates.append(PodTemplate("pod", "spec.predictor", {}, pod))
        if isinstance(predictor.get("workerSpec"), dict):
            templates.append(PodTemplate("worker", "spec.predictor.workerSpec", {}, predictor["workerSpec"]))
    elif kind in ("ServingRuntime", "ClusterServingRuntime"):
        templates.append(PodTemplate("pod", "spec", {}, spec))
        if isinstance(spec.get("workerSpec"), dict):
            templates.append(PodTemplate("worker", "spec.workerSpec", {}, spec["workerSpec"]))
    else:  # LLMInferenceService
        for role, base, part in (("pod", "spec", spec), ("prefill", "spec.prefill", mapping(spec.get("prefill")))):
            if isinstance(part.get("template"), dict):
                templates.append(PodTemplate(role, f"{base}.template", {}, part["template"]))
            if isinstance(part.get("worker"), dict):
                templates.append(PodTemplate("worker" if role == "pod" else "prefill-worker", f"{base}.worker", {},
                                             part["worker"]))
    return templates


def gpu_limit(container: dict[str, Any]) -> int | None:
    resources = mapping(container.get("resources"))
    return as_int(mapping(resources.get("limits")).get(GPU_RESOURCE))


def gpu_request(container: dict[str, Any]) -> int | None:
    resources = mapping(container.get("resources"))
    return as_int(mapping(resources.get("requests")).get(GPU_RESOURCE))


def probe_timing(probe: dict[str, Any]) -> tuple[int, int, int]:
    """(initialDelaySeconds, periodSeconds, failureThreshold) as Kubernetes runs the probe: an unset (or zero) field
    takes its default, 0, 10 and 3."""
    return (as_int(probe.get("initialDelaySeconds")) or 0, as_int(probe.get("periodSeconds")) or 10,
            as_int(probe.get("failureThreshold")) or 3)


def probe_window_seconds(probe: dict[str, Any]) -> int:
    """How long a probe keeps failing before it acts: initial delay + period x failure threshold."""
    delay, period, threshold = probe_timing(probe)
    return delay + period * threshold


def pre_stop_seconds(container: dict[str, Any]) -> int | None:
    """Seconds the preStop hook sleeps: a sleep action or an exec ``sleep N``; 0 without a hook, None if unknown."""
    pre_stop = mapping(mapping(container.get("lifecycle")).get("preStop"))
    if not pre_stop:
        return 0
    if "sleep" in pre_stop:
        return as_int(mapping(pre_stop["sleep"]).get("seconds"))
    command = strings(mapping(pre_stop.get("exec")).get("command"))
    if command:
        match = _SLEEP.search(" ".join(command))
        if match:
            return int(match.group(1))
        if command[0].rsplit("/", 1)[-1] == "sleep" and len(command) > 1:
            return as_int(command[1])
    return None


def env_by_name(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The container's env entries by name (a repeated name keeps its last entry)."""
    return {str(e.get("name")): e for e in sequence(container.get("env")) if isinstance(e, dict)}


def is_secret_like_env(name: str) -> bool:
    return bool(_SECRET_ENV.search(name.upper()))


def image_tag(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = image.rsplit(":", 1)
        return repository, tag, digest
    return image, None, digest


def container_port(container: dict[str, Any], port: object) -> int | None:
    """The port number a probe or Service port means: a number, or the name of one of the container's ports."""
    number = as_int(port)
    if number is not None:
        return number
    for item in sequence(container.get("ports")):
        item = mapping(item)
        if item.get("name") == port:
            return as_int(item.get("containerPort"))
    return None


def env_from_secret(container: dict[str, Any], name: str) -> bool | None:
    """True when env ``name`` comes from a Secret, False when it is literal, None when absent."""
    env = env_by_name(container).get(name)
    if env is None:
        if any(mapping(item).get("secretRef") for item in sequence(container.get("envFrom"))):
            return True  # the Secret's keys are not visible here; assume it carries the variable
        return None
    if "valueFrom" in env:
        return bool(mapping(mapping(env.get("valueFrom")).get("secretKeyRef")))
    return False
