"""Running the real Pulumi engine in tests: the offline toolchain, a throwaway project copy, a file backend.

Each test works in a temporary copy of the project (its own stack files, state and PULUMI_HOME), so the
repository's stacks, state and rendered/ are never touched. Skipped, with the reason, when the toolchain is not
built (scripts/toolchain.sh; `make test` builds it).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_pulumi.components.manifests import load_stack, read_stack_config
from vllm_pulumi.runtime.planning.pools import gpu_for

from tests.toolchain import BINARIES, REPO
from .control_plane import die_with_parent

TOOLS = BINARIES
ENGINE_TOOLS = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-kubernetes")
COPIED = ("Pulumi.yaml", "__main__.py", "pyproject.toml", "components", "runtime", "policies", "src", "stacks")

requires_engine = pytest.mark.skipif(
    not all((TOOLS / tool).exists() for tool in ENGINE_TOOLS),
    reason=f"offline Pulumi toolchain not built in {TOOLS} (run scripts/toolchain.sh)",
)


def copy_project(root: Path) -> Path:
    """A runnable copy of the project in ``root``, using this interpreter's venv."""
    for item in COPIED:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, root / item, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, root / item)
    (root / ".venv").symlink_to(Path(sys.prefix))
    (root / ".state").mkdir()
    return root


def write_stack(project: Path, stack: str, deployment: dict[str, object]) -> None:
    (project / "stacks" / f"Pulumi.{stack}.yaml").write_text(
        yaml.safe_dump({"config": {"vllm-pulumi:deployment": deployment}}, sort_keys=False))


def run_pulumi(project: Path, *args: str, env: dict[str, str] | None = None,
               timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``pulumi ARGS`` in the project copy, offline, against its own file backend."""
    environment = dict(os.environ)
    environment.update({
        "PATH": f"{TOOLS}{os.pathsep}{environment.get('PATH', '')}",
        "PULUMI_BACKEND_URL": f"file://{project / '.state'}",
        "PULUMI_CONFIG_PASSPHRASE": "",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": str(project / ".pulumi-home"),
    })
    environment.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    environment.update(env or {})
    return subprocess.run(["pulumi", *args], cwd=project, env=environment, capture_output=True, text=True,
                          timeout=timeout, check=False, preexec_fn=die_with_parent)


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def render_variant(name: str) -> dict[str, Any]:
    """A reference stack in render mode: no cloud, no add-on installs, Secrets referenced by name."""
    raw = copy.deepcopy(read_stack_config(name))
    spec = load_stack(name)
    for index, model in enumerate(raw["models"]):  # the GPU the node pools gave, now that there are none
        gpu, gpus_per_node = gpu_for(spec, spec.models[index], index)
        model.update({"gpu": gpu.id, "gpus_per_node": gpus_per_node})
    raw["cluster"] = {"mode": "render", "directory": f"rendered/{name}"}
    raw["addons"] = {"gpu_operator": {"install": False}, "keda": {"install": False}, "lws": {"install": False}}
    for model in raw["models"]:
        for holder, key in ((model, "api_key"), (model.get("storage", {}), "hf_token")):
            if key in holder and "pulumi_secret" in holder[key]:
                holder[key] = {"existing_secret": {"name": f"{model['name']}-{key.replace('_', '-')}", "key": "value"}}
    return raw
