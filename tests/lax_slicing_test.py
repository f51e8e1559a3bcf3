"""Tests for minijax/lax/slicing.py (dynamic_slice, dynamic_update_slice and their in-dim
wrappers) and for indexing with a traced integer (`x[i]`), against real JAX.

Values (including index wrapping and clamping), jvp, grad, vmap over every combination of
batched operand / update / indices (against a per-example loop and JAX), jit, check_grads, the
printed jaxpr and the errors. Mirrors the dynamic-slice parts of JAX's tests/lax_test.py,
lax_autodiff_test.py and lax_vmap_test.py.
"""

import itertools

import jax
import numpy as np
import pytest

import minijax
from minijax import core
from minijax.test_util import check_grads

RNG = np.random.default_rng(2)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
U22 = RNG.standard_normal((2, 2)).astype(np.float32)
STARTS = [(0, 0), (1, 2), (2, 3), (5, -3), (-1, 1), (-7, 9)]  # in range, clamped, negative


def assert_same(got, want, rtol=1e-6, atol=1e-6):
    g_leaves, _ = minijax.tree_util.tree_flatten(got)
    w_leaves, _ = jax.tree_util.tree_flatten(want)
    assert len(g_leaves) == len(w_leaves)
    for g, w in zip(g_leaves, w_leaves):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=rtol, atol=atol)


def check(program, *args):
    got = program(minijax)(*args)
    assert_same(got, program(jax)(*args))
    return got


def _ds(J):
    return lambda x, i, j: J.lax.dynamic_slice(x, (i, j), (2, 2))


def _dus(J):
    return lambda x, u, i, j: J.lax.dynamic_update_slice(x, u, (i, j))


# ---------------------------------------------------------------------------------------------
# Values: eager, jit, index wrapping and clamping
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("i,j", STARTS)
def test_dynamic_slice_and_update_values(i, j):
    check(lambda J: lambda x: _ds(J)(x, i, j), X34)
    check(lambda J: lambda x, u: _dus(J)(x, u, i, j), X34, U22)
    check(lambda J: lambda x: _ds(J)(x, np.int32(i), np.int32(j)), X34)


def test_jit_with_traced_indices():
    starts = np.array(STARTS, np.int32)
    check(lambda J: lambda x, s: [J.jit(_ds(J))(x, a, b) for a, b in s], X34, starts)
    check(lambda J: lambda x, u, s: [J.jit(_dus(J))(x, u, a, b) for a, b in s[:3]],
          X34, U22, starts)


@pytest.mark.parametrize("name,program", [
    ("slice_in_dim", lambda J: lambda x: J.lax.dynamic_slice_in_dim(x, -3, 2, axis=1)),
    ("index_in_dim", lambda J: lambda x: J.lax.dynamic_index_in_dim(x, 2, 0)),
    ("index_in_dim_nokeep", lambda J: lambda x: J.lax.dynamic_index_in_dim(x, -1, 1, False)),
    ("update_slice_in_dim", lambda J: lambda x: J.lax.dynamic_update_slice_in_dim(
        x, x[:, :2] * 2, 3, axis=1)),
    ("update_index_in_dim", lambda J: lambda x: J.lax.dynamic_update_index_in_dim(
        x, x[0] * 5, -1, 0)),
    ("traced_in_dim", lambda J: J.jit(lambda x, i: (
        J.lax.dynamic_index_in_dim(x, i, 1, keepdims=False),
        J.lax.dynamic_update_index_in_dim(x, x[:, 0], i, 1)))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_in_dim_wrappers(name, program):
    args = (X34, np.int32(-2)) if name == "traced_in_dim" else (X34,)
    check(program, *args)


def test_integer_and_bool_operands():
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(lambda J: J.jit(lambda x, i: _ds(J)(x, i, 1)), xi, np.int32(2))
    check(lambda J: J.jit(lambda x, i: _dus(J)(x, x[:2, :2] * 0, i, 1)), xi, np.int32(2))
    xb = xi % 3 == 0
    check(lambda J: J.vmap(lambda x, i: J.lax.dynamic_slice(x, (i,), (2,))), xb,
          np.array([0, 3, -1], np.int32))


# ---------------------------------------------------------------------------------------------
# Derivatives
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("i,j", STARTS[1:4])
def test_jvp_and_grad_match_jax(i, j):
    check(lambda J: lambda x, t: J.jvp(lambda a: _ds(J)(a, i, j), (x,), (t,)), X34, X34 * 3)
    check(lambda J: lambda x, u: J.jvp(lambda a, b: _dus(J)(a, b, i, j), (x, u), (u.sum() * x,
                                                                                u * 2)),
          X34, U22)
    check(lambda J: J.grad(lambda x, u: (_dus(J)(x, u, i, j) ** 2).sum()
                           + (_ds(J)(x, j, i) ** 3).sum(), (0, 1)), X34, U22)


def test_grad_with_traced_index_under_jit():
    check(lambda J: J.jit(J.grad(lambda x, u, i: (_dus(J)(x, u, i, 1) ** 2).sum()
                                 + (_ds(J)(x, 1, i) ** 3).sum(), (0, 1))),
          X34, U22, np.int32(-1))


def test_check_grads_order_2():
    check_grads(lambda x: _ds(minijax)(x, 1, 2) ** 2, (X34,), order=2)
    check_grads(lambda x, u: _dus(minijax)(x, u, 2, -1) ** 2, (X34, U22), order=2)


def test_transpose_rules_give_the_adjoint():
    """<ct, L t> == <L^T ct, t> for both primitives, through minijax.vjp (exact, linear)."""
    rng = np.random.default_rng(3)
    t_x, t_u = rng.standard_normal((3, 4)), rng.standard_normal((2, 2))
    for f, primals, ts in [(lambda x: _ds(minijax)(x, 2, 1), (X34,), (t_x,)),
                           (lambda x, u: _dus(minijax)(x, u, 1, 2), (X34, U22), (t_x, t_u))]:
        out, f_vjp = minijax.vjp(f, *primals)
        ct = rng.standard_normal(np.shape(out)).astype(np.float32)
        _, jvp_out = minijax.jvp(f, primals, tuple(t.astype(np.float32) for t in ts))
        lhs = np.sum(ct * np.asarray(jvp_out))
        rhs = sum(np.sum(np.asarray(c) * t) for c, t in zip(f_vjp(ct), ts))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Batching: every combination of batched operand / update / indices
# ---------------------------------------------------------------------------------------------

X234 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X342 = np.moveaxis(X234, 0, 2).copy()
U222 = RNG.standard_normal((2, 2, 2)).astype(np.float32)
I2 = np.array([2, -3], np.int32)
J2 = np.array([1, 7], np.int32)


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (None, None, 0),
                                     (0, 0, None), (0, 0, 0), (2, 0, None), (2, 0, 0)])
def test_vmap_dynamic_slice(in_axes):
    x = {None: X34, 0: X234, 2: X342}[in_axes[0]]
    i = I2 if in_axes[1] == 0 else np.int32(1)
    j = J2 if in_axes[2] == 0 else np.int32(-1)
    got = check(lambda J: J.vmap(_ds(J), (in_axes[0], in_axes[1], in_axes[2])), x, i, j)
    for b in range(2):
        take = lambda a, d, b=b: a if d is None else np.take(a, b, axis=d)
        want = _ds(minijax)(take(x, in_axes[0]), take(i, in_axes[1]), take(j, in_axes[2]))
        np.testing.assert_allclose(np.asarray(got)[b], want)


@pytest.mark.parametrize("in_axes", [
    dims for dims in itertools.product([None, 0], [None, 0], [None, 0], [None, 0])
    if any(d is not None for d in dims)])
def test_vmap_dynamic_update_slice(in_axes):
    args = [X234 if in_axes[0] == 0 else X34, U222 if in_axes[1] == 0 else U22,
            I2 if in_axes[2] == 0 else np.int32(-1), J2 if in_axes[3] == 0 else np.int32(1)]
    check(lambda J: J.vmap(_dus(J), in_axes), *args)


def test_vmap_grad_and_grad_vmap_with_batched_indices():
    check(lambda J: J.vmap(J.grad(lambda x, u, i: (_dus(J)(x, u, i, 1) ** 2).sum()
                                  + (_ds(J)(x, i, 2) ** 3).sum(), (0, 1)), (None, 0, 0)),
          X34, U222, I2)
    check(lambda J: J.grad(lambda x, u: J.vmap(_dus(J), (None, 0, 0, None))(
        x, u, I2, np.int32(1)).sum() ** 2, (0, 1)), X34, U222)


# ---------------------------------------------------------------------------------------------
# Indexing with a traced integer
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,index", [
    ("row", lambda x, i: x[i]), ("col", lambda x, i: x[:, i]),
    ("with_slice", lambda x, i: x[i, 1:]), ("reversed", lambda x, i: x[::-1, i]),
    ("newaxis", lambda x, i: x[None, i, ..., None]), ("both", lambda x, i: x[i, i]),
])
def test_traced_integer_indexing(name, index):
    idx = np.array([0, 2, -1, -3], np.int32)
    take = lambda J: lambda x, i: index(J.numpy.asarray(x), i)
    check(lambda J: lambda x: [J.jit(take(J))(x, i) for i in idx], X34)
    check(lambda J: J.vmap(take(J), (None, 0)), X34, idx[:3])
    check(lambda J: J.grad(lambda x, i: (take(J)(x, i) ** 2).sum()), X34, np.int32(-1))


def test_jaxpr_matches_jax():
    def f(J):
        return lambda x, i: J.lax.dynamic_slice(x, (i, 1), (2, 2))
    args = (X34, np.int32(1))
    assert str(minijax.make_jaxpr(f(minijax))(*args)) == str(jax.make_jaxpr(f(jax))(*args))
    for fun, a in [(f(minijax), args), (minijax.grad(lambda x, i: f(minijax)(x, i).sum()), args),
                   (minijax.vmap(f(minijax), (None, 0)), (X34, I2)),
                   (minijax.vmap(lambda x, u, i: _dus(minijax)(x, u, i, 0), (0, 0, 0)),
                    (X234, U222, I2))]:
        core.check_jaxpr(minijax.make_jaxpr(fun)(*a).jaxpr)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,program", [
    ("wrong_number_of_indices", lambda J: J.lax.dynamic_slice(X34, (1,), (2, 2))),
    ("slice_too_big", lambda J: J.lax.dynamic_slice(X34, (0, 0), (4, 2))),
    ("float_index", lambda J: J.lax.dynamic_slice(X34, (np.float32(1), 0), (2, 2))),
    ("update_rank", lambda J: J.lax.dynamic_update_slice(X34, U22[0], (0, 0))),
    ("update_dtype", lambda J: J.lax.dynamic_update_slice(X34, U22.astype(np.int32), (0, 0))),
    ("mixed_index_dtypes", lambda J: J.lax.dynamic_slice(X34, (np.int32(0), np.int8(1)),
                                                         (2, 2))),
    ("negative_not_allowed", lambda J: J.lax.dynamic_slice(X34, (-1, 0), (2, 2),
                                                           allow_negative_indices=False)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_errors_match_jax(name, program):
    with pytest.raises(Exception) as want:
        program(jax)
    with pytest.raises(want.type):
        program(minijax)
