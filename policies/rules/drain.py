"""Drain: vLLM finishes in-flight requests on SIGTERM (--shutdown-timeout), and the grace period covers the preStop
hook plus that drain."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.pods import pre_stop_seconds
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, cannot_check, rule
from vllm_pulumi.policies.versions import flag_missing_in, release
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.spec.engine import DEFAULT_VLLM_VERSION


@rule("shutdown-timeout", group="Drain", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def shutdown_timeout(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """vLLM runs with --shutdown-timeout N, N > 0.

    Why: vLLM 0.33's default --shutdown-timeout is 0: on SIGTERM it aborts every in-flight request. Every rollout and
    scale-down then truncates answers. (The old --disable-graceful-shutdown flag no longer exists.)

    Fix: Add --shutdown-timeout=90 (seconds in-flight requests get to finish) and size the grace period to it.
    """
    for server in res.servers:
        value = server.command.int_flag("shutdown-timeout", 0)
        if value is None:
            yield cannot_check("--shutdown-timeout", f"value {server.command.value('shutdown-timeout')!r} is not literal")
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
    "grace-covers-drain", group="Drain", enforcement="mandatory", severity="high", kinds=SERVING_KINDS,
    settings={
        "margin_seconds": Setting(10, "Slack between the end of the drain and SIGKILL."),
        "min_grace_seconds": Setting(0, "A floor for terminationGracePeriodSeconds (0: only the drain arithmetic)."),
    },
)
def grace_covers_drain(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """terminationGracePeriodSeconds >= preStop sleep + vLLM --shutdown-timeout + a margin.

    Why: Kubernetes sends SIGKILL when the grace period ends, counted from the start of the preStop hook. If preStop
    plus vLLM's drain do not fit, the drain is cut short and answers are lost anyway.

    Fix: Raise terminationGracePeriodSeconds to preStop + shutdown timeout + margin.
    """
    margin = int(settings.get("margin_seconds", 10))
    floor = int(settings.get("min_grace_seconds", 0))
    for server in res.servers:
        pre_stop = pre_stop_seconds(server.container)
        shutdown = server.command.int_flag("shutdown-timeout", 0)
        if pre_stop is None or shutdown is None:
            yield cannot_check("the grace period", "the preStop hook or --shutdown-timeout is not a literal number")
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


RULES: tuple[Rule, ...] = (shutdown_timeout, grace_covers_drain)
"""This topic's rules, in the order the registry lists them."""
