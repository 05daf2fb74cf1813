"""Program time under Pulumi mocks with 1, 10 and 100 model deployments in one stack (not run by pytest).

    .venv/bin/python bench/bench_program.py [--repeat 3]

Times the whole program as `pulumi up` runs it, minus the engine: parse and check the spec, plan every model, build
every object and register every resource (mock monitor, in-process). Targets: each extra model adds at most 30 ms,
and 100 models take under 5 s.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pulumi  # noqa: E402

from tests.components.mocking import PROJECT, RecordingMocks, load_program, run_under_mocks  # noqa: E402

COUNTS = (1, 10, 100)
TARGET_MS_PER_EXTRA_MODEL = 30.0
TARGET_SECONDS_AT_100 = 5.0

MODEL: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "gpu": "l4",
    "gpus_per_node": 1,
    "engine": {"max_model_len": 8192, "kv_cache_dtype": "fp8", "max_num_seqs": 16},
    "storage": {"kind": "efs", "storage_class": "efs-sc", "hf_token": {"pulumi_secret": "hfToken"}},
    "api_key": {"pulumi_secret": "vllmApiKey"},
    "autoscaling": {"min_replicas": 1, "max_replicas": 4},
    "network": {"allowed_namespaces": ["apps"]},
}


def stack_with(models: int) -> dict[str, Any]:
    entries = []
    for index in range(models):
        entry = copy.deepcopy(MODEL)
        entry["name"] = f"model-{index:03d}"
        entries.append(entry)
    return {
        "namespace": "inference",
        "cluster": {"mode": "kubeconfig"},
        "addons": {"gpu_operator": {"install": True}, "keda": {"install": True}},
        "models": entries,
    }


class CountingMocks(RecordingMocks):
    """The tests' mocks (EKS lookups, auto-names) that only count registrations: no recording cost in the timing."""

    def __init__(self) -> None:
        self.count = 0

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.count += 1
        return super().new_resource(args)


def time_program(models: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds) of one program run with `models` deployments, and the resources it registered.

    CPU time is this process's (all threads: the mock monitor registers on an executor thread); on a shared machine
    it is the stable measure, wall time grows with the load of everything else."""
    secrets = {"vllmApiKey": "bench-key", "hfToken": "bench-token"}
    config = {f"{PROJECT}:deployment": json.dumps(stack_with(models))}
    config.update({f"{PROJECT}:{key}": value for key, value in secrets.items()})
    mocks = CountingMocks()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="bench", preview=False)
    pulumi.runtime.set_all_config(config, [f"{PROJECT}:{key}" for key in secrets])
    program = load_program()
    start, start_cpu = time.perf_counter(), time.process_time()
    run_under_mocks(program.program)
    return time.perf_counter() - start, time.process_time() - start_cpu, mocks.count


def time_in_fresh_process(models: int) -> tuple[float, float, int]:
    """time_program in its own interpreter (after a 1-model warm-up run), so no run inherits another's heap."""
    output = subprocess.run([sys.executable, __file__, "--one", str(models)], check=True, capture_output=True,
                            text=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    return float(result["wall"]), float(result["cpu"]), int(result["resources"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the median is reported")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # the planner's warnings, once per model, are not what we time
    if args.one is not None:
        time_program(1)  # imports and first-use caches
        wall, cpu, resources = time_program(args.one)
        print(json.dumps({"wall": wall, "cpu": cpu, "resources": resources}))
        return 0

    results: dict[int, tuple[float, float, int]] = {}
    for count in COUNTS:
        runs = [time_in_fresh_process(count) for _ in range(args.repeat)]
        results[count] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2])

    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (wall time inflates when the machine is shared)")
    print(f"{'models':>6}  {'resources':>9}  {'wall s':>7}  {'CPU s':>7}  {'CPU ms/model':>12}  "
          f"{'CPU ms per extra model':>22}  {'wall ms per extra model':>23}")
    previous: tuple[int, float, float] | None = None
    slopes: list[float] = []
    for count in COUNTS:
        wall, cpu, resources = results[count]
        slope = wall_slope = ""
        if previous is not None:
            value = (cpu - previous[2]) * 1000 / (count - previous[0])
            slopes.append(value)
            slope = f"{value:.1f}"
            wall_slope = f"{(wall - previous[1]) * 1000 / (count - previous[0]):.1f}"
        print(f"{count:>6}  {resources:>9}  {wall:>7.3f}  {cpu:>7.3f}  {cpu * 1000 / count:>12.1f}  {slope:>22}  "
              f"{wall_slope:>23}")
        previous = (count, wall, cpu)
    worst_slope = max(slopes)
    wall_100, cpu_100, _ = results[100]
    slope_ok = worst_slope <= TARGET_MS_PER_EXTRA_MODEL
    total_ok = cpu_100 < TARGET_SECONDS_AT_100
    print(f"each extra model adds at most {TARGET_MS_PER_EXTRA_MODEL:.0f} ms (CPU): worst {worst_slope:.1f} ms -> "
          f"{'met' if slope_ok else 'NOT met'}")
    print(f"100 models under {TARGET_SECONDS_AT_100:.0f} s: CPU {cpu_100:.2f} s, wall {wall_100:.2f} s -> "
          f"{'met' if total_ok else 'NOT met'}{'' if wall_100 < TARGET_SECONDS_AT_100 else ' on CPU time only'}")
    return 0 if slope_ok and total_ok else 1


if __name__ == "__main__":
    sys.exit(main())
