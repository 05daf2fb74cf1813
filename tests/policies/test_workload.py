"""Recognising vLLM servers and reading their facts from manifests written in the ways people write them."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_pulumi.policies.facts import parse_tokens
from vllm_pulumi.policies.pods import pre_stop_seconds
from vllm_pulumi.policies.values import parse_quantity
from vllm_pulumi.policies.vllm_command import serve_command
from vllm_pulumi.policies.workload import Resource


def _deployment(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"template": {"metadata": {}, "spec": {"containers": [container], **pod}}}}


@pytest.mark.parametrize("container, model, tp", [
    ({"image": "vllm/vllm-openai:v0.33.0", "args": ["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size=2"]},
     "meta-llama/Llama-3.1-8B-Instruct", 2),
    ({"image": "vllm/vllm-openai:v0.33.0", "args": ["--model", "/models/llama-3-8b", "-tp", "4"]},
     "/models/llama-3-8b", 4),
    ({"image": "registry.local/custom:1", "command": ["vllm", "serve", "Qwen/Qwen3-8B"], "args": ["--tensor_parallel_size", "2"]},
     "Qwen/Qwen3-8B", 2),
    ({"image": "python:3.12", "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
      "args": ["--model=qwen3-8b", "--port=8080"]}, "qwen3-8b", 1),
    ({"image": "vllm/vllm-openai:v0.33.0", "command": ["/bin/sh", "-c"],
      "args": ["ray start --head && \\\n  exec vllm serve /models/m --tensor-parallel-size 8 \\\n  --shutdown-timeout 60"]},
     "/models/m", 8),
    ({"image": "vllm/vllm-openai:v0.33.0", "command": ["bash", "-c",
      "bash multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE); "
      "python3 -m vllm.entrypoints.openai.api_server --port 8080 --model meta-llama/Llama-3.1-405B-Instruct "
      "--tensor-parallel-size 8 --pipeline-parallel-size 2"]}, "meta-llama/Llama-3.1-405B-Instruct", 8),
])
def test_serve_command_forms(container: dict[str, Any], model: str, tp: int) -> None:
    command = serve_command(container)
    assert command is not None
    assert command.model_ref == model
    assert command.int_flag("tensor-parallel-size", 1) == tp


@pytest.mark.parametrize("container", [
    {"image": "vllm/vllm-openai:v0.33.0", "command": ["bash", "-c", "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]},
    {"image": "nginx:1.27"},
    {"image": "python:3.12", "command": ["python", "-c", "print('vllm serve')"]},
])
def test_not_a_server(container: dict[str, Any]) -> None:
    assert serve_command(container) is None


def test_boolean_flags_do_not_swallow_the_next_argument() -> None:
    command = serve_command({"image": "vllm/vllm-openai:v0.33.0",
                             "args": ["--enable-prefix-caching", "--max-model-len", "4096", "m"]})
    assert command is not None
    assert command.flags["enable-prefix-caching"] is None
    assert command.value("max-model-len") == "4096"
    assert command.model_ref == "m"


def test_model_and_gpu_from_annotations_override_flags() -> None:
    obj = _deployment({"image": "vllm/vllm-openai:v0.33.0", "args": ["/models/anything"]})
    obj["metadata"]["annotations"] = {"vllm-pulumi.dev/model": "qwen3-32b", "vllm-pulumi.dev/gpu": "h100-sxm"}
    server = Resource(obj).servers[0]
    assert server.model is not None and server.model.name == "qwen3-32b"
    assert server.gpu is not None and server.gpu.id == "h100-sxm"


def test_model_config_annotation_for_models_outside_the_catalog() -> None:
    config = ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 256, '
              '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512}')
    obj = _deployment({"image": "vllm/vllm-openai:v0.33.0", "args": ["/models/tiny"]})
    obj["spec"]["template"]["metadata"]["annotations"] = {"vllm-pulumi.dev/model-config": config}
    server = Resource(obj).servers[0]
    assert server.model is not None and server.model.num_attention_heads == 4


def test_gpu_from_affinity_takes_the_smallest_allowed() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                               "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB-SHARED"]}]}]}}}
    server = Resource(_deployment({"image": "vllm/vllm-openai:v0.33.0", "args": ["m"]}, affinity=affinity)).servers[0]
    assert server.gpu is not None and server.gpu.id == "a100-40gb"


@pytest.mark.parametrize("lifecycle, seconds", [
    ({}, 0),
    ({"preStop": {"sleep": {"seconds": 15}}}, 15),
    ({"preStop": {"exec": {"command": ["sleep", "20"]}}}, 20),
    ({"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 30 && kill -TERM 1"]}}}, 30),
    ({"preStop": {"httpGet": {"path": "/drain", "port": 8000}}}, None),
])
def test_pre_stop_seconds(lifecycle: dict[str, Any], seconds: int | None) -> None:
    assert pre_stop_seconds({"lifecycle": lifecycle}) == seconds


@pytest.mark.parametrize("text, tokens", [("32768", 32768), ("32k", 32000), ("32K", 32768), ("1M", 1048576),
                                          ("$(LEN)", None)])
def test_parse_tokens(text: str, tokens: int | None) -> None:
    assert parse_tokens(text) == tokens


def test_shell_script_that_execs_vllm_with_its_positional_parameters() -> None:
    """The components' LWS leader: `bash -c 'ray start ...; exec vllm serve "$@"' vllm-leader ARGS...`."""
    container = {"image": "vllm/vllm-openai:v0.33.0", "command": [
        "bash", "-c", 'set -euo pipefail\nray start --head --port=6379\nexec vllm serve "$@"\n', "vllm-leader"],
        "args": ["/models/llama-3-1-405b", "--tensor-parallel-size=8", "--pipeline-parallel-size=2",
                 "--shutdown-timeout=90"]}
    command = serve_command(container)
    assert command is not None and command.in_shell
    assert command.model_ref == "/models/llama-3-1-405b"
    assert command.int_flag("pipeline-parallel-size", 1) == 2
    assert command.int_flag("shutdown-timeout", 0) == 90


@pytest.mark.parametrize("text, value", [("16Gi", 16 * 2**30), ("500m", 0.5), ("1e3", 1000.0), ("4", 4.0),
                                         ("1.5G", 1.5e9), (8, 8.0), ("lots", None), (True, None)])
def test_parse_quantity(text: object, value: float | None) -> None:
    assert parse_quantity(text) == value
