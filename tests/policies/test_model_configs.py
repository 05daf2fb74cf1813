"""Models outside the catalog: config.json from --model-config files and directories, and from the Hugging Face Hub
through huggingface_hub (replaced here at its boundary by a fake module: tests never touch the network)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from vllm_pulumi.policies import model_configs
from vllm_pulumi.policies.cli import main
from vllm_pulumi.policies.model_configs import ModelConfigError, ModelConfigs

# Mistral-7B-Instruct-v0.2's architecture numbers (facts, as its config.json states them).
MISTRAL = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "max_position_embeddings": 32768, "vocab_size": 32000, "torch_dtype": "bfloat16"}
REFERENCE = "mistralai/Mistral-7B-Instruct-v0.2"


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("layout", ["org/name", "org--name", "name", "file"])
def test_local_layouts(tmp_path: Path, layout: str) -> None:
    target = {"org/name": tmp_path / "mistralai" / "Mistral-7B-Instruct-v0.2" / "config.json",
              "org--name": tmp_path / "mistralai--Mistral-7B-Instruct-v0.2" / "config.json",
              "name": tmp_path / "Mistral-7B-Instruct-v0.2" / "config.json",
              "file": tmp_path / "mistral.json"}[layout]
    _write(target, MISTRAL)
    root = target if layout == "file" else tmp_path
    facts = ModelConfigs([str(root)]).lookup(REFERENCE)
    assert not isinstance(facts, str), facts
    assert (facts.num_hidden_layers, facts.num_key_value_heads, facts.max_position_embeddings) == (32, 8, 32768)


def test_a_directory_without_the_model_says_nothing(tmp_path: Path) -> None:
    _write(tmp_path / "other" / "config.json", MISTRAL)
    assert ModelConfigs([str(tmp_path)]).lookup(REFERENCE) == ""


@pytest.mark.parametrize(("content", "expected"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a config.json object"),
    ('{"architectures": ["X"]}', "lacks num_hidden_layers"),
])
def test_bad_config_files_are_named_with_the_reason(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    problem = ModelConfigs([str(path)]).lookup(REFERENCE)
    assert isinstance(problem, str) and str(path) in problem and expected in problem


def test_a_missing_path_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="no such file"):
        ModelConfigs([str(tmp_path / "absent")]).validate()


class _FakeHub:
    """huggingface_hub's download function: records calls, serves a file or raises like the client does."""

    def __init__(self, tmp_path: Path, fail: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail
        self.file = _write(tmp_path / "hub" / "config.json", MISTRAL)

    def hf_hub_download(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if self.fail is not None:
            raise self.fail
        return str(self.file)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _FakeHub:
    hub = _FakeHub(tmp_path)
    module = types.ModuleType("huggingface_hub")
    module.hf_hub_download = hub.hf_hub_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    return hub


def test_hub_fetches_config_once_with_a_timeout(fake_hub: _FakeHub) -> None:
    sources = ModelConfigs(hub=True, timeout_seconds=3.0)
    first, second = sources.lookup(REFERENCE), sources.lookup(REFERENCE)
    assert first is second and not isinstance(first, str)
    assert fake_hub.calls == [{"repo_id": REFERENCE, "filename": "config.json", "etag_timeout": 3.0}]


def test_hub_is_not_asked_for_paths_or_when_disabled(fake_hub: _FakeHub) -> None:
    assert ModelConfigs(hub=True).lookup("/models/llama") == ""
    assert ModelConfigs(hub=False).lookup(REFERENCE) == ""
    assert fake_hub.calls == []


def test_hub_failure_becomes_a_reason(fake_hub: _FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.fail = TimeoutError("slow")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    problem = ModelConfigs(hub=True).lookup(REFERENCE)
    assert isinstance(problem, str) and "Hugging Face Hub" in problem and "TimeoutError" in problem
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    problem = ModelConfigs(hub=True).lookup(REFERENCE)
    assert isinstance(problem, str) and "local Hugging Face cache" in problem


def _mistral_deployment(tmp_path: Path, max_model_len: int) -> Path:
    manifest = tmp_path / "mistral.yaml"
    manifest.write_text(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: mistral}}
spec:
  template:
    spec:
      nodeSelector: {{cloud.google.com/gke-accelerator: nvidia-l4}}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.33.0
        args: [{REFERENCE}, --max-model-len={max_model_len}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
""")
    return manifest


def test_cli_model_config_lets_capacity_rules_check_a_model_outside_the_catalog(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _mistral_deployment(tmp_path, 65536)
    config = _write(tmp_path / "configs" / "mistralai" / "Mistral-7B-Instruct-v0.2" / "config.json", MISTRAL)
    main([str(manifest), "--no-hub", "--format", "json"])
    without = json.loads(capsys.readouterr().out)
    assert any(f["policy"] == "kv-cache-fits" and f["message"].startswith("cannot check") for f in without)
    main([str(manifest), "--no-hub", "--format", "json", "--model-config", str(config.parents[2])])
    with_config = json.loads(capsys.readouterr().out)
    kv = [f for f in with_config if f["policy"] == "kv-cache-fits"]
    assert kv and kv[0]["enforcement"] == "mandatory" and "max_position_embeddings 32,768" in kv[0]["message"]
    assert "--max-model-len=32768" in kv[0]["fix"]
    assert model_configs.active().paths == ()  # the run's sources do not leak into the next caller


def test_cli_refuses_a_missing_model_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(_mistral_deployment(tmp_path, 4096)), "--model-config", str(tmp_path / "nope")]) == 2
    assert "--model-config" in capsys.readouterr().err
