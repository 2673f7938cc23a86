# Two commands: `make run` (install, then run the embedded default workflow) and
# `make test` (install, then run the whole test suite). Both start from nothing.
# For the edit loop: `make test-fast` (unit tests, < 5 min) and `make check` (lint, format,
# dry runs of both configs, < 60 s; a light environment without torch).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make check` needs only Snakemake and what the Snakefile imports: its own small venv.
CHECK_VENV := .venv-check
CHECK_BIN := $(CHECK_VENV)/bin
CHECK_STAMP := $(CHECK_VENV)/.installed
CHECK_PACKAGES := 'snakemake>=9,<10' 'snakemake-executor-plugin-slurm>=2.7.1' 'snakefmt>=0.10' 'ruff==0.17.*' 'import-linter>=2.1,<3' \
	'jsonschema>=4.20' 'pyyaml>=6' 'tqdm>=4.66' 'numpy>=1.26' pillow
CORES ?= all

# Keep every cache inside the project.
export XDG_CACHE_HOME := $(CURDIR)/.cache
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib
export PIP_CACHE_DIR := $(CURDIR)/.cache/pip
export TORCH_HOME := $(CURDIR)/.cache/torch
export NO_ALBUMENTATIONS_UPDATE := 1

# The Slurm tests bring up a single-node cluster from Debian's packages; as root, `make test`
# installs them when they are missing (elsewhere those tests are skipped, saying why).
SLURM_PACKAGES := slurm-wlm munge

.PHONY: install run test test-fast check clean slurm detectron2-check

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# Everything: the core (the DP engine) and every extra (docs/development.md lists them).
	$(BIN)/python -m pip install --quiet -e '.[workflow,eval,ingest,test]'
	# img2dataset pins old pandas/webdataset; its runtime needs come from the `ingest` extra.
	$(BIN)/python -m pip install --quiet --no-deps 'img2dataset>=1.45'
	touch $@

run: install
	$(BIN)/snakemake --profile profiles/local --cores $(CORES)
	$(BIN)/dpvip bundle verify results/bundle

# The whole suite, the paper-shape smoke run included; the slowest tests are listed at the end.
test: install slurm
	$(BIN)/python -m pytest --durations=25

# Unit tests only: no Snakemake runs, no Slurm, nothing marked slow.
test-fast: install
	$(BIN)/python -m pytest -m "not workflow and not slurm and not slow"

$(CHECK_STAMP): Makefile
	test -x $(CHECK_BIN)/python || $(PYTHON) -m venv $(CHECK_VENV)
	$(CHECK_BIN)/python -m pip install --quiet $(CHECK_PACKAGES)
	touch $@

# Lint (ruff, snakemake), format (ruff, snakefmt), import contracts (import-linter) and dry runs of the embedded and the paper config (the Slurm profile's).
check: $(CHECK_STAMP)
	$(CHECK_BIN)/ruff check src tests workflow_scripts examples
	$(CHECK_BIN)/ruff format --check src tests workflow_scripts examples
	PYTHONPATH=src $(CHECK_BIN)/lint-imports --no-cache
	$(CHECK_BIN)/snakefmt --check Snakefile rules
	$(CHECK_BIN)/snakemake --lint --quiet
	$(CHECK_BIN)/snakemake -n --quiet rules reason host
	$(CHECK_BIN)/snakemake -n --quiet rules reason host --profile profiles/slurm --configfile config/paper.yaml

slurm:
	@if [ "$$(id -u)" = 0 ] && ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q $(SLURM_PACKAGES) || { apt-get update -q && apt-get install -y -q $(SLURM_PACKAGES); }; \
	fi

clean:
	rm -rf results .snakemake

# The detectron2 COCO backend by hand on a CPU (not part of `make test`: detectron2 is not on
# PyPI): D2_PYTHON is a python with detectron2 built from source, D2_SRC that source checkout.
D2_DIR ?= /tmp/dpvip-detectron2-check
detectron2-check: install
	@test -n "$(D2_PYTHON)" -a -n "$(D2_SRC)" || { echo "make detectron2-check needs D2_PYTHON=<a python with detectron2> D2_SRC=<its source checkout>"; exit 2; }
	mkdir -p $(D2_DIR)
	printf 'evaluate:\n  coco:\n    detectron2:\n      python: %s\n      train_script: %s/tools/lazyconfig_train_net.py\n      config_file: %s/projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py\n' \
		"$(D2_PYTHON)" "$(abspath $(D2_SRC))" "$(abspath $(D2_SRC))" > $(D2_DIR)/paths.yaml
	$(BIN)/snakemake -s $(CURDIR)/Snakefile -d $(D2_DIR) --cores 2 results/evaluate/coco/syn_vip_micro.json \
		--configfile $(CURDIR)/examples/detectron2_cpu.yaml $(D2_DIR)/paths.yaml
	cat $(D2_DIR)/results/evaluate/coco/syn_vip_micro.json
