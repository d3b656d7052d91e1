# The two commands: `make book` and `make test`. Both create .venv on first use.
PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= standard
DEVICE  ?= cpu
SEED    ?= 0
NB      ?= mnist_eval
export CFLIB_DATA ?= $(CURDIR)/data

.PHONY: book test chapter notebooks html clean install

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# one chapter: jupytext source -> .ipynb -> executed by papermill into book/chapters/
chapter: $(VENV)/.installed
	$(PY) -m cflib.build_chapter $(NB) --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

notebooks: $(VENV)/.installed
	$(PY) -m cflib.build_chapter all --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

# the HTML book from the executed chapters (Jupyter Book 1, execution off)
html: $(VENV)/.installed
	$(VENV)/bin/jupyter-book build . --quiet
	@echo "Book: $(CURDIR)/_build/html/index.html"

book: notebooks html

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -ra

clean:
	rm -rf _build book/chapters notebooks/*.ipynb
