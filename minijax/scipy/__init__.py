"""`minijax.scipy`: the subset of `jax.scipy` built on minijax.numpy and lax.

Mirrors jax/scipy/ (jax/_src/scipy/): `special` (logsumexp, erf, gammaln, xlogy, expit,
logit, ...) and `stats.norm`.
"""

from minijax.scipy import special, stats  # noqa: F401
