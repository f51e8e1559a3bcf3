"""Reductions: sums, products, extrema, means and variances, their NaN-ignoring forms,
cumulative reductions and order statistics (quantile, median).

Mirrors jax/_src/numpy/reductions.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from minijax import core, dtypes, lax
from minijax.core import Tracer
from minijax.lax import lax as lax_internal
from minijax.numpy import indexing, ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    broadcast_to,
    canonicalize_axis,
    check_arraylike,
    dtype_kind,
    dtype_of,
    is_floating,
    jit_when_traced,
    promote_args_inexact,
    promote_dtypes,
    reduction_axes,
    shape_of,
    where,
    where as _where,  # for functions whose `where=` shadows it
)
from minijax.pjit import jit

_const = lax_internal._const
_int = np.int32


# ---------------------------------------------------------------------------------------------
# Sums, products and extrema
# ---------------------------------------------------------------------------------------------

def _keepdims(out, axes, keepdims):
    return lax.expand_dims(out, axes) if keepdims and axes else out


def _upcast_sum_dtype(d: np.dtype) -> np.dtype:
    d = np.dtype(d)
    if d.kind == "b" or (d.kind == "i" and d.itemsize < dtypes.default_int_dtype().itemsize):
        return dtypes.default_int_dtype()
    if d.kind == "u" and d.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.canonicalize_dtype(np.uint64)
    return d


def _arraylike(name: str, a):
    check_arraylike(name, a)  # as JAX: a list or tuple is a TypeError, not an array
    return asarray(a)


def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
        promote_integers: bool = True):
    """Sum over `axis` (None: all). Bools and small ints sum in the default int dtype (unless
    `promote_integers=False`). `where` masks entries (they count as 0), `initial` is added;
    an empty axis sums to 0. Raises TypeError for a list or tuple (as JAX)."""
    a = _arraylike("sum", a)
    axes = reduction_axes(a, axis)
    if dtype is None:
        d = _upcast_sum_dtype(core.get_aval(a).dtype) if promote_integers else dtype_of(a)
    else:
        d = dtype
    out_ = lax.reduce_sum(_where_fill(lax.convert_element_type(a, d), where, 0), axes)
    if initial is not None:
        out_ = lax.add(lax.convert_element_type(initial, d), out_)  # as JAX: op(initial, result)
    return _keepdims(out_, axes, keepdims)


def _lowest(d: np.dtype):
    d = np.dtype(d)
    return False if d.kind == "b" else -np.inf if d.kind == "f" or d == dtypes.bfloat16 else \
        np.iinfo(d).min


def _highest(d: np.dtype):
    d = np.dtype(d)
    return True if d.kind == "b" else np.inf if d.kind == "f" or d == dtypes.bfloat16 else \
        np.iinfo(d).max


def _extremum(name, lax_reduce, lax_op, fill):
    # JAX: jax/_src/numpy/reductions.py _reduction — max and min have no identity: an empty
    # axis or a `where` mask needs `initial`
    def f(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
        a = _arraylike(name, a)
        axes = reduction_axes(a, axis)
        shape = shape_of(a)
        if initial is None and where is not None:
            raise ValueError(f"reduction operation {name} does not have an identity, so to use "
                             "a where mask one has to specify 'initial'")
        if initial is None and builtins.any(shape[d] == 0 for d in axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             "identity")
        out_ = lax_reduce(_where_fill(a, where, fill(dtype_of(a))), axes)
        if initial is not None:
            out_ = lax_op(lax.convert_element_type(initial, dtype_of(a)), out_)  # as JAX
        return _keepdims(out_, axes, keepdims)
    f.__name__ = name
    f.__doc__ = (f"The {name}imum over `axis` (None: all): `T[...]`, the reduced axes removed "
                 "(kept with size 1 by `keepdims`). `initial` takes part in the reduction, "
                 "`where` masks entries (it needs `initial`). Raises ValueError for an empty "
                 "axis without `initial`, TypeError for a list or tuple (as JAX).")
    return f


max = _extremum("max", lax.reduce_max, lax.max, _lowest)
min = _extremum("min", lax.reduce_min, lax.min, _highest)
amax, amin = max, min


def argmax(a, axis=None, keepdims: bool = False):
    """Index of the maximum (over the flattened array when axis is None), as int32."""
    a = _arraylike("argmax", a)
    if axis is None:  # over the flattened array; keepdims gives shape (1,) * a.ndim
        out = lax.argmax(lax.reshape(a, (core.get_aval(a).size,)), 0, dtypes.default_int_dtype())
        return _keepdims(out, tuple(range(core.get_aval(a).ndim)), keepdims)
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    out = lax.argmax(a, axis, dtypes.default_int_dtype())
    return _keepdims(out, (axis,), keepdims)


def argmin(a, axis=None, keepdims: bool = False):
    """Index of the minimum (over the flattened array when axis is None), as int32."""
    a = _arraylike("argmin", a)
    if axis is None:  # over the flattened array; keepdims gives shape (1,) * a.ndim
        out = lax.argmin(lax.reshape(a, (core.get_aval(a).size,)), 0, dtypes.default_int_dtype())
        return _keepdims(out, tuple(range(core.get_aval(a).ndim)), keepdims)
    axis = canonicalize_axis(axis, core.get_aval(a).ndim)
    out = lax.argmin(a, axis, dtypes.default_int_dtype())
    return _keepdims(out, (axis,), keepdims)


def _where_fill(a, where_, fill):
    return a if where_ is None else where(where_, a, lax.full_like(a, fill))


def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
         where=None, promote_integers: bool = True):
    """Product over `axis` (None: all). Bools and small ints multiply in the default int
    dtype, as `sum` (unless `promote_integers=False`). `initial` multiplies in; `where` masks
    entries (they count as 1)."""
    a = _arraylike("prod", a)
    axes = reduction_axes(a, axis)
    if dtype is None:
        d = _upcast_sum_dtype(dtype_of(a)) if promote_integers else dtype_of(a)
    else:
        d = dtype
    a = _where_fill(lax.convert_element_type(a, d), where, 1)
    out_ = lax.reduce_prod(a, axes)  # JAX's reduce_prod primitive
    if initial is not None:
        out_ = lax.mul(lax.convert_element_type(initial, d), out_)  # as JAX
    return _keepdims(out_, axes, keepdims)


def any(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """bool: whether any entry over `axis` is true (nonzero)."""
    a = lax.convert_element_type(_arraylike("any", a), np.bool_)
    axes = reduction_axes(a, axis)
    a = _where_fill(a, where, False)
    return _keepdims(lax.reduce_max(a, axes), axes, keepdims)


def all(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """bool: whether every entry over `axis` is true (nonzero)."""
    a = lax.convert_element_type(_arraylike("all", a), np.bool_)
    axes = reduction_axes(a, axis)
    a = _where_fill(a, where, True)
    return _keepdims(lax.reduce_min(a, axes), axes, keepdims)


def count_nonzero(a, axis=None, keepdims: bool = False):
    """int32: the number of nonzero entries over `axis`."""
    a = asarray(a)
    nz = lax.ne(a, _const(a, 0))
    return sum(nz, axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


def ptp(a, axis=None, out=None, keepdims: bool = False):
    """Peak to peak: max - min over `axis`."""
    return ufuncs.subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def _nan_arg(fn, fill):
    def f(a, axis=None, out=None, keepdims: bool = False):
        a = asarray(a)
        if is_floating(a):
            a = where(ufuncs.isnan(a), lax.full_like(a, fill), a)
        return fn(a, axis, keepdims=keepdims)
    return f

nanargmax = _nan_arg(argmax, -np.inf)

nanargmax.__doc__ = "`argmax` ignoring NaNs."

nanargmin = _nan_arg(argmin, np.inf)

nanargmin.__doc__ = "`argmin` ignoring NaNs."


# ---------------------------------------------------------------------------------------------
# Means and variances
# ---------------------------------------------------------------------------------------------

def _to_inexact(d) -> np.dtype:
    return np.dtype(d) if dtypes.is_float(d) else dtypes.default_float_dtype()


# JAX: jax/_src/numpy/reductions.py _upcast_f16
def _upcast_f16(d) -> np.dtype:
    d = np.dtype(d)
    return np.dtype(np.float32) if d in (np.float16, dtypes.bfloat16) else d


def _check_where(name: str, where_):
    if where_ is not None and dtype_of(_arraylike(name, where_)) != np.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                         f"where.dtype={dtype_of(where_)}.")


# JAX: jax/_src/numpy/reductions.py _count
def _count(a, axes, keepdims, where_, dtype):
    if where_ is None:
        n = math.prod([shape_of(a)[i] for i in axes])
        return lax.convert_element_type(core.dimension_as_value(n), dtype)
    return sum(broadcast_to(asarray(where_), shape_of(a)), axes, dtype=dtype,
               keepdims=keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None):
    """Arithmetic mean over `axis`: integer and bool inputs give the default float dtype;
    float16/bfloat16 are summed in float32. `where` (bool, broadcast to `a`) picks the
    entries that count. Raises ValueError for a non-bool `where`, NotImplementedError for
    `out`. JAX: jax/_src/numpy/reductions.py mean."""
    a = _arraylike("mean", a)
    _check_where("mean", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.mean is not supported.")
    axes = reduction_axes(a, axis)
    result_dtype = _to_inexact(dtype_of(a)) if dtype is None else np.dtype(dtype)
    d = _upcast_f16(result_dtype) if dtypes.is_float(result_dtype) else result_dtype
    total = sum(a, axes, dtype=d, keepdims=keepdims, where=where)
    return lax.convert_element_type(lax.div(total, _count(a, axes, keepdims, where, d)),
                                    result_dtype)


_mean = mean  # for var, whose `mean=` shadows it


def _correction(ddof, correction):
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def var(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Variance over `axis`: the sum of squared deviations (|.|**2 for complex input, whose
    variance is real) over `n - correction` (`correction` is `ddof`), NaN where that is <= 0.
    `where` picks the entries that count, `mean` gives the mean to use (shaped as with
    keepdims). Ints give the default float dtype; float16/bfloat16 compute in float32.
    Raises ValueError for ddof with correction, a real `dtype` for complex input or a
    non-bool `where`; NotImplementedError for `out`. JAX: jax/_src/numpy/reductions.py var."""
    correction = _correction(ddof, correction)
    a = _arraylike("var", a)
    _check_where("var", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.var is not supported.")
    axes = reduction_axes(a, axis)
    dtype = None if dtype is None else np.dtype(dtype)
    _var_promote_types(dtype_of(a), dtype)  # its errors before tracing
    # JAX runs `_var` under jit, so a jaxpr shows `jit[name=_var]` and reverse mode transposes
    # it as one unit: the variance's own cotangent terms are summed before the caller's, and
    # that grouping of float additions decides the gradient's last bit. Eagerly minijax calls
    # it directly (as `where` does).
    if builtins.any(isinstance(x, Tracer) for x in (a, where, mean, correction)):
        return _var_jit(a, axes=axes, dtype=dtype, correction=correction, keepdims=keepdims,
                        where=where, a_mean=mean)
    return _var(a, axes=axes, dtype=dtype, correction=correction, keepdims=keepdims,
                where=where, a_mean=mean)


# JAX: jax/_src/numpy/reductions.py _var_promote_types
def _var_promote_types(a_dtype, dtype):
    """(computation dtype, result dtype)."""
    if dtype is not None:
        if not dtypes.issubdtype(dtype, np.complexfloating) and \
                dtypes.issubdtype(a_dtype, np.complexfloating):
            raise ValueError("jnp.var: a real dtype for the variance of complex values is not "
                             f"supported (as in JAX); got dtype={dtype} for {a_dtype} input")
        computation = dtype
    elif not dtypes.is_float(a_dtype):
        dtype = computation = _to_inexact(a_dtype)
    else:
        dtype, computation = np.zeros((), a_dtype).real.dtype, a_dtype
    return _upcast_f16(computation), np.dtype(dtype)


# JAX: jax/_src/numpy/reductions.py _var
def _var(a, *, axes, dtype, correction, keepdims, where, a_mean):
    d, dtype = _var_promote_types(dtype_of(a), dtype)
    a = lax.convert_element_type(a, d)
    if a_mean is None:
        a_mean = _mean(a, axes, dtype=d, keepdims=True, where=where)
    else:
        a_mean = lax.convert_element_type(asarray(a_mean), d)
    centered = lax.sub(a, a_mean)
    if dtypes.issubdtype(d, np.complexfloating):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
        d = dtype_of(centered)
    else:
        centered = lax.square(centered)
    normalizer = lax.sub(_count(a, axes, keepdims, where, d),
                         lax.convert_element_type(correction, d))
    result = sum(centered, axes, dtype=d, keepdims=keepdims, where=where)
    result = lax.convert_element_type(lax.div(result, normalizer), dtype)
    return _where(lax.gt(normalizer, _const(normalizer, 0)), result, np.nan)


_var_jit = jit(_var, static_argnames=("axes", "dtype", "keepdims"))


def std(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Standard deviation: `sqrt(var(...))` with the same arguments. Raises ValueError for a
    non-inexact `dtype` (and as `var`). JAX: jax/_src/numpy/reductions.py std."""
    correction = _correction(ddof, correction)
    a = _arraylike("std", a)
    _check_where("std", where)
    if dtype is not None and not dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to jnp.std must be inexact; got {np.dtype(dtype)}")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.std is not supported.")
    axes = reduction_axes(a, axis)
    dtype = None if dtype is None else np.dtype(dtype)
    # a nested jit as JAX's `_std` (around `_var`'s), eagerly a direct call
    if builtins.any(isinstance(x, Tracer) for x in (a, where, mean, correction)):
        return _std_jit(a, axes=axes, dtype=dtype, correction=correction, keepdims=keepdims,
                        where=where, mean=mean)
    return _std(a, axes=axes, dtype=dtype, correction=correction, keepdims=keepdims,
                where=where, mean=mean)


# JAX: jax/_src/numpy/reductions.py _std
def _std(a, *, axes, dtype, correction, keepdims, where, mean):
    return lax.sqrt(var(a, axes, dtype=dtype, correction=correction, keepdims=keepdims,
                        where=where, mean=mean))


_std_jit = jit(_std, static_argnames=("axes", "dtype", "keepdims"))


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions
# ---------------------------------------------------------------------------------------------

def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
           where=None):
    """`sum` with NaNs counted as zero."""
    a = asarray(a)
    if is_floating(a):
        a = _where(ufuncs.isnan(a), lax.full_like(a, 0), a)
    return sum(a, axis, dtype, keepdims=keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """`prod` with NaNs counted as one."""
    a = asarray(a)
    if is_floating(a):
        a = where(ufuncs.isnan(a), lax.full_like(a, 1), a)
    return prod(a, axis, dtype, keepdims=keepdims)


def _nan_extreme(reducer, fill):
    def f(a, axis=None, out=None, keepdims: bool = False):
        a = asarray(a)
        if not is_floating(a):
            return reducer(a, axis, keepdims=keepdims)
        nan_mask = ufuncs.isnan(a)
        out_ = reducer(where(nan_mask, lax.full_like(a, fill), a), axis, keepdims=keepdims)
        all_nan = all(nan_mask, axis, keepdims=keepdims)
        return where(all_nan, lax.full_like(out_, np.nan), out_)
    return f

nanmax = _nan_extreme(max, -np.inf)

nanmax.__doc__ = "`max` ignoring NaNs (NaN where a slice is all NaN)."

nanmin = _nan_extreme(min, np.inf)

nanmin.__doc__ = "`min` ignoring NaNs (NaN where a slice is all NaN)."


def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, where=None):
    """`mean` over the non-NaN entries (NaN where there are none); `where` picks the entries
    that count. JAX: jax/_src/numpy/reductions.py nanmean."""
    a = _arraylike("nanmean", a)
    _check_where("nanmean", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanmean is not supported.")
    if not is_floating(a):
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    dtype = _to_inexact(dtype_of(a)) if dtype is None else np.dtype(dtype)
    count = sum(lax.bitwise_not(ufuncs.isnan(a)), axis, dtype=dtype, keepdims=keepdims,
                where=where)
    return lax.div(nansum(a, axis, dtype, keepdims=keepdims, where=where), count)


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean over `axis`: sum(a * w) / sum(w) (w broadcast along `axis` when 1-D).
    With `returned`, also the sum of weights. Plain `mean` when weights is None."""
    a = asarray(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        axes = reduction_axes(a, axis)
        n = int(np.prod([shape_of(a)[i] for i in axes], dtype=np.int64))
        return avg, lax.full_like(avg, n)
    a, weights = promote_dtypes(a, asarray(weights))
    if not is_floating(a):
        f = dtypes.default_float_dtype()
        a, weights = lax.convert_element_type(a, f), lax.convert_element_type(weights, f)
    if shape_of(weights) != shape_of(a):
        if axis is None or core.get_aval(weights).ndim != 1:
            raise ValueError("Axis must be specified when shapes of a and weights differ, and "
                             "weights must then be 1-D.")
        ax = canonicalize_axis(axis, core.get_aval(a).ndim)
        if shape_of(weights)[0] != shape_of(a)[ax]:
            raise ValueError("Length of weights not compatible with specified axis.")
        weights = lax.broadcast_in_dim(weights, shape_of(a), (ax,))
    wsum = sum(weights, axis, keepdims=keepdims)
    avg = lax.div(sum(lax.mul(a, weights), axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


# ---------------------------------------------------------------------------------------------
# Cumulative reductions
# ---------------------------------------------------------------------------------------------

def _nan_cumulative(name, fn, fill):
    def f(a, axis=None, dtype=None, out=None):
        a = asarray(a)
        if is_floating(a):
            a = where(ufuncs.isnan(a), lax.full_like(a, fill), a)
        return fn(a, axis, dtype)
    f.__name__ = name
    return f


# JAX jits each of cumsum, cumprod, nancumsum, nancumprod (a jaxpr shows `jit[name=cumsum]`)
_jit_cumulative = jit_when_traced(static_argnames=("axis", "dtype"))


def _cumulative(name, combine, identity):
    def f(a, axis=None, dtype=None, out=None):
        a = asarray(a)
        if axis is None:
            a, axis = lax.reshape(a, (core.get_aval(a).size,)), 0
        axis = canonicalize_axis(axis, core.get_aval(a).ndim)
        if dtype is None:  # only bools are promoted (to the default int), unlike sum
            dtype = dtypes.default_int_dtype() if dtype_kind(a) == "b" else dtype_of(a)
        return combine(lax.convert_element_type(a, dtype), axis)
    f.__name__ = name
    return f

_cumsum = _cumulative("cumsum", lambda a, axis: lax.cumsum(a, axis), 0)
cumsum = _jit_cumulative(_cumsum)

cumsum.__doc__ = """Running sum along `axis` (None: the flattened array). Bools accumulate in
the default int dtype, other dtypes in their own (as JAX). `T[...] -> T[...]`."""

_cumprod = _cumulative("cumprod", lambda a, axis: lax.cumprod(a, axis), 1)
cumprod = _jit_cumulative(_cumprod)

cumprod.__doc__ = """Running product along `axis` (None: the flattened array). Bools accumulate
in the default int dtype, other dtypes in their own (as JAX). `T[...] -> T[...]`."""


def _cumulative_include(fn, identity):
    def f(x, /, *, axis=None, dtype=None, include_initial: bool = False):
        x = asarray(x)
        nd = core.get_aval(x).ndim
        if axis is None:
            if nd != 1:
                raise ValueError("axis must be specified for arrays of more than one dimension")
            axis = 0
        axis = canonicalize_axis(axis, nd)
        out_ = fn(x, axis, dtype)
        if include_initial:
            pad = [(0, 0, 0)] * nd
            pad[axis] = (1, 0, 0)
            out_ = lax.pad(out_, _const(out_, identity), pad)
        return out_
    return f

nancumsum = _jit_cumulative(_nan_cumulative("nancumsum", _cumsum, 0))

nancumsum.__doc__ = "`cumsum` with NaNs counted as zero."

nancumprod = _jit_cumulative(_nan_cumulative("nancumprod", _cumprod, 1))

nancumprod.__doc__ = "`cumprod` with NaNs counted as one."

cumulative_sum = _cumulative_include(cumsum, 0)

cumulative_sum.__doc__ = "jax.numpy.cumulative_sum: `cumsum` with `include_initial` (a leading 0)."

cumulative_prod = _cumulative_include(cumprod, 1)

cumulative_prod.__doc__ = "jax.numpy.cumulative_prod: `cumprod` with `include_initial` (a 1)."


# ---------------------------------------------------------------------------------------------
# Order statistics
# ---------------------------------------------------------------------------------------------

def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False):
    """The q-th quantiles (q in [0, 1], any shape Q) over `axis`: `T[Q + reduced shape]`.

    Sorts along the axis, then interpolates between the neighbours of position q * (n - 1)
    (method "linear"; also "lower", "higher", "nearest", "midpoint"). Integer inputs give the
    default float dtype; a slice containing NaN gives NaN."""
    return _quantile(a, q, axis, method, keepdims, squash_nans=False)


def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False):
    """`quantile` ignoring NaNs: each slice's positions count its non-NaN entries only (NaN
    where a slice is all NaN)."""
    return _quantile(a, q, axis, method, keepdims, squash_nans=True)


# JAX: jax/_src/numpy/reductions.py _quantile
def _quantile(a, q, axis, method, keepdims, *, squash_nans: bool):
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"method can only be 'linear', 'lower', 'higher', 'midpoint', or "
                         f"'nearest'. Got {method}.")
    a, q = promote_dtypes(asarray(a), asarray(q))
    if not is_floating(a):
        a, q = (lax.convert_element_type(x, dtypes.default_float_dtype()) for x in (a, q))
    if core.get_aval(q).ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {shape_of(q)}")
    nd = core.get_aval(a).ndim
    axes = reduction_axes(a, axis)
    rest = [d for d in range(nd) if d not in axes]
    n = int(np.prod([shape_of(a)[d] for d in axes], dtype=np.int64))
    x = lax.transpose(a, tuple(rest) + tuple(axes))
    x = lax.reshape(x, tuple(shape_of(a)[d] for d in rest) + (n,))
    x = lax.sort(x, len(rest))  # NaNs sort last
    q_nd = core.get_aval(q).ndim
    if squash_nans:  # per slice: count = its non-NaN entries; positions of shape Q + rest
        qr_shape = shape_of(q) + shape_of(x)[:-1]
        count = sum(lax.bitwise_not(ufuncs.isnan(x)), axis=-1, dtype=dtype_of(x))
        last = lax.broadcast_in_dim(lax.sub(count, _const(count, 1)), qr_shape,
                                    tuple(range(q_nd, len(qr_shape))))
        pos = lax.mul(lax.broadcast_in_dim(q, qr_shape, tuple(range(q_nd))),
                      lax.max(last, _const(last, 0)))
    else:
        last = _const(q, n - 1)
        pos = lax.mul(q, last)
    lo = lax.floor(pos)
    hi = lax.min(lax.add(lo, _const(lo, 1)), lax.max(last, _const(lo, 0)))
    w = lax.sub(pos, lo)
    if method == "lower":
        hi, w = lo, lax.full_like(w, 0)
    elif method == "higher":
        lo, w = lax.neg(lax.floor(lax.neg(pos))), lax.full_like(w, 0)
    elif method == "nearest":
        lo, w = ufuncs.round(pos), lax.full_like(w, 0)
    elif method == "midpoint":
        w = lax.select(lax.eq(w, _const(w, 0)), w, lax.full_like(w, 0.5))

    def pick(i):  # x at positions i (shape Q) along the last axis, Q moved to the front
        i = lax.convert_element_type(i, _int)
        if squash_nans:  # i: Q + rest, one position per slice
            i_rq = lax.transpose(i, tuple(range(q_nd, q_nd + len(rest))) + tuple(range(q_nd)))
            if not q_nd:
                i_rq = lax.expand_dims(i_rq, (len(rest),))
            v = indexing.take_along_axis(x, i_rq, axis=len(rest), mode="clip")
            if not q_nd:
                v = lax.squeeze(v, (len(rest),))
        else:
            v = indexing.take(x, i, axis=len(rest), mode="clip")
        return lax.transpose(v, tuple(range(len(rest), len(rest) + q_nd)) +
                             tuple(range(len(rest))))

    v_lo, v_hi = pick(lo), pick(hi)
    # w is per quantile (Q) or, when NaNs are squashed, per quantile and slice (Q + rest)
    w_nd, v_nd = len(shape_of(w)), len(shape_of(v_lo))
    w = lax.broadcast_in_dim(w, shape_of(v_lo), tuple(range(q_nd)) if w_nd == q_nd
                             else tuple(range(v_nd - w_nd, v_nd)))
    res = lax.add(lax.mul(v_lo, lax.sub(_const(w, 1), w)), lax.mul(v_hi, w))
    # quantile: a slice with a NaN is NaN; nanquantile: an all-NaN slice is
    has_nan = lax.broadcast_in_dim((all if squash_nans else any)(ufuncs.isnan(x), axis=-1),
                                   shape_of(res), tuple(range(q_nd, q_nd + len(rest))))
    res = lax.select(has_nan, lax.full_like(res, np.nan), res)
    if keepdims:
        full_shape = shape_of(q) + tuple(1 if d in axes else s for d, s in enumerate(shape_of(a)))
        res = lax.reshape(res, full_shape)
    return res


def percentile(a, q, axis=None, out=None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False):
    """The q-th percentiles (q in [0, 100]): `quantile(a, q / 100)`."""
    (q,) = promote_args_inexact("percentile", q)
    return quantile(a, lax.div(q, _const(q, 100)), axis, method=method, keepdims=keepdims)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median over `axis`: `quantile(a, 0.5)`."""
    return quantile(a, 0.5, axis, method="midpoint", keepdims=keepdims)


def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False):
    """`percentile` ignoring NaNs: `nanquantile(a, q / 100)`."""
    (q,) = promote_args_inexact("nanpercentile", q)
    return nanquantile(a, lax.div(q, _const(q, 100)), axis, method=method, keepdims=keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """`median` ignoring NaNs: `nanquantile(a, 0.5)` (NaN where a slice is all NaN)."""
    return nanquantile(a, 0.5, axis, method="midpoint", keepdims=keepdims)


# JAX: jax/_src/numpy/reductions.py nanvar
def nanvar(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """`var` over the non-NaN entries (NaN where fewer than ddof + 1 remain): complex input
    gives a real variance, integers the default float dtype, float16/bfloat16 compute in
    float32; `where` and `mean` as in `var`. JAX: jax/_src/numpy/reductions.py _nanvar."""
    a = _arraylike("nanvar", a)
    _check_where("nanvar", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanvar is not supported.")
    d, dtype = _var_promote_types(dtype_of(a), None if dtype is None else np.dtype(dtype))
    a = lax.convert_element_type(a, d)
    if mean is None:
        mean = nanmean(a, axis, dtype=d, keepdims=True, where=where)
    else:
        mean = lax.convert_element_type(asarray(mean), d)
    nan = ufuncs.isnan(a)
    centered = _where(nan, 0, lax.sub(a, mean))
    if dtypes.issubdtype(dtype_of(centered), np.complexfloating):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        centered = lax.square(centered)
    count = sum(lax.bitwise_not(nan), axis, keepdims=keepdims, where=where)
    count = ufuncs.subtract(count, ddof)  # jnp promotion, as JAX: a float ddof stays a float
    empty = lax.le(count, _const(count, 0))
    result = _where(empty, np.nan, sum(centered, axis, keepdims=keepdims, where=where))
    result = lax.div(result, lax.convert_element_type(_where(empty, 1, count),
                                                      dtype_of(result)))
    return lax.convert_element_type(result, dtype)


def nanstd(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """`std` over the non-NaN entries: `sqrt(nanvar(...))`."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanstd is not supported.")
    return lax.sqrt(nanvar(a, axis, dtype, ddof=ddof, keepdims=keepdims, where=where,
                           mean=mean))

