"""Security of vLLM pods: no privileged container, and keys and tokens from Secrets, never literal."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import POD_KINDS, SERVING_KINDS
from vllm_pulumi.policies.pods import env_by_name, is_secret_like_env
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import mapping
from vllm_pulumi.policies.workload import Resource


@rule("no-privileged", group="Security", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def no_privileged(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """No container of a vLLM workload is privileged or sets allowPrivilegeEscalation: true.

    Why: vLLM needs no host privileges (the GPU comes from the device plugin); a privileged inference server that parses
    untrusted prompts and downloads model code is a node compromise away.

    Fix: Remove securityContext.privileged and set allowPrivilegeEscalation: false.
    """
    if not res.is_vllm:
        return
    for template in res.templates:
        for container in template.all_containers:
            context = mapping(container.get("securityContext"))
            for key in ("privileged", "allowPrivilegeEscalation"):
                if context.get(key) is True:
                    yield Violation(f"container {container.get('name')!r} ({template.path}) sets "
                                    f"securityContext.{key}: true", f"remove securityContext.{key} or set it false")


@rule("no-plaintext-secrets", group="Security", enforcement="mandatory", severity="critical", kinds=POD_KINDS)
def no_plaintext_secrets(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """API keys and tokens (VLLM_API_KEY, HF_TOKEN, *_API_KEY, *_TOKEN, ...) come from Secrets, not literal env values
    or a literal --api-key / --hf-token argument.

    Why: Literal values are readable by anyone who can read the workload (and end up in Git, Pulumi state and rendered
    YAML).

    Fix: Use env valueFrom.secretKeyRef, and pass --api-key=$(VLLM_API_KEY) or let vLLM read VLLM_API_KEY.
    """
    for template in res.templates:
        for container in template.all_containers:
            name = container.get("name")
            for env_name, env in env_by_name(container).items():
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


RULES: tuple[Rule, ...] = (no_privileged, no_plaintext_secrets)
"""This topic's rules, in the order the registry lists them."""
