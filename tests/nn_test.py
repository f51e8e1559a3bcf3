"""minijax.nn's activations and standardize against jax.nn: values, jit, grads (against
jax.grad and with `check_grads`) and vmap. Mirrors tests/nn_test.py in JAX.
"""

import jax
import numpy as np
import pytest

import minijax
from minijax.test_util import check_grads

RNG = np.random.RandomState(0)
X = np.asarray(RNG.randn(3, 5) * 3, np.float32)
# the kinks of relu6 (0 and 6) and large |x|, where naive formulas overflow
EDGES = np.asarray([-100.0, -6.0, 0.0, 1.5, 6.0, 7.0, 100.0], np.float32)

# name: fun(J, x), written once and run with J=jax and J=minijax
PROGRAMS = {
    "relu6": lambda J, x: J.nn.relu6(x),
    "silu": lambda J, x: J.nn.silu(x),
    "swish": lambda J, x: J.nn.swish(x),
    "softplus": lambda J, x: J.nn.softplus(x),
    "log_sigmoid": lambda J, x: J.nn.log_sigmoid(x),
    "gelu_exact": lambda J, x: J.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda J, x: J.nn.gelu(x, approximate=True),
    "standardize": lambda J, x: J.nn.standardize(x),
    "standardize_axis0_stable": lambda J, x: J.nn.standardize(x, axis=0, algorithm="stable"),
    "standardize_axes": lambda J, x: J.nn.standardize(x, axis=(0, 1), epsilon=1e-3),
    "standardize_given_stats": lambda J, x: J.nn.standardize(
        x, mean=np.float32(0.5), variance=np.float32(2.0)),
}
ELEMENTWISE = ["relu6", "silu", "swish", "softplus", "log_sigmoid", "gelu_exact", "gelu_tanh"]


def _close(got, want, tol=2e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_value_matches_jax(name):
    f = PROGRAMS[name]
    want = f(jax, X)
    _close(f(minijax, X), want)
    _close(minijax.jit(lambda x: f(minijax, x))(X), want)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_edges_match_jax(name):
    f = PROGRAMS[name]
    _close(f(minijax, EDGES), f(jax, EDGES))
    grad = lambda J: J.vmap(J.grad(lambda v: f(J, v)))(EDGES)
    _close(grad(minijax), grad(jax))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_grad_matches_jax(name):
    f = PROGRAMS[name]
    loss = lambda J: (lambda x: J.numpy.sum(f(J, x) * np.arange(5, dtype=np.float32)))
    _close(minijax.grad(loss(minijax))(X), jax.grad(loss(jax))(X), 1e-4)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_check_grads(name):
    # away from relu6's kinks, where finite differences straddle them
    x = np.asarray(RNG.uniform(0.3, 2.5, (2, 3)) * RNG.choice([-1, 1, 2.2], (2, 3)), np.float32)
    check_grads(lambda v: PROGRAMS[name](minijax, v), (x,), order=2, eps=1e-2, atol=5e-2,
                rtol=5e-2)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_matches_jax(name):
    f = PROGRAMS[name]
    xs = np.stack([X, 2 * X])
    _close(minijax.vmap(lambda x: f(minijax, x))(xs), jax.vmap(lambda x: f(jax, x))(xs))


def test_gelu_promotes_integers():
    x = np.arange(-3, 4, dtype=np.int32)
    for approximate in [True, False]:
        _close(minijax.nn.gelu(x, approximate), jax.nn.gelu(x, approximate))


def test_standardize_unknown_algorithm():
    with pytest.raises(ValueError, match="Unknown algorithm"):
        minijax.nn.standardize(X, algorithm="exact")
