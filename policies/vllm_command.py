"""The vLLM server a container runs, read from its command line: ``vllm serve`` or the OpenAI API server module,
directly, inside a shell script (LWS leaders start Ray first) or as the vllm-openai image's own entrypoint, with its
flags parsed the way vLLM's argparse reads them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.policies.values import as_int, sequence, strings

# Short aliases vLLM's parser accepts for long flags.
_FLAG_ALIASES = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size",
                 "-q": "quantization"}
# Flags that take no value; everything else named --enable-/--disable-/--no- is boolean too.
_BOOLEAN_FLAGS = frozenset({"trust-remote-code", "enforce-eager", "use-v2-block-manager", "worker-use-ray",
                            "engine-use-ray", "headless", "async-scheduling", "skip-tokenizer-init"})
_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class ServeCommand:
    """The ``vllm serve`` (or api_server module) invocation of a container, as tokens after the entry point."""

    entry: str
    """``vllm serve``, ``api_server`` or ``image`` (the vllm-openai image's own ``vllm serve`` entrypoint)."""
    tokens: tuple[str, ...]
    flags: dict[str, str | None]
    """Flag name without dashes -> value (None for a boolean flag); the last occurrence wins, as in argparse."""
    flag_names: tuple[str, ...]
    """Every flag as written (normalised), in order, repeats included."""
    positional: tuple[str, ...]
    in_shell: bool

    @property
    def model_ref(self) -> str | None:
        if self.flags.get("model"):
            return self.flags["model"]
        if self.entry != "api_server" and self.positional:
            return self.positional[0]
        return None

    def has(self, name: str) -> bool:
        return name in self.flags

    def value(self, name: str) -> str | None:
        return self.flags.get(name)

    def int_flag(self, name: str, default: int) -> int | None:
        """The flag's integer value, ``default`` when absent, None when present but not a literal integer."""
        if name not in self.flags:
            return default
        return as_int(self.flags[name])


def _is_boolean(name: str) -> bool:
    return name in _BOOLEAN_FLAGS or name.startswith(("enable-", "disable-", "no-"))


def parse_flags(tokens: list[str]) -> tuple[dict[str, str | None], list[str], list[str]]:
    flags: dict[str, str | None] = {}
    names: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        head = token.split("=", 1)[0]
        if token.startswith("--") or head in _FLAG_ALIASES:
            value: str | None = token.split("=", 1)[1] if "=" in token else None
            name = _FLAG_ALIASES.get(head) or head.lstrip("-").replace("_", "-")
            if value is None and not _is_boolean(name) and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value = tokens[i + 1]
                i += 1
            flags[name] = value
            names.append(name)
        else:
            positional.append(token)
        i += 1
    return flags, names, positional


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def _after_entry(tokens: list[str]) -> tuple[str, list[str]] | None:
    for i, token in enumerate(tokens):
        if token == _API_SERVER_MODULE:
            return "api_server", tokens[i + 1:]
        if (token == "vllm" or token.endswith("/vllm")) and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return "vllm serve", tokens[i + 2:]
    return None


def _script_segment(script: str) -> list[str] | None:
    """The tokens of the ``vllm serve`` command inside a shell script (LWS leaders start Ray first)."""
    text = script.replace("\\\n", " ")
    for line in text.splitlines():
        for segment in re.split(r"&&|\|\||;|\|", line):
            if "vllm" in segment and ("serve" in segment or _API_SERVER_MODULE in segment):
                tokens = _split(segment)
                if _after_entry(tokens):
                    return tokens
    return None


def is_vllm_image(image: object) -> bool:
    return isinstance(image, str) and "vllm" in image.lower()


def mentions_vllm(value: object) -> bool:
    """Whether any string inside ``value`` (a manifest subtree) names vLLM."""
    if isinstance(value, str):
        return "vllm" in value.lower()
    if isinstance(value, dict):
        return any(mentions_vllm(v) for v in value.values())
    if isinstance(value, list):
        return any(mentions_vllm(v) for v in value)
    return False


def vllm_containers(value: object, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, container) of every container-shaped mapping (``image`` or ``command``/``args``) that runs vLLM,
    anywhere inside an object: how an unknown kind is searched."""
    if isinstance(value, dict):
        image = value.get("image")
        if ("image" in value or "command" in value or "args" in value) and (
                is_vllm_image(image) or (isinstance(image, dict) and mentions_vllm(image))
                or mentions_vllm(value.get("command")) or mentions_vllm(value.get("args"))):
            yield path, value
            return
        engine = next((str(k) for k in value if "vllm" in str(k).lower()), None)
        if engine is not None:  # an operator's own schema for vLLM settings (production-stack's vllmConfig)
            yield f"{path}.{engine}" if path else engine, value
            return
        for key, item in value.items():
            yield from vllm_containers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from vllm_containers(item, f"{path}[{i}]")


_ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, env: dict[str, str]) -> str:
    if "$(" not in text:
        return text
    return _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def serve_command(container: dict[str, Any]) -> ServeCommand | None:
    """The container's vLLM server invocation, or None when it does not run one."""
    env = {str(e.get("name")): str(e["value"]) for e in sequence(container.get("env"))
           if isinstance(e, dict) and isinstance(e.get("value"), (str, int, float)) and not isinstance(e.get("value"), bool)}
    # The kubelet expands $(NAME) in command and args from the container's env; literal values are expanded here too.
    command = [_expand(a, env) for a in strings(container.get("command"))]
    args = [_expand(a, env) for a in strings(container.get("args"))]
    argv = command + args
    in_shell = False
    tokens: list[str] | None = None
    if argv and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        in_shell = True
        option = next((i for i, a in enumerate(argv[1:], 1) if re.fullmatch(r"-[a-z]*c[a-z]*", a)), None)
        if option is not None and option + 1 < len(argv):
            tokens = _script_segment(argv[option + 1])
            # `bash -c 'exec vllm serve "$@"' NAME ARGS...`: the script's "$@" is the arguments after $0
            params = argv[option + 3:]
            if tokens is not None:
                tokens = [p for t in tokens for p in (params if t in ("$@", "$*") else [t])]
    else:
        tokens = argv
    found = _after_entry(tokens) if tokens is not None else None
    if found is not None:
        entry, rest = found
    elif not command and not in_shell and is_vllm_image(container.get("image")):
        # Some published examples repeat the subcommand in args (`args: [serve, MODEL, ...]`): the model is what
        # follows it, not a model called "serve".
        entry, rest = "image", args[1:] if args[:1] == ["serve"] else args
    else:
        return None
    flags, names, positional = parse_flags(rest)
    return ServeCommand(entry, tuple(rest), flags, tuple(names), tuple(positional), in_shell)

