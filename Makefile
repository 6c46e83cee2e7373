# BYOC Workbench. `make lab` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Optional extras of pyproject.toml to install too, e.g. `make test EXTRAS=pytorch` (CI does: .ci/run).
# Set-up only adds: an extra once installed stays installed, and a later `make lab` without EXTRAS keeps it.
EXTRAS ?=
comma := ,
PINS := $(shell cat requirements.txt pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(PINS)
EXTRA_STAMPS := $(foreach e,$(subst $(comma), ,$(EXTRAS)),$(VENV)/.extra-$(e)-$(PINS))
# The newest supported Python this machine has (PYTHON=/path/to/python3.X to choose): 3.10 to 3.13, numpy 2.
SUPPORTED := 3.13 3.12 3.11 3.10
PYTHON ?= $(shell tools/find-python.sh $(SUPPORTED))
PORT ?= 8888
# make test runs the suite in this many processes (pytest-xdist), each test file in one of them. A process
# that dies (killed for memory, say) ends the run at once, naming its test: pytest-xdist 3.8 can hang forever
# after it replaces a dead process under --dist loadfile.
TEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -ra -n $(TEST_JOBS) --dist loadfile --max-worker-restart 0

.PHONY: setup git-filter system-deps lab lab-fresh test lint test-fast test-slow test-mxnet test-oldest demo bench clean

LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

setup: system-deps $(STAMP) $(EXTRA_STAMPS) $(LAB_OVERRIDES)

# A venv of another Python (or none) is made anew; one of the same Python is kept, and pip adds what the pins add.
$(STAMP): requirements.txt pyproject.toml
	@[ -n "$(PYTHON)" ] && $(PYTHON) -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' || { \
	  echo "error: no Python 3.10 to 3.13 found (PYTHON=$(PYTHON)). Fix: install one (apt-get install python3 python3-venv,"; \
	  echo "  brew install python@3.13, pyenv install 3.13, or conda env create -f environment.yml), or point make at it:"; \
	  echo "  make lab PYTHON=/path/to/python3.13"; exit 1; }
	@want=$$($(PYTHON) -c 'import sys; print(sys.version_info[:2])'); \
	  [ "$$($(BIN)/python -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" = "$$want" ] || \
	  { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip; }
	$(BIN)/python -m pip install --quiet -r requirements.txt
	@# setuptools' notice about editable installs is advice for package authors, not for users of make setup.
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@
	@$(MAKE) --no-print-directory git-filter

# An extra's packages come pinned from pyproject.toml; the workbench itself is already installed above.
$(VENV)/.extra-%-$(PINS): $(STAMP)
	$(BIN)/python -m pip install --quiet $$($(BIN)/python tools/extras.py $*)
	touch $@

# JupyterLab's defaults for every seat: no "official Jupyter news?" pop-up, no update check over the notebooks.
$(LAB_OVERRIDES): tools/lab-overrides.json $(STAMP)
	install -D -m 644 $< $@

# Outputs saved into notebooks/*.ipynb (by those who edit them there) never reach a commit: a clean filter strips them.
git-filter:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean "'$(abspath $(BIN))/nbstripout' --keep-id --extra-keys metadata.language_info"; \
	  git config filter.nbstripout.smudge cat; \
	fi

system-deps:
	@PYTHON=$(PYTHON) tools/system-deps.sh

# JupyterLab runs working copies in lab/ (ignored by git), so saved outputs never show up in git status. The venv
# comes first on its PATH, so that a terminal opened in Lab finds byoc-workbench and the venv's Python; its shell
# is the user's own, not a login shell (which Lab starts when its output is no terminal, and whose /etc/profile
# puts the system's PATH back).
lab: setup
	@$(BIN)/python tools/lab_copies.py notebooks lab
	@token="$${JUPYTER_TOKEN:-$$($(BIN)/python -c 'import secrets; print(secrets.token_hex(24))')}"; \
	echo ""; echo "  JupyterLab on 127.0.0.1 only. Open: http://127.0.0.1:$(PORT)/lab?token=$$token"; echo ""; \
	PATH="$(abspath $(BIN)):$$PATH" exec $(BIN)/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root) --ServerApp.root_dir=lab --IdentityProvider.token="$$token" \
	  --ServerApp.terminado_settings=shell_command="$${SHELL:-/bin/sh}" \
	  --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate

# The package compiled once before the suite: where PYTHONDONTWRITEBYTECODE is set (CI's environment sets
# it), every process the suite starts (a CLI, a kernel, a Ray worker) would otherwise compile it anew.
BYTECODE := $(BIN)/python -m compileall -q byoc_workbench

test: setup lint
	$(BYTECODE)
	$(PYTEST)
	@$(MAKE) --no-print-directory test-mxnet test-oldest

# The MXNet cross-checks (tests marked mxnet): the importer against MXNet, the shipped zoo against a fresh
# export, the .params reader against mxnet.nd.load, the transforms against GluonCV. MXNet 1.9.1 (retired) has
# wheels for Python 3.11 on Linux and Intel Macs only, with numpy<1.24: a venv of its own, never the seat's.
PY311 ?= $(shell tools/find-python.sh 3.11)
VENV_MXNET := .venv-mxnet
MXNET_STAMP := $(VENV_MXNET)/.installed-$(shell cat requirements-mxnet.txt pyproject.toml | sha1sum | cut -c1-12)

$(MXNET_STAMP): requirements-mxnet.txt pyproject.toml
	@[ -n "$(PY311)" ] || { echo "error: no Python 3.11 for the MXNet cross-checks. Fix: install it, or PY311=/path/to/python3.11."; exit 1; }
	rm -rf $(VENV_MXNET) && $(PY311) -m venv $(VENV_MXNET) && $(VENV_MXNET)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_MXNET)/bin/python -m pip install --quiet -r requirements-mxnet.txt
	PYTHONWARNINGS=ignore::UserWarning $(VENV_MXNET)/bin/python -m pip install --quiet --no-deps -e .
	touch $@

test-mxnet: system-deps
	@if [ -z "$(PY311)" ]; then echo "skipped: the MXNet cross-checks (no python3.11 here: install it, or PY311=/path/to/python3.11)"; \
	  exit 0; fi; $(MAKE) --no-print-directory $(MXNET_STAMP) && \
	  echo "MXNet cross-checks on $$($(VENV_MXNET)/bin/python --version), mxnet $$($(VENV_MXNET)/bin/python -c 'import importlib.metadata as m; print(m.version("mxnet"))'):" && \
	  $(VENV_MXNET)/bin/python -m pytest -ra -n $(TEST_JOBS) --dist loadfile --max-worker-restart 0 -p no:cacheprovider -m mxnet

# Part 1 on the oldest supported Python (3.10), in a small venv of its own: the demo through every stage, the
# teaching codegen and the VM, and a GPU build's placement run on the CPU.
PY310 ?= $(shell tools/find-python.sh 3.10)
VENV310 := .venv-py310
OLDEST_PINS := apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.15.post2 numpy==2.2.6 ml_dtypes==0.5.4 graphviz==0.8.4 graphviz-pure==0.2.2 \
  pytest==9.2.0 hypothesis==6.168.5 tqdm==4.70.1 matplotlib==3.10.9
PART1_TESTS := tests/unit/test_stages_demo.py tests/unit/test_codegen.py tests/unit/test_demo_partition.py \
  tests/unit/test_devices.py

test-oldest:
	@set -e; if [ -z "$(PY310)" ]; then \
	  echo "skipped: Part 1 on Python 3.10 (no python3.10 here: install it, or pass PY310=/path/to/python3.10)"; \
	  exit 0; fi; \
	stamp=$(VENV310)/.installed-$$(echo "$(OLDEST_PINS)" | sha1sum | cut -c1-12); \
	if [ ! -f $$stamp ]; then rm -rf $(VENV310) && $(PY310) -m venv $(VENV310) && \
	  $(VENV310)/bin/python -m pip install --quiet $(OLDEST_PINS) && \
	  PYTHONWARNINGS=ignore::UserWarning $(VENV310)/bin/python -m pip install --quiet --no-deps -e . && touch $$stamp; fi; \
	echo "Part 1 on $$($(VENV310)/bin/python --version), numpy $$($(VENV310)/bin/python -c 'import numpy; print(numpy.__version__)'):"; \
	$(VENV310)/bin/python -m pytest -q -p no:cacheprovider $(PART1_TESTS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The unit tier in under two minutes: the property test draws 10 graphs here (120 in make test), and the
# unit tests of over 10 s and the signal and tools files (marked slow: a fresh process each) wait for make test.
test-fast: setup
	$(BYTECODE)
	BYOC_PROPERTY_EXAMPLES=10 $(PYTEST) -m "not slow" tests/unit

# The tiers test-fast leaves out (tests/models, tests/browser: marked slow by folder), after a test-fast.
test-slow: setup
	$(BYTECODE)
	$(PYTEST) -m slow

# Executed notebooks as .ipynb and as .html readable without a kernel or a network, and every stage as SVG.
demo: setup
	$(BIN)/byoc-workbench export --out build --timeout 1800 notebooks/*.ipynb
	$(BIN)/byoc-workbench stages demo --out build/stages-demo
	$(BIN)/byoc-workbench stages ssd --target tensorrt --out build/stages-ssd
	@echo "Executed notebooks (.ipynb and .html) and stage diagrams are in build/"

# Prints the toggle and scale benchmarks (the scale one also writes benchmarks/results/scale.json), then measures what the README, docs and notebooks quote (several minutes):
# benchmarks/results/bench.json, and every <!-- bench:NAME --> number filled in from it.
bench: setup
	@# MXNet's own time, a cross-check, comes from make test-mxnet's venv where a Python 3.11 can make it.
	@if [ -n "$(PY311)" ]; then $(MAKE) --no-print-directory $(MXNET_STAMP); fi
	$(BIN)/python benchmarks/bench_toggle.py
	$(BIN)/python benchmarks/bench_scale.py --json benchmarks/results/scale.json
	$(BIN)/python tools/bench_numbers.py record
	$(BIN)/python tools/bench_numbers.py write

lab-fresh:
	$(BIN)/python tools/lab_copies.py notebooks lab --fresh

clean:
	rm -rf build $(VENV) $(VENV_MXNET) $(VENV310) .pytest_cache
