"""Rules over one object at a time: pure functions of a manifest (wrapped in a ``Resource``) and the rule's settings."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.planning.parallelism import tensor_parallel_problems, valid_tensor_parallel_sizes
from vllm_pulumi.runtime.planning.startup import STORAGE_READ_GB_PER_SECOND
from vllm_pulumi.runtime.spec.engine import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_PORT,
    DEFAULT_VLLM_VERSION,
    MAX_SAFE_GPU_MEMORY_UTILIZATION,
    REMOVED_FLAGS,
    parse_version,
)
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE

from .facts import capacity_plan, startup_budget_for
from .gpu_labels import LABELS as GPU_LABELS
from .versions import FLAGS as FLAG_HISTORY
from .versions import METRICS as METRIC_HISTORY
from .versions import flag_missing_in, release
from .registry import ANY_KIND, Setting, Violation, rule
from .workload import (
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    NON_WORKLOAD_KINDS,
    POD_KINDS,
    PodTemplate,
    Resource,
    Server,
    as_float,
    as_int,
    gpu_limit,
    gpu_products,
    gpu_request,
    image_tag,
    is_secret_like_env,
    is_vllm_image,
    mapping,
    parse_quantity,
    pre_stop_seconds,
    probe_window_seconds,
    secret_env_names,
    sequence,
    vllm_containers,
)

SERVING = ("Deployment", "StatefulSet", "LeaderWorkerSet", "Pod", "RayService", "RayCluster", "InferenceService",
           "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService")
ALL_PODS = (*SERVING, "DaemonSet", "ReplicaSet", "Job", "CronJob", "RayJob")
# Metrics vLLM 0.33 no longer exports, with what replaced them.
REMOVED_METRICS: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc (0..1)",
    "vllm:cpu_cache_usage_perc": "nothing (the V1 engine has no CPU swap space); drop the query",
    "vllm:num_requests_swapped": "nothing (no swapping in the V1 engine); use vllm:num_preemptions",
    "vllm:time_per_output_token_seconds": "vllm:request_time_per_output_token_seconds or "
                                          "vllm:inter_token_latency_seconds",
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    "vllm:gpu_prefix_cache_hit_rate": "rate(vllm:prefix_cache_hits) / rate(vllm:prefix_cache_queries)",
}
_METRIC = re.compile(r"vllm:[a-z_]+")
_REMOVED_METRIC = re.compile("|".join(re.escape(name) for name in REMOVED_METRICS))
MIN_VLLM = (0, 33)


def _cannot(what: str, problem: str) -> Violation:
    return Violation(f"cannot check {what}: {problem}",
                     f"add the {ann.MODEL} / {ann.GPU} annotations or use catalog ids so the rule can check",
                     cannot_check=True)


def _all_containers(template: PodTemplate) -> list[dict[str, Any]]:
    return template.init_containers + template.containers


def _gpu_templates(res: Resource) -> list[PodTemplate]:
    return [t for t in res.templates if t.gpus > 0 or any(gpu_request(c) for c in t.containers)]


# ---- probes and lifecycle -------------------------------------------------------------------------------------------
@rule(
    "startup-probe-covers-load", group="Probes and lifecycle", enforcement="mandatory", severity="high",
    kinds=SERVING,
    description="The vLLM container has a startupProbe whose window (initialDelaySeconds + periodSeconds x "
                "failureThreshold) covers the model's startup budget, by phase: bootstrap, the weight bytes over the "
                "storage's read speed, a cold torch.compile, KV profiling and CUDA graph capture by the model's layers "
                "and captured batch sizes, with a safety factor (runtime.startup, docs/startup.md).",
    why="Loading tens of GB of weights and compiling CUDA graphs takes minutes. Until the startup probe succeeds, "
        "liveness and readiness are held back; a window shorter than the load restarts the pod in a loop "
        "(CrashLoopBackOff during every rollout).",
    fix="Add a startupProbe on /health and raise failureThreshold until the window covers the budget.",
    settings={"default_storage_kind": Setting(
        "local-nvme", "Storage assumed for a model read from a mounted path when the storage-kind annotation is "
                      f"absent; one of {', '.join(sorted(STORAGE_READ_GB_PER_SECOND))}.")},
)
def startup_probe_covers_load(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        probe = mapping(server.container.get("startupProbe"))
        budget = startup_budget_for(res, server, settings)
        if not probe:
            needed = f" (the startup budget is {budget.seconds} s: {budget.basis})" if budget.seconds else ""
            yield Violation(
                f"{server.where} has no startupProbe: liveness and readiness run while the weights load{needed}",
                "add startupProbe: {httpGet: {path: /health, port: <vLLM port>}, periodSeconds: 10, failureThreshold: "
                f"{math.ceil((budget.seconds or 600) / 10)}}}",
            )
            continue
        if budget.seconds is None:
            yield _cannot("the startup probe window", budget.basis)
            continue
        window = probe_window_seconds(probe)
        if window < budget.seconds:
            period = as_int(probe.get("periodSeconds")) or 10
            delay = as_int(probe.get("initialDelaySeconds")) or 0
            yield Violation(
                f"{server.where}: startupProbe window {window} s (initialDelaySeconds {delay} + periodSeconds "
                f"{period} x failureThreshold {as_int(probe.get('failureThreshold')) or 3}) is shorter than the "
                f"{budget.seconds} s startup budget ({budget.basis})",
                f"set startupProbe.failureThreshold to at least {math.ceil((budget.seconds - delay) / period)} "
                f"(periodSeconds {period})",
            )


@rule(
    "liveness-probe-safe", group="Probes and lifecycle", enforcement="mandatory", severity="high", kinds=SERVING,
    description="A livenessProbe on the vLLM container cannot kill it during model load (a startupProbe is present) "
                "or during a drain (its failure window, periodSeconds x failureThreshold, is not shorter than "
                "terminationGracePeriodSeconds).",
    why="A liveness probe that fires while vLLM loads weights restarts it forever; one that fires before the grace "
        "period ends kills a pod that is still finishing in-flight generations, so rollouts cut answers off.",
    fix="Add a startupProbe, and set livenessProbe.failureThreshold to at least terminationGracePeriodSeconds / "
        "periodSeconds + 1.",
)
def liveness_probe_safe(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        probe = mapping(server.container.get("livenessProbe"))
        if not probe:
            continue
        if not server.container.get("startupProbe"):
            yield Violation(
                f"{server.where} has a livenessProbe but no startupProbe: it restarts the pod after "
                f"{probe_window_seconds(probe)} s of model loading",
                "add a startupProbe sized to the startup budget (liveness waits for it)",
            )
        period = as_int(probe.get("periodSeconds")) or 10
        threshold = as_int(probe.get("failureThreshold")) or 3
        grace = server.template.grace_seconds
        if period * threshold < grace:
            yield Violation(
                f"{server.where}: livenessProbe kills after periodSeconds {period} x failureThreshold {threshold} = "
                f"{period * threshold} s, shorter than terminationGracePeriodSeconds {grace} s",
                f"set livenessProbe.failureThreshold to at least {math.ceil(grace / period) + 1}",
            )


@rule(
    "readiness-probe", group="Probes and lifecycle", enforcement="mandatory", severity="medium", kinds=SERVING,
    description="The vLLM container has a readinessProbe.",
    why="Without one, the Service sends requests to a pod as soon as the container starts, minutes before the model "
        "is loaded, and keeps sending them to a draining pod.",
    fix="Add readinessProbe: {httpGet: {path: /health, port: <vLLM port>}, periodSeconds: 5}.",
)
def readiness_probe(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        if not server.container.get("readinessProbe"):
            yield Violation(f"{server.where} has no readinessProbe",
                            "add readinessProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 5}")


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


def vllm_port(server: Server) -> int | None:
    return server.command.int_flag("port", DEFAULT_PORT)


@rule(
    "probes-target-vllm-port", group="Probes and lifecycle", enforcement="mandatory", severity="high", kinds=SERVING,
    description="The vLLM container's startup, readiness and liveness probes reach vLLM's own port (--port, default "
                "8000), by number or by the name of a container port.",
    why="A probe on another port (or a port name the container does not declare) never succeeds: the pod never "
        "becomes ready, or the startup probe restarts it forever.",
    fix="Point httpGet.port at the vLLM port (e.g. 8000 or the name of the containerPort that is 8000).",
)
def probes_target_vllm_port(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        port = vllm_port(server)
        if port is None:
            continue
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = mapping(server.container.get(kind))
            action = mapping(probe.get("httpGet")) or mapping(probe.get("tcpSocket"))
            if "port" not in action:
                continue
            target = container_port(server.container, action["port"])
            if target != port:
                reached = f"port {target}" if target is not None else "no port of the container"
                yield Violation(f"{server.where}: {kind} port {action['port']!r} is {reached}, but vLLM listens on "
                                f"{port}", f"set {kind}.{'httpGet' if 'httpGet' in probe else 'tcpSocket'}.port: {port}")


# ---- drain ----------------------------------------------------------------------------------------------------------
@rule(
    "shutdown-timeout", group="Drain", enforcement="mandatory", severity="high", kinds=SERVING,
    description="vLLM runs with --shutdown-timeout N, N > 0.",
    why="vLLM 0.33's default --shutdown-timeout is 0: on SIGTERM it aborts every in-flight request. Every rollout "
        "and scale-down then truncates answers. (The old --disable-graceful-shutdown flag no longer exists.)",
    fix="Add --shutdown-timeout=90 (seconds in-flight requests get to finish) and size the grace period to it.",
)
def shutdown_timeout(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        value = server.command.int_flag("shutdown-timeout", 0)
        if value is None:
            yield _cannot("--shutdown-timeout", f"value {server.command.value('shutdown-timeout')!r} is not literal")
        elif value <= 0:
            version = server.version
            missing = flag_missing_in("shutdown-timeout", version.version)
            if missing is not None and missing.added is not None:
                yield Violation(
                    f"{server.where}: vLLM {version.text} has no --shutdown-timeout (added in "
                    f"{release(missing.added)}: {missing.source}): SIGTERM aborts in-flight requests",
                    f"upgrade the image to {release(missing.added)} or newer (vllm/vllm-openai:v{DEFAULT_VLLM_VERSION}"
                    "), then add --shutdown-timeout=90; this version rejects the flag",
                )
                continue
            written = "is missing (default 0)" if not server.command.has("shutdown-timeout") else f"is {value}"
            yield Violation(f"{server.where}: --shutdown-timeout {written}: SIGTERM aborts in-flight "
                            f"requests{version.note}", "add --shutdown-timeout=90 to the vLLM arguments")


@rule(
    "grace-covers-drain", group="Drain", enforcement="mandatory", severity="high", kinds=SERVING,
    description="terminationGracePeriodSeconds >= preStop sleep + vLLM --shutdown-timeout + a margin.",
    why="Kubernetes sends SIGKILL when the grace period ends, counted from the start of the preStop hook. If preStop "
        "plus vLLM's drain do not fit, the drain is cut short and answers are lost anyway.",
    fix="Raise terminationGracePeriodSeconds to preStop + shutdown timeout + margin.",
    settings={
        "margin_seconds": Setting(10, "Slack between the end of the drain and SIGKILL."),
        "min_grace_seconds": Setting(0, "A floor for terminationGracePeriodSeconds (0: only the drain arithmetic)."),
    },
)
def grace_covers_drain(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    margin = int(settings.get("margin_seconds", 10))
    floor = int(settings.get("min_grace_seconds", 0))
    for server in res.servers:
        pre_stop = pre_stop_seconds(server.container)
        shutdown = server.command.int_flag("shutdown-timeout", 0)
        if pre_stop is None or shutdown is None:
            yield _cannot("the grace period", "the preStop hook or --shutdown-timeout is not a literal number")
            continue
        grace = server.template.grace_seconds
        needed = max(pre_stop + shutdown + margin, floor)
        if grace < needed:
            written = "" if "terminationGracePeriodSeconds" in server.template.spec else " (the default)"
            yield Violation(
                f"{server.where}: terminationGracePeriodSeconds {grace} s{written} < preStop {pre_stop} s + "
                f"--shutdown-timeout {shutdown} s + margin {margin} s = {pre_stop + shutdown + margin} s"
                + (f" (floor {floor} s)" if floor > pre_stop + shutdown + margin else ""),
                f"set terminationGracePeriodSeconds: {needed} in {server.template.path}",
            )


# ---- rollout --------------------------------------------------------------------------------------------------------
def _is_zero(value: object) -> bool:
    return value == 0 or (isinstance(value, str) and value.strip() in ("0", "0%"))


def _positive(value: object) -> bool:
    if isinstance(value, str) and value.strip().endswith("%"):
        number = as_float(value.strip()[:-1])
        return number is not None and number > 0
    number = as_int(value)
    return number is not None and number >= 1


@dataclass(frozen=True)
class RolloutRoom:
    """Replicas the workload's pool holds at max scale, replicas at max scale, and where the numbers come from."""

    capacity: int
    max_replicas: int
    basis: str

    @property
    def has_room(self) -> bool:
        """Room for one more replica at max scale: a surge replica can be placed."""
        return self.capacity > self.max_replicas


def rollout_room(res: Resource, settings: Mapping[str, Any]) -> RolloutRoom | None:
    """The pool facts the program wrote on the workload (runtime/annotations.py), or the rule's settings for
    manifests without them; None when they do not say (the rule then asks for surge, as without facts)."""
    notes = res.annotations
    max_replicas = as_int(notes.get(ann.MAX_REPLICAS)) or as_int(settings.get("max_replicas")) or as_int(
        res.spec.get("replicas"))
    if not max_replicas:
        return None
    capacity = as_int(notes.get(ann.REPLICA_CAPACITY))
    if capacity is not None:
        return RolloutRoom(capacity, max_replicas, f"the {ann.REPLICA_CAPACITY} annotation")
    nodes = as_int(notes.get(ann.POOL_MAX_NODES)) or as_int(settings.get("pool_max_nodes"))
    node_gpus = as_int(notes.get(ann.NODE_GPUS)) or as_int(settings.get("gpus_per_node"))
    pod_gpus = max((t.gpus for t in _gpu_templates(res)), default=0)
    if not nodes or not node_gpus or not pod_gpus:
        return None
    size = (res.lws_size or 1) if res.is_lws else 1
    per_node = node_gpus // pod_gpus
    group = f", {size} pods per replica" if size > 1 else ""
    return RolloutRoom(nodes * per_node // size, max_replicas,
                       f"{nodes} node(s) of {node_gpus} GPUs, each holding {per_node} pod(s) of {pod_gpus} GPU(s)"
                       f"{group}")


@rule(
    "rollout-no-unavailable", group="Rollout", enforcement="mandatory", severity="high",
    kinds=("Deployment", "LeaderWorkerSet"),
    description="Rolling updates keep every replica serving: maxUnavailable 0 and maxSurge >= 1 (Deployment "
                "spec.strategy.rollingUpdate; LeaderWorkerSet spec.rolloutStrategy.rollingUpdateConfiguration). "
                "When the pool facts say there is no room for one more replica at max scale (the "
                f"{ann.REPLICA_CAPACITY} annotation, or {ann.POOL_MAX_NODES} and {ann.NODE_GPUS} with "
                f"{ann.MAX_REPLICAS}, or this rule's settings), a surge would deadlock: then the rule asks for "
                "maxSurge 0 and maxUnavailable 1 instead, and fires on the surging form.",
    why="A replica taken down before its replacement has loaded the model (minutes) drops capacity and in-flight "
        "sessions; Deployments default to 25% unavailable, LeaderWorkerSets to 1 group unavailable and no surge. "
        "But a surge replica needs a node: when the pool is full at max scale it stays Pending, the rollout never "
        "progresses, and the old version runs until someone notices.",
    fix="Set maxUnavailable: 0 and maxSurge: 1 when the pool holds one more replica at max scale; when it cannot, "
        "add a node, or set maxSurge: 0 and maxUnavailable: 1 (one replica at a time out of service).",
    settings={
        "pool_max_nodes": Setting(0, "Nodes of the pool, for workloads without the pool annotations (0: unknown)."),
        "gpus_per_node": Setting(0, "GPUs of one node of the pool, for workloads without the pool annotations "
                                    "(0: unknown)."),
        "max_replicas": Setting(0, "Replicas at max scale, for workloads without the max-replicas annotation (0: "
                                   "the replicas field)."),
    },
)
def rollout_no_unavailable(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_vllm:
        return
    if res.kind == "Deployment":
        strategy = mapping(res.spec.get("strategy"))
        if strategy.get("type") == "Recreate":
            yield Violation("strategy.type Recreate stops every replica before starting new ones",
                            "use strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}")
            return
        rolling = mapping(strategy.get("rollingUpdate"))
        path, unavailable, surge = "spec.strategy.rollingUpdate", rolling.get("maxUnavailable", "25%"), \
            rolling.get("maxSurge", "25%")
    else:
        rolling = mapping(mapping(res.spec.get("rolloutStrategy")).get("rollingUpdateConfiguration"))
        path = "spec.rolloutStrategy.rollingUpdateConfiguration"
        unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
    groups = as_int(res.spec.get("replicas")) if res.kind == "LeaderWorkerSet" else None
    if groups is not None and groups <= max(1, as_int(surge) or 0):
        yield from _few_groups_rollout(path, unavailable, surge, groups)
        return
    room = rollout_room(res, settings)
    if room is not None and not room.has_room:
        yield from _rollout_without_room(path, unavailable, surge, room)
        return
    if not _is_zero(unavailable):
        yield Violation(f"{path}.maxUnavailable is {unavailable!r}: replicas stop before their replacements serve",
                        f"set {path}.maxUnavailable: 0" + ("" if _positive(surge) else " and maxSurge: 1") + (
                            f" (the pool holds {room.capacity} replicas at max scale, {room.max_replicas} needed: "
                            "room for a surge replica)" if room is not None else ""))
    elif not _positive(surge):
        yield Violation(f"{path}.maxSurge is {surge!r}: with maxUnavailable 0 the rollout cannot make progress",
                        f"set {path}.maxSurge: 1")


def _few_groups_rollout(path: str, unavailable: object, surge: object, groups: int) -> Iterator[Violation]:
    """LeaderWorkerSet (0.8) starts a surge group only while more groups than maxSurge are out of date: with
    replicas <= maxSurge (a single group, typically) a surging rollout never starts, whatever the pool's room, and
    replacing the group (maxUnavailable 1) is the only form that progresses."""
    if _is_zero(unavailable):
        yield Violation(
            f"{path}: maxSurge {surge!r} and maxUnavailable 0 with {groups} group(s): LeaderWorkerSet surges only while "
            "more groups than maxSurge are out of date, so this rollout never starts",
            f"set {path}.maxSurge: 0 and maxUnavailable: 1 (the group is replaced, an outage of one start), or run "
            f"more than {max(1, as_int(surge) or 0)} replicas on a pool with room for one more group")


def _rollout_without_room(path: str, unavailable: object, surge: object, room: RolloutRoom) -> Iterator[Violation]:
    """No room for a surge replica at max scale: replacing one replica at a time is the form that progresses."""
    numbers = (f"the pool holds {room.capacity} replica(s) at max scale and {room.max_replicas} are needed "
               f"({room.basis})")
    if _is_zero(unavailable):
        if _positive(surge):
            yield Violation(
                f"{path}.maxSurge is {surge!r} with maxUnavailable 0, but {numbers}: the surge replica can never be "
                "placed at full scale, so the rollout deadlocks",
                f"set {path}.maxSurge: 0 and maxUnavailable: 1 (one replica at a time), or add nodes so the pool "
                f"holds {room.max_replicas + 1} replicas")
        else:
            yield Violation(f"{path}: maxSurge {surge!r} and maxUnavailable 0 cannot make progress",
                            f"set {path}.maxSurge: 0 and maxUnavailable: 1 ({numbers})")
    elif as_int(unavailable) != 1:
        yield Violation(f"{path}.maxUnavailable is {unavailable!r}: more than one replica may stop at once",
                        f"set {path}.maxUnavailable: 1 ({numbers}, so replace one replica at a time)")


# ---- memory ---------------------------------------------------------------------------------------------------------
def _shm_problem(template: PodTemplate, container: dict[str, Any]) -> str | None:
    if template.spec.get("hostIPC") is True:
        return None
    for mount in sequence(container.get("volumeMounts")):
        mount = mapping(mount)
        if mount.get("mountPath") == "/dev/shm":
            volume = template.volume(str(mount.get("name")))
            empty_dir = mapping(mapping(volume).get("emptyDir")) if volume else {}
            if volume and "emptyDir" in volume and empty_dir.get("medium") == "Memory":
                return None
            return f"/dev/shm is mounted from volume {mount.get('name')!r}, which is not an emptyDir with medium Memory"
    return "no /dev/shm mount (the container runtime gives 64 MiB)"


@rule(
    "dev-shm-memory", group="Memory and CPU", enforcement="mandatory", severity="high", kinds=SERVING,
    description="When a replica uses more than one GPU (TP or PP > 1, or a multi-node LeaderWorkerSet), the vLLM "
                "containers mount a memory-backed emptyDir at /dev/shm.",
    why="vLLM's worker processes and NCCL exchange data through shared memory; the container runtime's 64 MiB "
        "/dev/shm makes the engine crash on the first large batch.",
    fix="Add volume {name: shm, emptyDir: {medium: Memory, sizeLimit: <1 GiB + 2 GiB per extra GPU>} } mounted at "
        "/dev/shm.",
)
def dev_shm_memory(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    checked: set[int] = set()
    multi_node = res.is_lws and (res.lws_size or 1) > 1
    for server in res.servers:
        tp, pp = server.tensor_parallel_size or 1, server.pipeline_parallel_size or 1
        gpus = gpu_limit(server.container) or 0
        if tp * pp > 1 or gpus > 1 or multi_node:
            checked.add(id(server.container))
            problem = _shm_problem(server.template, server.container)
            if problem:
                yield Violation(f"{server.where}: {problem}, and this replica uses {tp * pp} GPUs "
                                f"(TP {tp} x PP {pp})" + (" over several nodes" if multi_node else ""),
                                f"add an emptyDir volume with medium: Memory mounted at /dev/shm in "
                                f"{server.template.path}")
    if multi_node:
        for template in res.templates:
            for container in template.containers:
                if id(container) in checked or not (gpu_limit(container) or is_vllm_image(container.get("image"))):
                    continue
                problem = _shm_problem(template, container)
                if problem:
                    yield Violation(f"container {container.get('name')!r} ({template.role} template): {problem} in a "
                                    "multi-node group (Ray and NCCL use shared memory)",
                                    f"add an emptyDir volume with medium: Memory mounted at /dev/shm in "
                                    f"{template.path}")


def shm_size_limit(template: PodTemplate, container: dict[str, Any]) -> tuple[str, float | None] | None:
    """(written, bytes) of the memory-backed /dev/shm volume's sizeLimit, None without such a volume."""
    for mount in sequence(container.get("volumeMounts")):
        mount = mapping(mount)
        if mount.get("mountPath") != "/dev/shm":
            continue
        empty_dir = mapping(mapping(template.volume(str(mount.get("name")))).get("emptyDir"))
        if empty_dir.get("medium") == "Memory" and "sizeLimit" in empty_dir:
            return str(empty_dir["sizeLimit"]), parse_quantity(empty_dir["sizeLimit"])
    return None


@rule(
    "memory-limit-covers-shm", group="Memory and CPU", enforcement="mandatory", severity="medium", kinds=SERVING,
    description="When the vLLM container has a memory limit, it is larger than its memory-backed /dev/shm sizeLimit.",
    why="A memory-backed emptyDir is charged to the pod's memory: with a limit at or below the /dev/shm size, "
        "filling shared memory (NCCL, worker IPC) gets the container OOM-killed instead of hitting the size limit.",
    fix="Raise resources.limits.memory above the /dev/shm sizeLimit plus the server's own memory, or drop the limit.",
)
def memory_limit_covers_shm(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        written_limit = mapping(mapping(server.container.get("resources")).get("limits")).get("memory")
        limit = parse_quantity(written_limit)
        shm = shm_size_limit(server.template, server.container)
        if limit is None or shm is None or shm[1] is None:
            continue
        if limit <= shm[1]:
            yield Violation(f"{server.where}: memory limit {written_limit} is not above the /dev/shm sizeLimit "
                            f"{shm[0]} (memory-backed, charged to the same limit)",
                            "raise resources.limits.memory well above the /dev/shm size, or remove the limit")


@rule(
    "no-cpu-limit", group="Memory and CPU", enforcement="advisory", severity="low", kinds=SERVING,
    description="The vLLM container sets no CPU limit (a CPU request only).",
    why="vLLM's scheduler, tokenizer and HTTP server run on the CPU between GPU steps; CFS throttling under a CPU "
        "limit stalls the engine loop and shows up as latency spikes while the GPU idles.",
    fix="Remove resources.limits.cpu and keep a CPU request sized for the GPUs (4 + 2 per GPU).",
)
def no_cpu_limit(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        limit = mapping(mapping(server.container.get("resources")).get("limits")).get("cpu")
        if limit is not None:
            yield Violation(f"{server.where}: CPU limit {limit} throttles vLLM's engine loop",
                            "remove resources.limits.cpu (keep the request)")


@rule(
    "gpu-memory-utilization", group="Memory and CPU", enforcement="mandatory", severity="medium", kinds=SERVING,
    description=f"--gpu-memory-utilization is at most {MAX_SAFE_GPU_MEMORY_UTILIZATION}.",
    why=f"vLLM takes this share of GPU memory up front; above {MAX_SAFE_GPU_MEMORY_UTILIZATION} nothing is left for allocator fragmentation, "
        "NCCL and CUDA graph buffers that grow later, and the engine runs out of memory under load.",
    fix=f"Use 0.90-{MAX_SAFE_GPU_MEMORY_UTILIZATION} (vLLM 0.33 defaults to {DEFAULT_GPU_MEMORY_UTILIZATION}).",
    settings={"max": Setting(MAX_SAFE_GPU_MEMORY_UTILIZATION, "Largest allowed --gpu-memory-utilization.")},
)
def gpu_memory_utilization(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    limit = float(settings.get("max", MAX_SAFE_GPU_MEMORY_UTILIZATION))
    for server in res.servers:
        value = as_float(server.command.value("gpu-memory-utilization"))
        if value is not None and value > limit:
            yield Violation(f"{server.where}: --gpu-memory-utilization {value} > {limit}",
                            f"set --gpu-memory-utilization to {limit} or less (default {DEFAULT_GPU_MEMORY_UTILIZATION})")


# ---- GPUs -----------------------------------------------------------------------------------------------------------
@rule(
    "gpu-requests-equal-limits", group="GPUs", enforcement="mandatory", severity="medium", kinds=ALL_PODS,
    description="Containers that request nvidia.com/gpu set the same number as limit.",
    why="GPUs are an extended resource: Kubernetes rejects a request without a limit or different from it, and the "
        "device plugin allocates by the limit.",
    fix="Set resources.limits.nvidia.com/gpu equal to resources.requests.nvidia.com/gpu (or set only the limit).",
)
def gpu_requests_equal_limits(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for template in res.templates:
        for container in _all_containers(template):
            requests = mapping(mapping(container.get("resources")).get("requests"))
            if GPU_RESOURCE not in requests:
                continue
            request, limit = gpu_request(container), gpu_limit(container)
            if limit is None or request != limit:
                yield Violation(
                    f"container {container.get('name')!r}: {GPU_RESOURCE} request {requests.get(GPU_RESOURCE)!r} "
                    f"!= limit {mapping(mapping(container.get('resources')).get('limits')).get(GPU_RESOURCE)!r}",
                    f"set resources.limits.{GPU_RESOURCE}: {requests.get(GPU_RESOURCE)}",
                )


OTHER_ACCELERATORS = ("google.com/tpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "amd.com/gpu",
                      "habana.ai/gaudi", "gpu.intel.com/i915")
"""Device resources of accelerators other than NVIDIA GPUs: vLLM's parallel sizes count those devices instead."""


def other_accelerator(template: PodTemplate) -> str | None:
    for container in template.containers:
        resources = mapping(container.get("resources"))
        for part in ("limits", "requests"):
            for name in mapping(resources.get(part)):
                if str(name) in OTHER_ACCELERATORS:
                    return str(name)
    return None


@rule(
    "gpus-match-parallelism", group="GPUs", enforcement="mandatory", severity="high", kinds=SERVING,
    description="The GPUs of a replica equal TP x PP (x DP): the vLLM container's nvidia.com/gpu limit for one pod; "
                "leader + (size - 1) x worker GPUs for a LeaderWorkerSet.",
    why="vLLM starts one worker per GPU of TP x PP; with fewer GPUs it fails at start, with more the extra GPUs sit "
        "idle and are paid for.",
    fix="Make nvidia.com/gpu (x LWS size) equal to --tensor-parallel-size x --pipeline-parallel-size.",
)
def gpus_match_parallelism(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if res.kind in ("ServingRuntime", "ClusterServingRuntime"):
        return  # a runtime is a template: the InferenceService that uses it sets the resources
    for server in res.servers:
        if any(other_accelerator(t) for t in res.templates):
            continue  # TPU / Neuron / ROCm pods: the parallel sizes count those devices, not nvidia.com/gpu
        tp, pp, dp = server.tensor_parallel_size, server.pipeline_parallel_size, server.data_parallel_size
        if tp is None or pp is None or dp is None:
            yield _cannot("GPUs against parallelism", "the parallel sizes are not literal integers")
            continue
        wanted = tp * pp * dp
        shape = f"TP {tp} x PP {pp}" + (f" x DP {dp}" if dp > 1 else "")
        leader_gpus = gpu_limit(server.container)
        if res.is_lws and (res.lws_size or 1) != 1:
            size = res.lws_size
            if size is None:
                yield _cannot("GPUs against parallelism", "leaderWorkerTemplate.size is not a literal integer")
                continue
            workers = [t for t in res.templates if t.role == "worker"]
            worker_gpus = workers[0].gpus if workers else 0
            total = (leader_gpus or 0) + (size - 1) * worker_gpus
            if total != wanted:
                yield Violation(
                    f"{server.where}: {shape} = {wanted} GPUs, but the group has {leader_gpus or 0} (leader) + "
                    f"{size - 1} x {worker_gpus} (workers) = {total}",
                    f"give each of the {size} pods {wanted // size if wanted % size == 0 else '?'} GPUs, or change "
                    "the parallel sizes",
                )
        elif leader_gpus != wanted:
            yield Violation(
                f"{server.where}: {shape} needs {wanted} GPUs but the container's {GPU_RESOURCE} limit is "
                f"{leader_gpus if leader_gpus is not None else 'not set'}",
                f"set resources.limits.{GPU_RESOURCE}: {wanted} (and the same request)",
            )


@rule(
    "tensor-parallel-divides-heads", group="GPUs", enforcement="mandatory", severity="high", kinds=SERVING,
    description="--tensor-parallel-size divides the model's attention heads (and KV heads and MLP width), as vLLM "
                "requires (runtime.parallelism).",
    why="vLLM refuses such a size at startup, after the pod was scheduled and the weights were read; e.g. Llama 3 "
        "70B with TP 5 (64 heads) never starts.",
    fix="Pick a tensor-parallel size from the valid list in the message.",
)
def tensor_parallel_divides_heads(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        tp = server.tensor_parallel_size
        if tp is None or tp == 1:
            continue
        if server.model is None:
            yield _cannot("the tensor-parallel size against the model", server.model_problem)
            continue
        problems = tensor_parallel_problems(server.model, tp)
        if problems:
            valid = valid_tensor_parallel_sizes(server.model, max(16, tp))
            yield Violation(f"{server.where}: {'; '.join(problems)} ({server.model.name})",
                            f"use --tensor-parallel-size one of {', '.join(map(str, valid))}")


@rule(
    "tensor-parallel-interconnect", group="GPUs", enforcement="advisory", severity="medium", kinds=SERVING,
    description="Tensor parallelism inside a pod runs on GPUs linked by NVLink, not PCIe only.",
    why="TP all-reduces activations at every layer; over PCIe this dominates the step time (about 3x lower "
        "throughput than expected).",
    fix="Use NVLink/NVSwitch GPUs for TP > 1, or pipeline parallelism, or fewer GPUs per replica.",
)
def tensor_parallel_interconnect(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        tp = server.tensor_parallel_size or 1
        if tp == 1:
            continue
        if server.gpu is None:
            yield _cannot("the GPU interconnect", server.gpu_problem)
        elif server.gpu.interconnect == "pcie":
            yield Violation(f"{server.where}: TP {tp} over {server.gpu.id} GPUs that share only PCIe "
                            f"({server.gpu.interconnect_gb_per_second} GB/s per GPU)",
                            "use NVLink GPUs (e.g. h100-sxm) for TP > 1, or --pipeline-parallel-size instead")


def _efa_devices(template: PodTemplate) -> int:
    return sum(as_int(mapping(mapping(c.get("resources")).get("limits")).get(EFA_RESOURCE)) or 0
               for c in template.containers)


@rule(
    "tensor-parallel-across-nodes", group="GPUs", enforcement="advisory", severity="medium", kinds=SERVING,
    description="A LeaderWorkerSet's --tensor-parallel-size fits the GPUs of one pod (one node): tensor parallelism "
                "does not span nodes; when it must, the pods request the node's EFA devices (vpc.amazonaws.com/efa).",
    why="Tensor parallelism all-reduces activations at every layer. Inside a node that runs over NVLink (hundreds of "
        "GB/s); across nodes it runs over the network, a fraction of that even with EFA, and over TCP sockets "
        "without it (the pods request no EFA devices, or the image lacks the AWS OFI NCCL plugin).",
    fix="Keep --tensor-parallel-size within one node's GPUs and use --pipeline-parallel-size across nodes; if TP must "
        "span nodes, run on EFA nodes, request every vpc.amazonaws.com/efa device of the node and use an image with "
        "libfabric and the AWS OFI NCCL plugin (the spec's efa_image).",
)
def tensor_parallel_across_nodes(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_lws or (res.lws_size or 1) == 1:
        return
    for server in res.servers:
        tp = server.tensor_parallel_size
        gpus = gpu_limit(server.container)
        if tp is None or not gpus or tp <= gpus:
            continue
        nodes = -(-tp // gpus)
        efa = _efa_devices(server.template)
        network = (f"over {efa} EFA devices per pod" if efa else
                   f"and the pods request no {EFA_RESOURCE} devices (NCCL uses TCP sockets)")
        yield Violation(
            f"{server.where}: TP {tp} over pods of {gpus} GPUs spans {nodes} nodes: the all-reduce at every layer "
            f"crosses the network, {network}",
            f"use --tensor-parallel-size {gpus} and --pipeline-parallel-size {nodes * (server.pipeline_parallel_size or 1)}"
            " (pipeline stages across nodes)" + ("" if efa else f", or request the nodes' {EFA_RESOURCE} devices"),
        )


# ---- capacity -------------------------------------------------------------------------------------------------------
LONG_CONTEXT_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
"""vLLM's switch that lets --max-model-len exceed the model's max_position_embeddings (for RoPE-scaled models)."""


def _allows_long_context(container: dict[str, Any]) -> bool:
    value = mapping(secret_env_names(container).get(LONG_CONTEXT_ENV)).get("value")
    return str(value).strip().lower() in ("1", "true")


def _capacity_fix(server: Server, estimated_max_model_len: int) -> str:
    """Only the remedies the manifest does not already use."""
    steps = [f"set --max-model-len={estimated_max_model_len} or less"]
    if (server.command.value("kv-cache-dtype") or "auto") == "auto":
        steps.append("add --kv-cache-dtype=fp8")
    steps.append("raise --tensor-parallel-size")
    return ", ".join(steps[:-1]) + ", or " + steps[-1]


@rule(
    "kv-cache-fits", group="Capacity", enforcement="mandatory", severity="high", kinds=SERVING,
    description="With the model, GPU and engine flags, the KV cache holds at least one --max-model-len sequence "
                "(runtime.planner.plan_capacity), and max-model-len is within the model's context.",
    why="vLLM refuses to start when the KV cache cannot hold one full-length sequence; the pod crash-loops after "
        "every load.",
    fix="Lower --max-model-len, use --kv-cache-dtype=fp8, or add GPUs (tensor parallelism).",
)
def kv_cache_fits(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        result = capacity_plan(server)
        if result.plan is None:
            if not result.refused:
                yield _cannot("KV-cache capacity", result.problem)
            continue
        plan = result.plan
        model = server.model
        reasons = list(plan.reasons)
        context = [r for r in reasons if "max_position_embeddings" in r]
        if context and model is not None:
            reasons = [r for r in reasons if r not in context]
            if not _allows_long_context(server.container):
                yield Violation(
                    f"{server.where}: --max-model-len {plan.max_model_len:,} is longer than {model.name}'s "
                    f"max_position_embeddings {model.max_position_embeddings:,}: vLLM refuses to start",
                    f"set --max-model-len={model.max_position_embeddings} or less (the model's limit); only with "
                    "RoPE scaling for longer contexts (--hf-overrides with rope_scaling) set "
                    f"{LONG_CONTEXT_ENV}=1 to allow the longer length",
                )
        if reasons:
            plan_text = "; ".join(reasons)
            yield Violation(
                f"{server.where}: {plan_text} ({plan.model} on {plan.tensor_parallel_size * plan.pipeline_parallel_size} x {plan.gpu}, "
                f"{plan.kv_cache_bytes_per_gpu / 1024**3:.2f} GiB KV cache per GPU)",
                _capacity_fix(server, plan.estimated_max_model_len) if plan.kv_cache_tokens else
                "the weights do not leave room for a KV cache: raise --tensor-parallel-size (more GPUs), use a larger "
                "GPU or a quantised (fp8/AWQ) checkpoint",
            )



@rule(
    "kv-cache-concurrency", group="Capacity", enforcement="advisory", severity="low", kinds=SERVING,
    description="When --max-num-seqs is set, the KV cache holds that many sequences at --max-model-len.",
    why="Sequences beyond what the cache holds wait or get preempted (recomputed), so the configured batch size is "
        "never reached at full length and latency grows.",
    fix="Lower --max-num-seqs to the number in the message, or add KV cache (fp8, more GPUs).",
)
def kv_cache_concurrency(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        if not server.command.has("max-num-seqs"):
            continue
        result = capacity_plan(server)
        if result.plan is None:
            if not result.refused:
                yield _cannot("KV-cache concurrency", result.problem)
            continue
        plan = result.plan
        if plan.fits and plan.max_full_length_sequences < plan.max_num_seqs:
            yield Violation(
                f"{server.where}: --max-num-seqs {plan.max_num_seqs} at --max-model-len {plan.max_model_len:,} "
                f"needs more KV cache than the {plan.kv_cache_tokens:,} tokens available: at most "
                f"{plan.max_full_length_sequences} run at full length at once",
                f"set --max-num-seqs={max(1, plan.max_full_length_sequences)} or accept preemption at full length",
            )


# ---- placement ------------------------------------------------------------------------------------------------------
@rule(
    "gpu-product-selector", group="Placement", enforcement="mandatory", severity="medium", kinds=SERVING,
    description="GPU pods of a vLLM workload select the GPU model by nodeSelector or required node affinity on a "
                f"label that names it: {', '.join(GPU_LABELS)} (a GPU instance type).",
    why="Memory, KV-cache capacity and probe budgets were sized for one GPU; on a smaller one the engine runs out of "
        "memory or its KV cache no longer fits max-model-len.",
    fix=f"Add nodeSelector: {{{GPU_PRODUCT_LABEL}: <GFD product label, e.g. NVIDIA-H100-80GB-HBM3>}}; for a "
        "Karpenter NodePool, karpenter.k8s.aws/instance-gpu-name (e.g. h100), which Karpenter knows before the node "
        "exists.",
)
def gpu_product_selector(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_vllm:
        return
    for template in _gpu_templates(res):
        if not gpu_products(template.spec):
            yield Violation(f"{template.path} requests GPUs but selects no GPU model (none of {', '.join(GPU_LABELS)})",
                            f"add nodeSelector: {{{GPU_PRODUCT_LABEL}: <product label>}} to {template.path}")


@rule(
    "gpu-toleration", group="Placement", enforcement="advisory", severity="low", kinds=SERVING,
    description="GPU pods of a vLLM workload tolerate the nvidia.com/gpu taint.",
    why="GPU node pools are usually tainted nvidia.com/gpu:NoSchedule so other pods stay off them; without the "
        "toleration the vLLM pod stays Pending.",
    fix="Add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}].",
)
def gpu_toleration(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_vllm:
        return
    for template in _gpu_templates(res):
        tolerations = [mapping(t) for t in sequence(template.spec.get("tolerations"))]
        if not any(t.get("key") == GPU_RESOURCE or (not t.get("key") and t.get("operator") == "Exists")
                   for t in tolerations):
            yield Violation(f"{template.path} has no toleration for the {GPU_RESOURCE} taint",
                            f"add tolerations: [{{key: {GPU_RESOURCE}, operator: Exists, effect: NoSchedule}}]")


# ---- storage --------------------------------------------------------------------------------------------------------
@rule(
    "model-volume-read-only", group="Storage", enforcement="mandatory", severity="medium", kinds=SERVING,
    description="The volume the model is read from is mounted readOnly: mounted where --model points, or, for a "
                "Hugging Face id, a shared volume holding the cache it is read through (--download-dir, HF_HUB_CACHE, "
                "HF_HOME or TRANSFORMERS_CACHE under the mount).",
    why="Weights are shared by every replica; a writable mount lets one pod corrupt the store for all, and "
        "ReadOnlyMany PVCs need read-only mounts to bind on several nodes.",
    fix="Set readOnly: true on the model volumeMount (download into it from a separate hydration Job).",
)
def model_volume_read_only(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        paths = model_read_paths(server)
        if not paths:
            continue
        containers = [server.container] + [
            c for t in res.templates if t.role == "worker" and t is not server.template for c in t.containers
            if is_vllm_image(c.get("image"))
        ]
        for container in containers:
            for mount in sequence(container.get("volumeMounts")):
                mount = mapping(mount)
                path = str(mount.get("mountPath", "")).rstrip("/")
                read = next(((where, how) for where, how in paths if path and (where == path or
                                                                                where.startswith(path + "/"))), None)
                if read is None:
                    continue
                where, how = read
                template = next((t for t in res.templates if container in t.containers), server.template)
                volume = mapping(template.volume(str(mount.get("name"))))
                if how != "path" and ("emptyDir" in volume or not volume):
                    continue  # a cache of the pod's own: nothing shared to protect
                claim_read_only = mapping(volume.get("persistentVolumeClaim")).get("readOnly") is True
                if mount.get("readOnly") is not True and not claim_read_only:
                    if how == "path":
                        yield Violation(
                            f"container {container.get('name')!r}: the model {where} is read from volume "
                            f"{mount.get('name')!r} mounted writable at {path}",
                            f"set readOnly: true on the {mount.get('name')!r} volumeMount",
                        )
                    else:
                        yield Violation(
                            f"container {container.get('name')!r}: the model {server.command.model_ref} is read through "
                            f"the Hugging Face cache at {where} ({how}) on shared volume {mount.get('name')!r}, "
                            f"mounted writable at {path}",
                            f"set readOnly: true on the {mount.get('name')!r} volumeMount and HF_HUB_OFFLINE=1 in the "
                            "env; fill the cache from a separate download Job",
                        )


HF_CACHE_ENV = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "TRANSFORMERS_CACHE")
"""Environment variables that move the Hugging Face cache vLLM downloads into and reads from, most specific first."""


def model_read_paths(server: Server) -> list[tuple[str, str]]:
    """(path, how) the model's weights are read from: its local path (how ``path``), or for a Hub id the cache
    directories set by --download-dir or the Hugging Face env variables (how names the setting)."""
    ref = server.command.model_ref or ""
    if ref.startswith("/"):
        return [(ref.rstrip("/"), "path")]
    if not ref or "://" in ref:
        return []
    paths = []
    download_dir = server.command.value("download-dir")
    if download_dir and download_dir.startswith("/"):
        paths.append((download_dir.rstrip("/"), "--download-dir"))
    env = secret_env_names(server.container)
    for name in HF_CACHE_ENV:
        value = mapping(env.get(name)).get("value")
        if isinstance(value, str) and value.startswith("/"):
            paths.append((value.rstrip("/"), name))
    return paths


# ---- images ---------------------------------------------------------------------------------------------------------
@rule(
    "image-pinned", group="Images", enforcement="mandatory", severity="medium", kinds=ALL_PODS,
    description="Every container image has a version tag or a digest, never none or :latest.",
    why="An unpinned image changes under a running deployment: a node that pulls later runs another vLLM with other "
        "flags, defaults and metrics than the ones these rules checked.",
    fix="Pin the image, e.g. vllm/vllm-openai:v0.33.0 (or @sha256:...).",
)
def image_pinned(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for template in res.templates:
        for container in _all_containers(template):
            image = container.get("image")
            if not isinstance(image, str) or not image:
                continue
            if "$" in image or "{{" in image:
                yield Violation(f"cannot check whether container {container.get('name')!r} is pinned: image {image!r} "
                                "is a template placeholder", "check the manifest after substitution",
                                cannot_check=True)
                continue
            _, tag, digest = image_tag(image)
            if digest:
                continue
            if tag is None or tag == "latest":
                yield Violation(f"container {container.get('name')!r}: image {image!r} is not pinned "
                                f"({'no tag' if tag is None else ':latest'})",
                                "use a version tag or a digest")


@rule(
    "vllm-image-version", group="Images", enforcement="advisory", severity="low", kinds=SERVING,
    description="The vllm/vllm-openai image is v0.33 or newer, the release these rules (flags, defaults, metric "
                "names) are written for.",
    why="Older releases lack --shutdown-timeout and export other metric names, so drain and autoscaling settings "
        "that pass here behave differently.",
    fix="Use vllm/vllm-openai:v0.33.0 or newer.",
)
def vllm_image_version(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        image = server.container.get("image")
        if not isinstance(image, str):
            continue
        repository, tag, _ = image_tag(image)
        if not tag or "vllm-openai" not in repository:
            continue  # other images' tags are their own release numbers, not vLLM's
        try:
            version = parse_version(tag)
        except ValueError:
            continue
        if version[:2] < MIN_VLLM:
            yield Violation(f"{server.where}: image {image} is vLLM {tag}, older than 0.33",
                            "use vllm/vllm-openai:v0.33.0")


# ---- multi-node -----------------------------------------------------------------------------------------------------
@rule(
    "lws-restart-policy", group="Multi-node", enforcement="mandatory", severity="high", kinds=("LeaderWorkerSet",),
    description="A multi-node LeaderWorkerSet (size > 1) uses restartPolicy RecreateGroupOnPodRestart (the default).",
    why="A vLLM replica spread over pods is one Ray/NCCL group: when one pod restarts, the others hang on collectives "
        "forever unless the whole group is recreated.",
    fix="Set spec.leaderWorkerTemplate.restartPolicy: RecreateGroupOnPodRestart (or remove it).",
)
def lws_restart_policy(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_lws or (res.lws_size or 2) <= 1:
        return
    policy = mapping(res.spec.get("leaderWorkerTemplate")).get("restartPolicy", "RecreateGroupOnPodRestart")
    if policy not in ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart"):
        yield Violation(f"spec.leaderWorkerTemplate.restartPolicy is {policy!r} for a group of {res.lws_size} pods",
                        "set spec.leaderWorkerTemplate.restartPolicy: RecreateGroupOnPodRestart")


@rule(
    "lws-workers-outlive-drain", group="Multi-node", enforcement="mandatory", severity="high",
    kinds=("LeaderWorkerSet",),
    description="In a multi-node LeaderWorkerSet, the worker pods keep running while the leader drains: their preStop "
                "sleep covers the leader's preStop + --shutdown-timeout, and their grace period covers that sleep.",
    why="When a group is deleted every pod gets SIGTERM at once; workers that stop Ray right away take the model's "
        "other shards with them, so the leader's drain fails every in-flight request anyway.",
    fix="Give the worker containers preStop: {sleep: {seconds: <leader preStop + shutdown timeout>}} and a "
        "terminationGracePeriodSeconds above it.",
)
def lws_workers_outlive_drain(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_lws or (res.lws_size or 2) <= 1:
        return
    leaders = [s for s in res.servers if s.template.role == "leader"]
    if not leaders:
        return
    leader = leaders[0]
    leader_pre_stop = pre_stop_seconds(leader.container)
    shutdown = leader.command.int_flag("shutdown-timeout", 0)
    if leader_pre_stop is None or shutdown is None:
        yield _cannot("the workers' drain", "the leader's preStop or --shutdown-timeout is not a literal number")
        return
    needed = leader_pre_stop + shutdown
    for template in res.templates:
        if template.role != "worker":
            continue
        for container in template.containers:
            if not (gpu_limit(container) or is_vllm_image(container.get("image"))):
                continue
            worker_pre_stop = pre_stop_seconds(container)
            name = container.get("name")
            if worker_pre_stop is None:
                yield _cannot("the workers' drain", f"worker container {name!r} has a preStop hook of unknown length")
            elif worker_pre_stop < needed:
                yield Violation(
                    f"worker container {name!r}: preStop sleeps {worker_pre_stop} s, but the leader drains for preStop "
                    f"{leader_pre_stop} s + --shutdown-timeout {shutdown} s = {needed} s",
                    f"set lifecycle.preStop.sleep.seconds: {needed} on {name!r} in {template.path}",
                )
            elif template.grace_seconds <= worker_pre_stop:
                yield Violation(
                    f"worker pods: terminationGracePeriodSeconds {template.grace_seconds} s does not outlast the "
                    f"{worker_pre_stop} s preStop sleep of {name!r}",
                    f"set terminationGracePeriodSeconds: {worker_pre_stop + 10} in {template.path}",
                )


# ---- observability --------------------------------------------------------------------------------------------------
@rule(
    "scrape-annotation-port", group="Observability", enforcement="advisory", severity="low",
    kinds=("Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"),
    description="A pod template of a vLLM workload annotated prometheus.io/scrape: 'true' runs a vLLM server on the "
                "annotated prometheus.io/port (default: the server's --port).",
    why="Prometheus scrapes every annotated pod; on pods where nothing serves that port (LeaderWorkerSet workers run "
        "only Ray) the target is down forever, which pages whoever alerts on `up == 0`.",
    fix="Remove the prometheus.io annotations from templates without a vLLM server, or point them at a port that "
        "serves /metrics.",
)
def scrape_annotation_port(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_vllm:
        return
    for template in res.templates:
        notes = template.annotations
        if notes.get("prometheus.io/scrape") != "true":
            continue
        servers = [s for s in res.servers if s.template is template]
        annotated = as_int(notes.get("prometheus.io/port"))
        ports = {vllm_port(s) for s in servers}
        if not servers:
            yield Violation(f"{template.path} is annotated prometheus.io/scrape but runs no vLLM server "
                            f"(port {notes.get('prometheus.io/port', 'unset')} serves no /metrics there)",
                            f"remove the prometheus.io annotations from {template.path}")
        elif annotated is not None and annotated not in ports:
            yield Violation(f"{template.path}: prometheus.io/port {annotated} but vLLM serves /metrics on "
                            f"{', '.join(map(str, sorted(p for p in ports if p)))}",
                            f"set prometheus.io/port: '{min(p for p in ports if p)}'")


# ---- security -------------------------------------------------------------------------------------------------------
@rule(
    "no-privileged", group="Security", enforcement="mandatory", severity="high", kinds=SERVING,
    description="No container of a vLLM workload is privileged or sets allowPrivilegeEscalation: true.",
    why="vLLM needs no host privileges (the GPU comes from the device plugin); a privileged inference server that "
        "parses untrusted prompts and downloads model code is a node compromise away.",
    fix="Remove securityContext.privileged and set allowPrivilegeEscalation: false.",
)
def no_privileged(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not res.is_vllm:
        return
    for template in res.templates:
        for container in _all_containers(template):
            context = mapping(container.get("securityContext"))
            for key in ("privileged", "allowPrivilegeEscalation"):
                if context.get(key) is True:
                    yield Violation(f"container {container.get('name')!r} ({template.path}) sets "
                                    f"securityContext.{key}: true", f"remove securityContext.{key} or set it false")


@rule(
    "no-plaintext-secrets", group="Security", enforcement="mandatory", severity="critical", kinds=ALL_PODS,
    description="API keys and tokens (VLLM_API_KEY, HF_TOKEN, *_API_KEY, *_TOKEN, ...) come from Secrets, not "
                "literal env values or a literal --api-key / --hf-token argument.",
    why="Literal values are readable by anyone who can read the workload (and end up in Git, Pulumi state and "
        "rendered YAML).",
    fix="Use env valueFrom.secretKeyRef, and pass --api-key=$(VLLM_API_KEY) or let vLLM read VLLM_API_KEY.",
)
def no_plaintext_secrets(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for template in res.templates:
        for container in _all_containers(template):
            name = container.get("name")
            for env_name, env in secret_env_names(container).items():
                value = env.get("value")
                if is_secret_like_env(env_name) and isinstance(value, str) and value and not value.startswith("$("):
                    yield Violation(f"container {name!r}: env {env_name} has a literal value",
                                    f"use env {env_name} valueFrom.secretKeyRef")
            command = res.command_of(container)
            if command is None:
                continue
            for flag in ("api-key", "hf-token"):
                value = command.value(flag)
                if value and not value.startswith("$"):
                    yield Violation(f"container {name!r}: --{flag} is given literally in the arguments",
                                    f"remove the literal; set env from a Secret and use --{flag}=$(ENV_NAME)")


@rule(
    "removed-vllm-flags", group="vLLM flags and metrics", enforcement="mandatory", severity="high", kinds=SERVING,
    description="No vLLM flag that vLLM 0.33's parser rejects (runtime.engine.REMOVED_FLAGS, e.g. "
                "--disable-graceful-shutdown).",
    why="vLLM exits at argument parsing, so every pod crash-loops; these flags come from older guides.",
    fix="Drop the flag; the message says what replaced it.",
)
def removed_vllm_flags(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    for server in res.servers:
        version = server.version
        for flag in dict.fromkeys(server.command.flag_names):
            replacement = REMOVED_FLAGS.get(f"--{flag}")
            if not replacement:
                continue
            if version.known and flag in FLAG_HISTORY and flag_missing_in(flag, version.version) is None:
                continue  # the image's own vLLM still has the flag (the version rule covers upgrading)
            removed = FLAG_HISTORY[flag].removed if flag in FLAG_HISTORY else None
            since = f" (removed in {release(removed)})" if removed else ""
            yield Violation(f"{server.where}: --{flag} does not exist in vLLM {version.text}{since}{version.note}",
                            replacement)


def _removed_metrics(text: str) -> list[str]:
    if not _REMOVED_METRIC.search(text):
        return []
    names = (re.sub(r"_(bucket|sum|count|total|created)$", "", m) for m in _METRIC.findall(text))
    return [m for m in dict.fromkeys(names) if m in REMOVED_METRICS]


@rule(
    "removed-vllm-metrics", group="vLLM flags and metrics", enforcement="mandatory", severity="medium",
    kinds=("ScaledObject", "PrometheusRule", "ConfigMap"), text_filter=tuple(REMOVED_METRICS),
    description="KEDA queries, alert rules and dashboards do not use metrics vLLM 0.33 no longer exports "
                "(vllm:gpu_cache_usage_perc, vllm:time_per_output_token_seconds, ...).",
    why="A query on a metric that no longer exists returns nothing: the autoscaler never scales, the alert never "
        "fires, the panel stays empty, and nothing reports an error.",
    fix="Use the vLLM 0.33 name given in the message (vllm:kv_cache_usage_perc for KV-cache use).",
)
def removed_vllm_metrics(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    texts: list[tuple[str, str]] = []
    if res.kind == "ScaledObject":
        for i, trigger in enumerate(sequence(res.spec.get("triggers"))):
            query = mapping(mapping(trigger).get("metadata")).get("query")
            if isinstance(query, str):
                texts.append((f"spec.triggers[{i}].metadata.query", query))
    elif res.kind == "PrometheusRule":
        for g, group in enumerate(sequence(res.spec.get("groups"))):
            for r, item in enumerate(sequence(mapping(group).get("rules"))):
                expr = mapping(item).get("expr")
                if isinstance(expr, str):
                    texts.append((f"spec.groups[{g}].rules[{r}].expr", expr))
    elif res.kind == "ConfigMap":
        for key, value in mapping(res.obj.get("data")).items():
            if isinstance(value, str) and "vllm:" in value:
                texts.append((f"data.{key}", value))
    for where, text in texts:
        for metric in _removed_metrics(text):
            history = METRIC_HISTORY.get(metric)
            since = f" (gone by default since {release(history.removed)}: {history.source})" if (
                history is not None and history.removed is not None) else ""
            yield Violation(f"{where} uses {metric}, which vLLM 0.33 no longer exports{since}",
                            f"replace it with {REMOVED_METRICS[metric]}")


def env_from_secret(container: dict[str, Any], name: str) -> bool | None:
    """True when env ``name`` comes from a Secret, False when it is literal, None when absent."""
    env = secret_env_names(container).get(name)
    if env is None:
        if any(mapping(item).get("secretRef") for item in sequence(container.get("envFrom"))):
            return True  # the Secret's keys are not visible here; assume it carries the variable
        return None
    if "valueFrom" in env:
        return bool(mapping(mapping(env.get("valueFrom")).get("secretKeyRef")))
    return False


def server_has_api_key(server: Server) -> bool:
    """vLLM protects /v1 with VLLM_API_KEY from a Secret, or --api-key=$(VAR) with VAR from a Secret."""
    if env_from_secret(server.container, "VLLM_API_KEY") is not None:
        return True
    value = server.command.value("api-key")
    if value:
        match = re.fullmatch(r"\$\(?\{?([A-Za-z_][A-Za-z0-9_]*)\}?\)?", value)
        return match is not None and env_from_secret(server.container, match.group(1)) is not None
    return False



# ---- coverage -------------------------------------------------------------------------------------------------------
@rule(
    "vllm-workload-readable", group="Coverage", enforcement="advisory", severity="low", kinds=(ANY_KIND,),
    text_filter=("vllm", "VLLM"),
    description="Every vLLM workload is one the checker can read: a vLLM container in a kind it does not know (another "
                "operator's custom resource), or a known kind whose vLLM engine flags are not in the manifest (Ray "
                "Serve apps, KServe's controller-filled containers, custom entrypoints), is reported as 'cannot "
                "check' naming the kind.",
    why="Without this an unchecked workload looks exactly like a clean one: 0 findings, exit 0.",
    fix="Check what the operator renders (kubectl get pods -o yaml | vllm-pulumi-check -), or run vLLM with `vllm "
        "serve` flags in a Deployment or LeaderWorkerSet.",
)
def vllm_workload_readable(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    if res.kind in NON_WORKLOAD_KINDS:
        return
    if res.kind in POD_KINDS:
        if res.unread_engine:
            yield Violation(f"cannot check the vLLM engine of this {res.kind}: {res.unread_engine}; startup, drain, "
                            "capacity and flag rules skipped it (images, GPU placement and pod settings were checked)",
                            "check the rendered pods, or pass the engine flags on a `vllm serve` command line",
                            cannot_check=True)
        return
    found = [path for path, _ in vllm_containers(res.spec, "spec")]
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        yield Violation(f"cannot check {res.kind} ({res.api_version}): it runs vLLM ({shown}) in a kind the checker "
                        "cannot read, so no rule checked it",
                        "check the pods its operator creates (kubectl get pods -o yaml | vllm-pulumi-check -)",
                        cannot_check=True)
