"""The offline checker the way CI pipelines run it, from outside the checkout: the ``vllm-pulumi-check`` command
installed from a wheel built here, fed files or a pipe, printing SARIF; and the pre-commit hook, installed by
pre-commit itself from a repository. (The third way, ``pulumi preview --policy-pack policies``, runs in
tests/e2e with the real Pulumi engine.)

Everything here runs without a network (``make test`` runs pytest in a namespace with only loopback): the wheel is
built with the build backend already in the project's venv (``--no-build-isolation``), installed with
``--no-index --no-deps``, and finds its dependencies (pydantic, PyYAML) in the project's venv through a ``.pth``
file, appended after the new venv's own site-packages so that ``vllm_pulumi`` itself comes from the wheel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cases import fixture_tree, tree_root
from .sarif import sarif_errors

FIXTURES = fixture_tree()
REPO = Path(__file__).resolve().parents[2]
CASES_ROOT = tree_root(FIXTURES)
"""Where FIXTURES sits at tests/policies/fixtures, as in a checkout: the working directory of the runs that name
the files relative to it."""
REFERENCE = FIXTURES / "reference"
NO_SHUTDOWN_TIMEOUT = FIXTURES / "shutdown-timeout" / "fires" / "missing.yaml"
ADVISORY_ONLY = FIXTURES / "gpu-toleration" / "fires" / "no-toleration.yaml"
# A Deployment and a Service whose targetPort misses vLLM's port: a stack rule, so it fires only when one process
# sees both documents.
SERVICE_MISSES_VLLM = FIXTURES / "service-targets-vllm-port" / "fires" / "wrong-target-port.yaml"
COMMAND = "vllm-pulumi-check"
HOOK_ID = "vllm-pulumi-check"
PACKAGE_PATHS = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "src", "components", "policies", "runtime")
"""What building the package and installing the hook read: the copy the tests build from holds only these."""
SUBPROCESS_TIMEOUT_S = 600
"""Builds and installs on a loaded 2-core machine take tens of seconds; this only stops a hang."""
GIT_IDENTITY = ("-c", "user.name=vllm-pulumi tests", "-c", "user.email=tests@vllm-pulumi.invalid",
                "-c", "commit.gpgsign=false")


def run(argv: Sequence[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdin: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT_S)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def user_env() -> dict[str, str]:
    """The environment a user's shell gives the installed command: no PYTHONPATH that could lend it a checkout."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def git(*args: str, cwd: Path) -> str:
    return run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True).stdout


def project_dependencies() -> list[str]:
    """Where the running interpreter (the project's venv) keeps the installed dependencies."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


@pytest.fixture(scope="module")
def project_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding the package as the working tree has it now (committed or not): what a team points
    pre-commit at by URL, and what the wheel is built from, without writing build output into the checkout."""
    copy = tmp_path_factory.mktemp("project")
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *PACKAGE_PATHS, cwd=REPO)
    for relative in sorted(set(filter(None, listed.split("\0")))):
        source = REPO / relative
        if not os.path.lexists(source):  # deleted in the working tree, not yet in the index
            continue
        target = copy / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)  # src/vllm_pulumi/* are symlinks to the folders
    git("init", "--quiet", cwd=copy)
    git("add", "--all", cwd=copy)
    git("commit", "--quiet", "--no-verify", "--message", "the package as the working tree has it", cwd=copy)
    return copy


@dataclass(frozen=True)
class InstalledVenv:
    python: Path
    command: Path
    root: Path


@pytest.fixture(scope="module")
def installed(project_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """A fresh venv with only the wheel of this package installed (dependencies come from the project's venv)."""
    work = tmp_path_factory.mktemp("wheel")
    build = work / "build"
    shutil.copytree(project_repo, build, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", work / "dist", build], check=True)
    wheels = list((work / "dist").glob("vllm_pulumi-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index", "--no-deps", wheels[0]],
        check=True)
    site_packages = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True).stdout.strip())
    (site_packages / "project-dependencies.pth").write_text("\n".join(project_dependencies()) + "\n")
    return InstalledVenv(python, venv / "bin" / COMMAND, venv)


# ---- the console script from a wheel ------------------------------------------------------------------------------

def test_the_command_runs_the_package_from_the_wheel_not_the_checkout(installed: InstalledVenv) -> None:
    assert installed.command.read_text().startswith(f"#!{installed.python}")
    where = run([installed.python, "-c", "import vllm_pulumi.policies.check as m; print(m.__file__)"],
                env=user_env(), check=True)
    assert Path(where.stdout.strip()).is_relative_to(installed.root)
    assert not Path(where.stdout.strip()).is_relative_to(REPO)


def _options(help_text: str) -> set[str]:
    """The option strings under ``options:`` (the usage line above it spells the program name, which differs)."""
    return set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", help_text.split("\noptions:\n", 1)[1]))


def test_the_command_has_the_options_of_the_module_entry_point(installed: InstalledVenv) -> None:
    command = run([installed.command, "--help"], env=user_env())
    module = run([sys.executable, "-m", "vllm_pulumi.policies.check", "--help"], cwd=REPO)
    assert (command.returncode, module.returncode) == (0, 0)
    assert command.stdout.startswith(f"usage: {COMMAND} ")
    assert _options(command.stdout) == _options(module.stdout)
    assert {"--format", "--config", "--jobs", "--skip-non-kubernetes"} <= _options(command.stdout)


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "invalid.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: [a}\n")
    (folder / "policy.yaml").write_text("rules:\n  no-such-rule: advisory\n")
    return folder


EXIT_CASES = [
    pytest.param([REFERENCE], None, 0, id="clean manifests: 0"),
    pytest.param([NO_SHUTDOWN_TIMEOUT], None, 1, id="a mandatory finding: 1"),
    pytest.param([ADVISORY_ONLY], None, 0, id="advisory findings only: 0"),
    pytest.param(["-"], NO_SHUTDOWN_TIMEOUT.read_text(), 1, id="a mandatory finding on standard input: 1"),
    pytest.param(["-"], "", 2, id="empty standard input: 2"),
    pytest.param([FIXTURES / "does-not-exist.yaml"], None, 2, id="a missing file: 2"),
    pytest.param(["{bad}/invalid.yaml"], None, 2, id="invalid YAML: 2"),
    pytest.param([REFERENCE, "--config", "{bad}/policy.yaml"], None, 2, id="a config naming no rule: 2"),
    pytest.param([REFERENCE, "--format", "xml"], None, 2, id="an unknown format: 2"),
]


@pytest.mark.parametrize("args, stdin, expected", EXIT_CASES)
def test_the_command_exits_and_prints_as_the_module_entry_point(installed: InstalledVenv, bad_inputs: Path,
                                                                args: list[str | Path], stdin: str | None,
                                                                expected: int) -> None:
    argv = [str(a).replace("{bad}", str(bad_inputs)) for a in args] + ["--format", "json"] * ("--format" not in args)
    command = run([installed.command, *argv], stdin=stdin, env=user_env())
    module = run([sys.executable, "-m", "vllm_pulumi.policies.check", *argv], stdin=stdin, cwd=REPO)
    assert command.returncode == expected, command.stderr
    assert (module.returncode, module.stdout) == (command.returncode, command.stdout)
    assert "Traceback" not in command.stderr
    if expected == 2:
        assert command.stdout == "" and command.stderr.strip()


def _pipe(producer: Sequence[str | Path], consumer: Sequence[str | Path]) -> tuple[int, int, str, str]:
    """``producer | consumer`` through a real pipe, as a shell runs it: (producer's exit, consumer's exit, its
    stdout, its stderr)."""
    first = subprocess.Popen([str(a) for a in producer], stdout=subprocess.PIPE)
    second = subprocess.Popen([str(a) for a in consumer], stdin=first.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=user_env())
    assert first.stdout is not None
    first.stdout.close()  # the consumer holds the read end now; the producer must see a reader that goes away
    out, err = second.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    return first.wait(timeout=SUBPROCESS_TIMEOUT_S), second.returncode, out, err


def test_rendered_output_piped_into_the_command_names_line_and_document(installed: InstalledVenv,
                                                                        tmp_path: Path) -> None:
    """What ``helm template chart | vllm-pulumi-check -`` sees: ``# Source:`` comments, an empty document, the
    templates one after another."""
    rendered = tmp_path / "rendered.yaml"
    parts = ["---\n# Source: vllm/templates/empty.yaml\n"]
    for manifest in (REFERENCE / "single-node.yaml", NO_SHUTDOWN_TIMEOUT):
        parts += [f"---\n# Source: vllm/templates/{manifest.stem}.yaml\n{d.rstrip()}\n"
                  for d in manifest.read_text().split("\n---\n")]
    rendered.write_text("".join(parts))
    lines = rendered.read_text().splitlines()
    # Independently of the loader: the failing Deployment's first line, and its place among the documents
    # (each part above is one, the empty one not counted).
    deployment_line = [n for n, line in enumerate(lines, start=1) if line == "apiVersion: apps/v1"][1]
    deployment_document = len(parts) - 1

    _, code, out, err = _pipe(["cat", rendered], [installed.command, "-", "--format", "json"])
    assert code == 1, err
    shutdown = next(f for f in json.loads(out) if f["policy"] == "shutdown-timeout")
    assert (shutdown["file"], shutdown["line"], shutdown["document"]) == (
        "<stdin>", deployment_line, deployment_document)

    _, code, out, _ = _pipe(["cat", rendered], [installed.command, "-"])
    assert code == 1
    assert f"<stdin>:{deployment_line} (document {deployment_document}): MANDATORY [high] shutdown-timeout" in out


def test_a_failed_render_piped_into_the_command_does_not_pass(installed: InstalledVenv) -> None:
    """Without ``set -o pipefail`` only the checker's exit counts: empty input must fail it."""
    producer, code, _, err = _pipe(["false"], [installed.command, "-"])
    assert producer == 1 and code == 2
    assert "no YAML documents" in err


def test_sarif_from_the_command_is_valid_sarif_2_1_0(installed: InstalledVenv) -> None:
    sarif = run([installed.command, FIXTURES, "--format", "sarif"], cwd=CASES_ROOT, env=user_env())
    findings = run([installed.command, FIXTURES, "--format", "json"], cwd=CASES_ROOT, env=user_env())
    assert (sarif.returncode, findings.returncode) == (1, 1), sarif.stderr
    log = json.loads(sarif.stdout)
    assert sarif_errors(log) == []
    results = log["runs"][0]["results"]
    assert len(results) == len(json.loads(findings.stdout)) > 0
    assert {r["level"] for r in results} <= {"error", "warning", "note"}
    assert all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("tests/policies/fixtures/")
               and r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in results)
    assert log["runs"][0]["tool"]["driver"]["version"] == "0.1.0"  # the wheel's own metadata


def test_github_annotations_from_the_command(installed: InstalledVenv) -> None:
    result = run([installed.command, NO_SHUTDOWN_TIMEOUT.relative_to(CASES_ROOT), "--format", "github"],
                 cwd=CASES_ROOT, env=user_env())
    assert result.returncode == 1
    assert result.stdout.startswith(
        f"::error file={NO_SHUTDOWN_TIMEOUT.relative_to(CASES_ROOT)},line=2,title=shutdown-timeout (mandatory%2C high)::")


# ---- the pre-commit hook ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pre_commit_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment for ``pre-commit try-repo``, offline.

    The hook is ``language: python``: pre-commit makes a virtualenv and runs ``pip install .`` in its clone of the
    hook repository, which would fetch the build backend and the dependencies from PyPI. Here pip is told to use no
    index and install the package alone, built with the setuptools of the project's venv (no build isolation), and
    PYTHONPATH lends the project venv's packages to both that build and the hook run. Everything else is
    pre-commit's own doing: cloning the repository, creating the env, installing the console script and calling it
    with the files. PYTHONPATH does not read the venv's .pth files, so the checkout's editable install stays out of
    sight and the hook runs the package pre-commit installed.
    """
    home = tmp_path_factory.mktemp("pre-commit")
    # Without the project venv's own vllm-pulumi-check on PATH (an activated venv), the hook can only have run the
    # command pre-commit installed.
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / COMMAND).exists()]
    return {
        **os.environ,
        "PATH": os.pathsep.join(path),
        "PRE_COMMIT_HOME": str(home / "cache"),  # try-repo clones into a store of its own; this keeps ~ untouched
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads this option's environment variable inverted: 0 turns isolation off
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": os.pathsep.join(project_dependencies()),
        # virtualenv seeds pip from the wheels it embeds; it must not start a background download of newer ones.
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
        "VIRTUALENV_OVERRIDE_APP_DATA": str(home / "virtualenv"),
    }


def target_repo(folder: Path, files: dict[str, str]) -> Path:
    """A team's repository: the files, staged (pre-commit reads the file list from git)."""
    folder.mkdir()
    git("init", "--quiet", cwd=folder)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    git("add", "--all", cwd=folder)
    return folder


def try_repo(repo: Path, project_repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "pre_commit", "try-repo", project_repo, HOOK_ID, "--all-files",
                "--color", "never"], cwd=repo, env=env)


NOT_MANIFESTS = {
    ".github/workflows/ci.yaml": "name: ci\non: [push]\njobs:\n  test: {runs-on: ubuntu-latest, steps: []}\n",
    "chart/values.yaml": "replicaCount: 2\nimage: {tag: v0.33.0}\n",
    "package.json": '{"name": "not-kubernetes"}\n',
}


def test_pre_commit_hook_passes_good_manifests_beside_other_yaml(project_repo: Path, pre_commit_env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    repo = target_repo(tmp_path / "team", {
        **NOT_MANIFESTS, **{f"deploy/{m.name}": m.read_text() for m in sorted(REFERENCE.glob("*.yaml"))}})
    result = try_repo(repo, project_repo, pre_commit_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"vllm-pulumi policy check\.+Passed", result.stdout), result.stdout


def test_pre_commit_hook_fails_a_bad_manifest_naming_rule_file_and_line(project_repo: Path,
                                                                         pre_commit_env: dict[str, str],
                                                                         tmp_path: Path) -> None:
    repo = target_repo(tmp_path / "team", {
        **NOT_MANIFESTS, "deploy/good.yaml": (REFERENCE / "single-node.yaml").read_text(),
        "deploy/vllm.yaml": NO_SHUTDOWN_TIMEOUT.read_text()})
    result = try_repo(repo, project_repo, pre_commit_env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"vllm-pulumi policy check\.+Failed", result.stdout), result.stdout
    assert "deploy/vllm.yaml:2: MANDATORY [high] shutdown-timeout" in result.stdout


def test_pre_commit_hook_sees_all_files_at_once_for_stack_rules(project_repo: Path, pre_commit_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    """The Deployment and the Service that misses its port in two files, with enough files between them that
    pre-commit would hand them to parallel runs on two cores if the hook did not ask to run serially."""
    deployment, service = SERVICE_MISSES_VLLM.read_text().split("\n---\n")
    fillers = {f"deploy/m-{i}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n" for i in range(8)}
    repo = target_repo(tmp_path / "team", {
        "deploy/a-deployment.yaml": deployment + "\n", **fillers, "deploy/z-service.yaml": service})
    result = try_repo(repo, project_repo, pre_commit_env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "deploy/z-service.yaml:1: MANDATORY [high] service-targets-vllm-port" in result.stdout
