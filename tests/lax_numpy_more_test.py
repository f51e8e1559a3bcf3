"""More of minijax.numpy (minijax/numpy/extra.py) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree. Then gradients of the differentiable ones, and the
value-dependent shapes (nonzero, unique) with `size=` under jit.
"""

import jax
import numpy as np
import pytest

import minijax
from minijax.array import Array

RNG = np.random.default_rng(1)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


A = _rand(3, 4)
A3 = _rand(2, 3, 4)
V = _rand(5)
P = np.abs(_rand(3, 4)) + 0.5
U = (RNG.uniform(-0.9, 0.9, (3, 4))).astype(np.float32)     # in (-1, 1)
G1 = (np.abs(_rand(3, 4)) + 1.1).astype(np.float32)         # > 1
I = np.array([[3, -7, 2, 0], [-4, 5, 9, 3], [0, 0, 1, -1]], np.int32)
B = I > 0
DUP = np.array([3., 1., 2., 3., 1., 5., 2., 2.], np.float32)
DUPI = np.array([[4, 1], [4, 0], [1, 7]], np.int32)
SORTED = np.array([-1., 0., 0., 2.5, 7.], np.float32)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0., -0., 1.5, -2.5, 0.5], np.float32)
WNAN = np.array([[1., np.nan, 3.], [np.nan, np.nan, np.nan]], np.float32)
HALF = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 1.25, 3.0], np.float32)


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    g_leaves, g_tree = minijax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert len(g_leaves) == len(w_leaves), (g_tree, w_tree)
    for g, w in zip(g_leaves, w_leaves):
        if isinstance(w, (bool, int, tuple)):
            assert g == w, (g, w)
            continue
        assert isinstance(g, Array), type(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.weak_type == getattr(w, "weak_type", False), ("weak_type", g.weak_type, w)
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        else:
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=rtol, atol=atol)


def check(program, rtol=1e-5, atol=1e-6, jit=True):
    want = jax.jit(lambda: program(jax))() if jit else program(jax)
    assert_same(program(minijax), want, rtol=rtol, atol=atol)


jnp = lambda J: J.numpy  # noqa: E731

ELEMENTWISE = {
    "tan": lambda J: jnp(J).tan(U),
    "arcsin": lambda J: jnp(J).arcsin(U),
    "arccos": lambda J: jnp(J).arccos(np.concatenate([U.ravel(), [-1.0, 1.0]])),
    "arctan": lambda J: jnp(J).arctan(A * 4),
    "arctan2": lambda J: jnp(J).arctan2(A, P),
    "arctan2_int": lambda J: jnp(J).arctan2(I, 2),
    "expm1": lambda J: jnp(J).expm1(A * 1e-3),
    "sinh": lambda J: jnp(J).sinh(A),
    "sinh_small": lambda J: jnp(J).sinh(A * 1e-4),
    "cosh": lambda J: jnp(J).cosh(A),
    "arcsinh": lambda J: jnp(J).arcsinh(A * 3),
    "arccosh": lambda J: jnp(J).arccosh(G1),
    "arctanh": lambda J: jnp(J).arctanh(U),
    "exp2": lambda J: jnp(J).exp2(A),
    "exp2_int": lambda J: jnp(J).exp2(I),
    "log2": lambda J: jnp(J).log2(P),
    "log10": lambda J: jnp(J).log10(P),
    "deg2rad": lambda J: jnp(J).deg2rad(A * 90),
    "rad2deg": lambda J: jnp(J).rad2deg(A),
    "cbrt": lambda J: jnp(J).cbrt(A * 5),
    "hypot": lambda J: jnp(J).hypot(A, P),
    "hypot_weak": lambda J: jnp(J).hypot(A, 2.0),
    "logaddexp": lambda J: jnp(J).logaddexp(A, P),
    "logaddexp_inf": lambda J: jnp(J).logaddexp(SPECIAL, SPECIAL),
    "logaddexp2": lambda J: jnp(J).logaddexp2(A, P),
    "heaviside": lambda J: jnp(J).heaviside(SPECIAL, 0.5),
    "fmax": lambda J: jnp(J).fmax(SPECIAL, SPECIAL[::-1]),
    "fmin": lambda J: jnp(J).fmin(SPECIAL, SPECIAL[::-1]),
    "fmax_int": lambda J: jnp(J).fmax(I, 1),
    "positive": lambda J: jnp(J).positive(jnp(J).asarray(I)),
    "float_power": lambda J: jnp(J).float_power(P, 2),
    "float_power_int": lambda J: jnp(J).float_power(np.abs(I), 2),
    "signbit": lambda J: jnp(J).signbit(SPECIAL),
    "signbit_int": lambda J: jnp(J).signbit(I),
    "copysign": lambda J: jnp(J).copysign(A, SPECIAL[:4]),
    "real": lambda J: jnp(J).real(A),
    "imag": lambda J: jnp(J).imag(A),
    "conj": lambda J: jnp(J).conj(I),
    "isinf": lambda J: jnp(J).isinf(SPECIAL),
    "isinf_int": lambda J: jnp(J).isinf(I),
    "isposinf": lambda J: jnp(J).isposinf(SPECIAL),
    "isneginf": lambda J: jnp(J).isneginf(SPECIAL),
    "nan_to_num": lambda J: jnp(J).nan_to_num(SPECIAL),
    "nan_to_num_args": lambda J: jnp(J).nan_to_num(SPECIAL, nan=7.0, posinf=1.0, neginf=-1.0),
    "nan_to_num_int": lambda J: jnp(J).nan_to_num(I),
    "isclose": lambda J: jnp(J).isclose(SPECIAL, SPECIAL[::-1] + 1e-7),
    "isclose_self": lambda J: jnp(J).isclose(SPECIAL, SPECIAL),
    "isclose_nan": lambda J: jnp(J).isclose(SPECIAL, SPECIAL, equal_nan=True),
    "isclose_int": lambda J: jnp(J).isclose(I, 3),
    "allclose": lambda J: jnp(J).allclose(A, A + 1e-7),
    "allclose_false": lambda J: jnp(J).allclose(A, A + 1e-2),
    "round": lambda J: jnp(J).round(HALF),
    "round_decimals": lambda J: jnp(J).round(A * 100, 1),
    "round_int": lambda J: jnp(J).round(jnp(J).asarray(I)),
    "around": lambda J: jnp(J).around(A, 2),
    "trunc": lambda J: jnp(J).trunc(HALF),
    "trunc_int": lambda J: jnp(J).trunc(jnp(J).asarray(I)),
    "logical_xor": lambda J: jnp(J).logical_xor(B, I < 3),
    "logical_xor_num": lambda J: jnp(J).logical_xor(I, A),
    "bitwise_xor": lambda J: jnp(J).bitwise_xor(I, 5),
    "bitwise_not": lambda J: jnp(J).bitwise_not(I),
    "pow": lambda J: jnp(J).pow(P, 1.5),
    "fabs": lambda J: jnp(J).fabs(I),
    "fmod": lambda J: jnp(J).fmod(I, np.array([2, -3, 4, 5], np.int32)),
    "fmod_float": lambda J: jnp(J).fmod(A * 5, 1.5),
    "divmod": lambda J: jnp(J).divmod(I, 3),
    "left_shift": lambda J: jnp(J).left_shift(I, 2),
    "right_shift": lambda J: jnp(J).right_shift(I, 1),
    "right_shift_uint": lambda J: jnp(J).right_shift(np.abs(I).astype(np.uint32), 1),
}

REDUCTIONS = {
    "prod": lambda J: jnp(J).prod(A),
    "prod_axis": lambda J: jnp(J).prod(A3, axis=(0, 2)),
    "prod_keepdims": lambda J: jnp(J).prod(A3, axis=1, keepdims=True),
    "prod_int": lambda J: jnp(J).prod(I, axis=0),
    "prod_bool": lambda J: jnp(J).prod(B, axis=1),
    "prod_initial": lambda J: jnp(J).prod(A, axis=1, initial=2.0),
    "prod_where": lambda J: jnp(J).prod(A, axis=1, where=B),
    "prod_odd": lambda J: jnp(J).prod(V),
    "any": lambda J: jnp(J).any(B, axis=0),
    "all": lambda J: jnp(J).all(B, axis=1),
    "any_float": lambda J: jnp(J).any(I),
    "all_keepdims": lambda J: jnp(J).all(I, axis=0, keepdims=True),
    "count_nonzero": lambda J: jnp(J).count_nonzero(I),
    "count_nonzero_axis": lambda J: jnp(J).count_nonzero(I, axis=1),
    "ptp": lambda J: jnp(J).ptp(A, axis=0),
    "ptp_int": lambda J: jnp(J).ptp(I),
    "nansum": lambda J: jnp(J).nansum(WNAN, axis=1),
    "nanprod": lambda J: jnp(J).nanprod(WNAN, axis=1),
    "nanmax": lambda J: jnp(J).nanmax(WNAN, axis=1),
    "nanmin": lambda J: jnp(J).nanmin(WNAN, axis=1),
    "nanmin_all": lambda J: jnp(J).nanmin(WNAN),
    "nanmean": lambda J: jnp(J).nanmean(WNAN, axis=1),
    "nanmax_int": lambda J: jnp(J).nanmax(I, axis=0),
    "average": lambda J: jnp(J).average(A),
    "average_weights": lambda J: jnp(J).average(A, axis=1, weights=P[0]),
    "average_returned": lambda J: jnp(J).average(A, axis=0, weights=P, returned=True),
    "average_int": lambda J: jnp(J).average(I, axis=0),
    "cumsum": lambda J: jnp(J).cumsum(A, axis=1),
    "cumsum_flat": lambda J: jnp(J).cumsum(A3),
    "cumsum_bool": lambda J: jnp(J).cumsum(B, axis=0),
    "cumsum_dtype": lambda J: jnp(J).cumsum(I, axis=1, dtype=np.float32),
    "cumprod": lambda J: jnp(J).cumprod(A3, axis=2),
    "cumprod_int": lambda J: jnp(J).cumprod(I, axis=1),
    "cumsum_int8": lambda J: jnp(J).cumsum(I.astype(np.int8), axis=0),
    "cumprod_uint8": lambda J: jnp(J).cumprod(np.abs(I).astype(np.uint8), axis=0),
    "cumprod_flat": lambda J: jnp(J).cumprod(P),
    "nancumsum": lambda J: jnp(J).nancumsum(WNAN, axis=1),
    "nancumprod": lambda J: jnp(J).nancumprod(WNAN),
    "cumulative_sum": lambda J: jnp(J).cumulative_sum(A, axis=0, include_initial=True),
    "cumulative_prod": lambda J: jnp(J).cumulative_prod(V),
    "diff": lambda J: jnp(J).diff(A),
    "diff_n2": lambda J: jnp(J).diff(A3, n=2, axis=1),
    "diff_prepend": lambda J: jnp(J).diff(V, prepend=0.0, append=V[:2]),
    "diff_bool": lambda J: jnp(J).diff(B, axis=0),
    "diff_int": lambda J: jnp(J).diff(I),
    "median": lambda J: jnp(J).median(A),
    "median_axis": lambda J: jnp(J).median(A3, axis=1),
    "median_keepdims": lambda J: jnp(J).median(A3, axis=(0, 2), keepdims=True),
    "median_int": lambda J: jnp(J).median(I, axis=0),
    "quantile": lambda J: jnp(J).quantile(A, 0.3),
    "quantile_q": lambda J: jnp(J).quantile(A3, np.array([0.1, 0.5, 0.95], np.float32), axis=2),
    "quantile_qarr_keep": lambda J: jnp(J).quantile(A3, np.array([0.2, 0.7], np.float32),
                                                    axis=1, keepdims=True),
    "quantile_nan": lambda J: jnp(J).quantile(WNAN, 0.5, axis=1),
    "quantile_lower": lambda J: jnp(J).quantile(A, 0.3, axis=0, method="lower"),
    "quantile_higher": lambda J: jnp(J).quantile(A, 0.3, axis=0, method="higher"),
    "quantile_nearest": lambda J: jnp(J).quantile(A, 0.4, axis=1, method="nearest"),
    "quantile_midpoint": lambda J: jnp(J).quantile(A, 0.4, axis=1, method="midpoint"),
    "percentile": lambda J: jnp(J).percentile(A3, 40.0, axis=0),
    "percentile_int": lambda J: jnp(J).percentile(I, np.array([10, 90]), axis=1),
    "trace": lambda J: jnp(J).trace(A),
    "trace_offset": lambda J: jnp(J).trace(A3, offset=-1, axis1=1, axis2=2),
    "trace_int": lambda J: jnp(J).trace(I, 1),
}

SORTING = {
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
    "take": lambda J: jnp(J).take(A, np.array([2, 0, -1, 7])),
    "interp": lambda J: jnp(J).interp(A * 3, SORTED, np.arange(5.0, dtype=np.float32) ** 2),
    "interp_lr": lambda J: jnp(J).interp(A * 5, SORTED, -SORTED, left=-9.0, right=9.0),
    "interp_int": lambda J: jnp(J).interp(I, np.array([0, 2, 4]), np.array([1, 0, 5])),
    "isin": lambda J: jnp(J).isin(I, np.array([0, 3, 9])),
    "isin_invert": lambda J: jnp(J).isin(DUP, DUPI, invert=True),
    "nanargmax": lambda J: jnp(J).nanargmax(WNAN[:1], axis=1),
    "nanargmin": lambda J: jnp(J).nanargmin(np.array([np.nan, 2, -1, np.nan], np.float32)),
    "take_axis": lambda J: jnp(J).take(A3, np.array([[0, 3], [1, 1]]), axis=2),
    "take_clip": lambda J: jnp(J).take(A, np.array([5, -7]), axis=0, mode="clip"),
    "take_wrap": lambda J: jnp(J).take(A, np.array([5, -7]), axis=1, mode="wrap"),
    "take_fill_int": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1),
    "take_fill_value": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1, fill_value=-1),
}

SHAPES = {
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

# value-dependent output shapes: JAX runs these eagerly
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
    "isscalar": lambda J: (jnp(J).isscalar(1.0), jnp(J).isscalar(A),
                           jnp(J).isscalar(jnp(J).array(2.0)), jnp(J).isscalar(np.float32(1))),
    "iscomplexobj": lambda J: (jnp(J).iscomplexobj(A), jnp(J).iscomplexobj(I),
                               jnp(J).isrealobj(A)),
    "broadcast_shapes": lambda J: jnp(J).broadcast_shapes((3, 1), (4,), ()),
}

ALL = {**ELEMENTWISE, **REDUCTIONS, **SORTING, **SHAPES}


@pytest.mark.parametrize("name", sorted(ALL))
def test_against_jax(name):
    check(ALL[name], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", sorted(EAGER))
def test_against_jax_eager(name):
    check(EAGER[name], jit=False)


def test_weak_types():
    # a Python scalar stays weakly typed through dtype-preserving functions
    for name in ("positive", "trunc", "round", "sinh", "isinf", "cbrt", "signbit", "exp2",
                 "arcsin", "arctan", "expm1"):
        check(lambda J, name=name: getattr(jnp(J), name)(2.5))
    check(lambda J: jnp(J).cumsum(jnp(J).asarray(2.0) * A))
    check(lambda J: jnp(J).hypot(3.0, 4.0))
    check(lambda J: jnp(J).copysign(3.0, -1.0))
    check(lambda J: jnp(J).logaddexp(1.0, 2.0))


GRADS = {
    "prod": (lambda J, x: jnp(J).prod(x, axis=1).sum(), A),
    "cumprod": (lambda J, x: jnp(J).cumprod(x, axis=1).sum(), A),
    "cumsum": (lambda J, x: (jnp(J).cumsum(x) ** 2).sum(), A),
    "sort": (lambda J, x: (jnp(J).sort(x, axis=0) * A).sum(), A),
    "median": (lambda J, x: jnp(J).median(x, axis=1).sum(), A),
    "quantile": (lambda J, x: jnp(J).quantile(x, 0.3), A3),
    "pad_reflect": (lambda J, x: (jnp(J).pad(x, 2, mode="reflect") ** 2).sum(), A),
    "pad_constant": (lambda J, x: (jnp(J).pad(x, 1, constant_values=3.0) ** 2).sum(), A),
    "tile": (lambda J, x: (jnp(J).tile(x, (2, 1)) ** 2 * jnp(J).arange(6.0)[:, None]).sum(), A),
    "repeat": (lambda J, x: (jnp(J).repeat(x, np.array([1, 0, 3]), axis=0) ** 3).sum(), A),
    "roll": (lambda J, x: (jnp(J).roll(x, 2) * A).sum(), A),
    "diagonal": (lambda J, x: (jnp(J).diagonal(x, 1) ** 2).sum(), A),
    "trace": (lambda J, x: jnp(J).trace(x * x), A),
    "interp": (lambda J, x: jnp(J).interp(x, SORTED, SORTED ** 2).sum(), A * 3),
    "tensordot_kron": (lambda J, x: (jnp(J).tensordot(x, A.T, 1) ** 2).sum() +
                       jnp(J).kron(x, x).sum(), A),
    "tril": (lambda J, x: (jnp(J).tril(x) ** 2).sum(), A),
    "take": (lambda J, x: (jnp(J).take(x, np.array([1, 1, 4]), axis=1) ** 2).sum(), A),
    "logaddexp": (lambda J, x: jnp(J).logaddexp(x, A.T[:3]).sum(), A[:, :3]),
    "hypot": (lambda J, x: jnp(J).hypot(x, P).sum(), A),
    "sinh_cosh_tan": (lambda J, x: (jnp(J).sinh(x) + jnp(J).cosh(x) + jnp(J).tan(x)).sum(), U),
    "arc": (lambda J, x: (jnp(J).arcsinh(x) + jnp(J).arctanh(x) + jnp(J).arcsin(x) +
                          jnp(J).arccos(x) + jnp(J).arctan(x)).sum(), U),
    "arctan2": (lambda J, x: jnp(J).arctan2(x, P).sum(), A),
    "nanmean": (lambda J, x: jnp(J).nanmean(x, axis=0).sum(), A),
    "average": (lambda J, x: jnp(J).average(x, axis=1, weights=P[0]).sum(), A),
    "diff": (lambda J, x: (jnp(J).diff(x, n=2) ** 2).sum(), A),
    "flip_split": (lambda J, x: (jnp(J).split(jnp(J).flip(x), 2, axis=1)[0] ** 2).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    f, x = GRADS[name]
    got = minijax.grad(lambda x: f(minijax, x))(x)
    want = jax.grad(lambda x: f(jax, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_jit_with_size():
    f = lambda J: J.jit(lambda x: (J.numpy.nonzero(x, size=4), J.numpy.unique(x, size=3),
                                   J.numpy.argwhere(x > 1, size=2)))(I)
    assert_same(f(minijax), f(jax))


def test_traced_roll_shift():
    f = lambda J: J.jit(lambda x, s: J.numpy.roll(x, s, axis=1))(A, np.int32(3))
    assert_same(f(minijax), f(jax))


@pytest.mark.parametrize("name", ["nonzero", "unique", "argwhere", "flatnonzero"])
def test_size_required_under_jit(name):
    fn = getattr(minijax.numpy, name)
    with pytest.raises(minijax.core.ConcretizationTypeError, match="size"):
        minijax.jit(fn)(I)


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


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "sort": lambda J, x: jnp(J).sort(x, axis=0),
 "argsort": lambda J, x: jnp(J).argsort(x),
 "cumsum": lambda J, x: jnp(J).cumsum(x, axis=1),
 "cumprod": lambda J, x: jnp(J).cumprod(x, axis=0),
 "prod": lambda J, x: jnp(J).prod(x, axis=1),
 "median": lambda J, x: jnp(J).median(x, axis=0),
 "quantile": lambda J, x: jnp(J).quantile(x, np.array([0.2, 0.9], np.float32)),
 "pad": lambda J, x: jnp(J).pad(x, 2, mode="reflect"),
 "pad_c": lambda J, x: jnp(J).pad(x, 1),
 "tile": lambda J, x: jnp(J).tile(x, (2, 3)),
 "repeat": lambda J, x: jnp(J).repeat(x, 2, axis=0),
 "roll": lambda J, x: jnp(J).roll(x, 1, axis=1),
 "diagonal": lambda J, x: jnp(J).diagonal(x, 1),
 "trace": lambda J, x: jnp(J).trace(x),
 "tril": lambda J, x: jnp(J).tril(x),
 "diag": lambda J, x: jnp(J).diag(x[0]),
 "flip": lambda J, x: jnp(J).flip(x),
 "take": lambda J, x: jnp(J).take(x, np.array([0, 2, 9]), axis=1),
 "diff": lambda J, x: jnp(J).diff(x),
 "searchsorted": lambda J, x: jnp(J).searchsorted(np.array([-1., 0, 1], np.float32), x),
 "digitize": lambda J, x: jnp(J).digitize(x, np.array([-1., 0, 1], np.float32)),
 "nonzero": lambda J, x: jnp(J).nonzero(x > 0, size=4),
 "unique": lambda J, x: jnp(J).unique(jnp(J).round(x), size=4),
 "argwhere": lambda J, x: jnp(J).argwhere(x > 0, size=3),
 "logaddexp": lambda J, x: jnp(J).logaddexp(x, 1.0),
 "isclose": lambda J, x: jnp(J).isclose(x, 0.5),
 "nanmax": lambda J, x: jnp(J).nanmax(x, axis=0),
 "signbit": lambda J, x: jnp(J).signbit(x),
 "round": lambda J, x: jnp(J).round(x, 1),
 "split": lambda J, x: jnp(J).split(x, 3, axis=0),
 "hstack": lambda J, x: jnp(J).hstack([x, x]),
 "meshgrid": lambda J, x: jnp(J).meshgrid(x[0], x[1]),
 "any": lambda J, x: jnp(J).any(x > 1, axis=0),
 "average": lambda J, x: jnp(J).average(x, axis=0, weights=np.arange(1., 4., dtype=np.float32)),
 "nan_to_num": lambda J, x: jnp(J).nan_to_num(x / 0.),
 "arcsin": lambda J, x: jnp(J).arcsin(x / 5),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    f = JIT_VMAP[name]
    x = A3[0].T[:3]
    assert_same(minijax.jit(lambda x: f(minijax, x))(x), jax.jit(lambda x: f(jax, x))(x))
    xs = A3.transpose(0, 2, 1)[:, :3]
    assert_same(minijax.vmap(lambda x: f(minijax, x))(xs), jax.vmap(lambda x: f(jax, x))(xs))


def test_array_methods():
    def program(J):
        x = J.numpy.asarray(A)
        return (x.prod(axis=1), x.any(), x.all(axis=0), x.cumsum(1), x.cumprod(), x.sort(axis=0),
                x.argsort(), x.round(1), x.take(np.array([1, 3]), axis=1), x.repeat(2, axis=0),
                (x > 0).nonzero(size=3), x.diagonal(1), x.trace(), x.ptp(0), x.conj(), x.real,
                x.imag, J.numpy.asarray(SORTED).searchsorted(x))
    check(program)
