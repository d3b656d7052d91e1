# The two commands: `make book` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PROFILE ?= standard
DEVICE  ?= cpu
SEED    ?= 0
NB      ?= mnist_eval
export CFLIB_DATA ?= $(CURDIR)/data

CHAPTERS := mnist_eval

.PHONY: book test chapter notebooks clean install

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --user --name python3 >/dev/null
	touch $@

install: $(VENV)/.installed

# jupytext source -> .ipynb -> executed with papermill into book/chapters/
chapter: $(VENV)/.installed
	$(PY) -m cflib.build_chapter $(NB) --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

notebooks: $(VENV)/.installed
	for nb in $(CHAPTERS); do \
	  $(PY) -m cflib.build_chapter $$nb --profile $(PROFILE) --device $(DEVICE) --seed $(SEED) || exit 1; \
	done

book: notebooks
	$(VENV)/bin/jupyter-book build . --quiet
	@echo "Book: $(CURDIR)/_build/html/index.html"

test: $(VENV)/.installed
	$(PY) -m pytest -ra

clean:
	rm -rf _build book/chapters results
