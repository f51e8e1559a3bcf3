"""`minijax.scipy.stats`: distributions as modules of functions. Mirrors jax/scipy/stats/."""

from minijax.scipy.stats import norm  # noqa: F401
