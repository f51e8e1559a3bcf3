"""Tests for minijax/scipy/: `scipy.special` and `scipy.stats.norm` against jax.scipy.

One program, two modules: each case runs with `J=jax` and `J=minijax`; JAX gives the expected
values and dtypes; gradients are checked against JAX's too.
"""

import jax
import jax.scipy.special
import jax.scipy.stats
import numpy as np
import pytest

import minijax
import minijax.scipy.special
import minijax.scipy.stats

# Slow (CI runs it, `make test-fast` does not): special functions and their gradients against JAX.
pytestmark = pytest.mark.slow

RNG = np.random.default_rng(0)
X = np.linspace(-4, 4, 17).astype(np.float32)
P = np.array([0, 1e-30, 1e-8, 0.01, 0.1, 0.3, 0.5, 0.8, 0.9, 0.999, 1, 1.5, -0.5], np.float32)
A = RNG.standard_normal((3, 4)).astype(np.float32)


def _same(got, want, rtol=2e-6, atol=1e-6):
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


CASES = [
    ("erf", (X,)), ("erfc", (X,)), ("erfinv", (P * 0.99,)), ("gammaln", (np.abs(X) + 0.25,)),
    ("digamma", (np.abs(X) + 0.25,)), ("expit", (X,)), ("logit", (P,)), ("ndtri", (P,)),
    ("ndtr", (X,)), ("ndtr", (np.float32([-12, -8, -5, 5, 8]),)),
    ("xlogy", (np.array([0, 0, 1, 2, 0], np.float32),
               np.array([0, 3, 2, 3, np.nan], np.float32))),
    ("xlog1py", (np.array([0, 0, 1, 2], np.float32), np.array([-1, 3, 2, 3], np.float32))),
    ("erf", (np.arange(3),)), ("expit", (2,)),  # ints and Python scalars promote to float
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_special_values(name, args):
    with np.errstate(all="ignore"):
        got = getattr(minijax.scipy.special, name)(*args)
    _same(got, getattr(jax.scipy.special, name)(*args), rtol=1e-5)


@pytest.mark.parametrize("kwargs", [
    {}, {"axis": 1}, {"axis": (0, 1), "keepdims": True}, {"axis": 0, "b": A},
    {"axis": 1, "b": A, "return_sign": True}, {"axis": -1, "where": A > 0},
    {"axis": 0, "b": np.float32(2.0), "keepdims": True},
])
def test_logsumexp(kwargs):
    got = minijax.scipy.special.logsumexp(A, **kwargs)
    want = jax.scipy.special.logsumexp(A, **kwargs)
    for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want))):
        _same(g, w)


def test_logsumexp_infinities_and_grad():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [1e30, 1e30]], np.float32)
    _same(minijax.scipy.special.logsumexp(x, axis=1), jax.scipy.special.logsumexp(x, axis=1))
    _same(minijax.grad(minijax.scipy.special.logsumexp)(A),
          jax.grad(jax.scipy.special.logsumexp)(A))


@pytest.mark.parametrize("name", ["xlogy", "logit"])
def test_custom_jvps_match(name):
    # xlogy's derivative at x == 0 and logit's are custom rules in JAX
    args = (np.float32(0.0), np.float32(2.0)) if name == "xlogy" else (np.float32(0.3),)
    for argnums in range(len(args)):
        got = minijax.grad(getattr(minijax.scipy.special, name), argnums)(*args)
        want = jax.grad(getattr(jax.scipy.special, name), argnums)(*args)
        _same(got, want)


@pytest.mark.parametrize("name", ["pdf", "logpdf", "cdf", "logcdf", "sf", "ppf"])
def test_norm(name):
    arg = P if name == "ppf" else X
    for extra in [(), (1.0, 2.0), (np.float32(-0.5),)]:
        got = getattr(minijax.scipy.stats.norm, name)(arg, *extra)
        want = getattr(jax.scipy.stats.norm, name)(arg, *extra)
        _same(got, want, rtol=1e-5)


def test_norm_grad_and_jit():
    f = lambda J: (lambda x: J.scipy.stats.norm.logpdf(x, 0.5, 2.0).sum()
                   + J.scipy.stats.norm.cdf(x).sum())
    _same(minijax.jit(minijax.grad(f(minijax)))(X), jax.grad(f(jax))(X), rtol=1e-5)


def test_bad_dtype_raises_like_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.scipy.special.ndtri(np.arange(3))
