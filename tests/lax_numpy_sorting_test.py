"""Sorting, searching and set operations (minijax/numpy/sorting.py, setops.py, and
lax_numpy.py's searchsorted, digitize, interp, nonzero) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest
from lax_numpy_test_util import (
    A3,
    DUP,
    DUPI,
    SORTED,
    SPECIAL,
    WNAN,
    A,
    I,
    V,
    assert_same,
    check,
    check_grad,
    check_jit_and_vmap,
    jnp,
)

import minijax

# int32[6,4,2] with a repeated row (axis 0) and a repeated column (axis 1); f32[4,2] with NaNs
ROWS = np.random.default_rng(0).integers(0, 3, (6, 4, 2)).astype(np.int32)
ROWS[3], ROWS[:, 2] = ROWS[0], ROWS[:, 0]
NAN_ROWS = np.array([[1.0, np.nan], [1.0, np.nan], [0.5, 2.0], [np.nan, 1.0]], np.float32)

CASES = {
    "sort": lambda J: jnp(J).sort(A),
    "sort_axis0": lambda J: jnp(J).sort(A3, axis=0),
    "sort_none": lambda J: jnp(J).sort(A3, axis=None),
    "sort_desc": lambda J: jnp(J).sort(DUP, descending=True),
    "sort_nan": lambda J: jnp(J).sort(SPECIAL),
    "sort_int": lambda J: jnp(J).sort(I, axis=0),
    "argsort": lambda J: jnp(J).argsort(DUP),
    "argsort_axis": lambda J: jnp(J).argsort(A3, axis=1),
    "argsort_desc": lambda J: jnp(J).argsort(DUP, descending=True),
    "argsort_none": lambda J: jnp(J).argsort(DUPI, axis=None),
    "searchsorted": lambda J: jnp(J).searchsorted(SORTED, A),
    "searchsorted_right": lambda J: jnp(J).searchsorted(SORTED, DUP - 1, side="right"),
    "searchsorted_scalar": lambda J: jnp(J).searchsorted(SORTED, 0.0),
    "searchsorted_sorter": lambda J: jnp(J).searchsorted(DUP, 2.0, sorter=np.argsort(DUP)),
    "digitize": lambda J: jnp(J).digitize(A, SORTED),
    "digitize_right": lambda J: jnp(J).digitize(DUP - 1, SORTED, right=True),
    "digitize_decreasing": lambda J: jnp(J).digitize(A, SORTED[::-1]),
    "interp": lambda J: jnp(J).interp(A * 3, SORTED, np.arange(5.0, dtype=np.float32) ** 2),
    "interp_lr": lambda J: jnp(J).interp(A * 5, SORTED, -SORTED, left=-9.0, right=9.0),
    "interp_int": lambda J: jnp(J).interp(I, np.array([0, 2, 4]), np.array([1, 0, 5])),
    "isin": lambda J: jnp(J).isin(I, np.array([0, 3, 9])),
    "isin_invert": lambda J: jnp(J).isin(DUP, DUPI, invert=True),
    "nanargmax": lambda J: jnp(J).nanargmax(WNAN[:1], axis=1),
    "nanargmin": lambda J: jnp(J).nanargmin(np.array([np.nan, 2, -1, np.nan], np.float32)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


EAGER = {
    "nonzero": lambda J: jnp(J).nonzero(I),
    "nonzero_1d": lambda J: jnp(J).nonzero(V > 0),
    "where_one_arg": lambda J: jnp(J).where(A3 > 0.5),
    "flatnonzero": lambda J: jnp(J).flatnonzero(I),
    "argwhere": lambda J: jnp(J).argwhere(I),
    "unique": lambda J: jnp(J).unique(DUP),
    "unique_int": lambda J: jnp(J).unique(DUPI),
    "unique_counts": lambda J: jnp(J).unique(DUPI, return_counts=True),
    "unique_all": lambda J: jnp(J).unique(DUPI, return_index=True, return_inverse=True,
                                          return_counts=True),
    "unique_all_float": lambda J: jnp(J).unique(DUP, return_index=True, return_inverse=True,
                                                return_counts=True),
    # slices along an axis: rows of a 3-D array with repeats, NaN rows, sizes, empty inputs
    "unique_axis0": lambda J: jnp(J).unique(ROWS, axis=0, return_index=True,
                                            return_inverse=True, return_counts=True),
    "unique_axis1": lambda J: jnp(J).unique(ROWS, axis=1, return_inverse=True),
    "unique_axis_last": lambda J: jnp(J).unique(ROWS, axis=-1, return_counts=True),
    "unique_axis_size": lambda J: jnp(J).unique(ROWS, axis=0, size=8, return_index=True,
                                                return_inverse=True, return_counts=True),
    "unique_axis_size_small": lambda J: jnp(J).unique(ROWS, axis=1, size=2,
                                                      return_counts=True),
    "unique_axis_fill": lambda J: jnp(J).unique(ROWS, axis=0, size=9, fill_value=-1),
    "unique_axis_nan": lambda J: jnp(J).unique(NAN_ROWS, axis=0, return_inverse=True),
    "unique_axis_nan_distinct": lambda J: jnp(J).unique(NAN_ROWS, axis=0, equal_nan=False),
    "unique_axis_empty": lambda J: jnp(J).unique(np.zeros((0, 3), np.float32), axis=0, size=2,
                                                 fill_value=7, return_index=True,
                                                 return_inverse=True, return_counts=True),
    "unique_axis_1d": lambda J: jnp(J).unique(DUPI, axis=0, return_index=True, size=9),
    "isscalar": lambda J: (jnp(J).isscalar(1.0), jnp(J).isscalar(A),
                           jnp(J).isscalar(jnp(J).array(2.0)), jnp(J).isscalar(np.float32(1))),
    "iscomplexobj": lambda J: (jnp(J).iscomplexobj(A), jnp(J).iscomplexobj(I),
                               jnp(J).isrealobj(A)),
    "broadcast_shapes": lambda J: jnp(J).broadcast_shapes((3, 1), (4,), ()),
}


def test_unique_axis_under_jit_and_errors_as_jax():
    f = lambda J: J.jit(lambda x: J.numpy.unique(x, axis=0, size=4, return_inverse=True))(ROWS)
    assert_same(f(minijax), f(jax))
    for J in (jax, minijax):  # an empty input padded to `size` needs a fill_value
        with pytest.raises(ValueError, match="fill_value must be specified"):
            J.numpy.unique(np.zeros((0, 3)), axis=0, size=2)


@pytest.mark.parametrize("name", sorted(EAGER))
def test_against_jax_eager(name):
    check(EAGER[name], jit=False)


def test_jit_with_size():
    f = lambda J: J.jit(lambda x: (J.numpy.nonzero(x, size=4), J.numpy.unique(x, size=3),
                                   J.numpy.argwhere(x > 1, size=2)))(I)
    assert_same(f(minijax), f(jax))


@pytest.mark.parametrize("name", ["nonzero", "unique", "argwhere", "flatnonzero"])
def test_size_required_under_jit(name):
    fn = getattr(minijax.numpy, name)
    with pytest.raises(minijax.core.ConcretizationTypeError, match="size"):
        minijax.jit(fn)(I)


GRADS = {
    "sort": (lambda J, x: (jnp(J).sort(x, axis=0) * A).sum(), A),
    "interp": (lambda J, x: jnp(J).interp(x, SORTED, SORTED ** 2).sum(), A * 3),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    check_grad(*GRADS[name])


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "sort": lambda J, x: jnp(J).sort(x, axis=0),
 "argsort": lambda J, x: jnp(J).argsort(x),
 "searchsorted": lambda J, x: jnp(J).searchsorted(np.array([-1., 0, 1], np.float32), x),
 "digitize": lambda J, x: jnp(J).digitize(x, np.array([-1., 0, 1], np.float32)),
 "unique": lambda J, x: jnp(J).unique(jnp(J).round(x), size=4),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    check_jit_and_vmap(JIT_VMAP[name])
