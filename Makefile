# tinyformer: run `make help` for the targets. Use it inside a virtualenv (see README.md).
PYTHON ?= python
PIP := $(PYTHON) -m pip
NOTEBOOKS := $(patsubst tutorials/%.py,tutorials/%.ipynb,$(wildcard tutorials/[0-9]*.py))
PYTEST_FLAGS ?= -q -rs

.PHONY: help install dev test unit notebooks lint format docs docs-instructor docs-tutorials bench \
	clean

help:
	@echo "install    pip install -e . (the library and its command line)"
	@echo "test       install the test tools, then run: lint, unit tests (with the planted-bug"
	@echo "           check and, if torch is installed, the PyTorch oracle), notebooks, docs"
	@echo "lint       ruff check + ruff format --check"
	@echo "format     ruff format + ruff check --fix"
	@echo "docs       build the students' MkDocs site into site/ (strict, offline): no instructor"
	@echo "           pages, tutorial solutions stubbed; tutorials without outputs unless"
	@echo "           docs-tutorials ran since their sources last changed"
	@echo "docs-instructor  the full site, with docs/instructors.md, docs/course/ and the"
	@echo "           tutorials' solutions, into site-instructor/ (instructor's tree only)"
	@echo "docs-tutorials  run the tutorials, keeping their outputs, then build the site with them"
	@echo "bench      benchmark tables -> bench-results/ (JSON + PNG)"
	@echo "clean      remove build outputs and caches"

install:
	$(PIP) install -e .

dev:
	$(PIP) install -e ".[dev]"

test: dev lint unit notebooks docs

unit:
	$(PYTHON) -m pytest $(PYTEST_FLAGS)

# Notebooks are generated from their jupytext sources, then executed (headless matplotlib).
tutorials/%.ipynb: tutorials/%.py
	$(PYTHON) -m jupytext --to ipynb --set-kernel python3 -o $@ $<

# They run with a TMPDIR of their own, which must be empty when they finish: a notebook that
# leaves its runs behind fills the user's /tmp a little more every time it is run.
notebooks: $(NOTEBOOKS)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "TMPDIR=$$tmp MPLBACKEND=Agg TINYFORMER_SMALL=1 $(PYTHON) -m pytest --nbmake $(NOTEBOOKS)" && \
	TMPDIR="$$tmp" MPLBACKEND=Agg TINYFORMER_SMALL=1 $(PYTHON) -m pytest --nbmake $(NOTEBOOKS) && \
	if [ -n "$$(ls -A "$$tmp")" ]; then \
		echo "The notebooks left files in their TMPDIR ($$tmp):"; ls -A "$$tmp"; exit 1; \
	fi

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format:
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

docs:
	$(PYTHON) -m mkdocs build --strict --site-dir site

# Never publish this one where students can read it: it describes the hidden tests.
docs-instructor:
	$(PYTHON) -m mkdocs build --strict --config-file mkdocs-instructor.yml --site-dir site-instructor

# The site shows each tutorial with the outputs of its notebook tutorials/NN_name.ipynb when
# that notebook holds outputs and the same cells as its source (docs/hooks/tutorials.py).
# This runs them to write those outputs: at the test sizes (DOCS_TUTORIALS_SMALL= for full
# size), with Jupyter's inline backend so that the figures are kept, in a TMPDIR of their own.
DOCS_TUTORIALS_SMALL ?= 1
docs-tutorials: $(NOTEBOOKS)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	TMPDIR="$$tmp" MPLBACKEND=module://matplotlib_inline.backend_inline \
	TINYFORMER_SMALL=$(DOCS_TUTORIALS_SMALL) \
	$(PYTHON) -m pytest -q -p no:cacheprovider --nbmake --overwrite $(NOTEBOOKS)
	$(MAKE) docs PYTHON=$(PYTHON)

bench:
	$(PYTHON) -m benchmarks --out bench-results

clean:
	rm -rf build dist site site-instructor bench-results .pytest_cache .hypothesis .ruff_cache *.egg-info \
		tutorials/*.ipynb
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
