"""The package's import graph: no cycle between vllm_pulumi's modules, and no import of one inside a function (the
way a cycle gets hidden). Read from the source with ast, so a module that is never imported is checked too."""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "src" / "vllm_pulumi"
PACKAGE = "vllm_pulumi"


def _modules() -> dict[str, Path]:
    found = {}
    paths = sorted(Path(folder) / file for folder, _, files in os.walk(PACKAGE_ROOT, followlinks=True)  # symlinks
                   for file in files if file.endswith(".py"))
    for path in paths:
        parts = path.relative_to(PACKAGE_ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        name = ".".join((PACKAGE,) + (parts[:-1] if parts[-1] == "__init__" else parts))
        found[name] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The package's modules an import statement loads (a `from X import name` of a submodule counts as X.name)."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[:len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    return [target for target in targets if target in known]


@functools.cache
def _graph() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """Module -> the package modules it imports at module level; and (module, imported) of function-level imports."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    nested: set[tuple[str, str]] = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        nested |= {(name, target) for target in _imported(inner, name, is_package, known)}
        for node in tree.body:
            if isinstance(node, ast.If):  # `if TYPE_CHECKING:` imports count: they hide a cycle the same way
                statements = [inner for inner in ast.walk(node) if isinstance(inner, (ast.Import, ast.ImportFrom))]
            else:
                statements = [node] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            for statement in statements:
                assert isinstance(statement, (ast.Import, ast.ImportFrom))
                graph[name] |= set(_imported(statement, name, is_package, known))
    return graph, nested


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_is_read():
    graph, _ = _graph()
    assert {"vllm_pulumi.runtime.planning.deployment", "vllm_pulumi.components.manifests",
            "vllm_pulumi.policies.registry"} <= set(graph)
    assert "vllm_pulumi.runtime.spec.deployment" in graph["vllm_pulumi.runtime.planning.deployment"]


def test_no_import_cycle_within_the_package():
    graph, _ = _graph()
    assert _cycles(graph) == []


def test_no_function_level_import_of_a_package_module():
    _, nested = _graph()
    assert sorted(nested) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
