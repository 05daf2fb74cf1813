# The two commands: `make demo` and `make test`. Everything they need is installed by these targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv typecheck unit clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot]'
	@touch $(STAMP)

venv: $(STAMP)

# The main job on the embedded default: the capacity plan of the `local` stack's model.
demo: $(STAMP)
	$(PY) -m runtime plan --model llama-3.1-8b --gpu rtx-4090 --kv-cache-dtype fp8 --max-model-len 32768

typecheck: $(STAMP)
	$(PY) -m mypy

# vLLM 0.33 on CPU in its own venv under ~/.cache/vllm-pulumi, for the cross-check tests (cached after the first run).
unit: $(STAMP)
	VLLM_CROSSCHECK_PYTHON="$$(scripts/vllm-crosscheck-env.sh)" $(PY) -m pytest

test: typecheck unit

clean:
	rm -rf $(VENV) rendered .pytest_cache .mypy_cache .hypothesis
