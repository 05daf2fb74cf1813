"""Read Kubernetes manifests from YAML files and directories: multi-document files, the pulumi-kubernetes render
layout (``0-crd/``, ``1-manifest/``), Helm template output, ``kind: List`` wrappers.

Speed: documents are split on their ``---`` lines and a document is parsed only when a rule reads its kind (and, for
text-filtered rules, its text mentions what the rule looks for). Secrets, PVCs, CRDs, dashboards without removed
metric names and the like are never parsed, which halves the work on rendered stacks; a syntax error inside such a
document is therefore not reported (kubectl or kubeconform validate those).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from yaml.nodes import Node, ScalarNode, SequenceNode

from vllm_pulumi.policies.workload import Resource

# libyaml's C parser composes the node tree; PyYAML built without libyaml falls back to the pure-Python one.
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_INT, _BOOL, _NULL = "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_IMPLICIT = yaml.SafeLoader.yaml_implicit_resolvers
# Manifests repeat the same keys and short values thousands of times ("name", "metadata", "true", "8000"): the tag
# each plain scalar resolves to is remembered instead of re-running SafeLoader's regular expressions.
_RESOLVED: dict[str, str] = {}
_CACHED_LENGTH = 64
_CACHE_ENTRIES = 200_000


class _Loader(_BaseLoader):  # type: ignore[misc]
    """SafeLoader semantics (YAML 1.1 implicit types), minus the per-node work manifests never need: no path
    resolvers, and (in ``_construct``) no generic constructor dispatch for plain strings, maps and lists."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            if not implicit[0]:
                return _STR
            tag = _RESOLVED.get(value)
            if tag is None:
                tag = _STR
                for candidate, regexp in _IMPLICIT.get(value[:1], ()):
                    if regexp.match(value):
                        tag = str(candidate)
                        break
                if len(value) <= _CACHED_LENGTH and len(_RESOLVED) < _CACHE_ENTRIES:
                    _RESOLVED[value] = tag
            return tag
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


def _construct(node: Node, loader: Any) -> Any:
    """The Python value of a composed node: strings, maps and lists directly; anything else (ints, bools, nulls,
    timestamps, merge keys) through SafeConstructor, so values are exactly what yaml.safe_load gives."""
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == _MAP:
        result = {}
        for key, value in node.value:  # string keys and values inline: most nodes of a manifest are those
            key_tag = key.tag
            if key_tag == _MERGE:
                return loader.construct_object(node, deep=True)
            result[key.value if key_tag == _STR else _construct(key, loader)] = (
                value.value if value.tag == _STR else _construct(value, loader))
        return result
    if tag == _SEQ:
        return [item.value if item.tag == _STR else _construct(item, loader) for item in node.value]
    if tag == _INT and node.value.isdigit():
        return int(node.value)
    if tag == _BOOL and node.value in _BOOLS:
        return _BOOLS[node.value]
    if tag == _NULL:
        return None
    return loader.construct_object(node, deep=True)


def _load(chunk: str) -> Any:
    loader = _Loader(chunk)
    try:
        node = loader.get_single_node()
        return None if node is None else _construct(node, loader)
    finally:
        loader.dispose()

_EXTENSIONS = (".yaml", ".yml", ".json")
_TOP_LEVEL_KIND = re.compile(r"""^kind:[ \t]*["']?([A-Za-z][A-Za-z0-9]*)["']?[ \t]*(?:#.*)?\r?$""", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^[ \t]*[^#\s]", re.MULTILINE)
# The first line of a document that is neither its `---` marker nor a comment: where a reader expects the object,
# past Helm's `# Source:` comment.
_OBJECT_LINE = re.compile(r"^(?!---(?:\s|$))[ \t]*[^#\s]", re.MULTILINE)

Needed = Callable[[str, str], bool]
"""``needed(kind, text)``: whether a document of this kind and text has to be parsed."""


class InputError(ValueError):
    """Input the checker cannot read; the message names the file (and line when known)."""


def yaml_files(paths: Sequence[str]) -> Iterator[Path]:
    """The YAML files under each path, directories walked in sorted order (so ``0-crd/`` comes first)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [Path(root) / f for f in sorted(files) if f.endswith(_EXTENSIONS)]
            yield from found
        elif path.exists():
            yield path
        else:
            raise InputError(f"{raw}: no such file or directory")


def documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each document of a stream, split on ``---`` lines; comment-only parts dropped."""
    starts = [0]
    at = text.find("\n---")
    while at >= 0:  # str.find, not a multiline regex: this runs over every byte of the input
        after = text[at + 4: at + 5]
        if after in ("", " ", "\t", "\n", "\r"):
            starts.append(at + 1)
        at = text.find("\n---", at + 4)
    line = 1
    previous = 0
    for index, start in enumerate(starts):
        line += text.count("\n", previous, start)
        previous = start
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        chunk = text[start:end]
        body = chunk[3:] if chunk.startswith("---") else chunk
        if _CONTENT_LINE.search(body):
            yield line, chunk


def _objects(document: Any) -> Iterator[dict[str, Any]]:
    if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
        for item in document["items"]:
            yield from _objects(item)
    elif isinstance(document, dict):
        yield document


def _parse(chunk: str, source: str, line: int) -> Any:
    try:
        return _load(chunk)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{line + mark.line}:{mark.column + 1}" if mark is not None else f"{source}:{line}"
        problem = error.problem or error.context or "invalid YAML"
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{source}:{line}: invalid YAML: {error}") from None


def _object_line(chunk: str, line: int) -> int:
    start = _OBJECT_LINE.search(chunk)
    return line + chunk.count("\n", 0, start.start()) if start is not None else line


def load_text(text: str, source: str, needed: Needed | None = None,
              skip_non_kubernetes: bool = False) -> list[Resource]:
    """The objects of one YAML stream; with ``needed``, only documents some rule reads are parsed.

    ``skip_non_kubernetes``: documents that are not Kubernetes objects (a CI config, Helm values) are passed over
    instead of refused; for callers handed every YAML file of a repository, such as the pre-commit hook."""
    resources = []
    for index, (line, chunk) in enumerate(documents(text), start=1):
        if needed is not None:
            kind = _TOP_LEVEL_KIND.search(chunk)
            if kind is not None and kind.group(1) != "List" and not needed(kind.group(1), chunk):
                continue
        document = _parse(chunk, source, line)
        if document is None:
            continue
        if not isinstance(document, dict):
            if skip_non_kubernetes:
                continue
            raise InputError(f"{source}:{line}: a {type(document).__name__}, not a Kubernetes object")
        object_line = _object_line(chunk, line)
        for obj in _objects(document):
            if "kind" not in obj or "apiVersion" not in obj:
                if skip_non_kubernetes:
                    continue
                raise InputError(f"{source}:{line}: no apiVersion/kind, so not a Kubernetes object")
            resources.append(Resource(obj, source, object_line, index))
    return resources


def read_stream(stream: BinaryIO | None, source: str) -> str:
    """All of a byte stream (standard input) as text; empty input is an error, since a pipe from a command that
    failed (``helm template`` with a bad value) is empty, and checking nothing must not pass."""
    if stream is None:
        raise InputError(f"{source}: no standard input to read")
    try:
        data = stream.read()
    except OSError as error:
        raise InputError(f"{source}: cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{source}: cannot read: not UTF-8 text (byte {data[error.start]:#04x} at offset "
                         f"{error.start})") from None
    if next(documents(text), None) is None:
        raise InputError(f"{source}: no YAML documents in the input (did the command before the pipe fail?)")
    return text


def read_file(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{file}: cannot read: {error}") from None


def load_paths(paths: Sequence[str], needed: Needed | None = None) -> list[Resource]:
    """Every object in the given files and directories; raises InputError on anything unreadable."""
    return [resource for file in yaml_files(paths) for resource in load_text(read_file(file), str(file), needed)]
