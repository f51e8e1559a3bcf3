"""Rung 5: linearize = jvp + partial evaluation: the primal half runs now, the tangent half
is recorded as a jaxpr (minijax/interpreters/ad.py linearize_flat,
minijax/interpreters/partial_eval.py; jax/_src/interpreters/partial_eval.py)."""

from __future__ import annotations

from .core import set_current_trace, shape_dtype
from .jaxpr import Jaxpr, JaxprTrace, eval_jaxpr
from .jvp import jvp


def linearize(f, *primals):
    """(f(*primals), f_lin, (jaxpr, consts)): f_lin(*tangents) applies the derivative at
    `primals`, replaying only the recorded tangent equations."""
    # BUILD rung 5: jvp under a JaxprTrace that folds known (primal) values
    trace = JaxprTrace(fold_known=True)
    tangents = [trace.new_arg(*shape_dtype(p)) for p in primals]
    with set_current_trace(trace):
        out, t_out = jvp(f, primals, tangents)
    outvar = trace.to_var(t_out)
    consts = [c for c, _ in trace.consts.values()]
    jaxpr = Jaxpr([v for _, v in trace.consts.values()], [t.var for t in tangents],
                  trace.eqns, [outvar])
    # END BUILD

    def f_lin(*ts):
        return eval_jaxpr(jaxpr, consts, *ts)[0]
    return out, f_lin, (jaxpr, consts)
