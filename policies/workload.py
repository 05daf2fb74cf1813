"""Facts about one Kubernetes object, read from its camelCase manifest: its pod templates, the vLLM server container
and its flags, the model and the GPU it serves on.

Everything here is pure and tolerant: manifests written by others may lack any field, so each fact is optional and a
rule that needs a missing fact says "cannot check" instead of guessing. A ``Resource`` caches what it has worked out,
since two dozen rules ask it the same questions. The pieces it reads with: ``values`` (manifest values), ``kinds``,
``pods`` (pod templates and containers), ``vllm_command`` (the server's command line), ``gpu_labels`` and
``model_configs``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from vllm_pulumi.policies import model_configs
from vllm_pulumi.policies.gpu_labels import LABELS as GPU_LABELS
from vllm_pulumi.policies.gpu_labels import gpu_pins, pinned_gpu
from vllm_pulumi.policies.kinds import CONTROLLER_FILLED_KINDS, KSERVE_KINDS, POD_KINDS, RAY_KINDS, SERVING_KINDS
from vllm_pulumi.policies.pods import HasMetadata, PodTemplate, env_from_secret, gpu_request, pod_templates
from vllm_pulumi.policies.values import as_int, mapping, strings
from vllm_pulumi.policies.versions import ImageVersion, image_version
from vllm_pulumi.policies.vllm_command import ServeCommand, is_vllm_image, mentions_vllm, serve_command
from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.spec.engine import DEFAULT_PORT
from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.models import ModelFacts, catalog_id_for, catalog_model, parse_config
from vllm_pulumi.runtime.vocabulary import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL


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


def _huggingface_runtime(spec: dict[str, Any]) -> bool:
    """An InferenceService on KServe's Hugging Face runtime, which serves generative models with vLLM unless told
    ``--backend=huggingface``."""
    model = mapping(mapping(spec.get("predictor")).get("model"))
    if str(mapping(model.get("modelFormat")).get("name", "")).lower() != "huggingface":
        return False
    args = " ".join(strings(model.get("args")))
    return "--backend=huggingface" not in args and "--backend huggingface" not in args


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
                    _resolve_model(server)
                    _resolve_gpu(server)
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


def _resolve_model(server: Server) -> None:
    """The server's model, from the config.json annotation, the catalog (annotation, then --model) or the configured
    config.json sources; else why not, in ``model_problem``."""
    notes = server.annotations
    config_json = notes.get(ann.MODEL_CONFIG)
    reference = notes.get(ann.MODEL) or server.command.model_ref
    if config_json:
        result = _model_from_config_json(config_json, reference or "model-config")
        if isinstance(result, PlanningError):
            server.model_problem = f"the {ann.MODEL_CONFIG} annotation is unusable: {result.reason}"
        else:
            server.model = result
        return
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


def _resolve_gpu(server: Server) -> None:
    """The server's GPU, from the GPU annotation or the GPU-naming node labels its pod requires; else why not, in
    ``gpu_problem``."""
    label = server.annotations.get(ann.GPU)
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

def vllm_port(server: Server) -> int | None:
    """The port vLLM listens on (``--port``, default 8000); None when it is not a literal number."""
    return server.command.int_flag("port", DEFAULT_PORT)


def server_has_api_key(server: Server) -> bool:
    """vLLM protects /v1 with VLLM_API_KEY from a Secret, or --api-key=$(VAR) with VAR from a Secret."""
    if env_from_secret(server.container, "VLLM_API_KEY") is not None:
        return True
    value = server.command.value("api-key")
    if value:
        match = re.fullmatch(r"\$\(?\{?([A-Za-z_][A-Za-z0-9_]*)\}?\)?", value)
        return match is not None and env_from_secret(server.container, match.group(1)) is not None
    return False


def gpu_templates(res: Resource) -> list[PodTemplate]:
    """The pod templates of ``res`` that request or limit GPUs."""
    return [t for t in res.templates if t.gpus > 0 or any(gpu_request(c) for c in t.containers)]


def serving_templates(workload: Resource) -> list[PodTemplate]:
    """The pod templates that run a vLLM server, each once."""
    return list({id(s.template): s.template for s in workload.servers}.values())
