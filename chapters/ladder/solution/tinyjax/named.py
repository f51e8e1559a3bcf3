"""Rung 11: named axes: `psum` over a vmapped axis, and shard_map on a simulated mesh, where
each device's block is one index of a named batch axis (minijax/lax/parallel.py psum,
minijax/shard_map.py; jax/_src/lax/parallel.py, jax/_src/shard_map.py)."""

from __future__ import annotations

from . import core as c
from .core import Primitive, set_current_trace
from .vmap import BatchTrace, BatchTracer, batch_rules, bdim_at_front


def _psum_unbound(x, *, axis_name):
    raise NameError(f"unbound axis name: {axis_name} (psum outside a vmap/shard_map naming it)")


psum_p = Primitive("psum", _psum_unbound, lambda x, *, axis_name: c.shape_dtype(x))


def psum(x, axis_name):
    """The sum of `x` over the named axis, the same value at every index of it."""
    return psum_p.bind(x, axis_name=axis_name)


def _psum_batch_rule(trace, vals, dims, *, axis_name):
    # BUILD rung 11: sum over the batch axis if it is the named one, and broadcast it back
    if trace.axis_name != axis_name:
        raise NotImplementedError("psum over an outer named axis (tinyjax names one axis)")
    x = bdim_at_front(vals[0], dims[0], trace.size)
    total = c.reduce_sum(x, (0,))
    shape = c.shape_dtype(x)[0]
    return c.broadcast_in_dim(total, shape, tuple(range(1, len(shape)))), 0
    # END BUILD


batch_rules[psum_p] = _psum_batch_rule


def vmap_named(f, axis_name):
    """vmap over axis 0 of every argument, with that axis named (so `psum` can refer to it)."""
    def batched(*args):
        size = c.shape_dtype(args[0])[0][0]
        trace = BatchTrace(size, axis_name)
        with set_current_trace(trace):
            out = f(*[BatchTracer(trace, a, 0) for a in args])
        val, bdim = trace.unpack(out)
        return bdim_at_front(val, bdim, size)
    return batched


def shard_map(f, num_devices, axis_name):
    """`shard_map(f, n, name)(*xs)`: split axis 0 of each x into n blocks, run f on each
    block (as device `i` would), and concatenate the blocks of the result along axis 0."""
    def mapped(*xs):
        # BUILD rung 11: blocks = a named batch axis of size n in front of each block
        def split(x):
            s = c.shape_dtype(x)[0]
            return x.reshape((num_devices, s[0] // num_devices) + s[1:])
        out = vmap_named(f, axis_name)(*map(split, xs))
        s = c.shape_dtype(out)[0]
        return out.reshape((s[0] * s[1],) + s[2:])
        # END BUILD
    return mapped
