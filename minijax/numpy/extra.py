"""More of the `jax.numpy` surface, built only from `minijax.lax` and lax_numpy.py.

Elementwise functions (ufuncs), sorting and searching, cumulative and order-statistic
reductions, set operations, padding, splitting and stacking. Everything reduces to the
primitives in minijax/lax (no new primitive here), so jvp, vmap and jit come for free.
Mirrors jax/_src/numpy/{ufuncs,reductions,setops,lax_numpy}.py. Taught in chapters/01-numpy.md.

Functions whose output *shape* depends on input *values* (nonzero, flatnonzero, argwhere,
unique, one-argument where) need a concrete input, or JAX's static `size=` (then `fill_value`
pads the result); under tracing without `size` they raise ConcretizationTypeError, as JAX.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from minijax import core, dtypes
from minijax import lax
from minijax.array import Array
from minijax.core import Tracer
from minijax.custom_derivatives import custom_jvp
from minijax.lax import lax as lax_internal
from minijax.numpy import lax_numpy as _np
from minijax.numpy.lax_numpy import (
    _canonicalize_axis, _keepdims, _kind, _reduction_axes, _upcast_sum_dtype, asarray,
    broadcast_to, concatenate, isnan, promote_args,
    promote_args_inexact, promote_dtypes, promote_shapes, ravel, reshape, stack, where,
)

_const = lax_internal._const
_int = np.int32


def _shape(x) -> tuple[int, ...]:
    return core.get_aval(x).shape


def _dtype(x) -> np.dtype:
    return np.dtype(core.get_aval(x).dtype)


def _is_float(x) -> bool:
    return dtypes.is_float(_dtype(x))


# ---------------------------------------------------------------------------------------------
# Elementwise functions (jax/_src/numpy/ufuncs.py)
# ---------------------------------------------------------------------------------------------

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _keep_weak(out, like):
    """`out` weakly typed if `like` is: the lax compositions here mix in strong numpy constants,
    while JAX computes these with one primitive that keeps a Python scalar's weak type."""
    if core.get_aval(like).weak_type and not core.get_aval(out).weak_type:
        return lax.convert_element_type(out, _dtype(out), True)
    return out


def _unary_inexact(name, fn):
    def f(x):
        (x,) = promote_args_inexact(name, x)
        return _keep_weak(fn(x), x)
    f.__name__ = name
    f.__doc__ = (f"Elementwise `{name}` (jax.numpy.{name}): `T[...] -> T[...]`, integer "
                 "inputs promoted to the default float dtype.")
    return f


def _binary_inexact(name, fn):
    def f(x1, x2):
        x1, x2 = promote_args_inexact(name, x1, x2)
        return _keep_weak(fn(x1, x2), x1)
    f.__name__ = name
    f.__doc__ = (f"Elementwise `{name}` (jax.numpy.{name}) with JAX's promotion (to a float "
                 "dtype) and broadcasting.")
    return f


def _sinh(x):
    # (e^x - e^-x) / 2 as a difference of expm1s: no cancellation near 0
    return lax.mul(lax.sub(lax.expm1(x), lax.expm1(lax.neg(x))), _const(x, 0.5))


def _cosh(x):
    e = lax.exp(x)
    return lax.mul(lax.add(e, lax.div(_const(x, 1), e)), _const(x, 0.5))


def _arcsin(x):
    # 2 * atan2(x, 1 + sqrt(1 - x^2)), the half-angle form XLA's asin expands to
    one = _const(x, 1)
    root = lax.sqrt(lax.mul(lax.sub(one, x), lax.add(one, x)))
    return lax.mul(_const(x, 2), lax.atan2(x, lax.add(one, root)))


def _arccos(x):
    # 2 * atan2(sqrt(1 - x^2), 1 + x), and pi at x = -1 (XLA's acos expansion)
    one = _const(x, 1)
    root = lax.sqrt(lax.mul(lax.sub(one, x), lax.add(one, x)))
    out = lax.mul(_const(x, 2), lax.atan2(root, lax.add(one, x)))
    return lax.select(lax.ne(x, _const(x, -1)), out, lax.full_like(x, np.pi))


def _arcsinh(x):
    # odd, and log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) keeps accuracy near 0
    a = lax.abs(x)
    a2 = lax.mul(a, a)
    r = lax.log1p(lax.add(a, lax.div(a2, lax.add(_const(x, 1),
                                                 lax.sqrt(lax.add(_const(x, 1), a2))))))
    return lax.select(lax.lt(x, _const(x, 0)), lax.neg(r), r)


def _arccosh(x):
    one = _const(x, 1)
    return lax.log(lax.add(x, lax.sqrt(lax.mul(lax.sub(x, one), lax.add(x, one)))))


def _arctanh(x):
    return lax.mul(lax.log1p(lax.div(lax.mul(_const(x, 2), x), lax.sub(_const(x, 1), x))),
                   _const(x, 0.5))


tan = _unary_inexact("tan", lambda x: lax.div(lax.sin(x), lax.cos(x)))
arcsin = _unary_inexact("arcsin", _arcsin)
arccos = _unary_inexact("arccos", _arccos)
arctan = _unary_inexact("arctan", lambda x: lax.atan2(x, lax.full_like(x, 1)))
expm1 = _unary_inexact("expm1", lax.expm1)
asin, acos, atan = arcsin, arccos, arctan
sinh = _unary_inexact("sinh", _sinh)
cosh = _unary_inexact("cosh", _cosh)
arcsinh = _unary_inexact("arcsinh", _arcsinh)
arccosh = _unary_inexact("arccosh", _arccosh)
arctanh = _unary_inexact("arctanh", _arctanh)
asinh, acosh, atanh = arcsinh, arccosh, arctanh
exp2 = _unary_inexact("exp2", lambda x: lax.exp(lax.mul(x, _const(x, _LN2))))
log2 = _unary_inexact("log2", lambda x: lax.div(lax.log(x), _const(x, _LN2)))
log10 = _unary_inexact("log10", lambda x: lax.div(lax.log(x), _const(x, _LN10)))
deg2rad = _unary_inexact("deg2rad", lambda x: lax.mul(x, _const(x, np.pi / 180)))
rad2deg = _unary_inexact("rad2deg", lambda x: lax.mul(x, _const(x, 180 / np.pi)))
radians, degrees = deg2rad, rad2deg


def _cbrt(x):
    r = lax.pow(lax.abs(x), _const(x, 1 / 3))
    return lax.select(lax.lt(x, _const(x, 0)), lax.neg(r), r)


cbrt = _unary_inexact("cbrt", _cbrt)


def _hypot(x1, x2):
    # scaled so that squaring cannot overflow: a * sqrt(1 + (b/a)^2) with a = max(|x1|, |x2|)
    a1, a2 = lax.abs(x1), lax.abs(x2)
    hi, lo = lax.max(a1, a2), lax.min(a1, a2)
    zero = lax.eq(hi, _const(hi, 0))
    safe = lax.select(zero, lax.full_like(hi, 1), hi)
    r = lax.div(lo, safe)
    out = lax.mul(hi, lax.sqrt(lax.add(_const(r, 1), lax.mul(r, r))))
    return lax.select(zero, lax.full_like(hi, 0), out)


# JAX: jax/_src/lax/other.py logaddexp — same custom_jvp: d/dx1 = exp(x1 - out), which
# splits a tie evenly and stays finite where the formula's abs() has a kink
@custom_jvp
def _logaddexp(x1, x2):
    x1, x2 = broadcast_arrays(x1, x2)
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    out = lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), out)  # inf - inf, NaN inputs


@_logaddexp.defjvp
def _logaddexp_jvp(primals, tangents):
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)
    d1 = lax.mul(t1, lax.exp(lax.sub(x1, out)))
    d2 = lax.mul(t2, lax.exp(lax.sub(x2, out)))
    return out, where(isnan(out), out, lax.add(d1, d2))


def _heaviside(x1, x2):
    zero = _np.zeros_like(x1)
    at_zero = where(isnan(x1), x1, x2)  # NaN stays NaN
    return where(lax.lt(x1, zero), zero, where(lax.gt(x1, zero), _np.ones_like(x1), at_zero))


hypot = _binary_inexact("hypot", _hypot)
arctan2 = _binary_inexact("arctan2", lax.atan2)
atan2 = arctan2
logaddexp = _binary_inexact("logaddexp", _logaddexp)
heaviside = _binary_inexact("heaviside", _heaviside)


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2), computed stably (jax.numpy.logaddexp2)."""
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    ln2 = _const(x1, _LN2)
    return _keep_weak(lax.div(_logaddexp(lax.mul(x1, ln2), lax.mul(x2, ln2)), ln2), x1)


def fmax(x1, x2):
    """Elementwise maximum that ignores NaNs (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmax", x1, x2)
    return where(lax.bitwise_or(lax.gt(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """Elementwise minimum that ignores NaNs (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmin", x1, x2)
    return where(lax.bitwise_or(lax.lt(x1, x2), isnan(x2)), x1, x2)


def positive(x):
    """`+x` (jax.numpy.positive): the same dtype."""
    (x,) = promote_args("positive", x)
    return asarray(x)


def float_power(x, y):
    """x ** y computed in the default float dtype (float32 with x64 off)."""
    x, y = promote_args_inexact("float_power", x, y)
    return lax.pow(x, y)


def signbit(x):
    """bool[...]: True where the sign bit of `x` is set (also for -0.0 and -NaN)."""
    (x,) = promote_args("signbit", x)
    d = _dtype(x)
    if d.kind in "iu":
        return lax.lt(x, _const(x, 0))
    if d.kind == "b":
        return lax.full_like(x, False, np.bool_)
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[d.itemsize]
    flat = lax.reshape(x, (int(np.prod(_shape(x), dtype=np.int64)),))
    bits = lax.reshape(lax.bitcast_convert_type(flat, int_type), _shape(x))
    return lax.lt(bits, np.array(0, int_type))


def copysign(x1, x2):
    """|x1| with the sign of x2 (float result)."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    a = lax.abs(x1)
    return _keep_weak(where(signbit(x2), lax.neg(a), a), x1)


def real(val):
    """The real part (`lax.real`); `val` itself for a real array."""
    val = asarray(val)
    return lax.real(val) if iscomplexobj(val) else val


def imag(val):
    """The imaginary part (`lax.imag`); zeros for a real array."""
    val = asarray(val)
    return lax.imag(val) if iscomplexobj(val) else lax.full_like(val, 0)


def conjugate(x):
    """The complex conjugate (`lax.conj`); `x` itself for a real array."""
    x = asarray(x)
    return lax.conj(x) if iscomplexobj(x) else x


conj = conjugate


def isinf(x):
    """bool[...]: True where x is +inf or -inf (always False for ints and bools)."""
    x = asarray(x)
    if not _is_float(x):
        return lax.full_like(x, False, np.bool_)
    return lax.eq(lax.abs(x), _const(x, np.inf))


def isposinf(x, /, out=None):
    x = asarray(x)
    if not _is_float(x):
        return lax.full_like(x, False, np.bool_)
    return lax.eq(x, _const(x, np.inf))


def isneginf(x, /, out=None):
    x = asarray(x)
    if not _is_float(x):
        return lax.full_like(x, False, np.bool_)
    return lax.eq(x, _const(x, -np.inf))


def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's max), -inf -> `neginf` (default:
    its min). Integer and bool inputs are returned unchanged."""
    x = asarray(x)
    if not _is_float(x):
        return x
    info = dtypes.finfo(_dtype(x))
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(isnan(x), lax.full_like(x, nan), x)
    out = where(isposinf(x), lax.full_like(x, posinf), out)
    return where(isneginf(x), lax.full_like(x, neginf), out)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """bool[...]: |a - b| <= atol + rtol * |b| (infinities equal only to themselves); for
    integer and bool inputs, equality."""
    a, b = promote_args("isclose", a, b)
    if not _is_float(a):
        return lax.eq(a, b)
    rtol, atol = lax.convert_element_type(rtol, _dtype(a)), lax.convert_element_type(
        atol, _dtype(a))
    close = lax.le(lax.abs(lax.sub(a, b)),
                   lax.add(atol, lax.mul(rtol, lax.abs(b))))
    a_inf, b_inf = isinf(a), isinf(b)
    any_inf = lax.bitwise_or(a_inf, b_inf)
    both_inf = lax.bitwise_and(lax.bitwise_and(a_inf, b_inf), lax.eq(a, b))
    out = lax.select(any_inf, both_inf, lax.bitwise_and(close, lax.bitwise_not(any_inf)))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """bool[]: whether `isclose` holds everywhere."""
    return all(isclose(a, b, rtol, atol, equal_nan))


def _round_half_even(x):
    f = lax.floor(x)
    diff = lax.sub(x, f)
    half = _const(x, 0.5)
    up = lax.add(f, _const(x, 1))
    f_even = lax.eq(lax.rem(f, _const(x, 2)), _const(x, 0))
    tie = lax.select(f_even, f, up)
    return lax.select(lax.gt(diff, half), up, lax.select(lax.lt(diff, half), f, tie))


def round(a, decimals: int = 0, out=None):
    """Round to `decimals` decimal places, ties to even (numpy's rule). Integer inputs are
    returned unchanged for decimals >= 0 (NotImplementedError for decimals < 0, as JAX)."""
    (a,) = promote_args("round", a)
    if not _is_float(a):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return asarray(a)
    if decimals == 0:
        return _keep_weak(_round_half_even(a), a)
    factor = _const(a, 10.0 ** decimals)
    return _keep_weak(lax.div(_round_half_even(lax.mul(a, factor)), factor), a)


around = round


def trunc(x):
    """Round toward zero (ints unchanged)."""
    (x,) = promote_args("trunc", x)
    if not _is_float(x):
        return asarray(x)
    fl = lax.floor(x)
    ce = lax.neg(lax.floor(lax.neg(x)))
    return lax.select(lax.lt(x, _const(x, 0)), ce, fl)



def logical_xor(x1, x2):
    """bool[...]: x1 != x2 as truth values."""
    x1, x2 = promote_shapes("logical_xor", lax.convert_element_type(x1, np.bool_),
                            lax.convert_element_type(x2, np.bool_))
    return lax.bitwise_xor(x1, x2)


def bitwise_xor(x1, x2):
    """Bitwise xor of ints (logical xor of bools)."""
    x1, x2 = promote_args("bitwise_xor", x1, x2)
    return lax.bitwise_xor(x1, x2)


def _bool_to_int(*args):
    # bools take part in shifts and fmod as the default int (JAX's result dtype)
    return [lax.convert_element_type(a, dtypes.default_int_dtype()) if _kind(a) == "b" else a
            for a in args]


def left_shift(x, y):
    """x << y for integers (bools as the default int)."""
    x, y = _bool_to_int(*promote_args("left_shift", x, y))
    return lax.shift_left(x, y)


def right_shift(x1, x2):
    """x1 >> x2 for integers: arithmetic for signed, logical for unsigned (as numpy)."""
    x1, x2 = _bool_to_int(*promote_args("right_shift", x1, x2))
    if _kind(x1) == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
bitwise_not = bitwise_invert = _np.invert
pow = _np.power


def fabs(x):
    """|x| as a float (integer inputs promoted to the default float dtype)."""
    (x,) = promote_args_inexact("fabs", x)
    return lax.abs(x)


def fmod(x1, x2):
    """C's remainder: x1 - trunc(x1 / x2) * x2, with the sign of x1 (lax.rem)."""
    x1, x2 = _bool_to_int(*promote_args("fmod", x1, x2))
    return lax.rem(x1, x2)


def divmod(x1, x2):
    """`(floor_divide(x1, x2), remainder(x1, x2))`."""
    return _np.floor_divide(x1, x2), _np.remainder(x1, x2)


# ---------------------------------------------------------------------------------------------
# Reductions (jax/_src/numpy/reductions.py)
# ---------------------------------------------------------------------------------------------

def _tree_reduce(x, axes, op, identity):
    """Reduce `axes` of `x` with a binary `op` by halving the (padded) axis: log2(n) steps of
    elementwise `op` (minijax has no reduce_prod primitive)."""
    shape = _shape(x)
    rest = [d for d in range(len(shape)) if d not in axes]
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    x = lax.transpose(x, tuple(rest) + tuple(axes))
    x = lax.reshape(x, tuple(shape[d] for d in rest) + (n,))
    if n == 0:
        return lax.full(tuple(shape[d] for d in rest), identity, _dtype(x))
    size = 1 << (n - 1).bit_length()
    if size != n:
        x = lax.pad(x, _const(x, identity), [(0, 0, 0)] * len(rest) + [(0, size - n, 0)])
    while size > 1:
        size //= 2
        lo = lax.slice(x, (0,) * (len(rest) + 1), _shape(x)[:-1] + (size,))
        hi = lax.slice(x, (0,) * len(rest) + (size,), _shape(x))
        x = op(lo, hi)
    return lax.squeeze(x, (len(rest),))


def _where_fill(a, where_, fill):
    return a if where_ is None else _np.where(where_, a, lax.full_like(a, fill))


def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
         where=None, promote_integers: bool = True):
    """Product over `axis` (None: all). Bools and small ints multiply in the default int
    dtype, as `sum` (unless `promote_integers=False`). `initial` multiplies in; `where` masks
    entries (they count as 1)."""
    a = asarray(a)
    axes = _reduction_axes(a, axis)
    if dtype is None:
        d = _upcast_sum_dtype(_dtype(a)) if promote_integers else _dtype(a)
    else:
        d = dtype
    a = _where_fill(lax.convert_element_type(a, d), where, 1)
    out_ = _tree_reduce(a, axes, lax.mul, 1)
    if initial is not None:
        out_ = lax.mul(out_, lax.convert_element_type(initial, d))
    return _keepdims(out_, axes, keepdims)


def any(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """bool: whether any entry over `axis` is true (nonzero)."""
    a = lax.convert_element_type(asarray(a), np.bool_)
    axes = _reduction_axes(a, axis)
    a = _where_fill(a, where, False)
    return _keepdims(lax.reduce_max(a, axes), axes, keepdims)


def all(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """bool: whether every entry over `axis` is true (nonzero)."""
    a = lax.convert_element_type(asarray(a), np.bool_)
    axes = _reduction_axes(a, axis)
    a = _where_fill(a, where, True)
    return _keepdims(lax.reduce_min(a, axes), axes, keepdims)


def count_nonzero(a, axis=None, keepdims: bool = False):
    """int32: the number of nonzero entries over `axis`."""
    a = asarray(a)
    nz = lax.ne(a, _const(a, 0))
    return _np.sum(nz, axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


def ptp(a, axis=None, out=None, keepdims: bool = False):
    """Peak to peak: max - min over `axis`."""
    return _np.subtract(_np.max(a, axis, keepdims=keepdims), _np.min(a, axis, keepdims=keepdims))


def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """`sum` with NaNs counted as zero."""
    a = asarray(a)
    if _is_float(a):
        a = where(isnan(a), lax.full_like(a, 0), a)
    return _np.sum(a, axis, dtype, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """`prod` with NaNs counted as one."""
    a = asarray(a)
    if _is_float(a):
        a = where(isnan(a), lax.full_like(a, 1), a)
    return prod(a, axis, dtype, keepdims=keepdims)


def _nan_extreme(reducer, fill):
    def f(a, axis=None, out=None, keepdims: bool = False):
        a = asarray(a)
        if not _is_float(a):
            return reducer(a, axis, keepdims=keepdims)
        nan_mask = isnan(a)
        out_ = reducer(where(nan_mask, lax.full_like(a, fill), a), axis, keepdims=keepdims)
        all_nan = all(nan_mask, axis, keepdims=keepdims)
        return where(all_nan, lax.full_like(out_, np.nan), out_)
    return f


nanmax = _nan_extreme(_np.max, -np.inf)
nanmax.__doc__ = "`max` ignoring NaNs (NaN where a slice is all NaN)."
nanmin = _nan_extreme(_np.min, np.inf)
nanmin.__doc__ = "`min` ignoring NaNs (NaN where a slice is all NaN)."


def _nan_cumulative(fn, fill):
    def f(a, axis=None, dtype=None, out=None):
        a = asarray(a)
        if _is_float(a):
            a = where(isnan(a), lax.full_like(a, fill), a)
        return fn(a, axis, dtype)
    return f


def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """`mean` over the non-NaN entries (NaN where there are none)."""
    a = asarray(a)
    if not _is_float(a):
        return _np.mean(a, axis, dtype, keepdims=keepdims)
    total = nansum(a, axis, dtype, keepdims=keepdims)
    count = _np.sum(lax.bitwise_not(isnan(a)), axis, dtype=_dtype(total), keepdims=keepdims)
    return lax.div(total, count)


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean over `axis`: sum(a * w) / sum(w) (w broadcast along `axis` when 1-D).
    With `returned`, also the sum of weights. Plain `mean` when weights is None."""
    a = asarray(a)
    if weights is None:
        avg = _np.mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        axes = _reduction_axes(a, axis)
        n = int(np.prod([_shape(a)[i] for i in axes], dtype=np.int64))
        return avg, lax.full_like(avg, n)
    a, weights = promote_dtypes(a, asarray(weights))
    if not _is_float(a):
        f = dtypes.default_float_dtype()
        a, weights = lax.convert_element_type(a, f), lax.convert_element_type(weights, f)
    if _shape(weights) != _shape(a):
        if axis is None or core.get_aval(weights).ndim != 1:
            raise ValueError("Axis must be specified when shapes of a and weights differ, and "
                             "weights must then be 1-D.")
        ax = _canonicalize_axis(axis, core.get_aval(a).ndim)
        if _shape(weights)[0] != _shape(a)[ax]:
            raise ValueError("Length of weights not compatible with specified axis.")
        weights = lax.broadcast_in_dim(weights, _shape(a), (ax,))
    wsum = _np.sum(weights, axis, keepdims=keepdims)
    avg = lax.div(_np.sum(lax.mul(a, weights), axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


# ---------------------------------------------------------------------------------------------
# Cumulative reductions
# ---------------------------------------------------------------------------------------------

def _cumulative(name, combine, identity):
    def f(a, axis=None, dtype=None, out=None):
        a = asarray(a)
        if axis is None:
            a, axis = ravel(a), 0
        axis = _canonicalize_axis(axis, core.get_aval(a).ndim)
        if dtype is None:  # only bools are promoted (to the default int), unlike sum
            dtype = dtypes.default_int_dtype() if _kind(a) == "b" else _dtype(a)
        return combine(lax.convert_element_type(a, dtype), axis)
    f.__name__ = name
    return f


cumsum = _cumulative("cumsum", lambda a, axis: lax.cumsum(a, axis), 0)
cumsum.__doc__ = """Running sum along `axis` (None: the flattened array). Bools accumulate in
the default int dtype, other dtypes in their own (as JAX). `T[...] -> T[...]`."""
cumprod = _cumulative("cumprod", lambda a, axis: lax.cumprod(a, axis), 1)
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
        axis = _canonicalize_axis(axis, nd)
        out_ = fn(x, axis, dtype)
        if include_initial:
            pad = [(0, 0, 0)] * nd
            pad[axis] = (1, 0, 0)
            out_ = lax.pad(out_, _const(out_, identity), pad)
        return out_
    return f


nancumsum = _nan_cumulative(cumsum, 0)
nancumsum.__doc__ = "`cumsum` with NaNs counted as zero."
nancumprod = _nan_cumulative(cumprod, 1)
nancumprod.__doc__ = "`cumprod` with NaNs counted as one."
cumulative_sum = _cumulative_include(cumsum, 0)
cumulative_sum.__doc__ = "jax.numpy.cumulative_sum: `cumsum` with `include_initial` (a leading 0)."
cumulative_prod = _cumulative_include(cumprod, 1)
cumulative_prod.__doc__ = "jax.numpy.cumulative_prod: `cumprod` with `include_initial` (a 1)."


def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (`a[1:] - a[:-1]`, n times; bools use !=).
    `prepend`/`append` are joined to `a` first (scalars broadcast). Shape loses n on axis."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional; got a scalar")
    axis = _canonicalize_axis(axis, nd)
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            continue
        extra = asarray(extra)
        if core.get_aval(extra).ndim == 0:
            shape = list(_shape(a))
            shape[axis] = 1
            extra = broadcast_to(extra, tuple(shape))
        parts.append(extra)
    if prepend is not None or append is not None:
        pieces = ([parts.pop(0)] if prepend is not None else []) + [a] + parts
        a = concatenate(pieces, axis)
    for _ in range(n):
        m = _shape(a)[axis]
        hi = _slice_axis(a, axis, 1, m)
        lo = _slice_axis(a, axis, 0, _builtins_max(m - 1, 0))
        a = lax.ne(hi, lo) if _kind(a) == "b" else lax.sub(hi, lo)
    return a


_builtins_max, _builtins_min = builtins.max, builtins.min


def _slice_axis(a, axis: int, start: int, stop: int, stride: int = 1):
    shape = _shape(a)
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, stop, stride
    return lax.slice(a, starts, limits, None if stride == 1 else strides)


# ---------------------------------------------------------------------------------------------
# Sorting and searching
# ---------------------------------------------------------------------------------------------

def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """`a` sorted along `axis` (None: the flattened array); NaNs last. Stable."""
    if order is not None:
        raise ValueError("'order' argument to sort is not supported.")
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _canonicalize_axis(axis, core.get_aval(a).ndim)
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
        a, axis = ravel(a), 0
    axis = _canonicalize_axis(axis, core.get_aval(a).ndim)
    if descending:
        a = lax.rev(a, (axis,))
    iota = lax.broadcasted_iota(_int, _shape(a), axis)
    _, idx = lax.sort_key_val(a, iota, axis, is_stable=stable)
    if descending:
        idx = lax.sub(np.array(_shape(a)[axis] - 1, _int), lax.rev(idx, (axis,)))
    return idx


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
        a = take(a, sorter)
    a, v = promote_dtypes(a, v)
    v_e = lax.expand_dims(v, (core.get_aval(v).ndim,))
    a_b = lax.broadcast_in_dim(a, _shape(v) + _shape(a), (core.get_aval(v).ndim,))
    v_b = broadcast_to(v_e, _shape(v) + _shape(a))
    hit = lax.lt(a_b, v_b) if side == "left" else lax.le(a_b, v_b)
    return _np.sum(hit, axis=-1, dtype=_int)


def digitize(x, bins, right: bool = False):
    """int32 index of the bin of each x (bins monotonic, increasing or decreasing)."""
    x, bins = asarray(x), asarray(bins)
    if core.get_aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    n = _shape(bins)[0]
    if n == 0:
        return lax.full_like(x, 0, _int)
    side = "left" if right else "right"
    up = searchsorted(bins, x, side)
    down = lax.sub(np.array(n, _int), searchsorted(lax.rev(bins, (0,)), x, side))
    increasing = lax.ge(_np._rewriting_take(bins, -1), _np._rewriting_take(bins, 0))
    return where(increasing, up, down)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) (xp increasing, 1-D) at `x`;
    outside [xp[0], xp[-1]] the value is `left`/`right` (default fp[0]/fp[-1]). Float result.
    `period` raises NotImplementedError."""
    if period is not None:
        raise NotImplementedError("minijax.numpy.interp: period is not supported")
    x, xp, fp = promote_dtypes(asarray(x), asarray(xp), asarray(fp))
    if not _is_float(x):
        f = dtypes.default_float_dtype()
        x, xp, fp = (lax.convert_element_type(v, f) for v in (x, xp, fp))
    if core.get_aval(xp).ndim != 1 or _shape(xp) != _shape(fp):
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    n = _shape(xp)[0]
    i = _np.clip(searchsorted(xp, x, side="right"), 1, n - 1)
    i0 = lax.sub(i, np.array(1, _int))
    xp0, xp1, fp0, fp1 = take(xp, i0), take(xp, i), take(fp, i0), take(fp, i)
    dx, df = lax.sub(xp1, xp0), lax.sub(fp1, fp0)
    dx0 = lax.le(lax.abs(dx), _const(dx, np.spacing(dtypes.finfo(_dtype(dx)).eps)))
    safe_dx = lax.select(dx0, lax.full_like(dx, 1), dx)
    out_ = lax.select(dx0, fp0, lax.add(fp0, lax.mul(lax.div(lax.sub(x, xp0), safe_dx), df)))
    lo = _np._rewriting_take(fp, 0) if left is None else left
    hi = _np._rewriting_take(fp, -1) if right is None else right
    out_ = where(lax.lt(x, _np._rewriting_take(xp, 0)), lo, out_)
    return where(lax.gt(x, _np._rewriting_take(xp, -1)), hi, out_)


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto"):
    """bool[element.shape]: whether each entry of `element` is in `test_elements` (one
    comparison of every pair)."""
    element, test = promote_dtypes(asarray(element), ravel(asarray(test_elements)))
    nd = core.get_aval(element).ndim
    shape = _shape(element) + _shape(test)
    eq = lax.eq(lax.broadcast_in_dim(element, shape, tuple(range(nd))),
                lax.broadcast_in_dim(test, shape, (nd,)))
    out_ = any(eq, axis=-1) if _shape(test)[0] else lax.full(_shape(element), False, np.bool_)
    return lax.bitwise_not(out_) if invert else out_


def _nan_arg(fn, fill):
    def f(a, axis=None, out=None, keepdims: bool = False):
        a = asarray(a)
        if _is_float(a):
            a = where(isnan(a), lax.full_like(a, fill), a)
        return fn(a, axis, keepdims=keepdims)
    return f


nanargmax = _nan_arg(_np.argmax, -np.inf)
nanargmax.__doc__ = "`argmax` ignoring NaNs."
nanargmin = _nan_arg(_np.argmin, np.inf)
nanargmin.__doc__ = "`argmin` ignoring NaNs."


# ---------------------------------------------------------------------------------------------
# Indexing helpers
# ---------------------------------------------------------------------------------------------

def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """`a` at `indices` along `axis` (None: of the flattened `a`): shape
    `a.shape[:axis] + indices.shape + a.shape[axis+1:]`. Negative indices wrap; out-of-range
    ones give `fill_value` (default mode "fill": NaN for floats, the minimum for signed ints)
    or, with mode "clip", are clamped. One gather (minijax/numpy/indexing.py)."""
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _canonicalize_axis(axis, core.get_aval(a).ndim)
    if mode is None:
        mode = "fill"
    if mode == "wrap":
        indices = _np.remainder(asarray(indices), _shape(a)[axis])
        mode = "clip"
    if mode not in ("fill", "clip", "promise_in_bounds", "drop"):
        raise ValueError(f"Invalid mode value: {mode!r}")
    from minijax.numpy import indexing
    index = (builtins.slice(None),) * axis + (asarray(indices),)
    return indexing.advanced_take(a, index, mode, fill_value)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The diagonal `offset` of the 2-D slices over (axis1, axis2), moved to the last axis:
    `T[..., k]`. A strided slice of the flattened (axis1, axis2) block."""
    a = asarray(a)
    nd = core.get_aval(a).ndim
    if nd < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    a1, a2 = _canonicalize_axis(axis1, nd), _canonicalize_axis(axis2, nd)
    if a1 == a2:
        raise ValueError("axis1 and axis2 must not be equal")
    rest = [d for d in range(nd) if d not in (a1, a2)]
    a = lax.transpose(a, tuple(rest) + (a1, a2))
    *lead, n, m = _shape(a)
    offset = int(offset)
    k = _builtins_max(0, _builtins_min(n, m - offset) if offset >= 0 else
                      _builtins_min(n + offset, m))
    flat = lax.reshape(a, tuple(lead) + (n * m,))
    if k == 0:
        return lax.full(tuple(lead) + (0,), 0, _dtype(a))
    start = offset if offset >= 0 else -offset * m
    return _slice_axis(flat, len(lead), start, start + (k - 1) * (m + 1) + 1, m + 1)


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """Sum of the diagonal `offset` (over axis1, axis2); small ints sum in the default int."""
    return _np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k: int = 0):
    """1-D `v` -> the 2-D array with `v` on diagonal `k`; 2-D `v` -> its diagonal `k`."""
    v = asarray(v)
    nd = core.get_aval(v).ndim
    if nd == 2:
        return diagonal(v, k)
    if nd != 1:
        raise ValueError("diag input must be 1d or 2d")
    n = _shape(v)[0] + builtins.abs(int(k))
    v = lax.pad(v, _const(v, 0), [(0, n - _shape(v)[0], 0)])
    rows = lax.broadcasted_iota(_int, (n, n), 0)
    cols = lax.broadcasted_iota(_int, (n, n), 1)
    mask = lax.eq(lax.sub(cols, rows), np.array(k, _int))
    vals = lax.broadcast_in_dim(v, (n, n), (0,) if k >= 0 else (1,))
    return lax.select(mask, vals, lax.full_like(vals, 0))


def _tri_mask(shape, k, lower: bool):
    rows = lax.broadcasted_iota(_int, shape[-2:], 0)
    cols = lax.broadcasted_iota(_int, shape[-2:], 1)
    diff_ = lax.sub(cols, rows)
    k = np.array(int(k), _int)
    mask = lax.le(diff_, k) if lower else lax.ge(diff_, k)
    return lax.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))


def tril(m, k: int = 0):
    """`m` with entries above diagonal `k` zeroed (over the last two axes)."""
    m = asarray(m)
    if core.get_aval(m).ndim < 2:
        raise ValueError("Argument to jax.numpy.tril must be at least 2D")
    return lax.select(_tri_mask(_shape(m), k, True), m, lax.full_like(m, 0))


def triu(m, k: int = 0):
    """`m` with entries below diagonal `k` zeroed (over the last two axes)."""
    m = asarray(m)
    if core.get_aval(m).ndim < 2:
        raise ValueError("Argument to jax.numpy.triu must be at least 2D")
    return lax.select(_tri_mask(_shape(m), k, False), m, lax.full_like(m, 0))


# ---------------------------------------------------------------------------------------------
# Shape manipulation
# ---------------------------------------------------------------------------------------------

def flip(m, axis=None):
    """`m` reversed along `axis` (None: every axis)."""
    m = asarray(m)
    axes = _reduction_axes(m, axis)
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
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1:
        shifts = tuple(shifts) * len(axes)
    if len(axes) == 1:
        axes = tuple(axes) * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("Inconsistent lengths of shift and axis")
    for s, ax in zip(shifts, axes):
        ax = _canonicalize_axis(ax, core.get_aval(a).ndim)
        n = _shape(a)[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            doubled = concatenate([a, a], ax)
            start = _np.remainder(lax.neg(lax.convert_element_type(s, _int)), n)
            starts = [np.int32(0)] * core.get_aval(a).ndim
            starts[ax] = start
            a = lax.dynamic_slice(doubled, starts, _shape(a))
        else:
            s = int(s) % n
            if s:
                a = concatenate([_slice_axis(a, ax, n - s, n), _slice_axis(a, ax, 0, n - s)], ax)
    return a


def tile(A, reps):
    """`A` repeated `reps[i]` times along each axis (A promoted to len(reps) dims, or reps
    padded with leading 1s)."""
    A = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    nd = core.get_aval(A).ndim
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (len(reps) - nd) + _shape(A)
    A = lax.reshape(A, shape)
    big = tuple(x for r, s in zip(reps, shape) for x in (r, s))
    A = lax.broadcast_in_dim(A, big, tuple(range(1, 2 * len(shape), 2)))
    return lax.reshape(A, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Each element of `a` repeated along `axis` (None: flattened): `repeats` an int, or a
    concrete sequence with one count per element (a traced `repeats` is not supported)."""
    a = asarray(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _canonicalize_axis(axis, core.get_aval(a).ndim)
    shape = _shape(a)
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
        out_ = take(a, idx, axis, mode="clip")
    if total_repeat_length is not None and _shape(out_)[axis] != total_repeat_length:
        raise ValueError(f"repeat: total_repeat_length={total_repeat_length} does not match "
                         f"the {_shape(out_)[axis]} repeated elements")
    return out_


def atleast_1d(*arys):
    """Each input with at least one dimension (a list when several are given)."""
    outs = [reshape(asarray(a), (1,)) if core.get_aval(asarray(a)).ndim == 0 else asarray(a)
            for a in arys]
    return outs[0] if len(outs) == 1 else outs


def atleast_2d(*arys):
    """Each input with at least two dimensions (`(n,) -> (1, n)`)."""
    outs = []
    for a in arys:
        a = asarray(a)
        nd = core.get_aval(a).ndim
        outs.append(a if nd >= 2 else lax.reshape(a, (1,) * (2 - nd) + _shape(a)))
    return outs[0] if len(outs) == 1 else outs


def atleast_3d(*arys):
    """Each input with at least three dimensions (`(n,) -> (1, n, 1)`, `(m, n) -> (m, n, 1)`)."""
    outs = []
    for a in arys:
        a = asarray(a)
        nd = core.get_aval(a).ndim
        if nd == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif nd == 1:
            a = lax.reshape(a, (1,) + _shape(a) + (1,))
        elif nd == 2:
            a = lax.reshape(a, _shape(a) + (1,))
        outs.append(a)
    return outs[0] if len(outs) == 1 else outs


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
        arrs.append(lax.reshape(a, (_shape(a)[0] if nd else 1, 1)) if nd < 2 else a)
    return concatenate(arrs, 1)


def append(arr, values, axis: int | None = None):
    """`arr` with `values` joined at the end of `axis` (None: both flattened)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _split(name, ary, indices_or_sections, axis: int, exact: bool):
    ary = asarray(ary)
    axis = _canonicalize_axis(axis, core.get_aval(ary).ndim)
    n = _shape(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if exact and n % k:
            raise ValueError("array split does not result in an equal division")
        size, extra = builtins.divmod(n, k)
        bounds = np.cumsum([0] + [size + 1] * extra + [size] * (k - extra)).tolist()
    else:
        idx = [int(i) for i in np.asarray(indices_or_sections).reshape(-1)]
        bounds = [0] + [_builtins_min(_builtins_max(i if i >= 0 else i + n, 0), n)
                        for i in idx] + [n]
    return [_slice_axis(ary, axis, lo, _builtins_max(lo, hi))
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
    shape = [_shape(x)[0] for x in xi]
    if indexing == "xy" and len(xi) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    outs = []
    for i, x in enumerate(xi):
        dim = 1 - i if indexing == "xy" and i < 2 and len(xi) >= 2 else i
        s = [1] * len(xi) if sparse else list(shape)
        s[dim] = _shape(x)[0]
        outs.append(lax.broadcast_in_dim(x, tuple(s), (dim,)))
    return outs


def broadcast_shapes(*shapes):
    """The numpy broadcast of `shapes` (ValueError if incompatible)."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(
            (s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}") from None


def broadcast_arrays(*args):
    """All `args` broadcast to their common shape (a list)."""
    args = [asarray(a) for a in args]
    shape = broadcast_shapes(*(_shape(a) for a in args))
    return [broadcast_to(a, shape) for a in args]


def pad(array, pad_width, mode: str = "constant", **kwargs):
    """`array` padded by `pad_width` (an int, a (before, after) pair, or one pair per axis).

    Modes: "constant" (`constant_values`, default 0: one lax.pad), "edge", "reflect",
    "symmetric", "wrap" (one gather per padded axis, whose static index map is numpy's pad of
    `arange(n)`; reflect_type "even" only). Other modes raise NotImplementedError."""
    array = asarray(array)
    nd = core.get_aval(array).ndim
    pw = np.broadcast_to(np.asarray(pad_width, np.int64).reshape(
        (-1, 2) if np.ndim(pad_width) > 0 and np.shape(pad_width)[-1] == 2 else (-1, 1)),
        (nd, 2)) if nd else np.zeros((0, 2), np.int64)
    if (pw < 0).any():
        raise ValueError("index can't contain negative values")
    if mode == "constant":
        cv = np.asarray(kwargs.get("constant_values", 0)) if not isinstance(
            kwargs.get("constant_values", 0), (Tracer, Array)) else kwargs["constant_values"]
        if isinstance(cv, np.ndarray) and cv.ndim:
            cvs = np.broadcast_to(cv.reshape((-1, 2) if cv.shape[-1] == 2 else (-1, 1)), (nd, 2))
            for ax in range(nd):
                for side in (0, 1):
                    cfg = [(0, 0, 0)] * nd
                    cfg[ax] = (int(pw[ax, 0]), 0, 0) if side == 0 else (0, int(pw[ax, 1]), 0)
                    array = lax.pad(array, lax.convert_element_type(cvs[ax, side], _dtype(array)),
                                    cfg)
            return array
        value = lax.convert_element_type(cv, _dtype(array))
        return lax.pad(array, value, [(int(b), int(a), 0) for b, a in pw])
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise NotImplementedError(f"minijax.numpy.pad: mode {mode!r} is not supported")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("minijax.numpy.pad: only reflect_type='even'")
    for ax in range(nd):
        before, after = int(pw[ax, 0]), int(pw[ax, 1])
        if before == after == 0:
            continue
        n = _shape(array)[ax]
        if n == 0:
            raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant'")
        idx = np.pad(np.arange(n), (before, after), mode=mode).astype(_int)
        array = take(array, idx, ax, mode="clip")
    return array


# ---------------------------------------------------------------------------------------------
# Order statistics
# ---------------------------------------------------------------------------------------------

def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False):
    """The q-th quantiles (q in [0, 1], any shape Q) over `axis`: `T[Q + reduced shape]`.

    Sorts along the axis, then interpolates between the neighbours of position q * (n - 1)
    (method "linear"; also "lower", "higher", "nearest", "midpoint"). Integer inputs give the
    default float dtype; a slice containing NaN gives NaN."""
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"method can only be 'linear', 'lower', 'higher', 'midpoint', or "
                         f"'nearest'. Got {method}.")
    a, q = promote_dtypes(asarray(a), asarray(q))
    if not _is_float(a):
        a, q = (lax.convert_element_type(x, dtypes.default_float_dtype()) for x in (a, q))
    if core.get_aval(q).ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {_shape(q)}")
    nd = core.get_aval(a).ndim
    axes = _reduction_axes(a, axis)
    rest = [d for d in range(nd) if d not in axes]
    n = int(np.prod([_shape(a)[d] for d in axes], dtype=np.int64))
    x = lax.transpose(a, tuple(rest) + tuple(axes))
    x = lax.reshape(x, tuple(_shape(a)[d] for d in rest) + (n,))
    x = lax.sort(x, len(rest))
    pos = lax.mul(q, _const(q, n - 1))
    lo = lax.floor(pos)
    hi = lax.min(lax.add(lo, _const(lo, 1)), _const(lo, n - 1))
    w = lax.sub(pos, lo)
    if method == "lower":
        hi, w = lo, lax.full_like(w, 0)
    elif method == "higher":
        lo, w = lax.neg(lax.floor(lax.neg(pos))), lax.full_like(w, 0)
    elif method == "nearest":
        lo, w = _round_half_even(pos), lax.full_like(w, 0)
    elif method == "midpoint":
        w = lax.select(lax.eq(w, _const(w, 0)), w, lax.full_like(w, 0.5))
    q_nd = core.get_aval(q).ndim

    def pick(i):  # x at positions i (shape Q) along the last axis, Q moved to the front
        v = take(x, lax.convert_element_type(i, _int), axis=len(rest), mode="clip")
        return lax.transpose(v, tuple(range(len(rest), len(rest) + q_nd)) +
                             tuple(range(len(rest))))

    v_lo, v_hi = pick(lo), pick(hi)
    w = lax.broadcast_in_dim(w, _shape(v_lo), tuple(range(q_nd)))
    res = lax.add(lax.mul(v_lo, lax.sub(_const(w, 1), w)), lax.mul(v_hi, w))
    has_nan = lax.broadcast_in_dim(any(isnan(x), axis=-1), _shape(res),
                                   tuple(range(q_nd, q_nd + len(rest))))
    res = lax.select(has_nan, lax.full_like(res, np.nan), res)
    if keepdims:
        full_shape = _shape(q) + tuple(1 if d in axes else s for d, s in enumerate(_shape(a)))
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


# ---------------------------------------------------------------------------------------------
# Value-dependent shapes: nonzero, unique, ...
# ---------------------------------------------------------------------------------------------

def _concrete_or_none(x, name: str):
    """The numpy value of `x` if known, else None (a tracer without a concrete value)."""
    if isinstance(x, Tracer):
        return x.to_concrete_value()
    return np.asarray(x)


def _size_error(name: str, x):
    return core.ConcretizationTypeError(
        f"Abstract tracer value encountered where concrete value is expected: the size "
        f"argument of jnp.{name} must be statically specified to use jnp.{name} within JAX "
        f"transformations (the output shape depends on the values of "
        f"{core.get_aval(x).str_short()}). Pass size= (and fill_value=).")


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
    shape = _shape(a)
    if size is None:
        val = _concrete_or_none(a, "nonzero")
        if val is None:
            raise _size_error("nonzero", a)
        size = int(np.count_nonzero(val))
    mask = ravel(lax.ne(a, _const(a, 0)))
    n = _shape(mask)[0]
    count_ = lax.cumsum(lax.convert_element_type(mask, _int), 0)
    dest = lax.select(mask, lax.sub(count_, np.array(1, _int)), lax.full_like(count_, size))
    flat = lax.full((size,), 0, _int).at[dest].set(lax.iota(_int, n), mode="drop")
    valid = lax.lt(lax.iota(_int, size), _np._rewriting_take(count_, -1) if n else
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


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value=None, sorted: bool = True):
    """The sorted distinct values of the flattened `ar`: `T[k]`. With `size`, k = size and
    missing entries are `fill_value` (default: the smallest value). Without `size`, `ar` must
    be concrete (ConcretizationTypeError under tracing).

    A stable sort of `ar` with an iota: an entry starts a new value where it differs from its
    predecessor, and a cumsum of those starts numbers the values. Also returned, in order, if
    asked: `return_index` (int32[k], where each value first occurs; fill: the first entry),
    `return_inverse` (int32 of ar's shape: the number of each entry's value) and
    `return_counts` (int32[k], 0 for fill entries). `axis` raises NotImplementedError."""
    if axis is not None:
        raise NotImplementedError("minijax.numpy.unique: axis is not supported")
    ar = asarray(ar)
    in_shape = _shape(ar)
    ar = ravel(ar)
    n = _shape(ar)[0]
    s, perm = lax.sort_key_val(ar, lax.iota(_int, n), 0)
    if n == 0:
        empty_int = lax.full((0,), 0, _int)
        extras = [empty_int] * return_index + [lax.reshape(empty_int, in_shape)] * \
            return_inverse + [empty_int] * return_counts
        return (s, *extras) if extras else s
    neq = lax.ne(_slice_axis(s, 0, 1, n), _slice_axis(s, 0, 0, n - 1))
    if equal_nan and _is_float(s):
        both_nan = lax.bitwise_and(isnan(_slice_axis(s, 0, 1, n)), isnan(_slice_axis(s, 0, 0,
                                                                                       n - 1)))
        neq = lax.bitwise_and(neq, lax.bitwise_not(both_nan))
    first = concatenate([lax.full((1,), True, np.bool_), neq], 0)
    if size is None:
        val = _concrete_or_none(first, "unique")
        if val is None:
            raise _size_error("unique", ar)
        size = int(val.sum())
    group = lax.sub(lax.cumsum(lax.convert_element_type(first, _int), 0), np.array(1, _int))
    dest = lax.select(first, group, lax.full_like(group, size))
    fill = _np._rewriting_take(s, 0) if fill_value is None else fill_value
    out_ = lax.full((size,), 0, _dtype(s))
    out_ = lax.select(lax.lt(lax.iota(_int, size), lax.add(_np._rewriting_take(group, -1),
                                                           np.array(1, _int))),
                      out_.at[dest].set(s, mode="drop"),
                      broadcast_to(lax.convert_element_type(fill, _dtype(s)), (size,)))
    extras = []
    if return_index:
        index = lax.full((size,), 0, _int).at[dest].set(perm, mode="drop")
        n_unique = lax.add(_np._rewriting_take(group, -1), np.array(1, _int))
        extras.append(where(lax.lt(lax.iota(_int, size), n_unique), index,
                            _np._rewriting_take(index, 0)))
    if return_inverse:
        inverse = lax.full((n,), 0, _int).at[perm].set(group)
        extras.append(lax.reshape(inverse, in_shape))
    if return_counts:
        extras.append(lax.full((size,), 0, _int).at[group].add(lax.full((n,), 1, _int),
                                                                mode="drop"))
    return (out_, *extras) if extras else out_


# ---------------------------------------------------------------------------------------------
# Creation and small utilities
# ---------------------------------------------------------------------------------------------

def tri(N: int, M: int | None = None, k: int = 0, dtype=None):
    """`T[N, M]`: ones at and below diagonal `k`, zeros above (default float dtype)."""
    M = N if M is None else M
    d = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    return lax.convert_element_type(_tri_mask((int(N), int(M)), k, True), d)


def unravel_index(indices, shape):
    """The coordinates (a tuple of int arrays like `indices`) of flat `indices` in an array of
    `shape`. As JAX (unlike numpy): negative indices wrap, out-of-range ones are clipped."""
    indices = asarray(indices)
    if _kind(indices) not in "iu":
        raise TypeError("Only integer indices are supported by unravel_index.")
    shape = tuple(int(s) for s in shape)
    total = int(np.prod(shape, dtype=np.int64))
    i = _np.clip(indices, -total, total - 1)
    i = where(lax.lt(i, _const(i, 0)), lax.add(i, _const(i, total)), i)
    outs = []
    for s in shape[::-1]:
        outs.append(lax.rem(i, _const(i, s)) if s else i)
        i = lax.div(i, _const(i, s)) if s else i
    return tuple(_keep_weak(o, indices) for o in outs[::-1])


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


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sum over the last `axes` dims of a and the first of b (an int), or over the paired
    axes `(a_axes, b_axes)`. Result: a's free dims then b's free dims. One dot_general."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    na, nb = core.get_aval(a).ndim, core.get_aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        k = int(axes)
        if k < 0 or k > builtins.min(na, nb):
            raise TypeError(f"Number of tensordot axes (axes {k}) exceeds input ranks ({na} and "
                            f"{nb})")
        ca, cb = tuple(range(na - k, na)), tuple(range(k))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        if len(ax_a) != len(ax_b):
            raise TypeError("tensordot requires axes lists to have equal length")
        ca = tuple(_canonicalize_axis(i, na) for i in ax_a)
        cb = tuple(_canonicalize_axis(i, nb) for i in ax_b)
    d = _dtype(a) if preferred_element_type is None else preferred_element_type
    return lax.dot_general(a, b, ((ca, cb), ((), ())), preferred_element_type=d)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Sum over the last axes of a and b (scalars multiply)."""
    a, b = asarray(a), asarray(b)
    if core.get_aval(a).ndim == 0 or core.get_aval(b).ndim == 0:
        return _np.multiply(a, b)
    return tensordot(a, b, (-1, -1), preferred_element_type=preferred_element_type)


def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b (inputs given the same rank first)."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    nd = builtins.max(core.get_aval(a).ndim, core.get_aval(b).ndim)
    a = lax.reshape(a, (1,) * (nd - core.get_aval(a).ndim) + _shape(a))
    b = lax.reshape(b, (1,) * (nd - core.get_aval(b).ndim) + _shape(b))
    a_e = lax.reshape(a, tuple(x for s in _shape(a) for x in (s, 1)))
    b_e = lax.reshape(b, tuple(x for s in _shape(b) for x in (1, s)))
    prod_ = _np.multiply(a_e, b_e)
    return lax.reshape(prod_, tuple(p * q for p, q in zip(_shape(a), _shape(b))))


def identity(n: int, dtype=None):
    """The n x n identity matrix (default float dtype)."""
    return _np.eye(n, dtype=dtype)


def empty(shape, dtype=None):
    """An array of `shape`; XLA has no uninitialized memory, so zeros (as JAX)."""
    return _np.zeros(shape, dtype)


def empty_like(prototype, dtype=None, shape=None):
    """Zeros like `prototype` (as JAX)."""
    return lax.full_like(prototype, 0, dtype, shape)


def copy(a, order=None):
    """A copy of `a` (arrays are immutable, so the same values)."""
    return _np.array(a, copy=True)


def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None,
             axis: int = 0):
    """`base ** linspace(start, stop, num)` (concrete bounds; default float dtype)."""
    if axis != 0:
        raise NotImplementedError("minijax.numpy.logspace: axis != 0")
    exps = _np.linspace(start, stop, num, endpoint)
    d = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    out_ = lax.pow(lax.full_like(exps, base), exps)
    return lax.convert_element_type(out_, d)


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
        return np.dtype(_np.dtype(x)).kind == "c"
    except TypeError:
        return False


__all__ = [
    "tan", "arcsin", "arccos", "arctan", "arctan2", "asin", "acos", "atan", "atan2", "expm1",
    "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "asinh", "acosh", "atanh",
    "exp2", "log2", "log10", "deg2rad", "rad2deg", "radians", "degrees", "cbrt", "hypot",
    "logaddexp", "logaddexp2", "heaviside", "fmax", "fmin", "positive", "float_power",
    "signbit", "copysign", "real", "imag", "conjugate", "conj", "isinf", "isposinf", "isneginf",
    "nan_to_num", "isclose", "allclose", "round", "around", "trunc", "logical_xor",
    "bitwise_xor", "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift",
    "prod", "any", "all", "count_nonzero", "ptp", "nansum", "nanprod", "nanmax", "nanmin",
    "nanmean", "average", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "diff",
    "sort", "argsort", "searchsorted", "digitize", "take", "diagonal", "trace", "diag", "tril",
    "triu", "flip", "fliplr", "flipud", "roll", "tile", "repeat", "atleast_1d", "atleast_2d",
    "atleast_3d", "hstack", "vstack", "dstack", "column_stack", "append", "split",
    "array_split", "hsplit", "vsplit", "meshgrid", "broadcast_shapes", "broadcast_arrays",
    "pad", "quantile", "percentile", "median", "nonzero", "flatnonzero", "argwhere", "unique",
    "bitwise_not", "bitwise_invert", "pow", "fabs", "fmod", "divmod", "nancumsum",
    "nancumprod", "tri", "unravel_index", "isrealobj",
    "interp", "isin", "nanargmax", "nanargmin", "select", "tensordot", "inner", "kron",
    "identity", "empty", "empty_like", "copy", "logspace", "isscalar", "iscomplexobj",
]
