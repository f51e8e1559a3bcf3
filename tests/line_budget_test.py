"""A line budget for `minijax/`, per top-level module (tinygrad gates its tree the same way).

Counts the non-blank lines that are not comments (docstrings count: they are what a reader
reads) of each top-level module: a file directly under `minijax/`, or a subpackage as a whole.
The test fails when a module grows past its budget, and when a module has no budget at all.
Raising a number here is a deliberate edit that a reviewer sees, not an accident: the budget is
what keeps three executors or a grab-bag file from growing back (issue 10). The budgets were
set with about 10% headroom over the sizes measured when the test was written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "minijax"

BUDGETS = {
    "__init__": 33,
    "ad_checkpoint": 440,  # + JAX's residual order and reduce_precision of residuals (issue 24)
    "ad_util": 30,
    "api": 615,  # make_array_from_callback moved in (issue 26); grad seed on the mesh (issue 25)
    "api_util": 140,
    "array": 220,
    "callback": 325,
    "compiler": 440,
    "config": 66,
    "core": 840,        # + ShapedArray.sharding (issue 11), vma and the axis env (12), effects (13)
    "custom_derivatives": 550,
    "debug": 10,
    "debugging": 335,  # visualize_sharding moved in from sharding.py (issue 26)
    "dispatch": 270,   # + sharded eager results (issue 11), device_put_p, Auto-mesh ops jitted
    "dtypes": 210,
    "effects": 70,
    "errors": 12,
    "experimental": 890,  # pallas + checkify (~260: checks inside cond, scan, while)
    "interpreters": 1130,  # + effects in DCE and lowering tokens (13), vma hooks (12)
    "lax": 6400,  # collectives (~480), ragged_dot (~290), stack/unstack, select_and_*_add (~150)
    "mesh": 230,
    "nn": 290,          # logsumexp moved here from scipy (one function for both, as JAX)
    "numpy": 3710,
    "pjit": 880,       # reshard, auto_axes/explicit_axes (issue 11); log_compiles (issue 13);
    #                    nested shardings, checks under transformations (issue 25)
    "prng": 230,
    "public_test_util": 110,
    "random": 470,
    "scipy": 180,
    "shard_map": 550,
    "sharding": 545,  # types and rules only: placement and pictures moved out (issue 26)
    "stages": 190,     # + output layouts: out_shardings retype, first-input spec (issue 25)
    "state": 600,      # + ref effects and the `x <- ref[i]` printer (issue 14)
    "test_util": 7,
    "tree": 22,
    "tree_util": 420,
    "util": 72,  # BoundedCache, the one bounded memo table (issue 26)
    "viz": 340,
}


def count_lines(path: Path) -> int:
    """Non-blank lines of `path` that are not `#` comments."""
    return sum(1 for line in path.read_text().splitlines()
               if line.strip() and not line.lstrip().startswith("#"))


def module_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        key = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        sizes[key] = sizes.get(key, 0) + count_lines(path)
    return sizes


SIZES = module_sizes()


def test_count_lines_skips_blanks_and_comments(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""doc."""\n\n# a comment\n    # indented comment\nx = 1  # trailing\n\n')
    assert count_lines(f) == 2


def test_every_module_has_a_budget():
    missing = sorted(set(SIZES) - set(BUDGETS))
    assert not missing, f"give these new modules a line budget in {__file__}: {missing}"


@pytest.mark.parametrize("module", sorted(BUDGETS))
def test_module_within_budget(module):
    if module not in SIZES:
        pytest.fail(f"minijax/{module} has a budget but no longer exists: drop its entry")
    assert SIZES[module] <= BUDGETS[module], (
        f"minijax/{module} has {SIZES[module]} lines of code, over its budget of "
        f"{BUDGETS[module]}: make it smaller, or raise the budget deliberately in this file")
