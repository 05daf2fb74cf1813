"""Weight read on CPU: vLLM's default safetensors loader path beside the Run:ai model streamer, same run, same files.

    pip install --target ~/.cache/vllm-pulumi/bench-runai --no-deps runai-model-streamer==0.17.1 humanize
    PYTHONPATH=~/.cache/vllm-pulumi/bench-runai ~/.cache/vllm-pulumi/vllm-venv/bin/python \\
        bench/bench_cold_start.py [--gib 3] [--shards 3] [--repeat 3] [--concurrency 16]

(or ``pip install 'vllm-pulumi[coldstart]'`` into an environment with torch). It needs torch, safetensors and
runai-model-streamer, so it is not part of ``make test``.

It writes a safetensors checkpoint of ``--gib`` GiB in ``--shards`` files (bf16 tensors shaped like transformer
layers) to a temporary directory on local disk, then reads it back both ways, alternating, ``--repeat`` times:

- default: ``safe_open(file, framework="pt")`` and ``get_tensor`` for every tensor, file after file, which is what
  vLLM's default loader (``safetensors_weights_iterator``) does before copying to the GPU;
- runai_streamer: ``SafetensorsStreamer.stream_files`` with ``RUNAI_STREAMER_CONCURRENCY`` threads, which is what
  ``--load-format runai_streamer`` does.

Before each read the files' pages are dropped from the page cache (``posix_fadvise(DONTNEED)`` on these files
only), so both read from the disk. This is a CPU-side measurement on this machine's disk: no GPU, no copy to device
memory, no network file system; it shows the readers' relative speed, not a cluster's. The best run of each counts;
the ratio default / streamer time is printed. The directory is removed at the end, also on failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GIB = 1024**3
# One shard's tensors: a transformer layer's shapes at hidden size 4096 (q/k/v/o, gate/up/down), bf16.
HIDDEN = 4096
INTERMEDIATE = 14336


def _imports() -> tuple[Any, Any, Any]:
    try:
        import torch
        from safetensors import safe_open
        from safetensors.torch import save_file
    except ImportError as error:
        raise SystemExit(f"error: {error.name} is missing: run this with a Python that has torch and safetensors "
                         "(e.g. ~/.cache/vllm-pulumi/vllm-venv/bin/python); see the docstring") from None
    if importlib.util.find_spec("runai_model_streamer") is None:
        raise SystemExit("error: runai-model-streamer is missing: pip install --target ~/.cache/vllm-pulumi/"
                         "bench-runai --no-deps runai-model-streamer==0.17.1 humanize, then set PYTHONPATH to it")
    return torch, safe_open, save_file


def write_checkpoint(directory: Path, total_bytes: int, shards: int) -> list[Path]:
    torch, _, save_file = _imports()
    layer_shapes = [(HIDDEN, HIDDEN)] * 4 + [(INTERMEDIATE, HIDDEN)] * 2 + [(HIDDEN, INTERMEDIATE)]
    layer_bytes = sum(rows * cols * 2 for rows, cols in layer_shapes)
    layers_per_shard = max(1, total_bytes // shards // layer_bytes)
    paths = []
    generator = torch.Generator().manual_seed(0)
    for shard in range(shards):
        tensors = {}
        for layer in range(layers_per_shard):
            for index, shape in enumerate(layer_shapes):
                index_layer = shard * layers_per_shard + layer
                tensors[f"model.layers.{index_layer}.w{index}"] = torch.randn(
                    shape, generator=generator, dtype=torch.float32).to(torch.bfloat16)
        path = directory / f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        save_file(tensors, str(path))
        paths.append(path)
        del tensors
    return paths


def drop_from_page_cache(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def model_parameters(paths: list[Path]) -> dict[str, Any]:
    """Destination tensors, allocated once, like a model's parameters: both readers copy every tensor into its
    parameter (vLLM copies each into device memory), so every byte is read, not only mapped."""
    torch, safe_open, _ = _imports()
    params = {}
    for path in paths:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                sliced = handle.get_slice(name)
                params[name] = torch.empty(sliced.get_shape(), dtype=torch.bfloat16)
    for param in params.values():
        param.fill_(0)
    return params


def read_default(paths: list[Path], params: dict[str, Any]) -> int:
    _, safe_open, _ = _imports()
    total = 0
    for path in paths:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                tensor = handle.get_tensor(name)
                params[name].copy_(tensor)
                total += tensor.numel() * tensor.element_size()
    return total


def read_streamer(paths: list[Path], params: dict[str, Any], concurrency: int) -> int:
    os.environ["RUNAI_STREAMER_CONCURRENCY"] = str(concurrency)
    from runai_model_streamer import SafetensorsStreamer

    total = 0
    with SafetensorsStreamer() as streamer:
        streamer.stream_files([str(path) for path in paths])
        for name, tensor in streamer.get_tensors():
            params[name].copy_(tensor)
            total += tensor.numel() * tensor.element_size()
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=3.0, help="checkpoint size, GiB")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="RUNAI_STREAMER_CONCURRENCY")
    parser.add_argument("--dir", help="parent directory of the temporary checkpoint (default: the system's)")
    args = parser.parse_args(argv)
    _imports()
    workdir = Path(tempfile.mkdtemp(prefix="bench-cold-start-", dir=args.dir))
    try:
        started = time.perf_counter()
        paths = write_checkpoint(workdir, int(args.gib * GIB), args.shards)
        size = sum(path.stat().st_size for path in paths)
        print(f"checkpoint: {size / GIB:.2f} GiB in {len(paths)} files under {workdir} "
              f"(written in {time.perf_counter() - started:.1f} s)")
        params = model_parameters(paths)
        best: dict[str, float] = {}
        for run in range(args.repeat):
            for name, reader in (("default", lambda: read_default(paths, params)),
                                 ("runai_streamer", lambda: read_streamer(paths, params, args.concurrency))):
                drop_from_page_cache(paths)
                started = time.perf_counter()
                read = reader()
                seconds = time.perf_counter() - started
                best[name] = min(best.get(name, seconds), seconds)
                print(f"  run {run + 1} {name:<15} {read / 1e9:6.2f} GB in {seconds:6.2f} s = "
                      f"{read / 1e9 / seconds:5.2f} GB/s")
        print(f"best: default {size / 1e9 / best['default']:.2f} GB/s, runai_streamer (concurrency "
              f"{args.concurrency}) {size / 1e9 / best['runai_streamer']:.2f} GB/s; "
              f"ratio default/streamer time {best['default'] / best['runai_streamer']:.2f}x")
        print("CPU-side measurement on local disk: no GPU copy, no network file system.")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
