# The README's two commands: `make compare` (the main job) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: compare test docs lint clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (or run: make PYTHON=python3)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

compare: $(STAMP)
	$(PY) -m compare $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n 2 $(ARGS)

# The chapters as a static site (mkdocs-material); links to sources resolve because the
# sources are copied next to the chapters.
docs: $(STAMP)
	rm -rf build/docs site
	mkdir -p build/docs
	cp -r chapters build/docs/chapters
	cp -r minijax build/docs/minijax
	find build/docs -name __pycache__ -prune -exec rm -rf {} +
	cp chapters/README.md build/docs/index.md
	sed -i 's#](\([0-9][0-9]-\)#](chapters/\1#g; s#](LAYOUT.md#](chapters/LAYOUT.md#g; s#](\.\./#](#g' build/docs/index.md
	$(PY) -m mkdocs build --strict --quiet

lint: $(STAMP)
	$(PY) -m ruff check minijax compare tests

clean:
	rm -rf $(VENV) compare/out .pytest_cache build site
