"""The offline checker's work: load the files and run the rules, over several processes when there are many files.

YAML parsing is most of the cost, so a forked worker per core parses its share of the files and runs the per-object
rules on it; only the objects stack rules read (workloads, Services, monitors, autoscalers) come back to the parent,
which runs the stack rules over all of them. Few files are checked in-process.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_pulumi.policies.engine import Config, Finding, evaluate
from vllm_pulumi.policies.kinds import NON_WORKLOAD_KINDS, POD_KINDS
from vllm_pulumi.policies.loader import InputError, load_text, read_file, read_stream, yaml_files
from vllm_pulumi.policies.registry import all_rules, reads
from vllm_pulumi.policies.vllm_command import is_vllm_image, vllm_containers
from vllm_pulumi.policies.workload import Resource

STDIN = "-"
"""The PATH that means standard input (``helm template ... | vllm-pulumi-check -``)."""
STDIN_NAME = "<stdin>"
"""What findings and errors call standard input in place of a file name."""
FILES_PER_WORKER = 32
"""Fewer files than this per extra process do not repay forking it."""

_JOB: dict[str, Any] = {}
"""What the forked workers need (a closure and the config), inherited through fork rather than pickled."""


def _workers(files: int, jobs: int | None = None) -> int:
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if jobs is not None:
        return max(1, min(jobs, files))
    if files < FILES_PER_WORKER * 2:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # Extra processes only pay off on idle cores: on a busy machine they add pickling and win no CPU time.
    idle = cores - (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)
    return max(1, min(cores, int(idle + 0.5), files // FILES_PER_WORKER))


@dataclass
class Coverage:
    """How many vLLM workloads the run saw, and how far it could read them: the summary line's numbers."""

    checked: int = 0
    """vLLM workloads whose server command the rules read."""
    partly: int = 0
    """vLLM workloads of a known kind whose engine flags are not in the manifest (Ray Serve, KServe's controller)."""
    unreadable: int = 0
    """vLLM containers in kinds the checker cannot read."""

    def add(self, resources: Sequence[Resource]) -> None:
        for resource in resources:
            if resource.kind in NON_WORKLOAD_KINDS:
                continue
            if resource.kind in POD_KINDS:
                if resource.is_vllm:
                    if resource.unread_engine:
                        self.partly += 1
                    else:
                        self.checked += 1
                elif any(is_vllm_image(c.get("image")) or resource.command_of(c) is not None
                         for t in resource.templates for c in t.containers):
                    self.checked += 1  # batch kinds (Job, CronJob, RayJob, DaemonSet) running vLLM
            elif next(vllm_containers(resource.spec), None) is not None:
                self.unreadable += 1

    def merge(self, other: Coverage) -> None:
        self.checked += other.checked
        self.partly += other.partly
        self.unreadable += other.unreadable

    def summary(self) -> str:
        total = self.checked + self.partly + self.unreadable
        return (f"{total} vLLM workload(s): {self.checked} checked, {self.partly} checked without their engine flags, "
                f"{self.unreadable} not checked (kind unreadable)")


def _check_file(file: str) -> tuple[list[Finding], list[tuple[dict[str, Any], int, int]], Coverage]:
    resources = load_text(read_file(Path(file)), file, _JOB["needed"], _JOB["skip_non_kubernetes"])
    findings = evaluate(resources, _JOB["config"], only=_JOB["resource_rules"])
    kinds = _JOB["stack_kinds"]
    coverage = Coverage()
    coverage.add(resources)
    return findings, [(r.obj, r.line, r.document) for r in resources if r.kind in kinds], coverage


def check_paths(paths: Sequence[str], config: Config | None = None, jobs: int | None = None,
                skip_non_kubernetes: bool = False, coverage: Coverage | None = None) -> list[Finding]:
    """Every finding over the files and directories in ``paths``; raises InputError on unreadable input.

    ``jobs``: processes to parse with (None: one per core when there are enough files).
    ``skip_non_kubernetes``: pass over YAML documents that are not Kubernetes objects instead of refusing them.
    ``coverage``: when given, counts the vLLM workloads seen and how far they were read."""
    coverage = coverage if coverage is not None else Coverage()
    config = config or Config()
    active = [rule for rule in all_rules().values() if config.level(rule) != "disabled"]
    needed = reads(active)
    stdin = ([load_text(read_stream(getattr(sys.stdin, "buffer", None), STDIN_NAME), STDIN_NAME, needed,
                        skip_non_kubernetes)]
             if STDIN in paths else [])
    files = [str(f) for f in yaml_files([p for p in paths if p != STDIN])]
    if not files and not stdin:
        raise InputError(f"no .yaml, .yml or .json files in {', '.join(paths)}")
    workers = _workers(len(files), jobs)
    if workers == 1 or stdin:
        resources = [r for file in files
                     for r in load_text(read_file(Path(file)), file, needed, skip_non_kubernetes)]
        resources += [r for found in stdin for r in found]
        coverage.add(resources)
        return evaluate(resources, config)
    stack_rules = [rule.name for rule in active if rule.scope == "stack"]
    _JOB.update(needed=needed, config=config, resource_rules=[r.name for r in active if r.scope == "resource"],
                stack_kinds=frozenset(k for rule in active if rule.scope == "stack" for k in rule.kinds),
                skip_non_kubernetes=skip_non_kubernetes)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(_check_file, files, chunksize=max(1, len(files) // (workers * 4)))
    finally:
        _JOB.clear()
    findings = [finding for file_findings, _, _ in results for finding in file_findings]
    for _, _, counted in results:
        coverage.merge(counted)
    stack_objects = [Resource(obj, file, line, document)
                     for file, (_, objects, _) in zip(files, results) for obj, line, document in objects]
    return findings + evaluate(stack_objects, config, only=stack_rules)
