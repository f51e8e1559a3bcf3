"""Rung 4: batching, a trace whose tracers carry (value, batch axis)
(minijax/interpreters/batching.py BatchTrace; jax/_src/interpreters/batching.py)."""

from __future__ import annotations

import numpy as np

from . import core as c
from .core import Trace, Tracer, current_trace, set_current_trace


class BatchTracer(Tracer):
    def __init__(self, trace, val, bdim):
        self._trace, self.val, self.bdim = trace, val, bdim
        shape, self.dtype = c.shape_dtype(val)
        self.shape = shape if bdim is None else shape[:bdim] + shape[bdim + 1:]


def moveaxis(x, src, dst):
    perm = [i for i in range(len(c.shape_dtype(x)[0])) if i != src]
    perm.insert(dst, src)
    return c.transpose(x, perm)


def bdim_at_front(x, bdim, size):
    """`x` with its batch axis first (broadcast when it has none)."""
    if bdim is None:
        s = c.shape_dtype(x)[0]
        return c.broadcast_in_dim(x, (size,) + s, tuple(range(1, len(s) + 1)))
    return moveaxis(x, bdim, 0) if bdim else x


class BatchTrace(Trace):
    def __init__(self, size, axis_name=None):
        self.parent, self.size, self.axis_name = current_trace(), size, axis_name

    def unpack(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.bdim
        return x, None

    def process_primitive(self, prim, args, params):
        vals, dims = zip(*map(self.unpack, args))
        if all(d is None for d in dims):
            with set_current_trace(self.parent):
                return prim.bind(*vals, **params)
        rule = batch_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"no batching rule for '{prim}' (rung 4)")
        with set_current_trace(self.parent):
            out, bdim = rule(self, vals, dims, **params)
        return BatchTracer(self, out, bdim)


# BUILD rung 4: rules (trace, values, batch axes, **params) -> (value, batch axis)
# stub: batch_rules = {}
def _elementwise(prim):
    def rule(trace, vals, dims):
        return prim.bind(*[bdim_at_front(v, d, trace.size) for v, d in zip(vals, dims)]), 0
    return rule


def _reduce_sum_rule(trace, vals, dims, *, axes):
    x = bdim_at_front(vals[0], dims[0], trace.size)
    return c.reduce_sum(x, [a + 1 for a in axes]), 0


def _dot_rule(trace, vals, dims):
    (x, y), (dx, dy) = vals, dims
    if dy is None:  # [b, ..., k] @ [k, n]: the batch axis rides along the rows
        x = bdim_at_front(x, dx, trace.size)
        return c.dot(x, y), 0
    x, y = bdim_at_front(x, dx, trace.size), bdim_at_front(y, dy, trace.size)
    # a batched matrix product, one example at a time stacked (tinyjax has no dot_general)
    return _stack([c.dot(_index(x, i), _index(y, i)) for i in range(trace.size)]), 0


def _index(x, i):
    s = c.shape_dtype(x)[0]
    onehot = np.eye(s[0], dtype=c.shape_dtype(x)[1])[i]
    w = c.broadcast_in_dim(onehot, s, (0,))
    return c.reduce_sum(c.mul(w, x), (0,))


def _stack(xs):
    s, d = c.shape_dtype(xs[0])
    out = None
    for i, x in enumerate(xs):
        onehot = np.eye(len(xs), dtype=d)[i]
        term = c.mul(c.broadcast_in_dim(onehot, (len(xs),) + s, (0,)),
                     c.broadcast_in_dim(x, (len(xs),) + s, tuple(range(1, len(s) + 1))))
        out = term if out is None else c.add(out, term)
    return out


def _transpose_rule(trace, vals, dims, *, perm):
    x = bdim_at_front(vals[0], dims[0], trace.size)
    return c.transpose(x, (0,) + tuple(p + 1 for p in perm)), 0


def _broadcast_in_dim_rule(trace, vals, bdims, *, shape, dims):
    x = bdim_at_front(vals[0], bdims[0], trace.size)
    return c.broadcast_in_dim(x, (trace.size,) + shape, (0,) + tuple(d + 1 for d in dims)), 0


batch_rules = {p: _elementwise(p) for p in (c.add_p, c.mul_p, c.neg_p, c.sin_p, c.cos_p,
                                             c.exp_p, c.log_p, c.max_p, c.gt_p, c.select_p)}
batch_rules.update({c.reduce_sum_p: _reduce_sum_rule, c.dot_p: _dot_rule,
                    c.transpose_p: _transpose_rule, c.broadcast_p: _broadcast_in_dim_rule})
# END BUILD


def vmap(f, in_axes=0):
    """`vmap(f, in_axes)(*args)`: f mapped over axis `in_axes` (an int, None, or one per
    argument) of its arguments; the result has the batch axis first."""
    def batched(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        size = next(c.shape_dtype(a)[0][ax] for a, ax in zip(args, axes) if ax is not None)
        trace = BatchTrace(size)
        with set_current_trace(trace):
            out = f(*[a if ax is None else BatchTracer(trace, a, ax)
                      for a, ax in zip(args, axes)])
        val, bdim = trace.unpack(out)
        return bdim_at_front(val, bdim, size)
    return batched
