"""The normal distribution: `pdf`, `logpdf`, `cdf`, `logcdf`, `sf`, `ppf`, with `loc` and
`scale`, as `scipy.stats.norm` spells them. Mirrors jax/_src/scipy/stats/norm.py.
"""

from __future__ import annotations

import numpy as np

from minijax import lax, numpy as jnp
from minijax.numpy.util import promote_args_inexact
from minijax.scipy import special


# JAX: jax/_src/scipy/stats/norm.py logpdf
def logpdf(x, loc=0, scale=1):
    """`log N(x; loc, scale**2)`, elementwise with broadcasting; ints promote to float."""
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    two_pi = np.asarray(2 * np.pi, jnp.result_type(x))
    scale_sq = lax.square(scale)
    log_normalizer = lax.log(lax.mul(two_pi, scale_sq))
    quadratic = lax.div(lax.square(lax.sub(x, loc)), scale_sq)
    return lax.div(lax.add(log_normalizer, quadratic), np.asarray(-2, jnp.result_type(x)))


# JAX: jax/_src/scipy/stats/norm.py pdf
def pdf(x, loc=0, scale=1):
    """The density `exp(logpdf(x, loc, scale))`."""
    return lax.exp(logpdf(x, loc, scale))


# JAX: jax/_src/scipy/stats/norm.py cdf
def cdf(x, loc=0, scale=1):
    """`P(X <= x)` for X ~ N(loc, scale**2) (`special.ndtr` of the standardized x)."""
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return special.ndtr(lax.div(lax.sub(x, loc), scale))


# JAX: jax/_src/scipy/stats/norm.py logcdf — differs: log(ndtr), not JAX's log_ndtr series
def logcdf(x, loc=0, scale=1):
    """`log cdf(x, loc, scale)`."""
    return jnp.log(cdf(x, loc, scale))


# JAX: jax/_src/scipy/stats/norm.py sf
def sf(x, loc=0, scale=1):
    """The survival function `1 - cdf`, computed as `cdf` of the mirrored point."""
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


# JAX: jax/_src/scipy/stats/norm.py ppf
def ppf(q, loc=0, scale=1):
    """The quantile function (inverse cdf): `loc + scale * ndtri(q)`, float."""
    return jnp.asarray(special.ndtri(q) * scale + loc, float)
