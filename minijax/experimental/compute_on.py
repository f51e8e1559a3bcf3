"""`minijax.experimental.compute_on.compute_on`, as `jax.experimental.compute_on` exports it
(minijax/compute_on.py). Mirrors jax/experimental/compute_on.py."""

from minijax.compute_on import compute_on, compute_on2  # noqa: F401

