"""Experimental APIs, as in jax.experimental."""

from minijax.callback import io_callback  # noqa: F401
