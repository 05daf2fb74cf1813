"""Every upstream key is spelled once, in runtime/vocabulary.py (issue 20: "a test fails if one of those strings appears
as a literal elsewhere in the package").

The vocabulary is every module-level str constant of runtime/vocabulary.py and the str items of its tuple constants
(upper-case names). Each other .py file of the package (src/vllm_pulumi: runtime/, components/, policies/, its
``__init__``, and the stack program ``__main__.py``) is parsed with ast, and its string constants are judged:

- **a key**: a constant equal to a vocabulary value fails. So does a *key with a suffix*: a constant without
  whitespace that starts with a vocabulary value (``"karpenter.sh/discovery"``, ``"nvidia.com/gpu:NoSchedule"``, or
  the literal part ``"karpenter.sh/"`` of ``f"karpenter.sh/{name}"``; f-string parts are string constants too). Build
  those from the name instead: ``f"{KARPENTER_GROUP}/v1"``.
- **prose** is allowed: a constant with whitespace in it (a docstring, a field description, a policy message or fix,
  a shell script) may mention a key inside its text, since the reader sees it verbatim and no code compares it.

A key elsewhere inside a whitespace-free constant (``"resources.limits.nvidia.com/gpu"``) is not flagged: a field path
like that is written for people, not a key the code matches. tests/ is not scanned: its expected values may spell keys
verbatim, which checks the vocabulary's own spelling.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from vllm_pulumi.runtime import vocabulary

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOT = REPO_ROOT / "src" / "vllm_pulumi"
VOCABULARY_FILE = PACKAGE_ROOT / "runtime" / "vocabulary.py"


def vocabulary_names() -> list[tuple[str, str]]:
    """(name, value) of every upper-case str constant of the vocabulary and every str item of its tuple constants."""
    pairs: list[tuple[str, str]] = []
    for name, value in vars(vocabulary).items():
        if not name.isupper():
            continue
        if isinstance(value, str):
            pairs.append((name, value))
        elif isinstance(value, tuple):
            pairs.extend((name, item) for item in value if isinstance(item, str))
    return pairs


def package_files() -> list[Path]:
    """Every .py file of the package (through the src/ symlinks) and the stack program, vocabulary.py aside."""
    paths = [Path(folder) / file for folder, _, files in os.walk(PACKAGE_ROOT, followlinks=True)
             for file in files if file.endswith(".py")]
    paths.append(REPO_ROOT / "__main__.py")
    return sorted(path for path in paths if path.resolve() != VOCABULARY_FILE.resolve())


def _is_prose(text: str) -> bool:
    return any(character.isspace() for character in text)


def vocabulary_literals(source: str, values: Iterable[tuple[str, str]]) -> Iterator[tuple[int, str, str]]:
    """(line, literal, vocabulary name) for each string constant of the source that spells a vocabulary key: equal to
    a value, or (without whitespace) a value followed by a suffix. The longest matching value names the finding."""
    by_length = sorted(values, key=lambda pair: -len(pair[1]))
    constants = [node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and not _is_prose(node.value)]
    for node in sorted(constants, key=lambda node: (node.lineno, node.col_offset)):
        for name, value in by_length:
            if node.value.startswith(value):
                yield node.lineno, node.value, name
                break


def test_no_vocabulary_literal_outside_vocabulary() -> None:
    values = vocabulary_names()
    found = [f"{path.relative_to(REPO_ROOT)}:{line}: {literal!r} (use {name})"
             for path in package_files()
             for line, literal, name in vocabulary_literals(path.read_text(), values)]
    assert not found, "upstream keys spelled outside runtime/vocabulary.py:\n" + "\n".join(found)


def test_the_scan_covers_the_package() -> None:
    scanned = {path.relative_to(REPO_ROOT).parts[:3] for path in package_files()}
    for folder in ("runtime", "components", "policies"):
        assert ("src", "vllm_pulumi", folder) in scanned
    assert REPO_ROOT / "__main__.py" in package_files()


PLANTED = '''
"""A docstring may say nvidia.com/gpu and karpenter.sh/discovery in prose."""
from vllm_pulumi.runtime.vocabulary import GPU_RESOURCE, KARPENTER_GROUP

LIMITS = {"nvidia.com/gpu": 1}
DISCOVERY = "karpenter.sh/discovery"
API = f"karpenter.sh/{VERSION}"
PRODUCT = "nvidia.com/gpu.product"
FINE = {GPU_RESOURCE: 1, "api": f"{KARPENTER_GROUP}/v1"}
MESSAGE = f"set {GPU_RESOURCE} in resources.limits.nvidia.com/gpu"
'''


def test_the_scan_finds_planted_literals() -> None:
    found = [(line, literal, name) for line, literal, name in vocabulary_literals(PLANTED, vocabulary_names())]
    assert found == [
        (5, "nvidia.com/gpu", "GPU_RESOURCE"),
        (6, "karpenter.sh/discovery", "KARPENTER_GROUP"),
        (7, "karpenter.sh/", "KARPENTER_GROUP"),
        (8, "nvidia.com/gpu.product", "GPU_PRODUCT_LABEL"),
    ]


def test_no_two_vocabulary_names_share_a_value() -> None:
    names_by_value: dict[str, set[str]] = {}
    for name, value in vocabulary_names():
        names_by_value.setdefault(value, set()).add(name)
    shared = {value: sorted(names) for value, names in names_by_value.items() if len(names) > 1}
    assert not shared, f"one upstream key under several names: {shared}"
    assert len(vocabulary_names()) == len(names_by_value), "a tuple of the vocabulary repeats a value"


def test_vocabulary_values_are_verbatim_keys() -> None:
    """An upstream key has no whitespace in it: a value with a slip like that would be taken for prose and missed."""
    slipped = [(name, value) for name, value in vocabulary_names() if not value or _is_prose(value)]
    assert not slipped
