"""Tests for minijax/numpy/linalg.py (`norm`, `vector_norm`) against real JAX, including the
gradient at zero, and for the gradient semantics of `jnp.where` that norm-like code relies on
(a NaN in the branch `where` does not select still reaches the gradient, as in JAX).

Mirrors the norm tests of JAX's tests/linalg_test.py.
"""

import jax
import numpy as np
import pytest

import minijax

RNG = np.random.default_rng(4)
V3 = np.array([1.0, -2.0, 0.0], np.float32)
M22 = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
X234 = (RNG.standard_normal((2, 3, 4)) * 3).astype(np.float32)


def check(program, *args, rtol=1e-5):
    got = program(minijax)(*args)
    want = program(jax)(*args)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-6,
                               equal_nan=True)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, -1, 0.5])
def test_vector_norm(ord):
    check(lambda J: lambda v: J.numpy.linalg.norm(v, ord=ord), V3)
    check(lambda J: lambda x: J.numpy.linalg.norm(x, ord=ord, axis=-1, keepdims=True), X234)
    check(lambda J: lambda x: J.numpy.linalg.vector_norm(x, ord=ord, axis=0), X234)


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("axis", [None, (0, 2), (2, 1)])
def test_matrix_norm(ord, axis):
    x = M22 if axis is None else X234
    check(lambda J: lambda a: J.numpy.linalg.norm(a, ord=ord, axis=axis), x)
    check(lambda J: lambda a: J.numpy.linalg.norm(a, ord=ord, axis=axis, keepdims=True), x)


def test_norm_any_rank_and_integers():
    check(lambda J: J.numpy.linalg.norm, X234)
    check(lambda J: J.numpy.linalg.norm, np.arange(5, dtype=np.int32))


@pytest.mark.parametrize("ord", [None, 1, np.inf, 3])
@pytest.mark.parametrize("at_zero", [False, True], ids=["nonzero", "zero"])
def test_norm_gradient_matches_jax(ord, at_zero):
    v = np.zeros(3, np.float32) if at_zero else V3
    check(lambda J: J.grad(lambda x: J.numpy.linalg.norm(x, ord=ord)), v)


def test_norm_gradient_at_zero_is_nan_like_jax():
    g = minijax.grad(minijax.numpy.linalg.norm)(np.zeros(3, np.float32))
    assert np.all(np.isnan(np.asarray(g)))


def test_norm_under_jit_and_vmap():
    check(lambda J: J.jit(J.vmap(lambda x: J.numpy.linalg.norm(x, axis=1))), X234)


def test_norm_errors_match_jax():
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(V3, ord="fro")
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(X234, ord=1, axis=(0, 1, 2))
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(M22, ord="bad")
    with pytest.raises(NotImplementedError, match="singular value"):
        minijax.numpy.linalg.norm(M22, ord="nuc")


@pytest.mark.parametrize("x", [0.0, 4.0, -1.0])
def test_where_gradient_semantics_match_jax(x):
    # sqrt'(0) = inf; the unselected branch's inf * 0 cotangent gives NaN in JAX, and here
    def program(J):
        jnp = J.numpy
        return J.grad(lambda a: jnp.where(a > 0, jnp.sqrt(a), 0.0))
    check(program, np.float32(x))

    def safe(J):  # the "double where" trick keeps the gradient finite, in both
        jnp = J.numpy
        return J.grad(lambda a: jnp.where(a > 0, jnp.sqrt(jnp.where(a > 0, a, 1.0)), 0.0))
    check(safe, np.float32(x))
