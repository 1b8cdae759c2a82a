# tinyformer: run `make help` for the targets. Use it inside a virtualenv (see README.md).
PYTHON ?= python
PIP := $(PYTHON) -m pip
NOTEBOOK_SOURCES := $(wildcard tutorials/[0-9]*.py)
NOTEBOOKS := $(NOTEBOOK_SOURCES:.py=.ipynb)
PYTEST_FLAGS ?= -q -rs
# Test processes side by side (pytest-xdist): auto is one per CPU core; WORKERS=0 runs in one.
WORKERS ?= auto
XDIST := -n $(WORKERS) --dist loadscope
# Hypothesis examples per test (tests/conftest.py): ci for `make test` and CI, quick for `check`.
HYPOTHESIS_PROFILE ?= ci

.PHONY: help install dev dev-tools prepare test check unit unit-and-notebooks warm notebooks \
	notebook-files lint-and-notebooks format docs docs-instructor docs-tutorials bench clean

help:
	@echo "install    pip install -e . (the library and its command line)"
	@echo "check      install the test tools, then lint, the generic op suite and the tests of"
	@echo "           the ops, at a small hypothesis budget: a quick signal while you edit"
	@echo "test       install the test tools, then run: lint, unit tests (with the planted-bug"
	@echo "           check and, if torch is installed, the PyTorch oracle), notebooks, docs;"
	@echo "           what CI runs: before you push (WORKERS=N test processes, default one per core)"
	@echo "unit       the unit tests alone (after make dev, which installs the test tools)"
	@echo "notebooks  the tutorial notebooks alone (after make dev)"
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

dev: install
	$(MAKE) dev-tools

# What test and check need first. The library: compiling the kernels needs only it. Then the
# test tools install while the kernels compile: `tinyformer[dev]` adds the extras to the
# editable install without reinstalling it, so the compiling processes can go on importing it.
prepare: install
	$(MAKE) -j2 dev-tools warm

# As prepare, with lint and writing the notebooks after the test tools, while the kernels still
# compile; then the tests and the notebooks, and the docs.
test: install
	$(MAKE) -j2 warm lint-and-notebooks
	$(MAKE) unit-and-notebooks docs WARMED=1

lint-and-notebooks: dev-tools
	$(MAKE) lint notebook-files

dev-tools:
	$(PIP) install "tinyformer[dev]"

# The op tests: the generic suite, the per-op properties and errors, the planted-bug check.
CHECK_TESTS := tests/test_ops_generic.py tests/test_op_properties.py tests/test_errors.py \
	tests/test_gradcheck.py tests/test_mutation.py
check: prepare
	$(MAKE) lint
	HYPOTHESIS_PROFILE=quick $(PYTHON) -m pytest $(PYTEST_FLAGS) $(XDIST) $(CHECK_TESTS)

# WARMED=1: the kernels were compiled just now, so skip loading them all again (a few seconds)
unit: $(if $(WARMED),,warm)
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(PYTHON) -m pytest $(PYTEST_FLAGS) $(XDIST)

# Both in one pytest session, the notebooks handed out first: each worker goes on to the tests
# when its notebooks are done, and no worker waits for the other to finish a set.
unit-and-notebooks: notebook-files $(if $(WARMED),,warm)
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(NOTEBOOK_ENV) \
	$(PYTHON) -m pytest $(PYTEST_FLAGS) $(XDIST) --nbmake $(NOTEBOOKS) tests

# Compile every kernel once, so that the test workers load them from the caches instead of
# each compiling its own copy: two processes, which compile disjoint sets of kernels
# (tinyformer/testing/warm.py). The package's bytecode first: where PYTHONDONTWRITEBYTECODE is
# set, every process the tests start (the commands, the ranks, the notebooks' kernels) would
# otherwise compile tinyformer's modules again.
warm:
	$(PYTHON) -m compileall -q -j0 tinyformer kernels
	$(PYTHON) -m tinyformer.testing.warm

# Notebooks are generated from their jupytext sources, then executed: each notebook missing or
# older than its source, all in one jupytext process (starting one per notebook took longest).
notebook-files:
	@stale=$$(for s in $(NOTEBOOK_SOURCES); do n="$${s%.py}.ipynb"; \
		if [ ! -e "$$n" ] || [ "$$s" -nt "$$n" ]; then echo "$$s"; fi; done); \
	if [ -n "$$stale" ]; then \
		echo "$(PYTHON) -m jupytext --to ipynb --set-kernel python3" $$stale; \
		$(PYTHON) -m jupytext --quiet --to ipynb --set-kernel python3 $$stale; \
	fi

# They run at the test sizes, with headless matplotlib, each in a TMPDIR of its own that must be
# empty when it ends (tutorials/conftest.py). Two notebooks run side by side, so Numba's OpenMP
# workers sleep as soon as they are idle (tests/conftest.py says why).
NOTEBOOK_ENV := MPLBACKEND=Agg TINYFORMER_SMALL=1
notebooks: notebook-files
	$(NOTEBOOK_ENV) GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-0} $(PYTHON) -m pytest --nbmake $(XDIST) $(NOTEBOOKS)

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
docs-tutorials: notebook-files
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
