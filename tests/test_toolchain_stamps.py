"""The toolchain's stamps rebuild what changed, and only that (issue 19).

A tool counts as built when its stamp holds its key (scripts/toolchain.sh, "stamp keys"), so a key must change with
everything that changes what the build produces (a pin, the Go version, a flag or step of its bash functions, a file
it copies in), and stay put for everything else (a comment, another tool's recipe, the script's logging). Each case
edits a copy of scripts/ and compares `toolchain.sh key` before and after; nothing is built or downloaded (a stand-in
`go` answers `go env GOVERSION`). The vLLM cross-check venv's key likewise (scripts/vllm-crosscheck-env.sh --key).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .toolchain import REPO

SCRIPTS = REPO / "scripts"
ALL_TOOLS = frozenset({
    "pulumi", "language-python", "kubernetes-provider", "kube-apiserver", "etcd", "kube-scheduler",
    "kube-controller-manager", "kwok", "lws-controller", "keda", "prometheus", "karpenter-kwok",
    "karpenter-kwok-crds", "kube-score", "crds",
})
# The tools built in a Go wrapper module (every one but the two CRD extractions).
WRAPPED = ALL_TOOLS - {"crds", "karpenter-kwok-crds"}
# The tools whose wrapper module_wrapper makes.
MODULE_WRAPPED = frozenset({"etcd", "kwok", "lws-controller", "keda", "prometheus", "karpenter-kwok", "kube-score"})


def _copy_scripts(destination: Path) -> Path:
    """scripts/ as toolchain.sh reads it (the script, its pins and the Go sources it copies in)."""
    shutil.copytree(SCRIPTS, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def _fake_go(directory: Path, version: str) -> Path:
    """A `go` that answers only `go env GOVERSION`: the keys need the Go version, never a build."""
    directory.mkdir(parents=True, exist_ok=True)
    go = directory / "go"
    go.write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo {version} && exit 0\nexit 1\n')
    go.chmod(0o755)
    return directory


def stamp_keys(scripts: Path, tmp_path: Path, go_version: str = "go1.26.8") -> dict[str, str]:
    """`toolchain.sh key` of a copy of scripts/: tool -> key."""
    fake = _fake_go(tmp_path / f"fake-{go_version}", go_version)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "VLLM_PULUMI_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(["bash", str(scripts / "toolchain.sh"), "key"], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    keys = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(keys) == ALL_TOOLS and not (tmp_path / "cache").exists(), "key must build and create nothing"
    return keys


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path.name}: the case no longer matches the script"
    path.write_text(text.replace(old, new))


Edit = Callable[[Path], None]


def _in_script(old: str, new: str) -> Edit:
    return lambda scripts: _edit(scripts / "toolchain.sh", old, new)


def _pin(name: str, value: str) -> Edit:
    def edit(scripts: Path) -> None:
        versions = scripts / "toolchain.versions"
        [line] = [line for line in versions.read_text().splitlines() if line.startswith(f"{name}=")]
        _edit(versions, line + "\n", f"{name}={value}\n")
    return edit


def _append(relative: str, text: str) -> Edit:
    def edit(scripts: Path) -> None:
        with (scripts / relative).open("a") as handle:
            handle.write(text)
    return edit


CASES: dict[str, tuple[Edit, frozenset[str]]] = {
    "a comment in a build function": (
        _in_script("build_kube_score() {\n", "build_kube_score() {\n    # a note for the reader\n"), frozenset()),
    "a comment between functions": (_in_script("\nbuild_etcd() {", "\n# a note\nbuild_etcd() {"), frozenset()),
    "a log message (bookkeeping)": (
        _in_script('say() { echo "toolchain: $*" >&2; }', 'say() { echo "toolchain:: $*" >&2; }'), frozenset()),
    "a build flag of one tool": (
        _in_script('-ldflags "-s -w -X main.version=$v"', '-ldflags "-s -w -X main.version=$v -X main.commit=x"'),
        frozenset({"kube-score"})),
    "a helper every wrapper uses (replace directives)": (
        _in_script('print("-replace=%s=%s@%s" % (lhs, new["Path"], new["Version"]))',
                   'print("-replace=%s=%s@%s" % (lhs, new["Path"], new["Version"].strip()))'), WRAPPED),
    "module_wrapper": (
        _in_script('run go mod edit -require="$2@$3" "${reps[@]}"',
                   'run go mod edit -require="$2@$3" "${reps[@]}" -droprequire=none'), MODULE_WRAPPED),
    "the Go toolchain switch of the Karpenter build": (
        _in_script("    export GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN\n",
                   "    export GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN GOFLAGS=-buildvcs=false\n"),
        frozenset({"karpenter-kwok"})),
    "the CRD extraction both CRD sets share": (
        _in_script("run install -m 0644 \"$dir/$path\"", "run install -m 0444 \"$dir/$path\""),
        frozenset({"crds", "karpenter-kwok-crds"})),
    "the Karpenter KWOK CRD list": (
        _in_script("sigs.k8s.io/karpenter KARPENTER_VERSION kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml "
                   "KARPENTER_GO_TOOLCHAIN\n", ""),
        frozenset({"karpenter-kwok-crds"})),
    "the build environment (go_env)": (_in_script("CGO_ENABLED=0", "CGO_ENABLED=1"), ALL_TOOLS),
    "the CRD list": (
        _in_script("config/crd/bases/keda.sh_scaledobjects.yaml\n",
                   "config/crd/bases/keda.sh_scaledobjects.yaml\n"
                   "github.com/kedacore/keda/v2 KEDA_VERSION config/crd/bases/keda.sh_scaledjobs.yaml\n"),
        frozenset({"crds"})),
    "a file of the language host": (
        _append("pulumi-language-python/run.go", "\n// an edit\n"), frozenset({"language-python"})),
    "a new file of the language host": (
        _append("pulumi-language-python/extra.go", "package main\n"), frozenset({"language-python"})),
    "promql-check": (_append("promql-check/main.go", "\n// an edit\n"), frozenset({"prometheus"})),
    "the Kubernetes pin": (_pin("KUBE_VERSION", "1.35.5"),
                           frozenset({"kube-apiserver", "kube-scheduler", "kube-controller-manager"})),
    "the provider's Go SDK pin": (_pin("KUBERNETES_PROVIDER_GO_SDK_VERSION", "v4.30.0"),
                                  frozenset({"kubernetes-provider"})),
    "the KEDA pin (binaries and CRDs)": (_pin("KEDA_VERSION", "2.21.1"), frozenset({"keda", "crds"})),
    "the Karpenter Go toolchain pin": (
        _pin("KARPENTER_GO_TOOLCHAIN", "go1.26.10"), frozenset({"karpenter-kwok", "karpenter-kwok-crds", "crds"})),
    "the pulumi CLI found on PATH is used from this version": (
        _pin("PULUMI_MIN_VERSION", "3.273.0"), frozenset({"pulumi"})),
}


@pytest.fixture(scope="module")
def unchanged_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("unchanged")
    return stamp_keys(_copy_scripts(tmp / "scripts"), tmp)


def test_unchanged_scripts_keep_every_key(unchanged_keys: dict[str, str], tmp_path: Path) -> None:
    """The same scripts in another checkout give the same keys: a warm machine keeps what it built. Each key names
    the tool, its pins and the Go version in the clear."""
    assert stamp_keys(_copy_scripts(tmp_path / "elsewhere" / "scripts"), tmp_path) == unchanged_keys
    assert unchanged_keys["kube-apiserver"].startswith("KUBE_VERSION=1.35.4 go1.26.8 recipe-")
    assert unchanged_keys["karpenter-kwok"].startswith(
        "KARPENTER_VERSION=1.15.0 KARPENTER_GO_TOOLCHAIN=go1.26.9 go1.26.8 recipe-")


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_edit_changes_exactly_the_keys_of_what_it_changes(
    case: str, unchanged_keys: dict[str, str], tmp_path: Path
) -> None:
    edit, rebuilt = CASES[case]
    scripts = _copy_scripts(tmp_path / "scripts")
    edit(scripts)
    keys = stamp_keys(scripts, tmp_path)
    assert {tool for tool in ALL_TOOLS if keys[tool] != unchanged_keys[tool]} == rebuilt


def test_another_go_version_changes_every_key(unchanged_keys: dict[str, str], tmp_path: Path) -> None:
    keys = stamp_keys(_copy_scripts(tmp_path / "scripts"), tmp_path, go_version="go1.27.0")
    assert all(keys[tool] != unchanged_keys[tool] for tool in ALL_TOOLS)


# ---- the vLLM cross-check venv ---------------------------------------------------------------------------------------
def venv_key(scripts: Path, tmp_path: Path) -> str:
    env = {**os.environ, "VLLM_CROSSCHECK_VENV": str(tmp_path / "venv")}
    result = subprocess.run(["bash", str(scripts / "vllm-crosscheck-env.sh"), "--key"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "venv").exists(), "--key must install nothing"
    return result.stdout.strip()


@pytest.mark.parametrize(("case", "old", "new", "reinstalls"), [
    ("a comment", "# Needs only Python + pip", "# Needs only Python and pip", False),
    ("a comment in the install function", "    set +e\n", "    # pip's exit status is read below\n    set +e\n",
     False),
    ("a pin", "numpy==2.4.6\n", "numpy==2.4.7\n", True),
    ("a package added", "loguru==0.7.3\n", "loguru==0.7.3\nsix==1.17.0\n", True),
    ("an install flag", "--only-binary=:all: --no-deps", "--only-binary=:all: --no-deps --no-compile", True),
])
def test_the_vllm_venv_key_follows_the_pins_and_the_install_command(
    case: str, old: str, new: str, reinstalls: bool, tmp_path: Path
) -> None:
    before = venv_key(SCRIPTS, tmp_path)
    scripts = _copy_scripts(tmp_path / "scripts")
    _edit(scripts / "vllm-crosscheck-env.sh", old, new)
    assert (venv_key(scripts, tmp_path) != before) is reinstalls, case
