"""Special functions as primitives: `erf` and its inverse `erf_inv`.

`minijax.random.normal` is `sqrt(2) * erf_inv(u)` for uniform `u`, and `truncated_normal`
needs `erf` too. Under `jit` both lower to CHLO ops that XLA expands itself, as JAX lowers
them, so jitted samples match JAX bit for bit. The eager numpy impls follow the same
algorithms but are only guaranteed to a few ulp. Mirrors jax/_src/lax/special.py.
Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import math

import numpy as np

from minijax.interpreters import mlir
from minijax.interpreters.ad import defjvp
from minijax.interpreters.batching import defvectorized
from minijax.lax.lax import _const, exp, mul, neg, square, unop

_erf_f64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf_impl(x):
    return _erf_f64(x).astype(x.dtype)


def erf(x):
    """Elementwise error function 2/sqrt(pi) * integral_0^x exp(-t**2) dt (float dtypes)."""
    return erf_p.bind(x)


erf_p = unop("erf", "float", _erf_impl)
defjvp(erf_p, lambda g, x: mul(g, mul(_const(x, 2 / np.sqrt(np.pi)), exp(neg(square(x))))))
defvectorized(erf_p)
mlir.register_lowering(erf_p, lambda ctx, x: mlir.chlo.erf(x))


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2010): single-precision
# polynomials in w = -log(1 - x**2), one for the centre (w < 5) and one for the tails. XLA's
# expansion of chlo.erf_inv for f32 uses these coefficients, evaluated by Horner's rule.
_GILES_CENTRE = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_giles(x: np.ndarray) -> np.ndarray:
    w = -np.log1p(-x * x)
    centre = w < 5
    t = np.where(centre, w - x.dtype.type(2.5), np.sqrt(w) - x.dtype.type(3))
    coeffs = [np.where(centre, x.dtype.type(a), x.dtype.type(b))
              for a, b in zip(_GILES_CENTRE, _GILES_TAIL)]
    p = coeffs[0]
    for c in coeffs[1:]:
        p = p * t + c
    return np.where(np.abs(x) == 1, x * np.inf, p * x)


def _erf_inv_impl(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype == np.float64:
            # float64 needs more than single-precision coefficients: two Newton steps on erf
            y = _erf_inv_giles(x)
            for _ in range(2):
                step = (_erf_f64(y) - x) / (2 / np.sqrt(np.pi) * np.exp(-y * y))
                y = np.where(np.isfinite(y), y - step, y)
            return y
        return _erf_inv_giles(x.astype(np.float32)).astype(x.dtype)


def erf_inv(x):
    """Elementwise inverse of `erf` on [-1, 1] (float dtypes); +-1 give +-inf."""
    return erf_inv_p.bind(x)


erf_inv_p = unop("erf_inv", "float", _erf_inv_impl)
defjvp(erf_inv_p, lambda g, x: mul(g, mul(_const(x, np.sqrt(np.pi) / 2),
                                          exp(square(erf_inv(x))))))
defvectorized(erf_inv_p)
mlir.register_lowering(erf_inv_p, lambda ctx, x: mlir.chlo.erf_inv(x))
