"""Window functions: `bartlett`, `blackman`, `hamming`, `hanning`, `kaiser`.

Each takes a static window length M (a Python int, or a concrete array; a tracer raises
ConcretizationTypeError) and returns `f32[M]` (the default float dtype): 1 for M == 1, empty
for M <= 0. Mirrors jax/_src/numpy/window_functions.py.
"""

from __future__ import annotations

import numpy as np

from minijax import core, dtypes, lax
from minijax.numpy import lax_numpy, ufuncs
from minijax.numpy.util import concrete_or_none


def _length(M, name: str) -> int:
    value = concrete_or_none(M, name)
    if value is None:
        raise core.ConcretizationTypeError(
            f"jnp.{name}: the window length M must be concrete (a Python int), got "
            f"{core.get_aval(M).str_short()} under a transformation")
    return int(value)


def _cosine_window(name: str, M, coefficients: tuple[float, ...]):
    """sum_k (-1)^k a_k cos(2 pi k n / (M - 1)) for n in [0, M): the generalized cosine
    window with coefficients a_k."""
    M = _length(M, name)
    dtype = dtypes.default_float_dtype()
    if M <= 1:
        return lax.full((max(M, 0),), 1, dtype)
    n = lax.iota(dtype, M)
    out = lax.full((M,), coefficients[0], dtype)
    for k, a in enumerate(coefficients[1:], 1):
        out = out + (-1) ** k * a * ufuncs.cos(2 * k * np.pi * n / (M - 1))
    return out


def hanning(M):
    """The Hann window 0.5 - 0.5 cos(2 pi n / (M - 1)), `f32[M]` (jax.numpy.hanning)."""
    return _cosine_window("hanning", M, (0.5, 0.5))


def hamming(M):
    """The Hamming window 0.54 - 0.46 cos(2 pi n / (M - 1)), `f32[M]`."""
    return _cosine_window("hamming", M, (0.54, 0.46))


def blackman(M):
    """The Blackman window 0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))."""
    return _cosine_window("blackman", M, (0.42, 0.5, 0.08))


def bartlett(M):
    """The triangular window 1 - |2n / (M - 1) - 1|, `f32[M]` (0 at both ends)."""
    M = _length(M, "bartlett")
    dtype = dtypes.default_float_dtype()
    if M <= 1:
        return lax.full((max(M, 0),), 1, dtype)
    n = lax.iota(dtype, M)
    return 1 - ufuncs.abs(2 * n / (M - 1) - 1)


def kaiser(M, beta):
    """The Kaiser window i0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / i0(beta), `f32[M]`;
    `beta` may be traced (the window is differentiable in it)."""
    M = _length(M, "kaiser")
    dtype = dtypes.default_float_dtype()
    if M <= 1:
        return lax.full((max(M, 0),), 1, dtype)
    n = lax.iota(dtype, M)
    r = 2 * n / (M - 1) - 1
    beta = lax_numpy.asarray(beta, dtype)
    return lax_numpy.i0(beta * ufuncs.sqrt(1 - r * r)) / lax_numpy.i0(beta)
