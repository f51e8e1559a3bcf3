"""Exercise: find the primitive that made a NaN, as `jax_debug_nans` does (chapter 15).

With `jax_debug_nans` on, JAX re-runs a jitted function whose output holds a NaN op by op and
raises `FloatingPointError: invalid value (nan) encountered in <primitive>`. Write the heart
of that: `first_nonfinite(fun)(*args)` traces `fun` to a jaxpr and evaluates it one equation
at a time, returning the name of the first primitive whose output holds a NaN or an infinity
when none of its inputs did (None if there is none). The tests compare your answer with the
primitive JAX's error names.
"""

from __future__ import annotations

import numpy as np  # for your code

import minijax
from minijax import core  # core.Literal, eqn.primitive.bind


def nonfinite(x) -> bool:
    """Does the array `x` hold a NaN or an infinity?"""
    x = np.asarray(x)
    return x.dtype.kind in "fc" and not np.isfinite(x).all()


def first_nonfinite_in_jaxpr(jaxpr: core.Jaxpr, consts, *args) -> str | None:
    """Evaluate `jaxpr` equation by equation (bind each primitive on the concrete values of
    its inputs, as `core.eval_jaxpr` does); return the name of the first primitive whose
    outputs are non-finite while its inputs are all finite, or None."""
    raise NotImplementedError("first_nonfinite_in_jaxpr")


def first_nonfinite(fun):
    def wrapped(*args):
        closed = minijax.make_jaxpr(fun)(*args)
        return first_nonfinite_in_jaxpr(closed.jaxpr, closed.consts, *args)
    return wrapped
