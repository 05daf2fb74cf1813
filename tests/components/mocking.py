"""Run the Pulumi program (or one component) under pulumi's mocks and record what gets registered.

The recording monitor keeps, per registration, the type, name, parent URN, dependency URNs and the serialized inputs
(secrets still wrapped), so tests can assert types, parents, ordering and that secrets stayed secret.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

REPO = Path(__file__).resolve().parents[2]
PROJECT = "vllm-pulumi"

EKS_CLUSTER = {
    "name": "ml-prod",
    "endpoint": "https://EXAMPLE.gr7.us-east-1.eks.amazonaws.com",
    "certificateAuthorities": [{"data": "Q0VSVA=="}],
    "vpcConfig": {"clusterSecurityGroupId": "sg-0123456789abcdef0"},
}


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    dependencies: list[str]
    inputs: dict[str, Any]
    custom: bool


class RecordingMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        outputs = dict(args.inputs)
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs["latestVersion"] = 1
        if args.typ.startswith("aws:"):
            outputs.setdefault("name", args.name)  # the AWS provider auto-names; mocks do not
        if args.typ == "aws:iam/role:Role":
            outputs["arn"] = f"arn:aws:iam::123456789012:role/{args.name}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        if args.token == "aws:eks/getCluster:getCluster":
            return dict(EKS_CLUSTER)
        return {}


class RecordingMonitor(MockMonitor):  # type: ignore[misc]
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(Registration(
                type=request.type, name=request.name, urn=response.urn, parent=request.parent,
                dependencies=list(request.dependencies),
                inputs=rpc.deserialize_properties(request.object), custom=bool(request.custom),
            ))
        return response


def use_mocks(config: dict[str, str] | None = None, secret_keys: list[str] | None = None,
              stack: str = "test") -> RecordingMonitor:
    monitor = RecordingMonitor(RecordingMocks())
    pulumi.runtime.set_mocks(RecordingMocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config or {}, secret_keys or [])
    return monitor


def load_program() -> ModuleType:
    """The top-level __main__.py as a module, without running it (its body runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("vllm_pulumi_program", REPO / "__main__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_program(raw: Any, secrets: dict[str, str] | None = None, stack: str = "test") -> RecordingMonitor:
    """Run __main__.program() under mocks with `raw` as the stack's deployment config; raises what it raises."""
    config = {f"{PROJECT}:deployment": json.dumps(raw)}
    config.update({f"{PROJECT}:{key}": value for key, value in (secrets or {}).items()})
    monitor = use_mocks(config, [f"{PROJECT}:{key}" for key in secrets or {}], stack)
    program = load_program()
    run_under_mocks(program.program)
    return monitor


def run_program_expecting_error(
    raw: Any, secrets: dict[str, str] | None = None, stack: str = "test"
) -> tuple[BaseException, RecordingMonitor]:
    """Like run_program for a program that must fail: the error it raised and what was registered before it."""
    config = {f"{PROJECT}:deployment": json.dumps(raw)}
    config.update({f"{PROJECT}:{key}": value for key, value in (secrets or {}).items()})
    monitor = use_mocks(config, [f"{PROJECT}:{key}" for key in secrets or {}], stack)
    program = load_program()
    try:
        run_under_mocks(program.program)
    except Exception as error:  # noqa: BLE001 - the test inspects whatever the program raised
        return error, monitor
    raise AssertionError("the program registered its resources instead of failing")


def run_under_mocks(body: Callable[[], Any]) -> None:
    @pulumi.runtime.test  # type: ignore[misc]
    def wrapped() -> Any:
        return body()

    wrapped()


def by_type(monitor: RecordingMonitor, type_: str) -> list[Registration]:
    return [r for r in monitor.registrations if r.type == type_]


def unwrap_secrets(value: Any) -> Any:
    """Inputs with secret values replaced by a marker (what a reader of plain state would see)."""
    if isinstance(value, dict):
        if rpc.is_rpc_secret(value):
            return "[secret]"
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


def plain_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in plain_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in plain_strings(item)]
    return [value] if isinstance(value, str) else []
