"""`python -m runtime plan`: exit codes, JSON fields, table, chart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_pulumi.runtime.cli import main

REPO = Path(__file__).resolve().parents[2]
REQUIRED_JSON_KEYS = {"kv_bytes_per_token_per_gpu", "weights_bytes_per_gpu", "kv_cache_bytes_per_gpu",
                      "kv_cache_tokens", "max_concurrency", "fits", "reasons"}


def test_json_plan_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--kv-cache-dtype", "fp8",
                 "--max-model-len", "32768", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert REQUIRED_JSON_KEYS <= set(report)
    assert report["fits"] is True and report["reasons"] == []
    assert report["kv_bytes_per_token_per_gpu"] == 65_536


def test_table_shows_the_seed_style_concurrency_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen3-8b", "--gpu", "NVIDIA-GeForce-RTX-4090", "--max-model-len", "32768"]) == 0
    out = capsys.readouterr().out
    assert "context tokens   concurrent sequences" in out and "verdict                    fits" in out


@pytest.mark.parametrize(
    ("case", "model", "groups_line"),
    [
        ("full attention: one group", "llama-3.1-8b", "KV cache groups            1: 1 x full attention; "),
        ("Gemma 3 5:1 hybrid: six window groups and one full", "gemma-3-27b",
         "KV cache groups            7: 6 x 1024-token window, 1 x full attention; "),
    ],
)
def test_table_names_vllms_kv_cache_groups(capsys: pytest.CaptureFixture[str], case: str, model: str,
                                            groups_line: str) -> None:
    assert main(["plan", "--model", model, "--gpu", "h100-sxm", "--max-model-len", "32768"]) == 0
    out = capsys.readouterr().out
    assert groups_line in out, case
    assert ("tokens in flight" in out) is (model == "gemma-3-27b")


def test_settings_that_do_not_fit_exit_1_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama-3-70b", "--gpu", "h100", "--max-model-len", "8192", "--json"]) == 1
    assert "no memory left for the KV cache" in json.loads(capsys.readouterr().out)["reasons"][0]


@pytest.mark.parametrize(
    ("case", "argv", "stderr"),
    [
        ("seed scenario b", ["--model", "llama-3-70b", "--gpu", "h100", "--tp", "5"],
         "error: --tp=5: total number of attention heads (64) must be divisible by tensor parallel size (5)"),
        ("unknown model", ["--model", "lama-3-8b", "--gpu", "h100"], "closest known: llama-3-8b"),
        ("unknown gpu", ["--model", "llama-3-8b", "--gpu", "H1OO"], "unknown gpu"),
        ("out of range utilisation", ["--model", "llama-3-8b", "--gpu", "h100", "--gpu-memory-utilization", "1.5"],
         "--gpu-memory-utilization=1.5"),
    ],
)
def test_impossible_settings_exit_2_with_one_line(case: str, argv: list[str], stderr: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert stderr in err and err.count("\n") == 1


def test_config_json_path_plans_an_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4,
              "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
              "vocab_size": 1000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["plan", "--model", str(tmp_path), "--gpu", "l4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token_per_gpu"] == 2 * 4 * 2 * 64 * 2


def test_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "kv.png"
    assert main(["plan", "--model", "llama-3-8b", "--gpu", "rtx-4090", "--plot", str(chart)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_python_dash_m_runtime_runs_from_the_repo_root() -> None:
    result = subprocess.run([sys.executable, "-m", "runtime", "plan", "--model", "llama-3-8b", "--gpu", "h100",
                             "--json"], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "llama-3-8b"


@pytest.mark.parametrize("stack", ["local", "edge", "prod", "multinode", "karpenter"])
def test_stack_file_plans_every_model_as_the_program_derives_it(stack: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack-file", str(REPO / "stacks" / f"Pulumi.{stack}.yaml"), "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert reports and all(report["fits"] for report in reports)


def test_multinode_stack_file_keeps_the_leader_worker_set_layout(capsys: pytest.CaptureFixture[str]) -> None:
    main(["plan", "--stack-file", str(REPO / "stacks" / "Pulumi.multinode.yaml"), "--json"])
    (report,) = json.loads(capsys.readouterr().out)
    assert (report["layout"], report["pods_per_replica"], report["gpus_per_pod"]) == ("leader-worker-set", 2, 8)


def test_unreadable_or_invalid_stack_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack-file", str(tmp_path / "missing.yaml")]) == 2
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  vllm-pulumi:deployment:\n    cluster: {mode: render}\n    models: []\n")
    assert main(["plan", "--stack-file", str(bad)]) == 2
    assert "vllm-pulumi:deployment.models" in capsys.readouterr().err


def test_stack_file_report_is_the_programs_plan_including_overrides(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """overhead_gib and startup_budget_seconds set in the stack reach the report, as they reach the deployment."""
    import yaml

    from vllm_pulumi.runtime.planning.deployment import plan_deployment
    from vllm_pulumi.runtime.planning.deployment import load_deployment

    raw = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())
    model = raw["config"]["vllm-pulumi:deployment"]["models"][0]
    model["overhead_gib"] = 3
    model["lifecycle"] = {"startup_budget_seconds": 777}
    stack_file = tmp_path / "Pulumi.override.yaml"
    stack_file.write_text(yaml.safe_dump(raw))
    assert main(["plan", "--stack-file", str(stack_file), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    (plan,) = load_deployment(raw["config"]["vllm-pulumi:deployment"]).plans
    assert report["kv_cache_bytes_per_gpu"] == plan.capacity.kv_cache_bytes_per_gpu
    assert report["startup_budget_seconds"] == 777


def test_stack_file_shows_the_node_shape_whether_assumed_and_the_rollout(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    assert main(["plan", "--stack-file", str(REPO / "stacks" / "Pulumi.prod.yaml")]) == 0
    table = capsys.readouterr().out
    assert "node shape                 stated: pool h100, 1-9 node(s) of p5.48xlarge: 8 x h100-sxm" in table
    assert "rollout                    maxSurge 1, maxUnavailable 0 (9 replica(s) fit at max scale, 8 needed)" in table

    raw = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())
    del raw["config"]["vllm-pulumi:deployment"]["cluster"]["nodes"]
    stack_file = tmp_path / "Pulumi.unstated.yaml"
    stack_file.write_text(yaml.safe_dump(raw))
    assert main(["plan", "--stack-file", str(stack_file), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert (report["node_shape"]["pool"], report["node_shape"]["stated"]) == ("assumed-rtx-4090", False)
    assert (report["rollout"]["max_surge"], report["rollout"]["max_unavailable"]) == (1, 0)
    assert any(w.startswith("the stack states no nodes for rtx-4090") for w in report["warnings"])


@pytest.mark.parametrize(("case", "extra", "warm"), [
    ("first start counts the cold compile", [], False),
    ("declared warm cache counts the warm compile", ["--compile-cache-warm"], True),
])
def test_plan_prints_the_startup_timeline(capsys: pytest.CaptureFixture[str], case: str, extra: list[str],
                                          warm: bool) -> None:
    argv = ["plan", "--model", "gemma-3-27b", "--gpu", "a100-80gb", "--max-model-len", "8192", *extra]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for phase in ("node provisioning", "node init", "image pull", "-- container starts", "bootstrap", "weight read",
                  "torch.compile", "KV profiling + warm-up", "CUDA graph capture", "budget (x1.5)"):
        assert phase in out, (case, phase)
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    timeline = report["startup_timeline"]
    assert timeline["compile_cache_warm"] is warm, case
    expected = timeline["warm_total_seconds"] if warm else timeline["cold_total_seconds"]
    assert report["startup_budget_seconds"] == expected, case
    assert timeline["node_seconds"] >= sum(row["seconds"] for row in timeline["node_phases"]), case
