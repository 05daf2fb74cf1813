#!/usr/bin/env bash
# Create (or reuse) a throwaway venv holding vLLM 0.33.0 for CPU-only,
# offline cross-checks: vLLM's own `vllm serve` argument parser and
# vllm.config.ModelConfig built from a directory holding only config.json.
# See scripts/vllm_facts_probe.py.
#
#   PY=$(scripts/vllm-crosscheck-env.sh)   # progress on stderr, python path on stdout
#   scripts/vllm-crosscheck-env.sh --key   # print the venv's stamp key and exit (installs nothing)
#
# Env:
#   VLLM_CROSSCHECK_VENV    venv path (default ~/.cache/vllm-pulumi/vllm-venv)
#   VLLM_CROSSCHECK_PYTHON  interpreter used to create it (default: python3.11,
#                           else python3 if it is 3.11-3.14)
#
# Needs only Python + pip + access to PyPI. Cost on a fresh machine: ~2.3 GiB
# downloaded, ~5 GiB on disk, a few minutes.
#
# Why --no-deps with a full pin list: PyPI has no CPU-only torch for Linux
# x86_64; the default torch==2.14.0 wheel pulls ~2.3 GiB of CUDA wheels plus
# triton, and vllm's own requirements pull flashinfer, cutlass-dsl, etc.
# torch cannot even be imported without the CUDA libraries its .so files link
# against (DT_NEEDED: cudart, cupti, cublas(Lt), cudnn, nvrtc, cufft, cufile,
# curand, cusparse(+nvjitlink), cusparseLt, nccl, nvshmem), so those are kept;
# cusolver (only libtorch_cuda_linalg, loaded lazily), nvtx, triton,
# cuda-toolkit/cuda-bindings and all GPU-only vLLM deps are left out.
set -euo pipefail

VENV="${VLLM_CROSSCHECK_VENV:-$HOME/.cache/vllm-pulumi/vllm-venv}"

log() { printf '[vllm-crosscheck-env] %s\n' "$*" >&2; }

# Everything installed, pinned, installed with --no-deps (order irrelevant).
read -r -d '' PINS <<'EOF' || true
vllm==0.33.0
torch==2.14.0
nvidia-cuda-runtime==13.0.96
nvidia-cuda-cupti==13.0.85
nvidia-cuda-nvrtc==13.0.88
nvidia-cublas==13.1.1.3
nvidia-cudnn-cu13==9.24.0.43
nvidia-cufft==12.0.0.61
nvidia-cufile==1.15.1.6
nvidia-curand==10.4.0.35
nvidia-cusparse==12.6.3.3
nvidia-nvjitlink==13.5.37
nvidia-cusparselt-cu13==0.8.1
nvidia-nccl-cu13==2.30.7
nvidia-nvshmem-cu13==3.4.5
filelock==4.3.1
typing_extensions==4.16.0
setuptools==80.10.2
sympy==1.14.0
mpmath==1.3.0
networkx==3.6.1
Jinja2==3.1.6
MarkupSafe==3.0.4
fsspec==2026.9.0
numpy==2.4.6
packaging==26.4
PyYAML==6.0.4
regex==2026.11.19
tqdm==4.70.1
transformers==5.20.2
huggingface_hub==2.4.0
hf-xet==1.8.0
tokenizers==0.23.3
safetensors==0.8.0
typer==0.29.2
click==8.5.1
rich==15.0.0
markdown-it-py==4.3.0
mdurl==0.1.2
Pygments==2.21.0
shellingham==1.5.4
pydantic==2.14.4
pydantic_core==2.50.5
annotated-types==0.8.0
typing-inspection==0.4.5
annotated-doc==0.0.7
psutil==7.2.2
cbor2==6.3.0
pyzmq==27.3.0
requests==2.34.2
urllib3==2.8.0
idna==3.20
charset-normalizer==3.5.3
certifi==2026.10.19.post1
aiohttp==3.14.5
aiohappyeyeballs==2.7.1
aiosignal==1.4.0
attrs==26.1.0
frozenlist==1.8.0
multidict==7.2.1
propcache==0.5.4
yarl==1.25.1
oss-harmony==0.0.11
openai==3.57.0
anyio==4.16.0
sniffio==1.3.1
jiter==0.19.0
httpx2==2.16.2
httpcore2==2.16.2
h11==0.16.0
truststore==0.10.5
msgspec==0.23.0
cloudpickle==3.1.3
pillow==13.0.0
pybase64==1.5.1
cachetools==8.0.2
uvloop==0.23.0
py-cpuinfo==9.0.0
fastapi==0.136.3
starlette==1.10.0
prometheus_client==0.26.0
partial-json-parser==0.2.1.1.post7
xgrammar==0.2.8
apache-tvm-ffi==0.1.11
llguidance==1.7.6
einops==0.8.2
compressed-tensors==0.17.0
loguru==0.7.3
EOF

STAMP="$VENV/.vllm-crosscheck-pins"

# install_pins: the pins into the venv. --no-deps: see header. Pip's "dependency conflicts" notice about torch's
# CUDA extras / vllm's GPU deps is expected and harmless here.
install_pins() {
    printf '%s\n' "$PINS" > "$VENV/.vllm-crosscheck-requirements.txt"
    set +e
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
        --only-binary=:all: --no-deps --progress-bar off \
        -r "$VENV/.vllm-crosscheck-requirements.txt" 2>&1 |
        grep -E --line-buffered '^(Collecting|Installing|Successfully|ERROR|error)' >&2
    pip_rc=${PIPESTATUS[0]}  # pip's status decides, not grep's
    set -e
}

# The stamp key: the pin list and the install command with its flags (install_pins' text, which `declare -f` prints
# without comments). A changed pin or flag reinstalls; an edited comment elsewhere in this file does not.
WANT_HASH="$({ printf '%s\n' "$PINS"; declare -f install_pins; } | sha256sum | cut -d' ' -f1)"
if [[ "${1:-}" == "--key" ]]; then
    echo "$WANT_HASH"
    exit 0
fi

pick_python() {
    if [[ -n "${VLLM_CROSSCHECK_PYTHON:-}" ]]; then
        echo "$VLLM_CROSSCHECK_PYTHON"; return
    fi
    local c
    for c in python3.11 python3.12 python3.13 python3; do
        if command -v "$c" >/dev/null 2>&1 &&
           "$c" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' 2>/dev/null; then
            echo "$c"; return
        fi
    done
    log "no Python 3.11-3.14 found (vllm 0.33.0 needs >=3.11,<3.15); set VLLM_CROSSCHECK_PYTHON"
    exit 1
}

smoke() {
    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_LOGGING_LEVEL=ERROR \
        "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import torch, vllm, vllm.config  # noqa: F401
from vllm.config import ModelConfig, ParallelConfig  # noqa: F401
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.common.cli_args import make_arg_parser
assert vllm.__version__ == "0.33.0", vllm.__version__
make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(["m"])
PY
}

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT_HASH" ]] && smoke; then
    log "reusing $VENV (pins unchanged, smoke import ok)"
    echo "$VENV/bin/python"
    exit 0
fi

# A venv of another key (or one that fails the smoke test) is made again from nothing rather than installed over: pip
# would leave a package the pin list dropped in place, and a warm machine would then import what a fresh one lacks.
# Only a venv this script made (it holds the requirements file) is removed.
if [[ -f "$VENV/.vllm-crosscheck-requirements.txt" ]]; then
    log "pins or install command changed since $VENV was made (or it fails the smoke test): making it again"
    rm -rf "$VENV"
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    PY="$(pick_python)"
    log "creating venv $VENV with $PY ($("$PY" --version 2>&1))"
    mkdir -p "$(dirname "$VENV")"
    "$PY" -m venv "$VENV"
else
    log "venv $VENV exists; (re)installing pins"
fi

start=$(date +%s)
log "installing $(printf '%s\n' "$PINS" | grep -c .) pinned packages with --no-deps (torch + CUDA runtime libs ~2.3 GiB download on first run)"
install_pins
if [[ "$pip_rc" -ne 0 ]]; then
    log "pip install failed (exit $pip_rc)"
    exit 1
fi
log "pip done in $(( $(date +%s) - start ))s"

log "smoke test: import torch, vllm.config, serve parser"
if ! smoke; then
    log "smoke test FAILED; rerun it verbosely with:"
    log "  VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 $VENV/bin/python -c 'import vllm.config; from vllm.entrypoints.common.cli_args import make_arg_parser'"
    exit 1
fi
echo "$WANT_HASH" > "$STAMP"
log "ready: $(du -sh "$VENV" 2>/dev/null | cut -f1) in $VENV"
echo "$VENV/bin/python"
