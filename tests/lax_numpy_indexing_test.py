"""Indexing functions (minijax/numpy/indexing.py: take and its modes) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest

import minijax
from lax_numpy_test_util import A, A3, I, assert_same, check, jnp

CASES = {
    "take": lambda J: jnp(J).take(A, np.array([2, 0, -1, 7])),
    "take_axis": lambda J: jnp(J).take(A3, np.array([[0, 3], [1, 1]]), axis=2),
    "take_clip": lambda J: jnp(J).take(A, np.array([5, -7]), axis=0, mode="clip"),
    "take_wrap": lambda J: jnp(J).take(A, np.array([5, -7]), axis=1, mode="wrap"),
    "take_fill_int": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1),
    "take_fill_value": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1, fill_value=-1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


GRADS = {
    "take": (lambda J, x: (jnp(J).take(x, np.array([1, 1, 4]), axis=1) ** 2).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    f, x = GRADS[name]
    got = minijax.grad(lambda x: f(minijax, x))(x)
    want = jax.grad(lambda x: f(jax, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "take": lambda J, x: jnp(J).take(x, np.array([0, 2, 9]), axis=1),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    f = JIT_VMAP[name]
    x = A3[0].T[:3]
    assert_same(minijax.jit(lambda x: f(minijax, x))(x), jax.jit(lambda x: f(jax, x))(x))
    xs = A3.transpose(0, 2, 1)[:, :3]
    assert_same(minijax.vmap(lambda x: f(minijax, x))(xs), jax.vmap(lambda x: f(jax, x))(xs))
