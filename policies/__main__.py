"""The CrossGuard policy pack (``pulumi preview --policy-pack policies``). PolicyPack starts the analyzer's gRPC
server, so it is built here only; everything else is importable without side effects."""

from pulumi_policy import EnforcementLevel, PolicyPack

from vllm_pulumi.policies.pack import build_policies

PolicyPack(name="vllm-pulumi", enforcement_level=EnforcementLevel.ADVISORY, policies=build_policies())
