"""Solution: batching rules (chapter 05).

A batching rule gets the operands and, for each, the position of its batch axis (an int, or
`not_mapped` (None) for an operand without one), plus the batch size and the primitive's
params: `rule(vals, dims, *, axis_size, **params) -> (out, out_dim)`. It must compute the
primitive for every example at once, with one bind of a primitive on the whole batch, and say
where the batch axis of the output is.

Write the rules of the three primitives below with `minijax.lax` operations; the helper
`move_to_front` is yours to use. The tests install them in
`minijax.interpreters.batching.primitive_batchers` in place of minijax's own and compare
`minijax.vmap` with `jax.vmap` over several `in_axes`. JAX's rules:
jax/_src/lax/lax.py (`_reduce_sum` uses `batching.defreducer`, `_transpose_batch_rule`,
`_broadcast_in_dim_batch_rule`).
"""

from __future__ import annotations

from minijax import lax
from minijax.interpreters import batching


def move_to_front(x, dim: int):
    """`x` with its axis `dim` moved to position 0."""
    return batching.moveaxis(x, dim, 0)


def reduce_sum_batch_rule(vals, dims, *, axis_size, axes, out_sharding=None):
    """`reduce_sum(x, axes)` per example: which axes must the batched sum reduce?"""
    (x,), (d,) = vals, dims
    x = move_to_front(x, d)  # the batch axis first: every example axis moves up by one
    return lax.reduce_sum(x, tuple(a + 1 for a in axes)), 0


def transpose_batch_rule(vals, dims, *, axis_size, permutation):
    """`transpose(x, permutation)` per example, the batch axis kept in place."""
    (x,), (d,) = vals, dims
    x = move_to_front(x, d)
    return lax.transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


def broadcast_in_dim_batch_rule(vals, dims, *, axis_size, shape, broadcast_dimensions,
                                sharding=None):
    """`broadcast_in_dim(x, shape, broadcast_dimensions)` per example."""
    (x,), (d,) = vals, dims
    x = move_to_front(x, d)
    dims_out = (0,) + tuple(b + 1 for b in broadcast_dimensions)
    return lax.broadcast_in_dim(x, (axis_size,) + tuple(shape), dims_out), 0


RULES = {"reduce_sum": reduce_sum_batch_rule, "transpose": transpose_batch_rule,
         "broadcast_in_dim": broadcast_in_dim_batch_rule}
