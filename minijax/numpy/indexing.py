"""NumPy's advanced indexing (`x[idx_array]`) and indexed updates (`x.at[idx].set(y)`).

`x[...]` with only ints, slices, None and Ellipsis is *basic* indexing, done with `lax.slice`
(and `dynamic_slice` for a traced int) in lax_numpy.py `_rewriting_take`. As soon as one index
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
from typing import Any

import numpy as np

from minijax import core
from minijax.array import Array
from minijax.core import Tracer
from minijax.lax import lax, slicing

_MODES = (None, "promise_in_bounds", "clip", "fill", "drop")


def is_advanced(i) -> bool:
    """Whether index entry `i` makes the whole index an advanced one."""
    if isinstance(i, (list, np.ndarray)) and not (isinstance(i, np.ndarray) and i.ndim == 0
                                                   and i.dtype.kind != "b"):
        return True
    if isinstance(i, (Array, Tracer)):
        aval = core.get_aval(i)
        return aval.ndim > 0 or aval.dtype == np.bool_
    return False


def _expand_bool_masks(idx: tuple) -> tuple:
    out = []
    for i in idx:
        if isinstance(i, list):
            i = np.asarray(i)
        aval = core.get_aval(i) if isinstance(i, (Array, Tracer, np.ndarray)) else None
        if aval is not None and aval.dtype == np.bool_:
            if isinstance(i, Tracer):
                raise IndexError(
                    "Array boolean indices must be concrete: the shape of x[mask] depends on "
                    f"the values of the mask ({aval.str_short()}). Use jnp.where instead.")
            out.extend(np.nonzero(np.asarray(i)))
        else:
            out.append(i)
    return tuple(out)


def _normalize(index, ndim: int) -> list:
    idx = _expand_bool_masks(index if isinstance(index, tuple) else (index,))
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
      mode: None/"promise_in_bounds"/"clip" (out-of-range indices are clamped, JAX's default
        for reading) or "fill" (they give `fill_value`, NaN by default for floats).
    Returns: NumPy's advanced-indexing result. Raises IndexError for too many indices or a
    traced boolean mask, TypeError for non-integer index arrays.
    """
    from minijax.numpy import lax_numpy as jnp
    x = jnp.asarray(x)
    shape = core.get_aval(x).shape
    entries = _normalize(index, len(shape))
    basic = tuple(builtins.slice(None) if _is_adv_entry(e) else e
                  for e in entries if e is not None)
    y = jnp._rewriting_take(x, basic)
    y_shape = core.get_aval(y).shape
    adv_dims, adv_vals = [], []
    dim = 0
    for e in entries:
        if e is None:
            continue
        if _is_adv_entry(e):
            adv_dims.append(dim)
            adv_vals.append(_wrapped(jnp.asarray(e), y_shape[dim]))
        dim += 1
    s_shape = np.broadcast_shapes(*(core.get_aval(v).shape for v in adv_vals))
    vecs = [lax.expand_dims(jnp.broadcast_to(v, s_shape), (len(s_shape),)) for v in adv_vals]
    indices = vecs[0] if len(vecs) == 1 else lax.concatenate(vecs, len(s_shape))
    rest = [d for d in range(len(y_shape)) if d not in adv_dims]
    dn = slicing.GatherDimensionNumbers(
        offset_dims=tuple(range(len(s_shape), len(s_shape) + len(rest))),
        collapsed_slice_dims=tuple(adv_dims), start_index_map=tuple(adv_dims))
    sizes = tuple(1 if d in adv_dims else n for d, n in enumerate(y_shape))
    out = slicing.gather(y, indices, dn, sizes,
                         mode="fill" if mode in ("fill", "drop") else None,
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
    return lax.select(lax.lt(i, np.int32(0)), lax.add(i, np.int32(n)), i)


# ---------------------------------------------------------------------------------------------
# x.at[idx]
# ---------------------------------------------------------------------------------------------

def _scatter_update(x, index, y, scatter_fn, mode):
    from minijax.numpy import lax_numpy as jnp
    if mode not in _MODES:
        raise ValueError(f'Unknown scatter mode "{mode}" (minijax knows {_MODES})')
    x = jnp.asarray(x)
    aval = core.get_aval(x)
    n = int(np.prod(aval.shape, dtype=np.int64))
    flat_ids = lax.reshape(lax.iota(np.int32, n), aval.shape)
    # out-of-range positions read as n, a position the flat scatter drops
    drop = mode in (None, "fill", "drop")
    positions = jnp._rewriting_take(flat_ids, index, mode="fill" if drop else "clip",
                                    fill_value=n if drop else None)
    p_shape = core.get_aval(positions).shape
    y = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(y), aval.dtype), p_shape)
    m = int(np.prod(p_shape, dtype=np.int64))
    dn = slicing.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))
    out = scatter_fn(lax.reshape(x, (n,)), lax.reshape(positions, (m, 1)),
                     lax.reshape(y, (m,)), dn)
    return lax.reshape(out, aval.shape)


# JAX: jax/_src/numpy/array_methods.py _IndexUpdateHelper
class _IndexUpdateHelper:
    """`x.at`: `x.at[idx]` gives an `_IndexUpdateRef` for functional indexed updates."""

    __slots__ = ("array",)

    def __init__(self, array) -> None:
        self.array = array

    def __getitem__(self, index) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


# JAX: jax/_src/numpy/array_methods.py _IndexUpdateRef
class _IndexUpdateRef:
    """`x.at[idx]`. Each method returns a new array (x itself never changes).

    `get(mode=None, fill_value=None)` is `x[idx]` (mode "fill" gives `fill_value` out of range).
    `set/add/mul/multiply/min/max(values, mode=None)`: `values` (cast to x's dtype, broadcast to
    the shape of `x[idx]`) combined into x at idx. mode None/"fill"/"drop" skip out-of-range
    indices (JAX's default for updates), "clip"/"promise_in_bounds" clamp them. With repeated
    indices `add/mul/min/max` accumulate; `set` keeps one of the writes (and its gradient
    assumes unique indices).
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index) -> None:
        self.array = array
        self.index = index

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None) -> Any:
        from minijax.numpy import lax_numpy as jnp
        return jnp._rewriting_take(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_update(self.array, self.index, values, slicing.scatter, mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_update(self.array, self.index, values, slicing.scatter_add, mode)

    def mul(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_update(self.array, self.index, values, slicing.scatter_mul, mode)

    multiply = mul

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_update(self.array, self.index, values, slicing.scatter_min, mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_update(self.array, self.index, values, slicing.scatter_max, mode)
