"""Special functions of `scipy.special`, written on minijax.numpy and lax.

`logsumexp` (mirrors jax/_src/ops/special.py), `erf`, `erfc`, `erfinv`, `gammaln`, `digamma`,
`xlogy`, `xlog1py`, `expit`, `logit`, `ndtr`, `ndtri`, `log_ndtr`; the gamma family (`gamma`,
`gammasgn`, `loggamma`, `beta`, `betaln`, `betainc`, `gammainc`, `gammaincc`, `factorial`,
`comb`, `poch`, `multigammaln`, `polygamma`, `zeta`, `bernoulli`); Bessel (`i0`, `i0e`, `i1`,
`i1e`); entropies (`entr`, `rel_entr`, `kl_div`), `boxcox`, `boxcox1p`, `softmax`,
`log_softmax` (mirror jax/_src/scipy/special.py). The functions evaluated by series,
continued fractions and quadrature (`erfcx`, `dawsn`, `expi`, `exp1`, `expn`, `sici`,
`fresnel`, `spence`, `owens_t`, `hyp1f1`, `hyp2f1`, `bessel_jn`) are in
minijax/scipy/special_expansions.py. Integer inputs are promoted to the default float dtype,
as in JAX.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from minijax import lax, numpy as jnp
from minijax.custom_derivatives import custom_jvp
from minijax.lax import special as lax_special
from minijax.numpy.util import promote_args_inexact


def _const(x, value):
    return np.asarray(value, jnp.result_type(x))


# JAX: jax/_src/ops/special.py logsumexp — one function for jax.nn and jax.scipy.special, as
# in JAX: minijax/nn/__init__.py: logsumexp
from minijax.nn import (  # noqa: E402
    log_softmax as _nn_log_softmax,
    logsumexp,  # noqa: F401
    softmax as _nn_softmax,
)


# JAX: jax/_src/scipy/special.py erf
def erf(x):
    """The error function, elementwise: f32[...] -> f32[...] (`lax.erf`)."""
    (x,) = promote_args_inexact("erf", x)
    return lax_special.erf(x)


# JAX: jax/_src/scipy/special.py erfc
def erfc(x):
    """The complementary error function 1 - erf(x), elementwise (`lax.erfc`)."""
    (x,) = promote_args_inexact("erfc", x)
    return lax_special.erfc(x)


# JAX: jax/_src/scipy/special.py erfinv
def erfinv(x):
    """The inverse error function on (-1, 1), elementwise (`lax.erf_inv`)."""
    (x,) = promote_args_inexact("erfinv", x)
    return lax_special.erf_inv(x)


# JAX: jax/_src/scipy/special.py gammaln
def gammaln(x):
    """`log|Gamma(x)|`, elementwise (`lax.lgamma`)."""
    (x,) = promote_args_inexact("gammaln", x)
    return lax_special.lgamma(x)


# JAX: jax/_src/scipy/special.py digamma
def digamma(x):
    """The derivative of gammaln, elementwise (`lax.digamma`)."""
    (x,) = promote_args_inexact("digamma", x)
    return lax_special.digamma(x)


# JAX: jax/_src/scipy/special.py expit
def expit(x):
    """The logistic sigmoid `1 / (1 + exp(-x))`, elementwise (`lax.logistic`)."""
    (x,) = promote_args_inexact("expit", x)
    return lax.logistic(x)


# JAX: jax/_src/scipy/special.py logit
@custom_jvp
def logit(x):
    """`log(x / (1 - x))`, the inverse of expit; its derivative is `1 / (x (1 - x))`."""
    (x,) = promote_args_inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(_const(x, 1), x)))


logit.defjvps(lambda g, ans, x: lax.div(g, lax.mul(x, lax.sub(_const(x, 1), x))))


# JAX: jax/_src/scipy/special.py xlogy
@custom_jvp
def xlogy(x, y):
    """`x * log(y)`, and 0 where `x == 0` (unless y is NaN), with a derivative defined there."""
    x, y = promote_args_inexact("xlogy", x, y)
    return jnp.where((x != 0) | jnp.isnan(y), lax.mul(x, lax.log(y)), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlogy(x, y)
    return out, (x_dot * jnp.log(y) + y_dot * x / y).astype(out.dtype)


# JAX: jax/_src/scipy/special.py xlog1py
@custom_jvp
def xlog1py(x, y):
    """`x * log1p(y)`, and 0 where `x == 0` (unless y is NaN)."""
    x, y = promote_args_inexact("xlog1py", x, y)
    return jnp.where((x != 0) | jnp.isnan(y), lax.mul(x, lax.log1p(y)), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlog1py(x, y)
    return out, (x_dot * jnp.log1p(y) + y_dot * x / (1 + y)).astype(out.dtype)


def _check_ndtr_dtype(name: str, x):
    if jnp.result_type(x) not in (np.float32, np.float64):
        raise TypeError(f"{name}: x.dtype={jnp.result_type(x)} is not supported; expected "
                        "float32 or float64")


# JAX: jax/_src/scipy/special.py ndtr
def ndtr(x):
    """The standard normal CDF, elementwise: f32[...] -> f32[...]; erfc in the tails, where
    1 + erf would lose the digits. TypeError for non-float inputs."""
    x = jnp.asarray(x)
    _check_ndtr_dtype("ndtr", x)
    half_sqrt_2 = _const(x, np.sqrt(0.5))
    w = x * half_sqrt_2
    z = jnp.abs(w)
    y = jnp.where(z < half_sqrt_2, _const(x, 1) + lax_special.erf(w),
                  jnp.where(w > 0, _const(x, 2) - lax_special.erfc(z), lax_special.erfc(z)))
    return _const(x, 0.5) * y


def _polyval(coeffs, x):
    out = jnp.zeros_like(x)
    for c in coeffs:  # Horner's rule, highest power first
        out = out * x + _const(x, c)
    return out


# Cephes' rational approximations of ndtri (the same constants as JAX's _ndtri, published in
# the Cephes library, ndtri.c): P0/Q0 for the centre, P1/Q1 and P2/Q2 for the two tail ranges.
_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
       1.39312609387279679503E1, -1.23916583867381258016E0)
_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
       -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
       1.59056225126211695515E1, -1.18331621121330003142E0)
_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
       4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
       -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
       1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
       -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
       1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
       3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
       2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
       2.89247864745380683936E-6, 6.79019408009981274425E-9)


# JAX: jax/_src/scipy/special.py ndtri
def ndtri(p):
    """The inverse of ndtr (the standard normal quantile), elementwise on [0, 1]: -inf at 0,
    inf at 1, NaN outside. TypeError for non-float inputs."""
    p = jnp.asarray(p)
    _check_ndtr_dtype("ndtri", p)
    c = lambda v: _const(p, v)
    # Work with the smaller of p and 1 - p; the sign is restored at the end.
    q = jnp.where(p > c(-np.expm1(-2.0)), c(1) - p, p)
    q = jnp.where(q == c(0), c(0.5), q)  # keeps log() finite; p == 0 is handled below
    w = q - c(0.5)
    ww = w * w
    x_centre = (w + w * ww * (_polyval(_P0, ww) / _polyval(_Q0, ww))) * -c(np.sqrt(2 * np.pi))
    z = jnp.sqrt(c(-2.0) * jnp.log(q))
    first = z - jnp.log(z) / z
    x_far = first - _polyval(_P2, 1 / z) / _polyval(_Q2, 1 / z) / z
    x_near = first - _polyval(_P1, 1 / z) / _polyval(_Q1, 1 / z) / z
    x = jnp.where(q > c(np.exp(-2.0)), x_centre, jnp.where(z >= c(8.0), x_far, x_near))
    x = jnp.where(p > c(1 - np.exp(-2.0)), x, -x)
    return jnp.where(p == c(0), c(-np.inf), jnp.where(p == c(1), c(np.inf), x))



def _real_only(name: str, x):
    if jnp.iscomplexobj(x):
        raise ValueError(f"{name} does not support complex-valued inputs.")


# JAX: jax/_src/scipy/special.py gammasgn
def gammasgn(x):
    """The sign of Gamma(x), elementwise: 1 or -1; NaN at the poles (0, -1, ...) and NaN;
    -1 at -0.0. ValueError for complex inputs."""
    (x,) = promote_args_inexact("gammasgn", x)
    _real_only("gammasgn", x)
    floor_x = jnp.floor(x)
    neg = x < 0
    nan_at = (neg & (x == floor_x)) | jnp.isnan(x)
    minus = (neg & (floor_x % 2 != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(nan_at, _const(x, np.nan), jnp.where(minus, _const(x, -1), _const(x, 1)))


# JAX: jax/_src/scipy/special.py gamma
def gamma(x):
    """Gamma(x) for real x, elementwise: gammasgn(x) * exp(lgamma(x))."""
    (x,) = promote_args_inexact("gamma", x)
    _real_only("gamma", x)
    return gammasgn(x) * lax.exp(lax_special.lgamma(x))


# JAX: jax/_src/scipy/special.py loggamma
def loggamma(x):
    """log Gamma(x) for real x > 0, elementwise; NaN for x <= 0 (the principal branch of the
    complex function is not implemented: ValueError for complex inputs)."""
    (x,) = promote_args_inexact("loggamma", x)
    _real_only("loggamma", x)
    return jnp.where(x > 0, lax_special.lgamma(x), _const(x, np.nan))


# JAX: jax/_src/scipy/special.py betaln
def betaln(a, b):
    """log|B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b), elementwise, broadcasting."""
    a, b = promote_args_inexact("betaln", a, b)
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    return lax_special.lgamma(lo) + (lax_special.lgamma(hi) - lax_special.lgamma(lo + hi))


# JAX: jax/_src/scipy/special.py beta
def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), elementwise, with its sign."""
    a, b = promote_args_inexact("beta", a, b)
    _real_only("beta", a)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * lax.exp(betaln(a, b))


# JAX: jax/_src/scipy/special.py betainc
def betainc(a, b, x):
    """The regularized incomplete beta I_x(a, b), elementwise (`lax.betainc`)."""
    a, b, x = promote_args_inexact("betainc", a, b, x)
    return lax_special.betainc(a, b, x)


# JAX: jax/_src/scipy/special.py gammainc
def gammainc(a, x):
    """The regularized lower incomplete gamma P(a, x), elementwise (`lax.igamma`)."""
    a, x = promote_args_inexact("gammainc", a, x)
    return lax_special.igamma(a, x)


# JAX: jax/_src/scipy/special.py gammaincc
def gammaincc(a, x):
    """The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x) (`lax.igammac`)."""
    a, x = promote_args_inexact("gammaincc", a, x)
    return lax_special.igammac(a, x)


# JAX: jax/_src/scipy/special.py factorial
def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) as floats, 0 for n < 0. `exact=True` raises NotImplementedError."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    (n,) = promote_args_inexact("factorial", n)
    return jnp.where(n < 0, _const(n, 0), lax.exp(lax_special.lgamma(n + 1)))


# JAX: jax/_src/scipy/special.py comb
def comb(N, k, *, repetition: bool = False):
    """The binomial coefficient C(N, k) as floats (exp of gammaln), 0 outside 0 <= k <= N;
    with `repetition`, C(N + k - 1, k)."""
    N, k = promote_args_inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), _const(N, 1), comb(N + k - 1, k))
    ok = (k <= N) & (N >= 0) & (k >= 0)
    sN, sk = jnp.where(ok, N, _const(N, 0)), jnp.where(ok, k, _const(k, 0))
    out = lax.exp(gammaln(sN + 1) - gammaln(sk + 1) - gammaln(sN + 1 - sk))
    return jnp.where(ok, out, _const(out, 0))


# JAX: jax/_src/scipy/special.py poch
@custom_jvp
def poch(z, m):
    """The rising factorial (z)_m = Gamma(z + m) / Gamma(z), elementwise (1 where m == 0)."""
    z, m = promote_args_inexact("poch", z, m)
    _real_only("poch", z)
    return jnp.where(m == 0, _const(z, 1), gamma(z + m) / gamma(z))


@poch.defjvp
def _poch_jvp(primals, tangents):
    (z, m), (z_dot, m_dot) = primals, tangents
    out = poch(z, m)
    dz = out * (digamma(z + m) - digamma(z))
    dm = out * digamma(z + m)
    return out, (z_dot * dz + m_dot * dm).astype(out.dtype)


# JAX: jax/_src/scipy/special.py multigammaln
def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension `d` (a concrete integer):
    d (d - 1) / 4 log(pi) + sum_{j<d} gammaln(a - j / 2), elementwise in `a`."""
    d = operator.index(d)  # a tracer: ConcretizationTypeError
    a, d_ = promote_args_inexact("multigammaln", a, d)
    constant = 0.25 * d_ * (d_ - 1) * lax.log(_const(a, np.pi))
    b = jnp.arange(d, dtype=d_.dtype) / _const(a, 2)
    res = jnp.sum(gammaln(jnp.expand_dims(a, -1) - b), axis=-1)
    return res + constant


# JAX: jax/_src/scipy/special.py polygamma
def polygamma(n, x):
    """psi^(n)(x), the n-th derivative of digamma (`lax.polygamma`); `n` must have an integer
    dtype (ValueError otherwise, or for complex x)."""
    if not jnp.issubdtype(jnp.result_type(n), np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{jnp.result_type(n)}.")
    n, x = promote_args_inexact("polygamma", n, x)
    _real_only("polygamma", x)
    return lax_special.polygamma(n, x)


# JAX: jax/_src/scipy/special.py zeta
def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x (`lax.zeta`); `q=None` (Riemann's) raises
    NotImplementedError, as JAX's."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = promote_args_inexact("zeta", x, q)
    return lax_special.zeta(x, q)


# JAX: jax/_src/scipy/special.py bernoulli
def bernoulli(n: int):
    """The Bernoulli numbers B_0 ... B_n (B_1 = -1/2) as a float array of length n + 1: the
    odd ones past B_1 are 0, the even ones 2 (2k)! / (2 pi)^2k zeta(2k) with the sign
    alternating, the zeta sum taken to 50 terms. ValueError for a negative `n`."""
    n = operator.index(n)  # a tracer: ConcretizationTypeError
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    first = jnp.array([1.0, -0.5, 1 / 6])
    if n < 3:
        return first[:n + 1]
    m = jnp.arange(4, n + 1, 2, dtype=first.dtype)
    # B_m / B_{m-2} ~ -(m-1) m / (2 pi)^2, times the zeta(m) correction
    ratio = jnp.cumprod(-(m - 1) * m / (4 * np.pi ** 2)) / np.pi ** 2
    k = jnp.arange(2, 50, dtype=first.dtype)
    zeta_tail = jnp.sum(k[:, None] ** -m[None, :], axis=0)
    return jnp.zeros(n + 1).at[:3].set(first).at[4::2].set(ratio * (1 + zeta_tail))


# JAX: jax/_src/scipy/special.py i0e
def i0e(x):
    """exp(-|x|) I0(x), elementwise (`lax.bessel_i0e`)."""
    (x,) = promote_args_inexact("i0e", x)
    return lax_special.bessel_i0e(x)


# JAX: jax/_src/scipy/special.py i0
def i0(x):
    """The modified Bessel function of order 0, elementwise: exp(|x|) i0e(x)."""
    (x,) = promote_args_inexact("i0", x)
    return lax.exp(lax.abs(x)) * lax_special.bessel_i0e(x)


# JAX: jax/_src/scipy/special.py i1e
def i1e(x):
    """exp(-|x|) I1(x), elementwise (`lax.bessel_i1e`)."""
    (x,) = promote_args_inexact("i1e", x)
    return lax_special.bessel_i1e(x)


# JAX: jax/_src/scipy/special.py i1
def i1(x):
    """The modified Bessel function of order 1, elementwise: exp(|x|) i1e(x)."""
    (x,) = promote_args_inexact("i1", x)
    return lax.exp(lax.abs(x)) * lax_special.bessel_i1e(x)


def _xlogx(x):
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(jnp.where(x == 0, 1, x)))


# JAX: jax/_src/scipy/special.py entr
def entr(x):
    """-x log(x) elementwise; 0 at 0, -inf for x < 0."""
    (x,) = promote_args_inexact("entr", x)
    _real_only("entr", x)
    return jnp.where(x < 0, _const(x, -np.inf), -_xlogx(x))


# JAX: jax/_src/scipy/special.py rel_entr
def rel_entr(p, q):
    """p log(p / q) where both are positive, 0 where p == 0 <= q, inf elsewhere."""
    p, q = promote_args_inexact("rel_entr", p, q)
    _real_only("rel_entr", p)
    both = (p > 0) & (q > 0)
    sp, sq = jnp.where(both, p, 1), jnp.where(both, q, 1)
    val = _xlogx(sp) - xlogy(sp, sq)
    return jnp.where(both, val, jnp.where((p == 0) & (q >= 0), _const(p, 0), _const(p, np.inf)))


# JAX: jax/_src/scipy/special.py kl_div
def kl_div(p, q):
    """rel_entr(p, q) - p + q, elementwise."""
    p, q = promote_args_inexact("kl_div", p, q)
    _real_only("kl_div", p)
    return rel_entr(p, q) - p + q


def _boxcox(name, log_fn, x, lmbda):
    x, lmbda = promote_args_inexact(name, x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    lx = log_fn(x)
    return jnp.where(zero, lx, jnp.expm1(safe * lx) / safe)


# JAX: jax/_src/scipy/special.py boxcox
def boxcox(x, lmbda):
    """The Box-Cox transform (x^lmbda - 1) / lmbda, log(x) where lmbda == 0."""
    return _boxcox("boxcox", jnp.log, x, lmbda)


# JAX: jax/_src/scipy/special.py boxcox1p
def boxcox1p(x, lmbda):
    """The Box-Cox transform of 1 + x: ((1 + x)^lmbda - 1) / lmbda, log1p(x) at lmbda == 0."""
    return _boxcox("boxcox1p", jnp.log1p, x, lmbda)


# JAX: jax/_src/scipy/special.py softmax
def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (every axis by default, unlike `nn.softmax`)."""
    return _nn_softmax(x, axis=axis)


# JAX: jax/_src/scipy/special.py log_softmax
def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over `axis` (every axis by default, unlike `nn.log_softmax`)."""
    return _nn_log_softmax(x, axis=axis)


# float32 and float64 bounds of log_ndtr's three pieces, JAX's
_LOG_NDTR_BOUNDS = {np.dtype(np.float32): (-10.0, 5.0), np.dtype(np.float64): (-20.0, 8.0)}


# JAX: jax/_src/scipy/special.py log_ndtr
@functools.partial(custom_jvp, nondiff_argnums=(1,))
def log_ndtr(x, series_order: int = 3):
    """log of the standard normal CDF, elementwise, accurate in both tails: -ndtr(-x) above
    the upper bound (5 in float32, 8 in float64), log(ndtr(x)) between, and the asymptotic
    series of log(ndtr) with `series_order` terms below the lower bound (-10, -20).
    TypeError for a non-int `series_order` or non-float x; ValueError outside 0..30."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = jnp.asarray(x)
    if x.dtype not in _LOG_NDTR_BOUNDS:
        raise TypeError(f"x.dtype={x.dtype} is not supported.")
    lower, upper = _LOG_NDTR_BOUNDS[x.dtype]
    return jnp.where(x > upper, -ndtr(-x),
                     jnp.where(x > lower, jnp.log(ndtr(jnp.maximum(x, lower))),
                               _log_ndtr_lower(jnp.minimum(x, lower), series_order)))


def _log_ndtr_lower(x, series_order):
    # log ndtr(x) = -x^2/2 - log(-x) - log(2 pi)/2 + log(1 + sum_n (-1)^n (2n-1)!! / x^2n)
    x_2 = jnp.square(x)
    log_scale = -0.5 * x_2 - jnp.log(-x) - _const(x, 0.5 * np.log(2 * np.pi))
    even, odd, x_2n, coef = jnp.zeros_like(x), jnp.zeros_like(x), x_2, 1
    for n in range(1, series_order + 1):
        coef *= 2 * n - 1
        term = coef / x_2n
        if n % 2:
            odd = odd + term
        else:
            even = even + term
        x_2n = x_2n * x_2
    return log_scale + jnp.log(1 + even - odd)


@log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    (x,), (g,) = primals, tangents
    out = log_ndtr(x, series_order)
    return out, g * jnp.exp(-0.5 * jnp.square(x) - out - _const(x, 0.5 * np.log(2 * np.pi)))



from minijax.scipy.special_expansions import (  # noqa: E402,F401 (the second half of the names)
    bessel_jn,
    dawsn,
    erfcx,
    exp1,
    expi,
    expn,
    fresnel,
    hyp1f1,
    hyp2f1,
    owens_t,
    sici,
    spence,
)


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
