"""Special functions as primitives: `erf`, `erfc` and `erf_inv`, `lgamma`, `digamma`,
`polygamma`, `zeta`, `bessel_i0e`/`bessel_i1e`, the incomplete gamma `igamma`/`igammac` (whose
derivative in `a` gives `random.gamma` its gradient) and the incomplete beta `betainc`.

`minijax.random.normal` is `sqrt(2) * erf_inv(u)` for uniform `u`, and `truncated_normal`
needs `erf` too. Under `jit` both lower to CHLO ops that XLA expands itself, as JAX lowers
them, so jitted samples match JAX bit for bit. The eager numpy impls follow the same
algorithms but are only guaranteed to a few ulp. Mirrors jax/_src/lax/special.py.
Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import math

import numpy as np

from minijax import core
from minijax.interpreters import mlir
from minijax.interpreters.ad import defjvp, instantiate_zeros, jvp_flat
from minijax.interpreters.batching import defbroadcasting, defvectorized
from minijax.lax.control_flow.loops import fori_loop
from minijax.lax.lax import (
    _broadcasting_shape,
    _const,
    _float,
    abs,
    add,
    bitwise_and,
    bitwise_or,
    broadcast_in_dim,
    convert_element_type,
    cos,
    div,
    eq,
    exp,
    floor,
    full_like,
    iota,
    le,
    log,
    log1p,
    lt,
    mul,
    naryop,
    neg,
    reduce_sum,
    rsqrt,
    select,
    sign,
    sin,
    square,
    sub,
    unop,
)
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
    # (NumPy results: dispatch types them by the abstract eval, weak for Python scalars)
    run = jit(lambda *xs: prim.bind(*xs))
    return lambda *xs: np.asarray(run(*xs))


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


def _bessel_scaled(x, order: int):
    """exp(-|x|) I_order(|x|) for order 0 or 1, from I_n(x) = 1/(2 pi) int_0^{2 pi}
    exp(x cos t) cos(n t) dt: the trapezoidal rule on 128 points (exact to rounding for a
    periodic analytic integrand, |x| <= 60), and Hankel's asymptotic series beyond."""
    ax = abs(x)
    n = 128
    t = mul(convert_element_type(iota(np.int32, n), x.dtype), _const(x, 2 * np.pi / n))
    small = select(lt(ax, _const(x, 60)), ax, full_like(ax, 60))
    dims = tuple(range(x.ndim))
    xs = broadcast_in_dim(small, (*x.shape, n), dims)
    ct = broadcast_in_dim(cos(t), (*x.shape, n), (x.ndim,))
    w = exp(mul(xs, sub(ct, _const(x, 1))))
    w = w if order == 0 else mul(w, ct)
    trapezoid = div(reduce_sum(w, (x.ndim,)), _const(x, n))
    big = select(lt(ax, _const(x, 60)), full_like(ax, 60), ax)
    # e^-x I_nu(x) ~ (2 pi x)^-1/2 sum_k c_k x^-k, c_k = c_{k-1} ((2k-1)^2 - 4 nu^2) / (8k)
    term, total = full_like(big, 1), full_like(big, 1)
    for k in range(1, 16):
        term = mul(term, div(_const(x, ((2 * k - 1) ** 2 - 4 * order ** 2) / (8 * k)), big))
        total = add(total, term)
    asym = mul(total, rsqrt(mul(big, _const(x, 2 * np.pi))))
    return select(lt(ax, _const(x, 60)), trapezoid, asym)


# JAX: jax/_src/lax/special.py bessel_i0e
def bessel_i0e(x):
    """Elementwise exponentially scaled modified Bessel function of order 0,
    exp(-|x|) I0(x) (float dtypes), differentiable: d/dx = i1e(x) - sign(x) i0e(x)."""
    return bessel_i0e_p.bind(x)


bessel_i0e_p = unop("bessel_i0e", _float, None)
bessel_i0e_p.def_impl(_through_xla(bessel_i0e_p))
defvectorized(bessel_i0e_p)
mlir.register_lowering(bessel_i0e_p, mlir.lower_fun(lambda x: _bessel_scaled(x, 0),
                                                    multiple_results=False))
defjvp(bessel_i0e_p, lambda g, x: mul(g, sub(bessel_i1e(x), mul(sign(x), bessel_i0e(x)))))


def _bessel_i1e_jvp(g, x):
    # d/dx i1e = i0e - i1e (sign(x) + 1/x); 1/2 at x = 0
    safe = select(eq(x, _const(x, 0)), full_like(x, 1), x)
    d = sub(bessel_i0e(x), mul(bessel_i1e(x), add(sign(safe), div(_const(x, 1), safe))))
    return mul(g, select(eq(x, _const(x, 0)), full_like(x, 0.5), d))


defjvp(bessel_i1e_p, _bessel_i1e_jvp)


# ---------------------------------------------------------------------------------------------
# igamma, igammac, igamma_grad_a, random_gamma_grad: the regularized incomplete gamma
# function, by its power series below x = a + 1 and Legendre's continued fraction above
# ---------------------------------------------------------------------------------------------

_IGAMMA_TERMS = 256  # enough for float32 for a up to a few thousand


def _igamma_series(a, x):
    # P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
    def body(i, state):
        term, total = state
        term = mul(term, div(x, add(a, convert_element_type(add(i, 1), a.dtype))))
        return term, add(total, term)
    one = full_like(x, 1)
    _, total = fori_loop(0, _IGAMMA_TERMS, body, (one, one))
    log_pre = sub(sub(mul(a, log(x)), x), lgamma(add(a, _const(a, 1))))
    return mul(exp(log_pre), total)


def _igammac_fraction(a, x):
    # Q(a, x) = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)),
    # evaluated by the modified Lentz method (Numerical Recipes, section 6.2)
    tiny = _const(x, float(np.finfo(x.dtype).tiny) * 16)
    b = add(sub(x, a), _const(x, 1))
    safe = lambda v: select(lt(abs(v), tiny), full_like(v, tiny), v)

    def body(i, state):
        b, c, d, h = state
        n = convert_element_type(add(i, 1), x.dtype)
        an = mul(neg(n), sub(n, a))
        b = add(b, _const(x, 2))
        d = div(_const(x, 1), safe(add(mul(an, d), b)))
        c = safe(add(b, div(an, c)))
        return b, c, d, mul(h, mul(d, c))
    d = div(_const(x, 1), safe(b))
    _, _, _, h = fori_loop(0, _IGAMMA_TERMS, body, (b, full_like(x, 1 / np.finfo(
        x.dtype).tiny / 16), d, d))
    return mul(exp(sub(sub(mul(a, log(x)), x), lgamma(a))), h)


def _same_shape(a, x):
    # lax broadcasting (rank 0, size-1 dims) made explicit, for the selects below
    avals = [core.get_aval(v) for v in (a, x)]
    shape = _broadcasting_shape("igamma", *avals)
    return [v if av.shape == shape else broadcast_in_dim(
        v, shape, tuple(range(len(shape))) if av.ndim else ()) for v, av in zip((a, x), avals)]


def _igamma_both(a, x):
    """(P, Q) by the expansion that converges there; NaN outside a > 0, x >= 0."""
    a, x = _same_shape(a, x)
    use_series = lt(x, add(a, _const(a, 1)))
    # each expansion is evaluated where it is used, at a harmless point elsewhere
    xs = select(use_series, x, full_like(x, 0.5))
    xf = select(use_series, add(a, full_like(a, 2)), x)
    pos = lt(_const(x, 0), x)
    p = select(use_series, _igamma_series(a, select(pos, xs, full_like(x, 0.5))),
               sub(_const(x, 1), _igammac_fraction(a, xf)))
    p = select(pos, p, full_like(p, 0))
    p = select(eq(x, _const(x, np.inf)), full_like(p, 1), p)
    bad = bitwise_or(le(a, _const(a, 0)), lt(x, _const(x, 0)))
    p = select(bad, full_like(p, np.nan), p)
    q = select(use_series, sub(_const(x, 1), p), _igammac_fraction(a, xf))
    q = select(bitwise_or(bad, eq(x, _const(x, np.inf))), sub(_const(x, 1), p), q)
    return p, q


def _igamma_dx(a, x):
    # dP/dx = x^(a-1) e^-x / Gamma(a)
    return exp(sub(sub(mul(sub(a, _const(a, 1)), log(x)), x), lgamma(a)))


def _igamma_grad_a_impl(a, x):
    # dP/da by forward-mode differentiation of the expansions (as JAX's DERIVATIVE mode)
    a, x = _same_shape(a, x)
    _, (t,) = jvp_flat(lambda v: [_igamma_both(v, x)[0]], [a], [full_like(a, 1)])
    return instantiate_zeros(t)


# JAX: jax/_src/lax/special.py igamma
def igamma(a, x):
    """Elementwise regularized lower incomplete gamma P(a, x) = gamma(a, x) / Gamma(a)
    (one float dtype); NaN for a <= 0 or x < 0. Differentiable in both."""
    return igamma_p.bind(a, x)


# JAX: jax/_src/lax/special.py igammac
def igammac(a, x):
    """Elementwise regularized upper incomplete gamma Q(a, x) = 1 - P(a, x)."""
    return igammac_p.bind(a, x)


# JAX: jax/_src/lax/special.py igamma_grad_a
def igamma_grad_a(a, x):
    """Elementwise dP(a, x)/da."""
    return igamma_grad_a_p.bind(a, x)


igamma_p = naryop("igamma", _float, None)
igamma_p.def_impl(_through_xla(igamma_p))
defjvp(igamma_p, lambda g, a, x: mul(g, igamma_grad_a(a, x)),
       lambda g, a, x: mul(g, _igamma_dx(a, x)))
defbroadcasting(igamma_p)
mlir.register_lowering(igamma_p, mlir.lower_fun(lambda a, x: _igamma_both(a, x)[0],
                                                multiple_results=False))

igammac_p = naryop("igammac", _float, None)
igammac_p.def_impl(_through_xla(igammac_p))
defjvp(igammac_p, lambda g, a, x: neg(mul(g, igamma_grad_a(a, x))),
       lambda g, a, x: neg(mul(g, _igamma_dx(a, x))))
defbroadcasting(igammac_p)
mlir.register_lowering(igammac_p, mlir.lower_fun(lambda a, x: _igamma_both(a, x)[1],
                                                 multiple_results=False))

igamma_grad_a_p = naryop("igamma_grad_a", _float, None)
igamma_grad_a_p.def_impl(_through_xla(igamma_grad_a_p))
defbroadcasting(igamma_grad_a_p)
mlir.register_lowering(igamma_grad_a_p, mlir.lower_fun(_igamma_grad_a_impl,
                                                       multiple_results=False))


# JAX: jax/_src/lax/special.py random_gamma_grad
def random_gamma_grad(a, x, *, dtype=None):
    """d x / d a for a Gamma(a) sample x, holding its CDF P(a, x) fixed (implicit
    reparameterization): -(dP/da) / (dP/dx). What `grad` of `random.gamma` uses."""
    return neg(div(igamma_grad_a(a, x), _igamma_dx(a, x)))


# ---------------------------------------------------------------------------------------------
# betainc: the regularized incomplete beta function, by its continued fraction
# ---------------------------------------------------------------------------------------------

_BETAINC_TERMS = 300


def _betainc_fraction(a, b, x):
    # I_x(a, b) = x^a (1-x)^b / (a B(a, b)) / (1 + d_1 / (1 + d_2 / (1 + ...))), evaluated
    # from its tail (300 levels); d_2m = m (b-m) x / ((a+2m-1)(a+2m)),
    # d_2m+1 = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)) (Numerical Recipes, section 6.4)
    def body(i, t):
        k = convert_element_type(sub(_BETAINC_TERMS, i), x.dtype)  # k = n, n-1, ..., 1
        m = floor(mul(k, _const(x, 0.5)))  # k = 2m or 2m + 1
        den = mul(add(a, sub(k, _const(x, 1))), add(a, k))
        d_even = div(mul(mul(m, sub(b, m)), x), den)
        d_odd = neg(div(mul(mul(add(a, m), add(add(a, b), m)), x), den))
        d = select(eq(k, add(m, m)), d_even, d_odd)
        return add(_const(x, 1), div(d, t))
    t = fori_loop(0, _BETAINC_TERMS, body, full_like(x, 1))
    lbeta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    front = exp(sub(add(mul(a, log(x)), mul(b, log1p(neg(x)))), lbeta))
    return div(div(front, a), t)


def _betainc_impl(a, b, x):
    a, b = _same_shape(a, b)
    a, x = _same_shape(a, x)
    b, x = _same_shape(b, x)
    # the fraction converges fast for x < (a+1)/(a+b+2); above, I_x(a,b) = 1 - I_{1-x}(b,a)
    flip = lt(div(add(a, _const(a, 1)), add(add(a, b), _const(a, 2))), x)
    inside = bitwise_and(lt(_const(x, 0), x), lt(x, _const(x, 1)))
    xs = select(inside, x, full_like(x, 0.5))
    direct = _betainc_fraction(a, b, select(flip, full_like(x, 0.25), xs))
    flipped = sub(_const(x, 1), _betainc_fraction(b, a, sub(_const(x, 1),
                                                            select(flip, xs, full_like(x, 0.75)))))
    out = select(flip, flipped, direct)
    out = select(eq(x, _const(x, 0)), full_like(x, 0), out)
    out = select(eq(x, _const(x, 1)), full_like(x, 1), out)
    bad = bitwise_or(bitwise_or(le(a, _const(a, 0)), le(b, _const(b, 0))),
                     bitwise_or(lt(x, _const(x, 0)), lt(_const(x, 1), x)))
    return select(bad, full_like(x, np.nan), out)


# JAX: jax/_src/lax/special.py betainc
def betainc(a, b, x):
    """Elementwise regularized incomplete beta I_x(a, b) = B(x; a, b) / B(a, b) (one float
    dtype, broadcasting as lax's binary ops); NaN outside a > 0, b > 0, 0 <= x <= 1.
    Differentiable in x; the derivative in a or b raises ValueError, as JAX's."""
    return regularized_incomplete_beta_p.bind(a, b, x)


def _betainc_grad_ab(g, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


def _betainc_dx(g, a, b, x):
    lbeta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    return mul(g, exp(sub(add(mul(sub(b, _const(b, 1)), log1p(neg(x))),
                              mul(sub(a, _const(a, 1)), log(x))), lbeta)))


regularized_incomplete_beta_p = naryop("regularized_incomplete_beta", _float, None)
regularized_incomplete_beta_p.def_impl(_through_xla(regularized_incomplete_beta_p))
defjvp(regularized_incomplete_beta_p, _betainc_grad_ab, _betainc_grad_ab, _betainc_dx)
defbroadcasting(regularized_incomplete_beta_p)
mlir.register_lowering(regularized_incomplete_beta_p,
                       mlir.lower_fun(_betainc_impl, multiple_results=False))
