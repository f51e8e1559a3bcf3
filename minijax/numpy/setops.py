"""Set operations: `unique` and `isin`, and those of two arrays (union1d, intersect1d, ...).

`unique` has a value-dependent output shape: it needs a concrete input, or JAX's static `size=`
(then `fill_value` pads the result); under tracing without `size` it raises
ConcretizationTypeError, as JAX. Mirrors jax/_src/numpy/setops.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from minijax import core, lax
from minijax.numpy import indexing, lax_numpy, reductions, ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    canonicalize_axis,
    concrete_or_none,
    dtype_of,
    is_floating,
    promote_dtypes,
    shape_of,
    size_error,
    slice_axis,
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


# ---------------------------------------------------------------------------------------------
# Set operations of two arrays: each value of one is kept or not, then the kept ones compacted
# ---------------------------------------------------------------------------------------------

def _unique_with_valid(ar):
    """The distinct values of the flattened `ar`, padded to its size, and which are real."""
    ar = lax_numpy.ravel(asarray(ar))
    n = shape_of(ar)[0]
    if n == 0:
        return ar, lax.full((0,), False, np.bool_)
    values, counts = unique(ar, size=n, return_counts=True)
    return values, lax.gt(counts, np.array(0, _int))


def _compact(name: str, values, keep, size, fill_value, default_fill, by_value=False):
    """The entries of `values` where `keep`, in order (sorted if `by_value`), padded to `size`
    with `fill_value` (None: `default_fill(result)`); `size` None needs a concrete `keep`."""
    n = shape_of(values)[0]
    if size is None:
        val = concrete_or_none(keep, name)
        if val is None:
            raise size_error(name, values)
        size = int(val.sum())
    if n == 0:
        return lax.full((size,), 0 if fill_value is None else fill_value, dtype_of(values))
    drop = lax.convert_element_type(lax.bitwise_not(keep), _int)
    _, ordered = lax.sort([drop, values], 0, num_keys=2 if by_value else 1)
    ordered = (slice_axis(ordered, 0, 0, size) if size <= n else
               lax_numpy.concatenate([ordered, lax.full((size - n,), 0, dtype_of(values))], 0))
    if size == 0:  # nothing kept: no entry to fill (nor a first result to fill with)
        return ordered
    count = reductions.sum(keep, dtype=_int)
    valid = lax.lt(lax.iota(_int, size), count)
    fill = default_fill(ordered) if fill_value is None else fill_value
    return lax_numpy.where(valid, ordered, lax.convert_element_type(asarray(fill),
                                                                    dtype_of(values)))


def _first(x):
    return indexing.rewriting_take(x, 0)


def union1d(ar1, ar2, *, size: int | None = None, fill_value=None):
    """The sorted distinct values in either array (`T[k]`; `size`/`fill_value` as `unique`)."""
    a, b = promote_dtypes(lax_numpy.ravel(asarray(ar1)), lax_numpy.ravel(asarray(ar2)))
    return unique(lax_numpy.concatenate([a, b], 0), size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
              fill_value=None):
    """The sorted distinct values of `ar1` not in `ar2`; needs concrete inputs or a static
    `size` (then `fill_value`, default 0, pads)."""
    a, b = promote_dtypes(asarray(ar1), asarray(ar2))
    if assume_unique:
        values = lax_numpy.ravel(a)
        valid = lax.full(shape_of(values), True, np.bool_)
    else:
        values, valid = _unique_with_valid(a)
    keep = lax.bitwise_and(valid, isin(values, b, invert=True))
    return _compact("setdiff1d", values, keep, size, fill_value,
                    lambda out_: lax.full((), 0, dtype_of(out_)))


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
             fill_value=None):
    """The sorted values in exactly one of the two arrays (`fill_value` default: the first
    result)."""
    a, b = promote_dtypes(asarray(ar1), asarray(ar2))
    ua, va = _unique_with_valid(a)
    ub, vb = _unique_with_valid(b)
    keep = lax_numpy.concatenate([lax.bitwise_and(va, isin(ua, b, invert=True)),
                                  lax.bitwise_and(vb, isin(ub, a, invert=True))], 0)
    return _compact("setxor1d", lax_numpy.concatenate([ua, ub], 0), keep, size, fill_value,
                    _first, by_value=True)


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value=None):
    """The sorted distinct values in both arrays; with `return_indices` also where each first
    occurs in the flattened ar1 and ar2 (int32). `fill_value` default: the first result."""
    a, b = promote_dtypes(lax_numpy.ravel(asarray(ar1)), lax_numpy.ravel(asarray(ar2)))
    ua, va = _unique_with_valid(a)
    keep = lax.bitwise_and(va, isin(ua, b))
    out_ = _compact("intersect1d", ua, keep, size, fill_value, _first)
    if not return_indices:
        return out_
    if not shape_of(a)[0] or not shape_of(b)[0]:
        empty = lax.full((shape_of(out_)[0],), 0, _int)
        return out_, empty, empty
    _, ia = unique(a, size=shape_of(a)[0], return_index=True)
    ub, ib = unique(b, size=shape_of(b)[0], return_index=True)
    _, vb = _unique_with_valid(b)
    k = shape_of(out_)[0]
    ia_kept = _compact("intersect1d", ia, keep, k, 0, _first)
    ib_kept = _compact("intersect1d", ib, lax.bitwise_and(vb, isin(ub, a)), k, 0, _first)
    return out_, ia_kept, ib_kept


# JAX: jax/_src/numpy/setops.py _UniqueAllResult
class _UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class _UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class _UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def unique_all(x, /, *, size: int | None = None, fill_value=None):
    """The array API's `unique` with everything: (values, indices, inverse_indices (x's
    shape), counts), NaNs distinct."""
    return _UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                    return_counts=True, equal_nan=False, size=size,
                                    fill_value=fill_value))


def unique_counts(x, /, *, size: int | None = None, fill_value=None):
    """(values, counts) of the distinct values of `x`."""
    return _UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_inverse(x, /, *, size: int | None = None, fill_value=None):
    """(values, inverse_indices): the distinct values and each entry's position among them."""
    return _UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                        fill_value=fill_value))


def unique_values(x, /, *, size: int | None = None, fill_value=None):
    """The distinct values of `x`, sorted."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)
