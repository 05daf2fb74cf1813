"""Coverage: a vLLM workload the checker cannot read is reported as "cannot check", never passed silently."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import NON_WORKLOAD_KINDS, POD_KINDS
from vllm_pulumi.policies.rule_types import ANY_KIND, Rule, Violation, rule
from vllm_pulumi.policies.vllm_command import vllm_containers
from vllm_pulumi.policies.workload import Resource


@rule(
    "vllm-workload-readable", group="Coverage", enforcement="advisory", severity="low", kinds=(ANY_KIND,),
    text_filter=("vllm", "VLLM"),
)
def vllm_workload_readable(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """Every vLLM workload is one the checker can read: a vLLM container in a kind it does not know (another operator's
    custom resource), or a known kind whose vLLM engine flags are not in the manifest (Ray Serve apps, KServe's
    controller-filled containers, custom entrypoints), is reported as 'cannot check' naming the kind.

    Why: Without this an unchecked workload looks exactly like a clean one: 0 findings, exit 0.

    Fix: Check what the operator renders (kubectl get pods -o yaml | vllm-pulumi-check -), or run vLLM with `vllm serve`
    flags in a Deployment or LeaderWorkerSet.
    """
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


RULES: tuple[Rule, ...] = (vllm_workload_readable,)
"""This topic's rules, in the order the registry lists them."""
