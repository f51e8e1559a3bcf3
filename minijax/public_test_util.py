"""Numerical checks of derivatives: `check_grads`, `check_jvp`, `check_vjp`.

`check_jvp` compares `jvp` with central finite differences along a random direction;
`check_vjp` checks the transposition identity <vjp(ct), t> == <ct, jvp(t)>. `check_grads`
applies both recursively up to `order`. Mirrors jax/_src/public_test_util.py.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from minijax import api, core, dtypes

_DEFAULT_EPS = {np.dtype(np.float16): 1e-2, dtypes.bfloat16: 1e-1,
                np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-5}
_DEFAULT_TOL = {np.dtype(np.float16): 1e-1, dtypes.bfloat16: 1e-1,
                np.dtype(np.float32): 2e-2, np.dtype(np.float64): 1e-5}


def _dtype(args) -> np.dtype:
    leaves = [core.get_aval(a).dtype for a in api.tree_flatten(args)[0]]
    return np.dtype(dtypes.result_type(*leaves)) if leaves else np.dtype(np.float32)


def _rand_like(rng: np.random.RandomState, tree):
    """Standard normal values shaped like each leaf of `tree` (args may be pytrees, as in JAX)."""
    def leaf(x):
        aval = core.get_aval(x)
        out = rng.randn(*aval.shape)
        if aval.dtype.kind == "c":
            out = out + 1j * rng.randn(*aval.shape)
        return np.asarray(out, dtype=aval.dtype)
    return api.tree_map(leaf, tree)


def _rand_tangents(rng: np.random.RandomState, args) -> list:
    """A random tangent for every leaf of every argument (arguments may be pytrees)."""
    return api.tree_map(lambda a: _rand_like(rng, a), list(args))


# JAX: jax/_src/public_test_util.py inner_prod — the real inner product re(<x, y>), so that
# the vjp check holds for complex values too
def _inner(xs, ys) -> float:
    total = 0.0
    for x, y in zip(api.tree_flatten(xs)[0], api.tree_flatten(ys)[0]):
        x, y = np.asarray(x, np.complex128), np.asarray(y, np.complex128)
        total += float(np.real(np.sum(np.conj(x) * y)))
    return total


def _assert_close(got, want, atol, rtol, what: str) -> None:
    for g, w in zip(api.tree_flatten(got)[0], api.tree_flatten(want)[0]):
        g, w = _wide(g), _wide(w)
        if not np.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            raise AssertionError(f"{what}: max abs error {np.max(np.abs(g - w)):.3g} exceeds "
                                 f"atol={atol}, rtol={rtol}\n got: {g}\nwant: {w}")


def _wide(x) -> np.ndarray:
    """`x` in float64, or complex128 for complex values."""
    return np.asarray(x, np.complex128 if np.asarray(x).dtype.kind == "c" else np.float64)


def _scaled_add(xs, ts, eps):
    return api.tree_map(lambda x, t: np.asarray(_wide(x) + eps * _wide(t), core.get_aval(x).dtype),
                        list(xs), list(ts))


# JAX: jax/_src/public_test_util.py check_jvp
def check_jvp(f: Callable, f_jvp: Callable, args: Sequence, atol=None, rtol=None, eps=None,
              rng=None) -> None:
    """Raise AssertionError unless `f_jvp(args, tangents)` matches central differences."""
    rng = rng or np.random.RandomState(0)
    d = _dtype(args)
    eps = eps or _DEFAULT_EPS.get(d, 1e-3)
    atol = atol or _DEFAULT_TOL.get(d, 1e-2)
    rtol = rtol or atol
    tangents = _rand_tangents(rng, args)
    _, t_out = f_jvp(args, tangents)
    plus = f(*_scaled_add(args, tangents, eps))
    minus = f(*_scaled_add(args, tangents, -eps))
    fd = api.tree_map(lambda p, m: (_wide(p) - _wide(m)) / (2 * eps), plus, minus)
    _assert_close(t_out, fd, atol, rtol, "JVP vs finite differences")


# JAX: jax/_src/public_test_util.py check_vjp
def check_vjp(f: Callable, f_vjp: Callable, args: Sequence, atol=None, rtol=None, eps=None,
              rng=None) -> None:
    """Raise AssertionError unless <vjp(ct), t> equals <ct, jvp(t)> (jvp by differences)."""
    rng = rng or np.random.RandomState(1)
    d = _dtype(args)
    eps = eps or _DEFAULT_EPS.get(d, 1e-3)
    atol = atol or _DEFAULT_TOL.get(d, 1e-2)
    rtol = rtol or atol
    out, vjp_fn = f_vjp(*args)
    tangents = _rand_tangents(rng, args)
    cts = api.tree_map(lambda o: _rand_like(rng, o), out)
    # conj(vjp(conj(ct))), as JAX checks it: the identity below then holds for complex values
    ct_in = api.tree_map(np.conj, vjp_fn(api.tree_map(np.conj, cts)))
    plus = f(*_scaled_add(args, tangents, eps))
    minus = f(*_scaled_add(args, tangents, -eps))
    fd = api.tree_map(lambda p, m: (_wide(p) - _wide(m)) / (2 * eps), plus, minus)
    lhs = _inner(ct_in, tangents)
    rhs = _inner(cts, fd)
    _assert_close(lhs, rhs, atol, rtol, "VJP inner product vs finite differences")


# JAX: jax/_src/public_test_util.py check_grads
def check_grads(f: Callable, args: Sequence, order: int, modes=("fwd", "rev"), atol=None,
                rtol=None, eps=None) -> None:
    """Check forward ("fwd") and reverse ("rev") derivatives of `f` at `args` numerically,
    recursively up to `order` (2 checks the derivatives of the derivatives too).

    Raises AssertionError with the largest error on a mismatch.
    """
    args = tuple(args)

    def _check(f, args, order):
        if "fwd" in modes:
            check_jvp(f, lambda a, t: api.jvp(f, a, t), args, atol, rtol, eps)
            if order > 1:
                rng = np.random.RandomState(2)
                ts = _rand_tangents(rng, args)
                _check(lambda *a: api.jvp(f, a, ts)[1], args, order - 1)
        if "rev" in modes:
            check_vjp(f, lambda *a: api.vjp(f, *a), args, atol, rtol, eps)
            if order > 1:
                rng = np.random.RandomState(3)
                out = f(*args)
                cts = api.tree_map(lambda o: _rand_like(rng, o), out)
                _check(lambda *a: api.vjp(f, *a)[1](cts), args, order - 1)

    _check(f, args, order)
