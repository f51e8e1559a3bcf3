"""Special functions of `scipy.special` evaluated by series, continued fractions and quadrature,
written on minijax.numpy and lax (so they run under `jit` and `vmap`, and differentiate).

Each is a fixed-length loop (a `fori_loop`, a `scan`) or a fixed sum, never a data-dependent
`while_loop`: where JAX stops a series once its terms fall under the float's epsilon, the
loop here keeps a per-element "still adding" flag, which gives the same sums. The algorithms:
the continued fractions of erfc (`erfcx`), E_n (`expn`, `exp1`), E_1 at an imaginary point
(`sici`) and erfc at a complex one (`fresnel`, as Numerical Recipes' `frenel`) evaluated from
their tails; Rybicki's sum for `dawsn`; the power series of Ei, Li2 (`spence`, with its
reflection formulas), 1F1 and 2F1 (with JAX's special cases); Gauss-Legendre quadrature of
Owen's integral (`owens_t`); Miller's backward recurrence (`bessel_jn`, as JAX's).
Mirrors jax/_src/scipy/special.py and jax/_src/third_party/scipy/special.py (`fresnel`).
"""

from __future__ import annotations

import numpy as np

from minijax import lax, numpy as jnp
from minijax.custom_derivatives import custom_jvp
from minijax.lax import special as lax_special
from minijax.numpy.util import promote_args_inexact

_EULER = 0.57721566490153286061


def _c(x, value):
    return np.asarray(value, jnp.result_type(x))


def _real(name: str, *xs):
    xs = promote_args_inexact(name, *xs)
    if jnp.iscomplexobj(xs[0]):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return xs


def _gamma(x):
    # Gamma(x) for real x with its sign: NaN at the poles (as scipy.special.gamma here)
    fl = jnp.floor(x)
    sign = jnp.where((x < 0) & (fl % 2 != 0), -1, 1).astype(x.dtype)
    out = sign * jnp.exp(lax_special.lgamma(x))
    return jnp.where((x <= 0) & (x == fl), _c(x, np.nan), out)


def _tail_fraction(b, a, depth: int):
    """1 / (b(0) + a(1) / (b(1) + a(2) / (b(2) + ...))) to `depth` levels, from the tail:
    `b(k)` and `a(k)` give arrays (or (re, im) pairs, with `a` real) for a float index k."""
    complex_ = isinstance(b(0.0), tuple)

    def body(i, t):
        k = (depth - i).astype(jnp.result_type(t[0] if complex_ else t))
        if not complex_:
            return b(k - 1) + a(k) / t
        (tr, ti), (br, bi) = t, b(k - 1)
        q = a(k) / (tr * tr + ti * ti)
        return br + q * tr, bi - q * ti
    t = lax.fori_loop(0, depth, body, b(float(depth)))
    if not complex_:
        return 1 / t
    n = t[0] * t[0] + t[1] * t[1]
    return t[0] / n, -t[1] / n


# JAX: jax/_src/scipy/special.py erfcx
@custom_jvp
def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x), elementwise (real x): the
    product below 2, Laplace's continued fraction of erfc above, and 2 exp(x^2) - erfcx(-x)
    for x < 0 (inf once exp(x^2) overflows)."""
    (x,) = _real("erfcx", x)
    ax = jnp.abs(x)
    small = ax < 2
    xs = jnp.where(small, ax, 0)
    xl = jnp.where(small, 2, ax)
    fraction = _tail_fraction(lambda k: xl, lambda k: k / 2, 120) / _c(x, np.sqrt(np.pi))
    pos = jnp.where(small, jnp.exp(xs * xs) * lax_special.erfc(xs), fraction)
    return jnp.where(x < 0, 2 * jnp.exp(x * x) - pos, pos)


erfcx.defjvps(lambda g, ans, x: g * (2 * x * ans - _c(ans, 2 / np.sqrt(np.pi))))


# JAX: jax/_src/scipy/special.py dawsn
@custom_jvp
def dawsn(x):
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt, elementwise: its Taylor series below
    0.2, Rybicki's exponentially convergent sum (step 0.2, 20 terms) above."""
    (x,) = _real("dawsn", x)
    ax = jnp.abs(x)
    xs = jnp.where(ax < 0.2, x, 0)
    x2 = xs * xs
    series, term = jnp.zeros_like(x), xs
    for n in range(12):  # sum_n (-2)^n x^(2n+1) / (2n+1)!!
        series = series + term
        term = term * _c(x, -2 / (2 * n + 3)) * x2
    h = 0.2
    n0 = 2 * jnp.round(0.5 * ax / h)
    xp = ax - n0 * h
    e1, e2 = jnp.exp(2 * xp * h), jnp.exp(4 * xp * h)
    total = jnp.zeros_like(x)
    for i in range(1, 21):
        c = np.exp(-((2 * i - 1) * h) ** 2)
        total = total + _c(x, c) * (e1 / (n0 + (2 * i - 1)) + 1 / ((n0 - (2 * i - 1)) * e1))
        e1 = e1 * e2
    rybicki = _c(x, 1 / np.sqrt(np.pi)) * jnp.sign(x) * jnp.exp(-xp * xp) * total
    return jnp.where(ax < 0.2, series, rybicki)


dawsn.defjvps(lambda g, ans, x: g * (1 - 2 * x * ans))


def _expn_fraction(n, x):
    # E_n(x) = e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))), x > 1
    xf = jnp.where(x > 1, x, 2)
    return jnp.exp(-xf) * _tail_fraction(lambda k: xf + n + 2 * k,
                                         lambda k: -k * (n - 1 + k), 160)


def _expn_series(n, x):
    # E_n(x) for 0 < x <= 1: the power series, with its log term at i == n - 1
    xs = jnp.where(x > 1, 0.5, jnp.where(x > 0, x, 0.5))
    nm1 = n - 1
    log_x = jnp.log(xs)
    safe_nm1 = jnp.where(nm1 != 0, nm1, 1)
    total = jnp.where(nm1 != 0, 1 / safe_nm1, -log_x - _c(x, _EULER))
    fact = jnp.ones_like(xs)
    psi = lax_special.digamma(jnp.where(n > 0, n, 1))
    for i in range(1, 40):
        fact = fact * (-xs / i)
        gap = jnp.where(nm1 != i, i - nm1, 1)
        total = total + jnp.where(nm1 != i, -fact / gap, fact * (psi - log_x))
    return total


# JAX: jax/_src/scipy/special.py expn
@custom_jvp
def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf exp(-x t) / t^n dt,
    elementwise, broadcasting: the power series for x <= 1, the continued fraction above;
    NaN for n < 0 or x < 0, inf at x == 0 for n < 2, 1 / (n - 1) at 0 for larger n,
    exp(-x) / x for n == 0. Differentiable in x: d/dx E_n = -E_(n-1)."""
    n, x = _real("expn", n, x)
    n, x = jnp.broadcast_arrays(n, x)
    n1 = jnp.where(n == 1, n + n, n)
    main = jnp.where(x > 1, _expn_fraction(n, x), _expn_series(n, x))
    out = jnp.where(n == 0, jnp.exp(-x) / x, main)
    out = jnp.where(x == 0, jnp.where(n < 2, _c(x, np.inf), 1 / (n1 - 1)), out)
    return jnp.where((n < 0) | (x < 0), _c(x, np.nan), out)


@expn.defjvp
def _expn_jvp(primals, tangents):
    (n, x), (_, x_dot) = primals, tangents
    return expn(n, x), -x_dot * expn(n - 1, x)


# JAX: jax/_src/scipy/special.py exp1
def exp1(x):
    """The exponential integral E_1(x) = expn(1, x), elementwise."""
    (x,) = _real("exp1", x)
    return expn(_c(x, 1), x)


def _expi_pos(x):
    # Ei(x), x > 0: gamma + log x + sum_k x^k / (k k!) up to 40, e^x / x sum_k k! / x^k beyond
    xs = jnp.where(x <= 40, x, 1)

    def series(k, state):
        term, total = state
        k = k.astype(x.dtype)
        term = term * xs / k
        return term, total + term / k
    _, total = lax.fori_loop(1, 170, series, (jnp.ones_like(xs), jnp.zeros_like(xs)))
    small = total + jnp.log(xs) + _c(x, _EULER)
    xl = jnp.where(x <= 40, 41, x)
    term, asym = jnp.ones_like(xl), jnp.ones_like(xl)
    for k in range(1, 40):
        term = term * k / xl
        asym = asym + term
    return jnp.where(x <= 40, small, jnp.exp(xl) / xl * asym)


# JAX: jax/_src/scipy/special.py expi
@custom_jvp
def expi(x):
    """The exponential integral Ei(x) = -PV int_-x^inf exp(-t) / t dt, elementwise:
    -E_1(-x) for x < 0, -inf at 0. Its derivative is exp(x) / x."""
    (x,) = _real("expi", x)
    neg = -exp1(jnp.where(x < 0, -x, 1))
    pos = _expi_pos(jnp.where(x > 0, x, 1))
    return jnp.where(x < 0, neg, jnp.where(x == 0, _c(x, -np.inf), pos))


expi.defjvps(lambda g, ans, x: g * jnp.exp(x) / x)


# JAX: jax/_src/scipy/special.py sici
@custom_jvp
def sici(x):
    """(Si(x), Ci(x)), the sine and cosine integrals, elementwise: their power series for
    |x| <= 4, the continued fraction of E_1(i|x|) = -Ci + i (Si - pi/2) above. Si is odd;
    Ci is taken at |x| (-inf at 0, NaN at -inf), as JAX's."""
    (x,) = _real("sici", x)
    ax = jnp.abs(x)
    xs = jnp.where(ax <= 4, ax, 1)

    def series(j, state):
        p, si, ci = state
        jf = j.astype(x.dtype)
        p = p * xs / jf  # x^j / j!
        sign = 1 - 2 * ((j // 2) % 2).astype(x.dtype)
        si = si + jnp.where(j % 2 == 1, sign * p / jf, 0)
        ci = ci + jnp.where(j % 2 == 0, sign * p / jf, 0)
        return p, si, ci
    zero = jnp.zeros_like(xs)
    _, si_s, ci_s = lax.fori_loop(1, 40, series, (jnp.ones_like(xs), zero, zero))
    ci_s = ci_s + jnp.log(xs) + _c(x, _EULER)
    xl = jnp.where(ax <= 4, 5, ax)
    hr, hi = _tail_fraction(lambda k: (jnp.ones_like(xl) + 2 * k, xl),
                            lambda k: -k * k, 200)
    cos, sin = jnp.cos(xl), jnp.sin(xl)
    er, ei = cos * hr + sin * hi, cos * hi - sin * hr  # e^-ix h = E_1(ix)
    si = jnp.where(ax <= 4, si_s, ei + _c(x, np.pi / 2))
    ci = jnp.where(ax <= 4, ci_s, -er)
    ci = jnp.where(ax == 0, _c(x, -np.inf), jnp.where(x == -np.inf, _c(x, np.nan), ci))
    return jnp.sign(x) * si, ci


@sici.defjvp
def _sici_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    si, ci = sici(x)
    safe = jnp.where(x == 0, 1, x)
    return (si, ci), (g * jnp.where(x == 0, 1, jnp.sin(safe) / safe), g * jnp.cos(x) / x)


# JAX: jax/_src/third_party/scipy/special.py fresnel
@custom_jvp
def fresnel(x):
    """(S(x), C(x)), the Fresnel integrals int_0^x sin(pi t^2 / 2) dt and the cosine one,
    elementwise (odd): their power series for |x| <= 1.5, the continued fraction of erfc at
    a complex point above (Numerical Recipes' `frenel`)."""
    (x,) = _real("fresnel", x)
    ax = jnp.abs(x)
    xs = jnp.where(ax <= 1.5, ax, 1)
    u = _c(x, np.pi / 2) * xs * xs
    p, s_s, c_s = jnp.ones_like(xs), jnp.zeros_like(xs), jnp.zeros_like(xs)
    for j in range(32):  # p = u^j / j!; C takes the even j, S the odd, signs alternating
        term = (-1) ** (j // 2) * p * xs / (2 * j + 1)
        c_s, s_s = (c_s + term, s_s) if j % 2 == 0 else (c_s, s_s + term)
        p = p * u / (j + 1)
    xl = jnp.where(ax <= 1.5, 2, ax)
    pix2 = _c(x, np.pi) * xl * xl
    hr, hi = _tail_fraction(lambda k: (1 + 4 * k + jnp.zeros_like(xl), -pix2),
                            lambda k: -(2 * k - 1) * (2 * k), 200)
    hr, hi = xl * (hr + hi), xl * (hi - hr)  # (x - ix) h
    cos, sin = jnp.cos(0.5 * pix2), jnp.sin(0.5 * pix2)
    wr, wi = 1 - (cos * hr - sin * hi), -(cos * hi + sin * hr)  # 1 - e^(i pi x^2 / 2) h
    c_f, s_f = 0.5 * (wr - wi), 0.5 * (wr + wi)  # (1 + i) / 2 * w
    sign = jnp.sign(x)
    return (sign * jnp.where(ax <= 1.5, s_s, s_f), sign * jnp.where(ax <= 1.5, c_s, c_f))


@fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    arg = _c(x, np.pi / 2) * x * x
    return fresnel(x), (g * jnp.sin(arg), g * jnp.cos(arg))


def _li2_small(u):
    # sum_k u^k / k^2 for |u| <= 1/2 (60 terms: 2^-60 is below float64's epsilon)
    total, power = jnp.zeros_like(u), jnp.ones_like(u)
    for k in range(1, 61):
        power = power * u
        total = total + power / (k * k)
    return total


def _li2(w):
    # Li2(w) on [-1, 1] through Euler's reflection (w > 1/2) and Landen's identity (w < -1/2)
    pi2_6 = _c(w, np.pi ** 2 / 6)
    hi = jnp.where(w > 0.5, w, 0.75)
    lo = jnp.where(w < -0.5, w, -0.75)
    mid = jnp.where(jnp.abs(w) <= 0.5, w, 0)
    reflected = pi2_6 - jnp.log(hi) * jnp.log1p(-hi) - _li2_small(1 - hi)
    landen = -0.5 * jnp.square(jnp.log1p(-lo)) - _li2_small(lo / (lo - 1))
    return jnp.where(w > 0.5, reflected, jnp.where(w < -0.5, landen, _li2_small(mid)))


# JAX: jax/_src/scipy/special.py spence
@custom_jvp
def spence(x):
    """Spence's function int_1^x log(t) / (1 - t) dt = Li2(1 - x) for x >= 0, elementwise
    (NaN below 0); for x > 2 by the inversion -pi^2/6 - log(x - 1)^2 / 2 - Li2(1 / (1 - x)).
    TypeError unless x is float32 or float64."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported "
                        "types.")
    big = jnp.where(x > 2, x, 3)
    inverted = (_c(x, -np.pi ** 2 / 6) - 0.5 * jnp.square(jnp.log(big - 1))
                - _li2(1 / (1 - big)))
    direct = _li2(1 - jnp.where((x > 2) | (x < 0), 1, x))
    out = jnp.where(x > 2, inverted, direct)
    out = jnp.where(x == 0, _c(x, np.pi ** 2 / 6), out)
    return jnp.where(x < 0, _c(x, np.nan), out)


@spence.defjvp
def _spence_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    safe = jnp.where(x == 1, 2, x)
    return spence(x), g * jnp.where(x == 1, -1, jnp.log(safe) / (1 - safe))


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(48)


def _owens_t_quadrature(h, a):
    # (1/2pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt, 0 <= a <= 1, Gauss-Legendre
    t = a[..., None] * _c(h, (_GL_NODES + 1) / 2)
    f = jnp.exp(-0.5 * jnp.square(h)[..., None] * (1 + t * t)) / (1 + t * t)
    return a * jnp.sum(f * _c(h, _GL_WEIGHTS), axis=-1) / _c(h, 4 * np.pi)


# JAX: jax/_src/scipy/special.py owens_t
@custom_jvp
def owens_t(h, a):
    """Owen's T function (1/2pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt, elementwise,
    broadcasting: Gauss-Legendre quadrature (48 points) for |a| <= 1, and for |a| > 1 Owen's
    identity T(h, a) = (Phi(h) Q(ah) + Phi(ah) Q(h)) / 2 - T(ah, 1/a) (Q = 1 - Phi)."""
    h, a = _real("owens_t", h, a)
    h, a = jnp.broadcast_arrays(h, a)
    ah, aa = jnp.abs(h), jnp.abs(a)
    small = aa <= 1
    near = _owens_t_quadrature(ah, jnp.where(small, aa, 1))
    ab = jnp.where(small, 2, aa)
    ahb = ah * ab
    ndtr = lax_special.erfc(-jnp.stack([ah, ahb]) * _c(h, np.sqrt(0.5))) / 2
    upper = lax_special.erfc(jnp.stack([ah, ahb]) * _c(h, np.sqrt(0.5))) / 2
    far = 0.5 * (ndtr[0] * upper[1] + ndtr[1] * upper[0]) - _owens_t_quadrature(ahb, 1 / ab)
    return jnp.sign(a) * jnp.where(small, near, far)


@owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    (h, a), (h_dot, a_dot) = primals, tangents
    h, a = promote_args_inexact("owens_t", h, a)
    out = owens_t(h, a)
    phi = jnp.exp(-0.5 * h * h) * _c(h, 1 / np.sqrt(2 * np.pi))
    dh = -phi * lax_special.erf(a * h * _c(h, np.sqrt(0.5))) / 2
    da = jnp.exp(-0.5 * h * h * (1 + a * a)) / (_c(h, 2 * np.pi) * (1 + a * a))
    return out, h_dot * dh + a_dot * da


def _series_until_small(first, ratio, n_terms: int, start=0.0):
    """sum of `first * prod ratio(k)` terms, stopping (per element, for good) at the first
    term under eps times the sum, as JAX's while loops do; k runs from `start` + 1."""
    eps = _c(first, np.finfo(jnp.result_type(first)).eps)

    def body(i, state):
        total, term, active = state
        active = active & (jnp.abs(term) > eps * jnp.abs(total))
        total = jnp.where(active, total + term, total)
        k = i.astype(first.dtype) + start
        return total, term * ratio(k), active
    init = (jnp.zeros_like(first), first, jnp.ones(first.shape, bool))
    return lax.fori_loop(1, n_terms, body, init)[0]


# JAX: jax/_src/scipy/special.py hyp1f1
def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x), elementwise, broadcasting:
    its power series for |x| < 100, the asymptotic series _gamma(b)/_gamma(a) e^x x^(a-b)
    sum_k (b-a)_k (1-a)_k / k! x^-k above (each stopped at float epsilon, at most 250 terms,
    as JAX's); 1 for a == 0, e^x for a == b, inf for b == 0."""
    a, b, x = _real("hyp1f1", a, b, x)
    a, b, x = jnp.broadcast_arrays(a, b, x)
    near = jnp.abs(x) < 100
    xs = jnp.where(near, x, 1)
    series = 1 + _series_until_small(a / b * xs, lambda k: (a + k) / (b + k) * xs / (k + 1),
                                     250, start=0.0)
    xl = jnp.where(near, 200, x)
    asym = 1 + _series_until_small((b - a) * (1 - a) / xl,
                                   lambda k: (b - a + k) * (1 - a + k) / (k + 1) / xl, 250)
    asym = _gamma(b) / _gamma(a) * jnp.exp(xl) * xl ** (a - b) * asym
    out = jnp.where(near, series, asym)
    out = jnp.where(b == 0, _c(x, np.inf), out)
    out = jnp.where((a == b) & (a != 0), jnp.exp(x), out)
    return jnp.where(a == 0, _c(x, 1), out)


def _hyp2f1_series(a, b, c, x):
    return _series_until_small(jnp.ones_like(x),
                               lambda k: (a + k - 1) * (b + k - 1) / (c + k - 1) / k * x, 251)


# JAX: jax/_src/scipy/special.py hyp2f1
def hyp2f1(a, b, c, x):
    """Gauss' hypergeometric function 2F1(a, b; c; x) for x <= 1, elementwise, broadcasting:
    its power series (stopped at float epsilon, at most 250 terms; a polynomial when a or b
    is a non-positive integer), Euler's transformation (1-x)^(c-a-b) 2F1(c-a, c-b; c; x) when
    c - a - b <= -1, Gauss' sum at x == 1; 1 at x == 0, inf for c a non-positive integer,
    (1-x)^-a or (1-x)^-b when b or a equals c, inf for x > 1 (JAX's cases). Differs: JAX
    takes a digamma expansion for x > 0.9 when c - a - b is an integer; here the series."""
    a, b, c, x = _real("hyp2f1", a, b, c, x)
    a, b, c, x = jnp.broadcast_arrays(a, b, c, x)
    eps = _c(x, np.finfo(x.dtype).eps * 50)
    d, s = c - a - b, 1 - x
    inf = _c(x, np.inf)
    euler = (d <= -1) & ~((jnp.abs(d - jnp.round(d)) >= eps) & (s < 0))
    out = _hyp2f1_series(a, b, c, x)
    out = jnp.where(x == 1, _gamma(c) * _gamma(d) / (_gamma(c - a) * _gamma(c - b)), out)
    out = jnp.where(x > 1, inf, out)
    out = jnp.where((x < 1) & (a == c), s ** (-b), out)
    out = jnp.where((x < 1) & (b == c), s ** (-a), out)
    out = jnp.where((d <= 0) & (x == 1), inf, out)
    out = jnp.where(euler, s ** d * _hyp2f1_series(c - a, c - b, c, x), out)
    out = jnp.where((c == 0) | ((c < 0) & (c % 1 == 0)), inf, out)
    return jnp.where((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), _c(x, 1), out)


# JAX: jax/_src/scipy/special.py bessel_jn
def bessel_jn(z, *, v: int, n_iter: int = 50):
    """Bessel functions of the first kind J_0(z) ... J_v(z), shape (v + 1, *z.shape), by
    Miller's backward recurrence J_(k-1) = 2k/z J_k - J_(k+1) from order `n_iter` (started at
    1e-16), normalized by J_0 + 2 sum J_2k = 1, as JAX's (which is NaN for small z in
    float32, where the recurrence overflows). ValueError for complex z."""
    (z,) = _real("bessel_jn", z)
    v, n_iter = int(v), int(n_iter)

    def step(carry, k):
        f0, f1, bs = carry
        f = 2 * (k + 1) * f1 / z - f0
        bs = jnp.where(k % 2 == 0, bs + 2 * f, bs)
        return (f1, f, bs), f
    init = (jnp.zeros_like(z), jnp.full_like(z, 1e-16), jnp.zeros_like(z))
    (_, _, bs), vals = lax.scan(step, init, jnp.arange(n_iter + 1, dtype=z.dtype), reverse=True)
    return vals[:v + 1] / (bs - vals[0])
