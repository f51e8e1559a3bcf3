"""Set operations: `unique` and `isin`.

`unique` has a value-dependent output shape: it needs a concrete input, or JAX's static `size=`
(then `fill_value` pads the result); under tracing without `size` it raises
ConcretizationTypeError, as JAX. Mirrors jax/_src/numpy/setops.py.
"""

from __future__ import annotations

import numpy as np

from minijax import core
from minijax import lax
from minijax.numpy import indexing
from minijax.numpy import lax_numpy
from minijax.numpy import reductions
from minijax.numpy import ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    canonicalize_axis, concrete_or_none, dtype_of, is_floating, promote_dtypes, shape_of,
    size_error, slice_axis,
)

_int = np.int32


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto"):
    """bool[element.shape]: whether each entry of `element` is in `test_elements` (one
    comparison of every pair)."""
    element, test = promote_dtypes(asarray(element), lax_numpy.ravel(asarray(test_elements)))
    nd = core.get_aval(element).ndim
    shape = shape_of(element) + shape_of(test)
    eq = lax.eq(lax.broadcast_in_dim(element, shape, tuple(range(nd))),
                lax.broadcast_in_dim(test, shape, (nd,)))
    out_ = (reductions.any(eq, axis=-1) if shape_of(test)[0]
            else lax.full(shape_of(element), False, np.bool_))
    return lax.bitwise_not(out_) if invert else out_


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value=None, sorted: bool = True):
    """The sorted distinct values of the flattened `ar` (`T[k]`), or with `axis` its distinct
    slices along that axis (`T[..., k, ...]`, ordered lexicographically). With `size`, k = size
    and missing entries are `fill_value` (default: the smallest value or slice). Without
    `size`, `ar` must be concrete (ConcretizationTypeError under tracing).

    A stable sort of the slices (rows of `m` entries, `m` sort keys) with an iota: a row starts
    a new value where it differs from its predecessor, and a cumsum of those starts numbers the
    values. Also returned, in order, if asked: `return_index` (int32[k], where each value first
    occurs; fill: the first entry), `return_inverse` (int32: the number of each entry's value,
    of ar's shape without `axis`, int32[ar.shape[axis]] with it) and `return_counts`
    (int32[k], 0 for fill entries). Raises ValueError for an empty input with `size` but no
    `fill_value` (JAX's), NotImplementedError for slices with no entries."""
    ar = asarray(ar)
    in_shape = shape_of(ar)
    if axis is None:
        ax, moved = None, lax_numpy.ravel(ar)
    else:
        ax = canonicalize_axis(axis, len(in_shape))
        moved = lax_numpy.moveaxis(ar, ax, 0)
    n, rest = shape_of(moved)[0], shape_of(moved)[1:]
    m = int(np.prod(rest, dtype=int))
    if n == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    if n == 0:
        out_ = lax.full((size or 0, *rest), 0 if fill_value is None else fill_value,
                        dtype_of(ar))
        empty_int = lax.full((0,), 0, _int)
        extras = [empty_int] * return_index + [
            lax.reshape(empty_int, in_shape) if ax is None else empty_int] * return_inverse + \
            [empty_int] * return_counts
        out_ = out_ if ax is None else lax_numpy.moveaxis(out_, 0, ax)
        return (out_, *extras) if extras else out_
    if m == 0:
        raise NotImplementedError(f"minijax.numpy.unique: slices of shape {rest} along axis "
                                  f"{axis} have no entries")
    rows = lax.reshape(moved, (n, m))
    *cols, perm = lax.sort([*(lax.reshape(slice_axis(rows, 1, j, j + 1), (n,))
                              for j in range(m)), lax.iota(_int, n)], 0, num_keys=m)
    s = lax_numpy.stack(cols, axis=1)  # the rows, sorted
    later, earlier = slice_axis(s, 0, 1, n), slice_axis(s, 0, 0, n - 1)
    neq = lax.ne(later, earlier)
    if equal_nan and is_floating(s):
        both_nan = lax.bitwise_and(ufuncs.isnan(later), ufuncs.isnan(earlier))
        neq = lax.bitwise_and(neq, lax.bitwise_not(both_nan))
    first = lax_numpy.concatenate([lax.full((1,), True, np.bool_), reductions.any(neq, axis=1)],
                                  0)
    if size is None:
        val = concrete_or_none(first, "unique")
        if val is None:
            raise size_error("unique", ar)
        size = int(val.sum())
    group = lax.sub(lax.cumsum(lax.convert_element_type(first, _int), 0), np.array(1, _int))
    dest = lax.select(first, group, lax.full_like(group, size))
    n_unique = lax.add(indexing.rewriting_take(group, -1), np.array(1, _int))
    valid = lax.lt(lax.iota(_int, size), n_unique)
    out_ = lax.full((size, m), 0, dtype_of(s)).at[dest].set(s, mode="drop")
    out_ = lax.reshape(out_, (size, *rest))
    fill = lax.reshape(indexing.rewriting_take(s, 0), rest) if fill_value is None else \
        lax.convert_element_type(asarray(fill_value), dtype_of(s))
    out_ = lax_numpy.where(lax.broadcast_in_dim(valid, (size, *rest), (0,)), out_, fill)
    out_ = out_ if ax is None else lax_numpy.moveaxis(out_, 0, ax)
    extras = []
    if return_index:
        index = lax.full((size,), 0, _int).at[dest].set(perm, mode="drop")
        extras.append(lax_numpy.where(valid, index, indexing.rewriting_take(index, 0)))
    if return_inverse:
        inverse = lax.full((n,), 0, _int).at[perm].set(group)
        extras.append(lax.reshape(inverse, in_shape) if ax is None else inverse)
    if return_counts:
        extras.append(lax.full((size,), 0, _int).at[group].add(lax.full((n,), 1, _int),
                                                                mode="drop"))
    return (out_, *extras) if extras else out_
