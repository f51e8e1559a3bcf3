"""Solution: find the primitive that made a NaN, as `jax_debug_nans` does (chapter 15)."""

from __future__ import annotations

import numpy as np

import minijax
from minijax import core


def nonfinite(x) -> bool:
    x = np.asarray(x)
    return x.dtype.kind in "fc" and not np.isfinite(x).all()


def first_nonfinite_in_jaxpr(jaxpr: core.Jaxpr, consts, *args) -> str | None:
    env = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = eqn.primitive.bind(*ins, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        if any(map(nonfinite, outs)) and not any(map(nonfinite, ins)):
            return eqn.primitive.name
        env.update(zip(eqn.outvars, outs))
    return None


def first_nonfinite(fun):
    def wrapped(*args):
        closed = minijax.make_jaxpr(fun)(*args)
        return first_nonfinite_in_jaxpr(closed.jaxpr, closed.consts, *args)
    return wrapped
