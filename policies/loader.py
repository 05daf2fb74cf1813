"""Read Kubernetes manifests from YAML files and directories: multi-document files, the pulumi-kubernetes render
layout (``0-crd/``, ``1-manifest/``), Helm template output, ``kind: List`` wrappers."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from .workload import Resource

# The C parser is several times faster; PyYAML built without libyaml falls back to the pure-Python one.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_EXTENSIONS = (".yaml", ".yml", ".json")
_DOCUMENT_START = re.compile(r"^---", re.MULTILINE)


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


def _document_line(text: str, index: int) -> int:
    """1-based line where the ``index``-th document of a multi-document stream starts (best effort)."""
    markers = list(_DOCUMENT_START.finditer(text))
    starts = [text.count("\n", 0, m.start()) + 1 for m in markers]
    head = text[: markers[0].start()] if markers else text
    if any(line.strip() and not line.lstrip().startswith("#") for line in head.splitlines()):
        starts.insert(0, 1)
    return starts[index] if index < len(starts) else 1


def _objects(document: Any) -> Iterator[dict[str, Any]]:
    if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
        for item in document["items"]:
            yield from _objects(item)
    elif isinstance(document, dict):
        yield document


def load_text(text: str, source: str) -> list[Resource]:
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = error.problem or error.context or "invalid YAML"
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{source}: invalid YAML: {error}") from None
    resources = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            line = _document_line(text, index)
            raise InputError(f"{source}:{line}: document {index + 1} is a {type(document).__name__}, not a "
                             "Kubernetes object")
        for obj in _objects(document):
            if "kind" not in obj or "apiVersion" not in obj:
                line = _document_line(text, index)
                raise InputError(f"{source}:{line}: document {index + 1} has no apiVersion/kind, so it is not a "
                                 "Kubernetes object")
            resources.append(Resource(obj, source))
    return resources


def load_paths(paths: Sequence[str]) -> list[Resource]:
    """Every object in the given files and directories; raises InputError on anything unreadable."""
    resources: list[Resource] = []
    for file in yaml_files(paths):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{file}: cannot read: {error}") from None
        resources += load_text(text, str(file))
    return resources
