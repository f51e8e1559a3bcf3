"""Special functions as primitives: `erf`, `erfc` and `erf_inv`, `lgamma`, `digamma`,
`polygamma`, `zeta`, `bessel_i1e`.

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
from minijax.interpreters.batching import defbroadcasting, defvectorized
from minijax.lax.lax import (_const, _float, add, div, exp, full_like, lt, mul, naryop, neg,
                             select, sin, square, sub, unop)
from minijax.pjit import jit

_erf_f64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf_impl(x):
    return _erf_f64(x).astype(x.dtype)


def erf(x):
    """Elementwise error function 2/sqrt(pi) * integral_0^x exp(-t**2) dt (float dtypes)."""
    return erf_p.bind(x)


erf_p = unop("erf", _float, _erf_impl)
defjvp(erf_p, lambda g, x: mul(g, mul(_const(x, 2 / np.sqrt(np.pi)), exp(neg(square(x))))))
defvectorized(erf_p)
mlir.register_lowering(erf_p, lambda ctx, x: mlir.chlo.erf(x))

_erfc_f64 = np.vectorize(math.erfc, otypes=[np.float64])


def _erfc_impl(x):
    return _erfc_f64(x).astype(x.dtype)


def erfc(x):
    """Elementwise complementary error function 1 - erf(x), accurate where erf(x) is near 1
    (`scipy.special.ndtr` needs it in the lower tail)."""
    return erfc_p.bind(x)


# JAX: jax/_src/lax/special.py erfc_p
erfc_p = unop("erfc", _float, _erfc_impl)
defjvp(erfc_p, lambda g, x: mul(g, mul(_const(x, -2 / np.sqrt(np.pi)), exp(neg(square(x))))))
defvectorized(erfc_p)
mlir.register_lowering(erfc_p, lambda ctx, x: mlir.chlo.erfc(x))


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


erf_inv_p = unop("erf_inv", _float, _erf_inv_impl)
defjvp(erf_inv_p, lambda g, x: mul(g, mul(_const(x, np.sqrt(np.pi) / 2),
                                          exp(square(erf_inv(x))))))
defvectorized(erf_inv_p)
mlir.register_lowering(erf_inv_p, lambda ctx, x: mlir.chlo.erf_inv(x))


# ---------------------------------------------------------------------------------------------
# lgamma and digamma
# ---------------------------------------------------------------------------------------------

def _lgamma_f64(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole: 0, -1, -2, ...
        return math.inf


_lgamma_vec = np.vectorize(_lgamma_f64, otypes=[np.float64])


def _lgamma_impl(x):
    return _lgamma_vec(x).astype(x.dtype)


def lgamma(x):
    """Elementwise log|Gamma(x)| (float dtypes); +inf at the poles 0, -1, -2, ..."""
    return lgamma_p.bind(x)


lgamma_p = unop("lgamma", _float, _lgamma_impl)
defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
defvectorized(lgamma_p)
mlir.register_lowering(lgamma_p, lambda ctx, x: mlir.chlo.lgamma(x))


def _digamma_f64(x: np.ndarray) -> np.ndarray:
    # psi(x) = psi(x + 6) - sum_{k<6} 1/(x + k), then the asymptotic series at x + 6; for
    # x < 0.5 the reflection psi(x) = psi(1 - x) - pi / tan(pi x). NaN at the poles, as XLA.
    reflect = x < 0.5
    z = np.where(reflect, 1 - x, x)
    acc = np.zeros_like(z)
    for k in range(6):
        acc -= 1 / (z + k)
    z = z + 6
    z2 = 1 / (z * z)
    series = z2 * (1 / 12 - z2 * (1 / 120 - z2 * (1 / 252 - z2 * (1 / 240 - z2 / 132))))
    psi = acc + np.log(z) - 0.5 / z - series
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(reflect, psi - np.pi / np.tan(np.pi * x), psi)
        return np.where((x <= 0) & (x == np.floor(x)), np.nan, psi)


def _digamma_impl(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _digamma_f64(np.asarray(x, np.float64)).astype(x.dtype)


def _trigamma(x):
    # psi'(x) from lax ops (JAX uses polygamma(1, x), a primitive minijax lacks): the same
    # shift-and-series as digamma, psi'(z) ~ 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + ...,
    # and the reflection psi'(x) = pi^2 / sin(pi x)^2 - psi'(1 - x) for x < 0.5
    reflect = lt(x, _const(x, 0.5))
    z = select(reflect, sub(_const(x, 1), x), x)
    acc = full_like(x, 0)
    for k in range(6):
        acc = add(acc, div(_const(x, 1), square(add(z, _const(x, k)))))
    z = add(z, _const(x, 6))
    r = div(_const(x, 1), z)
    r2 = square(r)
    inner = add(_const(x, 1 / 6), mul(r2, add(_const(x, -1 / 30), mul(r2, add(
        _const(x, 1 / 42), mul(r2, _const(x, -1 / 30)))))))
    tail = mul(r, add(_const(x, 1), mul(r, add(_const(x, 0.5), mul(r, inner)))))
    direct = add(acc, tail)
    pi = _const(x, np.pi)
    reflected = sub(div(square(pi), square(sin(mul(pi, x)))), direct)
    return select(reflect, reflected, direct)


def digamma(x):
    """Elementwise psi(x) = d/dx log Gamma(x) (float dtypes); NaN at 0, -1, -2, ..."""
    return digamma_p.bind(x)


digamma_p = unop("digamma", _float, _digamma_impl)
defjvp(digamma_p, lambda g, x: mul(g, _trigamma(x)))
defvectorized(digamma_p)
mlir.register_lowering(digamma_p, lambda ctx, x: mlir.chlo.digamma(x))


# ---------------------------------------------------------------------------------------------
# polygamma, zeta, bessel_i1e: CHLO ops XLA expands; eagerly compiled and run by XLA too
# ---------------------------------------------------------------------------------------------

def _through_xla(prim):
    # no NumPy version of these here: the eager impl compiles the primitive alone, so eager
    # values are XLA's, as under jit (and as JAX's, which runs every eager op this way)
    run = jit(lambda *xs: prim.bind(*xs))
    return lambda *xs: run(*xs)


def _chlo_lowering(op_name: str):
    def rule(ctx, *args):
        out = ctx.avals_out[0]
        args = [mlir.broadcast_to(a, av, av.update(shape=out.shape))
                for a, av in zip(args, ctx.avals_in)]
        return getattr(mlir.chlo, op_name)(*args)
    rule.__name__ = f"_{op_name}_lowering"
    return rule


# JAX: jax/_src/lax/special.py polygamma
def polygamma(m, x):
    """Elementwise psi^(m)(x), the m-th derivative of digamma (one float dtype; m a
    non-negative integer value). Differentiable in x only."""
    return polygamma_p.bind(m, x)


def _polygamma_jvp_m(g, m, x):
    raise ValueError("polygamma: the derivative in m is not defined (m is an integer)")


polygamma_p = naryop("polygamma", _float, None)
polygamma_p.def_impl(_through_xla(polygamma_p))
defjvp(polygamma_p, _polygamma_jvp_m,
       lambda g, m, x: mul(g, polygamma(add(m, _const(m, 1)), x)))
defbroadcasting(polygamma_p)
mlir.register_lowering(polygamma_p, _chlo_lowering("polygamma"))


# JAX: jax/_src/lax/special.py zeta
def zeta(x, q):
    """Elementwise Hurwitz zeta sum_{k>=0} (k + q) ** -x (one float dtype). Differentiable
    in q: d/dq = -x zeta(x + 1, q)."""
    return zeta_p.bind(x, q)


def _zeta_jvp_x(g, x, q):
    raise ValueError("zeta: the derivative in x is not implemented (as in JAX)")


zeta_p = naryop("zeta", _float, None)
zeta_p.def_impl(_through_xla(zeta_p))
defjvp(zeta_p, _zeta_jvp_x, lambda g, x, q: mul(g, mul(neg(x), zeta(add(x, _const(x, 1)),
                                                                    q))))
defbroadcasting(zeta_p)
mlir.register_lowering(zeta_p, _chlo_lowering("zeta"))


# JAX: jax/_src/lax/special.py bessel_i1e
def bessel_i1e(x):
    """Elementwise exponentially scaled modified Bessel function of order 1,
    exp(-|x|) I1(x) (float dtypes). No derivative in minijax (JAX's needs bessel_i0e)."""
    return bessel_i1e_p.bind(x)


bessel_i1e_p = unop("bessel_i1e", _float, None)
bessel_i1e_p.def_impl(_through_xla(bessel_i1e_p))
defvectorized(bessel_i1e_p)
mlir.register_lowering(bessel_i1e_p, _chlo_lowering("bessel_i1e"))
