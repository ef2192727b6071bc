# The two commands: `make run` and `make test`. Both create .venv when it is missing and
# install tfaccel with the TensorFlow that fits this machine: the [gpu] extra when nvidia-smi
# works, [cpu] otherwise. Both are fast when everything is already installed.
# `make gpu-check` runs what needs a GPU (tfaccel selftest --gpu: the gpu tests, every command,
# each setup mode) in under ten minutes; without an NVIDIA GPU it says why and exits 0 at once.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FLAVOUR := $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
KERNELS := $(if $(filter gpu,$(FLAVOUR)),kernels-cu12,kernels)
RUN_STAMP := $(VENV)/.installed-$(FLAVOUR)
TEST_STAMP := $(VENV)/.installed-$(FLAVOUR)-dev
REPORT_ARGS ?= --quick
GPU_CHECK_ARGS ?=

.PHONY: run test gpu-check install install-dev lint clean

run: $(RUN_STAMP)
	$(BIN)/tfaccel report $(REPORT_ARGS)

test: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/python -m pytest

gpu-check: $(TEST_STAMP)
	$(BIN)/tfaccel selftest --gpu $(GPU_CHECK_ARGS)

install: $(RUN_STAMP)
install-dev: $(TEST_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=23.2"

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(FLAVOUR)]"
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(FLAVOUR),dev,$(KERNELS)]"
	touch $@ $(RUN_STAMP)

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
