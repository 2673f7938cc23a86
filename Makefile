# Two commands: `make run` (install, then run the embedded default workflow) and
# `make test` (install, then run the whole test suite). Both start from nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
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

.PHONY: install run test clean slurm

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[ingest,test]'
	# img2dataset pins old pandas/webdataset; its runtime needs come from the `ingest` extra.
	$(BIN)/python -m pip install --quiet --no-deps 'img2dataset>=1.45'
	touch $@

run: install
	$(BIN)/snakemake --profile profiles/local --cores $(CORES)
	$(BIN)/dpvip bundle verify results/bundle

test: install slurm
	$(BIN)/python -m pytest

slurm:
	@if [ "$$(id -u)" = 0 ] && ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q $(SLURM_PACKAGES) || { apt-get update -q && apt-get install -y -q $(SLURM_PACKAGES); }; \
	fi

clean:
	rm -rf results .snakemake
