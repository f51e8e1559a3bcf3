"""Shapes, creation and products (minijax/numpy/lax_numpy.py: diagonals, flips, tiles,
stacking, splitting, padding; tensor_contractions.py) against jax.numpy, and the array methods.

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
    A,
    B,
    I,
    P,
    V,
    assert_same,
    check,
    check_grad,
    check_jit_and_vmap,
    jnp,
)

import minijax

# Slow (CI runs it, `make test-fast` does not): shape functions under every transformation.
pytestmark = pytest.mark.slow

CASES = {
    "diagonal": lambda J: jnp(J).diagonal(A),
    "diagonal_offset": lambda J: jnp(J).diagonal(A, 2),
    "diagonal_neg": lambda J: jnp(J).diagonal(A, -1),
    "diagonal_empty": lambda J: jnp(J).diagonal(A, 9),
    "diagonal_axes": lambda J: jnp(J).diagonal(A3, 1, axis1=2, axis2=0),
    "diag_1d": lambda J: jnp(J).diag(V),
    "diag_1d_k": lambda J: jnp(J).diag(V, 2),
    "diag_1d_negk": lambda J: jnp(J).diag(V, -1),
    "diag_2d": lambda J: jnp(J).diag(A, 1),
    "tril": lambda J: jnp(J).tril(A),
    "tril_k": lambda J: jnp(J).tril(A3, -1),
    "triu": lambda J: jnp(J).triu(I, 1),
    "flip": lambda J: jnp(J).flip(A3),
    "flip_axis": lambda J: jnp(J).flip(A3, (0, 2)),
    "fliplr": lambda J: jnp(J).fliplr(A),
    "flipud": lambda J: jnp(J).flipud(I),
    "roll": lambda J: jnp(J).roll(A, 3),
    "roll_axis": lambda J: jnp(J).roll(A3, -1, axis=1),
    "roll_tuple": lambda J: jnp(J).roll(A3, (1, 2), axis=(0, 2)),
    "roll_array_shifts": lambda J: jnp(J).roll(A3, np.array([1, 2]), axis=(0, 2)),
    "roll_array_shift_one_axis": lambda J: jnp(J).roll(A3, np.array([1, 2]), axis=1),
    "tile": lambda J: jnp(J).tile(A, 2),
    "tile_tuple": lambda J: jnp(J).tile(V, (2, 3)),
    "tile_short": lambda J: jnp(J).tile(A3, (2, 1)),
    "repeat": lambda J: jnp(J).repeat(A, 2),
    "repeat_axis": lambda J: jnp(J).repeat(A3, 3, axis=1),
    "repeat_seq": lambda J: jnp(J).repeat(I, np.array([1, 0, 2]), axis=0),
    "atleast_1d": lambda J: jnp(J).atleast_1d(np.float32(2.0)),
    "atleast_1d_many": lambda J: jnp(J).atleast_1d(V, 3.0),
    "atleast_2d": lambda J: jnp(J).atleast_2d(V),
    "atleast_3d": lambda J: jnp(J).atleast_3d(V, A, A3),
    "hstack": lambda J: jnp(J).hstack([A, P]),
    "hstack_1d": lambda J: jnp(J).hstack([V, V]),
    "vstack": lambda J: jnp(J).vstack([A, I]),
    "vstack_1d": lambda J: jnp(J).vstack([V, V]),
    "dstack": lambda J: jnp(J).dstack([A, P]),
    "column_stack": lambda J: jnp(J).column_stack([A[:, 0], P]),
    "append": lambda J: jnp(J).append(A, V),
    "append_axis": lambda J: jnp(J).append(A, P, axis=1),
    "split": lambda J: jnp(J).split(A, 2, axis=1),
    "split_indices": lambda J: jnp(J).split(A3, [1, 3], axis=2),
    "array_split": lambda J: jnp(J).array_split(V, 3),
    "meshgrid": lambda J: jnp(J).meshgrid(V, A[0]),
    "meshgrid_ij": lambda J: jnp(J).meshgrid(V, A[0], A3[0, 0, :3], indexing="ij"),
    "meshgrid_sparse": lambda J: jnp(J).meshgrid(V, A[0], sparse=True),
    "broadcast_arrays": lambda J: jnp(J).broadcast_arrays(A[:, :1], V[:4], 1.0),
    "pad_constant": lambda J: jnp(J).pad(A, 2),
    "pad_constant_value": lambda J: jnp(J).pad(I, ((1, 0), (2, 3)), constant_values=-5),
    "pad_constant_pairs": lambda J: jnp(J).pad(A, 1, constant_values=((1.0, 2.0), (3.0, 4.0))),
    "pad_edge": lambda J: jnp(J).pad(A, ((1, 2), (0, 3)), mode="edge"),
    "pad_reflect": lambda J: jnp(J).pad(A3, ((1, 1), (2, 0), (3, 5)), mode="reflect"),
    "pad_symmetric": lambda J: jnp(J).pad(A, 5, mode="symmetric"),
    "pad_wrap": lambda J: jnp(J).pad(V, (7, 2), mode="wrap"),
    "logspace": lambda J: jnp(J).logspace(0.0, 2.0, 5),
    "logspace_base": lambda J: jnp(J).logspace(1, 3, 4, endpoint=False, base=2.0),
    "identity": lambda J: jnp(J).identity(3),
    "select": lambda J: jnp(J).select([A > 0.5, A < -0.5], [A, -A * 2], 7.0),
    "select_int": lambda J: jnp(J).select([I > 2, I < 0], [I, 0]),
    "tensordot": lambda J: jnp(J).tensordot(A3, A.T, 1),
    "tensordot_axes": lambda J: jnp(J).tensordot(A3, A, ((1, 2), (0, 1))),
    "tensordot_mixed": lambda J: jnp(J).tensordot(I, A.T, ((0,), (1,))),
    "inner": lambda J: jnp(J).inner(A, A3),
    "inner_scalar": lambda J: jnp(J).inner(V, 2.0),
    "kron": lambda J: jnp(J).kron(A, I[:2, :2]),
    "kron_ranks": lambda J: jnp(J).kron(V, A3),
    "tri": lambda J: jnp(J).tri(3, 5, 1),
    "tri_int": lambda J: jnp(J).tri(4, k=-1, dtype=np.int32),
    "unravel_index": lambda J: jnp(J).unravel_index(np.array([0, 5, 11, -1, 30]), (3, 4)),
    "unravel_index_3d": lambda J: jnp(J).unravel_index(7, (2, 2, 3)),
    "identity_int": lambda J: jnp(J).identity(2, dtype=np.int32),
    "empty": lambda J: jnp(J).empty((2, 3)),
    "empty_like": lambda J: jnp(J).empty_like(I),
    "copy": lambda J: jnp(J).copy(A),
    "where_size": lambda J: jnp(J).where(B, size=5),
    "nonzero_size": lambda J: jnp(J).nonzero(I, size=9, fill_value=-1),
    "nonzero_size_small": lambda J: jnp(J).nonzero(I, size=2),
    "flatnonzero_size": lambda J: jnp(J).flatnonzero(I, size=12),
    "argwhere_size": lambda J: jnp(J).argwhere(I, size=10, fill_value=3),
    "unique_size": lambda J: jnp(J).unique(DUP, size=6),
    "unique_size_fill": lambda J: jnp(J).unique(DUPI, size=6, fill_value=-1),
    "unique_counts": lambda J: jnp(J).unique(DUP, size=5, return_counts=True),
    "unique_index_size": lambda J: jnp(J).unique(DUPI, return_index=True, return_inverse=True,
                                                 size=6),
    "unique_inverse_small": lambda J: jnp(J).unique(DUP, return_inverse=True, size=2),
    "unique_nan": lambda J: jnp(J).unique(np.array([np.nan, 1, np.nan, 1], np.float32), size=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


def test_traced_roll_shift():
    f = lambda J: J.jit(lambda x, s: J.numpy.roll(x, s, axis=1))(A, np.int32(3))
    assert_same(f(minijax), f(jax))


def test_errors():
    mnp = minijax.numpy
    with pytest.raises(ValueError, match="equal division"):
        mnp.split(V, 2)
    with pytest.raises(ValueError, match="0d"):
        mnp.nonzero(np.float32(1))
    with pytest.raises(NotImplementedError, match="mode"):
        mnp.pad(A, 1, mode="maximum")
    with pytest.raises(ValueError, match="side"):
        mnp.searchsorted(SORTED, 1.0, side="middle")
    with pytest.raises(ValueError, match="at least 2D"):
        mnp.tril(V)
    with pytest.raises(NotImplementedError, match="decimals < 0"):
        mnp.round(I, -1)


def test_array_methods():
    def program(J):
        x = J.numpy.asarray(A)
        return (x.prod(axis=1), x.any(), x.all(axis=0), x.cumsum(1), x.cumprod(), x.sort(axis=0),
                x.argsort(), x.round(1), x.take(np.array([1, 3]), axis=1), x.repeat(2, axis=0),
                (x > 0).nonzero(size=3), x.diagonal(1), x.trace(), x.ptp(0), x.conj(), x.real,
                x.imag, J.numpy.asarray(SORTED).searchsorted(x))
    check(program)


GRADS = {
    "pad_reflect": (lambda J, x: (jnp(J).pad(x, 2, mode="reflect") ** 2).sum(), A),
    "pad_constant": (lambda J, x: (jnp(J).pad(x, 1, constant_values=3.0) ** 2).sum(), A),
    "tile": (lambda J, x: (jnp(J).tile(x, (2, 1)) ** 2 * jnp(J).arange(6.0)[:, None]).sum(), A),
    "repeat": (lambda J, x: (jnp(J).repeat(x, np.array([1, 0, 3]), axis=0) ** 3).sum(), A),
    "roll": (lambda J, x: (jnp(J).roll(x, 2) * A).sum(), A),
    "diagonal": (lambda J, x: (jnp(J).diagonal(x, 1) ** 2).sum(), A),
    "tensordot_kron": (lambda J, x: (jnp(J).tensordot(x, A.T, 1) ** 2).sum() +
                       jnp(J).kron(x, x).sum(), A),
    "tril": (lambda J, x: (jnp(J).tril(x) ** 2).sum(), A),
    "flip_split": (lambda J, x: (jnp(J).split(jnp(J).flip(x), 2, axis=1)[0] ** 2).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    check_grad(*GRADS[name])


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "pad": lambda J, x: jnp(J).pad(x, 2, mode="reflect"),
 "pad_c": lambda J, x: jnp(J).pad(x, 1),
 "tile": lambda J, x: jnp(J).tile(x, (2, 3)),
 "repeat": lambda J, x: jnp(J).repeat(x, 2, axis=0),
 "roll": lambda J, x: jnp(J).roll(x, 1, axis=1),
 "diagonal": lambda J, x: jnp(J).diagonal(x, 1),
 "tril": lambda J, x: jnp(J).tril(x),
 "diag": lambda J, x: jnp(J).diag(x[0]),
 "flip": lambda J, x: jnp(J).flip(x),
 "nonzero": lambda J, x: jnp(J).nonzero(x > 0, size=4),
 "argwhere": lambda J, x: jnp(J).argwhere(x > 0, size=3),
 "split": lambda J, x: jnp(J).split(x, 3, axis=0),
 "hstack": lambda J, x: jnp(J).hstack([x, x]),
 "meshgrid": lambda J, x: jnp(J).meshgrid(x[0], x[1]),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    check_jit_and_vmap(JIT_VMAP[name])
