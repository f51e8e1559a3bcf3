"""Polynomials as coefficient arrays, highest power first: `polyval`, arithmetic (`polyadd`,
`polysub`, `polymul`, `polydiv`), calculus (`polyder`, `polyint`), `poly` (from roots),
`roots` (Aberth's iteration: minijax has no general eigensolver for the companion matrix
JAX uses) and least-squares `polyfit`. Mirrors jax/_src/numpy/polynomial.py.
"""

from __future__ import annotations

import math

import numpy as np

from minijax import dtypes, lax
from minijax.lax.control_flow import fori_loop
from minijax.numpy import indexing, lax_numpy, linalg, reductions, ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    dtype_of,
    is_floating,
    promote_args_inexact,
    promote_dtypes,
    shape_of,
)


def _vector(name: str, p):
    p = asarray(p)
    if p.ndim != 1:
        raise ValueError(f"jnp.{name}: expected a 1-D coefficient array, got shape "
                         f"{shape_of(p)}")
    return p


def polyval(p, x, *, unroll: int = 16):
    """The polynomial with coefficients `p` (highest power first; more dimensions of p
    broadcast against x) at `x`, by Horner's rule."""
    p, x = asarray(p), asarray(x)
    shape = np.broadcast_shapes(shape_of(p)[1:], shape_of(x))
    y = lax.full(shape, 0, dtype_of(x))
    for i in range(shape_of(p)[0]):
        y = ufuncs.add(ufuncs.multiply(y, x), indexing.rewriting_take(p, i))
    return y


def _align(a1, a2):
    """Both coefficient vectors zero-padded at the front to the same length."""
    n = max(shape_of(a1)[0], shape_of(a2)[0])
    return (lax_numpy.pad(a1, [(n - shape_of(a1)[0], 0)]),
            lax_numpy.pad(a2, [(n - shape_of(a2)[0], 0)]))


def polyadd(a1, a2):
    """The coefficients of the sum of two polynomials (promoted dtype)."""
    a1, a2 = promote_dtypes(_vector("polyadd", a1), _vector("polyadd", a2))
    return ufuncs.add(*_align(a1, a2))


def polysub(a1, a2):
    """The coefficients of a1 - a2."""
    a1, a2 = promote_dtypes(_vector("polysub", a1), _vector("polysub", a2))
    return ufuncs.subtract(*_align(a1, a2))


def _trim_leading(p):
    return lax_numpy.trim_zeros(p, "f")


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The coefficients of the product (a full convolution); `trim_leading_zeros` needs
    concrete inputs."""
    a1, a2 = promote_dtypes(_vector("polymul", a1), _vector("polymul", a2))
    if trim_leading_zeros:
        a1, a2 = _trim_leading(a1), _trim_leading(a2)
    if shape_of(a1)[0] == 0:
        a1 = lax.full((1,), 0, dtype_of(a1))
    if shape_of(a2)[0] == 0:
        a2 = lax.full((1,), 0, dtype_of(a2))
    return lax_numpy.convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """(quotient, remainder) of u / v by long division (float dtype); the remainder keeps
    u's length (leading zeros), or is trimmed with `trim_leading_zeros` (concrete input)."""
    u, v = promote_args_inexact("polydiv", _vector("polydiv", u), _vector("polydiv", v))
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    lead = indexing.rewriting_take(v, 0)
    q = lax.full((max(m - n + 1, 1),), 0, dtype_of(u))
    r = u
    for k in range(m - n + 1):
        d = ufuncs.divide(indexing.rewriting_take(r, k), lead)
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(ufuncs.negative(ufuncs.multiply(d, v)))
    return q, (_trim_leading(r) if trim_leading_zeros else r)


def polyder(p, m: int = 1):
    """The coefficients of the m-th derivative (float dtype)."""
    (p,) = promote_args_inexact("polyder", _vector("polyder", p))
    if m < 0:
        raise ValueError("jnp.polyder: order of derivative must be nonnegative")
    n = shape_of(p)[0]
    if m == 0:
        return p
    if m >= n:
        return lax.full((0,), 0, dtype_of(p))
    powers = np.arange(n - 1, m - 1, -1)
    factor = np.array([math.perm(int(k), m) for k in powers], np.float64)
    return ufuncs.multiply(lax_numpy.slice_axis(p, 0, 0, n - m),
                           factor.astype(dtype_of(p)))


def polyint(p, m: int = 1, k=None):
    """The coefficients of the m-th antiderivative, with integration constants `k` (a scalar,
    or m of them, the first for the first integration; default 0). Float dtype."""
    if m < 0:
        raise ValueError("jnp.polyint: order of integral must be nonnegative")
    k = 0 if k is None else k
    p, k = promote_args_inexact("polyint", _vector("polyint", p), k)
    ks = lax_numpy.broadcast_to(lax_numpy.ravel(k), (m,)) if lax_numpy.ndim(k) == 0 or \
        shape_of(k) == (1,) else k
    if shape_of(ks) != (m,):
        raise ValueError("jnp.polyint: k must be a scalar or a rank-1 array of length m")
    for i in range(m):
        n = shape_of(p)[0]
        p = lax_numpy.concatenate([ufuncs.divide(p, np.arange(n, 0, -1).astype(dtype_of(p))),
                                   lax.reshape(indexing.rewriting_take(ks, i), (1,))], 0)
    return p


def poly(seq_of_zeros):
    """The monic polynomial with the given (1-D) roots: the product of (x - r). A 2-D
    (matrix) argument, whose characteristic polynomial NumPy returns, raises
    NotImplementedError: it needs a general eigensolver."""
    (z,) = promote_args_inexact("poly", asarray(seq_of_zeros))
    if z.ndim == 2 and shape_of(z)[0] == shape_of(z)[1] and shape_of(z)[0]:
        raise NotImplementedError("jnp.poly of a matrix needs its eigenvalues; minijax has no "
                                  "general (non-symmetric) eigensolver")
    if z.ndim != 1:
        raise ValueError(f"jnp.poly: input must be 1-D or a square 2-D array, got "
                         f"{shape_of(z)}")
    out_ = lax.full((1,), 1, dtype_of(z))
    for i in range(shape_of(z)[0]):
        factor = lax_numpy.stack([lax.full((), 1, dtype_of(z)),
                                  ufuncs.negative(indexing.rewriting_take(z, i))])
        out_ = lax_numpy.convolve(out_, factor, mode="full")
    return out_


_ROOT_STEPS = 100


def roots(p, *, strip_zeros: bool = True):
    """The complex roots of the polynomial `p` (c64[len(p) - 1], in no particular order), by
    Aberth's simultaneous iteration (a fixed 100 steps from a circle of starting points: it
    converges cubically to simple roots, slowly to repeated ones). `strip_zeros` drops
    leading zero coefficients (needs a concrete `p`)."""
    p = _vector("roots", p)
    if strip_zeros:
        p = _trim_leading(p)
    (p,) = promote_args_inexact("roots", p)
    n = shape_of(p)[0] - 1
    cdtype = np.complex128 if dtype_of(p) in (np.float64, np.complex128) else np.complex64
    if n < 1:
        return lax.full((0,), 0, cdtype)
    p = lax.convert_element_type(p, cdtype)
    p = ufuncs.divide(p, indexing.rewriting_take(p, 0))
    dp = polyder(p)
    radius = 1 + reductions.max(ufuncs.abs(lax_numpy.slice_axis(p, 0, 1, n + 1)))
    angles = 2 * np.pi * np.arange(n) / n + 0.4
    z0 = ufuncs.multiply(lax.convert_element_type(radius, cdtype),
                         np.exp(1j * angles).astype(cdtype))
    off_diagonal = ~np.eye(n, dtype=bool)

    def step(_, z):
        w = ufuncs.divide(polyval(p, z), polyval(dp, z))
        diff = ufuncs.subtract(z[:, None], z[None, :])
        inv = lax_numpy.where(off_diagonal, ufuncs.divide(1, lax_numpy.where(off_diagonal, diff,
                                                                               1)), 0)
        s = reductions.sum(inv, axis=1)
        z_new = ufuncs.subtract(z, ufuncs.divide(w, ufuncs.subtract(1, ufuncs.multiply(w, s))))
        return lax_numpy.where(ufuncs.isfinite(z_new), z_new, z)

    return fori_loop(0, _ROOT_STEPS, step, z0)


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through (x, y) (`T[deg + 1]`, or
    `T[deg + 1, k]` for 2-D y), by an SVD of the column-scaled Vandermonde matrix; singular
    values below `rcond` times the largest are dropped (default len(x) * eps). With `full`:
    also (residuals, rank, singular values, rcond). `w` weights the residuals. Raises
    ValueError for a negative degree or mismatched lengths; `cov` is not supported."""
    x, y = promote_dtypes(asarray(x), asarray(y))
    if not is_floating(x):
        x, y = (lax.convert_element_type(v, dtypes.default_float_dtype()) for v in (x, y))
    if deg < 0:
        raise ValueError("jnp.polyfit: expected deg >= 0")
    if x.ndim != 1 or y.ndim not in (1, 2) or shape_of(x)[0] != shape_of(y)[0]:
        raise ValueError(f"jnp.polyfit: expected 1-D x and 1-D or 2-D y of the same length, "
                         f"got {shape_of(x)} and {shape_of(y)}")
    if cov:
        raise NotImplementedError("jnp.polyfit: cov=True is not supported in minijax")
    rcond = shape_of(x)[0] * float(np.finfo(dtype_of(x)).eps) if rcond is None else rcond
    lhs, rhs = lax_numpy.vander(x, deg + 1), y
    if w is not None:
        (w,) = promote_dtypes(asarray(w))
        lhs = ufuncs.multiply(lhs, w[:, None])
        rhs = ufuncs.multiply(rhs, w if y.ndim == 1 else w[:, None])
    scale = ufuncs.sqrt(reductions.sum(ufuncs.multiply(lhs, lhs), axis=0))
    lhs = ufuncs.divide(lhs, scale)
    u, s, vt = linalg.svd(lhs, full_matrices=False)
    keep = s > rcond * reductions.max(s)
    s_inv = lax_numpy.where(keep, ufuncs.divide(1, lax_numpy.where(keep, s, 1)), 0)
    rhs2 = rhs if y.ndim == 2 else rhs[:, None]
    c = vt.T @ (s_inv[:, None] * (u.T @ rhs2))
    c = ufuncs.divide(c, scale[:, None])
    c = c if y.ndim == 2 else c[:, 0]
    if not full:
        return c
    resid = reductions.sum(ufuncs.square(lax_numpy.vander(x, deg + 1) @ c - y), axis=0)
    return c, resid, reductions.sum(keep, dtype=np.int32), s, asarray(rcond, dtype_of(x))
