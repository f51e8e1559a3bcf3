"""The shape of `compare/`: every module is a topic listed in `compare/__init__.py: TOPICS` or a
helper whose name starts with `_`, and every topic's `run()` reads on one screen (60 lines),
its work split into compute / check / describe helpers. Read from the source, not imported:
importing a topic pulls in its whole program."""

import ast
from pathlib import Path

import pytest

from compare import TOPICS

COMPARE = Path(__file__).resolve().parents[1] / "compare"
RUN_LINES = 60


def _run_lines(path: Path) -> int | None:
    """Lines of the module-level `def run` in `path` (decorators and docstring included), or
    None when it has none."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return node.end_lineno - first + 1
    return None


def test_every_module_is_a_topic_or_a_helper_with_the_underscore():
    strays = sorted(p.name for p in COMPARE.glob("*.py")
                    if p.stem not in TOPICS and not p.stem.startswith("_"))
    assert not strays, (f"compare/{strays}: neither a topic in compare/__init__.py: TOPICS nor "
                        "a helper named with a leading `_`; list the topic or rename the helper")


@pytest.mark.parametrize("name", sorted(TOPICS))
def test_every_topic_run_fits_on_a_screen(name):
    lines = _run_lines(COMPARE / f"{name}.py")
    assert lines is not None, f"compare/{name}.py has no run(quick=False): every topic has one"
    assert lines <= RUN_LINES, (
        f"compare/{name}.py: run() has {lines} lines, over {RUN_LINES}: split it into "
        "compute / check / describe helpers, one per section of the report")


def test_run_lines_counts_the_whole_function(tmp_path):
    f = tmp_path / "topic.py"
    f.write_text("import x\n\n\ndef run(quick=False):\n    a = 1\n\n    return a\n\n\n"
                 "def helper():\n    pass\n")
    assert _run_lines(f) == 4
    f.write_text("def helper():\n    pass\n")
    assert _run_lines(f) is None


def test_precision_scope_sets_every_module_and_restores_it():
    """`python -m compare` runs each topic under `precision_scope(check_precision())`: on a TPU
    both modules' default matmul precision is `highest` for the topic and back afterwards; on
    this CPU `check_precision()` asks for nothing."""
    import jax

    import minijax
    from compare._modules import check_precision, precision_scope
    assert check_precision() is None  # the suite runs on a CPU
    before = (jax.config.jax_default_matmul_precision,
              minijax.config.jax_default_matmul_precision)
    with precision_scope("highest"):
        assert jax.config.jax_default_matmul_precision == "highest"
        assert minijax.config.jax_default_matmul_precision == "highest"
    assert (jax.config.jax_default_matmul_precision,
            minijax.config.jax_default_matmul_precision) == before
    with precision_scope(None):
        assert jax.config.jax_default_matmul_precision == before[0]
