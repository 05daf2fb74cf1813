"""Models outside the catalog: their ``config.json`` from local files (``--model-config DIR_OR_FILE``) or, when the
network allows, from the Hugging Face Hub, read into ModelFacts with ``runtime.facts.models.parse_config`` (the same parser
the ``vllm-pulumi.dev/model-config`` annotation goes through).

Local layout: a file is the config of every model the catalog does not know; a directory is searched for
``<org>/<name>/config.json``, ``<org>--<name>/config.json``, ``<name>/config.json`` and finally ``config.json``.

The Hub: ``huggingface_hub.hf_hub_download`` (the optional ``hub`` extra), which reads the token from the usual places
(``HF_TOKEN``, the token file of ``hf auth login``), keeps what it fetched in the Hugging Face cache, and in offline mode
(``HF_HUB_OFFLINE=1``) answers from that cache only. Each model is looked up once per run, with a timeout.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.models import ModelFacts, parse_config

HUB_TIMEOUT_SECONDS = 10.0
"""How long one Hub request may take: a checker in CI must not hang on a slow network."""
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


class ModelConfigError(ValueError):
    """A --model-config path that cannot be used; the message names the path and why."""


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def read_config_file(path: Path, name: str) -> ModelFacts:
    """ModelFacts from one config.json; raises ModelConfigError naming the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ModelConfigError(f"--model-config {path}: cannot read: {error}") from None
    except json.JSONDecodeError as error:
        raise ModelConfigError(f"--model-config {path}: not JSON ({error.msg} at line {error.lineno}); expected a "
                               "Hugging Face config.json") from None
    if not isinstance(raw, dict):
        raise ModelConfigError(f"--model-config {path}: a JSON {type(raw).__name__}, not a config.json object")
    try:
        return parse_config(raw, name)
    except PlanningError as error:
        raise ModelConfigError(f"--model-config {path}: {error.reason}") from None


@dataclass
class ModelConfigs:
    """Where config.json files of models outside the catalog come from, and what was found (cached per run)."""

    paths: Sequence[str] = ()
    hub: bool = False
    timeout_seconds: float = HUB_TIMEOUT_SECONDS
    _found: dict[str, ModelFacts | str] = field(default_factory=dict)

    def validate(self) -> None:
        """Fail early on a --model-config path that does not exist."""
        for raw in self.paths:
            if not Path(raw).exists():
                raise ModelConfigError(f"--model-config {raw}: no such file or directory (give a config.json or a "
                                       "directory of <org>/<name>/config.json)")

    def lookup(self, reference: str) -> ModelFacts | str:
        """The model's facts, or why there are none (a sentence for a "cannot check" finding)."""
        if reference not in self._found:
            self._found[reference] = self._lookup(reference)
        return self._found[reference]

    def _lookup(self, reference: str) -> ModelFacts | str:
        try:
            for raw in self.paths:
                found = self._local(Path(raw), reference)
                if found is not None:
                    return found
        except ModelConfigError as error:
            return str(error)
        if not self.hub:
            return ""
        return self._from_hub(reference)

    @staticmethod
    def _local(root: Path, reference: str) -> ModelFacts | None:
        if root.is_file():
            return read_config_file(root, reference)
        parts = [p for p in reference.strip("/").split("/") if p]
        candidates = []
        if parts:
            candidates += [root.joinpath(*parts[-2:]), root / "--".join(parts[-2:]), root / parts[-1]]
        candidates.append(root)
        for directory in candidates:
            config = directory / "config.json"
            if config.is_file():
                return read_config_file(config, reference)
        return None

    def _from_hub(self, reference: str) -> ModelFacts | str:
        if not _HUB_ID.fullmatch(reference):
            return ""  # a local path or a URL: nothing to ask the Hub
        try:
            import huggingface_hub
        except ImportError:
            return "the Hub lookup needs huggingface_hub (pip install 'vllm-pulumi[hub]')"
        try:
            downloaded = huggingface_hub.hf_hub_download(
                repo_id=reference, filename="config.json", etag_timeout=self.timeout_seconds,
            )
        except Exception as error:  # noqa: BLE001 - the Hub client raises many kinds; each becomes a sentence
            where = "the local Hugging Face cache (HF_HUB_OFFLINE is set)" if _offline() else "the Hugging Face Hub"
            return f"config.json of {reference} is not available from {where}: {type(error).__name__}"
        try:
            return read_config_file(Path(downloaded), reference)
        except ModelConfigError as error:
            return str(error)


_ACTIVE = ModelConfigs()


def configure(configs: ModelConfigs) -> None:
    """Set the sources the checker consults for models outside the catalog (the CLI does, once per run)."""
    global _ACTIVE
    _ACTIVE = configs


def active() -> ModelConfigs:
    return _ACTIVE

