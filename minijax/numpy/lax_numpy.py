"""`minijax.numpy`: the NumPy API on top of `minijax.lax`, with JAX's promotion rules.

This module holds the dtypes jnp exposes, array creation, shapes (reshape, concatenate, pad,
split, ...), diagonals, selection (`where`, `clip`, `select`), searching and interpolation, and the
functions whose output shape depends on input values (nonzero, argwhere: concrete input or a
static `size=`). The elementwise functions are in ufuncs.py, reductions in reductions.py,
indexing in indexing.py, products in tensor_contractions.py and einsum.py, sorting and set
operations in sorting.py and setops.py; minijax/numpy/__init__.py gathers the public names.
Mirrors jax/_src/numpy/lax_numpy.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Sequence

import numpy as np

from minijax import core, dtypes, lax, prng
from minijax.array import Array
from minijax.core import Tracer
from minijax.lax import lax as lax_internal
from minijax.numpy import indexing, reductions, ufuncs, util
from minijax.numpy.array_constructors import array, asarray
from minijax.numpy.util import (
    canonicalize_axis,
    canonicalize_shape,
    concrete_or_none,
    dtype_kind,
    dtype_of,
    is_floating,
    keep_weak,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
    reduction_axes,
    shape_of,
    size_error,
    slice_axis,
)
from minijax.numpy.vectorize import vectorize

_const = lax_internal._const
_int = np.int32


# ---------------------------------------------------------------------------------------------
# dtypes, as jnp exposes them (the scalar types are in scalar_types.py)
# ---------------------------------------------------------------------------------------------


inf, nan, pi, e = np.inf, np.nan, np.pi, np.e
newaxis = None
ndarray = Array
promote_types = dtypes.promote_types
result_type = dtypes.result_type
finfo = dtypes.finfo
iinfo = dtypes.iinfo
issubdtype = dtypes.issubdtype
floating, integer, inexact, number = np.floating, np.integer, np.inexact, np.number
# NumPy's abstract scalar classes, for issubdtype (jnp re-exports NumPy's own, as here)
generic, character, flexible, object_ = np.generic, np.character, np.flexible, np.object_
signedinteger, unsignedinteger, complexfloating = (np.signedinteger, np.unsignedinteger,
                                                   np.complexfloating)
ComplexWarning = np.exceptions.ComplexWarning
euler_gamma = np.euler_gamma


def dtype(x):
    """The dtype of an array-like, or `x` itself as a dtype (a type, a name, a np.dtype)."""
    if isinstance(x, (type, str, np.dtype)) or not hasattr(x, "dtype"):
        return np.dtype(x)
    return core.get_aval(x).dtype


def shape(x):
    return core.get_aval(x).shape


def ndim(x):
    return core.get_aval(x).ndim


def size(x):
    return core.get_aval(x).size


def astype(x, dtype):
    """`x` converted to `dtype` (`x.astype(dtype)`; jax.numpy.astype)."""
    return lax.convert_element_type(x, dtype)


# ---------------------------------------------------------------------------------------------
# Array creation
# ---------------------------------------------------------------------------------------------

def _default_dtype(dtype):
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


def zeros(shape, dtype=None):
    """An array of zeros (default dtype float32)."""
    return lax.full(canonicalize_shape(shape), 0, _default_dtype(dtype))


def ones(shape, dtype=None):
    """An array of ones (default dtype float32)."""
    return lax.full(canonicalize_shape(shape), 1, _default_dtype(dtype))


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (weakly typed for a Python scalar fill and
    no dtype, as in JAX)."""
    return lax.full(canonicalize_shape(shape), fill_value, dtype)


def zeros_like(a, dtype=None, shape=None):
    return full_like(a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return full_like(a, 1, dtype, shape)


# JAX: jax/_src/numpy/array_creation.py full_like
def full_like(a, fill_value, dtype=None, shape=None):
    """An array like `a` (its shape and dtype unless given) filled with `fill_value`, a scalar
    or an array broadcast to the shape (ValueError if it does not broadcast)."""
    shape = None if shape is None else canonicalize_shape(shape)
    if np.ndim(fill_value) == 0:
        return lax.full_like(a, fill_value, dtype, shape)
    fill = asarray(fill_value, dtype=dtype_of(a) if dtype is None else dtype)
    return broadcast_to(fill, shape_of(a) if shape is None else shape)


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) with `step`, as a concrete array (bounds must be
    concrete: ConcretizationTypeError under tracing otherwise). `arange(n)` is an `iota`."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            v._concrete("arange")
    if getattr(start, "is_symbolic_dim", False) and stop is None and step is None:
        return lax.iota(dtypes.canonicalize_dtype(dtype or np.int64), start)  # as JAX: int
    if stop is None and step is None and dtype is None or (
            stop is None and step is None and np.dtype(dtype).kind in "iu"):
        d = dtypes.canonicalize_dtype(dtype or np.result_type(start))
        if np.dtype(d).kind in "iu":
            return lax.iota(d, int(start))
    val = np.arange(start, stop, step)
    d = dtypes.canonicalize_dtype(dtype or val.dtype)
    return array(val.astype(d))


# JAX: jax/_src/numpy/array_creation.py linspace, _linspace
def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype=None, axis: int = 0):
    """`num` evenly spaced values from `start` to `stop`: scalars or arrays (broadcast
    together; the samples run along the new axis `axis`), traced or not; with `retstep`
    also the step. Computed as JAX computes it (`start * (1 - t) + stop * t`), so the
    endpoints are exact. ValueError for a negative `num`."""
    num, axis = operator.index(num), operator.index(axis)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    util.check_arraylike("linspace", start, stop)
    dtype = (_inexact(dtypes.result_type(start, stop)) if dtype is None
             else dtypes.canonicalize_dtype(dtype))
    cdt = _inexact(dtype)
    start, stop = asarray(start, dtype=cdt), asarray(stop, dtype=cdt)
    bounds = list(util.broadcast_shapes(shape_of(start), shape_of(stop)))
    start, stop = broadcast_to(start, bounds), broadcast_to(stop, bounds)
    axis = len(bounds) + axis + 1 if axis < 0 else axis
    shape = [*bounds[:axis], 1, *bounds[axis:]]
    div = num - 1 if endpoint else num
    if num > 1:
        delta = (stop - start) / asarray(div, dtype=cdt)
        real = dtypes.finfo(cdt).dtype
        t = lax.iota(real, div) / asarray(div, dtype=real)
        t = lax.convert_element_type(reshape(t, [div if i == axis else 1
                                                 for i in range(len(shape))]), cdt)
        out = reshape(start, shape) * (1 - t) + reshape(stop, shape) * t
        if endpoint:
            out = concatenate([out, reshape(stop, shape)], axis)
    elif num == 1:
        delta = full((), np.nan, cdt) if endpoint else stop - start
        out = reshape(start, shape)
    else:
        delta = full((), np.nan, cdt)
        out = zeros([*bounds[:axis], 0, *bounds[axis:]], cdt)
    if dtypes.issubdtype(dtype, np.integer):
        out = ufuncs.floor(out)
    out = lax.convert_element_type(out, dtype)
    return (out, delta) if retstep else out


def _inexact(dtype) -> np.dtype:
    return dtype if dtypes.issubdtype(dtype, np.inexact) else dtypes.default_float_dtype()


# JAX: jax/_src/numpy/array_creation.py logspace, _logspace
def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None,
             axis: int = 0):
    """`base ** linspace(start, stop, num, axis=axis)`, converted to `dtype` (default: the
    bounds' float dtype); bounds and `base` scalars or arrays."""
    dtype = (_inexact(dtypes.result_type(start, stop)) if dtype is None
             else dtypes.canonicalize_dtype(dtype))
    cdt = _inexact(dtype)
    lin = linspace(asarray(start, dtype=cdt), asarray(stop, dtype=cdt), num, endpoint,
                   axis=axis)
    return lax.convert_element_type(ufuncs.power(base, lin), dtype)


# JAX: jax/_src/numpy/array_creation.py geomspace, _geomspace
def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """`num` numbers from `start` to `stop` spaced evenly on a log scale (scalars or arrays;
    bounds of opposite signs give NaN, as in JAX), converted to `dtype` (default float)."""
    dtype = (_inexact(dtypes.result_type(start, stop)) if dtype is None
             else dtypes.canonicalize_dtype(dtype))
    cdt = _inexact(dtype)
    start, stop = asarray(start, dtype=cdt), asarray(stop, dtype=cdt)
    sign = ufuncs.sign(start)
    res = sign * logspace(ufuncs.log10(start / sign), ufuncs.log10(stop / sign), num,
                          endpoint, 10.0, cdt)
    return lax.convert_element_type(moveaxis(res, 0, canonicalize_axis(axis, res.ndim)),
                                    dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None):
    """The identity matrix (ones on diagonal `k`)."""
    return array(np.eye(N, M, k), _default_dtype(dtype))


def tri(N: int, M: int | None = None, k: int = 0, dtype=None):
    """`T[N, M]`: ones at and below diagonal `k`, zeros above (default float dtype)."""
    M = N if M is None else M
    d = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    return lax.convert_element_type(lax_internal._tri((int(N), int(M)), k), d)


def identity(n: int, dtype=None):
    """The n x n identity matrix (default float dtype)."""
    return eye(n, dtype=dtype)


def empty(shape, dtype=None):
    """An array of `shape`; XLA has no uninitialized memory, so zeros (as JAX)."""
    return zeros(shape, dtype)


def empty_like(prototype, dtype=None, shape=None):
    """Zeros like `prototype` (as JAX)."""
    return lax.full_like(prototype, 0, dtype, shape)


def copy(a, order=None):
    """A copy of `a` (arrays are immutable, so the same values)."""
    return array(a, copy=True)


# ---------------------------------------------------------------------------------------------
# Selection and comparison
# ---------------------------------------------------------------------------------------------

def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """`x` where `condition` else `y`, broadcasting all three. The one-argument form
    `where(condition)` is `nonzero(condition, size=size, fill_value=fill_value)`."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided "
                         "to jax.numpy.where, got one of them.")
    return util.where(condition, x, y)


# JAX: jax/_src/numpy/lax_numpy.py clip (under jit, as JAX's)
@util.jit_when_traced()
def clip(a, min=None, max=None):
    """Clamp `a` to [min, max] (either may be None): `minimum(max, maximum(min, a))`, the
    dtypes promoted as those ufuncs do."""
    if min is not None:
        a = ufuncs.maximum(min, a)
    if max is not None:
        a = ufuncs.minimum(max, a)
    return asarray(a)


def select(condlist, choicelist, default=0):
    """The entry of the first true condition's choice, else `default` (all broadcast)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)})")
    if not len(condlist):
        raise ValueError("condlist must be non-empty")
    out_ = default
    for cond, choice in zip(condlist[::-1], choicelist[::-1]):
        out_ = where(cond, choice, out_)
    return out_


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """bool[...]: |a - b| <= atol + rtol * |b| (infinities equal only to themselves); for
    integer and bool inputs, equality."""
    a, b = promote_args("isclose", a, b)
    if not is_floating(a):
        return lax.eq(a, b)
    # JAX: jax/_src/numpy/lax_numpy.py isclose — the tolerances in the real dtype
    real = np.finfo(dtype_of(a)).dtype if dtype_of(a).kind == "c" else dtype_of(a)
    rtol, atol = lax.convert_element_type(rtol, real), lax.convert_element_type(atol, real)
    close = lax.le(lax.abs(lax.sub(a, b)),
                   lax.add(atol, lax.mul(rtol, lax.abs(b))))
    a_inf, b_inf = ufuncs.isinf(a), ufuncs.isinf(b)
    any_inf = lax.bitwise_or(a_inf, b_inf)
    both_inf = lax.bitwise_and(lax.bitwise_and(a_inf, b_inf), lax.eq(a, b))
    out = lax.select(any_inf, both_inf, lax.bitwise_and(close, lax.bitwise_not(any_inf)))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(ufuncs.isnan(a), ufuncs.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """bool[]: whether `isclose` holds everywhere."""
    return reductions.all(isclose(a, b, rtol, atol, equal_nan))


def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's max), -inf -> `neginf` (default:
    its min). Integer and bool inputs are returned unchanged."""
    x = asarray(x)
    if not is_floating(x):
        return x
    info = dtypes.finfo(dtype_of(x))
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(ufuncs.isnan(x), lax.full_like(x, nan), x)
    out = where(ufuncs.isposinf(x), lax.full_like(x, posinf), out)
    return where(ufuncs.isneginf(x), lax.full_like(x, neginf), out)


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

def reshape(a, newshape, order="C", *, out_sharding=None):
    """`a` with shape `newshape` (one entry may be -1). Raises TypeError on size mismatch.
    `out_sharding`: the result's sharding (sharding in types), as lax.reshape's."""
    a = asarray(a)
    newshape = canonicalize_shape(newshape)
    aval = core.get_aval(a)
    if newshape.count(-1) > 1:
        raise TypeError(f"can only specify one unknown axis size with a `-1` value, got "
                        f"{newshape}")
    if -1 in newshape:
        known = math.prod([d for d in newshape if d != -1])
        # a symbolic remainder (`mod(4*b, 3)`) has no value: operator.index raises JAX's
        # InconclusiveDimensionOperation (minijax/export/shape_poly.py)
        if known == 0 or operator.index(aval.size % known):
            raise TypeError(f"cannot reshape array of shape {aval.shape} (size {aval.size}) "
                            f"into shape {newshape}")
        newshape = tuple(aval.size // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != aval.size:
        raise TypeError(f"cannot reshape array of shape {aval.shape} (size {aval.size}) into "
                        f"shape {newshape} (size {math.prod(newshape)})")
    return lax.reshape(a, newshape, out_sharding=out_sharding)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    a = asarray(a)
    nd = core.get_aval(a).ndim
    axes = tuple(range(nd))[::-1] if axes is None else tuple(
        canonicalize_axis(x, nd) for x in axes)
    return lax.transpose(a, axes)


def swapaxes(a, axis1: int, axis2: int):
    nd = ndim(a)
    perm = list(range(nd))
    i, j = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def moveaxis(a, source, destination):
    """`a` with the axes `source` (an int or a sequence) moved to `destination`, the other
    axes keeping their order. Raises ValueError for sequences of different lengths."""
    a = asarray(a)
    nd = ndim(a)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {src} and destination {dst} must have the same "
                         "number of elements")
    src = [canonicalize_axis(s, nd) for s in src]
    dst = [canonicalize_axis(d, nd) for d in dst]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return lax.transpose(a, tuple(perm))


def expand_dims(a, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = ndim(a) + len(axes)
    return lax.expand_dims(asarray(a), tuple(canonicalize_axis(x, nd) for x in axes))


def squeeze(a, axis=None):
    aval = core.get_aval(a)
    if axis is None:
        axes = tuple(i for i, s in enumerate(aval.shape) if s == 1)
    else:
        axes = tuple(canonicalize_axis(x, aval.ndim) for x in
                     ((axis,) if isinstance(axis, int) else axis))
        bad = [x for x in axes if aval.shape[x] != 1]
        if bad:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                             f"to one: axis {bad[0]} of shape {aval.shape}")
    return lax.squeeze(a, axes) if axes else a


def broadcast_to(a, shape):
    """`a` broadcast to `shape` by numpy's rules (ValueError if incompatible)."""
    return util.broadcast_to(asarray(a), shape)


def concatenate(arrays: Sequence, axis: int = 0):
    """Join arrays along an existing axis (dtypes promoted)."""
    if not len(arrays):
        raise ValueError("Need at least one array to concatenate.")
    if any(isinstance(a, prng.PRNGKeyArray) for a in arrays):
        return _keys_joined(concatenate, arrays, axis)
    arrays = promote_dtypes(*[asarray(a) for a in arrays])
    nd = ndim(arrays[0])
    if nd == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    return lax.concatenate(arrays, canonicalize_axis(axis, nd))


def _keys_joined(join, keys: Sequence, axis: int):
    """`join` (concatenate or stack) of typed keys: of their words, the key axes last.
    ValueError for keys beside other arrays or of several implementations (JAX's promotion
    error) and for concatenating 0-d keys."""
    impls = {k._impl if isinstance(k, prng.PRNGKeyArray) else None for k in keys}
    if len(impls) != 1:
        bad = next(k.dtype for k in keys if isinstance(k, prng.PRNGKeyArray))
        raise ValueError(f"dtype={bad} is not a valid dtype for JAX type promotion.")
    (impl,) = impls
    if join is concatenate and keys[0].ndim == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    nd = keys[0].ndim + (join is stack)
    axis = canonicalize_axis(axis, nd)
    return prng.PRNGKeyArray(impl, join([prng.random_unwrap(k) for k in keys], axis))


def stack(arrays: Sequence, axis: int = 0):
    """Join arrays of equal shape along a new axis."""
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    if isinstance(arrays, (np.ndarray, Array)):  # one array: its rows, as JAX's does
        axis = canonicalize_axis(axis, ndim(arrays))
        return concatenate(expand_dims(arrays, axis + 1), axis)
    if any(isinstance(a, prng.PRNGKeyArray) for a in arrays):
        return _keys_joined(stack, arrays, axis)
    arrays = promote_dtypes(*[asarray(a) for a in arrays])
    shapes = {core.get_aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError("All input arrays must have the same shape.")
    return lax.stack(arrays, axis)


def broadcast_arrays(*args):
    """All `args` broadcast to their common shape (a list)."""
    return util.broadcast_arrays(*[asarray(a) for a in args])


def flip(m, axis=None):
    """`m` reversed along `axis` (None: every axis)."""
    return _flip(asarray(m), tuple(axis) if isinstance(axis, list) else axis)


# JAX: jax/_src/numpy/lax_numpy.py _flip (under jit, as JAX's)
@util.jit_when_traced(static_argnames=("axis",))
def _flip(m, axis=None):
    axes = reduction_axes(m, axis)
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    """`m` reversed along axis 1."""
    return flip(m, 1)


def flipud(m):
    """`m` reversed along axis 0."""
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Elements shifted by `shift` along `axis` (None: of the flattened array, then reshaped),
    wrapping around. `shift` and `axis` may be tuples; a traced shift uses a dynamic_slice
    of `a` joined to itself."""
    a = asarray(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape_of(a))
    if not isinstance(shift, (tuple, list)) and ndim(shift) == 1:  # an array of shifts
        shift = [shift[i] for i in range(shape_of(shift)[0])]
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1:
        shifts = tuple(shifts) * len(axes)
    if len(axes) == 1:
        axes = tuple(axes) * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("Inconsistent lengths of shift and axis")
    for s, ax in zip(shifts, axes):
        ax = canonicalize_axis(ax, core.get_aval(a).ndim)
        n = shape_of(a)[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            doubled = concatenate([a, a], ax)
            start = ufuncs.remainder(lax.neg(lax.convert_element_type(s, _int)), n)
            starts = [np.int32(0)] * core.get_aval(a).ndim
            starts[ax] = start
            a = lax.dynamic_slice(doubled, starts, shape_of(a))
        else:
            s = int(s) % n
            if s:
                a = concatenate([slice_axis(a, ax, n - s, n), slice_axis(a, ax, 0, n - s)], ax)
    return a


def tile(A, reps):
    """`A` repeated `reps[i]` times along each axis (A promoted to len(reps) dims, or reps
    padded with leading 1s)."""
    A = asarray(A)
    reps = core.canonicalize_shape((reps,) if np.ndim(reps) == 0 else reps, "reps of jnp.tile")
    nd = core.get_aval(A).ndim
    reps = (1,) * (nd - len(reps)) + reps
    if len(reps) > nd:
        A = lax.expand_dims(A, tuple(range(len(reps) - nd)))
    return lax.tile(A, reps)  # one `tile` equation, as JAX's (Mosaic lowers it to a concatenate)


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Each element of `a` repeated along `axis` (None: flattened): `repeats` an int, or a
    concrete sequence with one count per element (a traced `repeats` is not supported)."""
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    shape = shape_of(a)
    if isinstance(repeats, Tracer):
        repeats = repeats._concrete("jnp.repeat with a traced `repeats` (minijax needs it "
                                    "concrete)")
    reps = np.asarray(repeats)
    if reps.ndim == 0:
        r = int(reps)
        big = shape[:axis + 1] + (r,) + shape[axis + 1:]
        out_ = lax.broadcast_in_dim(a, big, tuple(i for i in range(len(big)) if i != axis + 1))
        out_ = lax.reshape(out_, shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])
    else:
        idx = np.repeat(np.arange(shape[axis]), reps).astype(_int)
        out_ = indexing.take(a, idx, axis, mode="clip")
    if total_repeat_length is not None and shape_of(out_)[axis] != total_repeat_length:
        raise ValueError(f"repeat: total_repeat_length={total_repeat_length} does not match "
                         f"the {shape_of(out_)[axis]} repeated elements")
    return out_


def _atleast(n: int, dims: dict):
    """JAX's atleast_{n}d (under jit, as JAX's): each input with at least n dimensions, the
    new ones (`dims[ndim]`) inserted with expand_dims; a list when several are given."""
    def atleast(*arys):
        outs = []
        for a in arys:
            a = asarray(a)
            nd = core.get_aval(a).ndim
            outs.append(lax.expand_dims(a, dims[nd]) if nd < n else a)
        return outs[0] if len(outs) == 1 else outs
    atleast.__name__ = atleast.__qualname__ = f"atleast_{n}d"
    atleast.__doc__ = f"Each input with at least {n} dimensions (a list when several are given)."
    return util.jit_when_traced()(atleast)


# JAX: jax/_src/numpy/lax_numpy.py atleast_1d, atleast_2d (`array(x, ndmin=n)`), atleast_3d
atleast_1d = _atleast(1, {0: (0,)})
atleast_2d = _atleast(2, {0: (0, 1), 1: (0,)})
atleast_3d = _atleast(3, {0: (0, 1, 2), 1: (0, 2), 2: (2,)})


def _as_list(tup, fn):
    out = fn(*tup)
    return out if isinstance(out, list) else [out]


def hstack(tup, dtype=None):
    """Join along axis 1 (axis 0 for 1-D inputs)."""
    arrs = _as_list(tup, atleast_1d)
    out_ = concatenate(arrs, 0 if core.get_aval(arrs[0]).ndim == 1 else 1)
    return out_ if dtype is None else lax.convert_element_type(out_, dtype)


def vstack(tup, dtype=None):
    """Join along axis 0, 1-D inputs as rows."""
    out_ = concatenate(_as_list(tup, atleast_2d), 0)
    return out_ if dtype is None else lax.convert_element_type(out_, dtype)


def dstack(tup, dtype=None):
    """Join along axis 2 (inputs made at least 3-D)."""
    out_ = concatenate(_as_list(tup, atleast_3d), 2)
    return out_ if dtype is None else lax.convert_element_type(out_, dtype)


def column_stack(tup):
    """1-D inputs as columns, 2-D ones as they are, joined along axis 1."""
    arrs = []
    for a in tup:
        a = asarray(a)
        nd = core.get_aval(a).ndim
        arrs.append(lax.reshape(a, (shape_of(a)[0] if nd else 1, 1)) if nd < 2 else a)
    return concatenate(arrs, 1)


def append(arr, values, axis: int | None = None):
    """`arr` with `values` joined at the end of `axis` (None: both flattened)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _split(name, ary, indices_or_sections, axis: int, exact: bool):
    ary = asarray(ary)
    axis = canonicalize_axis(axis, core.get_aval(ary).ndim)
    n = shape_of(ary)[axis]
    if np.ndim(indices_or_sections) == 0:  # as JAX: a number of sections, int() of it
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if exact and n % k:
            raise ValueError("array split does not result in an equal division")
        size, extra = builtins.divmod(n, k)
        bounds = np.cumsum([0] + [size + 1] * extra + [size] * (k - extra)).tolist()
    else:
        idx = [operator.index(i) for i in indices_or_sections]
        bounds = [0] + [builtins.min(builtins.max(i if i >= 0 else i + n, 0), n)
                        for i in idx] + [n]
    return [slice_axis(ary, axis, lo, builtins.max(lo, hi))
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary, indices_or_sections, axis: int = 0):
    """`ary` cut along `axis` into equal sections (an int, which must divide the axis) or at
    the given indices. Returns a list of arrays."""
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis: int = 0):
    """Like `split`, but an int need not divide the axis: the first n % k parts get one more."""
    return _split("array_split", ary, indices_or_sections, axis, False)


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0 if core.get_aval(asarray(ary)).ndim == 1 else 1)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0)


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    """Coordinate arrays from 1-D `xi`: with indexing "xy" the first two axes are swapped
    (Cartesian), with "ij" not (matrix). `sparse` keeps size-1 axes instead of broadcasting."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    xi = [asarray(x) for x in xi]
    if builtins.any(core.get_aval(x).ndim != 1 for x in xi):
        raise ValueError("Arguments to jax.numpy.meshgrid must be 1D")
    shape = [shape_of(x)[0] for x in xi]
    if indexing == "xy" and len(xi) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    outs = []
    for i, x in enumerate(xi):
        dim = 1 - i if indexing == "xy" and i < 2 and len(xi) >= 2 else i
        s = [1] * len(xi) if sparse else list(shape)
        s[dim] = shape_of(x)[0]
        outs.append(lax.broadcast_in_dim(x, tuple(s), (dim,)))
    return outs


def pad(array, pad_width, mode: str = "constant", **kwargs):
    """`array` padded by `pad_width` (an int, a (before, after) pair, or one pair per axis).

    Modes: "constant" (`constant_values`, default 0, a scalar or one value or pair per axis:
    lax.pad), "edge", "reflect", "symmetric", "wrap" (one gather per padded axis, whose static
    index map is numpy's pad of `arange(n)`; reflect_type "even" only). Runs under a jit named
    `_pad` whose operands are the array and `constant_values`, the widths static (JAX's
    jax/_src/numpy/lax_numpy.py pad and _pad, so the widths print as `np.int64(1)`).
    Raises ValueError for a negative width or a pad_width of another shape than (ndim, 2),
    (1, 2), (2,), (1,) or (); NotImplementedError for other modes."""
    array = asarray(array)
    nd = core.get_aval(array).ndim
    pw = np.asarray(pad_width)
    if pw.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    if pw.shape not in ((nd, 2), (1, 2), (2,), (1,), ()):
        raise ValueError(f"jnp.pad: pad_width with nd={nd} has unsupported shape {pw.shape}. "
                         f"Valid shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")
    pw = np.broadcast_to(pw.reshape((-1, 2) if pw.shape[-1:] == (2,) else (-1, 1)), (nd, 2))
    if mode not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        raise NotImplementedError(f"minijax.numpy.pad: mode {mode!r} is not supported")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("minijax.numpy.pad: only reflect_type='even'")
    widths = tuple((b, a) for b, a in pw.astype(np.int64))  # np.int64 entries, as JAX's
    return _pad(array, widths, mode, kwargs.get("constant_values", 0))


# JAX: jax/_src/numpy/lax_numpy.py _pad and _pad_constant (under jit, as JAX's)
@util.jit_when_traced(static_argnums=(1, 2))
def _pad(array, pad_width, mode, constant_values):
    nd = core.get_aval(array).ndim
    if nd == 0:
        return array
    if (np.asarray(pad_width) < 0).any():
        raise ValueError("index can't contain negative values")
    if mode == "constant":
        cv = lax.convert_element_type(asarray(constant_values), dtype_of(array),
                                      dtypes.dtype_and_weak(array)[1])
        cv_nd = core.get_aval(cv).ndim
        if cv_nd == 0 or (cv_nd == 1 and shape_of(cv)[-1] == 1):
            return lax.pad(array, lax.squeeze(cv, (0,)) if cv_nd else cv,
                           [(b, a, 0) for b, a in pad_width])
        if shape_of(cv)[-1] != 2:
            raise ValueError(f"jnp.pad: constant_values has unsupported shape {shape_of(cv)}. "
                             "If the shape is 1D or 2D, the last dimension must be of size 1 "
                             "or 2.")
        cvs = broadcast_to(cv, (nd, 2))
        for ax in range(nd):
            for side in (0, 1):
                if pad_width[ax][side] != 0:
                    cfg = [(0, 0, 0)] * nd
                    cfg[ax] = (pad_width[ax][0], 0, 0) if side == 0 else (0, pad_width[ax][1], 0)
                    array = lax.pad(array, cvs[ax, side], cfg)
        return array
    for ax in range(nd):
        before, after = int(pad_width[ax][0]), int(pad_width[ax][1])
        if before == after == 0:
            continue
        n = shape_of(array)[ax]
        if n == 0:
            raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant'")
        idx = np.pad(np.arange(n), (before, after), mode=mode).astype(_int)
        array = indexing.take(array, idx, ax, mode="clip")
    return array


# ---------------------------------------------------------------------------------------------
# Diagonals and triangles
# ---------------------------------------------------------------------------------------------

def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The diagonal `offset` of the 2-D slices over (axis1, axis2), moved to the last axis:
    `T[..., k]`. A strided slice of the flattened (axis1, axis2) block."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    if nd < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    a1, a2 = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    if a1 == a2:
        raise ValueError("axis1 and axis2 must not be equal")
    rest = [d for d in range(nd) if d not in (a1, a2)]
    a = lax.transpose(a, tuple(rest) + (a1, a2))
    *lead, n, m = shape_of(a)
    offset = int(offset)
    k = builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else
                      builtins.min(n + offset, m))
    flat = lax.reshape(a, tuple(lead) + (n * m,))
    if k == 0:
        return lax.full(tuple(lead) + (0,), 0, dtype_of(a))
    start = offset if offset >= 0 else -offset * m
    return slice_axis(flat, len(lead), start, start + (k - 1) * (m + 1) + 1, m + 1)


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """Sum of the diagonal `offset` (over axis1, axis2); small ints sum in the default int."""
    return reductions.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k: int = 0):
    """1-D `v` -> the 2-D array with `v` on diagonal `k`; 2-D `v` -> its diagonal `k`."""
    v = asarray(v)
    nd = core.get_aval(v).ndim
    if nd == 2:
        return diagonal(v, k)
    if nd != 1:
        raise ValueError("diag input must be 1d or 2d")
    n = shape_of(v)[0] + builtins.abs(int(k))
    v = lax.pad(v, _const(v, 0), [(0, n - shape_of(v)[0], 0)])
    rows = lax.broadcasted_iota(_int, (n, n), 0)
    cols = lax.broadcasted_iota(_int, (n, n), 1)
    mask = lax.eq(lax.sub(cols, rows), np.array(k, _int))
    vals = lax.broadcast_in_dim(v, (n, n), (0,) if k >= 0 else (1,))
    return lax.select(mask, vals, lax.full_like(vals, 0))


def tril(m, k: int = 0):
    """`m` with entries above diagonal `k` zeroed (over the last two axes)."""
    m = asarray(m)
    if core.get_aval(m).ndim < 2:
        raise ValueError("Argument to jax.numpy.tril must be at least 2D")
    *batch, n, m_ = shape_of(m)  # JAX: jax/_src/numpy/lax_numpy.py tril
    mask = lax.broadcast(lax_internal._tri((n, m_), k), batch)
    return lax.select(mask, m, lax.full_like(m, 0))


def triu(m, k: int = 0):
    """`m` with entries below diagonal `k` zeroed (over the last two axes)."""
    m = asarray(m)
    if core.get_aval(m).ndim < 2:
        raise ValueError("Argument to jax.numpy.triu must be at least 2D")
    *batch, n, m_ = shape_of(m)  # JAX: jax/_src/numpy/lax_numpy.py triu
    mask = lax.broadcast(lax_internal._tri((n, m_), k - 1), batch)
    return lax.select(mask, lax.full_like(m, 0), m)


# ---------------------------------------------------------------------------------------------
# Differences, searching and interpolation
# ---------------------------------------------------------------------------------------------

def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (`a[1:] - a[:-1]`, n times; bools use !=).
    `prepend`/`append` are joined to `a` first (scalars broadcast). Shape loses n on axis."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional; got a scalar")
    axis = canonicalize_axis(axis, nd)
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            continue
        extra = asarray(extra)
        if core.get_aval(extra).ndim == 0:
            shape = list(shape_of(a))
            shape[axis] = 1
            extra = broadcast_to(extra, tuple(shape))
        parts.append(extra)
    if prepend is not None or append is not None:
        pieces = ([parts.pop(0)] if prepend is not None else []) + [a] + parts
        a = concatenate(pieces, axis)
    for _ in range(n):
        m = shape_of(a)[axis]
        hi = slice_axis(a, axis, 1, m)
        lo = slice_axis(a, axis, 0, builtins.max(m - 1, 0))
        a = lax.ne(hi, lo) if dtype_kind(a) == "b" else lax.sub(hi, lo)
    return a


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """int32 indices where `v` would be inserted into the sorted 1-D `a` to keep it sorted:
    for "left" the count of a < v, for "right" the count of a <= v (one comparison of every
    pair, JAX's method="compare_all"; `method` is accepted and ignored)."""
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of "
                         "['left', 'right']")
    a, v = asarray(a), asarray(v)
    if core.get_aval(a).ndim != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        a = indexing.take(a, sorter)
    a, v = promote_dtypes(a, v)
    v_e = lax.expand_dims(v, (core.get_aval(v).ndim,))
    a_b = lax.broadcast_in_dim(a, shape_of(v) + shape_of(a), (core.get_aval(v).ndim,))
    v_b = broadcast_to(v_e, shape_of(v) + shape_of(a))
    # JAX: jax/_src/lax/lax.py _sort_lt_comparator — NaN sorts last, as in lax.sort
    if is_floating(a):
        def lt(x, y):
            return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(lax.ne(y, y), lax.eq(x, x)))
        hit = lt(a_b, v_b) if side == "left" else lax.bitwise_not(lt(v_b, a_b))
    else:
        hit = lax.lt(a_b, v_b) if side == "left" else lax.le(a_b, v_b)
    return reductions.sum(hit, axis=-1, dtype=_int)


def digitize(x, bins, right: bool = False):
    """int32 index of the bin of each x (bins monotonic, increasing or decreasing)."""
    x, bins = asarray(x), asarray(bins)
    if core.get_aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    n = shape_of(bins)[0]
    if n == 0:
        return lax.full_like(x, 0, _int)
    side = "left" if right else "right"
    up = searchsorted(bins, x, side)
    down = lax.sub(np.array(n, _int), searchsorted(lax.rev(bins, (0,)), x, side))
    increasing = lax.ge(indexing.rewriting_take(bins, -1), indexing.rewriting_take(bins, 0))
    return where(increasing, up, down)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) (xp increasing, 1-D) at `x`;
    outside [xp[0], xp[-1]] the value is `left`/`right` (default fp[0]/fp[-1]). Float result.
    `period` raises NotImplementedError."""
    if period is not None:
        raise NotImplementedError("minijax.numpy.interp: period is not supported")
    x, xp, fp = promote_dtypes(asarray(x), asarray(xp), asarray(fp))
    if not is_floating(x):
        f = dtypes.default_float_dtype()
        x, xp, fp = (lax.convert_element_type(v, f) for v in (x, xp, fp))
    if core.get_aval(xp).ndim != 1 or shape_of(xp) != shape_of(fp):
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    n = shape_of(xp)[0]
    i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
    i0 = lax.sub(i, np.array(1, _int))
    take = indexing.take
    xp0, xp1, fp0, fp1 = take(xp, i0), take(xp, i), take(fp, i0), take(fp, i)
    dx, df = lax.sub(xp1, xp0), lax.sub(fp1, fp0)
    dx0 = lax.le(lax.abs(dx), _const(dx, np.spacing(dtypes.finfo(dtype_of(dx)).eps)))
    safe_dx = lax.select(dx0, lax.full_like(dx, 1), dx)
    out_ = lax.select(dx0, fp0, lax.add(fp0, lax.mul(lax.div(lax.sub(x, xp0), safe_dx), df)))
    lo = indexing.rewriting_take(fp, 0) if left is None else left
    hi = indexing.rewriting_take(fp, -1) if right is None else right
    out_ = where(lax.lt(x, indexing.rewriting_take(xp, 0)), lo, out_)
    return where(lax.gt(x, indexing.rewriting_take(xp, -1)), hi, out_)


def unravel_index(indices, shape):
    """The coordinates (a tuple of int arrays like `indices`) of flat `indices` in an array of
    `shape`. As JAX (unlike numpy): negative indices wrap, out-of-range ones are clipped."""
    indices = asarray(indices)
    if dtype_kind(indices) not in "iu":
        raise TypeError("Only integer indices are supported by unravel_index.")
    shape = tuple(int(s) for s in shape)
    total = int(np.prod(shape, dtype=np.int64))
    i = clip(indices, -total, total - 1)
    i = where(lax.lt(i, _const(i, 0)), lax.add(i, _const(i, total)), i)
    outs = []
    for s in shape[::-1]:
        outs.append(lax.rem(i, _const(i, s)) if s else i)
        i = lax.div(i, _const(i, s)) if s else i
    return tuple(keep_weak(o, indices) for o in outs[::-1])


# ---------------------------------------------------------------------------------------------
# Value-dependent shapes: nonzero and friends
# ---------------------------------------------------------------------------------------------

def nonzero(a, *, size: int | None = None, fill_value=None):
    """A tuple with one int32[k] index array per dimension of `a`, for the k nonzero entries
    in row-major order. With `size`, k = size: extra entries are dropped, missing ones are
    `fill_value` (default 0; a scalar or one per dimension). Without `size`, `a` must be
    concrete (ConcretizationTypeError under tracing)."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    if nd == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    shape = shape_of(a)
    if size is None:
        val = concrete_or_none(a, "nonzero")
        if val is None:
            raise size_error("nonzero", a)
        size = int(np.count_nonzero(val))
    mask = ravel(lax.ne(a, _const(a, 0)))
    n = shape_of(mask)[0]
    count_ = lax.cumsum(lax.convert_element_type(mask, _int), 0)
    dest = lax.select(mask, lax.sub(count_, np.array(1, _int)), lax.full_like(count_, size))
    flat = lax.full((size,), 0, _int).at[dest].set(lax.iota(_int, n), mode="drop")
    valid = lax.lt(lax.iota(_int, size), indexing.rewriting_take(count_, -1) if n else
                   np.array(0, _int))
    fills = np.broadcast_to(np.asarray(0 if fill_value is None else fill_value), (nd,)) \
        if not isinstance(fill_value, (tuple, list)) else fill_value
    if len(fills) != nd:
        raise ValueError(f"fill_value must be a scalar or a tuple of length {nd}; got "
                         f"{fill_value}")
    strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
    outs = []
    for d in range(nd):
        coord = lax.rem(lax.div(flat, np.array(strides[d], _int)), np.array(shape[d] or 1, _int))
        outs.append(lax.select(valid, coord, lax.full_like(coord, fills[d])))
    return tuple(outs)


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """int32[k]: indices of the nonzero entries of the flattened `a` (see `nonzero`)."""
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size: int | None = None, fill_value=None):
    """int32[k, a.ndim]: the indices of nonzero entries, one row per entry (see `nonzero`)."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    idx = nonzero(atleast_1d(a), size=size, fill_value=fill_value)
    out_ = stack(idx, axis=1)
    return out_[:, :0] if nd == 0 else out_


# ---------------------------------------------------------------------------------------------
# Predicates
# ---------------------------------------------------------------------------------------------

def isscalar(element) -> bool:
    """Whether `element` is a scalar: a Python/NumPy number, or a 0-d array (as JAX)."""
    if isinstance(element, (np.generic, int, float, complex, bool)):
        return True
    if isinstance(element, (Array, Tracer, np.ndarray)):
        return core.get_aval(element).ndim == 0
    return False


def isrealobj(x) -> bool:
    """Whether `x` does not have a complex dtype."""
    return not iscomplexobj(x)


def iscomplexobj(x) -> bool:
    """Whether `x` has a complex dtype."""
    try:
        return np.dtype(dtype(x)).kind == "c"
    except TypeError:
        return False



def isreal(x):
    """bool[...]: True where the imaginary part is 0 (everywhere for real `x`)."""
    return lax.full_like(asarray(x), True, np.bool_)


def array_equal(a1, a2, equal_nan: bool = False):
    """bool[]: whether `a1` and `a2` have the same shape and entries (False if shapes differ;
    with `equal_nan`, NaNs equal each other)."""
    a1, a2 = asarray(a1), asarray(a2)
    if shape_of(a1) != shape_of(a2):
        return asarray(False)
    eq = ufuncs.equal(a1, a2)
    if equal_nan:
        eq = ufuncs.logical_or(eq, ufuncs.logical_and(ufuncs.isnan(a1), ufuncs.isnan(a2)))
    return reductions.all(eq)


# ---------------------------------------------------------------------------------------------
# More creation: grids of indices, geometric sequences
# ---------------------------------------------------------------------------------------------

def indices(dimensions, dtype=None, sparse: bool = False):
    """The grid of indices of an array of shape `dimensions`: `int32[len(dims), *dims]` (with
    `sparse`, a tuple of arrays of shape (1, .., d_i, .., 1))."""
    dims = core.canonicalize_shape(dimensions, "dimensions argument of jnp.indices")
    d = dtypes.default_int_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    grids = []
    for i, n in enumerate(dims):
        shape = tuple(n if j == i else 1 for j in range(len(dims)))
        g = lax.broadcasted_iota(d, shape, i)
        grids.append(g if sparse else lax.broadcast_in_dim(g, dims, tuple(range(len(dims)))))
    if sparse:
        return tuple(grids)
    if not grids:
        return lax.full((0,), 0, d)
    return stack(grids)


def _static_indices(fn, *args):
    return tuple(asarray(i.astype(dtypes.default_int_dtype())) for i in fn(*args))


def tril_indices(n: int, k: int = 0, m: int | None = None):
    """`(rows, cols)`: int32 indices of the lower triangle (diagonal `k` and below) of an
    n x m array (static sizes)."""
    return _static_indices(np.tril_indices, int(n), int(k), m)


def triu_indices(n: int, k: int = 0, m: int | None = None):
    """`(rows, cols)`: int32 indices of the upper triangle (diagonal `k` and above)."""
    return _static_indices(np.triu_indices, int(n), int(k), m)


def diag_indices(n: int, ndim: int = 2):
    """`(iota(n),) * ndim`: the indices of the main diagonal of an n x ... x n array."""
    if int(n) < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    return (lax.iota(dtypes.default_int_dtype(), int(n)),) * int(ndim)


# ---------------------------------------------------------------------------------------------
# More shapes: rot90, resize, delete, insert, unstack and the array-API spellings
# ---------------------------------------------------------------------------------------------

def permute_dims(a, /, axes):
    """`transpose(a, axes)` (the array-API name)."""
    return transpose(a, axes)


def matrix_transpose(x, /):
    """`x` with its last two axes swapped. Raises ValueError below two dimensions."""
    x = asarray(x)
    nd = core.get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got {nd=}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def concat(arrays, /, *, axis: int | None = 0):
    """`concatenate` (the array-API name); axis None joins the flattened arrays."""
    if axis is None:
        return concatenate([ravel(a) for a in arrays], 0)
    return concatenate(arrays, axis)


def unstack(x, /, *, axis: int = 0):
    """A tuple of the slices of `x` along `axis` (each without that axis)."""
    x = asarray(x)
    nd = core.get_aval(x).ndim
    if nd == 0:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array was "
                         "passed.")
    axis = canonicalize_axis(axis, nd)
    return tuple(lax.squeeze(slice_axis(x, axis, i, i + 1), (axis,))
                 for i in range(shape_of(x)[axis]))


# JAX: jax/_src/numpy/lax_numpy.py rot90
def rot90(m, k: int = 1, axes: tuple[int, int] = (0, 1)):
    """`m` rotated by 90 degrees `k` times in the plane of `axes` (from the first axis towards
    the second). Raises ValueError below two dimensions or for equal axes."""
    m = asarray(m)
    nd = core.get_aval(m).ndim
    if nd < 2:
        raise ValueError(f"rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {shape_of(m)}, which has ndim {nd}")
    ax1, ax2 = (canonicalize_axis(a, nd) for a in axes)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(nd))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return transpose(flip(m, ax2), perm)
    return flip(transpose(m, perm), ax2)


def resize(a, new_shape):
    """`a` flattened, repeated and cut to `new_shape` (zeros if `a` is empty)."""
    a = ravel(a)
    new_shape = canonicalize_shape(new_shape)
    size = int(np.prod(new_shape, dtype=np.int64))
    n = shape_of(a)[0]
    if n == 0 or size == 0:
        return lax.full(new_shape, 0, dtype_of(a))
    reps = -(-size // n)
    return reshape(slice_axis(tile(a, reps), 0, 0, size), new_shape)


def _concrete_positions(obj, n: int, name: str) -> np.ndarray:
    if isinstance(obj, builtins.slice):
        return np.arange(n)[obj]
    if isinstance(obj, Tracer):
        obj = obj._concrete(f"jnp.{name} with a traced index (minijax needs it concrete)")
    return np.asarray(obj)


def delete(arr, obj, axis: int | None = None, *, assume_unique_indices: bool = False):
    """`arr` without the entries at `obj` (an int, a slice or concrete indices) along `axis`
    (None: of the flattened array)."""
    arr = asarray(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = canonicalize_axis(axis, core.get_aval(arr).ndim)
    n = shape_of(arr)[axis]
    pos = _concrete_positions(obj, n, "delete")
    if pos.dtype.kind == "b":
        raise ValueError("np.delete(arr, obj): boolean obj is not supported")
    keep = np.ones(n, bool)
    keep[pos] = False
    return indexing.take(arr, np.nonzero(keep)[0].astype(_int), axis, mode="clip")


def insert(arr, obj, values, axis: int | None = None):
    """`arr` with `values` inserted before index `obj` (an int) along `axis` (None: of the
    flattened array); `values` broadcast to one slice (or as many as its leading dimension,
    moved to `axis`). Array-valued `obj` raises NotImplementedError."""
    arr = asarray(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    nd = core.get_aval(arr).ndim
    axis = canonicalize_axis(axis, nd)
    n = shape_of(arr)[axis]
    if isinstance(obj, Tracer) or np.ndim(obj) != 0:
        raise NotImplementedError("minijax.numpy.insert: only a static integer obj")
    i = int(obj)
    if not -n <= i <= n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    i %= n + 1 if n else 1
    v = lax.convert_element_type(asarray(values), dtype_of(arr))
    v_nd = core.get_aval(v).ndim
    if v_nd < nd:
        v = lax.reshape(v, (1,) * (nd - v_nd) + shape_of(v))
    v = moveaxis(v, 0, axis)
    shape = list(shape_of(arr))
    shape[axis] = shape_of(v)[axis]
    v = broadcast_to(v, tuple(shape))
    return concatenate([slice_axis(arr, axis, 0, i), v, slice_axis(arr, axis, i, n)], axis)


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened `ary`, with `to_begin`/`to_end` joined at the ends."""
    arr = ravel(ary)
    out_ = diff(arr) if shape_of(arr)[0] else arr
    parts = [out_]
    if to_begin is not None:
        parts.insert(0, lax.convert_element_type(ravel(to_begin), dtype_of(arr)))
    if to_end is not None:
        parts.append(lax.convert_element_type(ravel(to_end), dtype_of(arr)))
    return concatenate(parts, 0) if len(parts) > 1 else out_


# ---------------------------------------------------------------------------------------------
# Products and statistics: cross, convolve, polyval, cov, histogram, ...
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/lax_numpy.py cross
def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """The cross product of 2- or 3-vectors along `axisa`/`axisb` (result along `axisc`; a
    2-vector cross product is the scalar z component). Raises ValueError for other sizes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote_dtypes(asarray(a), asarray(b))
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if shape_of(a)[-1] not in (2, 3) or shape_of(b)[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    comp = lambda x, i: indexing.rewriting_take(x, (Ellipsis, i))
    mul, sub = ufuncs.multiply, ufuncs.subtract
    if shape_of(a)[-1] == 2 and shape_of(b)[-1] == 2:
        return sub(mul(comp(a, 0), comp(b, 1)), mul(comp(a, 1), comp(b, 0)))
    a0, a1, b0, b1 = comp(a, 0), comp(a, 1), comp(b, 0), comp(b, 1)
    a2 = comp(a, 2) if shape_of(a)[-1] == 3 else lax.full_like(a0, 0)
    b2 = comp(b, 2) if shape_of(b)[-1] == 3 else lax.full_like(b0, 0)
    c = stack(broadcast_arrays(sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
                               sub(mul(a0, b1), mul(a1, b0))))
    return moveaxis(c, 0, axisc)


# JAX: jax/_src/numpy/lax_numpy.py _conv — one conv_general_dilated
def _conv(x, y, mode: str, op: str, preferred_element_type=None):
    x, y = asarray(x), asarray(y)
    if core.get_aval(x).ndim != 1 or core.get_aval(y).ndim != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = promote_args_inexact(op, x, y)
    else:
        x, y = promote_dtypes(x, y)
    if shape_of(x)[0] == 0 or shape_of(y)[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {shape_of(x)} and "
                         f"{shape_of(y)}.")
    reverse = False
    if op == "correlate":
        if shape_of(x)[0] < shape_of(y)[0]:
            x, y, reverse = y, x, True
    else:
        if shape_of(x)[0] < shape_of(y)[0]:
            x, y = y, x
        y = lax.rev(y, (0,))
    n = shape_of(y)[0]
    padding = {"valid": [(0, 0)], "same": [(n // 2, n - n // 2 - 1)],
               "full": [(n - 1, n - 1)]}.get(mode)
    if padding is None:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    # differs from JAX: lax.conv_general_dilated here takes no preferred_element_type, so the
    # result is converted to it afterwards
    out_ = lax.conv_general_dilated(lax.reshape(x, (1, 1) + shape_of(x)),
                                    lax.reshape(y, (1, 1) + shape_of(y)), (1,), padding)
    out_ = lax.reshape(out_, shape_of(out_)[2:])
    if preferred_element_type is not None:
        out_ = lax.convert_element_type(out_, preferred_element_type)
    return lax.rev(out_, (0,)) if reverse else out_


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """The discrete convolution of 1-D `a` and `v` (mode "full", "same" or "valid"); integer
    inputs give the default float dtype unless `preferred_element_type` is given."""
    return _conv(a, v, mode, "convolve", preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of 1-D `a` and `v` (mode "valid", "same" or "full")."""
    return _conv(a, v, mode, "correlate", preferred_element_type)


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of `y` along `axis` by the trapezoidal rule (sample spacing `dx`, or the
    sample points `x`)."""
    y = asarray(y)
    if not is_floating(y):
        y = lax.convert_element_type(y, dtypes.default_float_dtype())
    y = moveaxis(y, axis, -1)
    n = shape_of(y)[-1]
    mids = ufuncs.add(slice_axis(y, -1 % core.get_aval(y).ndim, 1, n),
                      slice_axis(y, -1 % core.get_aval(y).ndim, 0, builtins.max(n - 1, 0)))
    if x is not None:
        x = asarray(x)
        d = diff(x, axis=-1 if core.get_aval(x).ndim == 1 else axis)
        if core.get_aval(x).ndim != 1:
            d = moveaxis(d, axis, -1)
    else:
        d = dx
    return ufuncs.multiply(0.5, reductions.sum(ufuncs.multiply(d, mids), axis=-1))


# JAX: jax/_src/numpy/lax_numpy.py cov
def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows (`rowvar`) or columns of `m` (and
    `y`): `f32[k, k]` (a scalar for one variable). Weights raise NotImplementedError."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("minijax.numpy.cov: fweights and aweights")
    X = atleast_2d(m)
    if not rowvar and shape_of(X)[0] != 1:
        X = matrix_transpose(X)
    if y is not None:
        Y = atleast_2d(y)
        if not rowvar and shape_of(Y)[0] != 1:
            Y = matrix_transpose(Y)
        X = concatenate([X, Y], 0)
    if not is_floating(X):
        X = lax.convert_element_type(X, dtypes.default_float_dtype())
    if ddof is None:
        ddof = 0 if bias else 1
    n = shape_of(X)[1]
    X = ufuncs.subtract(X, reductions.mean(X, axis=1, keepdims=True))
    c = _dot2d(X, matrix_transpose(X))
    return squeeze(lax.div(c, _const(c, builtins.max(n - ddof, 0))))


def _dot2d(a, b):
    return lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=dtype_of(a))


def corrcoef(x, y=None, rowvar: bool = True):
    """The correlation coefficients: `cov` normalized by the standard deviations, clipped to
    [-1, 1]."""
    c = cov(x, y, rowvar)
    if core.get_aval(c).ndim == 0:
        return lax.div(c, c)
    d = diagonal(c)
    std = ufuncs.sqrt(d)
    c = lax.div(lax.div(c, lax.expand_dims(std, (1,))), lax.expand_dims(std, (0,)))
    return clip(c, -1, 1)


# JAX: jax/_src/numpy/lax_numpy.py histogram
def histogram(a, bins=10, range=None, weights=None, density=None):
    """`(counts, bin_edges)` of the flattened `a` over `bins` equal bins of [min, max] (or
    `range`), or over the given bin edges; the last bin includes its right edge."""
    a = ravel(a)
    if not is_floating(a):
        a = lax.convert_element_type(a, dtypes.default_float_dtype())
    edges = histogram_bin_edges(a, bins, range)
    ne = shape_of(edges)[0]
    idx = reductions.sum(lax.le(lax.broadcast_in_dim(edges, shape_of(a) + (ne,), (1,)),
                                lax.broadcast_in_dim(a, shape_of(a) + (ne,), (0,))),
                         axis=-1, dtype=_int)
    idx = where(lax.eq(a, indexing.rewriting_take(edges, -1)), lax.full_like(idx, ne - 1), idx)
    w = lax.full_like(a, 1) if weights is None else ravel(weights)
    counts = lax.full((ne,), 0, dtype_of(w)).at[idx].add(w)
    counts = slice_axis(counts, 0, 1, ne)
    if density:
        widths = diff(edges)
        counts = lax.div(counts, lax.mul(widths, reductions.sum(counts)))
    return counts, edges


def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None):
    """int32[length]: how often each value of the non-negative int array `x` occurs (or the
    sum of its `weights`). `length` defaults to max(x) + 1 (x must then be concrete)."""
    x = asarray(x)
    if dtype_kind(x) not in "iu":
        raise TypeError(f"x argument to bincount must have an integer type; got {dtype_of(x)}")
    if core.get_aval(x).ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    if length is None:
        val = concrete_or_none(x, "bincount")
        if val is None:
            raise size_error("bincount", x)
        length = builtins.max(int(minlength), int(val.max()) + 1 if val.size else 0)
    w = lax.full_like(x, 1, dtypes.default_int_dtype()) if weights is None else asarray(weights)
    return lax.full((int(length),), 0, dtype_of(w)).at[ufuncs.maximum(x, 0)].add(w, mode="drop")


# ---------------------------------------------------------------------------------------------
# NumPy's own helpers, re-exported (they act on dtypes or on host values)
# ---------------------------------------------------------------------------------------------

can_cast, iterable = np.can_cast, np.iterable
array_repr, array_str = np.array_repr, np.array_str
save, savez = np.save, np.savez
get_printoptions, set_printoptions, printoptions = (np.get_printoptions, np.set_printoptions,
                                                    np.printoptions)
_ISDTYPE_KINDS = {"bool": (np.bool_,), "signed integer": (np.signedinteger,),
                  "unsigned integer": (np.unsignedinteger,),
                  "integral": (np.integer,), "real floating": (np.floating,),
                  "complex floating": (np.complexfloating,),
                  "numeric": (np.integer, np.floating, np.complexfloating)}


def isdtype(dtype, kind) -> bool:
    """The array API's dtype test: whether `dtype` is `kind` (a dtype, one of "bool", "signed
    integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric",
    or a tuple of these). Raises ValueError for an unknown kind name."""
    dt = np.dtype(dtype)
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str):
            if k not in _ISDTYPE_KINDS:
                raise ValueError(f"jnp.isdtype: unknown kind {k!r}; expected a dtype or one "
                                 f"of {sorted(_ISDTYPE_KINDS)}")
            if any(issubdtype(dt, t) for t in _ISDTYPE_KINDS[k]):
                return True
        elif dt == np.dtype(k):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# More of NumPy's array manipulation
# ---------------------------------------------------------------------------------------------

def array_equiv(a1, a2):
    """bool[]: whether `a1` and `a2` broadcast to each other and are equal everywhere (False
    when their shapes do not broadcast)."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        util.broadcast_shapes(shape_of(a1), shape_of(a2))
    except ValueError:
        return array(False)
    return reductions.all(ufuncs.equal(a1, a2))


def block(arrays):
    """An array assembled from nested lists of blocks: the innermost lists are joined along
    the last axis, each level out along the axis before. Raises ValueError for ragged
    nesting."""
    def depth(x):
        if isinstance(x, list):
            ds = {depth(y) for y in x}
            if len(ds) != 1:
                raise ValueError("jnp.block: the lists of blocks are nested to different "
                                 "depths")
            return 1 + ds.pop()
        return 0

    def leaves(x):
        return [v for y in x for v in leaves(y)] if isinstance(x, list) else [asarray(x)]

    total = depth(arrays)
    nd = builtins.max([total] + [ndim(v) for v in leaves(arrays)])

    def join(x, level):
        if not isinstance(x, list):
            x = asarray(x)
            return reshape(x, (1,) * (nd - ndim(x)) + shape_of(x))
        return concatenate([join(y, level + 1) for y in x], axis=nd - total + level)

    return join(arrays, 0) if isinstance(arrays, list) else asarray(arrays)


def choose(a, choices, out=None, mode: str = "raise"):
    """`choices[a[i]][i]` for every index i (a, choices broadcast). mode "wrap" takes a
    modulo len(choices), "clip" clips; "raise" needs a concrete `a` and raises ValueError
    for an index out of range."""
    if out is not None:
        raise NotImplementedError("jnp.choose: the out argument is not supported")
    a = asarray(a)
    n = len(choices)
    if mode == "raise":
        value = concrete_or_none(a, "choose")
        if value is None:
            raise core.ConcretizationTypeError(
                "jnp.choose: mode='raise' needs a concrete index array; use mode='wrap' or "
                "mode='clip' under transformations")
        if np.any((value < 0) | (value >= n)):
            raise ValueError("jnp.choose: invalid entry in the index array (must be in "
                             f"[0, {n}))")
    elif mode == "wrap":
        a = ufuncs.mod(a, n)
    elif mode == "clip":
        a = clip(a, 0, n - 1)
    else:
        raise ValueError(f"jnp.choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a, *choices = broadcast_arrays(a, *choices)
    return select([ufuncs.equal(a, i) for i in builtins.range(n)], list(choices))


def compress(condition, a, axis: int | None = None, *, size: int | None = None,
             fill_value=0, out=None):
    """The slices of `a` along `axis` (None: its entries, flattened) where `condition` is
    true. Needs a concrete condition, or a static `size` (then `fill_value` pads)."""
    if out is not None:
        raise NotImplementedError("jnp.compress: the out argument is not supported")
    condition = ravel(asarray(condition))
    a = ravel(a) if axis is None else moveaxis(asarray(a), axis, 0)
    n = builtins.min(shape_of(condition)[0], shape_of(a)[0])
    keep = slice_axis(lax.ne(condition, _const(condition, 0)), 0, 0, n)
    picked = indexing.take(a, nonzero(keep, size=size, fill_value=n)[0], axis=0, mode="fill",
                           fill_value=fill_value)
    return picked if axis is None else moveaxis(picked, 0, axis)


def extract(condition, arr, *, size: int | None = None, fill_value=0):
    """The entries of the flattened `arr` where the flattened `condition` is true (`size`,
    `fill_value` as in `compress`)."""
    return compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)


def _not_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise NotImplementedError(f"jnp.{name}: minijax arrays are immutable, as JAX's: pass "
                                  "inplace=False to get the updated copy")


def place(arr, mask, vals, *, inplace: bool = True):
    """A copy of `arr` whose entries where `mask` is true take the values of `vals` in turn
    (cycling): the k-th true entry gets vals[k % len(vals)], k counted by a cumsum, so a
    traced mask works. Needs inplace=False."""
    _not_inplace("place", inplace)
    arr = asarray(arr)
    mask = broadcast_to(asarray(mask, dtype=np.bool_), shape_of(arr))
    vals = ravel(asarray(vals, dtype_of(arr)))
    if shape_of(vals)[0] == 0:
        return arr
    k = lax.sub(reductions.cumsum(ravel(mask), dtype=_int), _const(np.int32(0), 1))
    taken = reshape(indexing.take(vals, ufuncs.mod(k, shape_of(vals)[0])), shape_of(arr))
    return where(mask, taken, arr)


def put(a, ind, v, mode: str | None = None, *, inplace: bool = True):
    """A copy of `a` with its flattened entries at `ind` set to `v` (cycled to ind's length).
    mode: None/"fill" drops out-of-range indices, "clip" clips, "wrap" wraps."""
    _not_inplace("put", inplace)
    a = asarray(a)
    ind = ravel(asarray(ind))
    v = ravel(asarray(v, dtype_of(a)))
    k = shape_of(ind)[0]
    if k == 0 or shape_of(v)[0] == 0:
        return a
    v = indexing.take(v, lax.rem(lax.iota(_int, k), _const(ind, shape_of(v)[0])))
    n = size(a)
    if mode == "clip":
        ind = clip(ind, 0, n - 1)
    elif mode == "wrap":
        ind = ufuncs.mod(ind, n)
    elif mode not in (None, "fill", "raise"):
        raise ValueError(f"jnp.put: mode must be 'fill', 'clip' or 'wrap', got {mode!r}")
    return reshape(ravel(a).at[ind].set(v, mode=None if mode == "raise" else "drop"),
                   shape_of(a))


def put_along_axis(arr, indices, values, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None):
    """A copy of `arr` with `values` written at `indices` along `axis` (the counterpart of
    `take_along_axis`). Needs inplace=False."""
    _not_inplace("put_along_axis", inplace)
    arr = asarray(arr)
    if axis is None:
        return reshape(put_along_axis(ravel(arr), ravel(indices), ravel(values), 0,
                                      inplace=False, mode=mode), shape_of(arr))
    nd = ndim(arr)
    axis = canonicalize_axis(axis, nd)
    indices = asarray(indices)
    shape = util.broadcast_shapes(tuple(1 if i == axis else d for i, d in
                                        enumerate(shape_of(arr))), shape_of(indices))
    shape = tuple(shape_of(indices)[i] if i == axis else d for i, d in enumerate(shape))
    idx = tuple(broadcast_to(indices, shape) if i == axis else
                lax.broadcasted_iota(_int, shape, i) for i in builtins.range(nd))
    return arr.at[idx].set(broadcast_to(asarray(values, dtype_of(arr)), shape), mode=mode)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """A copy of `a` (2-D, or n-D with equal sides) with its main diagonal set to `val`
    (cycled). Needs inplace=False; wrap=True raises NotImplementedError, as in JAX."""
    _not_inplace("fill_diagonal", inplace)
    if wrap:
        raise NotImplementedError("jnp.fill_diagonal: wrap=True is not implemented (as in "
                                  "JAX): use wrap=False")
    a = asarray(a)
    shp = shape_of(a)
    if ndim(a) < 2:
        raise ValueError(f"jnp.fill_diagonal: array must be at least 2-d, got {shp}")
    if ndim(a) > 2 and len(set(shp)) != 1:
        raise ValueError(f"jnp.fill_diagonal: all dimensions of input must be of equal "
                         f"length, got {shp}")
    flat = np.ravel_multi_index((np.arange(builtins.min(shp)),) * ndim(a), shp)
    return reshape(put(ravel(a), flat, val, inplace=False), shp)


def diagflat(v, k: int = 0):
    """The 2-D array with the flattened `v` on its k-th diagonal."""
    return diag(ravel(v), k)


def dsplit(ary, indices_or_sections):
    """`split` along the third axis (arrays of rank >= 3)."""
    if ndim(ary) < 3:
        raise ValueError("jnp.dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, axis=2)


def rollaxis(a, axis: int, start: int = 0):
    """`a` with `axis` moved to before position `start` (NumPy's older `moveaxis`)."""
    nd = ndim(a)
    axis = canonicalize_axis(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"jnp.rollaxis: start={start} out of range for {nd} dimensions")
    start = start + nd if start < 0 else start
    return moveaxis(a, axis, start - 1 if axis < start else start)


def _square_arg(name: str, arr):
    shp = shape_of(arr)
    if len(shp) != 2:
        raise ValueError(f"jnp.{name}: input must be 2-d, got shape {shp}")
    return shp


def diag_indices_from(arr):
    """`diag_indices` for an n-D array with equal sides."""
    shp = shape_of(arr)
    if len(shp) < 2 or len(set(shp)) != 1:
        raise ValueError(f"jnp.diag_indices_from: input must be at least 2-d with all sides "
                         f"equal, got shape {shp}")
    return diag_indices(shp[0], len(shp))


def tril_indices_from(arr, k: int = 0):
    """`tril_indices` for the shape of 2-D `arr`."""
    n, m = _square_arg("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k: int = 0):
    """`triu_indices` for the shape of 2-D `arr`."""
    n, m = _square_arg("triu_indices_from", arr)
    return triu_indices(n, k, m)


def mask_indices(n: int, mask_func, k: int = 0, *, size: int | None = None):
    """The (row, column) indices where `mask_func(ones((n, n)), k)` is nonzero."""
    return nonzero(mask_func(ones((n, n), _int), k), size=size)


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C"):
    """The flat indices (int32) into an array of shape `dims` of the index arrays in
    `multi_index`. mode "wrap" wraps, "clip" clips; "raise" needs concrete indices and raises
    ValueError for one out of range."""
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"jnp.ravel_multi_index: {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    if order not in ("C", "F"):
        raise ValueError(f"jnp.ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    idx = [lax.convert_element_type(asarray(i), _int) for i in multi_index]
    if mode == "raise":
        for i, d in zip(idx, dims):
            value = concrete_or_none(i, "ravel_multi_index")
            if value is None:
                raise core.ConcretizationTypeError(
                    "jnp.ravel_multi_index: mode='raise' needs concrete indices; use "
                    "mode='wrap' or mode='clip' under transformations")
            if np.any((value < 0) | (value >= d)):
                raise ValueError("jnp.ravel_multi_index: invalid entry in coordinates array")
    elif mode == "wrap":
        idx = [ufuncs.mod(i, d) for i, d in zip(idx, dims)]
    elif mode == "clip":
        idx = [clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    else:
        raise ValueError(f"jnp.ravel_multi_index: invalid mode {mode!r}")
    strides = np.cumprod((1,) + (dims[::-1] if order == "C" else dims)[:-1])
    strides = strides[::-1] if order == "C" else strides
    out = lax.full((), 0, _int)
    for i, s in zip(idx, strides):
        out = ufuncs.add(out, ufuncs.multiply(i, _int(s)))
    return out


def trim_zeros(filt, trim: str = "fb"):
    """The 1-D `filt` without its leading ("f") and/or trailing ("b") zeros (concrete
    input: the output shape depends on its values)."""
    value = concrete_or_none(filt, "trim_zeros")
    if value is None:
        raise size_error("trim_zeros", filt)
    nz = np.flatnonzero(value)
    if nz.size == 0:
        return slice_axis(asarray(filt), 0, 0, 0)
    lo = int(nz[0]) if "f" in trim.lower() else 0
    hi = int(nz[-1]) + 1 if "b" in trim.lower() else len(value)
    return slice_axis(asarray(filt), 0, lo, hi)


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix `[x**(N-1), ..., x, 1]` per row (`T[len(x), N]`)."""
    x = asarray(x)
    if ndim(x) != 1:
        raise ValueError(f"jnp.vander: x must be one-dimensional, got shape {shape_of(x)}")
    N = shape_of(x)[0] if N is None else int(N)
    if N < 0:
        raise ValueError("jnp.vander: N must be nonnegative")
    powers = arange(N, dtype=_int) if increasing else arange(N - 1, -1, -1, dtype=_int)
    return ufuncs.power(lax.broadcast_in_dim(x, (shape_of(x)[0], N), (0,)), powers)


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """`p` with jumps between neighbours along `axis` larger than `discont` (default
    period / 2) taken back modulo `period`: phases made continuous."""
    p, period = promote_dtypes(asarray(p), asarray(period))
    if dtype_kind(p) == "c":
        raise ValueError("jnp.unwrap does not support complex inputs")
    axis = canonicalize_axis(axis, ndim(p))
    n = shape_of(p)[axis]
    if n == 0:
        return p
    discont = period / 2 if discont is None else discont
    half = period // 2 if dtype_kind(p) in "iu" else period / 2
    d = diff(p, axis=axis)
    wrapped = ufuncs.mod(d + half, period) - half
    wrapped = where((wrapped == -half) & (d > 0), half, wrapped)
    correction = where(ufuncs.abs(d) < discont, 0, wrapped - d)
    return concatenate([slice_axis(p, axis, 0, 1),
                        slice_axis(p, axis, 1, n) + reductions.cumsum(correction, axis=axis)],
                       axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The numerical gradient of `f` along `axis` (None: every axis): central differences
    inside, one-sided ones at the edges. Spacings: one scalar, or one scalar or 1-D
    coordinate array per axis. A list of arrays for several axes."""
    if edge_order is not None:
        raise NotImplementedError("jnp.gradient: edge_order is not supported (as in JAX)")
    f, *spacing = promote_args_inexact("gradient", f, *varargs)
    nd = ndim(f)
    axes = tuple(builtins.range(nd)) if axis is None else \
        tuple(canonicalize_axis(a, nd) for a in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if builtins.min(shape_of(f)[a] for a in axes) < 2:
        raise ValueError("jnp.gradient: each axis needs at least 2 elements, got shape "
                         f"{shape_of(f)}")
    if len(spacing) <= 1:
        spacing = (spacing or [1.0]) * len(axes)
    elif len(spacing) != len(axes):
        raise TypeError(f"jnp.gradient: {len(spacing)} spacings for axes {axes}")

    def along(ax, h):
        n = shape_of(f)[ax]
        s = lambda lo, hi, v=f: slice_axis(v, ax, lo, hi)
        first, last = s(1, 2) - s(0, 1), s(n - 1, n) - s(n - 2, n - 1)
        if ndim(h) == 0:
            return concatenate([first / h, (s(2, n) - s(0, n - 2)) / (2 * h), last / h], ax)
        if ndim(h) != 1 or shape_of(h)[0] != n:
            raise ValueError("jnp.gradient: spacing arrays must be 1-D with the length of "
                             "their axis")
        h = reshape(h, tuple(n if i == ax else 1 for i in builtins.range(nd)))
        x = lambda lo, hi: slice_axis(h, ax, lo, hi)
        d1, d2 = x(1, n - 1) - x(0, n - 2), x(2, n) - x(1, n - 1)
        inner = (-d2 / (d1 * (d1 + d2)) * s(0, n - 2) + (d2 - d1) / (d1 * d2) * s(1, n - 1)
                 + d1 / (d2 * (d1 + d2)) * s(2, n))
        return concatenate([first / (x(1, 2) - x(0, 1)), inner,
                            last / (x(n - 1, n) - x(n - 2, n - 1))], ax)

    grads = [along(ax, h) for ax, h in zip(axes, spacing)]
    return grads[0] if len(axes) == 1 else grads


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """`func1d` applied to every 1-D slice of `arr` along `axis` (one `vmap` per other
    axis); the slices' results replace that axis."""
    from minijax import api  # not at the top: minijax.api imports minijax.numpy
    arr = asarray(arr)
    nd = ndim(arr)
    axis = canonicalize_axis(axis, nd)
    fn = lambda x: func1d(x, *args, **kwargs)
    for i in builtins.range(1, nd - axis):
        fn = api.vmap(fn, in_axes=i, out_axes=-1)
    for _ in builtins.range(axis):
        fn = api.vmap(fn, in_axes=0, out_axes=0)
    return fn(arr)


def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn; a result that lost the axis gets it
    back (size 1)."""
    a = asarray(a)
    for axis in axes:
        b = func(a, axis)
        if ndim(b) == ndim(a) - 1:
            b = expand_dims(b, axis)
        elif ndim(b) != ndim(a):
            raise ValueError("jnp.apply_over_axes: function is not returning an array of the "
                             "correct shape")
        a = b
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """`funclist[i](x)` (or the constant `funclist[i]`) where `condlist[i]` holds, the last
    true condition winning; an extra last function (or 0) elsewhere. One `lax.switch`
    per entry, under `vectorize`."""
    x = asarray(x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = [funclist[-1], *funclist[:-1]]
    elif nf == nc:
        funclist = [0, *funclist]
    else:
        raise ValueError(f"jnp.piecewise: with {nc} condition(s), either {nc} or {nc + 1} "
                         f"functions are expected; got {nf}")
    conds = broadcast_to(asarray(condlist, dtype=np.bool_), (nc, *shape_of(x)))
    which = reductions.argmax(reductions.cumsum(concatenate(
        [zeros_like(slice_axis(conds, 0, 0, 1), _int), conds.astype(_int)], 0), axis=0), axis=0)
    dt = dtype_of(x)
    branches = [(lambda v, f=f: asarray(f(v, *args, **kw)).astype(dt)) if callable(f) else
                (lambda v, f=f: full(shape_of(v), f, dt)) for f in funclist]
    return vectorize(lambda i, v: lax.switch(i, branches, v))(which, x)


# ---------------------------------------------------------------------------------------------
# Bits, Bessel's i0, complex helpers
# ---------------------------------------------------------------------------------------------

def packbits(a, axis: int | None = None, bitorder: str = "big"):
    """uint8: the bools (nonzero entries) of `a` along `axis` (None: flattened) packed 8 to a
    byte, zero-padded at the end."""
    a = asarray(a)
    if dtype_kind(a) not in "biu":
        raise TypeError(f"jnp.packbits: expected an integer or boolean array, got "
                        f"{dtype_of(a).name}")
    if bitorder not in ("big", "little"):
        raise ValueError("jnp.packbits: bitorder must be 'big' or 'little'")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, ndim(a))
    bits = lax.convert_element_type(lax.ne(a, _const(a, 0)), np.uint8)
    n = shape_of(bits)[axis]
    pad_to = -n % 8
    if pad_to:
        widths = [(0, pad_to if i == axis else 0) for i in builtins.range(ndim(a))]
        bits = pad(bits, widths)
    bits = moveaxis(bits, axis, -1)
    bits = reshape(bits, (*shape_of(bits)[:-1], shape_of(bits)[-1] // 8, 8))
    shifts = np.arange(8, dtype=np.uint8)
    shifts = shifts[::-1] if bitorder == "big" else shifts
    packed = reductions.sum(ufuncs.left_shift(bits, shifts), axis=-1, dtype=np.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis: int | None = None, count: int | None = None, bitorder: str = "big"):
    """The bits of uint8 `a` along `axis` (None: flattened), 8 per byte (uint8 0/1), the
    first `count` of them if given."""
    a = asarray(a)
    if dtype_of(a) != np.uint8:
        raise TypeError(f"jnp.unpackbits: expected uint8 input, got {dtype_of(a).name}")
    if bitorder not in ("big", "little"):
        raise ValueError("jnp.unpackbits: bitorder must be 'big' or 'little'")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, ndim(a))
    shifts = np.arange(8, dtype=np.uint8)
    shifts = shifts[::-1] if bitorder == "big" else shifts
    x = moveaxis(a, axis, -1)
    bits = ufuncs.bitwise_and(ufuncs.right_shift(expand_dims(x, -1), shifts), np.uint8(1))
    bits = reshape(bits, (*shape_of(x)[:-1], shape_of(x)[-1] * 8))
    if count is not None:
        bits = slice_axis(bits, ndim(bits) - 1, 0, builtins.min(count, shape_of(bits)[-1]))
    return moveaxis(bits, -1, axis)


_I0_TERMS = 128  # enough for I0(x) up to float32's overflow near |x| = 90


def i0(x):
    """The modified Bessel function of the first kind, order 0, elementwise (float dtypes):
    the series sum_k ((x/2)^(2k) / k!^2), its terms made by a cumprod over a new axis, so
    it traces, differentiates (I0' = I1) and batches as ordinary ops. Raises for complex
    input."""
    (x,) = promote_args_inexact("i0", x)
    if dtype_kind(x) == "c":
        raise NotImplementedError("jnp.i0: complex input is not supported (as in JAX)")
    k = np.arange(1, _I0_TERMS + 1, dtype=np.float64)
    q = ufuncs.multiply(expand_dims(x * x / 4, -1), (1 / (k * k)).astype(dtype_of(x)))
    return 1 + reductions.sum(reductions.cumprod(q, axis=-1), axis=-1)


def angle(z, deg: bool = False):
    """The argument of each complex entry, atan2(imag, real), in radians (degrees if `deg`);
    real input gives 0 or pi. Float dtype out."""
    z = asarray(z)
    re, im = ufuncs.real(z), ufuncs.imag(z)
    if not is_floating(re):
        re, im = (lax.convert_element_type(v, dtypes.default_float_dtype()) for v in (re, im))
    out = ufuncs.arctan2(im, re)
    return ufuncs.degrees(out) if deg else out


def iscomplex(x):
    """bool[...]: whether each entry has a nonzero imaginary part."""
    im = ufuncs.imag(asarray(x))
    return lax.ne(im, _const(im, 0))


# ---------------------------------------------------------------------------------------------
# Histograms in one and more dimensions
# ---------------------------------------------------------------------------------------------

def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The `bins + 1` equally spaced edges over [min, max] of `a` (or `range`; widened by
    0.5 each way when empty), or the given edges as a float array. String bin rules raise
    NotImplementedError."""
    if isinstance(bins, str):
        raise NotImplementedError("jnp.histogram_bin_edges: string values for bins are not "
                                  "supported")
    a = ravel(a)
    dt = dtype_of(a) if is_floating(a) else dtypes.default_float_dtype()
    if np.ndim(bins) == 1:
        return asarray(bins, dt)
    if range is None:
        lo, hi = reductions.min(a).astype(dt), reductions.max(a).astype(dt)
    else:
        if np.shape(range) != (2,):
            raise ValueError(f"jnp.histogram_bin_edges: range must be (min, max), got {range}")
        lo, hi = (asarray(r, dt) for r in range)
    same = lax.eq(lo, hi)
    lo = where(same, lax.sub(lo, _const(lo, 0.5)), lo)
    hi = where(same, lax.add(hi, _const(hi, 0.5)), hi)
    nb = int(bins)
    steps = lax.div(lax.iota(dt, nb + 1), _const(lo, nb))
    edges = lax.add(lo, lax.mul(steps, lax.sub(hi, lo)))
    return lax.concatenate([slice_axis(edges, 0, 0, nb), lax.reshape(hi, (1,))], 0)


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """`(counts, [edges per dimension])` of the points `sample` (`T[N, D]`) over a grid of
    bins (an int, or one bin count or edge array per dimension); the last bin of each
    dimension includes its right edge. `density` divides by the total and the bin volumes."""
    sample = asarray(sample)
    if sample.ndim != 2:
        raise ValueError(f"jnp.histogramdd: sample must be 2-D (N points, D dimensions), got "
                         f"{shape_of(sample)}")
    n, d = shape_of(sample)
    per_dim_bins = [bins] * d if isinstance(bins, int) else list(bins)
    ranges = [None] * d if range is None else list(range)
    if len(per_dim_bins) != d or len(ranges) != d:
        raise ValueError(f"jnp.histogramdd: {d} dimensions need {d} bins and ranges")
    edges, flat, sizes = [], None, []
    for i in builtins.range(d):
        x = slice_axis(sample, 1, i, i + 1)[:, 0]
        e = histogram_bin_edges(x, per_dim_bins[i], ranges[i])
        idx = searchsorted(e, x, side="right")
        idx = where(x == e[-1], idx - 1, idx)
        edges.append(e)
        sizes.append(shape_of(e)[0] + 1)
        flat = idx if flat is None else flat * sizes[-1] + idx
    counts = bincount(flat, weights, length=int(np.prod(sizes)))
    counts = reshape(counts, tuple(sizes))[(builtins.slice(1, -1),) * d]
    if density:
        counts = counts / reductions.sum(counts)
        for i, e in enumerate(edges):
            counts = counts / reshape(diff(e), tuple(-1 if j == i else 1
                                                     for j in builtins.range(d)))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """`(counts, x_edges, y_edges)`: `histogramdd` of the points (x[i], y[i])."""
    counts, (ex, ey) = histogramdd(stack([ravel(x), ravel(y)], 1), bins, range, weights,
                                   density)
    return counts, ex, ey
