"""`pulumi up` of 50 models on 100 simulated GPU nodes until every pod is Ready, beside a minimal hand-written program.

    scripts/isolated.sh .venv/bin/python bench/bench_cluster.py [--models 50] [--nodes 100] [--keep]

Not run by pytest; run it by hand (it re-runs itself through scripts/isolated.sh when it is not already in a network
namespace of its own, like the tests). Needs the toolchain (scripts/toolchain.sh).

One simulated cluster (tests/e2e/harness/cluster.py: etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
KWOK, the LWS controller) with ``--nodes`` nodes of the stack's shape: 8x L40S (g6e.48xlarge), so the scheduler packs
several single-GPU replicas per node. The generated stack serves ``--models`` models (the catalog's small ones in turn),
one replica each, weights on a pre-provisioned shared volume without hydration (the bench measures the deploy path, not
KWOK's Job lifecycle), in namespace ``bench-ours``; the hand-written program registers the very same objects
(``build_manifests`` of the stack, moved to namespace ``bench-hand``) as plainly as pulumi_kubernetes allows: one
ConfigGroup for the built-in kinds and a CustomResource each for the rest. Both are awaited by the provider the same
way (Deployments Ready, Services with endpoints). Reported: wall time of each `up` from an empty stack until the CLI
returns (every pod Ready), the ratio ours / hand-written (target <= 1.3), and the wall time of a second, no-change
`up` of ours.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
from bench.bench_preview import HANDWRITTEN_PULUMI_YAML, pulumi, venv_prefix  # noqa: E402
from tests.e2e.harness.cluster import missing_binaries, network_is_isolated, simulated_cluster  # noqa: E402
from tests.e2e.harness.engine import TOOLS, copy_project, write_stack  # noqa: E402
from tests.schema import crd_files  # noqa: E402

TARGET_RATIO = 1.3
MODELS = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "gemma-2-9b", "qwen3-8b")
NODE_INSTANCE_TYPE = "g6e.48xlarge"

HANDWRITTEN_MAIN = '''\
"""The same objects as the generated stack, registered as plainly as pulumi_kubernetes allows."""

import json

import pulumi
import pulumi_kubernetes as k8s

with open("objects.json") as stream:
    objects = json.load(stream)

provider = k8s.Provider("k8s", kubeconfig=objects["kubeconfig"])
group = k8s.yaml.v2.ConfigGroup("objects", objs=objects["builtin"], opts=pulumi.ResourceOptions(provider=provider))
for obj in objects["custom"]:
    k8s.apiextensions.CustomResource(
        f"{obj['kind'].lower()}-{obj['metadata']['name']}", api_version=obj["apiVersion"], kind=obj["kind"],
        metadata=obj["metadata"], spec=obj.get("spec"),
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[group]),
    )
'''


def generated_stack(models: int, nodes: int, kubeconfig: Path, namespace: str) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "create_namespace": False,  # made by the bench with the shared weights claim, as a platform team would
        "cluster": {"mode": "kubeconfig", "kubeconfig": str(kubeconfig), "context": "edge",
                    "nodes": [{"name": "l40s", "instance_type": NODE_INSTANCE_TYPE, "count": nodes}]},
        "addons": {"gpu_operator": {"install": False}, "keda": {"install": False}, "lws": {"install": False}},
        "models": [{
            "name": f"m{index:03d}", "model": MODELS[index % len(MODELS)],
            "engine": {"max_model_len": 8192},
            "storage": {"kind": "nfs", "storage_class": "nfs-client", "existing_claim": "weights", "hydrate": False},
            "network": {"allowed_namespaces": ["apps"]},
        } for index in range(models)],
    }


def shared_claim(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "weights", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "nfs-client",
                     "resources": {"requests": {"storage": "2Ti"}}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and print it")
    args = parser.parse_args()
    if not network_is_isolated():
        os.execv(str(REPO / "scripts" / "isolated.sh"), [str(REPO / "scripts" / "isolated.sh"), sys.executable,
                                                          *sys.argv])
    missing = missing_binaries() + [tool for tool in ("pulumi", "pulumi-resource-kubernetes")
                                    if not (TOOLS / tool).exists()]
    if missing:
        print(f"bench_cluster: not built: {', '.join(missing)}; run scripts/toolchain.sh first", file=sys.stderr)
        return 2

    from vllm_pulumi.components.kube import is_custom_resource
    from vllm_pulumi.components.manifests import build_manifests
    from vllm_pulumi.runtime.planning.deployment import node_shapes
    from vllm_pulumi.runtime.planning.deployment import load_deployment

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    try:
        with simulated_cluster(work / "cluster", crd_files=crd_files(), pod_ready_delay_milliseconds=0) as cluster:
            kubeconfig = cluster.plane.kubeconfig
            ours_raw = generated_stack(args.models, args.nodes, kubeconfig, "bench-ours")
            spec = load_deployment(ours_raw).spec
            start = time.perf_counter()
            for shape in node_shapes(spec):
                cluster.add_nodes(shape)
            print(f"{args.nodes} nodes Ready in {time.perf_counter() - start:.1f} s")

            hand_objects = []
            for obj in build_manifests(spec):
                obj = copy.deepcopy(obj)
                if obj["metadata"].get("namespace") == "bench-ours":
                    obj["metadata"]["namespace"] = "bench-hand"
                hand_objects.append(obj)
            for namespace in ("bench-ours", "bench-hand"):
                cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace}})
                claim = shared_claim(namespace)
                cluster.provide_volumes([claim])
                cluster.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)
            ours_dir, hand_dir = work / "ours", work / "handwritten"
            ours_dir.mkdir()
            hand_dir.mkdir()
            copy_project(ours_dir)
            write_stack(ours_dir, "bench", ours_raw)
            (hand_dir / "Pulumi.yaml").write_text(HANDWRITTEN_PULUMI_YAML)
            (hand_dir / "__main__.py").write_text(HANDWRITTEN_MAIN)
            (hand_dir / ".venv").symlink_to(venv_prefix())
            (hand_dir / "objects.json").write_text(json.dumps({
                "kubeconfig": kubeconfig.read_text(),
                "builtin": [o for o in hand_objects if not is_custom_resource(o)],
                "custom": [o for o in hand_objects if is_custom_resource(o)],
            }))
            # Both programs name the simulated cluster's kubeconfig themselves (the stack setting, the provider).
            up = ("up", "--stack", "bench", "--yes", "--non-interactive", "--skip-preview")
            timings = {}
            for label, root in (("ours", ours_dir), ("hand-written", hand_dir)):
                (root / ".state").mkdir(exist_ok=True)
                pulumi(root, "stack", "init", "bench")
                timings[label] = pulumi(root, *up)[1]
            unchanged = pulumi(ours_dir, *up)[1]
            pods = cluster.pods("bench-ours") + cluster.pods("bench-hand")
            ready = sum(1 for pod in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                                 for c in pod["status"].get("conditions", [])))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    objects = len(hand_objects)
    print(f"{args.models} models ({objects} objects per program), {args.nodes} simulated {NODE_INSTANCE_TYPE} nodes; "
          f"{ready} serving pods Ready at the end")
    print(f"pulumi up, ours:          {timings['ours']:.1f} s")
    print(f"pulumi up, hand-written:  {timings['hand-written']:.1f} s")
    ratio = timings["ours"] / timings["hand-written"]
    print(f"ratio ours/hand-written:  {ratio:.2f} (target <= {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'not met'})")
    print(f"no-change pulumi up:      {unchanged:.1f} s")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
