"""Sorting: `sort` and `argsort` along an axis, both one stable `lax.sort`.

Mirrors jax/_src/numpy/sorting.py.
"""

from __future__ import annotations

import builtins

import numpy as np

from minijax import core
from minijax import lax
from minijax.numpy import indexing, lax_numpy
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis, shape_of

_int = np.int32


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


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False):
    """int32 indices that sort `a` along `axis` (None: flattened). Stable: equal elements keep
    their order (also with `descending`)."""
    if order is not None:
        raise ValueError("'order' argument to argsort is not supported.")
    a = asarray(a)
    if axis is None:
        a, axis = lax_numpy.ravel(a), 0
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    if descending:
        a = lax.rev(a, (axis,))
    iota = lax.broadcasted_iota(_int, shape_of(a), axis)
    _, idx = lax.sort_key_val(a, iota, axis, is_stable=stable)
    if descending:
        idx = lax.sub(np.array(shape_of(a)[axis] - 1, _int), lax.rev(idx, (axis,)))
    return idx



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
    axis = canonicalize_axis(axis, len(shape))
    idx = lax.broadcasted_iota(_int, shape, axis)
    for k in keys:  # least significant key first; a stable sort keeps earlier keys' order
        k = indexing.take_along_axis(k, idx, axis)
        _, perm = lax.sort_key_val(k, lax.broadcasted_iota(_int, shape, axis), axis,
                                   is_stable=True)
        idx = indexing.take_along_axis(idx, perm, axis)
    return idx
