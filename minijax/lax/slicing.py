"""Slicing at traced positions: `dynamic_slice` and `dynamic_update_slice`.

`lax.slice` takes its bounds as params, fixed when the program is traced. Here the start
indices are *operands* (scalar integers, possibly traced) while the slice sizes stay static, so
shapes are still known at trace time. As in XLA, start indices are clamped so that the slice
fits: start is clamped to [0, dim - size]. The wrappers first turn negative indices into
`index + dim` (JAX's `allow_negative_indices=True`).

`gather` and the `scatter*` family generalize both to many windows at once: an array of index
vectors, one window per vector (what NumPy's integer-array indexing and `x.at[idx]` become,
see minijax/numpy/indexing.py). gather and scatter_add are each other's transpose.

Each primitive's paragraph follows lax.py's order: impl, abstract eval, jvp, transpose,
batching, lowering. Mirrors jax/_src/lax/slicing.py. Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import builtins
import enum
import functools
from typing import Any, NamedTuple, Sequence

import numpy as np

from minijax import core, dtypes
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir
from minijax.interpreters.ad import is_undefined_primal
from minijax.interpreters.batching import not_mapped
from minijax.lax import lax
from minijax.lax.lax import _const
from minijax.util import canonicalize_axis

# ---------------------------------------------------------------------------------------------
# Index helpers
# ---------------------------------------------------------------------------------------------


def _clamped_starts(shape: Sequence[int], starts, sizes: Sequence[int]) -> list[int]:
    return [builtins.min(builtins.max(int(s), 0), d - z) for s, d, z in zip(starts, shape, sizes)]


def _check_indices(name: str, operand: ShapedArray, indices: Sequence[ShapedArray]) -> None:
    if len(indices) != operand.ndim:
        raise TypeError(f"{name} start_indices must have length equal to the rank of operand, "
                        f"got {len(indices)} indices for operand shape {operand.shape}.")
    if any(i.ndim != 0 for i in indices):
        raise TypeError(f"start_indices arguments to {name} must be scalars, got indices "
                        f"{[i.str_short() for i in indices]}")
    if any(i.dtype != indices[0].dtype or i.dtype.kind not in "iu" for i in indices):
        raise TypeError(f"index arguments to {name} must be integers of the same type, got: "
                        f"{', '.join(i.dtype.name for i in indices)}")


# JAX: jax/_src/lax/slicing.py _dynamic_slice_indices
def _dynamic_slice_indices(shape: Sequence[int], start_indices: Sequence[Any],
                           allow_negative_indices: bool | Sequence[bool] = True) -> list:
    """One integer scalar per dimension, negative ones wrapped to `index + dim` where
    `allow_negative_indices` (one bool, or one per dimension) allows. Python ints are wrapped
    now and become int32 constants; traced ones get `select(i < 0, i + dim, i)`.
    Raises ValueError when the number of indices is not the rank."""
    if len(start_indices) != len(shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {tuple(shape)})")
    allow = ([allow_negative_indices] * len(shape) if isinstance(allow_negative_indices, bool)
             else list(allow_negative_indices))
    out = []
    for i, d, allow_negative in zip(start_indices, shape, allow):
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            if i < 0 and not allow_negative:
                raise ValueError(f"Index {i} is out of bounds for dimension {d} if "
                                 "allow_negative_indices=False")
            v = int(i) + d if i < 0 else int(i)
            out.append(np.asarray(v, dtypes.canonicalize_dtype(np.asarray(i).dtype)))
            continue
        aval = core.get_aval(i)
        if aval.dtype.kind != "i" or not allow_negative:  # unsigned: never negative
            out.append(i)
            continue
        # as JAX: `i + d` with `d` a strong array of i's dtype, so a weak `i` is first
        # converted to a strong one (jnp promotion), the comparison and select use `i` as is
        neg = lax.lt(i, _const(i, 0))
        strong_i = lax.convert_element_type(i, aval.dtype) if aval.weak_type else i
        d_arr = (np.asarray(d, aval.dtype) if isinstance(d, int)
                 else lax.convert_element_type(core.dimension_as_value(d), aval.dtype))
        out.append(lax.select(neg, lax.add(strong_i, d_arr), i))
    return out


# ---------------------------------------------------------------------------------------------
# dynamic_slice
# ---------------------------------------------------------------------------------------------

def _dynamic_slice_impl(x, *starts, slice_sizes):
    st = _clamped_starts(x.shape, starts, slice_sizes)
    return x[tuple(builtins.slice(s, s + z) for s, z in zip(st, slice_sizes))]


def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    if len(slice_sizes) != x.ndim or any(z < 0 or z > d for z, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"slice slice_sizes must be non-negative and less than or equal to "
                        f"operand shape, got slice_sizes {slice_sizes} for operand shape "
                        f"{x.shape}.")
    _check_indices("dynamic_slice", x, starts)
    return x.update(shape=tuple(slice_sizes))


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *starts = primals
    out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero:
        return out, Zero.from_primal_value(out)
    return out, dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, x, *starts, slice_sizes):
    if any(is_undefined_primal(s) for s in starts):
        raise NotImplementedError("dynamic_slice is not linear in its start indices")
    none = [None] * len(starts)
    if type(ct) is Zero:
        return [Zero(x.aval)] + none
    zeros = lax.full(x.aval.shape, 0, x.aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + none


def _start_vectors(starts, dims, axis_size: int, shape, sizes) -> list:
    """Per dimension, the clamped start index of every example, as an int32[axis_size]."""
    out = []
    for s, d, n, z in zip(starts, dims, shape, sizes):
        s = lax.convert_element_type(s, np.int32)
        s = lax.max(lax.min(s, np.int32(n - z)), np.int32(0))
        out.append(batching.bdim_at_front(s, d, axis_size))
    return out


def _masked_sum(x, mask, k: int, new: int):
    """Insert an axis of size `new` before axis k + 1 of `x` (batched at 0), keep the entries
    where the (B, new, old) one-hot `mask` is true, and sum out the old axis k + 1."""
    shape = core.get_aval(x).shape
    big = shape[:k + 1] + (new,) + shape[k + 1:]
    x_b = lax.broadcast_in_dim(x, big, tuple(i if i <= k else i + 1 for i in range(len(shape))))
    mask_b = lax.broadcast_in_dim(mask, big, (0, k + 1, k + 2))
    return lax.reduce_sum(lax.select_n(mask_b, lax.full_like(x_b, 0), x_b), (k + 2,))


def _one_hot_take(y, starts_b, k: int, n: int, z: int, axis_size: int):
    """`y[b, ..., starts_b[b] : starts_b[b] + z, ...]` along axis k + 1 (size n), per example b,
    as select + reduce_sum over a one-hot mask of shape (B, z, n)."""
    offsets = lax.add(lax.broadcast_in_dim(starts_b, (axis_size, z), (0,)),
                      lax.broadcasted_iota(np.int32, (axis_size, z), 1))
    mask = lax.eq(lax.broadcast_in_dim(offsets, (axis_size, z, n), (0, 1)),
                  lax.broadcasted_iota(np.int32, (axis_size, z, n), 2))
    return _masked_sum(y, mask, k, z)


def _as_summable(x):
    # select + reduce_sum needs a number type; booleans take a detour through int32
    return lax.convert_element_type(x, np.int32) if core.get_aval(x).dtype == np.bool_ else x


def _dynamic_slice_batch_rule(vals, dims, *, axis_size, slice_sizes):
    x, *starts = vals
    x_dim, *start_dims = dims
    if all(d is not_mapped for d in start_dims):
        x = batching.moveaxis(x, x_dim, 0)
        zero = np.zeros((), core.get_aval(starts[0]).dtype if starts else np.int32)
        return dynamic_slice_p.bind(x, zero, *starts, slice_sizes=(axis_size, *slice_sizes)), 0
    # Batched start indices: JAX emits a gather here; minijax selects with one-hot masks.
    aval = core.get_aval(x)
    shape = aval.shape if x_dim is not_mapped else aval.shape[:x_dim] + aval.shape[x_dim + 1:]
    y = _as_summable(batching.bdim_at_front(x, x_dim, axis_size))
    for k, s in enumerate(_start_vectors(starts, start_dims, axis_size, shape, slice_sizes)):
        y = _one_hot_take(y, s, k, shape[k], slice_sizes[k], axis_size)
    return lax.convert_element_type(y, aval.dtype), 0


def _dynamic_slice_lowering(ctx, x, *starts, slice_sizes):
    return mlir.hlo.dynamic_slice(x, list(starts), list(slice_sizes))


# JAX: jax/_src/lax/slicing.py dynamic_slice
def dynamic_slice(operand, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True):
    """`operand[s0:s0+z0, s1:s1+z1, ...]` with traced starts `s` and static sizes `z`.

    Args:
      operand: an array `T[d0,...,dn]`.
      start_indices: one integer scalar per dimension (Python ints or integer arrays of one
        dtype, possibly traced); negative ones count from the end. Each start is then clamped to
        [0, d - z] so the slice always fits, as XLA does.
      slice_sizes: static ints with 0 <= z <= d.
    Returns: `T[z0,...,zn]`. Raises ValueError for the wrong number of indices, TypeError for
    bad sizes or non-integer/mixed-dtype indices.

    Under vmap with batched start indices the batching rule selects with one-hot masks
    (select_n + reduce_sum) where JAX uses a gather.
    """
    aval = core.get_aval(operand)
    starts = _dynamic_slice_indices(aval.shape, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts, slice_sizes=tuple(int(z) for z in slice_sizes))


dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.def_impl(_dynamic_slice_impl)
dynamic_slice_p.def_abstract_eval(_dynamic_slice_abstract_eval)
ad.primitive_jvps[dynamic_slice_p] = _dynamic_slice_jvp
ad.primitive_transposes[dynamic_slice_p] = _dynamic_slice_transpose
batching.primitive_batchers[dynamic_slice_p] = _dynamic_slice_batch_rule
mlir.register_lowering(dynamic_slice_p, _dynamic_slice_lowering)


# ---------------------------------------------------------------------------------------------
# dynamic_update_slice
# ---------------------------------------------------------------------------------------------

def _dynamic_update_slice_impl(x, update, *starts):
    st = _clamped_starts(x.shape, starts, update.shape)
    out = x.copy()
    out[tuple(builtins.slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


def _dynamic_update_slice_abstract_eval(x, update, *starts):
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice update must have the same rank as operand and "
                        f"be no larger, got update shape {update.shape} for operand shape "
                        f"{x.shape}.")
    if update.dtype != x.dtype:
        raise TypeError(f"lax.dynamic_update_slice requires arguments to have the same dtypes, "
                        f"got {x.dtype.name}, {update.dtype.name}.")
    _check_indices("dynamic_update_slice", x, starts)
    return x.update(weak_type=x.weak_type and update.weak_type)


def _dynamic_update_slice_jvp(primals, tangents):
    x, update, *starts = primals
    out = dynamic_update_slice_p.bind(x, update, *starts)
    tx, tu = tangents[:2]
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero.from_primal_value(out)
    return out, dynamic_update_slice_p.bind(ad.instantiate_zeros(tx), ad.instantiate_zeros(tu),
                                            *starts)


def _dynamic_update_slice_transpose(ct, x, update, *starts):
    if any(is_undefined_primal(s) for s in starts):
        raise NotImplementedError("dynamic_update_slice is not linear in its start indices")
    none = [None] * len(starts)
    x_lin, u_lin = is_undefined_primal(x), is_undefined_primal(update)
    u_aval = update.aval if u_lin else core.get_aval(update)
    if type(ct) is Zero:
        return [Zero(x.aval) if x_lin else None, Zero(u_aval) if u_lin else None] + none
    ct_x = (dynamic_update_slice_p.bind(ct, lax.full(u_aval.shape, 0, u_aval.dtype), *starts)
            if x_lin else None)
    ct_u = dynamic_slice_p.bind(ct, *starts, slice_sizes=u_aval.shape) if u_lin else None
    return [ct_x, ct_u] + none


def _one_hot_place(u, starts_b, k: int, n: int, z: int, axis_size: int):
    """Per example b, move axis k + 1 of `u` (size z) to positions starts_b[b] ... of an axis of
    size n (zeros elsewhere): select + reduce_sum over a one-hot mask of shape (B, n, z)."""
    rel = lax.sub(lax.broadcasted_iota(np.int32, (axis_size, n), 1),
                  lax.broadcast_in_dim(starts_b, (axis_size, n), (0,)))
    mask = lax.eq(lax.broadcast_in_dim(rel, (axis_size, n, z), (0, 1)),
                  lax.broadcasted_iota(np.int32, (axis_size, n, z), 2))
    return _masked_sum(u, mask, k, n)


def _dynamic_update_slice_batch_rule(vals, dims, *, axis_size):
    x, update, *starts = vals
    x_dim, u_dim, *start_dims = dims
    x = batching.bdim_at_front(x, x_dim, axis_size)
    update = batching.bdim_at_front(update, u_dim, axis_size)
    if all(d is not_mapped for d in start_dims):
        zero = np.zeros((), core.get_aval(starts[0]).dtype if starts else np.int32)
        return dynamic_update_slice_p.bind(x, update, zero, *starts), 0
    # Batched start indices: JAX emits a scatter here; minijax places the update with one-hot
    # masks and selects between it and the operand.
    x_aval, u_aval = core.get_aval(x), core.get_aval(update)
    shape, u_shape = x_aval.shape[1:], u_aval.shape[1:]
    placed = _as_summable(update)
    inside = None
    for k, s in enumerate(_start_vectors(starts, start_dims, axis_size, shape, u_shape)):
        placed = _one_hot_place(placed, s, k, shape[k], u_shape[k], axis_size)
        rel = lax.sub(lax.broadcasted_iota(np.int32, (axis_size, shape[k]), 1),
                      lax.broadcast_in_dim(s, (axis_size, shape[k]), (0,)))
        in_k = lax.bitwise_and(lax.ge(rel, np.int32(0)), lax.lt(rel, np.int32(u_shape[k])))
        in_k = lax.broadcast_in_dim(in_k, x_aval.shape, (0, k + 1))
        inside = in_k if inside is None else lax.bitwise_and(inside, in_k)
    placed = lax.convert_element_type(placed, x_aval.dtype)
    return lax.select_n(inside, x, placed), 0


def _dynamic_update_slice_lowering(ctx, x, update, *starts):
    return mlir.hlo.dynamic_update_slice(x, update, list(starts))


# JAX: jax/_src/lax/slicing.py dynamic_update_slice
def dynamic_update_slice(operand, update, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool | Sequence[bool] = True):
    """`operand` with `update` written at `start_indices` (traced starts, static shape).

    Args:
      operand: `T[d0,...,dn]`; update: `T[u0,...,un]` with u <= d per dimension.
      start_indices: one integer scalar per dimension, as in `dynamic_slice` (negative ones
        count from the end; each is clamped to [0, d - u] so the update fits).
    Returns: `T[d0,...,dn]`. Raises ValueError for the wrong number of indices, TypeError for
    rank/size/dtype mismatches.

    Under vmap with batched start indices the batching rule places the update with one-hot
    masks (select_n + reduce_sum) where JAX uses a scatter.
    """
    aval = core.get_aval(operand)
    starts = _dynamic_slice_indices(aval.shape, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


dynamic_update_slice_p = Primitive("dynamic_update_slice")
dynamic_update_slice_p.def_impl(_dynamic_update_slice_impl)
dynamic_update_slice_p.def_abstract_eval(_dynamic_update_slice_abstract_eval)
ad.primitive_jvps[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.primitive_transposes[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batching.primitive_batchers[dynamic_update_slice_p] = _dynamic_update_slice_batch_rule
mlir.register_lowering(dynamic_update_slice_p, _dynamic_update_slice_lowering)


# ---------------------------------------------------------------------------------------------
# Convenience wrappers along one axis
# ---------------------------------------------------------------------------------------------

def _starts_in_dim(ndim: int, start_index, axis: int, allow_negative_indices: bool
                   ) -> tuple[list, list[bool]]:
    # as JAX's: zeros elsewhere, which need no wrapping (negative indices allowed on `axis` only)
    zero = 0 if isinstance(start_index, (int, np.integer)) else _const(start_index, 0)
    starts, allow = [zero] * ndim, [False] * ndim
    starts[axis], allow[axis] = start_index, allow_negative_indices
    return starts, allow


# JAX: jax/_src/lax/slicing.py dynamic_slice_in_dim
def dynamic_slice_in_dim(operand, start_index, slice_size: int = 1, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """`dynamic_slice` along `axis` only: `T[..., d, ...] -> T[..., slice_size, ...]`."""
    aval = core.get_aval(operand)
    axis = canonicalize_axis(axis, aval.ndim)
    sizes = list(aval.shape)
    sizes[axis] = int(slice_size)
    starts, allow = _starts_in_dim(aval.ndim, start_index, axis, allow_negative_indices)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


# JAX: jax/_src/lax/slicing.py dynamic_index_in_dim
def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """Entry `index` (traced, negative counts from the end, clamped) along `axis`:
    `T[..., d, ...] -> T[..., 1, ...]`, or with `keepdims=False` that axis removed."""
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    if keepdims:
        return out
    return lax.squeeze(out, (int(axis) % core.get_aval(operand).ndim,))


# JAX: jax/_src/lax/slicing.py dynamic_update_slice_in_dim
def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """`dynamic_update_slice` along `axis` only (other starts are 0)."""
    aval = core.get_aval(operand)
    axis = canonicalize_axis(axis, aval.ndim)
    starts, allow = _starts_in_dim(aval.ndim, start_index, axis, allow_negative_indices)
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


# JAX: jax/_src/lax/slicing.py dynamic_update_index_in_dim
def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """Write `update` (`T[..., 1, ...]`, or without that axis) at `index` along `axis`."""
    aval = core.get_aval(operand)
    axis = canonicalize_axis(axis, aval.ndim)
    if core.get_aval(update).ndim == aval.ndim - 1:
        update = lax.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# ---------------------------------------------------------------------------------------------
# gather and scatter
# ---------------------------------------------------------------------------------------------
#
# minijax's gather/scatter primitives have XLA's *native* out-of-bounds behaviour: gather
# clamps each start so the window fits, scatter skips (drops) a window that does not fit. The
# `mode=` of the wrappers is applied around the primitive with other lax ops: "fill" masks a
# clamped gather, "clip" clamps scatter indices first; the primitives carry JAX's params
# (`mode`, `fill_value`, `unique_indices`, `indices_are_sorted`, a scatter's `update_jaxpr`),
# and `mode` records which of these the bound primitive is (JAX does the same rewriting inside
# its lowering). The index vector is always the last dimension of the indices, as in JAX.
# Batching dims (`operand_batching_dims`: operand dims paired one to one with the indices'
# `start_indices_batching_dims`, as in sort's jvp) are lowered as they are; the numpy impl
# first rewrites them as an iota index (`_unbatched_gather`). The batching rules are JAX's: a
# vmapped axis of both operand and indices becomes one more pair of batching dims.


# JAX: jax/_src/lax/slicing.py GatherDimensionNumbers
class GatherDimensionNumbers(NamedTuple):
    """`offset_dims`: output dims holding the slice; `collapsed_slice_dims`: operand dims of
    slice size 1 dropped from the output; `start_index_map`: the operand dim each component of
    the index vector starts; `operand_batching_dims` / `start_indices_batching_dims`: operand
    dims (slice size 1, dropped) read at the position of the paired indices dim."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


# JAX: jax/_src/lax/slicing.py ScatterDimensionNumbers
class ScatterDimensionNumbers(NamedTuple):
    """`update_window_dims`: dims of `updates` that are window dims; `inserted_window_dims`:
    operand dims with window size 1 absent from `updates`; `scatter_dims_to_operand_dims`: the
    operand dim each component of the index vector starts; `operand_batching_dims` /
    `scatter_indices_batching_dims`: as a gather's batching dims."""
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


# JAX: jax/_src/lax/slicing.py GatherScatterMode
class GatherScatterMode(enum.Enum):
    """What gather and scatter do with an index whose window does not fit: CLIP clamps it,
    FILL_OR_DROP fills gathered values (drops scattered ones), PROMISE_IN_BOUNDS trusts the
    caller; ONE_HOT gathers through one-hot products. minijax's wrappers take these or
    their names ("clip", "fill"/"drop", "promise_in_bounds"); ONE_HOT is not modelled."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s):
        """A mode from a GatherScatterMode, its lower-case name or None (FILL_OR_DROP)."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f"Unknown gather mode {s!r}")


def _unbatched_gather(indices, dn: GatherDimensionNumbers, iota, concatenate):
    """The same gather without batching dims: each batching dim of the indices becomes one more
    index component (an iota along it) that starts the paired operand dim, now collapsed.
    `iota(shape, dim)` and `concatenate(xs, dim)` are numpy's or lax's."""
    if not dn.operand_batching_dims:
        return indices, dn
    shape = tuple(indices.shape[:-1]) + (1,)
    counts = [iota(shape, d) for d in dn.start_indices_batching_dims]
    new = GatherDimensionNumbers(
        dn.offset_dims, tuple(sorted((*dn.collapsed_slice_dims, *dn.operand_batching_dims))),
        (*dn.operand_batching_dims, *dn.start_index_map))
    return concatenate([*counts, indices], len(shape) - 1), new


def _numpy_iota(dtype):
    return lambda shape, d: np.broadcast_to(np.arange(shape[d], dtype=dtype).reshape(
        [-1 if i == d else 1 for i in range(len(shape))]), shape)


def _scatter_as_gather(dn: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(*dn)


def _gather_as_scatter(dn: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*dn)


_MODES = (None, "clip", "fill", "drop", "promise_in_bounds", *GatherScatterMode)


def _check_mode(mode) -> None:
    if mode not in _MODES:
        raise ValueError(f'Unknown gather mode "{mode}" (minijax knows {_MODES})')


def _window_starts(shape, indices, index_map):
    """Per batch position, the start of the window in every operand dim: int64[..., ndim]."""
    starts = np.zeros(indices.shape[:-1] + (len(shape),), np.int64)
    for k, d in enumerate(index_map):
        starts[..., d] = indices[..., k]
    return starts


def _window_index(starts, window):
    """Advanced-index arrays picking `window` at each start: each of shape batch + window."""
    nb = starts.ndim - 1
    out = []
    for d, z in enumerate(window):
        ar_shape = [1] * (nb + len(window))
        ar_shape[nb + d] = z
        start = starts[..., d].reshape(starts.shape[:-1] + (1,) * len(window))
        out.append(start + np.arange(z).reshape(ar_shape))
    return tuple(out)


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, mode=None,
                 fill_value=None, **_):
    out = _clamped_gather_impl(operand, indices, dimension_numbers, slice_sizes)
    if mode is not GatherScatterMode.FILL_OR_DROP:
        return out
    # a window that does not fit reads fill_value (JAX: _gather_fill, in its lowering)
    dn = dimension_numbers
    upper = np.array([operand.shape[d] - slice_sizes[d] for d in dn.start_index_map])
    ok = np.all((indices >= 0) & (indices <= upper), axis=-1)
    batch = iter(ok.shape)
    ok = ok.reshape([1 if i in dn.offset_dims else next(batch) for i in range(out.ndim)])
    return np.where(ok, out, np.asarray(fill_value, operand.dtype))


def _clamped_gather_impl(operand, indices, dimension_numbers, slice_sizes):
    indices, dn = _unbatched_gather(indices, dimension_numbers, _numpy_iota(indices.dtype),
                                    np.concatenate)
    starts = _window_starts(operand.shape, indices, dn.start_index_map)
    starts = np.clip(starts, 0, np.array(operand.shape) - np.array(slice_sizes))
    out = operand[_window_index(starts, slice_sizes)]  # batch + slice_sizes
    nb = indices.ndim - 1
    out = out.reshape(indices.shape[:-1] + tuple(
        z for d, z in enumerate(slice_sizes) if d not in dn.collapsed_slice_dims))
    out_ndim = nb + len(dn.offset_dims)
    batch_pos = [i for i in range(out_ndim) if i not in dn.offset_dims]
    src = [0] * out_ndim
    for j, p in enumerate(batch_pos):
        src[p] = j
    for j, p in enumerate(dn.offset_dims):
        src[p] = nb + j
    return np.transpose(out, src)


def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, **_):
    dn = dimension_numbers
    where = f"gather({operand.str_short()}, {indices.str_short()}, {dn}, {slice_sizes})"
    if indices.dtype.kind not in "iu" or indices.ndim < 1:
        raise TypeError(f"{where}: indices must be integers with the index vector last")
    if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims) or any(
            operand.shape[o] != indices.shape[i]
            for o, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims)):
        raise TypeError(f"{where}: operand_batching_dims and start_indices_batching_dims must "
                        "pair dims of equal size")
    indices, dn = _unbatched_gather(indices, dn, lambda shape, d: ShapedArray(
        shape, indices.dtype), lambda xs, d: ShapedArray(
        xs[0].shape[:-1] + (sum(x.shape[-1] for x in xs),), indices.dtype))
    if indices.shape[-1] != len(dn.start_index_map):
        raise TypeError(f"{where}: the index vector has {indices.shape[-1]} components but "
                        f"start_index_map has {len(dn.start_index_map)}")
    if len(slice_sizes) != operand.ndim or any(
            not 0 <= z <= d for z, d in zip(slice_sizes, operand.shape)):
        raise TypeError(f"{where}: slice_sizes must be one size in [0, dim] per operand dim")
    if any(not 0 <= d < operand.ndim for d in (*dn.collapsed_slice_dims, *dn.start_index_map)):
        raise TypeError(f"{where}: collapsed_slice_dims and start_index_map must be operand "
                        f"dims, in [0, {operand.ndim})")
    if any(slice_sizes[d] != 1 for d in dn.collapsed_slice_dims):
        raise TypeError(f"{where}: collapsed_slice_dims must have slice size 1")
    offset_sizes = [z for d, z in enumerate(slice_sizes) if d not in dn.collapsed_slice_dims]
    if len(offset_sizes) != len(dn.offset_dims):
        raise TypeError(f"{where}: offset_dims must name one output dim per uncollapsed "
                        f"operand dim ({len(offset_sizes)})")
    batch = iter(indices.shape[:-1])
    offset = iter(offset_sizes)
    out_ndim = indices.ndim - 1 + len(dn.offset_dims)
    if any(not 0 <= d < out_ndim for d in dn.offset_dims) or len(set(dn.offset_dims)) != len(
            dn.offset_dims):
        raise TypeError(f"{where}: offset_dims must be distinct output dims, in [0, {out_ndim})")
    shape = tuple(next(offset) if i in dn.offset_dims else next(batch) for i in range(out_ndim))
    return operand.update(shape=shape)


# JAX: jax/_src/lax/slicing.py _gather_jvp_rule: the tangent's fill is 0
def _gather_jvp(g, operand, indices, **params):
    fill = 0 if params["mode"] is GatherScatterMode.FILL_OR_DROP else None
    return gather_p.bind(g, indices, **dict(params, fill_value=fill))


def _clamp_indices(indices, upper):
    """`indices` (the index vector last) clamped to [0, upper] component-wise."""
    aval = core.get_aval(indices)
    hi = np.asarray(upper, aval.dtype).reshape((1,) * (aval.ndim - 1) + (len(upper),))
    return lax.max(lax.min(indices, hi), _const(indices, 0))


# JAX: jax/_src/lax/slicing.py _gather_fill's mask
def _in_bounds(indices, upper):
    """bool[batch]: every component of the index vector within [0, upper] (as JAX: the bound
    a constant vector expanded to the indices' rank, the components joined by reduce_and)."""
    aval = core.get_aval(indices)
    ok = lax.bitwise_and(lax.ge(indices, _const(indices, 0)), lax.le(indices, lax.expand_dims(
        np.asarray(upper, aval.dtype), tuple(range(aval.ndim - 1)))))
    return lax.reduce_and(ok, (aval.ndim - 1,))


# JAX: jax/_src/lax/slicing.py _gather_transpose_rule
def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, fill_value,
                      indices_are_sorted, mode, unique_indices):
    if is_undefined_primal(indices):
        raise NotImplementedError("gather is not linear in its indices")
    if type(ct) is Zero:
        return [Zero(operand.aval), None]
    dn = dimension_numbers
    if mode is GatherScatterMode.CLIP:  # the scatter drops what the gather clamped: clamp too
        upper = [operand.aval.shape[d] - slice_sizes[d] for d in dn.start_index_map]
        indices = _clamp_indices(indices, upper)
    zeros = lax.full(operand.aval.shape, 0, operand.aval.dtype)
    return [scatter_add_p.bind(zeros, indices, ct, dimension_numbers=_gather_as_scatter(dn),
                               **_scatter_params(scatter_add_p, operand.aval.dtype, mode,
                                                 indices_are_sorted, unique_indices)), None]


# JAX: jax/_src/lax/slicing.py _gather_batching_rule
def _gather_batch_rule(vals, dims, *, axis_size, dimension_numbers, slice_sizes, **params):
    (operand, indices), (od, idd) = vals, dims
    dn = dimension_numbers
    # dims renumbered with numpy, as JAX's (they print as np.int64)
    if idd is not_mapped:  # the batch axis becomes the first offset dim
        new = GatherDimensionNumbers(
            (0,) + tuple(np.add(1, dn.offset_dims)), tuple(np.add(1, dn.collapsed_slice_dims)),
            tuple(np.add(1, dn.start_index_map)), tuple(np.add(1, dn.operand_batching_dims)),
            dn.start_indices_batching_dims)
        return gather_p.bind(batching.moveaxis(operand, od, 0), indices, dimension_numbers=new,
                             slice_sizes=(axis_size,) + tuple(slice_sizes), **params), 0
    indices = batching.moveaxis(indices, idd, 0)
    if od is not_mapped:  # the batch axis is the first batch dim of the indices
        new = GatherDimensionNumbers(
            tuple(1 + d for d in dn.offset_dims), dn.collapsed_slice_dims, dn.start_index_map,
            dn.operand_batching_dims, tuple(np.add(1, dn.start_indices_batching_dims)))
        params = dict(params, unique_indices=False, indices_are_sorted=False)
        return gather_p.bind(operand, indices, dimension_numbers=new,
                             slice_sizes=slice_sizes, **params), 0
    # both batched: the batch axis pairs operand and indices as one more batching dim
    new = GatherDimensionNumbers(
        tuple(np.add(1, dn.offset_dims)), tuple(np.add(1, dn.collapsed_slice_dims)),
        tuple(np.add(1, dn.start_index_map)), (0,) + tuple(np.add(1, dn.operand_batching_dims)),
        (0,) + tuple(np.add(1, dn.start_indices_batching_dims)))
    return gather_p.bind(batching.moveaxis(operand, od, 0), indices, dimension_numbers=new,
                         slice_sizes=(int(axis_size != 0),) + tuple(slice_sizes), **params), 0


def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes, fill_value,
                     indices_are_sorted, mode, unique_indices):
    if mode is GatherScatterMode.FILL_OR_DROP:  # as JAX's: a masked in-bounds gather
        # traced without the manual axes' varying marks (no axis is bound while lowering)
        plain = mlir.LoweringRuleContext([a.update(vma=frozenset()) for a in ctx.avals_in],
                                         ctx.avals_out, ctx.platforms)
        return mlir.lower_fun(lambda o, i: _gather_fill(
            o, i, dimension_numbers, slice_sizes, fill_value), multiple_results=False)(
                plain, operand, indices)
    dn = dimension_numbers
    dnums = mlir.hlo.GatherDimensionNumbers.get(
        offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims),
        start_index_map=list(dn.start_index_map), index_vector_dim=ctx.avals_in[1].ndim - 1)
    return mlir.hlo.gather(operand, indices, dnums, list(slice_sizes),
                           indices_are_sorted=bool(indices_are_sorted))


# JAX: jax/_src/lax/slicing.py _gather_fill
def _gather_fill(operand, indices, dn: GatherDimensionNumbers, slice_sizes, fill_value):
    aval = core.get_aval(operand)
    upper = [aval.shape[d] - slice_sizes[d] for d in dn.start_index_map]
    mask = _in_bounds(indices, upper)  # before the gather, in JAX's order
    out = gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                        **_gather_params(GatherScatterMode.PROMISE_IN_BOUNDS))
    out_shape = core.get_aval(out).shape
    batch_pos = tuple(i for i in range(len(out_shape)) if i not in dn.offset_dims)
    mask = lax.broadcast_in_dim(mask, out_shape, batch_pos)
    return lax.select(mask, out, lax.full_like(out, fill_value))


def _default_fill(dtype):
    if dtypes.is_float(dtype) or np.dtype(dtype).kind == "c":
        return np.nan
    if np.dtype(dtype).kind == "i":
        return dtypes.iinfo(dtype).min
    if np.dtype(dtype).kind == "u":
        return dtypes.iinfo(dtype).max
    return True


# JAX: jax/_src/lax/slicing.py gather
def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode=None, fill_value=None):
    """XLA's gather: for each index vector in `start_indices`, a slice of `operand`.

    Args:
      operand: `T[d0,...,dn]`.
      start_indices: `int[b..., k]`, the index vector last; component j starts operand dim
        `dimension_numbers.start_index_map[j]`.
      dimension_numbers: a `GatherDimensionNumbers` (no batching dims; see above).
      slice_sizes: one static size per operand dim.
      mode: None or "promise_in_bounds" (PROMISE_IN_BOUNDS, as JAX's default), "clip"
        (starts clamped so the slice fits), or "fill" (FILL_OR_DROP: a slice that does not
        fit is `fill_value`: NaN for floats, the minimum for signed ints, the maximum for
        unsigned, True for bool; masked in the impl and the lowering, as JAX's).
    Returns: `T[...]` of rank `len(b) + len(offset_dims)`: the slice dims at `offset_dims`, the
    index batch dims in the other positions. Raises TypeError for inconsistent dims/sizes.
    `unique_indices`/`indices_are_sorted` are accepted for JAX compatibility and unused.
    The transpose (a scatter_add) sends each cotangent to the clamped window, so out-of-range
    indices under mode None differ from JAX, whose gradient drops them (a broken promise).
    """
    _check_mode(mode)
    dn = GatherDimensionNumbers(*(tuple(f) for f in dimension_numbers))
    sizes = tuple(int(z) for z in slice_sizes)
    kind = GatherScatterMode.from_any("promise_in_bounds" if mode is None else mode)
    fill = None
    if kind is GatherScatterMode.FILL_OR_DROP:
        dtype = core.get_aval(operand).dtype
        fill = _default_fill(dtype) if fill_value is None else fill_value
    return gather_p.bind(operand, start_indices, dimension_numbers=dn, slice_sizes=sizes,
                         **_gather_params(kind, indices_are_sorted, unique_indices, fill))


def _gather_params(mode: GatherScatterMode, indices_are_sorted: bool = False,
                   unique_indices: bool = False, fill_value=None) -> dict:
    return dict(fill_value=fill_value, indices_are_sorted=bool(indices_are_sorted), mode=mode,
                unique_indices=bool(unique_indices))


gather_p = Primitive("gather")
gather_p.def_impl(_gather_impl)
gather_p.def_abstract_eval(_gather_abstract_eval)
ad.defjvp(gather_p, _gather_jvp, None)
ad.primitive_transposes[gather_p] = _gather_transpose
batching.primitive_batchers[gather_p] = _gather_batch_rule
mlir.register_lowering(gather_p, _gather_lowering)


def _scatter_window(operand_shape, updates_shape, dn: ScatterDimensionNumbers):
    """The window size in every operand dim (1 where inserted or a batching dim)."""
    sizes = iter(updates_shape[d] for d in dn.update_window_dims)
    ones = {*dn.inserted_window_dims, *getattr(dn, "operand_batching_dims", ())}
    return tuple(1 if d in ones else next(sizes) for d in range(len(operand_shape)))


def _scatter_impl_rule(ufunc):
    def impl(operand, indices, updates, *, dimension_numbers, **_):
        indices, gdn = _unbatched_gather(indices, _scatter_as_gather(dimension_numbers),
                                         _numpy_iota(indices.dtype), np.concatenate)
        dn = _gather_as_scatter(gdn)
        window = _scatter_window(operand.shape, updates.shape, dn)
        scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        u = np.transpose(updates, scatter_dims + list(dn.update_window_dims))
        batch = indices.shape[:-1]
        u = u.reshape(batch + window)
        starts = _window_starts(operand.shape, indices, dn.scatter_dims_to_operand_dims)
        ok = np.all((starts >= 0) & (starts <= np.array(operand.shape) - np.array(window)), -1)
        idx = _window_index(starts, window)
        keep = np.broadcast_to(ok.reshape(batch + (1,) * len(window)), u.shape)
        idx = tuple(np.broadcast_to(i, u.shape)[keep] for i in idx)
        out = operand.copy()
        if ufunc is None:
            out[idx] = u[keep]  # with repeated indices, the last write wins
        else:
            ufunc.at(out, idx, u[keep])
        return out
    return impl


def _scatter_abstract_eval(name):
    def rule(operand, indices, updates, *, dimension_numbers, **_):
        dn = dimension_numbers
        where = (f"{name}({operand.str_short()}, {indices.str_short()}, "
                 f"{updates.str_short()}, {dn})")
        if indices.dtype.kind not in "iu" or indices.ndim < 1:
            raise TypeError(f"{where}: indices must be integers with the index vector last")
        indices, gdn = _unbatched_gather(indices, _scatter_as_gather(dn), lambda shape, d: (
            ShapedArray(shape, indices.dtype)), lambda xs, d: ShapedArray(
            xs[0].shape[:-1] + (sum(x.shape[-1] for x in xs),), indices.dtype))
        dn = _gather_as_scatter(gdn)
        if operand.dtype != updates.dtype:
            raise TypeError(f"{where}: operand and updates must have the same dtype")
        if indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
            raise TypeError(f"{where}: index vector size != len(scatter_dims_to_operand_dims)")
        if (any(not 0 <= d < operand.ndim
                for d in (*dn.inserted_window_dims, *dn.scatter_dims_to_operand_dims))
                or any(not 0 <= d < updates.ndim for d in dn.update_window_dims)):
            raise TypeError(f"{where}: a dimension number is out of range (operand dims in "
                            f"[0, {operand.ndim}), updates dims in [0, {updates.ndim}))")
        if len(dn.update_window_dims) + len(dn.inserted_window_dims) != operand.ndim:
            raise TypeError(f"{where}: update_window_dims and inserted_window_dims must "
                            "account for every operand dim")
        scatter_shape = tuple(s for d, s in enumerate(updates.shape)
                              if d not in dn.update_window_dims)
        if scatter_shape != indices.shape[:-1]:
            raise TypeError(f"{where}: the updates' scatter dims {scatter_shape} must equal "
                            f"the indices' batch dims {indices.shape[:-1]}")
        window = _scatter_window(operand.shape, updates.shape, dn)
        inserted = {*dn.inserted_window_dims, *getattr(dn, "operand_batching_dims", ())}
        # as JAX's shape rule: only the updates' window dims are bounded by the operand (an
        # inserted dim's window of 1 may meet an empty operand: every update is dropped)
        if any(w > d for k, (w, d) in enumerate(zip(window, operand.shape))
               if k not in inserted):
            raise TypeError(f"{where}: update window {window} larger than the operand")
        return operand.update(weak_type=operand.weak_type and updates.weak_type)
    return rule


def _scatter_gather_dnums(dn: ScatterDimensionNumbers, operand_shape, updates_shape):
    """The gather reading back what a scatter with `dn` writes (for transposes)."""
    window = _scatter_window(operand_shape, updates_shape, dn)
    return _scatter_as_gather(dn), tuple(
        1 if d in dn.operand_batching_dims else w for d, w in enumerate(window))


@functools.lru_cache(maxsize=None)
def _update_jaxpr(name: str, dtype: np.dtype):
    """The scalar combiner JAX records on a scatter (`update_jaxpr`): `add` for scatter-add."""
    from minijax.interpreters import partial_eval as pe  # not at the top: pe imports lax
    combine = {"scatter-add": lax.add, "scatter-sub": lax.sub, "scatter-mul": lax.mul,
               "scatter-min": lax.min, "scatter-max": lax.max}[name]
    aval = ShapedArray((), dtype)
    jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(lambda a, b: [combine(a, b)], [aval, aval],
                                            purpose="scatter")
    return jaxpr


def _scatter_params(prim: Primitive, dtype, mode: GatherScatterMode,
                    indices_are_sorted: bool = False, unique_indices: bool = False) -> dict:
    return dict(indices_are_sorted=bool(indices_are_sorted), mode=mode,
                unique_indices=bool(unique_indices), update_consts=(),
                update_jaxpr=None if prim is scatter_p else _update_jaxpr(prim.name,
                                                                          np.dtype(dtype)))


def _scatter_linear_jvp(prim):
    def jvp(primals, tangents, **params):
        operand, indices, updates = primals
        t_op, _, t_up = tangents
        out = prim.bind(operand, indices, updates, **params)
        t_out = prim.bind(ad.instantiate_zeros(t_op), indices, ad.instantiate_zeros(t_up),
                          **params)
        return out, t_out
    return jvp


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers, **params):
    if is_undefined_primal(indices):
        raise NotImplementedError("scatter_add is not linear in its indices")
    op_lin, up_lin = is_undefined_primal(operand), is_undefined_primal(updates)
    if type(ct) is Zero:
        return [Zero(operand.aval) if op_lin else None, None,
                Zero(updates.aval) if up_lin else None]
    ct_up = None
    if up_lin:
        gdn, sizes = _scatter_gather_dnums(dimension_numbers, core.get_aval(ct).shape,
                                           updates.aval.shape)
        # as JAX's: a gather in the scatter's mode, dropped windows get no cotangent
        ct_up = gather(ct, indices, gdn, sizes, mode=params["mode"], fill_value=0)
    return [ct if op_lin else None, None, ct_up]


def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers, **params):
    # assumes unique indices (as JAX's scatter transpose does): each written position came from
    # exactly one update and its old operand value is lost
    if is_undefined_primal(indices):
        raise NotImplementedError("scatter is not linear in its indices")
    op_lin, up_lin = is_undefined_primal(operand), is_undefined_primal(updates)
    if type(ct) is Zero:
        return [Zero(operand.aval) if op_lin else None, None,
                Zero(updates.aval) if up_lin else None]
    u_aval = updates.aval if up_lin else core.get_aval(updates)
    ct_op = ct_up = None
    if op_lin:
        ct_op = scatter_p.bind(ct, indices, lax.full(u_aval.shape, 0, u_aval.dtype),
                               dimension_numbers=dimension_numbers, **params)
    if up_lin:
        gdn, sizes = _scatter_gather_dnums(dimension_numbers, core.get_aval(ct).shape,
                                           u_aval.shape)
        ct_up = gather(ct, indices, gdn, sizes, mode=params["mode"], fill_value=0)
    return [ct_op, None, ct_up]


def _scatter_mul_jvp(primals, tangents, **params):
    operand, indices, updates = primals
    t_op, _, t_up = tangents
    if type(t_up) is not Zero:
        raise NotImplementedError("scatter_mul: differentiation with respect to the updates "
                                  "is not implemented (JAX has it for unique_indices=True "
                                  "only) — see chapters/04-forward-mode.md")
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    return out, scatter_mul_p.bind(t_op, indices, updates, **params)


def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    # linear in the operand only (with known updates): each position is scaled by its updates
    if is_undefined_primal(indices) or is_undefined_primal(updates):
        raise NotImplementedError("scatter_mul is linear only in its operand")
    if type(ct) is Zero:
        return [Zero(operand.aval), None, None]
    return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]


# JAX: jax/_src/lax/slicing.py _scatter_extremal_jvp
def _scatter_extremal_jvp(prim):
    """scatter-max/-min: the tangent of each written position comes from the values that
    win it, averaged over ties (the operand's own value included), as JAX's rule does."""
    def jvp(primals, tangents, *, dimension_numbers, **params):
        operand, indices, updates = primals
        t_op, _, t_up = tangents
        out = prim.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                        **params)
        if type(t_op) is Zero and type(t_up) is Zero:
            return out, Zero.from_primal_value(out)
        t_op, t_up = ad.instantiate_zeros(t_op), ad.instantiate_zeros(t_up)
        gdn, sizes = _scatter_gather_dnums(dimension_numbers, core.get_aval(operand).shape,
                                           core.get_aval(updates).shape)

        def gather_(x):  # what the scatter wrote, read back at each update
            return _gather_fill(x, indices, gdn, sizes, 0)

        def scatter_add_(x, u):
            return scatter_add(x, indices, u, dimension_numbers, mode=params["mode"],
                               indices_are_sorted=params["indices_are_sorted"],
                               unique_indices=params["unique_indices"])
        zeros_up, ones_up = lax.full_like(updates, 0), lax.full_like(updates, 1)
        target = gather_(out)
        won, kept = lax.eq(updates, target), lax.eq(gather_(operand), target)
        n_won = gather_(scatter_add_(lax.full_like(operand, 0),
                                     lax.select(won, ones_up, zeros_up)))
        n_refs = gather_(scatter_add_(lax.full_like(operand, 0), ones_up))
        share = lax.select(kept, 1.0 / (n_won + 1), 1.0 / n_won)
        operand_share = lax.select(kept, 1.0 / (n_won + 1), lax.full_like(n_won, 0))
        t_updates = (gather_(t_op) * ((-1.0 + operand_share) / n_refs)
                     + t_up * lax.select(won, share, zeros_up))
        return out, scatter_add_(t_op, t_updates)
    return jvp


# JAX: jax/_src/lax/slicing.py _scatter_batching_rule
def _scatter_batch_rule(prim):
    def rule(vals, dims, *, axis_size, dimension_numbers, **params):
        (operand, indices, updates), (od, idd, ud) = vals, dims
        dn = dimension_numbers
        operand = batching.bdim_at_front(operand, od, axis_size)
        updates = batching.bdim_at_front(updates, ud, axis_size)
        # dims renumbered with numpy, as JAX's (they print as np.int64)
        if idd is not_mapped:  # the batch axis is a window dim of every update
            new = ScatterDimensionNumbers(
                (0,) + tuple(np.add(1, dn.update_window_dims)),
                tuple(np.add(1, dn.inserted_window_dims)),
                tuple(np.add(1, dn.scatter_dims_to_operand_dims)),
                tuple(np.add(1, dn.operand_batching_dims)), dn.scatter_indices_batching_dims)
            return prim.bind(operand, indices, updates, dimension_numbers=new, **params), 0
        # batched indices: the batch axis pairs operand and indices as one more batching dim
        indices = batching.bdim_at_front(indices, idd, axis_size)
        new = ScatterDimensionNumbers(
            tuple(np.add(1, dn.update_window_dims)), tuple(np.add(1, dn.inserted_window_dims)),
            tuple(np.add(1, dn.scatter_dims_to_operand_dims)),
            (0,) + tuple(np.add(1, dn.operand_batching_dims)),
            (0,) + tuple(np.add(1, dn.scatter_indices_batching_dims)))
        return prim.bind(operand, indices, updates, dimension_numbers=new, **params), 0
    return rule


def _scatter_lowering(combine: str | None):
    def rule(ctx, operand, indices, updates, *, dimension_numbers, indices_are_sorted, mode,
             unique_indices, update_consts, update_jaxpr):
        dn = dimension_numbers
        dnums = mlir.hlo.ScatterDimensionNumbers.get(
            update_window_dims=list(dn.update_window_dims),
            inserted_window_dims=list(dn.inserted_window_dims),
            input_batching_dims=list(dn.operand_batching_dims),
            scatter_indices_batching_dims=list(dn.scatter_indices_batching_dims),
            scattered_dims_to_operand_dims=list(dn.scatter_dims_to_operand_dims),
            index_vector_dim=ctx.avals_in[1].ndim - 1)
        aval_out = ctx.avals_out[0]
        op = mlir.hlo.ScatterOp([mlir.aval_to_ir_type(aval_out)], [operand], indices, [updates],
                                dnums, indices_are_sorted=bool(indices_are_sorted),
                                unique_indices=bool(unique_indices))
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval_out.dtype))
        block = op.update_computation.blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            old, new = block.arguments
            mlir.hlo.return_([new if combine is None else getattr(mlir.hlo, combine)(old, new)])
        return op.result
    rule.__name__ = f"_scatter_{combine or 'replace'}_lowering"
    return rule


def _scatter_wrapper(prim):
    def wrapper(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers,
                *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        _check_mode(mode)
        dn = ScatterDimensionNumbers(*(tuple(f) for f in dimension_numbers))
        kind = GatherScatterMode.FILL_OR_DROP
        if mode in ("clip", GatherScatterMode.CLIP):
            kind = GatherScatterMode.CLIP
            shape = core.get_aval(operand).shape
            window = _scatter_window(shape, core.get_aval(updates).shape, dn)
            upper = [shape[d] - window[d] for d in dn.scatter_dims_to_operand_dims]
            scatter_indices = _clamp_indices(scatter_indices, upper)
        elif mode in ("promise_in_bounds", GatherScatterMode.PROMISE_IN_BOUNDS):
            kind = GatherScatterMode.PROMISE_IN_BOUNDS
        return prim.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                         **_scatter_params(prim, core.get_aval(operand).dtype, kind,
                                           indices_are_sorted, unique_indices))
    return wrapper


_SCATTER_DOC = """Scatter `updates` into `operand` at `scatter_indices`, {how}.

    Args:
      operand: `T[d0,...,dn]`; scatter_indices: `int[b..., k]` (index vector last);
      updates: `T[...]` whose non-window dims equal `b`, window dims at `update_window_dims`.
      dimension_numbers: a `ScatterDimensionNumbers` (no batching dims).
      mode: None, "fill", "drop" or "promise_in_bounds" (a window that does not fit is
        skipped, XLA's behaviour) or "clip" (indices clamped so every window fits).
    Returns: `T[d0,...,dn]`. Raises TypeError for inconsistent shapes or dtypes.
    """


def _scatter_primitive(name: str, ufunc, combine: str | None) -> Primitive:
    prim = Primitive(name)
    prim.combiner_params = ("update_jaxpr",)  # read by dispatch: not a jaxpr the impl runs
    prim.def_impl(_scatter_impl_rule(ufunc))
    prim.def_abstract_eval(_scatter_abstract_eval(name))
    batching.primitive_batchers[prim] = _scatter_batch_rule(prim)
    mlir.register_lowering(prim, _scatter_lowering(combine))
    return prim


scatter_p = _scatter_primitive("scatter", None, None)
ad.primitive_jvps[scatter_p] = _scatter_linear_jvp(scatter_p)  # unique indices assumed
ad.primitive_transposes[scatter_p] = _scatter_transpose
# JAX: jax/_src/lax/slicing.py scatter
scatter = _scatter_wrapper(scatter_p)
scatter.__name__ = "scatter"
scatter.__doc__ = _SCATTER_DOC.format(how="replacing (with repeated indices one write wins)")

scatter_add_p = _scatter_primitive("scatter-add", np.add, "add")
ad.primitive_jvps[scatter_add_p] = _scatter_linear_jvp(scatter_add_p)
ad.primitive_transposes[scatter_add_p] = _scatter_add_transpose
# JAX: jax/_src/lax/slicing.py scatter_add
scatter_add = _scatter_wrapper(scatter_add_p)
scatter_add.__name__ = "scatter_add"
scatter_add.__doc__ = _SCATTER_DOC.format(how="adding (repeated indices accumulate)")

scatter_mul_p = _scatter_primitive("scatter-mul", np.multiply, "multiply")
ad.primitive_jvps[scatter_mul_p] = _scatter_mul_jvp
ad.primitive_transposes[scatter_mul_p] = _scatter_mul_transpose
# JAX: jax/_src/lax/slicing.py scatter_mul
scatter_mul = _scatter_wrapper(scatter_mul_p)
scatter_mul.__name__ = "scatter_mul"
scatter_mul.__doc__ = _SCATTER_DOC.format(how="multiplying (no derivative for `updates`)")

scatter_min_p = _scatter_primitive("scatter-min", np.minimum, "minimum")
ad.primitive_jvps[scatter_min_p] = _scatter_extremal_jvp(scatter_min_p)
# JAX: jax/_src/lax/slicing.py scatter_min
scatter_min = _scatter_wrapper(scatter_min_p)
scatter_min.__name__ = "scatter_min"
scatter_min.__doc__ = _SCATTER_DOC.format(how="taking the minimum")

scatter_max_p = _scatter_primitive("scatter-max", np.maximum, "maximum")
ad.primitive_jvps[scatter_max_p] = _scatter_extremal_jvp(scatter_max_p)
# JAX: jax/_src/lax/slicing.py scatter_max
scatter_max = _scatter_wrapper(scatter_max_p)
scatter_max.__name__ = "scatter_max"
scatter_max.__doc__ = _SCATTER_DOC.format(how="taking the maximum")


def _scatter_sub_transpose(ct, operand, indices, updates, **params):
    # operand - scattered updates: the operand's cotangent is ct, the updates' minus ct gathered
    outs = _scatter_add_transpose(ct, operand, indices, updates, **params)
    return outs[:2] + [outs[2] if outs[2] is None or type(outs[2]) is Zero
                       else lax.neg(outs[2])]


scatter_sub_p = _scatter_primitive("scatter-sub", np.subtract, "subtract")
ad.primitive_jvps[scatter_sub_p] = _scatter_linear_jvp(scatter_sub_p)
ad.primitive_transposes[scatter_sub_p] = _scatter_sub_transpose
# JAX: jax/_src/lax/slicing.py scatter_sub
scatter_sub = _scatter_wrapper(scatter_sub_p)
scatter_sub.__name__ = "scatter_sub"
scatter_sub.__doc__ = _SCATTER_DOC.format(how="subtracting (repeated indices accumulate)")


# JAX: jax/_src/lax/slicing.py scatter_apply — differs: a gather, `func`, then a scatter, so
# a repeated index sees `func` once (JAX's scatter applies it once per occurrence)
def scatter_apply(operand, scatter_indices, func, dimension_numbers: ScatterDimensionNumbers,
                  *, update_shape: Sequence[int] = (), indices_are_sorted: bool = False,
                  unique_indices: bool = False, mode=None):
    """`operand` with `func` applied (elementwise) to the windows `scatter_indices` names;
    `update_shape`: the shape the updates of such a scatter would have."""
    dn = ScatterDimensionNumbers(*(tuple(int(d) for d in f) for f in dimension_numbers))
    gdn, sizes = _scatter_gather_dnums(dn, core.get_aval(operand).shape, tuple(update_shape))
    current = gather(operand, scatter_indices, gdn, sizes, mode="clip" if mode == "clip"
                     else None)
    return scatter(operand, scatter_indices, func(current), dn, mode=mode)


# JAX: jax/_src/lax/slicing.py index_take
def index_take(src, idxs, axes: Sequence[int]):
    """`src[idxs[0], idxs[1], ...]` along `axes` (one index array per axis, one shape):
    the indexed axes become the index shape, in front of the remaining axes."""
    idxs = [_int_indices(i) for i in idxs]
    indices = lax.concatenate([lax.expand_dims(i, (core.get_aval(i).ndim,)) for i in idxs],
                              core.get_aval(idxs[0]).ndim)
    axes = tuple(int(a) for a in axes)
    shape = core.get_aval(src).shape
    offset = tuple(d for d in range(len(shape)) if d not in axes)
    batch = core.get_aval(idxs[0]).ndim
    dn = GatherDimensionNumbers(offset_dims=tuple(range(batch, batch + len(offset))),
                                collapsed_slice_dims=tuple(sorted(axes)), start_index_map=axes)
    sizes = tuple(1 if d in axes else s for d, s in enumerate(shape))
    return gather(src, indices, dn, sizes)


def _int_indices(x):
    return lax.convert_element_type(x, np.int32) if core.get_aval(x).dtype.kind != "i" else x
