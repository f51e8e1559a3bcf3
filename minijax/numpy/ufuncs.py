"""Elementwise functions (NumPy's ufuncs): arithmetic, comparisons, transcendental, logical,
bitwise, rounding and floating-point classification.

Each promotes its arguments (minijax/numpy/util.py) and calls lax, so jvp, vmap and jit come with
the primitives. Mirrors jax/_src/numpy/ufuncs.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import math

import numpy as np

from minijax import core, dtypes, lax
from minijax.array import Array
from minijax.custom_derivatives import custom_jvp
from minijax.lax import lax as lax_internal
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import (
    broadcast_arrays,
    check_arraylike,
    dtype_kind,
    dtype_of,
    is_floating,
    keep_weak,
    promote_args,
    promote_args_inexact,
    promote_args_numeric,
    promote_shapes,
    shape_of,
    where,
)

_const = lax_internal._const


# ---------------------------------------------------------------------------------------------
# Arithmetic and comparisons
# ---------------------------------------------------------------------------------------------

def _one_to_one_unary(name, lax_fn, inexact=False):
    def f(x):
        (x,) = (promote_args_inexact if inexact else promote_args)(name, x)
        return lax_fn(x)
    f.__name__ = name
    f.__doc__ = f"Elementwise `{name}` (jax.numpy.{name})."
    return f


def _one_to_one_binary(name, lax_fn, inexact=False, bool_fn=None):
    promote = promote_args_inexact if inexact else promote_args

    def f(x, y):
        # the eager hot path: two Arrays of one aval (not bool) need no promotion
        if type(x) is Array and type(y) is Array and x.aval is y.aval \
                and (bool_fn is None or x.aval.dtype.kind != "b") \
                and (not inexact or x.aval.dtype.kind == "f"):
            return lax_fn(x, y)
        x, y = promote(name, x, y)
        if bool_fn is not None and type((x.aval if type(x) is Array else
                                         core.get_aval(x)).dtype) is np.dtypes.BoolDType:
            return bool_fn(x, y)
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

# JAX: jax/_src/numpy/ufuncs.py absolute — bool and unsigned inputs are returned as they are
abs = _one_to_one_unary("abs", lambda x: x if dtype_kind(x) in "ub" else lax.abs(x))

absolute = abs

sign = _one_to_one_unary("sign", lax.sign)

floor = _one_to_one_unary("floor", lambda x: x if np.dtype(x.dtype).kind in "iub"
                          else lax.floor(x))

# JAX: jax/_src/numpy/ufuncs.py add, multiply — on bools they are `or` and `and` (lax.add and
# lax.mul reject bool operands, in JAX as here)
add = _one_to_one_binary("add", lax.add, bool_fn=lax.bitwise_or)

subtract = _one_to_one_binary("subtract", lax.sub)

multiply = _one_to_one_binary("multiply", lax.mul, bool_fn=lax.bitwise_and)

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
    (x,) = promote_args_numeric("square", x)
    return lax.square(x)


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
    x, y = promote_args_numeric("floor_divide", x, y)
    kind = np.dtype(core.get_aval(x).dtype).kind
    if kind == "u":
        return lax.div(x, y)
    if kind == "i":  # JAX's test (jax/_src/numpy/ufuncs.py floor_divide): signs differ, rem != 0
        q = lax.div(x, y)
        signs_differ = lax.ne(lax.sign(x), lax.sign(y))
        r = lax.rem(x, y)
        fix = lax.bitwise_and(signs_differ, lax.ne(r, _const(r, 0)))
        return lax.select(fix, lax.sub(q, _const(q, 1)), q)
    return lax.floor(lax.div(x, y))


def remainder(x, y):
    """x % y with the sign of y (as numpy's `%`)."""
    x, y = promote_args_numeric("remainder", x, y)
    zero = _const(x, 0)
    if dtype_kind(y) in "iu":  # x % 0 is 0 for integers, as in JAX
        y = where(lax.eq(y, _const(y, 0)), lax.full_like(y, 1), y)
    r = lax.rem(x, y)
    nonzero = lax.ne(r, zero)
    fix = lax.bitwise_and(lax.ne(lax.lt(r, zero), lax.lt(y, zero)), nonzero)
    return lax.select(fix, lax.add(r, y), r)

mod = remainder


def power(x, y):
    """x ** y. A concrete integer exponent uses `integer_pow`, as in JAX (whose TypeError an
    integer `x` with a negative `y` raises)."""
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool):
        (x,) = promote_args_numeric("power", x)
        return lax.integer_pow(x, int(y))
    xn, yn = promote_args_numeric("power", x, y)  # bools count as ints, as in JAX
    if dtype_kind(xn) in "iu":
        return _pow_int_int(xn, yn)
    x, y = promote_args("power", x, y)
    return lax.pow(x, y)


# JAX: jax/_src/numpy/ufuncs.py _pow_int_int — binary exponentiation, six squarings (a larger
# exponent overflows for any |x| > 1)
def _pow_int_int(x1, x2):
    x1, x2 = broadcast_arrays(x1, x2)
    zero, one = _const(x2, 0), _const(x2, 1)
    acc = where(lax.bitwise_and(lax.eq(x1, zero), lax.ne(x2, zero)), lax.full_like(x1, 0),
                lax.full_like(x1, 1))
    for _ in range(6):
        acc = where(lax.ne(lax.bitwise_and(x2, one), zero), lax.mul(acc, x1), acc)
        x1 = lax.mul(x1, x1)
        x2 = lax.shift_right_logical(x2, one)
    return acc

pow = power


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
    return floor_divide(x1, x2), remainder(x1, x2)


def positive(x):
    """`+x` (jax.numpy.positive): the same dtype."""
    (x,) = promote_args("positive", x)
    return asarray(x)


def float_power(x, y):
    """x ** y computed in the default float dtype (float32 with x64 off)."""
    x, y = promote_args_inexact("float_power", x, y)
    return lax.pow(x, y)


# ---------------------------------------------------------------------------------------------
# Transcendental functions
# ---------------------------------------------------------------------------------------------

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _unary_inexact(name, fn):
    def f(x):
        (x,) = promote_args_inexact(name, x)
        return keep_weak(fn(x), x)
    f.__name__ = name
    f.__doc__ = (f"Elementwise `{name}` (jax.numpy.{name}): `T[...] -> T[...]`, integer "
                 "inputs promoted to the default float dtype.")
    return f


def _binary_inexact(name, fn):
    def f(x1, x2):
        x1, x2 = promote_args_inexact(name, x1, x2)
        return keep_weak(fn(x1, x2), x1)
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

arctanh = _unary_inexact("arctanh", lax.atanh)  # JAX: jnp.arctanh is lax.atanh

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


# JAX: jax/_src/lax/other.py logaddexp — the same custom_jvp and the same body, op for op
# (so jaxprs print as JAX's): d/dx1 = exp(x1 - out), which splits a tie evenly and stays
# finite where the formula's abs() has a kink
def _logaddexp_body(x1, x2):
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    return lax.select(lax.ne(delta, delta),  # NaNs, or infinities of the same sign
                      lax.add(x1, x2),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


_logaddexp_body.__name__ = "logaddexp"  # the name custom_jvp_call prints, as JAX's
_logaddexp = custom_jvp(_logaddexp_body)


# JAX: jax/_src/lax/other.py _replace_inf
def _replace_inf(x):
    return lax.select(lax.eq(x, _const(x, np.inf)), lax.full_like(x, 0), x)


@_logaddexp.defjvp
def _logaddexp_jvp(primals, tangents):
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)
    return out, lax.add(lax.mul(t1, lax.exp(lax.sub(_replace_inf(x1), _replace_inf(out)))),
                        lax.mul(t2, lax.exp(lax.sub(_replace_inf(x2), _replace_inf(out)))))


def _heaviside(x1, x2):
    zero = lax.full_like(x1, 0)
    at_zero = where(isnan(x1), x1, x2)  # NaN stays NaN
    return where(lax.lt(x1, zero), zero, where(lax.gt(x1, zero), lax.full_like(x1, 1), at_zero))

hypot = _binary_inexact("hypot", _hypot)

arctan2 = _binary_inexact("arctan2", lax.atan2)

atan2 = arctan2

logaddexp = _binary_inexact("logaddexp", _logaddexp)

heaviside = _binary_inexact("heaviside", _heaviside)


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2), computed stably (jax.numpy.logaddexp2)."""
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    ln2 = _const(x1, _LN2)
    return keep_weak(lax.div(_logaddexp(lax.mul(x1, ln2), lax.mul(x2, ln2)), ln2), x1)


def fmax(x1, x2):
    """Elementwise maximum that ignores NaNs (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmax", x1, x2)
    return where(lax.bitwise_or(lax.gt(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """Elementwise minimum that ignores NaNs (NaN only where both are NaN)."""
    x1, x2 = promote_args("fmin", x1, x2)
    return where(lax.bitwise_or(lax.lt(x1, x2), isnan(x2)), x1, x2)


# ---------------------------------------------------------------------------------------------
# Logical and bitwise
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/ufuncs.py _to_bool
def _to_bool(x):
    return x if dtype_kind(x) == "b" else lax.ne(x, lax_internal._const(x, 0))


# JAX: jax/_src/numpy/ufuncs.py logical_not, logical_and, logical_or, logical_xor: the
# operands promoted together, then each compared with 0 unless already bool
def logical_not(x):
    return lax.bitwise_not(*map(_to_bool, promote_args("logical_not", x)))


def logical_and(x, y):
    return lax.bitwise_and(*map(_to_bool, promote_args("logical_and", x, y)))


def logical_or(x, y):
    return lax.bitwise_or(*map(_to_bool, promote_args("logical_or", x, y)))


def invert(x):
    return lax.bitwise_not(x)


def bitwise_and(x, y):
    """`&`: bitwise and of ints and bools (numpy's `__and__`)."""
    x, y = promote_args("bitwise_and", x, y)
    return lax.bitwise_and(x, y)


def bitwise_or(x, y):
    """`|`: bitwise or of ints and bools (numpy's `__or__`)."""
    x, y = promote_args("bitwise_or", x, y)
    return lax.bitwise_or(x, y)


def logical_xor(x1, x2):
    """bool[...]: x1 != x2 as truth values."""
    return lax.bitwise_xor(*map(_to_bool, promote_args("logical_xor", x1, x2)))


def bitwise_xor(x1, x2):
    """Bitwise xor of ints (logical xor of bools)."""
    x1, x2 = promote_args("bitwise_xor", x1, x2)
    return lax.bitwise_xor(x1, x2)


def _bool_to_int(*args):
    # bools take part in shifts and fmod as the default int (JAX's result dtype)
    return [lax.convert_element_type(a, dtypes.default_int_dtype()) if dtype_kind(a) == "b" else a
            for a in args]


def left_shift(x, y):
    """x << y for integers (bools as the default int)."""
    x, y = _bool_to_int(*promote_args("left_shift", x, y))
    return lax.shift_left(x, y)


def right_shift(x1, x2):
    """x1 >> x2 for integers: arithmetic for signed, logical for unsigned (as numpy)."""
    x1, x2 = _bool_to_int(*promote_args("right_shift", x1, x2))
    if dtype_kind(x1) == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)

bitwise_left_shift, bitwise_right_shift = left_shift, right_shift

bitwise_not = bitwise_invert = invert


# ---------------------------------------------------------------------------------------------
# Floating-point classification and sign
# ---------------------------------------------------------------------------------------------

def isfinite(x):
    """True where x is neither inf nor NaN."""
    # JAX: jax/_src/numpy/ufuncs.py isfinite — the is_finite primitive for real floats
    x = asarray(x)
    d = core.get_aval(x).dtype
    if not dtypes.is_float(d):
        return lax.full_like(x, True, np.bool_)
    if d.kind == "c":
        return lax.bitwise_and(lax.is_finite(real(x)), lax.is_finite(imag(x)))
    return lax.is_finite(x)


def isnan(x):
    x = asarray(x)
    return lax.ne(x, x)


def isinf(x):
    """bool[...]: True where x is +inf or -inf (always False for ints and bools)."""
    x = asarray(x)
    if not is_floating(x):
        return lax.full_like(x, False, np.bool_)
    if x.dtype.kind == "c":  # JAX: jax/_src/numpy/ufuncs.py isinf — either part infinite
        return lax.bitwise_or(isinf(real(x)), isinf(imag(x)))
    return lax.eq(lax.abs(x), _const(x, np.inf))


def isposinf(x, /, out=None):
    x = asarray(x)
    if not is_floating(x):
        return lax.full_like(x, False, np.bool_)
    return lax.eq(x, _const(x, np.inf))


def isneginf(x, /, out=None):
    x = asarray(x)
    if not is_floating(x):
        return lax.full_like(x, False, np.bool_)
    return lax.eq(x, _const(x, -np.inf))


def signbit(x):
    """bool[...]: True where the sign bit of `x` is set (also for -0.0 and -NaN)."""
    (x,) = promote_args("signbit", x)
    d = dtype_of(x)
    if d.kind in "iu":
        return lax.lt(x, _const(x, 0))
    if d.kind == "b":
        return lax.full_like(x, False, np.bool_)
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[d.itemsize]
    flat = lax.reshape(x, (int(np.prod(shape_of(x), dtype=np.int64)),))
    bits = lax.reshape(lax.bitcast_convert_type(flat, int_type), shape_of(x))
    return lax.lt(bits, np.array(0, int_type))


def copysign(x1, x2):
    """|x1| with the sign of x2 (float result)."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    a = lax.abs(x1)
    return keep_weak(where(signbit(x2), lax.neg(a), a), x1)


def _is_complex(x) -> bool:
    return core.get_aval(x).dtype.kind == "c"


def real(val):
    """The real part (`lax.real`); `val` itself for a real array."""
    val = asarray(val)
    return lax.real(val) if _is_complex(val) else val


def imag(val):
    """The imaginary part (`lax.imag`); zeros for a real array."""
    val = asarray(val)
    return lax.imag(val) if _is_complex(val) else lax.full_like(val, 0)


def conjugate(x):
    """The complex conjugate (`lax.conj`); `x` itself for a real array."""
    x = asarray(x)
    return lax.conj(x) if _is_complex(x) else x

conj = conjugate


# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------

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
    if not is_floating(a):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return asarray(a)
    if decimals == 0:
        return keep_weak(_round_half_even(a), a)
    factor = _const(a, 10.0 ** decimals)
    return keep_weak(lax.div(_round_half_even(lax.mul(a, factor)), factor), a)

around = round


def trunc(x):
    """Round toward zero (ints unchanged)."""
    (x,) = promote_args("trunc", x)
    if not is_floating(x):
        return asarray(x)
    fl = lax.floor(x)
    ce = lax.neg(lax.floor(lax.neg(x)))
    return lax.select(lax.lt(x, _const(x, 0)), ce, fl)



def rint(x):
    """Round to the nearest integer, ties to even; integer and bool inputs become the default
    float dtype (jax.numpy.rint)."""
    (x,) = promote_args_inexact("rint", x)
    return keep_weak(_round_half_even(x), x)


def modf(x, /, out=None):
    """`(x - whole, whole)` with `whole = trunc(x)` (both in x's float dtype)."""
    (x,) = promote_args_inexact("modf", x)
    whole = where(lax.ge(x, _const(x, 0)), floor(x), ceil(x))
    return lax.sub(x, whole), whole


# ---------------------------------------------------------------------------------------------
# Floating-point representation: frexp, ldexp, nextafter
# ---------------------------------------------------------------------------------------------

_INT_FOR_BITS = {16: np.int16, 32: np.int32, 64: np.int64}


def _bitcast(x, dtype):
    # bitcast_convert_type of a flat array, reshaped back (0-d operands included)
    shape = shape_of(x)
    flat = lax.reshape(x, (int(np.prod(shape, dtype=np.int64)),))
    return lax.reshape(lax.bitcast_convert_type(flat, dtype), shape)


# JAX: jax/_src/numpy/ufuncs.py frexp — same bit manipulation (subnormals normalized first)
def frexp(x, /):
    """`(m, e)` with `x = m * 2**e`, `0.5 <= |m| < 1` (m = x and e = 0 for 0, inf, NaN); e is
    int32. Integer inputs are promoted to the default float dtype."""
    (x,) = promote_args_inexact("frexp", x)
    d = dtype_of(x)
    info = dtypes.finfo(d)
    int_type = _INT_FOR_BITS[info.bits]
    nmant, mask, bias = int(info.nmant), (1 << int(info.nexp)) - 1, 1 - int(info.minexp)
    tiny = lax.lt(lax.abs(x), _const(x, info.tiny))
    x1 = _bitcast(where(tiny, lax.mul(x, _const(x, 1 << nmant)), x), int_type)
    x2 = where(tiny, lax.full_like(x1, -nmant), lax.full_like(x1, 0))
    c = lambda v: np.array(v, int_type)
    x2 = lax.add(x2, lax.sub(lax.bitwise_and(lax.shift_right_arithmetic(x1, c(nmant)),
                                             c(mask)), c(bias - 1)))
    x1 = lax.bitwise_and(x1, c(~(mask << nmant)))
    x1 = lax.bitwise_or(x1, c((bias - 1) << nmant))
    m = _bitcast(x1, d)
    special = lax.bitwise_or(lax.bitwise_or(isinf(x), isnan(x)), lax.eq(x, _const(x, 0)))
    e = where(special, lax.full_like(x2, 0), x2)
    return where(special, x, m), lax.convert_element_type(e, np.int32)


# JAX: jax/_src/numpy/ufuncs.py ldexp — the same split of x1 with frexp, so that a small x1
# and a large x2 do not overflow in between
def ldexp(x1, x2, /):
    """`x1 * 2**x2` for an integer `x2` (float result). Raises ValueError for a float `x2`."""
    check_arraylike("ldexp", x1, x2)
    if dtype_kind(x2) not in "iub":
        raise ValueError(f"ldexp not supported for input types {(dtype_of(x1), dtype_of(x2))}")
    (x1,) = promote_args_inexact("ldexp", x1)
    x1, x2 = promote_shapes("ldexp", x1, lax.convert_element_type(x2, dtype_of(x1)))
    m, e = frexp(x1)
    e = lax.add(lax.convert_element_type(e, dtype_of(x1)), x2)
    pos = lax.gt(e, _const(e, 0))
    m = where(pos, lax.mul(m, _const(m, 2)), m)
    e = where(pos, lax.sub(e, _const(e, 1)), e)
    out = lax.mul(m, lax.pow(lax.full_like(e, 2), e))
    return where(lax.bitwise_or(isinf(x1), lax.eq(x1, _const(x1, 0))), x1, out)


def nextafter(x1, x2, /):
    """The next float after `x1` towards `x2` (elementwise, in their promoted float dtype)."""
    x1, x2 = promote_args_inexact("nextafter", x1, x2)
    return lax.nextafter(x1, x2)


# ---------------------------------------------------------------------------------------------
# Integer arithmetic: gcd, lcm
# ---------------------------------------------------------------------------------------------

def _gcd(x1, x2):
    # Euclid's algorithm, as a while_loop over the whole array (JAX's formulation)
    def cond(carry):
        _, b = carry
        return _any_true(lax.ne(b, _const(b, 0)))

    def body(carry):
        a, b = carry
        safe = where(lax.eq(b, _const(b, 0)), lax.full_like(b, 1), b)
        return (where(lax.eq(b, _const(b, 0)), a, b),
                where(lax.eq(b, _const(b, 0)), b, lax.rem(a, safe)))

    a, _ = lax.while_loop(cond, body, (lax.abs(x1), lax.abs(x2)))
    return a


def _any_true(x):
    return lax.reduce_max(lax.convert_element_type(x, np.bool_), tuple(range(len(shape_of(x)))))


def gcd(x1, x2):
    """The greatest common divisor of |x1| and |x2| (integers; gcd(0, 0) = 0)."""
    x1, x2 = promote_args("gcd", x1, x2)
    if dtype_kind(x1) not in "iu":
        raise ValueError("Arguments to jax.numpy.gcd must be integers.")
    x1, x2 = broadcast_arrays(x1, x2)
    return _gcd(x1, x2)


def lcm(x1, x2):
    """The least common multiple of |x1| and |x2| (integers; 0 if either is 0)."""
    x1, x2 = promote_args("lcm", x1, x2)
    if dtype_kind(x1) not in "iu":
        raise ValueError("Arguments to jax.numpy.lcm must be integers.")
    x1, x2 = broadcast_arrays(x1, x2)
    d = _gcd(x1, x2)
    zero = lax.eq(d, _const(d, 0))
    return where(zero, lax.full_like(d, 0),
                 lax.mul(lax.abs(x1), lax.div(lax.abs(x2), where(zero, lax.full_like(d, 1), d))))


def sinc(x, /):
    """`sin(pi x) / (pi x)`, 1 at x = 0 (float result)."""
    (x,) = promote_args_inexact("sinc", x)
    zero = lax.eq(x, _const(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe = where(zero, lax.full_like(x, 1), pi_x)
    return keep_weak(where(zero, lax.full_like(x, 1), lax.div(lax.sin(safe), safe)), x)


def spacing(x, /):
    """The distance from each entry to the next float away from zero (ulp(x), signed like x);
    float16 steps towards +inf, as NumPy's."""
    (x,) = promote_args_inexact("spacing", x)
    dtype = core.get_aval(x).dtype
    if dtype == np.float16:
        return lax.sub(lax.nextafter(x, lax.full_like(x, np.inf)), x)
    out_ = lax.sub(lax.nextafter(x, copysign(lax.full_like(x, np.inf), x)), x)
    tiny = copysign(lax.full_like(x, dtypes.finfo(dtype).smallest_subnormal), x)
    return where(lax.eq(out_, _const(out_, 0)), tiny, out_)


def bitwise_count(x, /):
    """uint8[...]: the number of 1 bits in |x| (integer and bool dtypes), a shift-and-mask
    sum over the bits of the unsigned value."""
    x = asarray(x)
    if dtype_kind(x) not in "biu":
        raise TypeError(f"jnp.bitwise_count: expected an integer or boolean array, got "
                        f"{core.get_aval(x).dtype.name}")
    if dtype_kind(x) == "b":
        return lax.convert_element_type(x, np.uint8)
    bits = core.get_aval(x).dtype.itemsize * 8
    u = lax.convert_element_type(lax.abs(x) if dtype_kind(x) == "i" else x,
                                 np.dtype(f"uint{bits}"))
    one = _const(u, 1)
    count = lax.full_like(u, 0)
    for i in range(bits):
        count = lax.add(count, lax.bitwise_and(lax.shift_right_logical(u, _const(u, i)), one))
    return lax.convert_element_type(count, np.uint8)
