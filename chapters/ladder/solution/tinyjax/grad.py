"""Rung 6: transposing the linear jaxpr gives reverse mode: vjp and grad
(minijax/interpreters/ad.py backward_pass; jax/_src/interpreters/ad.py backward_pass)."""

from __future__ import annotations

import numpy as np

from . import core as c
from .jaxpr import Var
from .linearize import linearize


def _unbroadcast_rule(ct, x_shape, *, shape, dims):
    summed = tuple(i for i in range(len(shape)) if i not in dims)
    out = c.reduce_sum(ct, summed) if summed else ct
    ones = tuple(i for i, (n, d) in enumerate(zip(x_shape, dims)) if n == 1 and shape[d] != 1)
    if ones:  # size-1 input axes that were stretched: sum them, keep the axis
        kept = tuple(i for i in range(len(x_shape)) if i not in ones)
        out = c.broadcast_in_dim(c.reduce_sum(out, ones), x_shape, kept)
    return out


def _transpose_rules():
    # BUILD rung 6: rules (cotangent, linear?, inputs, **params) -> one cotangent per input
    # (None where the input is not linear)
    # stub: return {}
    def add(ct, lin, xs):
        return [ct if lin[0] else None, ct if lin[1] else None]

    def mul(ct, lin, xs):
        return [c.mul(ct, xs[1]) if lin[0] else None, c.mul(xs[0], ct) if lin[1] else None]

    def outer(a, b):  # a[m] b[n] -> [m, n]
        m, n = a.shape[0], b.shape[0]
        return c.mul(c.broadcast_in_dim(a, (m, n), (0,)), c.broadcast_in_dim(b, (m, n), (1,)))

    def dot(ct, lin, xs):  # x[m,k] or x[k], y[k,n] or y[k]
        x, y = xs
        ct_x = ct_y = None
        if lin[0]:
            if len(y.shape) == 1:
                ct_x = outer(ct, y) if len(x.shape) == 2 else c.mul(
                    c.broadcast_in_dim(ct, y.shape, ()), y)
            else:
                ct_x = c.dot(ct, c.transpose(y, (1, 0))) if len(x.shape) == 2 else c.dot(y, ct)
        if lin[1]:
            if len(x.shape) == 1:
                ct_y = outer(x, ct) if len(y.shape) == 2 else c.mul(
                    c.broadcast_in_dim(ct, x.shape, ()), x)
            else:
                ct_y = c.dot(c.transpose(x, (1, 0)), ct)
        return [ct_x, ct_y]

    def reduce_sum(ct, lin, xs, *, axes):
        shape = xs[0].shape
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        return [c.broadcast_in_dim(ct, shape, kept)]

    def transpose(ct, lin, xs, *, perm):
        return [c.transpose(ct, tuple(np.argsort(perm)))]

    def select(ct, lin, xs):
        z = np.zeros(c.shape_dtype(ct)[0], c.shape_dtype(ct)[1])
        return [None, c.select(xs[0], ct, z) if lin[1] else None,
                c.select(xs[0], z, ct) if lin[2] else None]

    return {c.add_p: add, c.mul_p: mul, c.neg_p: lambda ct, lin, xs: [c.neg(ct)],
            c.dot_p: dot, c.reduce_sum_p: reduce_sum, c.transpose_p: transpose,
            c.select_p: select,
            c.broadcast_p: lambda ct, lin, xs, **p: [_unbroadcast_rule(ct, xs[0].shape, **p)]}
    # END BUILD


transpose_rules = _transpose_rules()


def backward_pass(jaxpr, consts, ct_out):
    """The cotangents of a linear jaxpr's inputs, given its output's cotangent."""
    # BUILD rung 6: walk the equations backwards, accumulating cotangents per variable
    known = dict(zip(jaxpr.constvars, consts))
    cts = {jaxpr.outvars[0]: ct_out}
    for e in reversed(jaxpr.eqns):
        ct = cts.pop(e.outvar, None)
        if ct is None:
            continue
        rule = transpose_rules.get(e.prim)
        if rule is None:
            raise NotImplementedError(f"no transpose rule for '{e.prim}' (rung 6)")
        lin = [isinstance(x, Var) and x not in known for x in e.inputs]
        vals = [known.get(x, x) if isinstance(x, Var) else x for x in e.inputs]
        for x, is_lin, g in zip(e.inputs, lin, rule(ct, lin, vals, **e.params)):
            if is_lin and g is not None:
                cts[x] = g if x not in cts else c.add(cts[x], g)
    return [cts.get(v, np.zeros(v.shape, v.dtype)) for v in jaxpr.invars]
    # END BUILD


def vjp(f, *primals):
    out, _, (jaxpr, consts) = linearize(f, *primals)
    return out, lambda ct: backward_pass(jaxpr, consts, ct)


def grad(f):
    """`grad(f)(*args)`: the gradient of a scalar-valued f with respect to its first argument."""
    def df(*args):
        out, f_vjp = vjp(lambda x: f(x, *args[1:]), args[0])
        return f_vjp(np.ones(*c.shape_dtype(out)))[0]
    return df
