"""Rung 3: forward mode, a trace whose tracers carry (primal, tangent)
(minijax/interpreters/ad.py JVPTrace; jax/_src/interpreters/ad.py JVPTrace)."""

from __future__ import annotations

import numpy as np

from . import core as c
from .core import Trace, Tracer, current_trace, set_current_trace


class JVPTracer(Tracer):
    def __init__(self, trace, primal, tangent):
        self._trace, self.primal, self.tangent = trace, primal, tangent
        self.shape, self.dtype = c.shape_dtype(primal)


def zeros_like(x):
    s, d = c.shape_dtype(x)
    return np.zeros(s, d)


class JVPTrace(Trace):
    def __init__(self):
        self.parent = current_trace()

    def pair(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        return x, zeros_like(x)  # a value from outside: its tangent is zero

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*map(self.pair, args))
        rule = jvp_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"no jvp rule for '{prim}' (rung 3)")
        with set_current_trace(self.parent):  # the rule's own binds go to the trace below
            out, t_out = rule(primals, tangents, **params)
        return JVPTracer(self, out, t_out)


# BUILD rung 3: one rule per primitive: (primals, tangents) -> (primal out, tangent out)
# stub: jvp_rules = {}
jvp_rules = {
    c.add_p: lambda p, t: (c.add(*p), c.add(*t)),
    c.mul_p: lambda p, t: (c.mul(*p), c.add(c.mul(t[0], p[1]), c.mul(p[0], t[1]))),
    c.neg_p: lambda p, t: (c.neg(p[0]), c.neg(t[0])),
    c.sin_p: lambda p, t: (c.sin(p[0]), c.mul(t[0], c.cos(p[0]))),
    c.cos_p: lambda p, t: (c.cos(p[0]), c.neg(c.mul(t[0], c.sin(p[0])))),
    c.exp_p: lambda p, t: (c.exp(p[0]), c.mul(t[0], c.exp(p[0]))),
    c.log_p: lambda p, t: (c.log(p[0]), c.mul(t[0], c.exp(c.neg(c.log(p[0]))))),
    c.max_p: lambda p, t: (c.maximum(*p), c.select(c.greater(p[0], p[1]), t[0], t[1])),
    c.gt_p: lambda p, t: (c.greater(*p), zeros_like(c.greater(*p))),
    c.select_p: lambda p, t: (c.select(*p), c.select(p[0], t[1], t[2])),
    c.reduce_sum_p: lambda p, t, *, axes: (c.reduce_sum(p[0], axes), c.reduce_sum(t[0], axes)),
    c.dot_p: lambda p, t: (c.dot(*p), c.add(c.dot(t[0], p[1]), c.dot(p[0], t[1]))),
    c.transpose_p: lambda p, t, *, perm: (c.transpose(p[0], perm), c.transpose(t[0], perm)),
    c.broadcast_p: lambda p, t, *, shape, dims: (c.broadcast_in_dim(p[0], shape, dims),
                                                 c.broadcast_in_dim(t[0], shape, dims)),
}
# END BUILD


def jvp(f, primals, tangents):
    """(f(*primals), the derivative of f at primals applied to tangents)."""
    trace = JVPTrace()
    with set_current_trace(trace):
        out = f(*[JVPTracer(trace, p, t) for p, t in zip(primals, tangents)])
    return trace.pair(out)
