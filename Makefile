# The two commands: `make run` and `make test`. Both create .venv when it is missing and
# install tfaccel with the TensorFlow that fits this machine: the [gpu] extra when nvidia-smi
# works, [cpu] otherwise. Both are fast when everything is already installed.
# `make gpu-check` runs what needs a GPU (tfaccel selftest --gpu: the gpu tests, every command,
# each setup mode) in under ten minutes; without an NVIDIA GPU it says why and exits 0 at once.
# Where nothing can be installed (GPU_CHECK_OFFLINE=1, or no .venv yet and pip cannot reach the
# package index, or the install fails) it runs `make gpu-check-offline` instead: the checks that
# need no TensorFlow, from this source tree with $(PYTHON) and the packages it already has.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FLAVOUR := $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
KERNELS := $(if $(filter gpu,$(FLAVOUR)),kernels-cu12,kernels)
RUN_STAMP := $(VENV)/.installed-$(FLAVOUR)
TEST_STAMP := $(VENV)/.installed-$(FLAVOUR)-dev
REPORT_ARGS ?= --quick
GPU_CHECK_ARGS ?=

# `make slurm-up` starts a one-node Slurm here for the tests marked `slurm` (ci/slurm/up: installs
# slurm-wlm and munge with apt-get when missing and run as root); `make slurm-down` stops what it
# started. Without a Slurm, `make test` skips those tests and says why.

.PHONY: run test gpu-check gpu-check-offline install install-dev lint clean slurm-up slurm-down

run: $(RUN_STAMP)
	$(BIN)/tfaccel report $(REPORT_ARGS)

test: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/python -m pytest

gpu-check:
	@if ! nvidia-smi -L >/dev/null 2>&1; then \
	  echo "make gpu-check: skipped: no NVIDIA GPU here (nvidia-smi -L fails); nothing installed"; \
	  exit 0; \
	fi; \
	why=""; \
	if [ "$(GPU_CHECK_OFFLINE)" = 1 ]; then why="GPU_CHECK_OFFLINE=1"; \
	elif [ ! -f $(TEST_STAMP) ]; then \
	  probe=$$(mktemp -d); \
	  $(PYTHON) -m pip download --no-deps --no-cache-dir -q --timeout 5 --retries 0 \
	    -d "$$probe" pip >/dev/null 2>&1 || \
	    why="pip cannot reach the package index, so TensorFlow cannot be installed"; \
	  rm -rf "$$probe"; \
	fi; \
	if [ -n "$$why" ]; then \
	  echo "make gpu-check: offline ($$why): only the checks that need no TensorFlow"; \
	  $(MAKE) --no-print-directory gpu-check-offline; \
	elif $(MAKE) --no-print-directory install-dev; then \
	  echo "make gpu-check: the full self-test, with TensorFlow from $(VENV)"; \
	  $(BIN)/tfaccel selftest --gpu $(GPU_CHECK_ARGS); \
	else \
	  echo "make gpu-check: offline (installing into $(VENV) failed): only the checks that need no TensorFlow"; \
	  $(MAKE) --no-print-directory gpu-check-offline; \
	fi

# The GPU checks that need no TensorFlow and install nothing: this source tree, $(PYTHON) and
# the packages it already has (tfaccel selftest --gpu --offline). A PYTHONPATH already set (a
# cluster's `module load`, packages unpacked by hand) is kept, after src.
gpu-check-offline:
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $(PYTHON) -m tfaccel selftest --gpu --offline $(GPU_CHECK_ARGS)

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

slurm-up:
	ci/slurm/up

slurm-down:
	ci/slurm/down

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
