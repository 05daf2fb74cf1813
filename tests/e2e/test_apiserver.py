"""`pulumi up` of the `edge` stack against a real kube-apiserver (etcd + kube-apiserver on loopback).

Every object must be accepted by the server (its schema and admission, and the upstream CRDs' schemas and CEL
rules), a second `pulumi up` must find nothing to change, and `pulumi destroy` must leave nothing of ours behind.
No controllers run, so nothing ever becomes ready: this test (and only this test) wraps the program with a stack
transform that sets `pulumi.com/skipAwait` and background deletion on every Kubernetes object. The shipped
components never set them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.components.manifests import build_manifests, load_stack

from .harness.control_plane import ControlPlane, object_path
from .harness.engine import TOOLS, output_of, requires_engine, run_pulumi

pytestmark = [
    pytest.mark.e2e,
    requires_engine,
    pytest.mark.skipif(not (TOOLS / "kube-apiserver").exists() or not (TOOLS / "etcd").exists(),
                       reason=f"kube-apiserver / etcd not built in {TOOLS} (run scripts/toolchain.sh)"),
]

# Test-only entry point: the real program, after a stack transform that tells pulumi-kubernetes not to wait for
# readiness (no controllers run) and to delete in the background (no garbage collector runs).
SKIP_AWAIT_PROGRAM = '''
import json

import pulumi
import yaml

import vllm_program

TEST_ANNOTATIONS = {"pulumi.com/skipAwait": "true", "pulumi.com/deletionPropagationPolicy": "background"}


def _annotate(obj):
    obj = dict(obj)
    metadata = dict(obj.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **TEST_ANNOTATIONS}
    obj["metadata"] = metadata
    return obj


def skip_await(args):
    if not args.type_.startswith("kubernetes:"):
        return None
    props = dict(args.props)
    if args.type_ == "kubernetes:yaml/v2:ConfigGroup":
        if isinstance(props.get("yaml"), str):
            docs = [d for d in yaml.safe_load_all(props["yaml"]) if d]
            props["yaml"] = "\\n---\\n".join(json.dumps(_annotate(d)) for d in docs)
        if isinstance(props.get("objs"), list):
            props["objs"] = [_annotate(d) for d in props["objs"]]
    elif isinstance(props.get("metadata"), dict):
        props = _annotate(props)
    else:
        return None
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


pulumi.runtime.register_stack_transform(skip_await)
vllm_program.program()
'''


@pytest.fixture(scope="module")
def skip_await_project(project: Path) -> Path:
    """The project copy (tests/e2e/conftest.py) with SKIP_AWAIT_PROGRAM as its entry point."""
    (project / "__main__.py").rename(project / "vllm_program.py")
    (project / "__main__.py").write_text(SKIP_AWAIT_PROGRAM)
    return project


def _ours(obj: dict[str, Any]) -> bool:
    return obj["kind"] != "Namespace"


def test_edge_stack_up_is_accepted_idempotent_and_destroyed_cleanly(
    plane: ControlPlane, skip_await_project: Path
) -> None:
    project = skip_await_project
    env = {"KUBECONFIG": str(plane.kubeconfig)}
    spec = load_stack("edge")
    expected = build_manifests(spec)
    if not spec.create_namespace:  # edge uses an existing namespace (where its Secrets are): make it, as a user would
        status, answer = plane.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}})
        assert status == 201, answer
    assert run_pulumi(project, "stack", "init", "edge", env=env).returncode == 0

    up = run_pulumi(project, "up", "--stack", "edge", "--yes", "--non-interactive", "--skip-preview", env=env)
    assert up.returncode == 0, output_of(up)[-6000:]
    for obj in expected:
        status, stored = plane.get(object_path(obj))
        assert status == 200, f"{obj['kind']} {obj['metadata']['name']} not on the server: {stored}"
        ours = obj["metadata"].get("labels", {})
        assert ours.items() <= stored["metadata"].get("labels", {}).items(), stored["metadata"]

    again = run_pulumi(project, "preview", "--stack", "edge", "--non-interactive", "--expect-no-changes", env=env)
    assert again.returncode == 0, output_of(again)[-6000:]
    second_up = run_pulumi(project, "up", "--stack", "edge", "--yes", "--non-interactive", "--skip-preview", env=env)
    assert second_up.returncode == 0 and "unchanged" in second_up.stdout and "updated" not in second_up.stdout, \
        output_of(second_up)[-3000:]

    destroy = run_pulumi(project, "destroy", "--stack", "edge", "--yes", "--non-interactive", "--skip-preview",
                         env=env)
    assert destroy.returncode == 0, output_of(destroy)[-6000:]
    for obj in expected:
        status, stored = plane.get(object_path(obj))
        if _ours(obj):
            assert status == 404, f"{obj['kind']} {obj['metadata']['name']} left behind"
        else:  # no namespace controller runs to remove the `kubernetes` finalizer: it stays Terminating
            assert status == 404 or stored["metadata"].get("deletionTimestamp"), stored
