"""`minijax.numpy`: the NumPy API on top of `minijax.lax`, with JAX's promotion rules.

Each function promotes dtypes (weak types included, see minijax/dtypes.py), broadcasts ranks,
and calls lax functions, which bind primitives. Mirrors jax/_src/numpy/lax_numpy.py,
ufuncs.py and reductions.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import string
from typing import Any, Sequence

import numpy as np

from minijax import core, dtypes
from minijax import lax
from minijax.lax import lax as lax_internal
from minijax.array import Array
from minijax.core import Tracer

_max, _min, _abs, _sum = builtins.max, builtins.min, builtins.abs, builtins.sum

# dtypes, as jnp exposes them
bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
bfloat16 = dtypes.bfloat16.type
complex64 = np.complex64
inf, nan, pi, e = np.inf, np.nan, np.pi, np.e
newaxis = None
ndarray = Array
promote_types = dtypes.promote_types
result_type = dtypes.result_type
finfo = dtypes.finfo
iinfo = dtypes.iinfo
issubdtype = dtypes.issubdtype
floating, integer, inexact, number = np.floating, np.integer, np.inexact, np.number


def dtype(x):
    return np.dtype(x) if not hasattr(x, "dtype") else core.get_aval(x).dtype


def shape(x):
    return core.get_aval(x).shape


def ndim(x):
    return core.get_aval(x).ndim


def size(x):
    return core.get_aval(x).size


# ---------------------------------------------------------------------------------------------
# Promotion and broadcasting
# ---------------------------------------------------------------------------------------------

def _check_arraylike(name: str, *args) -> None:
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got "
                            f"{type(a).__name__} at position {i}.")
        core.get_aval(a)  # raises a clear TypeError for strings, functions, ...


# JAX: jax/_src/numpy/util.py promote_dtypes
def promote_dtypes(*args):
    """Convert all args to their common dtype (JAX's lattice; weak types respected)."""
    pairs = [dtypes.dtype_and_weak(a) for a in args]
    to_dtype, weak = dtypes.result_type_weak(*pairs)
    return [lax.convert_element_type(a, to_dtype, weak) for a in args]


# JAX: jax/_src/numpy/util.py promote_shapes
def promote_shapes(name: str, *args):
    """Give non-scalar args a common rank by adding leading size-1 dimensions (lax broadcasts
    size-1 and rank-0 operands itself). Incompatible shapes: as in JAX, the lax op raises
    TypeError when no rank is added, else this raises ValueError."""
    shapes = [core.get_aval(a).shape for a in args]
    ranks = {len(s) for s in shapes if len(s)}
    if len(ranks) < 2:
        return list(args)
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{name}: Incompatible shapes for broadcasting: shapes="
                         f"{[tuple(s) for s in shapes]}") from None
    rank = _max(ranks)
    out = []
    for a, s in zip(args, shapes):
        if len(s) and len(s) < rank:
            pad = rank - len(s)
            a = lax.broadcast_in_dim(a, (1,) * pad + s, tuple(range(pad, rank)))
        out.append(a)
    return out


def promote_args(name: str, *args):
    _check_arraylike(name, *args)
    return promote_shapes(name, *promote_dtypes(*args))


def promote_args_inexact(name: str, *args):
    """Like promote_args, then to a float dtype (ints -> default float), as jnp.sin does."""
    _check_arraylike(name, *args)
    args = promote_dtypes(*args)
    d, weak = dtypes.dtype_and_weak(args[0])
    if not dtypes.is_float(d):
        args = [lax.convert_element_type(a, dtypes.default_float_dtype(), weak) for a in args]
    return promote_shapes(name, *args)


# ---------------------------------------------------------------------------------------------
# Array creation
# ---------------------------------------------------------------------------------------------

def _astype(x, dtype):
    return lax.convert_element_type(x, dtype)


def array(object, dtype=None, copy=True) -> Any:
    """A minijax array from array-like `object` (nested lists may hold tracers).

    Python floats give float32 (with x64 off), ints int32, as in JAX; without `dtype`, a Python
    scalar or a weakly typed array gives a weakly typed result (JAX: `dtypes.is_weakly_typed`).
    Raises TypeError for non-numeric input."""
    weak = dtype is None and (dtypes.is_python_scalar(object) or isinstance(
        object, (Tracer, Array))) and dtypes.dtype_and_weak(object)[1]
    if isinstance(object, (Tracer, Array)):
        out = object
    elif isinstance(object, (list, tuple)) and any(
            isinstance(leaf, (Tracer, Array)) for leaf in _iter_leaves(object)):
        out = stack([array(o) for o in object])
    else:
        val = np.asarray(object)
        if val.dtype.kind not in "biufc" and val.dtype != dtypes.bfloat16:
            raise TypeError(f"array: unsupported value of dtype {val.dtype} ({object!r})")
        canon = dtypes.canonicalize_dtype(val.dtype if dtype is None else dtype)
        return Array(core.ShapedArray(val.shape, canon, weak), npy=val.astype(canon))
    if dtype is not None:
        return lax.convert_element_type(out, dtype)
    return lax.convert_element_type(out, core.get_aval(out).dtype, weak)


def _iter_leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _iter_leaves(y)
    else:
        yield x


def asarray(a, dtype=None) -> Any:
    """Like `array`, but returns minijax arrays and tracers unchanged when no dtype is given."""
    if isinstance(a, (Tracer, Array)) and dtype is None:
        return a
    return array(a, dtype)


def _default_dtype(dtype):
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


def _shape_tuple(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def zeros(shape, dtype=None):
    """An array of zeros (default dtype float32)."""
    return lax.full(_shape_tuple(shape), 0, _default_dtype(dtype))


def ones(shape, dtype=None):
    """An array of ones (default dtype float32)."""
    return lax.full(_shape_tuple(shape), 1, _default_dtype(dtype))


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (weakly typed for a Python scalar fill and
    no dtype, as in JAX)."""
    return lax.full(_shape_tuple(shape), fill_value, dtype)


def zeros_like(a, dtype=None):
    return lax.full_like(a, 0, dtype)


def ones_like(a, dtype=None):
    return lax.full_like(a, 1, dtype)


def full_like(a, fill_value, dtype=None):
    return lax.full_like(a, fill_value, dtype)


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) with `step`, as a concrete array (bounds must be
    concrete: ConcretizationTypeError under tracing otherwise). `arange(n)` is an `iota`."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            v._concrete("arange")
    if stop is None and step is None and dtype is None or (
            stop is None and step is None and np.dtype(dtype).kind in "iu"):
        d = dtypes.canonicalize_dtype(dtype or np.result_type(start))
        if np.dtype(d).kind in "iu":
            return lax.iota(d, int(start))
    val = np.arange(start, stop, step)
    d = dtypes.canonicalize_dtype(dtype or val.dtype)
    return array(val.astype(d))


def linspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None):
    """`num` evenly spaced values from start to stop (concrete bounds)."""
    val = np.linspace(float(start), float(stop), int(num), endpoint=endpoint)
    return array(val, _default_dtype(dtype))


def eye(N: int, M: int | None = None, k: int = 0, dtype=None):
    """The identity matrix (ones on diagonal `k`)."""
    return array(np.eye(N, M, k), _default_dtype(dtype))


# ---------------------------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------------------------

def _one_to_one_unary(name, lax_fn, inexact=False):
    def f(x):
        (x,) = (promote_args_inexact if inexact else promote_args)(name, x)
        return lax_fn(x)
    f.__name__ = name
    f.__doc__ = f"Elementwise `{name}` (jax.numpy.{name})."
    return f


def _one_to_one_binary(name, lax_fn, inexact=False):
    def f(x, y):
        x, y = (promote_args_inexact if inexact else promote_args)(name, x, y)
        return lax_fn(x, y)
    f.__name__ = name
    f.__doc__ = f"Elementwise `{name}` with JAX's dtype promotion and broadcasting."
    return f


negative = _one_to_one_unary("negative", lax.neg)
sin = _one_to_one_unary("sin", lax.sin, True)
cos = _one_to_one_unary("cos", lax.cos, True)
exp = _one_to_one_unary("exp", lax.exp, True)
log = _one_to_one_unary("log", lax.log, True)
log1p = _one_to_one_unary("log1p", lax.log1p, True)
tanh = _one_to_one_unary("tanh", lax.tanh, True)
sqrt = _one_to_one_unary("sqrt", lax.sqrt, True)
abs = _one_to_one_unary("abs", lax.abs)
absolute = abs
sign = _one_to_one_unary("sign", lax.sign)
floor = _one_to_one_unary("floor", lambda x: x if np.dtype(x.dtype).kind in "iub"
                          else lax.floor(x))
add = _one_to_one_binary("add", lax.add)
subtract = _one_to_one_binary("subtract", lax.sub)
multiply = _one_to_one_binary("multiply", lax.mul)
maximum = _one_to_one_binary("maximum", lax.max)
minimum = _one_to_one_binary("minimum", lax.min)
equal = _one_to_one_binary("equal", lax.eq)
not_equal = _one_to_one_binary("not_equal", lax.ne)
less = _one_to_one_binary("less", lax.lt)
less_equal = _one_to_one_binary("less_equal", lax.le)
greater = _one_to_one_binary("greater", lax.gt)
greater_equal = _one_to_one_binary("greater_equal", lax.ge)


def ceil(x):
    """Elementwise ceiling: -floor(-x)."""
    (x,) = promote_args("ceil", x)
    return x if np.dtype(x.dtype).kind in "iub" else lax.neg(lax.floor(lax.neg(x)))


def square(x):
    (x,) = promote_args("square", x)
    return lax.integer_pow(x, 2)


def reciprocal(x):
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.integer_pow(x, -1)


def true_divide(x, y):
    """x / y; integer inputs give floats (default float dtype)."""
    x, y = promote_args_inexact("true_divide", x, y)
    return lax.div(x, y)


divide = true_divide


def floor_divide(x, y):
    """x // y, rounding toward minus infinity (as numpy)."""
    x, y = promote_args("floor_divide", x, y)
    if np.dtype(core.get_aval(x).dtype).kind in "iu":
        q = lax.div(x, y)
        r = lax.rem(x, y)
        zero = lax_internal._const(r, 0)
        fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(y, zero)))
        return lax.select(fix, lax.sub(q, lax_internal._const(q, 1)), q)
    return lax.floor(lax.div(x, y))


def remainder(x, y):
    """x % y with the sign of y (as numpy's `%`)."""
    x, y = promote_args("remainder", x, y)
    r = lax.rem(x, y)
    zero = lax_internal._const(r, 0)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(y, zero)))
    return lax.select(fix, lax.add(r, y), r)


mod = remainder


def power(x, y):
    """x ** y. A concrete integer exponent uses `integer_pow`, as in JAX."""
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool):
        (x,) = promote_args("power", x)
        d = core.get_aval(x).dtype
        if np.dtype(d).kind in "iu" and y < 0:
            raise ValueError("Integers to negative integer powers are not allowed.")
        return lax.integer_pow(x, int(y))
    x, y = promote_args_inexact("power", x, y)
    return lax.pow(x, y)


def logical_not(x):
    return lax.bitwise_not(asarray(x).astype(bool_) if _kind(x) != "b" else x)


def logical_and(x, y):
    x, y = promote_shapes("logical_and", _astype(x, bool_), _astype(y, bool_))
    return lax.bitwise_and(x, y)


def logical_or(x, y):
    x, y = promote_shapes("logical_or", _astype(x, bool_), _astype(y, bool_))
    return lax.bitwise_or(x, y)


def invert(x):
    return lax.bitwise_not(x)


def logical_and_or_bitwise_and(x, y):
    """`&`: bitwise and of ints and bools (numpy's `__and__`)."""
    x, y = promote_args("bitwise_and", x, y)
    return lax.bitwise_and(x, y)


def logical_or_or_bitwise_or(x, y):
    """`|`: bitwise or of ints and bools (numpy's `__or__`)."""
    x, y = promote_args("bitwise_or", x, y)
    return lax.bitwise_or(x, y)


bitwise_and = logical_and_or_bitwise_and
bitwise_or = logical_or_or_bitwise_or


def _kind(x) -> str:
    return np.dtype(core.get_aval(x).dtype).kind


def isfinite(x):
    """True where x is neither inf nor NaN."""
    x = asarray(x)
    if not dtypes.is_float(core.get_aval(x).dtype):
        return full_like(x, True, bool_)
    return logical_and(lax.eq(x, x), lax.ne(lax.abs(x), lax_internal._const(x, np.inf)))


def isnan(x):
    x = asarray(x)
    return lax.ne(x, x)


def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """`x` where `condition` else `y`, broadcasting all three. The one-argument form
    `where(condition)` is `nonzero(condition, size=size, fill_value=fill_value)`."""
    if x is None and y is None:
        from minijax.numpy.extra import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided "
                         "to jax.numpy.where, got one of them.")
    x, y = promote_dtypes(x, y)
    condition = _astype(condition, bool_)
    condition, x, y = promote_shapes("where", condition, x, y)
    out_shape = np.broadcast_shapes(*(core.get_aval(a).shape for a in (condition, x, y)))
    condition, x, y = (broadcast_to(a, out_shape) for a in (condition, x, y))
    return lax.select_n(condition, y, x)


def clip(a, min=None, max=None):
    """Clamp `a` to [min, max] (either may be None)."""
    if min is not None:
        a = maximum(min, a)
    if max is not None:
        a = minimum(max, a)
    return a


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

def _canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    axis = int(axis)
    if not -ndim <= axis < _max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{name} {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def reshape(a, newshape, order="C"):
    """`a` with shape `newshape` (one entry may be -1). Raises TypeError on size mismatch."""
    a = asarray(a)
    newshape = _shape_tuple(newshape)
    aval = core.get_aval(a)
    if newshape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in newshape:
        known = int(np.prod([d for d in newshape if d != -1], dtype=np.int64))
        if known == 0 or aval.size % known:
            raise TypeError(f"cannot reshape array of shape {aval.shape} (size {aval.size}) "
                            f"into shape {newshape}")
        newshape = tuple(aval.size // known if d == -1 else d for d in newshape)
    if int(np.prod(newshape, dtype=np.int64)) != aval.size:
        raise TypeError(f"cannot reshape array of shape {aval.shape} (size {aval.size}) into "
                        f"shape {newshape} (size {int(np.prod(newshape, dtype=np.int64))})")
    return lax.reshape(a, newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    a = asarray(a)
    nd = core.get_aval(a).ndim
    axes = tuple(range(nd))[::-1] if axes is None else tuple(
        _canonicalize_axis(x, nd) for x in axes)
    return lax.transpose(a, axes)


def swapaxes(a, axis1: int, axis2: int):
    nd = ndim(a)
    perm = list(range(nd))
    i, j = _canonicalize_axis(axis1, nd), _canonicalize_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def moveaxis(a, source: int, destination: int):
    nd = ndim(a)
    s, d = _canonicalize_axis(source, nd), _canonicalize_axis(destination, nd)
    perm = [i for i in range(nd) if i != s]
    perm.insert(d, s)
    return lax.transpose(a, tuple(perm))


def expand_dims(a, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = ndim(a) + len(axes)
    return lax.expand_dims(asarray(a), tuple(_canonicalize_axis(x, nd) for x in axes))


def squeeze(a, axis=None):
    aval = core.get_aval(a)
    if axis is None:
        axes = tuple(i for i, s in enumerate(aval.shape) if s == 1)
    else:
        axes = tuple(_canonicalize_axis(x, aval.ndim) for x in
                     ((axis,) if isinstance(axis, int) else axis))
        bad = [x for x in axes if aval.shape[x] != 1]
        if bad:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                             f"to one: axis {bad[0]} of shape {aval.shape}")
    return lax.squeeze(a, axes) if axes else a


def broadcast_to(a, shape):
    """`a` broadcast to `shape` by numpy's rules (ValueError if incompatible)."""
    a = asarray(a)
    aval = core.get_aval(a)
    shape = _shape_tuple(shape)
    if aval.shape == shape:
        return a
    if len(shape) < aval.ndim or any(s not in (1, t) for s, t in
                                     zip(aval.shape[::-1], shape[::-1])):
        raise ValueError(f"Incompatible shapes for broadcasting: {aval.shape} and requested "
                         f"shape {shape}")
    lead = len(shape) - aval.ndim
    kept = tuple(i for i, s in enumerate(aval.shape) if s == shape[lead + i])
    squeezed = lax.reshape(a, tuple(aval.shape[i] for i in kept)) if len(kept) < aval.ndim else a
    return lax.broadcast_in_dim(squeezed, shape, tuple(lead + i for i in kept))


def concatenate(arrays: Sequence, axis: int = 0):
    """Join arrays along an existing axis (dtypes promoted)."""
    if not len(arrays):
        raise ValueError("Need at least one array to concatenate.")
    arrays = promote_dtypes(*[asarray(a) for a in arrays])
    nd = ndim(arrays[0])
    if nd == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    return lax.concatenate(arrays, _canonicalize_axis(axis, nd))


def stack(arrays: Sequence, axis: int = 0):
    """Join arrays of equal shape along a new axis."""
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    arrays = [asarray(a) for a in arrays]
    shapes = {core.get_aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError("All input arrays must have the same shape.")
    nd = ndim(arrays[0]) + 1
    axis = _canonicalize_axis(axis, nd)
    return concatenate([expand_dims(a, axis) for a in arrays], axis)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

def _reduction_axes(a, axis) -> tuple[int, ...]:
    nd = ndim(a)
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted({_canonicalize_axis(x, nd) for x in axes}))


def _keepdims(out, axes, keepdims):
    return lax.expand_dims(out, axes) if keepdims and axes else out


def _upcast_sum_dtype(d: np.dtype) -> np.dtype:
    d = np.dtype(d)
    if d.kind == "b" or (d.kind == "i" and d.itemsize < dtypes.default_int_dtype().itemsize):
        return dtypes.default_int_dtype()
    if d.kind == "u" and d.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.canonicalize_dtype(np.uint64)
    return d


def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """Sum over `axis` (None: all). Bools and small ints sum in the default int dtype."""
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    d = _upcast_sum_dtype(core.get_aval(a).dtype) if dtype is None else dtype
    return _keepdims(lax.reduce_sum(_astype(a, d), axes), axes, keepdims)


def mean(a, axis=None, dtype=None, keepdims: bool = False):
    """Arithmetic mean over `axis`; integer inputs give the default float dtype."""
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    aval = core.get_aval(a)
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    d = dtype or (aval.dtype if dtypes.is_float(aval.dtype) else dtypes.default_float_dtype())
    total = lax.reduce_sum(_astype(a, d), axes)
    out = lax.div(total, lax_internal._const(total, n))
    return _keepdims(out, axes, keepdims)


def max(a, axis=None, keepdims: bool = False):
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    return _keepdims(lax.reduce_max(a, axes), axes, keepdims)


def min(a, axis=None, keepdims: bool = False):
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    return _keepdims(lax.reduce_min(a, axes), axes, keepdims)


amax, amin = max, min


def argmax(a, axis=None, keepdims: bool = False):
    """Index of the maximum (over the flattened array when axis is None), as int32."""
    a = asarray(a)
    if axis is None:  # over the flattened array; keepdims gives shape (1,) * a.ndim
        out = lax.argmax(ravel(a), 0, dtypes.default_int_dtype())
        return _keepdims(out, tuple(range(ndim(a))), keepdims)
    axis = _canonicalize_axis(axis, ndim(a))
    out = lax.argmax(a, axis, dtypes.default_int_dtype())
    return _keepdims(out, (axis,), keepdims)


def argmin(a, axis=None, keepdims: bool = False):
    a = asarray(a)
    if axis is None:  # over the flattened array; keepdims gives shape (1,) * a.ndim
        out = lax.argmin(ravel(a), 0, dtypes.default_int_dtype())
        return _keepdims(out, tuple(range(ndim(a))), keepdims)
    axis = _canonicalize_axis(axis, ndim(a))
    out = lax.argmin(a, axis, dtypes.default_int_dtype())
    return _keepdims(out, (axis,), keepdims)


def var(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False):
    """Variance: mean of squared deviations, divided by (n - ddof)."""
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    aval = core.get_aval(a)
    d = dtype or (aval.dtype if dtypes.is_float(aval.dtype) else dtypes.default_float_dtype())
    a = _astype(a, d)
    centered = lax.sub(a, mean(a, axes, keepdims=True))
    n = int(np.prod([aval.shape[i] for i in axes], dtype=np.int64))
    ss = lax.reduce_sum(lax.integer_pow(centered, 2), axes)
    out = lax.div(ss, lax_internal._const(ss, _max(n - ddof, 0)))
    return _keepdims(out, axes, keepdims)


def std(a, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False):
    return sqrt(var(a, axis, dtype, ddof, keepdims))


# ---------------------------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------------------------

def _dot_dtype(a, b):
    a, b = promote_dtypes(a, b)
    return a, b, core.get_aval(a).dtype


def matmul(a, b):
    """Matrix product with numpy's rules: 1-D operands are promoted and their axis removed;
    leading (batch) dimensions broadcast."""
    a, b, d = _dot_dtype(asarray(a), asarray(b))
    a_aval, b_aval = core.get_aval(a), core.get_aval(b)
    if a_aval.ndim == 0 or b_aval.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got {a_aval.str_short()} "
                         f"and {b_aval.str_short()}")
    a_vec, b_vec = a_aval.ndim == 1, b_aval.ndim == 1
    if a_vec:
        a = lax.expand_dims(a, (0,))
    if b_vec:
        b = lax.expand_dims(b, (1,))
    a_shape, b_shape = core.get_aval(a).shape, core.get_aval(b).shape
    if a_shape[-1] != b_shape[-2]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(a_shape[-1],)} and {(b_shape[-2],)}.")
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    nb = len(batch)
    if nb:
        a = broadcast_to(a, batch + a_shape[-2:])
        b = broadcast_to(b, batch + b_shape[-2:])
    dims = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    out = lax.dot_general(a, b, dims, preferred_element_type=d)
    if a_vec:
        out = lax.squeeze(out, (nb,))
    if b_vec:
        out = lax.squeeze(out, (ndim(out) - 1,))
    return out


def dot(a, b):
    """numpy.dot: scalars multiply, 1-D·1-D is the inner product, otherwise a contraction of
    a's last axis with b's second-to-last (or only) axis."""
    a, b, d = _dot_dtype(asarray(a), asarray(b))
    na, nb = ndim(a), ndim(b)
    if na == 0 or nb == 0:
        return multiply(a, b)
    contract_b = 0 if nb == 1 else nb - 2
    if core.get_aval(a).shape[-1] != core.get_aval(b).shape[contract_b]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(core.get_aval(a).shape[-1],)} and "
                        f"{(core.get_aval(b).shape[contract_b],)}.")
    out = lax.dot_general(a, b, (((na - 1,), (contract_b,)), ((), ())),
                          preferred_element_type=d)
    return out


def vdot(a, b):
    return dot(ravel(a), ravel(b))


def outer(a, b):
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def einsum(subscripts: str, *operands, optimize=None, preferred_element_type=None):
    """Einstein summation, contracted left to right with `dot_general` (a documented simpler
    path than JAX's opt_einsum ordering). Supports `...`, implicit output and sums over
    indices that appear once; a repeated index within one operand (a diagonal) raises
    NotImplementedError."""
    operands = promote_dtypes(*[asarray(o) for o in operands])
    d = core.get_aval(operands[0]).dtype if preferred_element_type is None else \
        np.dtype(preferred_element_type)
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(operands)} operands")
    # expand ellipses into fresh capital letters
    free_letters = [c for c in string.ascii_uppercase if c not in subscripts]
    ell_rank = 0
    for s, o in zip(ins, operands):
        if "..." in s:
            ell_rank = _max(ell_rank, ndim(o) - (len(s) - 3))
    ell = "".join(free_letters[:ell_rank])
    new_ins = []
    for s, o in zip(ins, operands):
        if "..." in s:
            k = ndim(o) - (len(s) - 3)
            s = s.replace("...", ell[ell_rank - k:])
        if len(s) != ndim(o):
            raise ValueError(f"einsum: subscripts {s!r} do not match operand of rank {ndim(o)}")
        if len(set(s)) != len(s):
            raise NotImplementedError(f"einsum: repeated index within one operand ({s!r}) "
                                      "is not supported by minijax's einsum")
        new_ins.append(s)
    if out is None:
        counts = {c: "".join(new_ins).count(c) for c in "".join(new_ins)}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    sizes: dict[str, int] = {}
    for s, o in zip(new_ins, operands):
        for c, n in zip(s, core.get_aval(o).shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = _max(sizes[c], n)
    terms = list(zip(new_ins, operands))

    def needed_elsewhere(idx, skip):
        return idx in out or any(idx in s for j, (s, _) in enumerate(terms) if j not in skip)

    # sum out indices private to a single operand
    for i, (s, o) in enumerate(terms):
        private = [k for k, c in enumerate(s) if not needed_elsewhere(c, {i})]
        if private:
            o = lax.reduce_sum(o, tuple(private))
            s = "".join(c for k, c in enumerate(s) if k not in private)
        terms[i] = (s, o)
    s0, acc = terms[0]
    for i in range(1, len(terms)):
        s1, o1 = terms[i]
        rest = set(range(i + 1, len(terms)))
        later = lambda c, rest=rest: c in out or any(c in terms[j][0] for j in rest)
        common = [c for c in s0 if c in s1]
        batch = [c for c in common if later(c)]
        contract = [c for c in common if not later(c)]
        acc, o1 = _einsum_broadcast_pair(acc, s0, o1, s1, batch, sizes)
        dims = ((tuple(s0.index(c) for c in contract), tuple(s1.index(c) for c in contract)),
                (tuple(s0.index(c) for c in batch), tuple(s1.index(c) for c in batch)))
        acc = lax.dot_general(acc, o1, dims, preferred_element_type=d)
        s0 = "".join(batch) + "".join(c for c in s0 if c not in common) + \
            "".join(c for c in s1 if c not in common)
    # remaining indices not in the output are summed; then order as the output
    extra = tuple(k for k, c in enumerate(s0) if c not in out)
    if extra:
        acc = lax.reduce_sum(acc, extra)
        s0 = "".join(c for c in s0 if c in out)
    acc = lax.transpose(acc, tuple(s0.index(c) for c in out))
    return _astype(acc, d)


def _einsum_broadcast_pair(a, sa, b, sb, batch, sizes):
    # size-1 batch dimensions broadcast against the other operand's size
    def fix(x, s):
        shape = list(core.get_aval(x).shape)
        want = [sizes[c] if c in batch else n for c, n in zip(s, shape)]
        return broadcast_to(x, tuple(want)) if want != shape else x
    return fix(a, sa), fix(b, sb)


# ---------------------------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------------------------

def take_along_axis(arr, indices, axis: int):
    """`arr` picked at `indices` along `axis` (indices has arr's rank, size k on `axis`).

    Built from a one-hot mask and a sum (no gather primitive yet), which is exact and
    differentiable but O(k * n) along the axis. Out-of-range indices select nothing (0).
    """
    arr, indices = asarray(arr), asarray(indices)
    nd = ndim(arr)
    axis = _canonicalize_axis(axis, nd)
    n = core.get_aval(arr).shape[axis]
    idx = indices if _kind(indices) in "iu" else _astype(indices, np.int32)
    idx = lax.convert_element_type(idx, np.int32)
    idx = where(lax.lt(idx, np.array(0, np.int32)), lax.add(idx, np.array(n, np.int32)), idx)
    # shapes: arr -> (..., 1, n, ...), idx -> (..., k, 1, ...)
    arr_e = expand_dims(arr, axis)
    idx_e = expand_dims(idx, axis + 1)
    iota_shape = [1] * (nd + 1)
    iota_shape[axis + 1] = n
    pos = lax.broadcasted_iota(np.int32, tuple(iota_shape), axis + 1)
    mask = equal(idx_e, pos)
    picked = where(mask, arr_e, zeros_like(arr_e))
    return sum(picked, axis=axis + 1, dtype=core.get_aval(arr).dtype)


def _rewriting_take(x, idx, mode=None, fill_value=None):
    """`x[idx]`. Basic indexing here: ints, slices (any step), None and Ellipsis. An index with
    an integer array, a list or a boolean mask is advanced indexing, one gather:
    minijax/numpy/indexing.py `advanced_take`, which `mode`/`fill_value` apply to."""
    x = asarray(x)
    aval = core.get_aval(x)
    idx = idx if isinstance(idx, tuple) else (idx,)
    from minijax.numpy import indexing
    if builtins.any(indexing.is_advanced(i) for i in idx):
        return indexing.advanced_take(x, idx, mode, fill_value)
    n_ell = _sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = _sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > aval.ndim:
        raise IndexError(f"Too many indices: array of shape {aval.shape} is {aval.ndim}-"
                         f"dimensional, but {n_real} were indexed")
    if n_ell:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (builtins.slice(None),) * (aval.ndim - n_real) + idx[k + 1:]
    else:
        idx = idx + (builtins.slice(None),) * (aval.ndim - n_real)
    starts, limits, strides, flips, squeeze_dims, new_axes = [], [], [], [], [], []
    dynamic = {}  # dim -> traced integer index
    dim = 0
    out_pos = 0
    for i in idx:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        size_d = aval.shape[dim]
        if isinstance(i, builtins.slice):
            start, stop, step = i.indices(size_d)
            if step > 0:
                starts.append(start)
                limits.append(_max(start, stop))  # as JAX: not trimmed to the last element
                strides.append(step)
            else:
                n = _max(0, (start - stop - step - 1) // (-step))
                first, last = start, start + (n - 1) * step if n else start
                starts.append(last if n else 0)
                limits.append(first + 1 if n else 0)
                strides.append(-step)
                if n:
                    flips.append(dim)
            out_pos += 1
        elif _is_int_index(i):
            v = int(i)
            if not -size_d <= v < size_d:
                raise IndexError(f"index {v} is out of bounds for axis {dim} with size {size_d}")
            v %= size_d
            starts.append(v)
            limits.append(v + 1)
            strides.append(1)
            squeeze_dims.append(dim)
        elif isinstance(i, Tracer) and i.aval.shape == () and i.aval.dtype.kind in "iu":
            # a traced integer: a size-1 dynamic_slice, which wraps negative indices and clamps
            # out-of-range ones (as JAX does); the dimension is kept whole by the static slice
            dynamic[dim] = lax.convert_element_type(i, np.int32)
            starts.append(0)
            limits.append(size_d)
            strides.append(1)
            squeeze_dims.append(dim)
        else:
            raise NotImplementedError(
                f"minijax indexing supports ints (also traced scalar ints), slices, None and "
                f"Ellipsis; got {type(i).__name__}"
                f"{'' if not isinstance(i, Tracer) else ' (a traced array index)'}"
                ". Array indices (gather) come later.")
        dim += 1
    out = x
    if (tuple(starts), tuple(limits)) != ((0,) * aval.ndim, aval.shape) or any(
            s != 1 for s in strides):
        out = lax.slice(out, starts, limits, None if all(s == 1 for s in strides) else strides)
    if dynamic:
        shape = core.get_aval(out).shape
        out = lax.dynamic_slice(out, [dynamic.get(d, np.int32(0)) for d in range(len(shape))],
                                [1 if d in dynamic else n for d, n in enumerate(shape)])
    if flips:
        out = lax.rev(out, tuple(flips))
    if squeeze_dims:
        out = lax.squeeze(out, tuple(squeeze_dims))
    if new_axes:
        out = lax.expand_dims(out, tuple(new_axes))
    return out


def _is_int_index(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return False
    if isinstance(i, (int, np.integer)):
        return True
    if isinstance(i, (Array, np.ndarray)) and i.shape == () and np.dtype(i.dtype).kind in "iu":
        return True
    return False
