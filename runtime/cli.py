"""``python -m runtime plan``: the capacity plan of one model on one GPU, as a table, JSON or a chart.

Exit status: 0 the settings fit, 1 they are valid but the KV cache cannot hold one max-model-len sequence,
2 the input is unusable (unknown model or GPU, a parallel size vLLM would refuse), with a one-line reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, get_args

import yaml
from pydantic import ValidationError

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GIB, GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.models import ModelFacts, resolve_model
from vllm_pulumi.runtime.planning.capacity import (
    CapacityPlan,
    concurrency_table,
    decode_time_per_token_floor_seconds,
    plan_capacity,
)
from vllm_pulumi.runtime.planning.deployment import load_deployment
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout, plan_layout
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.startup import (
    RUNAI_STREAMER_KINDS,
    STORAGE_READ_GB_PER_SECOND,
    Phase,
    StartupBudget,
    startup_budget,
)
from vllm_pulumi.runtime.spec.engine import DEFAULT_GPU_MEMORY_UTILIZATION, EngineSettings, KvCacheDtype
from vllm_pulumi.runtime.spec.validation import SpecError

CONTEXT_LENGTHS = [2048, 4096, 8192, 16384, 32768, 65536, 131072]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runtime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="KV-cache capacity plan for a model on a GPU")
    plan.add_argument("--model", help="catalog id, Hugging Face id, or path to config.json")
    plan.add_argument("--gpu", help="catalog id or nvidia.com/gpu.product label")
    plan.add_argument("--stack-file", metavar="Pulumi.STACK.yaml",
                      help="plan every model of a stack file instead (its vllm-pulumi:deployment settings)")
    plan.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    plan.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    plan.add_argument("--kv-cache-dtype", default="auto", choices=get_args(KvCacheDtype))
    plan.add_argument("--max-model-len", type=int, help="tokens per sequence (default: the model's maximum)")
    plan.add_argument("--max-num-seqs", type=int, help="sequences per batch (default: vLLM's for the GPU)")
    plan.add_argument("--gpu-memory-utilization", type=float, default=DEFAULT_GPU_MEMORY_UTILIZATION)
    plan.add_argument("--gpus-per-node", type=int, help="GPUs of one node (default: the largest known node)")
    plan.add_argument("--storage", default="local-nvme", choices=sorted(STORAGE_READ_GB_PER_SECOND),
                      help="where weights are read from, for the startup budget")
    plan.add_argument("--compile-cache-warm", action="store_true",
                      help="budget a warm shared compile cache (only once a pod of this model has started)")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--plot", metavar="FILE.png", help="write a KV cache vs context length chart")
    return parser


def startup_timeline(budget: StartupBudget) -> dict[str, object]:
    """The budget's phases: node phases before the container, then from container start (cold and warm compile)."""
    def rows(phases: tuple[Phase, ...]) -> list[dict[str, object]]:
        return [{"phase": p.name, "seconds": round(p.seconds, 1), "basis": p.basis} for p in phases]

    return {
        "node_phases": rows(budget.node_phases),
        "node_seconds": budget.node_seconds,
        "container_phases": rows(budget.phases),
        "compile_cold_seconds": budget.compile_cold_seconds,
        "compile_warm_seconds": budget.compile_warm_seconds,
        "compile_cache_warm": budget.compile_cache_warm,
        "safety_factor": budget.safety_factor,
        "cold_total_seconds": budget.cold_total_seconds,
        "warm_total_seconds": budget.warm_total_seconds,
    }


def _timeline_table(timeline: dict[str, Any], budget_seconds: int) -> list[str]:
    lines = ["  startup timeline (node phases happen only when no node is free; not in the startup probe)"]
    lines += [f"    {row['phase']:<26} {row['seconds']:>7.0f} s  {row['basis']}" for row in timeline["node_phases"]]
    lines.append(f"    {'-- container starts':<26} {timeline['node_seconds']:>7} s  after the pod is created")
    lines += [f"    {row['phase']:<26} {row['seconds']:>7.0f} s  {row['basis']}"
              for row in timeline["container_phases"]]
    lines.append(
        f"    {'budget (x' + str(timeline['safety_factor']) + ')':<26} {budget_seconds:>7} s  cold compile "
        f"{timeline['cold_total_seconds']} s, warm compile {timeline['warm_total_seconds']} s"
        + (" (warm declared)" if timeline["compile_cache_warm"] else " (cold counts until the cache is declared warm)"))
    return lines


def build_report(model: ModelFacts, gpu: GpuFacts, engine: EngineSettings, layout: ParallelLayout,
                 plan: CapacityPlan, startup_budget_seconds: int,
                 startup: StartupBudget | None = None) -> dict[str, object]:
    """The plan and its context as one flat record (the JSON output, and what the table prints)."""
    report: dict[str, object] = plan.to_dict()
    report.update({
        "hf_id": model.hf_id,
        "attention": model.attention,
        "num_parameters": model.num_parameters,
        "checkpoint_bytes": model.checkpoint_bytes,
        "layout": layout.layout,
        "gpus_per_pod": layout.gpus_per_pod,
        "pods_per_replica": layout.size,
        "startup_budget_seconds": startup_budget_seconds,
        "startup_timeline": startup_timeline(startup) if startup is not None else None,
        "decode_time_per_token_floor_seconds": round(
            decode_time_per_token_floor_seconds(model, gpu, engine, plan.max_model_len), 6),
        "concurrency_by_context": dict(concurrency_table(plan, CONTEXT_LENGTHS)),
    })
    return report


def _groups_text(report: dict[str, object]) -> str:
    """vLLM's KV cache groups, e.g. "7: 6 x 1024-token window, 1 x full attention; 16,709 blocks"."""
    windows: list[int | None] = report["kv_cache_group_windows"]  # type: ignore[assignment]
    kinds = {window: windows.count(window) for window in windows}
    parts = [f"{count} x {'full attention' if window is None else f'{window}-token window'}"
             for window, count in kinds.items()]
    text = f"{len(windows)}: {', '.join(parts)}; {int(report['kv_cache_blocks']):,} blocks"  # type: ignore[call-overload]
    if any(window is not None for window in windows):
        text += f", {int(report['max_in_flight_tokens']):,} tokens in flight"  # type: ignore[call-overload]
    return text


def _table(report: dict[str, object], model: ModelFacts, gpu: GpuFacts) -> str:
    def gib(key: str) -> str:
        return f"{int(report[key]) / GIB:,.2f} GiB"  # type: ignore[call-overload]

    lines = [
        f"{model.name} ({model.hf_id or 'local config'}) on {report['gpus_per_replica']} x {gpu.id} "
        f"({gpu.product_label}, {gpu.memory_gib:.2f} GiB)",
        f"  layout                     {report['layout']}: {report['pods_per_replica']} pod(s) x "
        f"{report['gpus_per_pod']} GPU(s), TP={report['tensor_parallel_size']} PP={report['pipeline_parallel_size']}",
        f"  attention                  {model.attention}, {model.num_hidden_layers} layers, "
        f"{model.num_key_value_heads} KV heads x {model.kv_head_size}",
        f"  KV bytes per token per GPU {int(report['kv_bytes_per_token_per_gpu']):,} "  # type: ignore[call-overload]
        f"({report['kv_cache_dtype']}, {report['kv_dtype_bytes']} B)",
        f"  usable memory per GPU      {report['gpu_memory_utilization']} x {gpu.memory_gib:.2f} GiB",
        f"  weights per GPU            {gib('weights_bytes_per_gpu')}",
        f"  overhead per GPU           {gib('activation_peak_bytes')} activations + {gib('non_torch_bytes')} "
        f"non-torch + {gib('cuda_graph_bytes')} CUDA graphs",
        f"  KV cache per GPU           {gib('kv_cache_bytes_per_gpu')}",
        f"  KV cache groups            {_groups_text(report)}",
        f"  KV cache tokens (replica)  {int(report['kv_cache_tokens']):,}",  # type: ignore[call-overload]
        f"  max concurrency            {report['max_concurrency']}x at max_model_len "
        f"{int(report['max_model_len']):,}",  # type: ignore[call-overload]
        f"  startup budget             {report['startup_budget_seconds']} s",
        f"  decode floor (batch 1)     {float(report['decode_time_per_token_floor_seconds']) * 1000:.1f} ms/token",  # type: ignore[arg-type]
        f"  verdict                    {'fits' if report['fits'] else 'DOES NOT FIT'}",
    ]
    if report.get("startup_timeline"):
        lines += _timeline_table(report["startup_timeline"],  # type: ignore[arg-type]
                                 int(report["startup_budget_seconds"]))  # type: ignore[call-overload]
    lines += [f"    - {reason}" for reason in report["reasons"]]  # type: ignore[attr-defined]
    lines += [f"  warning: {warning}" for warning in report["warnings"]]  # type: ignore[attr-defined]
    lines += ["", "  context tokens   concurrent sequences"]
    for length, count in report["concurrency_by_context"].items():  # type: ignore[attr-defined]
        lines.append(f"  {length:>14,}   {count:>20,}")
    return "\n".join(lines)


def placement_report(plan: ServingPlan) -> dict[str, object]:
    """The node shape the plan placed pods on (and whether it was assumed), and the rollout it derived."""
    shape, rollout = plan.node_shape, plan.rollout
    return {
        "node_shape": {
            "pool": shape.pool, "provisioner": shape.provisioner, "gpu_names": list(shape.gpu_names),
            "stated": shape.stated, "basis": shape.basis, "gpu": shape.gpu.id,
            "gpus": shape.gpus, "instance_type": shape.instance_type,
            "capacity_cpu_millicores": shape.capacity_cpu_millicores,
            "capacity_memory_mib": shape.capacity_memory_mib,
            "capacity_ephemeral_storage_gib": shape.capacity_ephemeral_storage_gib,
            "allocatable_cpu_millicores": shape.allocatable_cpu_millicores,
            "allocatable_memory_mib": shape.allocatable_memory_mib,
            "allocatable_ephemeral_storage_gib": shape.allocatable_ephemeral_storage_gib,
            "max_pods": shape.max_pods, "min_nodes": shape.min_nodes, "max_nodes": shape.max_nodes,
        },
        "pod_requests": {"gpus": plan.layout.gpus_per_pod, "cpu": plan.cpu_request,
                         "memory_gib": plan.memory_request_gib, "ephemeral_storage_gib": plan.ephemeral_storage_gib},
        "rollout": {"max_surge": rollout.max_surge, "max_unavailable": rollout.max_unavailable,
                    "max_replicas": rollout.max_replicas, "replica_capacity": rollout.replica_capacity,
                    "reason": rollout.reason},
    }


PROVISIONING = {
    "managed-node-group": "EKS managed node group {pool} (fixed size between min_size and max_size)",
    "karpenter": "Karpenter NodePool {pool} with its EC2NodeClass: nodes launched for Pending pods, GPUs {names}",
    "auto-mode": "EKS Auto Mode NodePool {pool} on the built-in NodeClass default: nodes launched for Pending pods, "
                 "GPUs {names}",
    "existing": "nodes the stack does not provision ({pool})",
}


def _provisioning(shape: dict[str, Any]) -> str:
    return f"{shape['provisioner']}: " + PROVISIONING[shape["provisioner"]].format(
        pool=shape["pool"], names="/".join(shape["gpu_names"]))


def _placement_table(report: dict[str, object]) -> str:
    shape: dict[str, Any] = report["node_shape"]  # type: ignore[assignment]
    pod: dict[str, Any] = report["pod_requests"]  # type: ignore[assignment]
    rollout: dict[str, Any] = report["rollout"]  # type: ignore[assignment]
    kind = f"{shape['instance_type']}: " if shape["instance_type"] else ""
    count = (f"{shape['max_nodes']}" if shape["min_nodes"] == shape["max_nodes"]
             else f"{shape['min_nodes']}-{shape['max_nodes']}")
    return "\n".join([
        f"  node shape                 {'stated' if shape['stated'] else 'ASSUMED'}: pool {shape['pool']}, "
        f"{count} node(s) of {kind}{shape['gpus']} x {shape['gpu']}",
        f"    basis                    {shape['basis']}",
        f"    provisioning             {_provisioning(shape)}",
        f"    allocatable per node     {shape['allocatable_cpu_millicores'] / 1000:g} CPU, "
        f"{shape['allocatable_memory_mib'] / 1024:,.1f} GiB memory, {shape['allocatable_ephemeral_storage_gib']} "
        f"GiB disk, {shape['max_pods']} pods",
        f"  pod requests               {pod['gpus']} GPU(s), {pod['cpu']} CPU, {pod['memory_gib']} GiB memory "
        f"(incl. /dev/shm), emptyDirs up to {pod['ephemeral_storage_gib']} GiB",
        f"  rollout                    maxSurge {rollout['max_surge']}, maxUnavailable {rollout['max_unavailable']} "
        f"({rollout['replica_capacity']} replica(s) fit at max scale, {rollout['max_replicas']} needed)",
        f"    why                      {rollout['reason']}",
    ])


def _plot(path: str, model: ModelFacts, gpu: GpuFacts, plan: CapacityPlan) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlanningError("--plot", path, "matplotlib is not installed", "pip install 'vllm-pulumi[plot]'") from exc
    lengths = [1024 * 2**i for i in range(8)]
    figure, axes = plt.subplots(figsize=(8, 5))
    for sequences in (1, 4, 16):
        gib = [plan.kv_bytes_per_token_per_gpu * n * sequences / GIB for n in lengths]
        axes.plot([n / 1024 for n in lengths], gib, marker="o", label=f"{sequences} sequence(s)")
    axes.axhline(plan.kv_cache_bytes_per_gpu / GIB, color="red", linestyle="--",
                 label=f"KV memory available per GPU ({plan.kv_cache_bytes_per_gpu / GIB:.1f} GiB)")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log", base=2)
    axes.set_xlabel("context length (K tokens)")
    axes.set_ylabel("KV cache per GPU (GiB)")
    axes.set_title(f"{model.name} on {gpu.id}: TP={plan.tensor_parallel_size}, KV {plan.kv_cache_dtype}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _plan_stack_file(path: str, as_json: bool) -> int:
    """Plan each model of a stack file with the settings the stack derives (what `pulumi up` would deploy)."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = (yaml.safe_load(handle) or {}).get("config", {}).get("vllm-pulumi:deployment")
        plans = load_deployment(raw, root="vllm-pulumi:deployment").plans
    except (OSError, yaml.YAMLError) as error:
        print(f"error: --stack-file={path!r}: cannot read it ({error})", file=sys.stderr)
        return 2
    except SpecError as error:
        print(f"error: --stack-file={path!r}: {error}", file=sys.stderr)
        return 2
    reports = []
    for plan in plans:  # exactly what the program derives: layout, overhead override, startup budget override
        report = build_report(plan.model, plan.gpu, plan.spec.engine, plan.layout, plan.capacity,
                              plan.startup_budget_seconds, plan.startup)
        report["deployment"] = plan.spec.name
        report.update(placement_report(plan))
        # The program's own warnings (placement, rollout, parallelism), not only the KV planner's.
        report["warnings"] = list(plan.warnings)
        reports.append(report)
        if not as_json:
            print(f"[{plan.spec.name}] " + _table(report, plan.model, plan.gpu) + "\n" + _placement_table(report)
                  + "\n")
    if as_json:
        print(json.dumps(reports, indent=2))
    return 0 if all(report["fits"] for report in reports) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.stack_file:
        return _plan_stack_file(args.stack_file, args.json)
    if not args.model or not args.gpu:
        print("error: --model and --gpu are required (or --stack-file)", file=sys.stderr)
        return 2
    try:
        model = resolve_model(args.model)
        gpu = find_gpu(args.gpu)
        engine = EngineSettings(
            tensor_parallel_size=args.tp, pipeline_parallel_size=args.pp, kv_cache_dtype=args.kv_cache_dtype,
            max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
            gpu_memory_utilization=args.gpu_memory_utilization,
        )
        layout = plan_layout(model, engine.tensor_parallel_size, engine.pipeline_parallel_size,
                             args.gpus_per_node or gpu.max_gpus_per_node, setting="--tp")
        plan = plan_capacity(model, gpu, engine)
        budget = startup_budget(
            model.checkpoint_bytes, args.storage, pods_per_replica=layout.size,
            num_hidden_layers=model.num_hidden_layers, max_num_seqs=plan.max_num_seqs,
            gpus_per_replica=plan.gpus_per_replica, gpu_id=gpu.id,
            runai_streamer=args.storage in RUNAI_STREAMER_KINDS or args.storage == "s3-runai-streamer",
            compile_cache_warm=args.compile_cache_warm,
        )
        report = build_report(model, gpu, engine, layout, plan, budget.total_seconds, budget)
        if args.plot:
            _plot(args.plot, model, gpu, plan)
    except PlanningError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 2
    except ValidationError as error:
        first = error.errors()[0]
        print(f"error: --{'-'.join(map(str, first['loc'])).replace('_', '-')}={first.get('input')!r}: "
              f"{first['msg']}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else _table(report, model, gpu))
    return 0 if report["fits"] else 1
