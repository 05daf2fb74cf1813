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


def time_program(models: int) -> tuple[float, int]:
    """Seconds for one program run with `models` deployments, and how many resources it registered."""
    secrets = {"vllmApiKey": "bench-key", "hfToken": "bench-token"}
    config = {f"{PROJECT}:deployment": json.dumps(stack_with(models))}
    config.update({f"{PROJECT}:{key}": value for key, value in secrets.items()})
    mocks = CountingMocks()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="bench", preview=False)
    pulumi.runtime.set_all_config(config, [f"{PROJECT}:{key}" for key in secrets])
    program = load_program()
    start = time.perf_counter()
    run_under_mocks(program.program)
    return time.perf_counter() - start, mocks.count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the median is reported")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # the planner's warnings, once per model, are not what we time
    time_program(1)  # warm imports and caches
    results: dict[int, tuple[float, int]] = {}
    for count in COUNTS:
        runs = [time_program(count) for _ in range(args.repeat)]
        results[count] = (statistics.median(seconds for seconds, _ in runs), runs[0][1])

    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (timings inflate when the machine is shared)")
    print(f"{'models':>6}  {'resources':>9}  {'seconds':>8}  {'ms/model':>8}  {'ms per extra model':>18}")
    previous: tuple[int, float] | None = None
    slopes: list[float] = []
    for count in COUNTS:
        seconds, resources = results[count]
        slope = ""
        if previous is not None:
            value = (seconds - previous[1]) * 1000 / (count - previous[0])
            slopes.append(value)
            slope = f"{value:.1f}"
        print(f"{count:>6}  {resources:>9}  {seconds:>8.3f}  {seconds * 1000 / count:>8.1f}  {slope:>18}")
        previous = (count, seconds)
    worst_slope = max(slopes)
    at_100 = results[100][0]
    slope_ok = worst_slope <= TARGET_MS_PER_EXTRA_MODEL
    total_ok = at_100 < TARGET_SECONDS_AT_100
    print(f"each extra model adds at most {TARGET_MS_PER_EXTRA_MODEL:.0f} ms: worst {worst_slope:.1f} ms -> "
          f"{'met' if slope_ok else 'NOT met'}")
    print(f"100 models under {TARGET_SECONDS_AT_100:.0f} s: {at_100:.2f} s -> {'met' if total_ok else 'NOT met'}")
    return 0 if slope_ok and total_ok else 1


if __name__ == "__main__":
    sys.exit(main())
