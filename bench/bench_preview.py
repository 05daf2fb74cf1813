"""`pulumi preview` of the local stack beside a minimal hand-written program that registers the same objects.

    .venv/bin/python bench/bench_preview.py [--repeat 3] [--keep]

Not run by pytest; run it by hand. Needs the offline toolchain (scripts/toolchain.sh: pulumi, the Python language
host and pulumi-resource-kubernetes in ~/.cache/vllm-pulumi/tools/bin) and exits with status 2 saying so when it is
not built.

Both programs run with the real engine in a temporary directory with a file backend (as
tests/components/test_render_e2e.py does), in render mode (a kubernetes Provider with renderYamlToDirectory), with
this venv:

* ours: a copy of the project, `pulumi preview --stack local`;
* hand-written: a ``__main__.py`` of a few lines that reads ``build_manifests(load_stack("local"))`` from a JSON file
  and registers the built-in kinds in one ``kubernetes:yaml/v2:ConfigGroup`` and each custom resource as one
  ``apiextensions.CustomResource`` (a ConfigGroup cannot hold custom kinds in render mode: it looks up whether the
  kind is namespaced, pulumi-kubernetes issue 3176), the least the real program can do.

Each program gets `stack init` and one untimed warm-up preview (page cache, Python bytecode, plugin start-up); then
``--repeat`` rounds of one preview per program, interleaved so both see the same load, are timed as wall time of the
whole CLI process, and the median counts. CPU time (user + sys of
the CLI and everything it waited for: language host, Python, provider) is shown beside it, since wall time on a
shared machine grows with everyone else's load. Target: ours / hand-written at most 1.3 (median wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.e2e.harness.engine import ENGINE_TOOLS as NEEDED  # noqa: E402  (the e2e tests' project copy and toolchain)
from tests.e2e.harness.engine import TOOLS, copy_project  # noqa: E402
STACK = "local"
TARGET_RATIO = 1.3

HANDWRITTEN_PULUMI_YAML = """\
name: handwritten
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: .venv
"""

HANDWRITTEN_MAIN = '''\
"""The same objects as the local stack, registered as plainly as pulumi_kubernetes allows."""

import json

import pulumi
import pulumi_kubernetes as k8s

with open("objects.json") as stream:
    objects = json.load(stream)

provider = k8s.Provider("k8s", render_yaml_to_directory="rendered/local")
k8s.yaml.v2.ConfigGroup("objects", objs=objects["builtin"], opts=pulumi.ResourceOptions(provider=provider))
for obj in objects["custom"]:
    k8s.apiextensions.CustomResource(
        f"{obj['kind'].lower()}-{obj['metadata']['name']}", api_version=obj["apiVersion"], kind=obj["kind"],
        metadata=obj["metadata"], spec=obj.get("spec"), opts=pulumi.ResourceOptions(provider=provider),
    )
'''


@dataclass
class Timing:
    program: str
    wall: list[float]
    cpu: list[float]
    resources: int

    @property
    def median_wall(self) -> float:
        return statistics.median(self.wall)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)


def missing_tools() -> list[str]:
    return [tool for tool in NEEDED if not (TOOLS / tool).exists()]


def venv_prefix() -> Path:
    """The project venv both programs run in (Pulumi.yaml's ``virtualenv: .venv`` is a symlink to it)."""
    local = REPO / ".venv"
    return local if local.is_dir() else Path(sys.prefix)


def handwritten_objects() -> dict[str, list[dict[str, Any]]]:
    """build_manifests(load_stack("local")), split as the real program splits them (components/kube.py)."""
    sys.path.insert(0, str(REPO / "src"))
    from vllm_pulumi.components.kube import is_custom_resource
    from vllm_pulumi.components.manifests import build_manifests, load_stack

    objects = build_manifests(load_stack(STACK))
    return {"builtin": [obj for obj in objects if not is_custom_resource(obj)],
            "custom": [obj for obj in objects if is_custom_resource(obj)]}


def write_handwritten(root: Path) -> int:
    """The hand-written program; returns how many Kubernetes objects it registers."""
    objects = handwritten_objects()
    (root / "Pulumi.yaml").write_text(HANDWRITTEN_PULUMI_YAML)
    (root / "__main__.py").write_text(HANDWRITTEN_MAIN)
    (root / "objects.json").write_text(json.dumps(objects, indent=1))
    (root / ".venv").symlink_to(venv_prefix())
    return sum(len(group) for group in objects.values())


def pulumi_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PATH": f"{TOOLS}{os.pathsep}{env.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{root / '.state'}",
        "PULUMI_CONFIG_PASSPHRASE": "",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": str(root / ".pulumi-home"),
    })
    return env


def pulumi(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run the CLI in ``root``: the result, its wall seconds and the CPU seconds of it and what it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([str(TOOLS / "pulumi"), *args], cwd=root, env=pulumi_env(root), capture_output=True,
                            text=True, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise SystemExit(f"`pulumi {' '.join(args)}` failed in {root} (exit {result.returncode}):\n"
                         f"{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    return result, wall, cpu


def resources_in(output: str) -> int:
    """The '+ N to create' of a preview of an empty stack (stack, provider and components included)."""
    found = re.search(r"\+ (\d+) to create", output)
    if found is None:
        raise SystemExit(f"no resource count in the preview output:\n{output[-2000:]}")
    return int(found.group(1))


def prepare(root: Path) -> tuple[str, ...]:
    """`stack init` and the untimed warm-up preview; returns the preview command."""
    (root / ".state").mkdir(exist_ok=True)
    pulumi(root, "stack", "init", STACK)
    preview = ("preview", "--stack", STACK, "--non-interactive")
    pulumi(root, *preview)
    return preview


def time_previews(programs: dict[str, Path], repeat: int) -> list[Timing]:
    """Warm each program up, then time ``repeat`` rounds of one preview per program, interleaved so that both see
    the same load on a shared machine."""
    previews = {program: prepare(root) for program, root in programs.items()}
    timings = {program: Timing(program, [], [], 0) for program in programs}
    for _ in range(repeat):
        for program, root in programs.items():
            result, wall, cpu = pulumi(root, *previews[program])
            timing = timings[program]
            resources = resources_in(result.stdout)
            if timing.resources and resources != timing.resources:
                raise SystemExit(f"{program}: the resource count changed between previews")
            timing.resources = resources
            timing.wall.append(wall)
            timing.cpu.append(cpu)
    return list(timings.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="timed previews per program; the median is reported")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories and print them")
    args = parser.parse_args()

    missing = missing_tools()
    if missing:
        print(f"bench_preview: the offline Pulumi toolchain is not built: missing {', '.join(missing)} in {TOOLS}.\n"
              f"Build it first with `scripts/toolchain.sh` (or `make toolchain`), then run this again.",
              file=sys.stderr)
        return 2

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores "
          f"(wall time inflates when the machine is shared)")

    work = Path(tempfile.mkdtemp(prefix="bench-preview-"))
    try:
        ours_dir, hand_dir = work / "ours", work / "handwritten"
        ours_dir.mkdir()
        hand_dir.mkdir()
        copy_project(ours_dir)
        objects = write_handwritten(hand_dir)
        ours, hand = time_previews({f"ours (pulumi preview --stack {STACK})": ours_dir,
                                    f"hand-written ({objects} objects)": hand_dir}, args.repeat)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    width = max(len(ours.program), len(hand.program))
    print(f"{'program':<{width}}  {'median wall s':>13}  {'median CPU s':>12}  {'resources':>9}  runs (wall s)")
    for timing in (ours, hand):
        runs = " ".join(f"{value:.2f}" for value in timing.wall)
        print(f"{timing.program:<{width}}  {timing.median_wall:>13.2f}  {timing.median_cpu:>12.2f}  "
              f"{timing.resources:>9}  {runs}")
    ratio = ours.median_wall / hand.median_wall
    cpu_ratio = ours.median_cpu / hand.median_cpu
    met = ratio <= TARGET_RATIO
    print(f"ratio ours/hand-written: {ratio:.2f} wall ({cpu_ratio:.2f} CPU); "
          f"target <= {TARGET_RATIO}: {'met' if met else 'not met'}")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
