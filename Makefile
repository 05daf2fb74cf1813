# The two commands: `make demo` and `make test`. Everything they need is installed by these targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv typecheck unit toolchain clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot]'
	@touch $(STAMP)

venv: $(STAMP)

# The main job on the embedded default: `pulumi up --stack local` renders the reference deployment (scripts/demo.sh).
demo: $(STAMP)
	scripts/demo.sh

# The offline Pulumi CLI, language host and Kubernetes provider, plus the simulated cluster the tests start (etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager, KWOK, the LWS controller, KEDA, Prometheus) and the upstream
# CRDs, built once into ~/.cache. `make demo` builds only the first three (scripts/demo.sh).
toolchain:
	scripts/toolchain.sh

typecheck: $(STAMP)
	$(PY) -m mypy

# vLLM 0.33 on CPU in its own venv under ~/.cache/vllm-pulumi, for the cross-check tests (cached after the first run).
# pytest runs in a network namespace with only loopback (scripts/isolated.sh): nothing a test starts can reach
# another machine, the simulated cluster's pod addresses included.
unit: $(STAMP) toolchain
	VLLM_CROSSCHECK_PYTHON="$$(scripts/vllm-crosscheck-env.sh)" scripts/isolated.sh $(PY) -m pytest

test: typecheck unit

clean:
	rm -rf $(VENV) rendered .pulumi-state .pytest_cache .mypy_cache .hypothesis
