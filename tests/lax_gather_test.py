"""Tests for `lax.gather` / `lax.scatter*` (minijax/lax/slicing.py), NumPy advanced indexing and
`x.at[idx]` (minijax/numpy/indexing.py), against real JAX.

Values (eager and jit, every mode), jvp/grad (against JAX and `check_grads`), vmap over every
combination of batched operand / indices / updates. Mirrors the gather/scatter parts of JAX's
tests/lax_test.py, lax_autodiff_test.py, lax_vmap_test.py and lax_numpy_indexing_test.py.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minijax
import minijax.numpy as mnp
from minijax import core
from minijax.test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): gather, scatter, their gradients and batching.
pytestmark = pytest.mark.slow

RNG = np.random.default_rng(5)
X = RNG.standard_normal((5, 4, 3)).astype(np.float32)
IDX = np.array([[0, 1], [4, 3], [2, 0], [7, -1]], np.int32)  # two rows out of range
U = RNG.standard_normal((4, 3)).astype(np.float32)


def assert_same(got, want, rtol=1e-6, atol=1e-6):
    assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


def gdn(J):
    return J.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 1),
                                        start_index_map=(0, 1))


def sdn(J):
    return J.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0, 1),
                                         scatter_dims_to_operand_dims=(0, 1))


def _gather(J, mode=None, fill_value=None):
    return lambda x, i: J.lax.gather(x, i, gdn(J), (1, 1, 3), mode=mode, fill_value=fill_value)


# ---------------------------------------------------------------------------------------------
# lax.gather / lax.scatter*
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,fill", [(None, None), ("clip", None), ("promise_in_bounds", None),
                                       ("fill", None), ("fill", 0.5)])
def test_gather_values(mode, fill):
    want = _gather(jax, mode, fill)(X, IDX)
    assert_same(_gather(minijax, mode, fill)(X, IDX), want)
    assert_same(minijax.jit(_gather(minijax, mode, fill))(X, IDX), want)


def test_gather_window_slices():
    # windows of size 2 along dim 1, a kept (offset) dim between batch dims
    dn = lambda J: J.lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,),
                                                start_index_map=(0, 1))
    f = lambda J: lambda x, i: J.lax.gather(x, i, dn(J), (1, 2, 3))
    i = np.array([[[1, 3], [0, 0]], [[4, 1], [2, 2]]], np.int32)
    assert_same(f(minijax)(X, i), f(jax)(X, i))
    assert_same(minijax.jit(f(minijax))(X, i), f(jax)(X, i))


@pytest.mark.parametrize("name,mode", list(itertools.product(
    ["scatter_add", "scatter", "scatter_mul", "scatter_min", "scatter_max"],
    [None, "clip", "drop", "promise_in_bounds"])))
def test_scatter_values(name, mode):
    idx = IDX[:3] if name == "scatter" else IDX  # scatter (replace): unique positions
    u = U[:len(idx)]
    f = lambda J: lambda x, i, u: getattr(J.lax, name)(x, i, u, sdn(J), mode=mode)
    if mode == "promise_in_bounds":
        idx, u = idx[:3], u[:3]
    want = f(jax)(X, idx, u)
    assert_same(f(minijax)(X, idx, u), want)
    assert_same(minijax.jit(f(minijax))(X, idx, u), want)


@pytest.mark.parametrize("mode", [None, "clip", "fill"])
def test_gather_grad(mode):
    # out-of-range indices break the promise of mode None (JAX's gradient then drops them)
    idx = IDX[:3] if mode is None else IDX
    f = lambda J: lambda x: (_gather(J, mode, 0.0)(x, idx) ** 2).sum()
    assert_same(minijax.grad(f(minijax))(X), jax.grad(f(jax))(X))
    assert_same(minijax.jit(minijax.grad(f(minijax)))(X), jax.grad(f(jax))(X))
    check_grads(lambda x: _gather(minijax, mode, 0.0)(x, idx), (X,), order=2)


@pytest.mark.parametrize("name", ["scatter_add", "scatter"])
def test_scatter_grad(name):
    idx = IDX[:3] if name == "scatter" else IDX
    u = U[:len(idx)]
    f = lambda J: lambda x, u: J.numpy.sin(getattr(J.lax, name)(x, idx, u, sdn(J))).sum()
    for argnum in (0, 1):
        assert_same(minijax.grad(f(minijax), argnum)(X, u), jax.grad(f(jax), argnum)(X, u))
    check_grads(lambda x, u: getattr(minijax.lax, name)(x, idx, u, sdn(minijax)), (X, u),
                order=2)


def test_scatter_mul_jvp_operand():
    f = lambda J: lambda x: J.lax.scatter_mul(x, IDX, U, sdn(J))
    got = minijax.jvp(f(minijax), (X,), (np.ones_like(X),))
    want = jax.jvp(f(jax), (X,), (np.ones_like(X),))
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])


IN_AXES_2 = [(0, None), (None, 0), (0, 0), (1, 1)]


def _batched(x, axis, n=2, scale=1.0):
    xs = np.stack([x * (1 + scale * k) if x.dtype.kind == "f" else x[::(-1) ** k] for k in
                   range(n)])
    return xs if axis in (None, 0) else np.moveaxis(xs, 0, axis)


@pytest.mark.parametrize("in_axes", IN_AXES_2)
def test_gather_vmap(in_axes):
    args = [X if a is None else _batched(X, a) for a in in_axes[:1]]
    args.append(IDX if in_axes[1] is None else _batched(IDX, in_axes[1]))
    for mode in (None, "fill"):
        got = minijax.vmap(_gather(minijax, mode), in_axes=in_axes)(*args)
        assert_same(got, jax.vmap(_gather(jax, mode), in_axes=in_axes)(*args))


@pytest.mark.parametrize("in_axes", [a for a in itertools.product([0, None], repeat=3)
                                     if a != (None, None, None)])
@pytest.mark.parametrize("name", ["scatter_add", "scatter_max"])
def test_scatter_vmap(in_axes, name):
    args = [X if in_axes[0] is None else _batched(X, 0),
            IDX if in_axes[1] is None else _batched(IDX, 0),
            U if in_axes[2] is None else _batched(U, 0)]
    f = lambda J: lambda x, i, u: getattr(J.lax, name)(x, i, u, sdn(J))
    assert_same(minijax.vmap(f(minijax), in_axes=in_axes)(*args),
                jax.vmap(f(jax), in_axes=in_axes)(*args))


def test_gather_errors():
    with pytest.raises(TypeError, match="gather"):
        minijax.lax.gather(X, IDX.astype(np.float32), gdn(minijax), (1, 1, 3))
    with pytest.raises(TypeError, match="slice size 1"):
        minijax.lax.gather(X, IDX, gdn(minijax), (2, 1, 3))
    with pytest.raises(ValueError, match="Unknown gather mode"):
        minijax.lax.gather(X, IDX, gdn(minijax), (1, 1, 3), mode="wrap")


# ---------------------------------------------------------------------------------------------
# NumPy indexing and x.at[idx]
# ---------------------------------------------------------------------------------------------

I2 = np.array([[0, -1], [4, 2]])
J1 = np.array([1, 3])
INDICES = [
    (I2,), (J1,), (slice(None), J1), (I2, slice(1, 3), None), (J1, None, J1[:1]),
    (None, J1, slice(None, None, -1), 2), (Ellipsis, J1), (1, J1), (J1, 1),
    (J1, slice(None), J1), (X[:, 0, 0] > 0,), (X[..., 0] > 0,), ([0, 2],),
    (slice(None, None, 2), [1, 0], None), (np.array([[1], [2]]), J1[None]),
]


@pytest.mark.parametrize("idx", INDICES, ids=lambda i: str(i)[:40])
def test_advanced_indexing_values(idx):
    want = jnp.asarray(X)[idx]
    assert_same(mnp.asarray(X)[idx], want)
    assert_same(minijax.jit(lambda x: x[idx])(X), want)


def test_indexing_with_traced_index_array():
    f = lambda J: lambda x, i: J.numpy.asarray(x)[i, ..., 1]
    assert_same(minijax.jit(f(minijax))(X, I2), jax.jit(f(jax))(X, I2))
    for in_axes, i in [((None, 0), I2), ((0, None), J1), ((0, 0), I2[:, :1])]:
        assert_same(minijax.vmap(f(minijax), in_axes=in_axes)(X[:2], i),
                    jax.vmap(f(jax), in_axes=in_axes)(X[:2], i))


@pytest.mark.parametrize("idx", [(I2,), (J1, slice(1, 3)), (slice(None), J1, 0)],
                         ids=lambda i: str(i)[:40])
def test_indexing_grad(idx):
    f = lambda J: lambda x: (J.numpy.sin(x[idx]) * 2).sum()
    assert_same(minijax.grad(f(minijax))(X), jax.grad(f(jax))(X))
    check_grads(lambda x: x[idx], (X,), order=1)


def test_boolean_mask_traced_raises():
    with pytest.raises(IndexError, match="concrete"):
        minijax.jit(lambda x: x[x > 0])(X)


@pytest.mark.parametrize("mode,fill", [(None, None), ("clip", None), ("fill", None),
                                       ("fill", -1.0)])
def test_at_get_modes(mode, fill):
    idx = np.array([0, 4, 7, -9])
    f = lambda J: lambda x: J.numpy.asarray(x).at[idx, 1].get(mode=mode, fill_value=fill)
    assert_same(f(minijax)(X), f(jax)(X))


UPDATE_INDICES = [(J1,), (I2, slice(1, 3)), (1, J1), (slice(None), [0, 0, 1]), (slice(1, 3),),
                  (X[:, 0, 0] > 0, 2), (np.array([1, 9, -2]),)]


@pytest.mark.parametrize("op", ["set", "add", "mul", "min", "max"])
@pytest.mark.parametrize("k", range(len(UPDATE_INDICES)))
def test_at_update_values(op, k):
    idx = UPDATE_INDICES[k]
    if op == "set" and k == 3:
        idx = (slice(None), [0, 2, 1])  # set: unique positions (which write wins is unspecified)
    f = lambda J: lambda x, y: getattr(J.numpy.asarray(x).at[idx], op)(y)
    y = np.float32(2.5)
    assert_same(f(minijax)(X, y), f(jax)(X, y))
    assert_same(minijax.jit(f(minijax))(X, y), f(jax)(X, y))


@pytest.mark.parametrize("mode", [None, "drop", "clip", "promise_in_bounds"])
def test_at_update_modes(mode):
    idx = np.array([0, 4, 7]) if mode != "promise_in_bounds" else np.array([0, 4, 2])
    f = lambda J: lambda x: J.numpy.asarray(x).at[idx].add(1.0, mode=mode)
    assert_same(f(minijax)(X), f(jax)(X))


@pytest.mark.parametrize("op", ["set", "add", "mul"])
def test_at_update_grad(op):
    idx = (np.array([3, 0, 1]), slice(None), 1)
    f = lambda J: lambda x, y: J.numpy.sin(getattr(J.numpy.asarray(x).at[idx], op)(y)).sum()
    y = RNG.standard_normal((3, 4)).astype(np.float32)
    for argnum in (0,) if op == "mul" else (0, 1):
        assert_same(minijax.grad(f(minijax), argnum)(X, y), jax.grad(f(jax), argnum)(X, y))


def test_at_update_vmap():
    idx = np.array([3, 0, 1])
    f = lambda J: lambda x, y: J.numpy.asarray(x).at[idx, 1].add(y)
    xs, ys = _batched(X, 0), RNG.standard_normal((2, 3, 3)).astype(np.float32)
    for in_axes in [(0, 0), (0, None), (None, 0)]:
        args = (xs if in_axes[0] == 0 else X, ys if in_axes[1] == 0 else ys[0])
        assert_same(minijax.vmap(f(minijax), in_axes=in_axes)(*args),
                    jax.vmap(f(jax), in_axes=in_axes)(*args))
    g = lambda J: lambda x, i: J.numpy.asarray(x).at[i].set(0.0)
    iv = np.array([[0, 1], [2, 4]])
    assert_same(minijax.vmap(g(minijax), in_axes=(None, 0))(X, iv),
                jax.vmap(g(jax), in_axes=(None, 0))(X, iv))


def test_jaxprs_check_after_transformations():
    f = lambda x, u: x.at[IDX[:, 0], 1:].add(u * 2)[np.array([0, 3])].sum()
    u = U[0]
    for fun, x in [(f, X), (minijax.grad(f), X), (minijax.grad(f, 1), X),
                   (minijax.vmap(f, in_axes=(0, None)), _batched(X, 0)), (minijax.jit(f), X)]:
        core.check_jaxpr(minijax.make_jaxpr(fun)(x, u).jaxpr)


@st.composite
def _index(draw):
    """A random index for an array of shape (4, 5, 3): per dim a slice, an int, an int array
    (shared shape, so they broadcast) or a None before it."""
    arr_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    entries = []
    for n in (4, 5, 3):
        if draw(st.booleans()):
            entries.append(None)
        kind = draw(st.sampled_from(["slice", "int", "array", "array"]))
        if kind == "slice":
            start, step = draw(st.integers(-n, n)), draw(st.sampled_from([1, 2, -1]))
            entries.append(slice(start, None, step))
        elif kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        else:
            vals = draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(arr_shape)),
                                 max_size=int(np.prod(arr_shape))))
            entries.append(np.array(vals, np.int32).reshape(arr_shape))
    return tuple(entries)


@settings(max_examples=25, deadline=None)
@given(idx=_index())
def test_indexing_property(idx):
    x = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    assert_same(mnp.asarray(x)[idx], jnp.asarray(x)[idx])
    f = lambda J: lambda x: J.numpy.asarray(x).at[idx].add(1.0)
    assert_same(f(minijax)(x), f(jax)(x))
