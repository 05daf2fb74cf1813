"""Facts about one Kubernetes object, read from its camelCase manifest: pod templates, the vLLM server container and
its flags, the model, the GPU, probes and drain settings.

Everything here is pure and tolerant: manifests written by others may lack any field, so each fact is optional and a
rule that needs a missing fact says "cannot check" instead of guessing. A ``Resource`` caches what it has worked out,
since two dozen rules ask it the same questions.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.models import ModelFacts, catalog_id_for, catalog_model, parse_config

from .gpu_labels import LABELS as GPU_LABELS
from . import model_configs
from .gpu_labels import gpu_pins, pinned_gpu
from .versions import ImageVersion, image_version

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
LWS_API_GROUP = "leaderworkerset.x-k8s.io"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

RAY_KINDS = frozenset({"RayService", "RayCluster", "RayJob"})
KSERVE_KINDS = frozenset({"InferenceService", "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService"})
# Kinds that carry pod templates, and where (pod_templates reads each).
POD_KINDS = frozenset({"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob",
                       "LeaderWorkerSet"}) | RAY_KINDS | KSERVE_KINDS
# Kinds that serve traffic for a long time; a Job (or RayJob) runs a vLLM image only for batch work, so serving rules
# skip it.
SERVING_KINDS = frozenset({"Pod", "Deployment", "StatefulSet", "LeaderWorkerSet", "RayService", "RayCluster",
                           "InferenceService", "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService"})
# Kinds whose controller writes the serving command, probes and drain settings into the pods from its own config
# (KServe's LLMInferenceServiceConfig / ServingRuntime): the manifest shows only part of the container.
CONTROLLER_FILLED_KINDS = frozenset({"LLMInferenceService"})
# Kinds that never hold a container, so an unknown-kind scan need not look at them even when they mention vLLM.
NON_WORKLOAD_KINDS = frozenset({
    "Secret", "ConfigMap", "Service", "ServiceAccount", "PersistentVolumeClaim", "PersistentVolume", "Namespace",
    "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy", "PodDisruptionBudget",
    "HorizontalPodAutoscaler", "Ingress", "IngressClass", "StorageClass", "PriorityClass", "CustomResourceDefinition",
    "ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject", "ScaledJob", "TriggerAuthentication",
    "ClusterTriggerAuthentication", "HTTPRoute", "GRPCRoute", "Gateway", "GatewayClass", "ReferenceGrant",
    "InferencePool", "InferenceModel", "InferenceObjective", "NodePool", "EC2NodeClass", "NodeClaim",
    "ResourceQuota", "LimitRange", "Endpoints", "EndpointSlice", "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration", "APIService", "Certificate", "Issuer", "ClusterIssuer", "VerticalPodAutoscaler",
    "LLMInferenceServiceConfig", "List",
})

# Short aliases vLLM's parser accepts for long flags.
_FLAG_ALIASES = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size",
                 "-q": "quantization"}
# Flags that take no value; everything else named --enable-/--disable-/--no- is boolean too.
_BOOLEAN_FLAGS = frozenset({"trust-remote-code", "enforce-eager", "use-v2-block-manager", "worker-use-ray",
                            "engine-use-ray", "headless", "async-scheduling", "skip-tokenizer-init"})
_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_SLEEP = re.compile(r"\bsleep\s+(\d+)")
_SECRET_ENV = re.compile(r"(^|_)(API_KEY|TOKEN|SECRET|PASSWORD|SECRET_ACCESS_KEY)$")


def as_int(value: object) -> int | None:
    """An integer from a manifest value (ints, numeric strings); None for anything else (``$(VAR)``, ``25%``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_QUANTITY = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?\s*")
_QUANTITY_SCALE = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                   "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def parse_quantity(value: object) -> float | None:
    """A Kubernetes resource quantity (``16Gi``, ``500m``, ``1e3``, ``4``) as a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value)
    if not match:
        return None
    number, exponent, suffix = match.groups()
    return float(number) * 10.0 ** int(exponent or 0) * _QUANTITY_SCALE[suffix]


def mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def string_map(value: object) -> dict[str, str]:
    """Labels or annotations as written, every key and value a string (YAML may hold numbers or booleans)."""
    return {str(k): str(v) for k, v in mapping(value).items()}


def sequence(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def strings(value: object) -> list[str]:
    return [str(item) for item in sequence(value)]


# ---- the vLLM command line ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServeCommand:
    """The ``vllm serve`` (or api_server module) invocation of a container, as tokens after the entry point."""

    entry: str
    """``vllm serve``, ``api_server`` or ``image`` (the vllm-openai image's own ``vllm serve`` entrypoint)."""
    tokens: tuple[str, ...]
    flags: dict[str, str | None]
    """Flag name without dashes -> value (None for a boolean flag); the last occurrence wins, as in argparse."""
    flag_names: tuple[str, ...]
    """Every flag as written (normalised), in order, repeats included."""
    positional: tuple[str, ...]
    in_shell: bool

    @property
    def model_ref(self) -> str | None:
        if self.flags.get("model"):
            return self.flags["model"]
        if self.entry != "api_server" and self.positional:
            return self.positional[0]
        return None

    def has(self, name: str) -> bool:
        return name in self.flags

    def value(self, name: str) -> str | None:
        return self.flags.get(name)

    def int_flag(self, name: str, default: int) -> int | None:
        """The flag's integer value, ``default`` when absent, None when present but not a literal integer."""
        if name not in self.flags:
            return default
        return as_int(self.flags[name])


def _is_boolean(name: str) -> bool:
    return name in _BOOLEAN_FLAGS or name.startswith(("enable-", "disable-", "no-"))


def parse_flags(tokens: list[str]) -> tuple[dict[str, str | None], list[str], list[str]]:
    flags: dict[str, str | None] = {}
    names: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        head = token.split("=", 1)[0]
        if token.startswith("--") or head in _FLAG_ALIASES:
            value: str | None = token.split("=", 1)[1] if "=" in token else None
            name = _FLAG_ALIASES.get(head) or head.lstrip("-").replace("_", "-")
            if value is None and not _is_boolean(name) and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value = tokens[i + 1]
                i += 1
            flags[name] = value
            names.append(name)
        else:
            positional.append(token)
        i += 1
    return flags, names, positional


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def _after_entry(tokens: list[str]) -> tuple[str, list[str]] | None:
    for i, token in enumerate(tokens):
        if token == _API_SERVER_MODULE:
            return "api_server", tokens[i + 1:]
        if (token == "vllm" or token.endswith("/vllm")) and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return "vllm serve", tokens[i + 2:]
    return None


def _script_segment(script: str) -> list[str] | None:
    """The tokens of the ``vllm serve`` command inside a shell script (LWS leaders start Ray first)."""
    text = script.replace("\\\n", " ")
    for line in text.splitlines():
        for segment in re.split(r"&&|\|\||;|\|", line):
            if "vllm" in segment and ("serve" in segment or _API_SERVER_MODULE in segment):
                tokens = _split(segment)
                if _after_entry(tokens):
                    return tokens
    return None


def is_vllm_image(image: object) -> bool:
    return isinstance(image, str) and "vllm" in image.lower()


def mentions_vllm(value: object) -> bool:
    """Whether any string inside ``value`` (a manifest subtree) names vLLM."""
    if isinstance(value, str):
        return "vllm" in value.lower()
    if isinstance(value, dict):
        return any(mentions_vllm(v) for v in value.values())
    if isinstance(value, list):
        return any(mentions_vllm(v) for v in value)
    return False


def vllm_containers(value: object, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, container) of every container-shaped mapping (``image`` or ``command``/``args``) that runs vLLM,
    anywhere inside an object: how an unknown kind is searched."""
    if isinstance(value, dict):
        image = value.get("image")
        if ("image" in value or "command" in value or "args" in value) and (
                is_vllm_image(image) or (isinstance(image, dict) and mentions_vllm(image))
                or mentions_vllm(value.get("command")) or mentions_vllm(value.get("args"))):
            yield path, value
            return
        engine = next((str(k) for k in value if "vllm" in str(k).lower()), None)
        if engine is not None:  # an operator's own schema for vLLM settings (production-stack's vllmConfig)
            yield f"{path}.{engine}" if path else engine, value
            return
        for key, item in value.items():
            yield from vllm_containers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from vllm_containers(item, f"{path}[{i}]")


_ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, env: dict[str, str]) -> str:
    if "$(" not in text:
        return text
    return _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def serve_command(container: dict[str, Any]) -> ServeCommand | None:
    """The container's vLLM server invocation, or None when it does not run one."""
    env = {str(e.get("name")): str(e["value"]) for e in sequence(container.get("env"))
           if isinstance(e, dict) and isinstance(e.get("value"), (str, int, float)) and not isinstance(e.get("value"), bool)}
    # The kubelet expands $(NAME) in command and args from the container's env; literal values are expanded here too.
    command = [_expand(a, env) for a in strings(container.get("command"))]
    args = [_expand(a, env) for a in strings(container.get("args"))]
    argv = command + args
    in_shell = False
    tokens: list[str] | None = None
    if argv and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        in_shell = True
        option = next((i for i, a in enumerate(argv[1:], 1) if re.fullmatch(r"-[a-z]*c[a-z]*", a)), None)
        if option is not None and option + 1 < len(argv):
            tokens = _script_segment(argv[option + 1])
            # `bash -c 'exec vllm serve "$@"' NAME ARGS...`: the script's "$@" is the arguments after $0
            params = argv[option + 3:]
            if tokens is not None:
                tokens = [p for t in tokens for p in (params if t in ("$@", "$*") else [t])]
    else:
        tokens = argv
    found = _after_entry(tokens) if tokens is not None else None
    if found is not None:
        entry, rest = found
    elif not command and not in_shell and is_vllm_image(container.get("image")):
        # Some published examples repeat the subcommand in args (`args: [serve, MODEL, ...]`): the model is what
        # follows it, not a model called "serve".
        entry, rest = "image", args[1:] if args[:1] == ["serve"] else args
    else:
        return None
    flags, names, positional = parse_flags(rest)
    return ServeCommand(entry, tuple(rest), flags, tuple(names), tuple(positional), in_shell)


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


def _huggingface_runtime(spec: dict[str, Any]) -> bool:
    """An InferenceService on KServe's Hugging Face runtime, which serves generative models with vLLM unless told
    ``--backend=huggingface``."""
    model = mapping(mapping(spec.get("predictor")).get("model"))
    if str(mapping(model.get("modelFormat")).get("name", "")).lower() != "huggingface":
        return False
    args = " ".join(strings(model.get("args")))
    return "--backend=huggingface" not in args and "--backend huggingface" not in args


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


def probe_window_seconds(probe: dict[str, Any]) -> int:
    """How long a probe keeps failing before it acts: initial delay + period x failure threshold."""
    delay = as_int(probe.get("initialDelaySeconds")) or 0
    period = as_int(probe.get("periodSeconds")) or 10
    threshold = as_int(probe.get("failureThreshold")) or 3
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


def secret_env_names(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
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


# ---- model and GPU --------------------------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _catalog_facts(catalog_id: str) -> ModelFacts:
    return catalog_model(catalog_id)


def model_from_reference(reference: str) -> ModelFacts | None:
    """A catalog model from a catalog id, a Hugging Face id, or a path whose last one or two parts are one."""
    parts = [p for p in reference.rstrip("/").split("/") if p]
    candidates = [reference, "/".join(parts[-2:]), parts[-1] if parts else ""]
    for candidate in candidates:
        catalog_id = catalog_id_for(candidate) if candidate else None
        if catalog_id:
            return _catalog_facts(catalog_id)
    return None


@lru_cache(maxsize=256)
def _model_from_config_json(text: str, name: str) -> ModelFacts | PlanningError:
    try:
        return parse_config(json.loads(text), name)
    except (ValueError, TypeError, PlanningError) as exc:
        if isinstance(exc, PlanningError):
            return exc
        return PlanningError(ann.MODEL_CONFIG, text[:40], f"not valid config.json JSON ({exc})")


@lru_cache(maxsize=256)
def gpu_from_label(label: str) -> GpuFacts | None:
    try:
        return find_gpu(label)
    except PlanningError:
        return None


def gpu_products(spec: dict[str, Any]) -> list[str]:
    """GPU-naming node labels the pod is pinned to (``label=value``), by nodeSelector or required node affinity:
    GFD's product label, GKE's accelerator, Karpenter's / EKS Auto Mode's GPU name, or a GPU instance type."""
    return [pin.describe() for pin in gpu_pins(spec)]


@dataclass
class Server:
    """The vLLM server container of a workload, with the facts rules need about it."""

    template: PodTemplate
    container: dict[str, Any]
    command: ServeCommand
    annotations: dict[str, str]
    model: ModelFacts | None = None
    model_problem: str = ""
    gpu: GpuFacts | None = None
    gpu_problem: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.container.get("name", "?"))

    @property
    def where(self) -> str:
        return f"container {self.name!r}" + (f" ({self.template.role} template)" if self.template.role != "pod" else "")

    @property
    def version(self) -> ImageVersion:
        """The vLLM release the container runs (from the image tag; the pinned default when the tag says nothing)."""
        return image_version(self.container.get("image"))

    @property
    def tensor_parallel_size(self) -> int | None:
        return self.command.int_flag("tensor-parallel-size", 1)

    @property
    def pipeline_parallel_size(self) -> int | None:
        return self.command.int_flag("pipeline-parallel-size", 1)

    @property
    def data_parallel_size(self) -> int | None:
        return self.command.int_flag("data-parallel-size", 1)


class Resource(HasMetadata):
    """One Kubernetes object (a manifest dict) and what rules have worked out about it."""

    def __init__(self, obj: dict[str, Any], source: str = "", line: int = 0, document: int = 0) -> None:
        self.obj = obj
        self.source = source
        self.line = line
        """Line of ``source`` where the object's document starts (1-based; 0 when the object came from no text)."""
        self.document = document
        """Position of that document in ``source`` among the documents that hold something (1-based; 0: unknown)."""
        # Identity is read by every rule for every object: worked out once.
        self.api_version = str(obj.get("apiVersion", ""))
        self.kind = str(obj.get("kind", ""))
        self.metadata: dict[str, Any] = mapping(obj.get("metadata"))
        self.name = str(self.metadata.get("name", ""))
        self.namespace = str(self.metadata.get("namespace") or "")
        self.spec: dict[str, Any] = mapping(obj.get("spec"))
        self._commands: dict[int, ServeCommand | None] = {}

    def identity(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    @cached_property
    def exemptions(self) -> frozenset[str]:
        """Policy names exempted by the annotation, on the object or on any of its pod templates."""
        texts = [self.annotations.get(ann.POLICY_EXEMPT, "")]
        texts += [t.annotations.get(ann.POLICY_EXEMPT, "") for t in self.templates]
        return frozenset(name.strip() for text in texts for name in text.split(",") if name.strip())

    # ---- pods -----------------------------------------------------------------------------------------------------
    @cached_property
    def templates(self) -> list[PodTemplate]:
        return pod_templates(self.obj) if self.kind in POD_KINDS else []

    def command_of(self, container: dict[str, Any]) -> ServeCommand | None:
        """``serve_command`` of one of this object's containers, parsed once."""
        key = id(container)
        if key not in self._commands:
            self._commands[key] = serve_command(container)
        return self._commands[key]

    @property
    def is_lws(self) -> bool:
        return self.kind == "LeaderWorkerSet"

    @property
    def lws_size(self) -> int | None:
        """Pods per LeaderWorkerSet group (default 1); None when not an integer literal."""
        value = mapping(self.spec.get("leaderWorkerTemplate")).get("size", 1)
        return as_int(value)

    @cached_property
    def servers(self) -> list[Server]:
        """vLLM server containers; for a serving kind only (a Job running vLLM is batch work)."""
        found: list[Server] = []
        if self.kind not in SERVING_KINDS or self.kind in CONTROLLER_FILLED_KINDS:
            return found
        for template in self.templates:
            for container in template.containers:
                command = self.command_of(container)
                if command is not None:
                    merged = {**self.annotations, **template.annotations}
                    server = Server(template, container, command, merged)
                    self._resolve(server)
                    found.append(server)
        if self.is_lws and len(found) > 1:
            # Without a leaderTemplate, workers run the leader's template; with one, only the leader serves.
            leaders = [s for s in found if s.template.role == "leader"]
            found = leaders or found
        if self.kind in RAY_KINDS:
            # KubeRay gives a container without a command its own `ray start`: the image's entrypoint never runs.
            found = [s for s in found if s.command.entry != "image"]
        if self.kind in RAY_KINDS and len(found) > 1:
            found = [s for s in found if s.template.role == "head"] or found  # workers only join the Ray cluster
        return found

    @cached_property
    def is_vllm(self) -> bool:
        """A vLLM serving workload: runs a vLLM server, or the vLLM image, or (Ray, KServe) names vLLM in its spec:
        Ray Serve's LLM apps and KServe's Hugging Face runtime start vLLM from their own code."""
        if self.kind not in SERVING_KINDS:
            return False
        if self.servers or any(is_vllm_image(c.get("image")) for t in self.templates for c in t.containers):
            return True
        if self.kind == "InferenceService" and _huggingface_runtime(self.spec):
            return True
        return self.kind in RAY_KINDS | KSERVE_KINDS and mentions_vllm(self.spec)

    @cached_property
    def unread_engine(self) -> str:
        """Why the vLLM engine's flags are not visible in this vLLM workload ('' when they are, or it is none)."""
        if not self.is_vllm:
            return ""
        if self.kind in CONTROLLER_FILLED_KINDS:
            return (f"the KServe controller writes the vllm serve command, probes and drain settings from its "
                    f"LLMInferenceServiceConfig, which this {self.kind} does not contain")
        if self.servers:
            return ""
        if self.kind in RAY_KINDS:
            return ("vLLM runs inside a Ray Serve application (serveConfigV2 or the entrypoint), whose engine "
                    "arguments are Python values, not a command line")
        if self.kind == "InferenceService":
            return ("the predictor's runtime (a ServingRuntime) supplies the serving command; check that "
                    "ServingRuntime's manifest too")
        return "no container runs `vllm serve` or the API server module (a custom entrypoint or script)"
    def pod_labels(self, template: PodTemplate) -> dict[str, str]:
        """Labels the pods of a template carry, including those the controller adds."""
        labels = template.labels
        if self.is_lws:
            labels = {**labels, LWS_NAME_LABEL: self.name}
            if template.role == "leader":
                labels[LWS_WORKER_INDEX_LABEL] = "0"
        return labels

    # ---- model and GPU --------------------------------------------------------------------------------------------
    def _resolve(self, server: Server) -> None:
        notes = server.annotations
        config_json = notes.get(ann.MODEL_CONFIG)
        reference = notes.get(ann.MODEL) or server.command.model_ref
        if config_json:
            result = _model_from_config_json(config_json, reference or "model-config")
            if isinstance(result, PlanningError):
                server.model_problem = f"the {ann.MODEL_CONFIG} annotation is unusable: {result.reason}"
            else:
                server.model = result
        else:
            for candidate in (notes.get(ann.MODEL), server.command.model_ref):
                if candidate:
                    server.model = model_from_reference(candidate)
                    if server.model:
                        break
            if server.model is None and reference:
                found = model_configs.active().lookup(reference)
                if isinstance(found, ModelFacts):
                    server.model = found
                elif found:
                    server.model_problem = f"model {reference!r} is not in the catalog and {found}"
            if server.model is None and not server.model_problem:
                server.model_problem = (
                    f"model {reference!r} is not in the catalog" if reference else "no --model or model argument"
                ) + (f"; add the {ann.MODEL} (catalog id) or {ann.MODEL_CONFIG} (config.json) annotation, or give "
                     "its config.json with --model-config")
        label = notes.get(ann.GPU)
        if label:
            gpu = gpu_from_label(label)
            server.gpu = gpu
            if gpu is None:
                server.gpu_problem = f"GPU {label} (the {ann.GPU} annotation) is not in the GPU catalog"
            return
        pins = gpu_pins(server.template.spec)
        if pins:
            server.gpu, server.gpu_problem = pinned_gpu(pins)
        else:
            server.gpu_problem = (
                f"no GPU node selector or affinity ({', '.join(GPU_LABELS)}) and no {ann.GPU} annotation, so the GPU "
                "is unknown"
            )
