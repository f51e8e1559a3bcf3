"""Rung 2: tracing a function to a jaxpr, printing it in JAX's grammar, evaluating it
(minijax/core.py Jaxpr, minijax/interpreters/partial_eval.py; jax/_src/core.py,
jax/_src/interpreters/partial_eval.py DynamicJaxprTrace)."""

from __future__ import annotations

import itertools

import numpy as np

from .core import Trace, Tracer, current_trace, set_current_trace, shape_dtype

_SHORT = {"float32": "f32", "float64": "f64", "int32": "i32", "bool": "bool"}


class Var:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    def type_str(self):
        return f"{_SHORT.get(self.dtype.name, self.dtype.name)}[{','.join(map(str, self.shape))}]"


class Eqn:
    def __init__(self, prim, inputs, params, outvar):
        self.prim, self.inputs, self.params, self.outvar = prim, inputs, params, outvar


class Jaxpr:
    """`{ lambda consts ; invars. let eqns in (outvars,) }`; constvars get `consts`."""

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars, self.invars, self.eqns, self.outvars = constvars, invars, eqns, outvars

    def __str__(self):
        # BUILD rung 2: name the variables a, b, c... in order of appearance, as JAX prints
        names = {}
        letters = ("".join(p) for n in itertools.count(1)
                   for p in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=n))

        def name(v):
            if v not in names:
                names[v] = next(letters)
            return names[v]

        def decl(v):
            return f"{name(v)}:{v.type_str()}"
        head = " ".join(map(decl, self.constvars)) + " ; " + " ".join(map(decl, self.invars))
        lines = []
        for e in self.eqns:
            params = ("[" + " ".join(f"{k}={v}" for k, v in e.params.items()) + "]"
                      if e.params else "")
            ins = " ".join(name(x) if isinstance(x, Var) else repr(x) for x in e.inputs)
            lines.append(f"{decl(e.outvar)} = {e.prim.name}{params} {ins}")
        outs = ", ".join(name(v) for v in self.outvars)
        return "{ lambda " + head.strip() + ". let\n    " + "\n    ".join(lines) + \
            f"\n  in ({outs},) }}"
        # END BUILD

    __repr__ = __str__  # a jaxpr inside an equation's params (cond's branches) prints whole


class JaxprTracer(Tracer):
    def __init__(self, trace, var):
        self._trace, self.var = trace, var
        self.shape, self.dtype = var.shape, var.dtype


class JaxprTrace(Trace):
    """Records each primitive as an equation. Values that are not this trace's tracers
    become constants of the jaxpr. With `fold_known=True`, a primitive whose inputs are all
    known is evaluated by the trace below instead of recorded: partial evaluation (rung 5)."""

    def __init__(self, fold_known=False):
        self.eqns, self.consts, self.parent = [], {}, current_trace()
        self.fold_known = fold_known

    def new_arg(self, shape, dtype):
        return JaxprTracer(self, Var(shape, dtype))

    def to_var(self, x):
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x.var
        # BUILD rung 2: anything else (an array, a tracer of an outer trace) is a constant
        key = id(x)
        if key not in self.consts:
            self.consts[key] = (x, Var(*shape_dtype(x)))
        return self.consts[key][1]
        # END BUILD

    def process_primitive(self, prim, args, params):
        mine = [isinstance(a, JaxprTracer) and a._trace is self for a in args]
        if self.fold_known and not any(mine):
            # BUILD rung 5: every input is known: compute it now, below this trace
            with set_current_trace(self.parent):
                return prim.bind(*args, **params)
            # END BUILD
        # BUILD rung 2: record `outvar = prim[params] invars`
        out = Var(*prim.shape_rule(*args, **params))
        self.eqns.append(Eqn(prim, [self.to_var(a) for a in args], params, out))
        return JaxprTracer(self, out)
        # END BUILD


def trace_to_jaxpr(f, avals, fold_known=False):
    """(jaxpr, consts, outs) of `f` traced on arguments of the given (shape, dtype)s."""
    trace = JaxprTrace(fold_known)
    args = [trace.new_arg(s, d) for s, d in avals]
    with set_current_trace(trace):
        outs = f(*args)
    single = not isinstance(outs, (tuple, list))
    outs = [outs] if single else list(outs)
    outvars = [trace.to_var(o) for o in outs]
    consts = [c for c, _ in trace.consts.values()]
    jaxpr = Jaxpr([v for _, v in trace.consts.values()], [a.var for a in args], trace.eqns,
                  outvars)
    return jaxpr, consts, single


def make_jaxpr(f):
    """`make_jaxpr(f)(*args)`: the jaxpr of `f` on arguments shaped like `args`."""
    def traced(*args):
        return trace_to_jaxpr(f, [shape_dtype(a) for a in args])[0]
    return traced


def eval_jaxpr(jaxpr, consts, *args):
    """Run a jaxpr's equations in order with `bind` (so under any current trace)."""
    # BUILD rung 2: an environment from variables to values
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for e in jaxpr.eqns:
        env[e.outvar] = e.prim.bind(*[env[x] for x in e.inputs], **e.params)
    return [env[v] for v in jaxpr.outvars]
    # END BUILD
