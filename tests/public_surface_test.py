"""JAX's public surface in minijax, counted from `dir()` of both modules (tools/public_surface.py):
the figures may grow and never drop below those measured when this test was written, the
generated table docs/public_surface.md and minijax/_unimplemented.py are up to date, and a JAX
public name minijax lacks raises an AttributeError that says so.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the survey in a fresh interpreter) is computed once, not once per worker.
# Slow: JAX's public names surveyed in a fresh interpreter.
pytestmark = [pytest.mark.xdist_group("public_surface_test"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("public_surface",
                                               ROOT / "tools" / "public_surface.py")
surface = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(surface)

# (names minijax has, JAX's public names) measured against JAX 0.10.2; raised as names are added
# (issue 45: scipy.special 12 -> 51 of 53, sharding 12 -> 17 of 17, lax 339 -> 343 -> 354,
# pallas 45 -> 46).
MEASURED = {"jax": (130, 133), "jax.numpy": (416, 416), "jax.lax": (354, 372),
            "jax.random": (48, 48), "jax.nn": (36, 36), "jax.tree_util": (35, 36),
            "jax.tree": (14, 14), "jax.scipy.special": (51, 53), "jax.sharding": (17, 17),
            "jax.experimental.pallas": (46, 57), "jax.experimental.pallas.tpu": (63, 66)}


@pytest.fixture(scope="module")
def table():
    return surface.fresh_survey()  # in a new interpreter: dir(jax) grows with what is imported


def test_coverage_does_not_drop(table):
    for name, (public, missing) in table.items():
        have, total = MEASURED[name]
        assert len(public) == total, f"{name}: JAX's public names changed ({len(public)})"
        assert len(public) - len(missing) >= have, (
            f"{name}: minijax has {len(public) - len(missing)} of {total} public names, "
            f"fewer than the {have} measured before")


def test_generated_table_is_up_to_date(table):
    stale = "out of date: run `.venv/bin/python tools/public_surface.py`"
    assert (ROOT / "docs" / "public_surface.md").read_text() == surface.markdown(table), stale
    assert (ROOT / "minijax" / "_unimplemented.py").read_text() == surface.python(table), stale


def test_missing_jax_names_raise_an_error_that_says_so(table):
    for name, (_, missing) in table.items():
        mini = importlib.import_module(surface.mini_name(name))
        for n in missing[:3]:
            with pytest.raises(AttributeError, match="not implemented in minijax") as e:
                getattr(mini, n)
            assert f"{name}.{n}" in str(e.value) and "docs/public_surface.md" in str(e.value)
            assert not hasattr(mini, n)
        with pytest.raises(AttributeError) as e:
            mini.no_such_name_in_jax  # noqa: B018
        assert "not implemented" not in str(e.value)
