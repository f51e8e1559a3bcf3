"""`minijax.extend`: minijax's own machinery at the paths of `jax.extend`, for writing new
primitives as JAX's "JAX Internals: primitives" tutorial does. Mirrors jax/extend/__init__.py.
A namespace only.
"""

from minijax.extend import core  # noqa: F401
