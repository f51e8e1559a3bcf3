"""Experimental APIs, as in jax.experimental."""
