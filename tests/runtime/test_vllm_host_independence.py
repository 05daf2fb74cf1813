"""No answer the cross-checks take from vLLM depends on the CPU of the machine that runs them.

vLLM's CPU platform decides some settings by the host CPU (vllm/platforms/cpu.py check_and_update_config: AMX,
AVX-512 BF16, the architecture). scripts/vllm_facts_probe.py puts back what a GPU platform leaves in their place
(HOST_DEPENDENT_SETTINGS). Here the probe runs under every CPU of its HOST_CPUS table (it makes torch and vLLM report
that CPU), over every request of the cross-check and an engine-verdict grid aimed at those settings, and each CPU must
give the same answers. The same runs without the pinning must differ on the known host-dependent case, or the
simulation did not reach vLLM's branch and the equality above would prove nothing.
"""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.test_vllm_crosscheck import (
    KV_CASES,
    crosscheck_requests,
    kv_capacity_request,
    run_probe_batch,
    vllm_python,
)
from tests.runtime.test_vllm_differential import _args_from_settings
from tests.runtime.test_vllm_verdicts import PINNED
from vllm_pulumi.runtime.facts.gpus import GIB, find_gpu
from vllm_pulumi.runtime.facts.model_catalog import CATALOG

pytestmark = pytest.mark.vllm

# The probe's HOST_CPUS (its "host" answer lists them: a CPU added there fails the test until it is run here too).
HOST_CPUS = ("amx", "avx512-bf16", "avx512", "avx2", "aarch64")
# The case each host-dependent branch was found on, one of the cross-check's KV cases: DeepSeek V3 (MLA) at 32K with
# 8,192 batched tokens; without AMX the CPU platform raises the batched tokens to max_model_len (so 2 x 32,768 tokens
# in flight instead of 2 x 8,192).
KNOWN_HOST_DEPENDENT = ("deepseek-v3", 1, 1, "auto", 32768, 8192, 20 * GIB)
assert KNOWN_HOST_DEPENDENT in KV_CASES


def _engine_grid() -> list[dict[str, Any]]:
    """Engine settings that touch what the CPU platform decides by the host: chunked prefill, prefix caching and the
    batch size (MLA branch), block size (MLA and DeepSeek-V4 branches), dtype (the platform's supported dtypes)."""
    grid = []
    for chunked, prefix, batched, length, dtype in itertools.product(
            (True, False), (True, False), (2048, 65536), (8192, 32768), ("auto", "float16")):
        grid.append({"enable_chunked_prefill": chunked, "enable_prefix_caching": prefix,
                     "max_num_batched_tokens": batched, "max_model_len": length, "dtype": dtype})
    grid.append({"extra_args": ["--block-size=32"]})
    grid.append({"extra_args": ["--block-size=64"], "enable_chunked_prefill": False})
    grid.append({"kv_cache_dtype": "fp8", "max_model_len": 8192})
    return grid


def _engine_requests(config_root: Path) -> list[dict[str, Any]]:
    h200 = find_gpu("h200")
    requests = []
    settings = [(model, engine) for model in sorted(CATALOG) for engine in _engine_grid()]
    settings += [(case.model, case.engine) for case in PINNED]
    for model, engine in settings:
        requests.append({"engine": {"config_dir": str(config_root / model), "args": _args_from_settings(engine),
                                    "gpu_memory_gib": h200.memory_gib,
                                    "gpu_name": h200.product_label.replace("-", " ")}})
    return requests


def _answers_by_host(python: Path, requests: list[dict[str, Any]], pinned: bool,
                     hosts: tuple[str, ...] = HOST_CPUS) -> dict[str, list[dict[str, Any]]]:
    """The probe's answers under each host CPU, two probes at a time (one vLLM import each)."""
    def run(host: str) -> list[dict[str, Any]]:
        return run_probe_batch(python, [{"host": {}}, *requests],
                               env={"VLLM_PROBE_HOST_CPU": host, "VLLM_PROBE_PIN_HOST": "1" if pinned else "0",
                                    "VLLM_LOGGING_LEVEL": "ERROR"})
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(hosts, pool.map(run, hosts)))


def _differences(reference: list[dict[str, Any]], other: list[dict[str, Any]],
                 requests: list[dict[str, Any]]) -> list[str]:
    return [f"{json.dumps(request)[:200]}\n    {json.dumps(a)[:300]}\n != {json.dumps(b)[:300]}"
            for request, a, b in zip(requests, reference, other) if a != b]


def test_every_answer_is_the_same_on_every_host_cpu(tmp_path: Path) -> None:
    python = vllm_python()
    requests = crosscheck_requests(tmp_path) + _engine_requests(tmp_path)
    answers = _answers_by_host(python, requests, pinned=True)
    for host, host_answers in answers.items():
        seen = host_answers[0]
        assert seen["pinned"] and tuple(seen["host_cpus"]) == HOST_CPUS, seen
        assert (seen["amx"], seen["architecture"]) == (host == "amx", "ARM" if host == "aarch64" else "X86"), seen
    reference_host = HOST_CPUS[0]
    reference = answers[reference_host][1:]
    assert len(reference) == len(requests)
    engine_answers = [a for request, a in zip(requests, reference) if "engine" in request]
    assert {a["ok"] for a in engine_answers} == {True, False}, "the verdict grid should hold accepts and refusals"
    for host in HOST_CPUS[1:]:
        differences = _differences(reference, answers[host][1:], requests)
        assert not differences, f"{host} answers differently from {reference_host} in {len(differences)} case(s):\n" \
            + "\n".join(differences[:10])


def test_without_the_pin_the_host_cpu_decides_the_known_case(tmp_path: Path) -> None:
    """The control: vLLM's own CPU platform, unpinned, answers the known case differently with and without AMX, so the
    simulated CPUs reach the branch the pinning neutralises. If a vLLM upgrade removes that branch, this fails: then
    look for the branch's successor in vllm/platforms/cpu.py before dropping the case."""
    python = vllm_python()
    crosscheck_requests(tmp_path)  # writes the model configs
    request = [kv_capacity_request(tmp_path, KNOWN_HOST_DEPENDENT)]
    answers = _answers_by_host(python, request, pinned=False, hosts=("amx", "avx512-bf16"))
    with_amx, without_amx = answers["amx"][1], answers["avx512-bf16"][1]
    assert with_amx["max_in_flight_tokens"] == 2 * 8192, with_amx
    assert without_amx["max_in_flight_tokens"] == 2 * 32768, without_amx
