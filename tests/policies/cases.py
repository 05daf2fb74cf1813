"""The policy fixtures: for every rule, manifests that must make it fire and manifests it must accept (the Polaris /
kube-linter way), each written as a base manifest and the few changes that make the case.

tests/policies/fixtures/<rule>.yaml holds the rule's cases, a list under ``fires:`` and one under ``passes:``::

    fires:
    - name: zero
      description: --shutdown-timeout=0 aborts in-flight requests.
      base: single-node
      kinds: [Deployment]
      changes:
      - arg: --shutdown-timeout=0

- ``name``: the test id is <rule>/<name>; a case named cannot-check-* must produce only the advisory "cannot check"
  finding.
- ``base``: a reference manifest (fixtures/reference/<base>.yaml) or ``golden/<stack>``, what the stack renders
  (tests/golden/<stack>/manifests.yaml). ``kinds``: only the base's documents of these kinds (all when absent).
- ``documents``: whole documents appended after the base's; a case not derived from a base has only these.
- ``changes``: applied in order to all the case's documents, each a mapping of one operation:
  - ``set: {path: value, ...}``: each value set at its path, in order; maps missing on the way are created.
  - ``remove: path`` or ``remove: [path, ...]``: a key, or a list item (by index or ``[key=value]``).
  - ``append: {path: value}``: the value appended to the list at the path.
  - ``replace: {path: [old, new]}``: ``old`` replaced by ``new`` in the string at the path (``old`` must occur).
  - ``copy: {path: from-path}``: a copy of the value at ``from-path`` set at ``path``.
  - ``arg: --flag=value`` or ``arg: --flag``: the vLLM container's ``--flag`` arguments removed, this one appended.
  - ``drop-arg: --flag``: the vLLM container's ``--flag`` arguments removed.

A path starts at an anchor: a kind (the first document of that kind), ``pod`` and ``vllm`` (the Deployment's pod spec
and its first container), ``leader`` and ``worker`` (the LeaderWorkerSet's leader and worker pod specs). Keys follow
after dots; ``[n]`` is a list index, ``[key=value]`` the list item whose ``key`` is ``value``, and ``[text]`` a key
that holds dots, as in ``pod.nodeSelector[nvidia.com/gpu.product]``.

The tests build each case in memory and write it where they need a file: ``Case.write`` one case, ``fixture_tree()``
all of them as <rule>/{fires,passes}/<name>.yaml beside a copy of reference/, each file the case's description as a
comment, then its documents.
"""

from __future__ import annotations

import atexit
import copy
import functools
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parent / "fixtures"
"""The case files and, in reference/, the reference manifests the cases start from."""
REFERENCE = FIXTURES / "reference"
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
"""Our own rendered stacks (tests/components/test_golden.py keeps them current): the bases named golden/<stack>."""
KINDS = ("fires", "passes")
CASE_KEYS = {"name", "description", "base", "kinds", "documents", "changes"}
TREE_PATH = Path("tests") / "policies" / "fixtures"
"""Where fixture_tree() lays the cases out under its root: the path a checkout would give them, for the tests that run
the checker in that root and read the file names it reports (SARIF, GitHub annotations) relative to it."""

Document = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One case of a rule, built: what the test checks the rule against."""

    rule: str
    kind: str
    """fires or passes."""
    name: str
    description: str
    documents: tuple[Document, ...]

    def text(self) -> str:
        """The case as one YAML file: its description as a comment, then its documents."""
        body = "---\n".join(yaml.safe_dump(doc, sort_keys=False, width=120) for doc in self.documents)
        return f"# {self.description}\n{body}"

    def write(self, folder: Path) -> Path:
        """Writes <folder>/<rule>/<kind>/<name>.yaml and returns its path."""
        path = folder / self.rule / self.kind / f"{self.name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text())
        return path

    @property
    def id(self) -> str:
        """The test id: <rule>/<name>."""
        return f"{self.rule}/{self.name}"


def case_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.yaml"))


def cases_of(rule: str) -> dict[str, list[Case]]:
    """The rule's cases by kind, each list sorted by name."""
    data = yaml.safe_load((FIXTURES / f"{rule}.yaml").read_text())
    if not isinstance(data, dict) or not set(data) <= set(KINDS):
        raise ValueError(f"{rule}.yaml: expected a mapping of {' and '.join(KINDS)}")
    by_kind = {kind: [_case(rule, kind, entry) for entry in data.get(kind) or []] for kind in KINDS}
    for kind, cases in by_kind.items():
        names = [c.name for c in cases]
        if len(set(names)) != len(names):
            raise ValueError(f"{rule}.yaml: two {kind} cases share a name: {sorted(names)}")
        cases.sort(key=lambda c: c.name)
    return by_kind


def all_cases() -> list[Case]:
    return [case for path in case_files() for cases in cases_of(path.stem).values() for case in cases]


@functools.cache
def fixture_tree() -> Path:
    """Every case written out once per process, beside a copy of the reference manifests, in a temporary folder
    removed at exit; returns <root>/tests/policies/fixtures (see TREE_PATH)."""
    root = Path(tempfile.mkdtemp(prefix="vllm-pulumi-fixtures-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    tree = root / TREE_PATH
    shutil.copytree(REFERENCE, tree / REFERENCE.name)
    for c in all_cases():
        c.write(tree)
    return tree


def tree_root(tree: Path) -> Path:
    """The folder that stands in for the checkout: the tree sits at TREE_PATH under it."""
    return tree.parents[len(TREE_PATH.parts) - 1]


# ---- building a case ------------------------------------------------------------------------------------------------

def _case(rule: str, kind: str, entry: Any) -> Case:
    if not isinstance(entry, dict):
        raise ValueError(f"{rule}.yaml {kind}: a case is a mapping, not {entry!r}")
    unknown = set(entry) - CASE_KEYS
    if unknown or "name" not in entry or "description" not in entry:
        raise ValueError(f"{rule}.yaml {kind} {entry.get('name')}: needs name and description; unknown {unknown}")
    label = f"{rule}.yaml {kind} {entry['name']}"
    docs = _base(entry["base"], entry.get("kinds")) if "base" in entry else []
    docs += copy.deepcopy(entry.get("documents") or [])
    if not docs:
        raise ValueError(f"{label}: no documents (a base or documents)")
    for change in entry.get("changes") or []:
        if not isinstance(change, dict) or len(change) != 1:
            raise ValueError(f"{label}: a change is a mapping of one operation, not {change!r}")
        ((operation, argument),) = change.items()
        if operation not in OPERATIONS:
            raise ValueError(f"{label}: unknown operation {operation!r} (known: {sorted(OPERATIONS)})")
        try:
            OPERATIONS[operation](docs, argument)
        except (KeyError, IndexError, StopIteration, TypeError, ValueError) as error:
            raise ValueError(f"{label}: {operation} {argument!r}: {error!r}") from error
    return Case(rule, kind, entry["name"], entry["description"], tuple(docs))


@functools.cache
def _base_documents(base: str) -> tuple[Document, ...]:
    if base.startswith("golden/"):
        path = GOLDEN / base.removeprefix("golden/") / "manifests.yaml"
    else:
        path = REFERENCE / f"{base}.yaml"
    return tuple(d for d in yaml.safe_load_all(path.read_text()) if d)


def _base(base: str, kinds: list[str] | None) -> list[Document]:
    docs = [copy.deepcopy(d) for d in _base_documents(base) if kinds is None or d["kind"] in kinds]
    if kinds is not None and {d["kind"] for d in docs} != set(kinds):
        raise ValueError(f"base {base} lacks some of the kinds {kinds}")
    return docs


# ---- paths ----------------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")
_ANCHORS: dict[str, tuple[str, str]] = {
    "pod": ("Deployment", "spec.template.spec"),
    "vllm": ("Deployment", "spec.template.spec.containers[0]"),
    "leader": ("LeaderWorkerSet", "spec.leaderWorkerTemplate.leaderTemplate.spec"),
    "worker": ("LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate.spec"),
}


def _tokens(path: str) -> list[str]:
    tokens, end = [], 0
    for match in _TOKEN.finditer(path):
        if match.start() != end and path[end:match.start()] != ".":
            raise ValueError(f"cannot read the path {path!r}")
        tokens.append(match.group(1) or f"[{match.group(2)}]")
        end = match.end()
    if end != len(path) or not tokens:
        raise ValueError(f"cannot read the path {path!r}")
    return tokens


def _step(node: Any, token: str, create: bool) -> Any:
    """The child of ``node`` the token names; with ``create``, a missing key becomes an empty map."""
    if isinstance(node, list):
        return node[_index(node, token)]
    key = _key(token)
    if create and key not in node:
        node[key] = {}
    return node[key]


def _key(token: str) -> str:
    return token[1:-1] if token.startswith("[") else token


def _index(items: list[Any], token: str) -> int:
    inner = _key(token)
    if "=" in inner:
        field, value = inner.split("=", 1)
        return next(i for i, item in enumerate(items) if str(item.get(field)) == value)
    return int(inner)


def _parent(docs: list[Document], path: str, create: bool = False) -> tuple[Any, str]:
    """The container that holds the path's last step, and that step."""
    anchor, *rest = _tokens(path)
    if anchor in _ANCHORS:
        kind, prefix = _ANCHORS[anchor]
        anchor, rest = kind, _tokens(prefix) + rest
    node: Any = next(d for d in docs if d["kind"] == anchor)
    if not rest:
        raise ValueError(f"{path!r} names a whole document")
    for token in rest[:-1]:
        node = _step(node, token, create)
    return node, rest[-1]


def _get(docs: list[Document], path: str) -> Any:
    node, last = _parent(docs, path)
    return _step(node, last, create=False)


def _put(docs: list[Document], path: str, value: Any) -> None:
    node, last = _parent(docs, path, create=True)
    if isinstance(node, list):
        node[_index(node, last)] = copy.deepcopy(value)
    else:
        node[_key(last)] = copy.deepcopy(value)


# ---- operations -----------------------------------------------------------------------------------------------------

def _set(docs: list[Document], values: dict[str, Any]) -> None:
    for path, value in values.items():
        _put(docs, path, value)


def _remove(docs: list[Document], paths: str | list[str]) -> None:
    for path in [paths] if isinstance(paths, str) else paths:
        node, last = _parent(docs, path)
        if isinstance(node, list):
            del node[_index(node, last)]
        else:
            del node[_key(last)]


def _append(docs: list[Document], values: dict[str, Any]) -> None:
    for path, value in values.items():
        items = _get(docs, path)
        if not isinstance(items, list):
            raise TypeError(f"{path} is not a list")
        items.append(copy.deepcopy(value))


def _replace(docs: list[Document], values: dict[str, list[str]]) -> None:
    for path, (old, new) in values.items():
        text = _get(docs, path)
        if old not in text:
            raise ValueError(f"{old!r} is not in {path}")
        _put(docs, path, text.replace(old, new))


def _copy(docs: list[Document], values: dict[str, str]) -> None:
    for path, source in values.items():
        _put(docs, path, _get(docs, source))


def _vllm_args(docs: list[Document]) -> list[str]:
    args: list[str] = _get(docs, "vllm.args")
    return args


def _without_flag(args: list[str], flag: str) -> Iterator[str]:
    return (a for a in args if not a.startswith(flag + "=") and a != flag)


def _drop_arg(docs: list[Document], flag: str) -> None:
    args = _vllm_args(docs)
    args[:] = _without_flag(args, flag)


def _arg(docs: list[Document], arg: str) -> None:
    _drop_arg(docs, arg.split("=", 1)[0])
    _vllm_args(docs).append(arg)


OPERATIONS: dict[str, Callable[[list[Document], Any], None]] = {
    "set": _set, "remove": _remove, "append": _append, "replace": _replace, "copy": _copy,
    "arg": _arg, "drop-arg": _drop_arg,
}
