"""NumPy's advanced indexing (`x[idx_array]`) and indexed updates (`x.at[idx].set(y)`).

`x[...]` with only ints, slices, None and Ellipsis is *basic* indexing, done with `lax.slice`
(and `dynamic_slice` for a traced int) in `rewriting_take`. As soon as one index
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

from minijax import core
from minijax.array import Array
from minijax.core import Tracer
from minijax import lax
from minijax.lax import slicing
from minijax.numpy import ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (broadcast_shapes, broadcast_to, canonicalize_axis, dtype_kind,
                                 shape_of)

_MODES = (None, "promise_in_bounds", "clip", "fill", "drop")


# ---------------------------------------------------------------------------------------------
# Basic indexing: x[ints, slices, None, ...]
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/indexing.py rewriting_take
def rewriting_take(x, idx, mode=None, fill_value=None):
    """`x[idx]`. Basic indexing here: ints, slices (any step), None and Ellipsis, as one
    static slice (`_to_static_slice`, `_static_slice`). An index with an integer array, a list
    or a boolean mask is advanced indexing, one gather: `advanced_take` below, which
    `mode`/`fill_value` apply to; so is an out-of-bounds int (JAX clamps reads, mode "fill"
    gives `fill_value`) and, under mode "fill"/"drop", a traced int."""
    x = asarray(x)
    aval = core.get_aval(x)
    idx = idx if isinstance(idx, tuple) else (idx,)
    if builtins.any(is_advanced(i) for i in idx):
        return advanced_take(x, idx, mode, fill_value)
    idx = _parse_indices(idx, aval)
    indexer = _to_static_slice(idx, aval, mode)
    if indexer is None:  # a read a slice cannot express: one gather
        return advanced_take(x, idx, mode, fill_value)
    return _static_slice(x, aval, indexer)


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


# JAX: jax/_src/numpy/indexing.py _StaticSliceIndexer — differs: also holds the traced ints,
# read with one dynamic_slice (JAX's _DynamicSliceIndexer)
class _StaticSliceIndexer(NamedTuple):
    starts: list
    limits: list
    strides: list
    rev_axes: list
    squeeze_axes: list
    newaxis_dims: list
    dynamic: dict  # dim -> traced integer index


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
    `_parse_indices`); None where a gather must read it instead (an out-of-bounds int, a
    traced int under mode "fill"/"drop"). NotImplementedError for any other index."""
    out = _StaticSliceIndexer([], [], [], [], [], [], {})
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
        elif isinstance(i, Tracer) and i.aval.shape == () and i.aval.dtype.kind in "iu":
            # a traced integer: a size-1 dynamic_slice, which wraps negative indices and clamps
            # out-of-range ones (as JAX does); the dimension is kept whole by the static slice.
            # Modes "fill"/"drop" (and so x.at[i].set) need a gather, which can mask them.
            if mode in ("fill", "drop"):
                return None
            out.dynamic[dim] = lax.convert_element_type(i, np.int32)
            out.starts.append(0)
            out.limits.append(size_d)
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


# JAX: jax/_src/numpy/indexing.py _static_slice (and _dynamic_slice, for the traced ints)
def _static_slice(x, aval, indexer: _StaticSliceIndexer):
    starts, limits, strides = indexer.starts, indexer.limits, indexer.strides
    out = x
    if (tuple(starts), tuple(limits)) != ((0,) * aval.ndim, aval.shape) or any(
            s != 1 for s in strides):
        out = lax.slice(out, starts, limits, None if all(s == 1 for s in strides) else strides)
    if indexer.dynamic:
        shape = core.get_aval(out).shape
        dynamic = indexer.dynamic
        out = lax.dynamic_slice(out, [dynamic.get(d, np.int32(0)) for d in range(len(shape))],
                                [1 if d in dynamic else n for d, n in enumerate(shape)])
    if indexer.rev_axes:
        out = lax.rev(out, tuple(indexer.rev_axes))
    if indexer.squeeze_axes:
        out = lax.squeeze(out, tuple(indexer.squeeze_axes))
    if indexer.newaxis_dims:
        out = lax.expand_dims(out, tuple(indexer.newaxis_dims))
    return out

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
    ndim = len(shape)
    idx = _expand_bool_masks(index if isinstance(index, tuple) else (index,), shape)
    if builtins.sum(1 for i in idx if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > ndim:
        raise IndexError(f"Too many indices: array is {ndim}-dimensional, but {n_real} were "
                         "indexed")
    fill = (builtins.slice(None),) * (ndim - n_real)
    if builtins.any(i is Ellipsis for i in idx):
        k = next(n for n, i in enumerate(idx) if i is Ellipsis)
        return list(idx[:k] + fill + idx[k + 1:])
    return list(idx + fill)


def advanced_take(x, index, mode=None, fill_value=None):
    """`x[index]` where some entry of `index` is an array (see the module docstring).

    Args:
      x: `T[d0,...,dn]`.
      index: a tuple of ints, slices, None, Ellipsis, integer arrays (any int dtype, possibly
        traced) and concrete boolean masks.
      mode: None/"promise_in_bounds" (JAX's default: out-of-range indices are clamped when
        read, their cotangents dropped), "clip" (clamped, in the gradient too) or "fill"
        (they give `fill_value`, NaN by default for floats).
    Returns: NumPy's advanced-indexing result. Raises IndexError for too many indices or a
    traced boolean mask, TypeError for non-integer index arrays.
    """
    x = asarray(x)
    shape = core.get_aval(x).shape
    entries = _normalize(index, tuple(shape))
    basic = tuple(builtins.slice(None) if _is_adv_entry(e) else e
                  for e in entries if e is not None)
    y = rewriting_take(x, basic)
    y_shape = core.get_aval(y).shape
    adv_dims, adv_vals = [], []
    dim = 0
    for e in entries:
        if e is None:
            continue
        if _is_adv_entry(e):
            adv_dims.append(dim)
            adv_vals.append(_wrapped(asarray(e), y_shape[dim]))
        dim += 1
    s_shape = broadcast_shapes(*(core.get_aval(v).shape for v in adv_vals))
    vecs = [lax.expand_dims(broadcast_to(v, s_shape), (len(s_shape),)) for v in adv_vals]
    indices = vecs[0] if len(vecs) == 1 else lax.concatenate(vecs, len(s_shape))
    rest = [d for d in range(len(y_shape)) if d not in adv_dims]
    dn = slicing.GatherDimensionNumbers(
        offset_dims=tuple(range(len(s_shape), len(s_shape) + len(rest))),
        collapsed_slice_dims=tuple(adv_dims), start_index_map=tuple(adv_dims))
    sizes = tuple(1 if d in adv_dims else n for d, n in enumerate(y_shape))
    out = slicing.gather(y, indices, dn, sizes,
                         mode="fill" if mode in ("fill", "drop") else mode,
                         fill_value=fill_value)
    # the basic entries (slices and Nones) follow S, in order; insert the Nones
    basic_entries = [e for e in entries if not _is_adv_entry(e)]
    new_axes = tuple(len(s_shape) + j for j, e in enumerate(basic_entries) if e is None)
    if new_axes:
        out = lax.expand_dims(out, new_axes)
    positions = [n for n, e in enumerate(entries) if _is_adv_entry(e)]
    if positions == list(range(positions[0], positions[-1] + 1)) and positions[0] > 0:
        p = positions[0]  # basic entries before the first advanced one
        ns, nd = len(s_shape), core.get_aval(out).ndim
        perm = (tuple(range(ns, ns + p)) + tuple(range(ns)) + tuple(range(ns + p, nd)))
        out = lax.transpose(out, perm)
    return out


def _is_adv_entry(e) -> bool:
    return e is not None and not isinstance(e, builtins.slice)


def _wrapped(i, n: int):
    aval = core.get_aval(i)
    if aval.dtype.kind not in "iu":
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{aval.dtype.name}")
    i = lax.convert_element_type(i, np.int32)
    n = np.int32(n) if type(n) is int else lax.convert_element_type(  # a symbolic size
        core.dimension_as_value(n), np.int32)
    return lax.select(lax.lt(i, np.int32(0)), lax.add(i, n), i)


# ---------------------------------------------------------------------------------------------
# take and take_along_axis
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/indexing.py take
def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """`a` at `indices` along `axis` (None: of the flattened `a`): shape
    `a.shape[:axis] + indices.shape + a.shape[axis+1:]`. Negative indices wrap; out-of-range
    ones give `fill_value` (default mode "fill": NaN for floats, the minimum for signed ints)
    or, with mode "clip", are clamped. One gather (`advanced_take`)."""
    a = asarray(a)
    if axis is None:
        a, axis = lax.reshape(a, (core.get_aval(a).size,)), 0
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    if mode is None:
        mode = "fill"
    if mode == "wrap":
        indices = ufuncs.remainder(asarray(indices), shape_of(a)[axis])
        mode = "clip"
    if mode not in ("fill", "clip", "promise_in_bounds", "drop"):
        raise ValueError(f"Invalid mode value: {mode!r}")
    index = (builtins.slice(None),) * axis + (asarray(indices),)
    return advanced_take(a, index, mode, fill_value)


# JAX: jax/_src/numpy/indexing.py take_along_axis
def take_along_axis(arr, indices, axis: int | None, mode=None, fill_value=None):
    """`arr` picked at `indices` along `axis`: `out[..., j, ...] = arr[..., indices[..., j, ...],
    ...]`. `indices` has arr's rank (1-D when `axis` is None: then `arr` is flattened); the other
    dimensions broadcast. One gather: `arr[iota_0, ..., indices, ..., iota_n]`.

    Negative indices wrap; out-of-bounds ones give `fill_value` (mode None/"fill": NaN for
    floats, the minimum for signed ints, as JAX) or are clamped (mode "clip"). Raises TypeError
    for non-integer indices, ValueError for a rank mismatch."""
    arr, indices = asarray(arr), asarray(indices)
    if axis is None:
        if core.get_aval(indices).ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{core.get_aval(indices).shape}")
        arr, axis = lax.reshape(arr, (core.get_aval(arr).size,)), 0
    a_shape, i_shape = core.get_aval(arr).shape, core.get_aval(indices).shape
    if len(a_shape) != len(i_shape):
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{len(i_shape)} vs. {len(a_shape)}")
    if dtype_kind(indices) not in "iu":
        raise TypeError(f"take_along_axis indices must be of integer type, got "
                        f"{core.get_aval(indices).dtype}")
    axis = canonicalize_axis(axis, len(a_shape))
    mode = "fill" if mode is None else mode
    if mode not in ("fill", "clip", "promise_in_bounds", "drop"):
        raise ValueError(f"Invalid mode value: {mode!r}")
    out_shape = tuple(i_shape[d] if d == axis else
                      np.broadcast_shapes((a_shape[d],), (i_shape[d],))[0]
                      for d in range(len(a_shape)))
    index = []
    for d in range(len(a_shape)):
        if d == axis:
            index.append(broadcast_to(indices, out_shape))
        elif a_shape[d] == 1:  # a broadcast dimension of arr: always its entry 0
            index.append(lax.full(out_shape, 0, np.int32))
        else:
            index.append(lax.broadcasted_iota(np.int32, out_shape, d))
    return advanced_take(arr, tuple(index), mode, fill_value)


# ---------------------------------------------------------------------------------------------
# x.at[idx]: indexed updates (the `.at` property is in array_methods.py)
# ---------------------------------------------------------------------------------------------

def scatter_update(x, index, y, scatter_fn, mode):
    if mode not in _MODES:
        raise ValueError(f'Unknown scatter mode "{mode}" (minijax knows {_MODES})')
    x = asarray(x)
    aval = core.get_aval(x)
    n = int(np.prod(aval.shape, dtype=np.int64))
    if n == 0:  # nothing to update (and no position to gather from an empty iota)
        return x
    flat_ids = lax.reshape(lax.iota(np.int32, n), aval.shape)
    # out-of-range positions read as n, a position the flat scatter drops
    drop = mode in (None, "fill", "drop")
    positions = rewriting_take(flat_ids, index, mode="fill" if drop else "clip",
                               fill_value=n if drop else None)
    p_shape = core.get_aval(positions).shape
    y = broadcast_to(lax.convert_element_type(asarray(y), aval.dtype), p_shape)
    m = int(np.prod(p_shape, dtype=np.int64))
    dn = slicing.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))
    out = scatter_fn(lax.reshape(x, (n,)), lax.reshape(positions, (m, 1)),
                     lax.reshape(y, (m,)), dn)
    return lax.reshape(out, aval.shape)
