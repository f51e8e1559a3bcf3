"""Special functions of `scipy.special`, written on minijax.numpy and lax.

`logsumexp` (mirrors jax/_src/ops/special.py), `erf`, `erfc`, `erfinv`, `gammaln`, `digamma`,
`xlogy`, `xlog1py`, `expit`, `logit`, `ndtr`, `ndtri` (mirror jax/_src/scipy/special.py).
Integer inputs are promoted to the default float dtype, as in JAX.
"""

from __future__ import annotations

import numpy as np

from minijax import lax
from minijax import numpy as jnp
from minijax.custom_derivatives import custom_jvp
from minijax.lax import special as lax_special
from minijax.numpy.util import promote_args_inexact


def _const(x, value):
    return np.asarray(value, jnp.result_type(x))


# JAX: jax/_src/ops/special.py logsumexp — one function for jax.nn and jax.scipy.special, as
# in JAX: minijax/nn/__init__.py: logsumexp
from minijax.nn import logsumexp  # noqa: E402,F401


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
    c = lambda v: _const(p, v)  # noqa: E731
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
