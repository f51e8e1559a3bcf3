"""Inputs and the comparison that the lax_numpy_*_test.py files share (not a test file).

`check(program)` runs `program(J)` with `J=minijax` and (under `jax.jit`) `J=jax` and compares
values, shapes, dtypes and weak types with `assert_same`.
"""

import jax
import numpy as np

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
            wide = np.complex128 if np.iscomplexobj(w) else np.float64  # keep imaginary parts
            np.testing.assert_allclose(np.asarray(g, wide), np.asarray(w, wide),
                                       rtol=rtol, atol=atol)


def check(program, rtol=1e-5, atol=1e-6, jit=True):
    want = jax.jit(lambda: program(jax))() if jit else program(jax)
    assert_same(program(minijax), want, rtol=rtol, atol=atol)


jnp = lambda J: J.numpy


def check_raises(program):
    """`program(J)` raises under both modules, minijax with JAX's exception type (or a
    subclass of it)."""
    errors = []
    for J in (jax, minijax):
        try:
            program(J)
        except Exception as e:
            errors.append(e)
        else:
            errors.append(None)
    want, got = errors
    assert want is not None, "JAX does not raise"
    assert got is not None, f"minijax does not raise (JAX: {type(want).__name__}: {want})"
    assert isinstance(got, type(want)), (type(got), type(want), got)


def check_grad(f, x, rtol=1e-4, atol=1e-5):
    """`grad` of the program `f(J, x)` under minijax against JAX's."""
    got = minijax.grad(lambda x: f(minijax, x))(x)
    want = jax.grad(lambda x: f(jax, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def check_jit_and_vmap(f):
    """The program `f(J, x)` under jit (a traced f32[4,3] input) and under vmap (over a
    leading batch of 2), minijax against JAX."""
    x = A3[0].T[:3]
    assert_same(minijax.jit(lambda x: f(minijax, x))(x), jax.jit(lambda x: f(jax, x))(x))
    xs = A3.transpose(0, 2, 1)[:, :3]
    assert_same(minijax.vmap(lambda x: f(minijax, x))(xs), jax.vmap(lambda x: f(jax, x))(xs))
