"""Sorting: `sort` and `argsort` along an axis, both one stable `lax.sort`.

Mirrors jax/_src/numpy/sorting.py.
"""

from __future__ import annotations

import builtins

import numpy as np

from minijax import core, lax
from minijax.lax import lax as lax_internal
from minijax.numpy import indexing, lax_numpy
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis, jit_when_traced, shape_of

_int = np.int32


# JAX: jax/_src/numpy/sorting.py sort (under jit, as JAX's)
@jit_when_traced(static_argnames=("axis", "kind", "order", "stable", "descending"))
def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """`a` sorted along `axis` (None: the flattened array); NaNs last. Stable."""
    if order is not None:
        raise ValueError("'order' argument to sort is not supported.")
    a = asarray(a)
    if axis is None:
        a, axis = lax_numpy.ravel(a), 0
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    out_ = lax.sort(a, axis, is_stable=stable)
    return lax.rev(out_, (axis,)) if descending else out_


# JAX: jax/_src/numpy/sorting.py argsort (under jit, as JAX's)
@jit_when_traced(static_argnames=("axis", "kind", "order", "stable", "descending"))
def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False):
    """int32 indices that sort `a` along `axis` (None: flattened). Stable: equal elements keep
    their order (also with `descending`). ValueError for `order`."""
    if order is not None:
        raise ValueError("'order' argument to argsort is not supported.")
    a = asarray(a)
    if axis is None:
        a, axis = lax_numpy.ravel(a), 0
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    iota = lax.broadcasted_iota(_int, shape_of(a), axis)
    if descending and stable:  # reversed, so that ties keep their order once reversed back
        a, iota = lax.rev(a, (axis,)), lax.rev(iota, (axis,))
    _, idx = lax.sort_key_val(a, iota, axis, is_stable=stable)
    return lax.rev(idx, (axis,)) if descending else idx


def lexsort(keys, axis: int = -1):
    """int32 indices that sort by the last key first, then the one before, ...: `keys` is a
    sequence (or the rows of an array) of equal shapes. One stable sort per key."""
    keys = [asarray(k) for k in keys] if not hasattr(keys, "shape") else \
        [lax_numpy.squeeze(k, 0) for k in lax_numpy.split(asarray(keys), shape_of(keys)[0])]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    shape = shape_of(keys[0])
    if builtins.any(shape_of(k) != shape for k in keys):
        raise ValueError("all keys need to be the same shape")
    if not shape:  # scalar keys (a 1-D array's rows): one item to order, as JAX
        return lax.full((), 0, _int)
    axis = canonicalize_axis(axis, len(shape))
    idx = lax.broadcasted_iota(_int, shape, axis)
    for k in keys:  # least significant key first; a stable sort keeps earlier keys' order
        k = indexing.take_along_axis(k, idx, axis)
        _, perm = lax.sort_key_val(k, lax.broadcasted_iota(_int, shape, axis), axis,
                                   is_stable=True)
        idx = indexing.take_along_axis(idx, perm, axis)
    return idx


def _partition_operand(name: str, a, kth: int, axis: int):
    a = asarray(a)
    if np.issubdtype(core.get_aval(a).dtype, np.complexfloating):
        raise NotImplementedError(f"jnp.{name} for complex dtype is not implemented (as in "
                                  "JAX)")
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    n = shape_of(a)[axis]
    kth = canonicalize_axis(kth, n, "kth")
    a = lax_numpy.swapaxes(a, axis, -1)
    # the kth + 1 smallest come from top_k of the negation; unsigned values shift by one so
    # that 0 stays the smallest after negating
    neg = (lax.neg(lax.add(a, lax_internal._const(a, 1)))
           if np.issubdtype(core.get_aval(a).dtype, np.unsignedinteger) else lax.neg(a))
    return a, axis, kth, n, neg


def partition(a, kth: int, axis: int = -1):
    """`a` with, along `axis`, the kth smallest value at position kth, the smaller ones before
    it and the larger after (each part in top_k's order, as JAX's). Not for complex."""
    a, axis, kth, n, neg = _partition_operand("partition", a, kth, axis)
    bottom = lax.neg(lax.top_k(neg, kth + 1)[0])
    if np.issubdtype(core.get_aval(a).dtype, np.unsignedinteger):
        bottom = lax.sub(bottom, lax_internal._const(bottom, 1))
    top = lax.top_k(a, n - kth - 1)[0]
    return lax_numpy.swapaxes(lax.concatenate([bottom, top], core.get_aval(a).ndim - 1), -1,
                              axis)


def argpartition(a, kth: int, axis: int = -1):
    """The indices (int32) that `partition` would place along `axis`."""
    a, axis, kth, n, neg = _partition_operand("argpartition", a, kth, axis)
    bottom = lax.top_k(neg, kth + 1)[1]
    # the rest: the indices not in `bottom`, found by top_k of a 0/1 proxy (robust to ties)
    nd = core.get_aval(a).ndim
    hit = lax.eq(lax.broadcast_in_dim(bottom, (*shape_of(bottom), n), tuple(range(nd))),
                 lax.broadcasted_iota(_int, (*shape_of(bottom), n), nd))
    taken = lax.reduce_max(lax.convert_element_type(hit, np.float32), (nd - 1,))
    proxy = lax.sub(lax_internal._const(taken, 1), taken)
    top = lax.top_k(proxy, n - kth - 1)[1]
    return lax_numpy.swapaxes(lax.concatenate([bottom, top], nd - 1), -1, axis)


def sort_complex(a):
    """`a` sorted along its last axis (real part first, then imaginary), as a complex array."""
    out_ = sort(asarray(a), axis=-1)
    dtype = core.get_aval(out_).dtype
    if not np.issubdtype(dtype, np.complexfloating):
        out_ = lax.convert_element_type(out_, np.complex128 if dtype == np.float64
                                        else np.complex64)
    return out_
