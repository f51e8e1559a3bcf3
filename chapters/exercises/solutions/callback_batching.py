"""Solution: the `vmap_method="expand_dims"` batching rule of `pure_callback` (chapter 14)."""

from __future__ import annotations

from minijax import lax
from minijax.callback import _FlatCallback, pure_callback_p
from minijax.interpreters import batching


def batched_callback(callback: _FlatCallback, batched_avals) -> _FlatCallback:
    return _FlatCallback(callback.callback_func, callback.in_tree, batched_avals, callback.api)


def expand_dims_rule(vals, dims, *, axis_size, callback, result_avals, sharding, vmap_method):
    operands = [batching.moveaxis(x, d, 0) if d is not None else lax.expand_dims(x, (0,))
                for x, d in zip(vals, dims)]
    avals = tuple(a.update(shape=(axis_size, *a.shape)) for a in result_avals)
    outs = pure_callback_p.bind(*operands, callback=batched_callback(callback, avals),
                                result_avals=avals, sharding=sharding, vmap_method=vmap_method)
    return outs, [0] * len(outs)
