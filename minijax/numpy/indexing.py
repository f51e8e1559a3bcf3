"""NumPy's advanced indexing (`x[idx_array]`) and indexed updates (`x.at[idx].set(y)`).

`x[...]` with only ints, slices, None and Ellipsis is *basic* indexing, done with `lax.slice`
in `rewriting_take` (with one `dynamic_slice` instead when an index is a scalar integer array,
traced or not, as JAX). As soon as one index
is an integer array (or a list, or a concrete boolean mask, turned into integer arrays with
`nonzero`), NumPy's advanced rules apply and the work becomes one `lax.gather`:

1. every slice is applied first, with the basic path (the rank does not change);
2. the advanced indices (int arrays and ints) are broadcast together to a shape S, negative
   entries wrapped, and stacked into an index vector: one gather picks them, giving S + the
   sliced dims;
3. the `None` axes are inserted, and if the advanced indices were next to each other the S
   dims move to where the first of them stood (NumPy's rule; otherwise S stays in front).

`x.at[idx].set/add/mul/min/max(y)` indexes an iota of x's flat positions the same way, so any
index `x[idx]` accepts gives the positions it reads; those are scattered into `x.ravel()`.
Mirrors jax/_src/numpy/indexing.py (JAX instead builds the gather/scatter dimension numbers
directly from the index, `_index_to_gather`). Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
from typing import NamedTuple

import numpy as np

from minijax import core, dtypes, lax
from minijax.array import Array
from minijax.core import Tracer
from minijax.lax import lax as lax_internal, slicing
from minijax.numpy import ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    broadcast_arrays,
    broadcast_to,
    canonicalize_axis,
    dtype_kind,
    jit_when_traced,
    promote_dtypes,
    where,
)

_MODES = (None, "promise_in_bounds", "clip", "fill", "drop")


# ---------------------------------------------------------------------------------------------
# Basic indexing: x[ints, slices, None, ...]
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/indexing.py rewriting_take
def rewriting_take(x, idx, mode=None, fill_value=None, indices_are_sorted=False,
                   unique_indices=False):
    """`x[idx]`. Basic indexing here: ints, slices (any step), None and Ellipsis, as one
    static slice (`_to_static_slice`, `_static_slice`); with a scalar integer array among them
    (`x[jnp.int32(1), 1:]`, a traced `i`), one dynamic slice (`_to_dynamic_slice`,
    `_dynamic_slice`). An index with an integer array, a list or a boolean mask is advanced
    indexing, one gather: `advanced_take` below, which `mode`/`fill_value` apply to; so is an
    out-of-bounds int (JAX clamps reads, mode "fill" gives `fill_value`), a scalar array index
    under mode "fill"/"drop", and one with a slice of step other than 1 or -1."""
    x = asarray(x)
    aval = core.get_aval(x)
    idx = idx if isinstance(idx, tuple) else (idx,)
    if builtins.any(is_advanced(i) for i in idx):
        return advanced_take(x, idx, mode, fill_value, indices_are_sorted, unique_indices)
    idx = _parse_indices(idx, aval)
    if builtins.any(_is_scalar_array_index(i) for i in idx):
        dynamic = _to_dynamic_slice(idx, aval, mode)
        if dynamic is not None:
            return _dynamic_slice(x, dynamic)
    else:
        indexer = _to_static_slice(idx, aval, mode)
        if indexer is not None:
            return _static_slice(x, aval, indexer)
    # a read a slice cannot express: one gather
    return advanced_take(x, idx, mode, fill_value, indices_are_sorted, unique_indices)


# JAX: jax/_src/numpy/indexing.py _parse_indices — differs: returns the index itself, with
# the Ellipsis expanded and missing trailing dimensions added as whole slices
def _parse_indices(idx: tuple, aval) -> tuple:
    """One entry per dimension of `aval` (plus the Nones): IndexError for two Ellipses or
    more indices than dimensions."""
    n_ell = builtins.sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > aval.ndim:
        raise IndexError(f"Too many indices: array of shape {aval.shape} is {aval.ndim}-"
                         f"dimensional, but {n_real} were indexed")
    if n_ell:
        k = idx.index(Ellipsis)
        return idx[:k] + (builtins.slice(None),) * (aval.ndim - n_real) + idx[k + 1:]
    return idx + (builtins.slice(None),) * (aval.ndim - n_real)


# JAX: jax/_src/numpy/indexing.py _StaticSliceIndexer
class _StaticSliceIndexer(NamedTuple):
    starts: list
    limits: list
    strides: list
    rev_axes: list
    squeeze_axes: list
    newaxis_dims: list


# JAX: jax/_src/numpy/indexing.py _DynamicSliceIndexer
class _DynamicSliceIndexer(NamedTuple):
    starts: list
    sizes: list
    rev_axes: list
    squeeze_axes: list
    newaxis_dims: list


# JAX: jax/_src/core.py canonicalize_slice
def _canonicalize_slice(i: builtins.slice, size) -> tuple:
    """(start, stop, step, length) of `x[i]` along a dimension of `size`, as `slice.indices` but
    for a symbolic size too (`x[::2]` of `b` rows reads `floordiv(b + 1, 2)`); a bound whose
    sign the variables leave open raises InconclusiveDimensionOperation, as in JAX."""
    step = 1 if i.step is None else core.canonicalize_dim(i.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")

    def clamp(b):
        b = core.canonicalize_dim(b)
        if b >= 0:
            return core.min_dim(size if step > 0 else size - 1, b)
        return core.max_dim(0 if step > 0 else -1, size + b)
    start = (0 if step > 0 else size - 1) if i.start is None else clamp(i.start)
    stop = (size if step > 0 else -1) if i.stop is None else clamp(i.stop)
    gap, distance = abs(step), (stop - start) if step > 0 else (start - stop)
    return start, stop, step, core.max_dim(0, distance + gap - 1) // gap


# JAX: jax/_src/numpy/indexing.py NDIndexer.to_static_slice
def _to_static_slice(idx: tuple, aval, mode) -> _StaticSliceIndexer | None:
    """The slice, reversal, squeeze and new axes that read `x[idx]` (an index from
    `_parse_indices`, of Python/NumPy ints, slices and None); None where a gather must read it
    instead (an out-of-bounds int). NotImplementedError for any other index."""
    out = _StaticSliceIndexer([], [], [], [], [], [])
    dim = 0
    out_pos = 0
    for i in idx:
        if i is None:
            out.newaxis_dims.append(out_pos)
            out_pos += 1
            continue
        size_d = aval.shape[dim]
        if isinstance(i, builtins.slice):
            # `:` keeps the dimension whole, also a symbolic one (chapters/31-export.md)
            if isinstance(size_d, int):
                start, stop, step = i.indices(size_d)
                n = builtins.max(0, (start - stop - step - 1) // (-step))
            else:  # a symbolic size (chapters/31-export.md)
                start, stop, step, n = (0, size_d, 1, size_d) if i == builtins.slice(None) \
                    else _canonicalize_slice(i, size_d)
            if step > 0:
                out.starts.append(start)
                out.limits.append(core.max_dim(start, stop))  # as JAX: not trimmed
                out.strides.append(step)
            else:
                first, last = start, start + (n - 1) * step if n != 0 else start
                out.starts.append(last if n != 0 else 0)
                out.limits.append(first + 1 if n != 0 else 0)
                out.strides.append(-step)
                if n != 0:
                    out.rev_axes.append(dim)
            out_pos += 1
        elif _is_int_index(i):
            v = int(i)
            if not -size_d <= v < size_d:
                return None  # as JAX: an out-of-bounds read is clamped (or filled): a gather
            v = v + size_d if v < 0 else v  # (a symbolic size: b - 1, no modulo)
            out.starts.append(v)
            out.limits.append(v + 1)
            out.strides.append(1)
            out.squeeze_axes.append(dim)
        else:
            raise NotImplementedError(
                f"minijax indexing supports ints (also traced scalar ints), slices, None and "
                f"Ellipsis; got {type(i).__name__}"
                f"{'' if not isinstance(i, Tracer) else ' (a traced array index)'}"
                ". Array indices (gather) come later.")
        dim += 1
    return out


# JAX: jax/_src/numpy/indexing.py _static_slice
def _static_slice(x, aval, indexer: _StaticSliceIndexer):
    starts, limits, strides = indexer.starts, indexer.limits, indexer.strides
    out = x
    if (tuple(starts), tuple(limits)) != ((0,) * aval.ndim, aval.shape) or any(
            s != 1 for s in strides):
        out = lax.slice(out, starts, limits, None if all(s == 1 for s in strides) else strides)
    return _reverse_squeeze_expand(out, indexer)


def _reverse_squeeze_expand(out, indexer):
    if indexer.rev_axes:
        out = lax.rev(out, tuple(indexer.rev_axes))
    if indexer.squeeze_axes:
        out = lax.squeeze(out, tuple(indexer.squeeze_axes))
    if indexer.newaxis_dims:
        out = lax.expand_dims(out, tuple(indexer.newaxis_dims))
    return out


def _is_scalar_array_index(i) -> bool:
    """A scalar integer array index (JAX's IndexType.ARRAY of rank 0), traced or not: read with
    a dynamic slice, where a Python or NumPy int is read with a static one."""
    return (isinstance(i, (Array, Tracer, np.ndarray)) and not isinstance(i, np.generic)
            and core.get_aval(i).shape == () and np.dtype(core.get_aval(i).dtype).kind in "iu")


# JAX: jax/_src/numpy/indexing.py NDIndexer.to_dynamic_slice
def _to_dynamic_slice(idx: tuple, aval, mode) -> _DynamicSliceIndexer | None:
    """The one dynamic slice, then reversal, squeeze and new axes, that read `x[idx]` (ints,
    scalar integer arrays, slices of step 1 or -1, None); None where a gather must read it
    instead (mode "fill"/"drop", which a slice cannot mask; a slice of another step). Each
    index starts its dimension (negative ones wrapped by `dynamic_slice`, out-of-range ones
    clamped); with more than one dimension all starts are made int32 arrays, as JAX's."""
    if mode not in (None, "promise_in_bounds", "clip"):
        return None
    if builtins.any(isinstance(i, builtins.slice) and i.step not in (None, 1, -1) for i in idx):
        return None
    out = _DynamicSliceIndexer([], [], [], [], [])
    for i in idx:
        if i is None:
            out.newaxis_dims.append(len(out.starts) - len(out.squeeze_axes)
                                    + len(out.newaxis_dims))
        elif isinstance(i, builtins.slice):
            axis = len(out.starts)
            start, stop, step, n = _canonicalize_slice(i, aval.shape[axis])
            out.starts.append(stop + 1 if step < 0 else start)  # (step -1: n ends at start)
            out.sizes.append(n)
            if step < 0:
                out.rev_axes.append(axis)
        else:
            axis = len(out.starts)
            if isinstance(aval.shape[axis], int) and aval.shape[axis] == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            out.starts.append(asarray(i))
            out.sizes.append(1)
            out.squeeze_axes.append(axis)
    if len(out.starts) > 1:  # dynamic_slice's starts must share one dtype
        out.starts[:] = [lax.convert_element_type(s, np.int32) for s in out.starts]
    return out


# JAX: jax/_src/numpy/indexing.py _dynamic_slice
def _dynamic_slice(x, indexer: _DynamicSliceIndexer):
    out = lax.dynamic_slice(x, indexer.starts, indexer.sizes)
    return _reverse_squeeze_expand(out, indexer)

def _is_int_index(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return False
    if isinstance(i, (int, np.integer)):
        return True
    if isinstance(i, (Array, np.ndarray)) and i.shape == () and np.dtype(i.dtype).kind in "iu":
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Advanced indexing: one gather
# ---------------------------------------------------------------------------------------------

def is_advanced(i) -> bool:
    """Whether index entry `i` makes the whole index an advanced one."""
    if isinstance(i, (list, np.ndarray)) and not (isinstance(i, np.ndarray) and i.ndim == 0
                                                   and i.dtype.kind != "b"):
        return True
    if isinstance(i, (Array, Tracer)):
        aval = core.get_aval(i)
        return aval.ndim > 0 or aval.dtype == np.bool_
    return False


def _expand_bool_masks(idx: tuple, shape: tuple) -> tuple:
    """Each concrete boolean mask as the integer arrays of its True positions, after checking
    that its shape matches the axes of `shape` it covers (JAX's IndexError otherwise)."""
    idx = [np.asarray(i) if isinstance(i, list) else i for i in idx]
    avals = [core.get_aval(i) if isinstance(i, (Array, Tracer, np.ndarray)) else None
             for i in idx]
    masks = [a is not None and a.dtype == np.bool_ for a in avals]
    # how many axes of x each entry covers: a mask its rank, None and Ellipsis none
    widths = [a.ndim if m else 0 if i is None or i is Ellipsis else 1
              for i, a, m in zip(idx, avals, masks)]
    out, axis = [], 0
    for position, (i, aval, mask) in enumerate(zip(idx, avals, masks)):
        if i is Ellipsis:
            axis = len(shape) - builtins.sum(widths[position + 1:])
        if mask:
            if isinstance(i, Tracer):
                raise core.NonConcreteBooleanIndexError(
                    "Array boolean indices must be concrete: the shape of x[mask] depends on "
                    f"the values of the mask ({aval.str_short()}). Use jnp.where instead.")
            expected = list(shape[axis:axis + aval.ndim])
            if not builtins.all(s1 in (0, s2) for s1, s2 in zip(aval.shape, expected)):
                # JAX: jax/_src/numpy/indexing.py NDIndexer.expand_bool_indices
                raise IndexError("boolean index did not match shape of indexed array in index "
                                 f"{position}: got {aval.shape}, expected {expected}")
            out.extend(np.nonzero(np.asarray(i)))
        else:
            out.append(i)
        axis += widths[position]
    return tuple(out)


def _normalize(index, shape: tuple) -> list:
    """The index as a list: lists made arrays, concrete boolean masks their True positions;
    Ellipsis kept (`_index_to_gather` expands it). IndexError for two Ellipses or too many
    indices."""
    ndim = len(shape)
    idx = _expand_bool_masks(index if isinstance(index, tuple) else (index,), shape)
    if builtins.sum(1 for i in idx if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > ndim:
        raise IndexError(f"Too many indices: array is {ndim}-dimensional, but {n_real} were "
                         "indexed")
    return [asarray(i) if isinstance(i, list) else i for i in idx]


def _is_array_entry(e) -> bool:
    """JAX's IndexType.ARRAY (an integer array of any rank) or INTEGER (a Python/NumPy int)."""
    if isinstance(e, (Array, Tracer, np.ndarray)):
        if dtype_kind(e) not in "iu":
            raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                            f"{core.get_aval(e).dtype.name}")
        return True
    return isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))


# JAX: jax/_src/numpy/indexing.py _GatherIndexer
class _GatherIndexer(NamedTuple):
    slice_shape: tuple          # the shape of x[idx]
    gather_slice_shape: tuple   # the gather's slice_sizes
    gather_indices: object      # int[..., k], the index vector last
    dnums: slicing.GatherDimensionNumbers
    unique_indices: bool        # no advanced index: each position read once, in order
    indices_are_sorted: bool
    reversed_y_dims: tuple      # dims of negative-step slices, reversed after the gather
    newaxis_dims: tuple         # the None axes, inserted after the gather


# JAX: jax/_src/numpy/indexing.py NDIndexer.normalize_indices
def _normalized(e, size):
    """A negative index counted from the end: Python ints at once, arrays with a select (a
    NumPy index stays NumPy where JAX's does, so its comparison is a constant)."""
    if not isinstance(e, (Array, Tracer, np.ndarray)):
        return e if isinstance(e, np.unsignedinteger) else e + size if e < 0 else e
    if dtype_kind(e) == "u":
        return e
    dtype = dtypes.canonicalize_dtype(core.get_aval(e).dtype)
    n = (np.array(size, dtype=dtype) if isinstance(size, int) else  # a symbolic size
         lax.convert_element_type(core.dimension_as_value(size), dtype))
    return lax.select(e < 0, lax.add(e, n), e)


# JAX: jax/_src/numpy/indexing.py _index_to_gather
def _index_to_gather(shape: tuple, idx: list) -> _GatherIndexer:
    """The gather that reads `x[idx]` (x of `shape`, `idx` from `_normalize`), built entry by
    entry as JAX's: ints and arrays are index components (the advanced ones broadcast
    together, their dims where the first stood when they are contiguous, else in front),
    partial unit-step slices a start component and a window, other slices an iota of
    positions, None a dim inserted afterwards."""
    advanced = np.nonzero([_is_array_entry(e) for e in idx])[0]
    contiguous = bool(np.all(np.diff(advanced) == 1))
    if Ellipsis in [e for e in idx if not isinstance(e, (Array, Tracer, np.ndarray))]:
        k = next(n for n, e in enumerate(idx) if e is Ellipsis)
        n_real = builtins.sum(1 for e in idx if e is not None and e is not Ellipsis)
        idx = idx[:k] + [builtins.slice(None)] * (len(shape) - n_real) + idx[k + 1:]
    n_real = builtins.sum(1 for e in idx if e is not None)
    idx = list(idx) + [builtins.slice(None)] * (len(shape) - n_real)
    axis_of = np.cumsum([e is not None for e in idx]) - 1  # the axis each entry consumes
    idx = [_normalized(e, shape[a]) if _is_array_entry(e) else e for e, a in zip(idx, axis_of)]
    is_adv_int = builtins.any(isinstance(e, (Array, Tracer, np.ndarray)) and np.ndim(e) > 0
                              for e in idx)
    adv_idx, adv_pos, adv_x_axes = [], [], []
    if is_adv_int:
        without_none = [(n, e) for n, e in enumerate(idx) if e is not None]
        for j, (n, e) in enumerate(without_none):
            if _is_array_entry(e):
                adv_idx.append(asarray(e))
                adv_pos.append(n)
                adv_x_axes.append(j)
    x_axis = y_axis = collapsed_y_axis = 0
    offset_dims, collapsed, start_index_map = [], [], []
    static = builtins.all(isinstance(d, int) for d in shape)
    index_dtype = np.dtype(np.int32 if not static or np.prod(shape, dtype=np.int64) < 2**31
                           else np.int64)
    gather_indices, gather_indices_shape = [], []
    slice_shape, newaxis_dims, reversed_y_dims, gather_slice_shape = [], [], [], []
    for pos, e in enumerate(idx):
        if adv_idx and (pos == adv_pos[0] if contiguous else pos == 0):
            arrs = broadcast_arrays(*adv_idx)
            s = core.get_aval(arrs[0]).shape
            start = len(gather_indices_shape)
            gather_indices += [(lax.convert_element_type(a, index_dtype), start) for a in arrs]
            gather_indices_shape += s
            start_index_map += adv_x_axes
            collapsed += adv_x_axes
            slice_shape += s
            y_axis += len(s)
            collapsed_y_axis += len(s)
        if pos in adv_pos:
            x_axis += 1
            gather_slice_shape.append(1)
            continue
        if _is_array_entry(e):  # a scalar int: one component, the dim collapsed
            if shape[x_axis] == 0:
                raise IndexError(f"index is out of bounds for axis {x_axis} with size 0")
            gather_indices.append((lax.convert_element_type(e, index_dtype),
                                   len(gather_indices_shape)))
            collapsed.append(x_axis)
            gather_slice_shape.append(1)
            start_index_map.append(x_axis)
            x_axis += 1
        elif e is None:
            slice_shape.append(1)
            newaxis_dims.append(y_axis)
            y_axis += 1
        elif isinstance(e, builtins.slice):
            if isinstance(shape[x_axis], int):  # JAX: core.canonicalize_slice
                start, stop, step = e.indices(shape[x_axis])
                size = len(range(start, stop, step))
            else:  # a symbolic size (chapters/31-export.md)
                start, stop, step, size = (0, shape[x_axis], 1, shape[x_axis]) \
                    if e == builtins.slice(None) else _canonicalize_slice(e, shape[x_axis])
            slice_shape.append(size)
            if step == 1:
                if size != shape[x_axis]:
                    gather_indices.append((lax.convert_element_type(start, index_dtype),
                                           len(gather_indices_shape)))
                    start_index_map.append(x_axis)
                gather_slice_shape.append(size)
                offset_dims.append(collapsed_y_axis)
            else:
                positions = lax.add(asarray(start, dtype=index_dtype), lax.mul(
                    asarray(step, dtype=index_dtype), lax.iota(index_dtype, size)))
                if step < 0:
                    reversed_y_dims.append(collapsed_y_axis)
                    positions = lax.rev(positions, (0,))
                gather_slice_shape.append(1)
                gather_indices.append((positions, len(gather_indices_shape)))
                start_index_map.append(x_axis)
                gather_indices_shape.append(size)
                collapsed.append(x_axis)
            collapsed_y_axis += 1
            y_axis += 1
            x_axis += 1
        else:
            raise IndexError(f"Got unsupported indexer at position {pos}: {e!r}")
    if not gather_indices:
        indices = np.zeros((0,), dtype=index_dtype)
    elif len(gather_indices) == 1:
        g = gather_indices[0][0]
        indices = lax.expand_dims(g, (np.ndim(g),))
    else:
        gather_indices_shape.append(1)
        indices = lax.concatenate([
            lax.broadcast_in_dim(g, tuple(gather_indices_shape),
                                 tuple(range(i, i + np.ndim(g)))) for g, i in gather_indices],
            len(gather_indices_shape) - 1)
    dnums = slicing.GatherDimensionNumbers(
        offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(sorted(collapsed)),
        start_index_map=tuple(start_index_map))
    return _GatherIndexer(tuple(slice_shape), tuple(gather_slice_shape), indices, dnums,
                          not adv_idx, not adv_idx, tuple(reversed_y_dims),
                          tuple(newaxis_dims))


# JAX: jax/_src/numpy/indexing.py _gather
def advanced_take(x, index, mode=None, fill_value=None, indices_are_sorted=False,
                  unique_indices=False):
    """`x[index]` as one gather (JAX's `_gather`): an index with an integer array or a boolean
    mask, or one a slice cannot read (see the module docstring).

    Args:
      x: `T[d0,...,dn]`.
      index: a tuple of ints, slices, None, Ellipsis, integer arrays (any int dtype, possibly
        traced) and concrete boolean masks.
      mode: None/"promise_in_bounds" (out-of-range indices are clamped, JAX's default for
        reading), "clip" (clamped) or "fill" (they give `fill_value`, NaN by default for
        floats).
    Returns: NumPy's advanced-indexing result. Raises IndexError for too many indices or a
    traced boolean mask, TypeError for non-integer index arrays.
    """
    x = asarray(x)
    indexer = _index_to_gather(tuple(core.get_aval(x).shape),
                               _normalize(index, tuple(core.get_aval(x).shape)))
    if fill_value is not None:
        if np.ndim(fill_value) != 0:
            raise ValueError("fill_value argument to indexed get() must be a scalar")
        fill_value = np.asarray(fill_value).item()
    y = x
    if 0 in indexer.slice_shape:
        return lax.full(indexer.slice_shape, 0, core.get_aval(x).dtype)
    if 0 not in np.shape(indexer.gather_indices):
        y = slicing.gather(y, indexer.gather_indices, indexer.dnums,
                           indexer.gather_slice_shape,
                           unique_indices=unique_indices or indexer.unique_indices,
                           indices_are_sorted=indices_are_sorted or indexer.indices_are_sorted,
                           mode=mode, fill_value=fill_value)
    if indexer.reversed_y_dims:
        y = lax.rev(y, indexer.reversed_y_dims)
    return lax.expand_dims(y, indexer.newaxis_dims)


# ---------------------------------------------------------------------------------------------
# take and take_along_axis
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/indexing.py take
def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """`a` at `indices` along `axis` (None: of the flattened `a`): shape
    `a.shape[:axis] + indices.shape + a.shape[axis+1:]`. Negative indices wrap; out-of-range
    ones give `fill_value` (default mode "fill": NaN for floats, the minimum for signed ints)
    or, with mode "clip", are clamped; mode "wrap" takes them modulo the size. One gather,
    under jit as JAX's `_take`. ValueError for another mode, IndexError for a non-empty take
    from an empty axis."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    return _take(asarray(a), asarray(indices), axis=None if axis is None else int(axis),
                 mode=mode, unique_indices=unique_indices,
                 indices_are_sorted=indices_are_sorted, fill_value=fill_value)


@jit_when_traced(static_argnames=("axis", "mode", "unique_indices", "indices_are_sorted",
                                  "fill_value"))
def _take(a, indices, axis=None, mode=None, unique_indices=False, indices_are_sorted=False,
          fill_value=None):
    if axis is None:
        a, axis = lax.reshape(a, (core.get_aval(a).size,)), 0
    shape = tuple(core.get_aval(a).shape)
    axis = canonicalize_axis(axis, len(shape))
    if mode is None or mode in ("fill", "drop"):
        gather_mode = slicing.GatherScatterMode.FILL_OR_DROP
        indices = where(indices < 0, indices + shape[axis], indices)
    elif mode == "wrap":
        indices = ufuncs.remainder(indices, lax_internal._const(indices, shape[axis]))
        gather_mode = slicing.GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode in ("clip", "promise_in_bounds"):
        gather_mode = slicing.GatherScatterMode.from_any(mode)
    else:
        raise ValueError(f"Invalid mode '{mode}' for np.take")
    i_shape = tuple(core.get_aval(indices).shape)
    if shape[axis] == 0:
        if np.prod(i_shape) != 0:
            raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
        return a
    if np.prod(i_shape, dtype=np.int64) == 0:
        return lax.full(shape[:axis] + i_shape + shape[axis + 1:], 0, core.get_aval(a).dtype)
    sizes = shape[:axis] + (1,) + shape[axis + 1:]
    dn = slicing.GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + len(i_shape),
                                                     len(shape) + len(i_shape) - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    return slicing.gather(a, lax.expand_dims(indices, (len(i_shape),)), dn, sizes,
                          mode=gather_mode, unique_indices=unique_indices,
                          indices_are_sorted=indices_are_sorted, fill_value=fill_value)


# JAX: jax/_src/numpy/indexing.py take_along_axis (under jit, as JAX's)
@jit_when_traced(static_argnames=("axis", "mode", "fill_value"))
def take_along_axis(arr, indices, axis: int | None = -1, mode=None, fill_value=None):
    """`arr` picked at `indices` along `axis`: `out[..., j, ...] = arr[..., indices[..., j, ...],
    ...]`. `indices` has arr's rank (1-D when `axis` is None: then `arr` is flattened); the other
    dimensions broadcast. One gather whose other dims are batching dims, as JAX's.

    Negative indices wrap (except under mode "promise_in_bounds"); out-of-bounds ones give
    `fill_value` (mode None/"fill": NaN for floats, the minimum for signed ints, as JAX) or are
    clamped (mode "clip"). Raises TypeError for non-integer indices, ValueError for a rank
    mismatch."""
    arr, indices = asarray(arr), asarray(indices)
    if dtype_kind(indices) not in "iu":
        raise TypeError(f"take_along_axis indices must be of integer type, got "
                        f"{core.get_aval(indices).dtype}")
    if axis is None:
        if core.get_aval(indices).ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{core.get_aval(indices).shape}")
        arr, axis = lax.reshape(arr, (core.get_aval(arr).size,)), 0
    a_shape, i_shape = core.get_aval(arr).shape, core.get_aval(indices).shape
    if len(a_shape) != len(i_shape):
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{len(i_shape)} vs. {len(a_shape)}")
    if mode not in (None, "fill", "clip", "promise_in_bounds", "drop"):
        raise ValueError(f"Invalid mode value: {mode!r}")
    axis = canonicalize_axis(axis, len(a_shape))
    arr_shape = a_shape[:axis] + (1,) + a_shape[axis + 1:]
    out_shape = np.broadcast_shapes(i_shape, arr_shape)
    if a_shape[axis] == 0:
        return lax.full(out_shape, 0, core.get_aval(arr).dtype)
    if mode != "promise_in_bounds" and dtype_kind(indices) != "u":
        n = lax_internal._const(indices, a_shape[axis])
        indices = lax.select(indices < 0, lax.add(indices, n), indices)
    index_dims = [i for i, n in enumerate(i_shape) if i == axis or n != 1]
    gather_indices = lax.reshape(indices, tuple(np.array(out_shape)[index_dims]) + (1,))
    sizes, offset_dims, start_index_map, collapsed, op_batch, idx_batch = [], [], [], [], [], []
    squeezed, new_i, j = [], 0, 0
    for i in range(len(a_shape)):
        if i == axis:
            sizes.append(1)
            start_index_map.append(new_i)
            collapsed.append(new_i)
            new_i, j = new_i + 1, j + 1
        elif i_shape[i] == 1:
            offset_dims.append(i)
            sizes.append(arr_shape[i])
            new_i += 1
        elif arr_shape[i] == 1:
            squeezed.append(i)
            j += 1
        else:
            sizes.append(0 if arr_shape[i] == 0 else 1)
            op_batch.append(new_i)
            idx_batch.append(j)
            new_i, j = new_i + 1, j + 1
    dn = slicing.GatherDimensionNumbers(tuple(offset_dims), tuple(collapsed),
                                        tuple(start_index_map), tuple(op_batch), tuple(idx_batch))
    return slicing.gather(lax.squeeze(arr, tuple(squeezed)), gather_indices, dn, tuple(sizes),
                          mode="fill" if mode is None else mode, fill_value=fill_value)


# ---------------------------------------------------------------------------------------------
# x.at[idx]: indexed updates (the `.at` property is in array_methods.py)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/ops/scatter.py _scatter_update and _scatter_impl
def scatter_update(x, index, y, scatter_fn, mode, indices_are_sorted=False,
                   unique_indices=False):
    """`x` with `y` combined in at `index` by `scatter_fn` (`lax.scatter`, `scatter_add`, ...):
    the gather that reads `x[index]` (`_index_to_gather`) turned into a scatter, as JAX's.
    `y` is promoted with x, broadcast to the shape of `x[index]`; the result has x's dtype.
    `mode`: None/"fill"/"drop" skip out-of-range windows, "clip" clamps them,
    "promise_in_bounds" leaves them to XLA (skipped)."""
    if mode not in _MODES:
        raise ValueError(f'Unknown scatter mode "{mode}" (minijax knows {_MODES})')
    x = asarray(x)
    aval = core.get_aval(x)
    if isinstance(y, int) and not isinstance(y, bool) and aval.dtype.kind in "iu" and (
            np.iinfo(aval.dtype).min <= y <= np.iinfo(aval.dtype).max):
        y = asarray(y, dtype=aval.dtype)
    else:
        y = asarray(y)
    indexer = _index_to_gather(tuple(aval.shape), _normalize(index, tuple(aval.shape)))
    if 0 in indexer.slice_shape:
        return x
    x, y = promote_dtypes(x, y)
    y = broadcast_to(y, indexer.slice_shape)
    if indexer.newaxis_dims:
        y = lax.squeeze(y, indexer.newaxis_dims)
    if indexer.reversed_y_dims:
        y = lax.rev(y, indexer.reversed_y_dims)
    dn = indexer.dnums
    dnums = slicing.ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map)
    out = scatter_fn(x, indexer.gather_indices, y, dnums,
                     indices_are_sorted=indexer.indices_are_sorted or indices_are_sorted,
                     unique_indices=indexer.unique_indices or unique_indices, mode=mode)
    return lax.convert_element_type(out, aval.dtype, aval.weak_type)
