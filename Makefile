# The two commands: `make book` and `make test`. Both create .venv on first use.
PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= standard
DEVICE  ?= cpu
TRAIN_SEED ?=
DATA_SEED  ?=
NB      ?= mnist_eval
export CFLIB_DATA ?= $(CURDIR)/data

RERUN   ?=

.PHONY: help browser book test chapter html clean install stale certify sweep benchmark gpu-check gpu-data gpu-tree mutants

# make help: every target, one line each (the lines starting "##")
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## //'

## make book       render the book (_build/html/index.html); re-executes only stale chapters
## make test       ruff, then the test suite (what CI runs)
## make chapter    one chapter: NB=mnist_eval PROFILE=smoke (RENDER=1: re-render only)
## make stale      which chapters need a re-execution or a re-render, and why
## make certify    twin runs at smoke that prove a code change leaves the numbers (CERTIFY=name)
## make sweep      a chapter over training seeds: NB=... SEEDS=0,1,2
## make html       the book from the committed chapters only
## make benchmark  throughput of every explainer against the measured peak
## make gpu-check  on a GPU machine: device tests, chapter timing, throughput
## make gpu-tree   what gpu-check needs (code, tests, data archive; 42 MiB) as the branch gpu-check
## make clean      remove _build and the generated notebooks

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# one chapter, always executed: the book's run (standard, seed 0, cpu) replaces the
# committed notebook and results; any other run writes under _build/runs/
# RENDER=1: re-render it from its last full run's saved results (seconds, nothing computed)
chapter: $(VENV)/.installed
	$(PY) -m cflib.book.runs $(NB) --profile $(PROFILE) $(if $(filter-out cpu,$(DEVICE)),--device $(DEVICE)) \
		$(if $(TRAIN_SEED),--train-seed $(TRAIN_SEED)) $(if $(DATA_SEED),--data-seed $(DATA_SEED)) \
		$(if $(RENDER),--render)

# the book: re-executes the chapters whose inputs changed since they ran (every chapter
# with RERUN=1), side by side on one single-threaded worker per core (WORKERS=n), then
# builds _build/html/index.html from the executed chapters.  Another PROFILE, seed or
# DEVICE executes every chapter and builds _build/book-<profile>-train<t>-data<d>/.
WORKERS ?=
book: $(VENV)/.installed
	$(VENV)/bin/cflib book --profile $(PROFILE) --device $(DEVICE) \
		--train-seed $(or $(TRAIN_SEED),0) --data-seed $(or $(DATA_SEED),0) $(if $(RERUN),--rerun) \
		$(if $(WORKERS),--workers $(WORKERS))

# chapters x training seeds on Dask (a LocalCluster, or $$CFLIB_SCHEDULER), merged
SEEDS   ?= 0,1,2
comma   := ,
sweep: $(VENV)/.installed
	$(PY) -m cflib.book.sweep $(NB) --seeds $(subst $(comma), ,$(SEEDS)) --profile $(PROFILE) \
		--device $(DEVICE)

# throughput of every explainer, batched and alone, against the measured peak
#   -> results/performance.csv (results/performance-cuda.csv with DEVICE=cuda), and on the
#   CPU where the time goes, operator by operator -> results/performance_ops.csv
benchmark: $(VENV)/.installed
	$(PY) benchmarks/throughput.py --device $(DEVICE) \
		$(if $(filter cuda,$(DEVICE)),--out results/performance-cuda.csv)
	$(if $(filter cuda,$(DEVICE)),,$(PY) benchmarks/throughput.py --ops-only)

# on a machine with a GPU, with that machine's own Python (no venv, no registry): the
# device tests, the MNIST C3LT chapter's compute at standard timed part by part, and the
# batched throughput on CUDA, from an empty cache (benchmarks/gpu_check.sh says what it
# writes); `make gpu-data` first packs MNIST and Fashion-MNIST (41 MiB) for a machine
# without the data root
gpu-check:
	bash benchmarks/gpu_check.sh

# what travels to a GPU machine (64 MiB at most): the branch gpu-check, HEAD's code, tests,
# benchmarks and notebooks without the shipped networks, results and pages, and the data
# archive to carry (_build/gpu-data); benchmarks/gpu_travel.py says how to send it
gpu-tree: gpu-data
	$(PYTHON) benchmarks/gpu_travel.py branch

# the data archive the gpu-check unpacks (_build/gpu-data/data.tar.gz: MNIST, Fashion-MNIST)
gpu-data:
	$(PYTHON) benchmarks/gpu_travel.py data

# which chapters are stale, and why
stale: $(VENV)/.installed
	$(VENV)/bin/cflib stale --why

# certificates: twin runs at smoke (the commit that computed a chapter's numbers and the
# working tree) for every chapter whose compute code changed (CERTIFY=<chapter>: one);
# CHECK=1 re-checks them
certify: $(VENV)/.installed
	$(VENV)/bin/cflib certify $(if $(CHECK),--check,$(or $(CERTIFY),all))

# the HTML book from the committed executed chapters only (Jupyter Book 1, execution off)
html: $(VENV)/.installed
	$(VENV)/bin/cflib verify
	$(VENV)/bin/jupyter-book build . --quiet -W --keep-going
	@echo "Book: _build/html/index.html"

# what the suite needs beside the venv: headless Chromium and its driver for the browser
# test of the built book (Debian's packages, through sudo when not root); where they cannot
# be installed it stops at once, before any test, with one line naming them
BROWSER_PKGS := chromium chromium-driver
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then exit 0; fi; \
	need="make test needs headless Chromium and its driver and cannot install them here"; \
	fix="install the Debian packages $(BROWSER_PKGS) (apt-get install $(BROWSER_PKGS)), then run make test again"; \
	command -v apt-get >/dev/null 2>&1 || { echo "$$need (no apt-get): $$fix" >&2; exit 1; }; \
	SUDO=""; \
	if [ "$$(id -u)" != 0 ]; then \
	  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	  else echo "$$need (not root, no sudo without a password): $$fix" >&2; exit 1; fi; \
	fi; \
	echo "installing $(BROWSER_PKGS) (Debian's packages) for the browser test"; \
	export DEBIAN_FRONTEND=noninteractive; \
	$$SUDO apt-get install -y -qq $(BROWSER_PKGS) >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(BROWSER_PKGS); } || \
	  { echo "$$need (apt-get failed): $$fix" >&2; exit 1; }; \
	command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	  { echo "$$need (installed, but chromium or chromedriver is not on PATH): $$fix" >&2; exit 1; }

test: browser $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -ra

# hand-made mutants of the metrics, the explainer base and the results writer against a
# fast test subset (a temporary copy of the project; prints the kill rate)
mutants: $(VENV)/.installed
	$(PY) tests/mutation/run.py

clean:
	rm -rf _build notebooks/*.ipynb
