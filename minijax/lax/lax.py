"""The primitives, each with all of its rules in one registration paragraph.

Order in every paragraph: `foo_p = Primitive('foo')`, impl (numpy), abstract eval, jvp,
transpose (linear primitives only), batching, lowering. The functions `sin`, `add`, ... are thin
wrappers around `bind`, as in `jax.lax`: they do not promote dtypes or broadcast ranks
(`minijax.numpy` does that) — except that, like JAX's lax, elementwise operands may be rank 0
or have size-1 dimensions. Mirrors jax/_src/lax/lax.py. Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import math
import operator
from typing import Sequence

import numpy as np

from minijax import core, dispatch, dtypes, effects
from minijax.ad_util import Zero, add_jaxvals_p, aval_zeros_likers
from minijax.array import Array, array_from_numpy
from minijax.config import config
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.interpreters.ad import defjvp, defjvp2, defjvp_zero, deflinear, is_undefined_primal
from minijax.interpreters.batching import defbroadcasting, defreducer, defvectorized, not_mapped
from minijax.lax.utils import (
    broadcasting_sharding_rule,
    context_mesh,
    dot_general_sharding_rule,
    reshape_sharding_rule,
    same_sharding_rule,
    varying_shape_sharding_rule,
)
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import P
from minijax.pjit import reshard_p
from minijax.sharding_impls import ShardingTypeError, canonicalize_out_sharding, normalize_to_ndim
from minijax.tree_util import tree_map
from minijax.util import canonicalize_axis

_max, _min, _abs = builtins.max, builtins.min, builtins.abs

# ---------------------------------------------------------------------------------------------
# Shape and dtype rules shared by the elementwise primitives
# ---------------------------------------------------------------------------------------------

# The dtype kinds an operand may have (JAX: jax/_src/lax/lax.py _float, _int, _num, ...), as
# the names the error messages print.
_float = "float"
_int = "int"
_bool = "bool"
_num = "number"
_int_or_bool = "int or bool"
_signed = "signed"
_any = "any"


def _dtype_ok(dtype: np.dtype, kind: str) -> bool:
    if kind == _any:
        return True
    if kind == _float:
        return dtypes.is_float(dtype)
    if kind == _int:
        return dtype.kind in "iu"
    if kind == _bool:
        return dtype.kind == "b"
    if kind == _num:
        return dtype.kind in "iufc" or dtype == dtypes.bfloat16
    if kind == _int_or_bool:
        return dtype.kind in "iub"
    if kind == _signed:
        return dtypes.is_float(dtype) or dtype.kind == "i"
    raise ValueError(kind)


def _check_dtype(name: str, aval: ShapedArray, kind: str) -> None:
    if not _dtype_ok(aval.dtype, kind):
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name} (operand "
                        f"{aval.str_short()}); it expects {kind} operands")


def _broadcasting_shape(name: str, *avals: ShapedArray) -> tuple[int, ...]:
    shape: tuple = ()
    for a in avals:  # the usual case first: one shape, besides rank-0 operands
        if a.shape and a.shape != shape:
            if shape:
                break
            shape = a.shape
    else:
        return shape
    shapes = [a.shape for a in avals if a.ndim]
    if not shapes:
        return ()
    if len({len(s) for s in shapes}) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got "
                        f"{', '.join(a.str_short() for a in avals)}")
    out = []
    for ds in zip(*shapes):
        sizes = {d for d in ds if d != 1}
        if len(sizes) > 1:
            raise TypeError(f"{name}: incompatible shapes for broadcasting: "
                            f"{', '.join(a.str_short() for a in avals)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def unop(name: str, kind: str, impl) -> Primitive:
    """An elementwise unary primitive with impl and abstract eval registered."""
    prim = Primitive(name)

    def abstract_eval(x: ShapedArray) -> ShapedArray:
        _check_dtype(name, x, kind)
        return x

    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval)
    return prim


def naryop(name: str, kind: str, impl, result_dtype=None) -> Primitive:
    """An elementwise n-ary primitive: operands of one dtype, broadcast as lax allows."""
    prim = Primitive(name)

    def abstract_eval(*avals: ShapedArray) -> ShapedArray:
        dtype = avals[0].dtype
        _check_dtype(name, avals[0], kind)  # (an operand of that dtype passes too)
        mixed = [a for a in avals if a.dtype != dtype]
        for a in mixed:
            _check_dtype(name, a, kind)
        if mixed:
            raise TypeError(
                f"lax.{name} requires arguments to have the same dtypes, got "
                f"{', '.join(a.dtype.name for a in avals)}. (Tip: jnp.{name} is a similar "
                "function that does automatic type promotion on inputs.)")
        shape = _broadcasting_shape(name, *avals)
        if result_dtype is not None:
            return ShapedArray(shape, result_dtype, False)
        return ShapedArray(shape, dtype, all([a.weak_type for a in avals]))

    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval)
    prim.def_sharding_rule(functools.partial(broadcasting_sharding_rule, name),
                           reads_context_mesh=True)
    return prim


def _unbroadcast(aval: ShapedArray, x):
    """Sum `x` down to `aval`'s shape (the transpose of lax's implicit broadcasting)."""
    x_aval = core.get_aval(x)
    if x_aval.shape == aval.shape:
        return x
    if aval.ndim == 0:
        return reduce_sum(x, tuple(range(x_aval.ndim)))
    dims = tuple(i for i, (a, b) in enumerate(zip(aval.shape, x_aval.shape)) if a == 1 != b)
    if dims:
        x = reduce_sum(x, dims)
    return reshape(x, aval.shape)


def _unbroadcast_ct(ct, x):
    """The cotangent `ct` reduced to the shape of the (undefined) operand `x`."""
    if type(ct) is Zero:
        return Zero(x.aval)
    return _unbroadcast(x.aval, ct)


# ---------------------------------------------------------------------------------------------
# Unary elementwise
# ---------------------------------------------------------------------------------------------

def neg(x):
    r"""Elementwise :math:`-x`. Same aval in and out."""
    return neg_p.bind(x)


neg_p = unop("neg", _num, np.negative)
deflinear(neg_p, lambda ct, x: [neg(ct) if type(ct) is not Zero else ct])
defvectorized(neg_p)
mlir.register_lowering(neg_p, mlir.nary_lowering("negate"))


def sin(x):
    """Elementwise sine (float dtypes)."""
    return sin_p.bind(x)


# JAX: jax/_src/lax/lax.py _sin_lin
def _sin_linearize(is_vjp, nonzeros, x):
    # on the direct path (ad.LinearizeTrace): cos(x) is the one residual
    return sin_p.bind(x), nonzeros[0], cos(x), lambda cos_x, t: mul(t, cos_x)


sin_p = unop("sin", _float, np.sin)
defjvp(sin_p, lambda g, x: mul(g, cos(x)))
ad.primitive_linearizations[sin_p] = _sin_linearize
defvectorized(sin_p)
mlir.register_lowering(sin_p, mlir.nary_lowering("sine"))


def cos(x):
    """Elementwise cosine (float dtypes)."""
    return cos_p.bind(x)


cos_p = unop("cos", _float, np.cos)
defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
defvectorized(cos_p)
mlir.register_lowering(cos_p, mlir.nary_lowering("cosine"))


def tan(x):
    """Elementwise tangent (float dtypes); XLA's own `tan` op, as in JAX."""
    return tan_p.bind(x)


tan_p = unop("tan", _float, np.tan)
defjvp2(tan_p, lambda g, ans, x: mul(g, add(_const(x, 1), mul(ans, ans))))
defvectorized(tan_p)
mlir.register_lowering(tan_p, mlir.nary_lowering("tan"))


def _chlo_lowering(op_name: str):
    return lambda ctx, x: getattr(mlir.chlo, op_name)(x)


def sinh(x):
    """Elementwise hyperbolic sine (float dtypes)."""
    return sinh_p.bind(x)


sinh_p = unop("sinh", _float, np.sinh)
defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
defvectorized(sinh_p)
mlir.register_lowering(sinh_p, _chlo_lowering("sinh"))


def cosh(x):
    """Elementwise hyperbolic cosine (float dtypes)."""
    return cosh_p.bind(x)


cosh_p = unop("cosh", _float, np.cosh)
defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
defvectorized(cosh_p)
mlir.register_lowering(cosh_p, _chlo_lowering("cosh"))


def asin(x):
    """Elementwise arcsine (float dtypes), in [-pi/2, pi/2]; NaN outside [-1, 1]."""
    return asin_p.bind(x)


asin_p = unop("asin", _float, np.arcsin)
defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(_const(x, 1), mul(x, x)))))
defvectorized(asin_p)
mlir.register_lowering(asin_p, _chlo_lowering("asin"))


def acos(x):
    """Elementwise arccosine (float dtypes), in [0, pi]; NaN outside [-1, 1]."""
    return acos_p.bind(x)


acos_p = unop("acos", _float, np.arccos)
defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(sub(_const(x, 1), mul(x, x))))))
defvectorized(acos_p)
mlir.register_lowering(acos_p, _chlo_lowering("acos"))


def atan(x):
    """Elementwise arctangent (float dtypes), in (-pi/2, pi/2)."""
    return atan_p.bind(x)


atan_p = unop("atan", _float, np.arctan)
defjvp(atan_p, lambda g, x: div(g, add(_const(x, 1), mul(x, x))))
defvectorized(atan_p)
mlir.register_lowering(atan_p, _chlo_lowering("atan"))


def asinh(x):
    """Elementwise inverse hyperbolic sine (float dtypes)."""
    return asinh_p.bind(x)


asinh_p = unop("asinh", _float, np.arcsinh)
defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(mul(x, x), _const(x, 1)))))
defvectorized(asinh_p)
mlir.register_lowering(asinh_p, _chlo_lowering("asinh"))


def acosh(x):
    """Elementwise inverse hyperbolic cosine (float dtypes); NaN below 1."""
    return acosh_p.bind(x)


acosh_p = unop("acosh", _float, np.arccosh)
# 1 / sqrt(x^2 - 1), as (x - 1)^-1/2 (x + 1)^-1/2 so that large x do not overflow
defjvp(acosh_p, lambda g, x: mul(g, mul(rsqrt(sub(x, _const(x, 1))),
                                        rsqrt(add(x, _const(x, 1))))))
defvectorized(acosh_p)
mlir.register_lowering(acosh_p, _chlo_lowering("acosh"))


def atanh(x):
    """Elementwise inverse hyperbolic tangent (float dtypes); +-inf at +-1."""
    return atanh_p.bind(x)


atanh_p = unop("atanh", _float, np.arctanh)
defjvp(atanh_p, lambda g, x: mul(div(g, add(_const(x, 1), x)), div(_const(x, 1),
                                                                   sub(_const(x, 1), x))))
defvectorized(atanh_p)
mlir.register_lowering(atanh_p, _chlo_lowering("atanh"))


def cbrt(x):
    """Elementwise cube root (float dtypes), negative for negative x."""
    return cbrt_p.bind(x)


cbrt_p = unop("cbrt", _float, np.cbrt)
defjvp2(cbrt_p, lambda g, ans, x: mul(g, div(_const(x, 1 / 3), mul(ans, ans))))
defvectorized(cbrt_p)
mlir.register_lowering(cbrt_p, mlir.nary_lowering("cbrt"))


def ceil(x):
    """Elementwise ceiling (float dtypes); its derivative is zero."""
    return ceil_p.bind(x)


ceil_p = unop("ceil", _float, np.ceil)
defjvp_zero(ceil_p)
defvectorized(ceil_p)
mlir.register_lowering(ceil_p, mlir.nary_lowering("ceil"))


def reciprocal(x):
    """Elementwise 1 / x, as `integer_pow(x, -1)` (JAX's definition)."""
    return integer_pow(x, -1)


def exp(x):
    """Elementwise e**x (float dtypes)."""
    return exp_p.bind(x)


exp_p = unop("exp", _float, np.exp)
defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
defvectorized(exp_p)
mlir.register_lowering(exp_p, mlir.nary_lowering("exponential"))


def log(x):
    """Elementwise natural logarithm (float dtypes)."""
    return log_p.bind(x)


log_p = unop("log", _float, np.log)
defjvp(log_p, lambda g, x: div(g, x))
defvectorized(log_p)
mlir.register_lowering(log_p, mlir.nary_lowering("log"))


def log1p(x):
    """Elementwise log(1 + x), accurate near 0 (float dtypes)."""
    return log1p_p.bind(x)


log1p_p = unop("log1p", _float, np.log1p)
defjvp(log1p_p, lambda g, x: div(g, add(x, _const(x, 1))))
defvectorized(log1p_p)
mlir.register_lowering(log1p_p, mlir.nary_lowering("log_plus_one"))


def tanh(x):
    """Elementwise hyperbolic tangent (float dtypes)."""
    return tanh_p.bind(x)


tanh_p = unop("tanh", _float, np.tanh)
defjvp2(tanh_p, lambda g, ans, x: mul(add(g, mul(g, ans)), sub(_const(x, 1), ans)))
defvectorized(tanh_p)
mlir.register_lowering(tanh_p, mlir.nary_lowering("tanh"))


def _logistic_impl(x):
    # 1 / (1 + exp(-x)), computed without overflow for large |x|
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), 1 - 1 / (1 + np.exp(-np.abs(x))))


def logistic(x):
    """Elementwise 1 / (1 + exp(-x)) (float dtypes)."""
    return logistic_p.bind(x)


logistic_p = unop("logistic", _float, _logistic_impl)
defjvp2(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(_const(x, 1), ans))))
defvectorized(logistic_p)
# JAX: jax/_src/lax/lax.py logistic_impl — lowered as JAX lowers it, 1 / (1 + exp(-x)) in
# three ops, not XLA's one `logistic` op, whose bfloat16 results are rounded otherwise
mlir.register_lowering(logistic_p, mlir.lower_fun(
    lambda x: div(_const(x, 1), add(_const(x, 1), exp(neg(x)))), multiple_results=False))


def sqrt(x):
    """Elementwise square root (float dtypes)."""
    return sqrt_p.bind(x)


sqrt_p = unop("sqrt", _float, np.sqrt)
defjvp2(sqrt_p, lambda g, ans, x: mul(g, div(_const(x, 0.5), ans)))
defvectorized(sqrt_p)
mlir.register_lowering(sqrt_p, mlir.nary_lowering("sqrt"))


def rsqrt(x):
    """Elementwise 1 / sqrt(x) (float dtypes)."""
    return rsqrt_p.bind(x)


rsqrt_p = unop("rsqrt", _float, lambda x: 1 / np.sqrt(x))
defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(_const(x, -0.5), div(ans, x))))
defvectorized(rsqrt_p)
mlir.register_lowering(rsqrt_p, mlir.nary_lowering("rsqrt"))


def abs(x):
    """Elementwise |x| (signed, float and complex dtypes; c64[...] -> f32[...])."""
    return abs_p.bind(x)


def _abs_abstract_eval(x: ShapedArray) -> ShapedArray:
    _check_dtype("abs", x, _signed)
    return x.update(dtype=_complex_basetype(x.dtype))


# JAX: jax/_src/lax/lax.py _abs_jvp_rule
def _abs_jvp(g, ans, x):
    if _iscomplex(x):  # d|x| = re(conj(x) dx) / |x|, and 0 at x == 0
        x_conj = conj(x)
        ans = convert_element_type(ans, core.get_aval(x).dtype)
        safe = select_n(eq(ans, _const(ans, 0)), ans, full_like(ans, 1))
        return real(mul(g, div(x_conj, safe)))
    return select_n(ge(x, _const(x, 0)), neg(g), g)  # g at 0, as in JAX


abs_p = Primitive("abs")
abs_p.def_impl(np.abs)
abs_p.def_abstract_eval(_abs_abstract_eval)
defjvp2(abs_p, _abs_jvp)
defvectorized(abs_p)
mlir.register_lowering(abs_p, mlir.nary_lowering("abs"))


def sign(x):
    """Elementwise sign: -1, 0 or 1 (0 for -0.0 and NaN stays NaN)."""
    return sign_p.bind(x)


# np.sign(-0.0) is 0.0; XLA (and so JAX) keeps the zero's sign
sign_p = unop("sign", _num, lambda x: np.where(x == 0, x, np.sign(x)))
defjvp_zero(sign_p)
defvectorized(sign_p)


def _sign_lowering(ctx, x):  # JAX: jax/_src/lax/lax.py _sign_lower_hlo
    # XLA:TPU refuses stablehlo.sign on unsigned integers: those lower as `x == 0 ? 0 : 1`
    aval = ctx.avals_in[0]
    if aval.dtype.kind != "u":
        return mlir.hlo.sign(x)
    is_zero = mlir.compare_hlo(x, mlir.full_like_aval(0, aval), "EQ", "UNSIGNED")
    return mlir.hlo.select(is_zero, mlir.full_like_aval(0, aval), mlir.full_like_aval(1, aval))


mlir.register_lowering(sign_p, _sign_lowering)


def floor(x):
    """Elementwise floor (float dtypes)."""
    return floor_p.bind(x)


floor_p = unop("floor", _float, np.floor)
defjvp_zero(floor_p)
defvectorized(floor_p)
mlir.register_lowering(floor_p, mlir.nary_lowering("floor"))


def bitwise_not(x):
    """Elementwise logical not (bool) or bitwise not (integers)."""
    return not_p.bind(x)


not_p = unop("not", _int_or_bool, np.invert)
defjvp_zero(not_p)
defvectorized(not_p)
mlir.register_lowering(not_p, mlir.nary_lowering("not_"))


# JAX: jax/_src/lax/lax.py stop_gradient
def stop_gradient(x):
    """The identity, whose derivative is zero: gradients do not flow through `x`, a pytree of
    arrays (any dtype). Concrete leaves come back as they came (a Python float stays a float);
    TypeError for a leaf that is not an array or scalar."""
    def stop(leaf):
        if isinstance(leaf, core.Tracer):
            return stop_gradient_p.bind(leaf)
        core.get_aval(leaf)  # the TypeError for strings and other non-arrays
        return leaf
    return tree_map(stop, x)


stop_gradient_p = unop("stop_gradient", _any, lambda x: x)
defjvp_zero(stop_gradient_p)
defvectorized(stop_gradient_p)
mlir.register_lowering(stop_gradient_p, lambda ctx, x: x)


def _integer_pow_impl(x, *, y):
    return np.power(x, y) if y >= 0 else 1 / np.power(x, -y)


def _integer_pow_abstract_eval(x, *, y):
    _check_dtype("integer_pow", x, _num)
    if y < 0 and not dtypes.is_float(x.dtype):
        raise TypeError(f"integer_pow: negative power {y} needs a float operand, got "
                        f"{x.str_short()}")
    return x


def _integer_pow_jvp(g, x, *, y):
    if y == 0:
        return full_like(g, 0)  # not 0 * x**-1, which is NaN at x == 0
    if y == 1:
        return g
    if y == 2:  # as JAX: 2 * x, not 2 * integer_pow(x, 1)
        return mul(g, mul(_const(x, y), x))
    return mul(g, mul(_const(x, y), integer_pow(x, y - 1)))


def _integer_pow_lowering(ctx, x, *, y):
    # exponentiation by squaring, as XLA has no integer power op
    acc = None
    base = x
    n = _abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else mlir.hlo.multiply(acc, base)
        n >>= 1
        if n:
            base = mlir.hlo.multiply(base, base)
    if acc is None:
        acc = mlir.full_like_aval(1, ctx.avals_out[0])
    if y < 0:
        acc = mlir.hlo.divide(mlir.full_like_aval(1, ctx.avals_out[0]), acc)
    return acc


def integer_pow(x, y: int):
    """Elementwise x**y for a static Python int `y`."""
    return integer_pow_p.bind(x, y=int(y))


integer_pow_p = Primitive("integer_pow")
integer_pow_p.def_impl(_integer_pow_impl)
integer_pow_p.def_abstract_eval(_integer_pow_abstract_eval)
defjvp(integer_pow_p, _integer_pow_jvp)
defvectorized(integer_pow_p)
mlir.register_lowering(integer_pow_p, _integer_pow_lowering)


def square(x):
    """Elementwise x * x (number dtypes)."""
    return square_p.bind(x)


square_p = unop("square", _num, np.square)
defjvp2(square_p, lambda g, ans, x: mul(g, mul(_const(x, 2), x)))
defvectorized(square_p)
mlir.register_lowering(square_p, lambda ctx, x: mlir.hlo.multiply(x, x))


def expm1(x):
    """Elementwise exp(x) - 1, accurate near 0 (float dtypes)."""
    return expm1_p.bind(x)


expm1_p = unop("expm1", _float, np.expm1)
defjvp2(expm1_p, lambda g, ans, x: mul(g, add(ans, _const(ans, 1))))
defvectorized(expm1_p)
mlir.register_lowering(expm1_p, mlir.nary_lowering("exponential_minus_one"))


def is_finite(x):
    """Elementwise: True where `x` is neither inf nor NaN (float dtypes); gives bool."""
    return is_finite_p.bind(x)


def _is_finite_abstract_eval(x):
    _check_dtype("is_finite", x, _float)
    return ShapedArray(x.shape, dtypes.bool_)


is_finite_p = Primitive("is_finite")
is_finite_p.def_impl(np.isfinite)
is_finite_p.def_abstract_eval(_is_finite_abstract_eval)
is_finite_p.def_sharding_rule(lambda x: x.sharding)
defjvp_zero(is_finite_p)
defvectorized(is_finite_p)
mlir.register_lowering(is_finite_p, mlir.nary_lowering("is_finite"))


# ---------------------------------------------------------------------------------------------
# Binary elementwise
# ---------------------------------------------------------------------------------------------

def add(x, y):
    """Elementwise x + y (same dtype; rank-0 or size-1 operands broadcast)."""
    return add_p.bind(x, y)


def _add_transpose(ct, x, y):
    return [_unbroadcast_ct(ct, x) if is_undefined_primal(x) else None,
            _unbroadcast_ct(ct, y) if is_undefined_primal(y) else None]


# JAX: jax/_src/lax/lax.py _maybe_broadcast
def _maybe_broadcast(shape: tuple[int, ...], t):
    # a tangent of an operand lax broadcast implicitly (rank 0 or size-1 dims), made full size
    t_shape = core.get_aval(t).shape
    if t_shape == shape:
        return t
    if not t_shape:
        return broadcast_in_dim(t, shape, ())
    kept = tuple(i for i, d in enumerate(t_shape) if d == shape[i])
    return broadcast_in_dim(reshape(t, tuple(t_shape[i] for i in kept)), shape, kept)


def _add_sub_jvp(prim, primals, tangents):
    # JAX's _add_jvp and _sub_jvp: a zero tangent is skipped, not materialized and combined
    (x, y), (tx, ty) = primals, tangents
    out = prim.bind(x, y)
    shape = core.get_aval(out).shape
    if type(tx) is Zero and type(ty) is Zero:
        return out, Zero.from_primal_value(out)
    if type(tx) is Zero:
        return out, _maybe_broadcast(shape, ty if prim is add_p else neg(ty))
    if type(ty) is Zero:
        return out, _maybe_broadcast(shape, tx)
    return out, prim.bind(tx, ty)


add_p = naryop("add", _num, np.add)
ad.primitive_jvps[add_p] = functools.partial(_add_sub_jvp, add_p)
ad.primitive_transposes[add_p] = _add_transpose
defbroadcasting(add_p)
mlir.register_lowering(add_p, mlir.nary_lowering("add"))


def _add_any_transpose(ct, x, y):
    return [ct, ct]


def _add_any_batch_rule(vals, dims, *, axis_size):
    # add_any's operands have equal shapes (its output aval is its first operand's), so an
    # unbatched operand is broadcast to the full batch, not given a size-1 axis
    x, y = (batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims))
    return add_jaxvals_p.bind(x, y), 0


# add_any (JAX's add_jaxvals_p) sums tangents and cotangents; defined in ad_util.py.
add_jaxvals_p.def_impl(np.add)
add_jaxvals_p.def_abstract_eval(lambda x, y: x)
deflinear(add_jaxvals_p, _add_any_transpose)
batching.primitive_batchers[add_jaxvals_p] = _add_any_batch_rule
mlir.register_lowering(add_jaxvals_p, mlir.nary_lowering("add"))


def sub(x, y):
    """Elementwise x - y."""
    return sub_p.bind(x, y)


def _sub_transpose(ct, x, y):
    ct_y = None
    if is_undefined_primal(y):
        ct_y = _unbroadcast_ct(ct if type(ct) is Zero else neg(ct), y)
    return [_unbroadcast_ct(ct, x) if is_undefined_primal(x) else None, ct_y]


sub_p = naryop("sub", _num, np.subtract)
ad.primitive_jvps[sub_p] = functools.partial(_add_sub_jvp, sub_p)
ad.primitive_transposes[sub_p] = _sub_transpose
defbroadcasting(sub_p)
mlir.register_lowering(sub_p, mlir.nary_lowering("subtract"))


def mul(x, y):
    """Elementwise x * y."""
    return mul_p.bind(x, y)


def _mul_transpose(ct, x, y):
    # mul is linear in one operand at a time; the other is a known value
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x):
        return [_unbroadcast(x.aval, mul(ct, y)), None]
    return [None, _unbroadcast(y.aval, mul(x, ct))]


mul_p = naryop("mul", _num, np.multiply)
defjvp(mul_p, lambda g, x, y: mul(g, y), lambda g, x, y: mul(x, g))
ad.primitive_transposes[mul_p] = _mul_transpose
defbroadcasting(mul_p)
mlir.register_lowering(mul_p, mlir.nary_lowering("multiply"))


def _div_impl(x, y):
    if np.result_type(x).kind in "iu":
        # integer division rounds toward zero, as in C and XLA; x / 0 is -1 (all bits set), as
        # XLA defines it (numpy's is 0, with a warning)
        by_zero = y == 0
        y = np.where(by_zero, np.ones_like(y), y)
        with np.errstate(over="ignore"):  # INT_MIN / -1 wraps to INT_MIN, as in XLA
            q = np.floor_divide(x, y)
        q = q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))
        return np.where(by_zero, np.array(-1).astype(q.dtype), q)
    return np.divide(x, y)


def _rem_impl(x, y):
    if np.result_type(x).kind in "iu":  # x % 0 is x, as XLA defines it
        by_zero = y == 0
        return np.where(by_zero, x, np.fmod(x, np.where(by_zero, np.ones_like(y), y)))
    return np.fmod(x, y)


def _div_transpose(ct, x, y):
    if is_undefined_primal(y):
        raise NotImplementedError("div is not linear in its divisor")
    return [_unbroadcast_ct(ct if type(ct) is Zero else div(ct, y), x), None]


def div(x, y):
    """Elementwise x / y; integer division rounds toward zero."""
    return div_p.bind(x, y)


div_p = naryop("div", _num, _div_impl)
defjvp(div_p, lambda g, x, y: div(g, y),
       lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))
ad.primitive_transposes[div_p] = _div_transpose
defbroadcasting(div_p)
mlir.register_lowering(div_p, mlir.nary_lowering("divide"))


def rem(x, y):
    """Elementwise remainder with the sign of `x` (C's fmod), like XLA's."""
    return rem_p.bind(x, y)


rem_p = naryop("rem", _num, _rem_impl)
defjvp(rem_p, lambda g, x, y: _maybe_broadcast(
           _broadcasting_shape("rem", core.get_aval(x), core.get_aval(y)), g),
       lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
defbroadcasting(rem_p)
mlir.register_lowering(rem_p, mlir.nary_lowering("remainder"))


def _replace_zero(x):
    return select(eq(x, _const(x, 0)), full_like(x, 1), x)


def _pow_jvp_lhs(g, ans, x, y):
    return mul(g, mul(y, pow(x, sub(y, full_like(y, 1)))))


def _pow_jvp_rhs(g, ans, x, y):
    # d/dy x**y = log(x) * x**y, with log(0) read as log(1) = 0 (as JAX does)
    return mul(g, mul(log(_replace_zero(x)), ans))


def pow(x, y):
    """Elementwise x ** y (float operands of one dtype)."""
    return pow_p.bind(x, y)


pow_p = naryop("pow", _float, np.power)
defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)
defbroadcasting(pow_p)
mlir.register_lowering(pow_p, mlir.nary_lowering("power"))


# JAX: jax/_src/lax/lax.py _balanced_eq
def _balanced_eq(x, z, y):
    # 1 where x wins, 0.5 where x and y tie, 0 elsewhere (ties split evenly)
    return div(select(eq(x, z), full_like(z, 1), full_like(z, 0)),
               select(eq(y, z), full_like(z, 2), full_like(z, 1)))


def max(x, y):
    """Elementwise maximum (NaN propagates)."""
    return max_p.bind(x, y)


max_p = naryop("max", _any, np.maximum)
defjvp2(max_p,
        lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
        lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
defbroadcasting(max_p)
mlir.register_lowering(max_p, mlir.nary_lowering("maximum"))


def min(x, y):
    """Elementwise minimum (NaN propagates)."""
    return min_p.bind(x, y)


min_p = naryop("min", _any, np.minimum)
defjvp2(min_p,
        lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
        lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
defbroadcasting(min_p)
mlir.register_lowering(min_p, mlir.nary_lowering("minimum"))


def bitwise_and(x, y):
    """Elementwise logical and (bool) or bitwise and (integers)."""
    return and_p.bind(x, y)


and_p = naryop("and", _int_or_bool, np.bitwise_and)
defjvp_zero(and_p)
defbroadcasting(and_p)
mlir.register_lowering(and_p, mlir.nary_lowering("and_"))


def bitwise_or(x, y):
    """Elementwise logical or (bool) or bitwise or (integers)."""
    return or_p.bind(x, y)


or_p = naryop("or", _int_or_bool, np.bitwise_or)
defjvp_zero(or_p)
defbroadcasting(or_p)
mlir.register_lowering(or_p, mlir.nary_lowering("or_"))


def _compare_lowering(direction: str):
    def rule(ctx, x, y):
        aval = ctx.avals_in[0]
        out = ctx.avals_out[0]
        x = mlir.broadcast_to(x, aval, aval.update(shape=out.shape))
        y = mlir.broadcast_to(y, ctx.avals_in[1], ctx.avals_in[1].update(shape=out.shape))
        kind = aval.dtype.kind
        ctype = ("FLOAT" if dtypes.is_float(aval.dtype) else "UNSIGNED" if kind in "ub"
                 else "SIGNED")
        return mlir.compare_hlo(x, y, direction, ctype)
    rule.__name__ = f"_compare_{direction.lower()}_lowering"
    return rule


def eq(x, y):
    """Elementwise x == y, giving bool."""
    return eq_p.bind(x, y)


eq_p = naryop("eq", _any, np.equal, result_dtype=dtypes.bool_)
defjvp_zero(eq_p)
defbroadcasting(eq_p)
mlir.register_lowering(eq_p, _compare_lowering("EQ"))


def ne(x, y):
    """Elementwise x != y, giving bool."""
    return ne_p.bind(x, y)


ne_p = naryop("ne", _any, np.not_equal, result_dtype=dtypes.bool_)
defjvp_zero(ne_p)
defbroadcasting(ne_p)
mlir.register_lowering(ne_p, _compare_lowering("NE"))


def lt(x, y):
    """Elementwise x < y, giving bool."""
    return lt_p.bind(x, y)


lt_p = naryop("lt", _any, np.less, result_dtype=dtypes.bool_)
defjvp_zero(lt_p)
defbroadcasting(lt_p)
mlir.register_lowering(lt_p, _compare_lowering("LT"))


def le(x, y):
    """Elementwise x <= y, giving bool."""
    return le_p.bind(x, y)


le_p = naryop("le", _any, np.less_equal, result_dtype=dtypes.bool_)
defjvp_zero(le_p)
defbroadcasting(le_p)
mlir.register_lowering(le_p, _compare_lowering("LE"))


def gt(x, y):
    """Elementwise x > y, giving bool."""
    return gt_p.bind(x, y)


gt_p = naryop("gt", _any, np.greater, result_dtype=dtypes.bool_)
defjvp_zero(gt_p)
defbroadcasting(gt_p)
mlir.register_lowering(gt_p, _compare_lowering("GT"))


def ge(x, y):
    """Elementwise x >= y, giving bool."""
    return ge_p.bind(x, y)


ge_p = naryop("ge", _any, np.greater_equal, result_dtype=dtypes.bool_)
defjvp_zero(ge_p)
defbroadcasting(ge_p)
mlir.register_lowering(ge_p, _compare_lowering("GE"))


def atan2(x, y):
    """Elementwise arctangent of x / y, in the quadrant of the point (y, x) (floats of one
    dtype)."""
    return atan2_p.bind(x, y)


atan2_p = naryop("atan2", _float, np.arctan2)
defjvp(atan2_p,
       lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
       lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))
defbroadcasting(atan2_p)
mlir.register_lowering(atan2_p, mlir.nary_lowering("atan2"))


def nextafter(x1, x2):
    """The next float after `x1` in the direction of `x2` (one ulp step)."""
    return nextafter_p.bind(x1, x2)


# no jvp, as in JAX: the result is a step function of x1
nextafter_p = naryop("nextafter", _float, np.nextafter)
defbroadcasting(nextafter_p)
mlir.register_lowering(nextafter_p, lambda ctx, x, y: mlir.chlo.next_after(
    *[mlir.broadcast_to(a, av, av.update(shape=ctx.avals_out[0].shape))
      for a, av in zip((x, y), ctx.avals_in)]))


# ---------------------------------------------------------------------------------------------
# Complex numbers: real, imag, complex, conj
# ---------------------------------------------------------------------------------------------
# Their transposes fix JAX's convention for derivatives through complex values: transposition
# is the plain (not conjugate) transpose, so the gradient of a real function of a complex z is
# df/dx - i df/dy, and with holomorphic=True grad gives df/dz.

def _iscomplex(x) -> bool:
    return dtypes.issubdtype(core.get_aval(x).dtype, np.complexfloating)


def _complex_basetype(dtype) -> np.dtype:
    """float32 for complex64, float64 for complex128; other dtypes unchanged."""
    dtype = np.dtype(dtype)
    return np.finfo(dtype).dtype if dtype.kind == "c" else dtype


def _complex_dtype(dtype) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype) == np.float64 else np.complex64)


def _complex_part_abstract_eval(name: str):
    def rule(x: ShapedArray) -> ShapedArray:
        if x.dtype.kind != "c":
            raise TypeError(f"{name} does not accept dtype {x.dtype.name} (operand "
                            f"{x.str_short()}); it expects complex operands")
        return x.update(dtype=_complex_basetype(x.dtype))
    return rule


def real(x):
    """The real part, elementwise: c64[...] -> f32[...]."""
    return real_p.bind(x)


def _zero_part(ct):
    """The other part of a real/imag cotangent: as JAX's a NumPy zero, strongly typed, so the
    complex cotangent is not weak even when `ct` is (`grad` of `real(z)**2` at `3+4j`)."""
    aval = core.get_aval(ct)
    return np.zeros((), aval.dtype) if aval.sharding is None else _const(ct, 0)


# JAX: jax/_src/lax/lax.py real_p
real_p = Primitive("real")
real_p.def_impl(np.real)
real_p.def_abstract_eval(_complex_part_abstract_eval("real"))
deflinear(real_p, lambda ct, x: [ct if type(ct) is Zero else complex(ct, _zero_part(ct))])
defvectorized(real_p)
mlir.register_lowering(real_p, mlir.nary_lowering("real"))


def imag(x):
    """The imaginary part, elementwise: c64[...] -> f32[...]."""
    return imag_p.bind(x)


# JAX: jax/_src/lax/lax.py imag_p
imag_p = Primitive("imag")
imag_p.def_impl(np.imag)
imag_p.def_abstract_eval(_complex_part_abstract_eval("imag"))
deflinear(imag_p, lambda ct, x: [ct if type(ct) is Zero else complex(_zero_part(ct), neg(ct))])
defvectorized(imag_p)
mlir.register_lowering(imag_p, mlir.nary_lowering("imag"))


def complex(x, y):
    """`x + 1j * y` from two real arrays of one float dtype: f32[...] -> c64[...]."""
    return complex_p.bind(x, y)


def _complex_abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
    for a in (x, y):
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"complex does not accept dtype {a.dtype.name} (operand "
                            f"{a.str_short()}); it expects float32 or float64 operands")
    if x.dtype != y.dtype:
        raise TypeError(f"lax.complex requires arguments to have the same dtypes, got "
                        f"{x.dtype.name}, {y.dtype.name}")
    return ShapedArray(_broadcasting_shape("complex", x, y), _complex_dtype(x.dtype),
                       x.weak_type and y.weak_type)


def _complex_transpose(ct, x, y):
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(y.aval) if is_undefined_primal(y) else None]
    return [_unbroadcast_ct(real(ct), x) if is_undefined_primal(x) else None,
            _unbroadcast_ct(imag(neg(ct)), y) if is_undefined_primal(y) else None]


# JAX: jax/_src/lax/lax.py complex_p
complex_p = Primitive("complex")
complex_p.def_impl(lambda x, y: np.asarray(x + 1j * y, _complex_dtype(np.result_type(x))))
complex_p.def_abstract_eval(_complex_abstract_eval)
complex_p.def_sharding_rule(functools.partial(broadcasting_sharding_rule, "complex"),
                            reads_context_mesh=True)
deflinear(complex_p, _complex_transpose)
defbroadcasting(complex_p)
mlir.register_lowering(complex_p, mlir.nary_lowering("complex"))


def conj(x):
    """The complex conjugate, elementwise; a float input gives a complex result (as in lax)."""
    return conj_p.bind(x, input_dtype=core.get_aval(x).dtype)


def _conj_abstract_eval(x: ShapedArray, *, input_dtype) -> ShapedArray:
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"conj does not accept dtype {x.dtype.name} (operand "
                        f"{x.str_short()}); it expects float or complex operands")
    return x.update(dtype=_complex_dtype(_complex_basetype(x.dtype)))


# JAX: jax/_src/lax/lax.py _conj_transpose_rule
def _conj_transpose(ct, x, *, input_dtype):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [conj(ct) if np.dtype(input_dtype).kind == "c" else real(ct)]


def _conj_lowering(ctx, x, *, input_dtype):
    (aval,) = ctx.avals_in
    if aval.dtype.kind != "c":
        return mlir.hlo.complex(x, mlir.full_like_aval(0, aval))
    return mlir.hlo.complex(mlir.hlo.real(x), mlir.hlo.negate(mlir.hlo.imag(x)))


# JAX: jax/_src/lax/lax.py conj_p
conj_p = Primitive("conj")
conj_p.def_impl(lambda x, *, input_dtype: np.conj(x).astype(_complex_dtype(
    _complex_basetype(x.dtype))))
conj_p.def_abstract_eval(_conj_abstract_eval)
deflinear(conj_p, _conj_transpose)
defvectorized(conj_p)
mlir.register_lowering(conj_p, _conj_lowering)


# ---------------------------------------------------------------------------------------------
# Selection and conversion: select_n, convert_element_type, clamp, reduce_precision
# ---------------------------------------------------------------------------------------------

def _select_n_impl(which, *cases):
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(which, np.broadcast_arrays(*cases))


def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select_n needs at least one case")
    if len({(c.shape, c.dtype) for c in cases}) != 1:
        raise TypeError(f"select_n: cases must have the same shape and dtype, got "
                        f"{', '.join(c.str_short() for c in cases)}")
    if which.dtype != np.bool_ and which.dtype.kind not in "iu":
        raise TypeError(f"select_n: `which` must be bool or int32, got {which.str_short()}")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise TypeError("select_n: a boolean `which` selects between at most 2 cases")
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(f"select_n: `which` must be scalar or have the cases' shape, got "
                        f"{which.str_short()} for cases {cases[0].str_short()}")
    return cases[0].update(weak_type=all(c.weak_type for c in cases))


def _select_n_jvp(primals, tangents):
    # JAX's _select_jvp: one zeros array stands in for every zero case tangent
    which, *cases = primals
    case_tangents = tangents[1:]
    out = select_n(which, *cases)
    if all(type(t) is Zero for t in case_tangents):
        return out, Zero.from_primal_value(out)
    z = full_like(next(t for t in case_tangents if type(t) is not Zero), 0)
    return out, select_n(which, *[z if type(t) is Zero else t for t in case_tangents])


# JAX: jax/_src/lax/lax.py _select_transpose_rule
def _select_n_transpose(ct, which, *cases):
    if is_undefined_primal(which):
        raise NotImplementedError("select_n is not linear in its predicate")
    if type(ct) is Zero:
        return [None] + [Zero(c.aval) if is_undefined_primal(c) else None for c in cases]
    zeros = full_like(ct, 0)
    if core.get_aval(which).dtype == np.bool_:
        return [None] + [select_n(which, *((ct, zeros) if i == 0 else (zeros, ct)))
                         if is_undefined_primal(c) else None for i, c in enumerate(cases)]
    # an integer `which`, as JAX's: each case's cotangent selected where `which == i`
    return [None] + [select_n(eq(which, np.array(i, core.get_aval(which).dtype)), zeros, ct)
                     if is_undefined_primal(c) else None for i, c in enumerate(cases)]


def _select_n_batch_rule(vals, dims, *, axis_size):
    which, *cases = vals
    which_dim, *case_dims = dims
    case_aval = next(core.get_aval(c) for c, d in zip(cases, case_dims))
    case_shape = case_aval.shape if case_dims[0] is not_mapped else (
        case_aval.shape[:case_dims[0]] + case_aval.shape[case_dims[0] + 1:])
    cases = [batching.bdim_at_front(c, d, axis_size) for c, d in zip(cases, case_dims)]
    if which_dim is not_mapped and core.get_aval(which).ndim == 0:
        return select_n(which, *cases), 0
    which = batching.bdim_at_front(which, which_dim, axis_size)
    if core.get_aval(which).ndim == 1 and case_shape:  # a batched scalar predicate
        which = broadcast_in_dim(which, (axis_size,) + case_shape, (0,))
    return select_n(which, *cases), 0


def _select_n_lowering(ctx, which, *cases):
    which_aval = ctx.avals_in[0]
    if which_aval.dtype == np.bool_:
        return mlir.hlo.select(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    out = cases[0]
    for i in range(1, len(cases)):
        idx = mlir.ir_constant(np.full(which_aval.shape, i, which_aval.dtype))
        pred = mlir.hlo.compare(which, idx, mlir.hlo.ComparisonDirectionAttr.get("EQ"))
        out = mlir.hlo.select(pred, cases[i], out)
    return out


def select_n(which, *cases):
    """`cases[which]` elementwise. `which`: bool (2 cases) or int32, scalar or the cases'
    shape; cases: same shape and dtype. Raises TypeError otherwise."""
    return select_n_p.bind(which, *cases)


select_n_p = Primitive("select_n")
select_n_p.def_impl(_select_n_impl)
select_n_p.def_abstract_eval(_select_n_abstract_eval)
select_n_p.def_sharding_rule(lambda which, *cases: same_sharding_rule("select_n", *cases),
                             reads_context_mesh=True)
ad.primitive_jvps[select_n_p] = _select_n_jvp
ad.primitive_transposes[select_n_p] = _select_n_transpose
batching.primitive_batchers[select_n_p] = _select_n_batch_rule
mlir.register_lowering(select_n_p, _select_n_lowering)


def select(pred, on_true, on_false):
    """`on_true` where `pred` else `on_false` (JAX's lax.select)."""
    return select_n(pred, on_false, on_true)


def _convert_element_type_impl(x, *, new_dtype, weak_type):
    if dtypes.is_float(x.dtype) and np.dtype(new_dtype).kind in "iu":
        # XLA's float -> int conversion saturates, and NaN becomes 0 (numpy's is undefined)
        info = dtypes.iinfo(new_dtype)
        x = x.astype(np.float64)
        too_big, too_small = x >= float(info.max), x <= float(info.min)
        out = np.where(np.isnan(x) | too_big | too_small, 0, x).astype(new_dtype)
        return np.where(too_big, info.max, np.where(too_small, info.min, out)).astype(new_dtype)
    if x.dtype.kind == "c" and np.dtype(new_dtype).kind != "c":
        x = np.real(x)  # complex -> real keeps the real part, as XLA does (numpy would warn)
    if np.dtype(new_dtype).itemsize >= x.dtype.itemsize:
        return x.astype(new_dtype)
    with np.errstate(over="ignore"):  # a narrowing float cast overflows to inf silently in XLA
        return x.astype(new_dtype)


def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_element_type_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is Zero or not dtypes.is_float(new_dtype) or not dtypes.is_float(
            core.get_aval(x).dtype):
        return out, Zero.from_primal_value(out)
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_element_type_transpose(ct, x, *, new_dtype, weak_type):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype,
                                        weak_type=x.aval.weak_type)]


def _convert_element_type_lowering(ctx, x, *, new_dtype, weak_type):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    if new_dtype == np.bool_ and aval_in.dtype != np.bool_:
        zero = mlir.full_like_aval(0, aval_in)
        ctype = "FLOAT" if dtypes.is_float(aval_in.dtype) else (
            "UNSIGNED" if aval_in.dtype.kind == "u" else "SIGNED")
        return mlir.compare_hlo(x, zero, "NE", ctype)
    # also where only weak_type changes: JAX emits the (no-op) convert all the same
    # (jax/_src/interpreters/mlir.py: convert_hlo), and the modules are to match
    return mlir.hlo.convert(mlir.aval_to_ir_type(aval_out), x)


convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.def_impl(_convert_element_type_impl)
convert_element_type_p.def_abstract_eval(_convert_element_type_abstract_eval)
convert_element_type_p.def_sharding_rule(lambda x, **_: x.sharding)
ad.primitive_jvps[convert_element_type_p] = _convert_element_type_jvp
ad.primitive_transposes[convert_element_type_p] = _convert_element_type_transpose
defvectorized(convert_element_type_p)
mlir.register_lowering(convert_element_type_p, _convert_element_type_lowering)


# JAX: jax/_src/core.py Trace.stage_value — differs: asked of the traces, not done by them
def staged_literals() -> bool:
    """Whether a scalar made from a Python or NumPy value lands in a jaxpr being built, where
    it is written inline as a literal (`2.0:f32[]`), rather than in eager evaluation, where it
    is an Array (which a jaxpr built later, e.g. of a linearized function, holds as a
    constvar), as JAX stages its typed scalars."""
    t = core.current_trace()
    while hasattr(t, "parent_trace"):
        t = t.parent_trace
    return not isinstance(t, core.EvalTrace)


def convert_element_type(x, new_dtype, weak_type: bool = False):
    """`x` converted to `new_dtype` (canonicalized: 64-bit narrows unless x64 is on).

    A concrete (non-traced) operand is converted right away with numpy, as JAX does, so
    constants stay literals in jaxprs."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    if new_dtype.kind not in "biufc" and new_dtype != dtypes.bfloat16:
        raise TypeError(f"convert_element_type: minijax supports number and bool dtypes, got "
                        f"{new_dtype}")
    if not isinstance(x, core.Tracer):
        aval = core.get_aval(x)
        if (aval.dtype == new_dtype and aval.weak_type == weak_type
                and not dtypes.is_python_scalar(x)):
            return x
        val = core.to_numpy(x, aval)
        if not (dtypes.is_python_scalar(x) and val.dtype == new_dtype):  # (already converted)
            val = _convert_element_type_impl(val, new_dtype=new_dtype, weak_type=weak_type)
        return array_from_numpy(val, weak_type, literal=staged_literals())
    aval = x.aval
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _clamp_impl(lo, x, hi):
    return np.minimum(np.maximum(x, lo), hi)


def _clamp_abstract_eval(lo, x, hi):
    for a in (lo, x, hi):
        _check_dtype("clamp", a, _any)
    if len({lo.dtype, x.dtype, hi.dtype}) != 1:
        raise TypeError(f"clamp requires min, x and max to have the same dtype, got "
                        f"{lo.str_short()}, {x.str_short()}, {hi.str_short()}")
    for name, a in (("min", lo), ("max", hi)):
        if a.ndim and a.shape != x.shape:
            raise TypeError(f"clamp: {name} {a.str_short()} must be a scalar or have the shape "
                            f"of x {x.str_short()}")
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


def _clamp_tangent(g, pred, x):
    shape = core.get_aval(x).shape
    if core.get_aval(g).shape != shape:  # the tangent of a scalar min or max
        g = broadcast_in_dim(g, shape, ())
    return select(pred, g, full_like(x, 0))


def _clamp_batch_rule(vals, dims, *, axis_size):
    # batch axes to the front; min and max stay scalars only if unbatched
    (lo, x, hi), (dlo, dx, dhi) = vals, dims

    def unbatched_shape(v, d):
        shape = core.get_aval(v).shape
        return shape if d is not_mapped else shape[:d] + shape[d + 1:]

    # x's shape, or that of min or max when x is a scalar
    out_shape = (axis_size,) + builtins.max(map(unbatched_shape, vals, dims), key=len)

    def full_size(v, d):
        v = batching.bdim_at_front(v, d, axis_size)
        if core.get_aval(v).shape == out_shape:
            return v
        return broadcast_in_dim(v, out_shape, (0,))  # a batched scalar

    x = full_size(x, dx)
    lo = lo if dlo is not_mapped and not core.get_aval(lo).ndim else full_size(lo, dlo)
    hi = hi if dhi is not_mapped and not core.get_aval(hi).ndim else full_size(hi, dhi)
    return clamp_p.bind(lo, x, hi), 0


# JAX: jax/_src/lax/lax.py clamp_p
def clamp(min, x, max):
    """Elementwise `min(max(x, min), max)`. `min` and `max` are scalars or have the shape of
    `x`; all three share one dtype, else TypeError."""
    return clamp_p.bind(min, x, max)


clamp_p = Primitive("clamp")
clamp_p.def_impl(_clamp_impl)
clamp_p.def_abstract_eval(_clamp_abstract_eval)
clamp_p.def_sharding_rule(functools.partial(broadcasting_sharding_rule, "clamp"))
defjvp(clamp_p,
       lambda g, lo, x, hi: _clamp_tangent(g, bitwise_and(gt(lo, x), lt(lo, hi)), x),
       lambda g, lo, x, hi: _clamp_tangent(g, bitwise_and(gt(x, lo), lt(x, hi)), x),
       lambda g, lo, x, hi: _clamp_tangent(g, lt(hi, x), x))
batching.primitive_batchers[clamp_p] = _clamp_batch_rule
mlir.register_lowering(clamp_p, lambda ctx, lo, x, hi: mlir.hlo.clamp(lo, x, hi))


_FLOAT_BITS = {  # dtype: (unsigned int of the same width, exponent bits, mantissa bits)
    np.dtype(np.float64): (np.uint64, 11, 52), np.dtype(np.float32): (np.uint32, 8, 23),
    np.dtype(np.float16): (np.uint16, 5, 10), np.dtype(dtypes.bfloat16): (np.uint16, 8, 7)}


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    # XLA's algorithm on the bits: round the mantissa to nearest even, then flush exponents out
    # of range to zero or inf (xla/service/elemental_ir_emitter.cc EmitReducePrecisionIR)
    uint, src_exp, src_mant = _FLOAT_BITS[x.dtype]
    bits = np.asarray(x).view(uint).copy()
    one = uint(1)
    if mantissa_bits < src_mant:
        shift = uint(src_mant - mantissa_bits)
        last_bit = one << shift
        bias = (last_bit >> one) - one + ((bits & last_bit) >> shift)
        bits = (bits + bias) & ~(last_bit - one)
    if exponent_bits < src_exp:
        exp_mask = ((one << uint(src_exp)) - one) << uint(src_mant)
        exp_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        signed_zero = bits & (one << uint(8 * bits.itemsize - 1))
        bits = np.where(exponent > uint((exp_bias + reduced_bias) << src_mant),
                        signed_zero | exp_mask,
                        np.where(exponent <= uint((exp_bias - reduced_bias) << src_mant),
                                 signed_zero, bits))
    return np.where(np.isnan(x), x, np.asarray(bits, uint).view(x.dtype))  # NaNs stay NaN


def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    _check_dtype("reduce_precision", x, _float)
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ValueError(f"reduce_precision: needs exponent_bits >= 1 and mantissa_bits >= 0, "
                         f"got {exponent_bits} and {mantissa_bits}")
    return x


def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    i32 = mlir.ir.IntegerType.get_signless(32)
    return mlir.hlo.reduce_precision(x, mlir.ir.IntegerAttr.get(i32, exponent_bits),
                                     mlir.ir.IntegerAttr.get(i32, mantissa_bits))


# JAX: jax/_src/lax/lax.py reduce_precision_p
def reduce_precision(x, exponent_bits: int, mantissa_bits: int):
    """`x` (a float array) rounded to a float format with the given numbers of exponent and
    mantissa bits, keeping its dtype; e.g. (8, 7) rounds to bfloat16. ValueError for
    exponent_bits < 1 or mantissa_bits < 0."""
    return reduce_precision_p.bind(x, exponent_bits=int(exponent_bits),
                                   mantissa_bits=int(mantissa_bits))


reduce_precision_p = Primitive("reduce_precision")
reduce_precision_p.def_impl(_reduce_precision_impl)
reduce_precision_p.def_abstract_eval(_reduce_precision_abstract_eval)
# linear, as JAX declares it: the tangent is rounded the same way
deflinear(reduce_precision_p, lambda ct, x, **params: [
    Zero(x.aval) if type(ct) is Zero else reduce_precision_p.bind(ct, **params)])
defvectorized(reduce_precision_p)
mlir.register_lowering(reduce_precision_p, _reduce_precision_lowering)


# ---------------------------------------------------------------------------------------------
# Shapes: broadcast_in_dim, reshape, transpose, squeeze, rev
# ---------------------------------------------------------------------------------------------

def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions, sharding):
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    out = np.broadcast_to(x.reshape(expanded), shape)
    # materialized, as XLA's result is: NumPy runs several times slower on a stride-0 view, and
    # every later operation on `jnp.ones(...)` would pay for it
    return out if out.size == x.size else out.copy()


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding):
    if any(d < 0 for d in shape):
        raise TypeError(f"broadcast_in_dim: shape must have every element be nonnegative, got "
                        f"{tuple(shape)}")
    ok = (len(broadcast_dimensions) == x.ndim
          and all(0 <= d < len(shape) for d in broadcast_dimensions)
          and list(broadcast_dimensions) == sorted(set(broadcast_dimensions))
          and all(x.shape[i] in (1, shape[d]) for i, d in enumerate(broadcast_dimensions)))
    if not ok:
        raise TypeError(f"broadcast_in_dim: cannot broadcast operand {x.str_short()} to shape "
                        f"{tuple(shape)} with broadcast_dimensions={tuple(broadcast_dimensions)}"
                        "; expected one strictly increasing target dimension per operand "
                        "dimension, each of equal size or size 1 in the operand")
    return x.update(shape=shape)


# JAX: jax/_src/lax/lax.py _broadcast_in_dim_sharding_rule
def _broadcast_in_dim_sharding_rule(x, *, shape, broadcast_dimensions, sharding):
    # the `sharding` asked for, else: an operand dimension keeps its layout where it is not
    # stretched from size 1; an untyped operand: replicated over the mesh in context
    if sharding is not None:
        return sharding
    if x.sharding is None:
        return _replicated(len(shape))
    spec = [None] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] == shape[d]:
            spec[d] = x.sharding.spec[i]
    return NamedSharding(x.sharding.mesh, P(*spec))


def _replicated(ndim: int) -> "NamedSharding | None":
    # a value made of nothing typed: replicated over the mesh in context (JAX's rules'
    # get_abstract_mesh fallback), or untyped
    mesh = context_mesh()
    return None if mesh is None else NamedSharding(mesh, P(*[None] * ndim))


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding):
    # as JAX: sum over every output dimension but those of the operand's non-unit dimensions,
    # then put the operand's unit dimensions back
    if type(ct) is Zero:
        return [Zero(x.aval)]
    unit_dims = tuple(i for i, d in enumerate(x.aval.shape) if d == 1)
    kept = tuple(d for i, d in enumerate(broadcast_dimensions) if i not in unit_dims)
    axes = tuple(d for d in range(len(shape)) if d not in kept)
    return [expand_dims(reduce_sum(ct, axes), unit_dims)]


def _broadcast_in_dim_batch_rule(vals, dims, *, axis_size, shape, broadcast_dimensions,
                                 sharding):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    bdims = (0,) + tuple(np.add(1, broadcast_dimensions))
    if sharding is not None:  # the batch dimension is not split
        sharding = NamedSharding(sharding.mesh, P(None, *sharding.spec))
    return broadcast_in_dim(x, (axis_size,) + tuple(shape), bdims, out_sharding=sharding), 0


def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions, sharding):
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    if not mlir.is_static(shape):  # a symbolic size: computed from the dimension variables
        return mlir.hlo.dynamic_broadcast_in_dim(
            out_type, x, mlir.eval_dynamic_shape_as_tensor(shape), list(broadcast_dimensions))
    return mlir.make_op("stablehlo.broadcast_in_dim", out_type, [x],  # hlo.broadcast_in_dim
                        broadcast_dimensions=mlir.ir.DenseI64ArrayAttr.get(
                            list(broadcast_dimensions)))


def broadcast_in_dim(x, shape: Sequence[int], broadcast_dimensions: Sequence[int], *,
                     out_sharding=None):
    """Broadcast `x` to `shape`; operand dimension i becomes output dimension
    `broadcast_dimensions[i]` (sizes equal, or 1 in the operand). `out_sharding`: the
    result's sharding (default: the operand's, on the dimensions it keeps)."""
    shape = core.canonicalize_shape(shape)
    bdims = tuple(broadcast_dimensions)
    if (not isinstance(x, core.Tracer) and core.get_aval(x).shape == shape
            and bdims == tuple(range(len(shape))) and out_sharding is None):
        return x
    sharding = canonicalize_out_sharding(out_sharding, "broadcast_in_dim")
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=bdims,
                                   sharding=normalize_to_ndim(sharding, len(shape)))


broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.pp_hidden_params = ("shape", "sharding")
broadcast_in_dim_p.pp_hide_if_empty = ("broadcast_dimensions",)
broadcast_in_dim_p.def_impl(_broadcast_in_dim_impl)
broadcast_in_dim_p.def_abstract_eval(_broadcast_in_dim_abstract_eval)
broadcast_in_dim_p.def_sharding_rule(_broadcast_in_dim_sharding_rule, reads_context_mesh=True)
deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch_rule
mlir.register_lowering(broadcast_in_dim_p, _broadcast_in_dim_lowering)


def broadcast(x, sizes: Sequence[int]):
    """Add leading dimensions of `sizes` to `x` (none: `x` itself, no equation, as JAX)."""
    if not len(sizes):
        return x
    aval = core.get_aval(x)
    return broadcast_in_dim(x, tuple(sizes) + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)))


# JAX: jax/_src/lax/lax.py _tri (its op order, so that the lowered modules match)
def _tri(shape: Sequence[int], offset: int):
    """bool[N, M]: True at and below diagonal `offset` (row + offset >= col); tril's mask."""
    return ge(add(broadcasted_iota(np.int32, tuple(shape), 0), np.array(int(offset), np.int32)),
              broadcasted_iota(np.int32, tuple(shape), 1))


def expand_dims(x, dimensions: Sequence[int]):
    """Insert size-1 dimensions at `dimensions` (a broadcast_in_dim, as in JAX)."""
    if not dimensions:
        return x
    aval = core.get_aval(x)
    ndim = aval.ndim + len(dimensions)
    dims = sorted(canonicalize_axis(d, ndim) for d in dimensions)
    shape = list(aval.shape)
    for d in dims:
        shape.insert(d, 1)
    kept = tuple(i for i in range(ndim) if i not in dims)
    return broadcast_in_dim(x, tuple(shape), kept)


def _reshape_abstract_eval(x, *, new_sizes, dimensions, sharding):
    if math.prod(new_sizes) != x.size:
        raise TypeError(f"reshape: total size must be unchanged, got new_sizes={new_sizes} "
                        f"for operand {x.str_short()} of size {x.size}")
    return x.update(shape=new_sizes)


# JAX: jax/_src/lax/lax.py _reshape_transpose_rule
def _reshape_transpose(ct, x, *, new_sizes, dimensions, sharding):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    if dimensions is None:
        return [reshape(ct, x.aval.shape, out_sharding=x.aval.sharding)]
    out = reshape(ct, tuple(x.aval.shape[d] for d in dimensions))
    return [transpose(out, tuple(int(d) for d in np.argsort(dimensions)))]


def _reshape_batch_rule(vals, dims, *, axis_size, new_sizes, dimensions, sharding):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    dims_ = None if dimensions is None else (0,) + tuple(1 + int(d) for d in dimensions)
    return reshape(x, (axis_size,) + tuple(new_sizes), dims_), 0


# JAX: jax/_src/lax/lax.py reshape
def reshape(x, new_sizes: Sequence[int], dimensions=None, *, out_sharding=None):
    """`x` with shape `new_sizes` (same total size), in row-major order; with `dimensions`
    (a permutation of x's axes), of `x` transposed by it first, in the one equation (printed
    `reshape[dimensions=...]`, as JAX's). `out_sharding`: the result's sharding, for reshapes
    whose layout the sharding rule cannot tell."""
    new_sizes = core.canonicalize_shape(new_sizes)
    shape = core.get_aval(x).shape
    if dimensions is not None:
        dimensions = tuple(int(d) for d in dimensions)
        if sorted(dimensions) != list(range(len(shape))):
            raise TypeError(f"reshape dimensions must be a permutation of operand dimensions, "
                            f"got dimensions {dimensions} for shape {shape}.")
        if dimensions == tuple(range(len(shape))):
            dimensions = None
    if shape and shape == new_sizes and dimensions is None:  # as JAX: a rank-0 operand is
        return x                                              # reshaped all the same
    return reshape_p.bind(x, new_sizes=new_sizes, dimensions=dimensions,
                          sharding=canonicalize_out_sharding(out_sharding, "reshape"))


reshape_p = Primitive("reshape")
reshape_p.def_impl(lambda x, *, new_sizes, dimensions, sharding: (
    x if dimensions is None else np.transpose(x, dimensions)).reshape(new_sizes))
reshape_p.def_abstract_eval(_reshape_abstract_eval)
reshape_p.def_sharding_rule(lambda x, *, new_sizes, dimensions, sharding:
                            reshape_sharding_rule(x, new_sizes, sharding))
deflinear(reshape_p, _reshape_transpose)
batching.primitive_batchers[reshape_p] = _reshape_batch_rule
def _reshape_lowering(ctx, x, **params):  # also squeeze's: the result's shape is all it needs
    out = ctx.avals_out[0]
    if not mlir.is_static(out.shape):  # a symbolic size: computed from the dimension vars
        return mlir.hlo.dynamic_reshape(mlir.aval_to_ir_type(out), x,
                                        mlir.eval_dynamic_shape_as_tensor(out.shape))
    return mlir.make_op("stablehlo.reshape", mlir.aval_to_ir_type(out), [x])  # hlo.reshape


mlir.register_lowering(reshape_p, lambda ctx, x, *, dimensions, **params: _reshape_lowering(
    ctx, x if dimensions is None else mlir.hlo.transpose(x, list(dimensions))))


def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the "
                        f"dimensions of operand {x.str_short()}")
    return x.update(shape=tuple(x.shape[p] for p in permutation))


def _transpose_transpose(ct, x, *, permutation):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [transpose(ct, tuple(np.argsort(permutation)))]


def _transpose_batch_rule(vals, dims, *, axis_size, permutation):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


def transpose(x, permutation: Sequence[int]):
    """Permute the dimensions of `x`: output dimension i is operand dimension permutation[i]."""
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(core.get_aval(x).ndim)):
        return x
    return transpose_p.bind(x, permutation=permutation)


transpose_p = Primitive("transpose")
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))
transpose_p.def_abstract_eval(_transpose_abstract_eval)
transpose_p.def_sharding_rule(lambda x, *, permutation: NamedSharding(
    x.sharding.mesh, P(*[x.sharding.spec[p] for p in permutation])))
deflinear(transpose_p, _transpose_transpose)
batching.primitive_batchers[transpose_p] = _transpose_batch_rule
mlir.register_lowering(transpose_p, lambda ctx, x, *, permutation: mlir.make_op(  # hlo.transpose
    "stablehlo.transpose", mlir.aval_to_ir_type(ctx.avals_out[0]), [x],
    permutation=mlir.ir.DenseI64ArrayAttr.get(list(permutation))))


def _squeeze_abstract_eval(x, *, dimensions):
    if any(not 0 <= d < x.ndim or x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"squeeze: dimensions {dimensions} must all be of size 1 in operand "
                         f"{x.str_short()}")
    return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in dimensions))


def _squeeze_transpose(ct, x, *, dimensions):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    return [expand_dims(ct, dimensions)]


def _squeeze_batch_rule(vals, dims, *, axis_size, dimensions):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return squeeze(x, tuple(i + 1 for i in dimensions)), 0


def squeeze(x, dimensions: Sequence[int]):
    """Remove the size-1 `dimensions` of `x`."""
    nd = core.get_aval(x).ndim
    dimensions = tuple(sorted(canonicalize_axis(d, nd) for d in dimensions)) if nd else ()
    if not dimensions:
        return x
    return squeeze_p.bind(x, dimensions=dimensions)


squeeze_p = Primitive("squeeze")
squeeze_p.def_impl(lambda x, *, dimensions: np.squeeze(x, axis=dimensions))
squeeze_p.def_abstract_eval(_squeeze_abstract_eval)
squeeze_p.def_sharding_rule(lambda x, *, dimensions: NamedSharding(
    x.sharding.mesh, P(*[p for i, p in enumerate(x.sharding.spec) if i not in dimensions])))
deflinear(squeeze_p, _squeeze_transpose)
batching.primitive_batchers[squeeze_p] = _squeeze_batch_rule
mlir.register_lowering(squeeze_p, _reshape_lowering)


def _rev_transpose(ct, x, *, dimensions):
    return [Zero(x.aval) if type(ct) is Zero else rev(ct, dimensions)]


def _rev_batch_rule(vals, dims, *, axis_size, dimensions):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return rev(x, tuple(i + 1 for i in dimensions)), 0


def _rev_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < x.ndim for d in dimensions):
        raise TypeError(f"rev: dimensions {dimensions} must be distinct dimensions of operand "
                        f"{x.str_short()}")
    return x


def rev(x, dimensions: Sequence[int]):
    """`x` reversed along `dimensions` (what `x[::-1]` uses)."""
    return rev_p.bind(x, dimensions=tuple(int(d) for d in dimensions))


rev_p = Primitive("rev")
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x)
rev_p.def_abstract_eval(_rev_abstract_eval)
deflinear(rev_p, _rev_transpose)
batching.primitive_batchers[rev_p] = _rev_batch_rule
mlir.register_lowering(rev_p, lambda ctx, x, *, dimensions:
                       mlir.hlo.reverse(x, list(dimensions)))


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

def _reduce_abstract_eval(name: str, kind: str):
    def rule(x, *, axes, out_sharding=None):
        _check_dtype(name, x, kind)
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise ValueError(f"{name}: axes {axes} out of range or repeated for operand "
                             f"{x.str_short()}")
        return x.update(shape=tuple(s for i, s in enumerate(x.shape) if i not in axes))
    return rule


# JAX: jax/_src/lax/lax.py _reduce_op_sharding_rule
def _reduce_sharding_rule(x, *, axes, out_sharding=None, **_):
    if out_sharding is not None:
        return out_sharding
    if x.sharding is None:
        return None
    return NamedSharding(x.sharding.mesh, P(*[p for i, p in enumerate(x.sharding.spec)
                                              if i not in axes]))


def _reduce_lowering(op_name: str, init):
    body_op = f"stablehlo.{op_name.rstrip('_')}"

    def rule(ctx, x, *, axes, out_sharding=None):
        aval_out = ctx.avals_out[0]
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval_out.dtype))
        init_val = mlir.ir_constant(np.array(init(aval_out.dtype), aval_out.dtype))
        # hlo.ReduceOp, hlo.<op_name> and hlo.return_ without the bindings' builders (a few
        # times cheaper, see mlir.make_op): `reduce(x, init) dims; body: return op(a, b)`
        op = mlir.ir.Operation.create(
            "stablehlo.reduce", results=[mlir.aval_to_ir_type(aval_out)], operands=[x, init_val],
            attributes={"dimensions": mlir.ir.DenseI64ArrayAttr.get(list(axes))}, regions=1)
        block = op.regions[0].blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            out = mlir.make_op(body_op, scalar, block.arguments)
            mlir.ir.Operation.create("stablehlo.return", results=[], operands=[out])
        return op.result
    rule.__name__ = f"_reduce_{op_name}_lowering"
    return rule


def _lowest(dtype):
    if dtypes.is_float(dtype):
        return -np.inf
    return False if dtype == np.bool_ else dtypes.iinfo(dtype).min


def _highest(dtype):
    if dtypes.is_float(dtype):
        return np.inf
    return True if dtype == np.bool_ else dtypes.iinfo(dtype).max


def _reduce_sum_transpose(ct, x, *, axes, out_sharding):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    kept = tuple(np.delete(np.arange(x.aval.ndim), axes))
    return [broadcast_in_dim(ct, x.aval.shape, kept, out_sharding=x.aval.sharding)]


def reduce_sum(x, axes: Sequence[int], *, out_sharding=None):
    """Sum of `x` over `axes` (the dimensions are removed). `out_sharding`: the result's
    sharding (default: the operand's, without the summed dimensions)."""
    return reduce_sum_p.bind(x, axes=tuple(axes),
                             out_sharding=canonicalize_out_sharding(out_sharding,
                                                                    "reduce_sum"))


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.def_impl(lambda x, *, axes, out_sharding: np.sum(x, axis=axes, dtype=x.dtype))
reduce_sum_p.def_abstract_eval(_reduce_abstract_eval("reduce_sum", _num))
reduce_sum_p.def_sharding_rule(_reduce_sharding_rule)
deflinear(reduce_sum_p, _reduce_sum_transpose)
defreducer(reduce_sum_p)
mlir.register_lowering(reduce_sum_p, _reduce_lowering("add", lambda d: 0))


# JAX: jax/_src/lax/lax.py _reduce_chooser_jvp_rule
def _reduce_chooser_jvp(g, ans, x, *, axes):
    # the tangent flows from the positions that attain the max (or min), split evenly on ties
    shape = tuple(1 if i in axes else d for i, d in enumerate(core.get_aval(x).shape))
    location_indicators = convert_element_type(eq(x, reshape(ans, shape)),
                                               core.get_aval(g).dtype)
    counts = reduce_sum(location_indicators, axes)
    return div(reduce_sum(mul(g, location_indicators), axes), counts)


def reduce_max(x, axes: Sequence[int]):
    """Maximum of `x` over `axes`."""
    return reduce_max_p.bind(x, axes=tuple(axes))


reduce_max_p = Primitive("reduce_max")
reduce_max_p.def_impl(lambda x, *, axes: np.max(x, axis=axes, initial=_lowest(x.dtype)))
reduce_max_p.def_abstract_eval(_reduce_abstract_eval("reduce_max", _any))
reduce_max_p.def_sharding_rule(_reduce_sharding_rule)
defjvp2(reduce_max_p, _reduce_chooser_jvp)
defreducer(reduce_max_p)
mlir.register_lowering(reduce_max_p, _reduce_lowering("maximum", _lowest))


def reduce_min(x, axes: Sequence[int]):
    """Minimum of `x` over `axes`."""
    return reduce_min_p.bind(x, axes=tuple(axes))


reduce_min_p = Primitive("reduce_min")
reduce_min_p.def_impl(lambda x, *, axes: np.min(x, axis=axes, initial=_highest(x.dtype)))
reduce_min_p.def_abstract_eval(_reduce_abstract_eval("reduce_min", _any))
reduce_min_p.def_sharding_rule(_reduce_sharding_rule)
defjvp2(reduce_min_p, _reduce_chooser_jvp)
defreducer(reduce_min_p)
mlir.register_lowering(reduce_min_p, _reduce_lowering("minimum", _highest))


def _argminmax_abstract_eval(name):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise TypeError(f"{name}: needs exactly one axis within operand {x.str_short()}, "
                            f"got axes={axes}")
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: cannot reduce over an empty axis of {x.str_short()}")
        return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != axes[0]),
                           index_dtype)
    return rule


def _argminmax_lowering(direction: str):
    # A variadic reduce over (value, index) pairs. NaN counts as the extreme value, and ties
    # pick the smaller index, so the result matches numpy's first-occurrence rule.
    def rule(ctx, x, *, axes, index_dtype):
        hlo, ir = mlir.hlo, mlir.ir
        aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
        axis = axes[0]
        idx_aval = ShapedArray(aval_in.shape, index_dtype)
        iota_v = (hlo.iota(mlir.aval_to_ir_type(idx_aval), axis) if mlir.is_static(
            aval_in.shape) else hlo.dynamic_iota(  # a symbolic size (export): computed
                mlir.aval_to_ir_type(idx_aval),
                mlir.eval_dynamic_shape_as_tensor(aval_in.shape), axis))
        val_scalar = mlir.aval_to_ir_type(ShapedArray((), aval_in.dtype))
        idx_scalar = mlir.aval_to_ir_type(ShapedArray((), index_dtype))
        init_v = mlir.ir_constant(np.array(
            _lowest(aval_in.dtype) if direction == "GT" else _highest(aval_in.dtype),
            aval_in.dtype))
        init_i = mlir.ir_constant(np.array(0, index_dtype))
        op = hlo.ReduceOp([mlir.aval_to_ir_type(aval_out.update(dtype=aval_in.dtype)),
                           mlir.aval_to_ir_type(aval_out)],
                          [x, iota_v], [init_v, init_i], [axis])
        block = op.regions[0].blocks.append(val_scalar, idx_scalar, val_scalar, idx_scalar)
        is_float = dtypes.is_float(aval_in.dtype)
        ctype = hlo.ComparisonTypeAttr.get("FLOAT" if is_float else (
            "UNSIGNED" if aval_in.dtype.kind in "ub" else "SIGNED"))
        cmp = lambda a, b, d: hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(d),
                                          compare_type=ctype)
        icmp = lambda a, b, d: hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(d),
                                           compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))
        with ir.InsertionPoint(block):
            va, ia, vb, ib = block.arguments
            better = cmp(va, vb, direction)
            same = cmp(va, vb, "EQ")
            if is_float:
                a_nan, b_nan = cmp(va, va, "NE"), cmp(vb, vb, "NE")
                better = hlo.or_(better, hlo.and_(a_nan, hlo.not_(b_nan)))
                same = hlo.or_(same, hlo.and_(a_nan, b_nan))
            pick_a = hlo.or_(better, hlo.and_(same, icmp(ia, ib, "LT")))
            hlo.return_([hlo.select(pick_a, va, vb), hlo.select(pick_a, ia, ib)])
        return op.results[1]
    return rule


def argmax(x, axis: int, index_dtype=np.int32):
    """Index of the largest element along `axis` (first one on ties; NaN counts as largest)."""
    axis = canonicalize_axis(axis, core.get_aval(x).ndim)
    return argmax_p.bind(x, axes=(axis,), index_dtype=np.dtype(index_dtype))


argmax_p = Primitive("argmax")
argmax_p.def_impl(lambda x, *, axes, index_dtype: np.argmax(x, axis=axes[0]).astype(index_dtype))
argmax_p.def_abstract_eval(_argminmax_abstract_eval("argmax"))
argmax_p.def_sharding_rule(_reduce_sharding_rule)
defjvp_zero(argmax_p)
defreducer(argmax_p)
mlir.register_lowering(argmax_p, _argminmax_lowering("GT"))


def argmin(x, axis: int, index_dtype=np.int32):
    """Index of the smallest element along `axis` (first one on ties; NaN counts as smallest)."""
    axis = canonicalize_axis(axis, core.get_aval(x).ndim)
    return argmin_p.bind(x, axes=(axis,), index_dtype=np.dtype(index_dtype))


argmin_p = Primitive("argmin")
argmin_p.def_impl(lambda x, *, axes, index_dtype: np.argmin(x, axis=axes[0]).astype(index_dtype))
argmin_p.def_abstract_eval(_argminmax_abstract_eval("argmin"))
argmin_p.def_sharding_rule(_reduce_sharding_rule)
defjvp_zero(argmin_p)
defreducer(argmin_p)
mlir.register_lowering(argmin_p, _argminmax_lowering("LT"))


# ---------------------------------------------------------------------------------------------
# dot_general
# ---------------------------------------------------------------------------------------------

def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                      out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = preferred_element_type or lhs.dtype
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):  # as the lowering does
        l_t, r_t, acc_t = _dot_algorithm_types(precision, lhs.dtype, rhs.dtype, out_dtype)
        out = _dot_general_impl(lhs.astype(l_t, copy=False), rhs.astype(r_t, copy=False),
                                dimension_numbers=dimension_numbers, precision=None,
                                preferred_element_type=np.dtype(acc_t))
        return _convert_element_type_impl(out, new_dtype=out_dtype, weak_type=False)
    # accumulate in the output dtype (int8 operands with an int32 result must not wrap); numpy
    # has no bfloat16 products, which accumulate in float32 (as XLA on CPU does)
    acc_dtype = np.float32 if out_dtype == dtypes.bfloat16 else out_dtype
    if dtypes.is_float(lhs.dtype) and not dtypes.is_float(out_dtype):
        acc_dtype = lhs.dtype  # float operands, integer result: XLA multiplies in float
    lhs, rhs = lhs.astype(acc_dtype, copy=False), rhs.astype(acc_dtype, copy=False)
    product = _numpy_product(lhs.ndim, rhs.ndim, dimension_numbers)
    if product is not None:
        out = product(lhs, rhs)
    else:
        letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        l_sub = [next(letters) for _ in range(lhs.ndim)]
        r_sub = [next(letters) for _ in range(rhs.ndim)]
        for a, b in zip(lc + lb, rc + rb):
            r_sub[b] = l_sub[a]
        batch = [l_sub[a] for a in lb]
        l_free = [s for i, s in enumerate(l_sub) if i not in lc and i not in lb]
        r_free = [s for i, s in enumerate(r_sub) if i not in rc and i not in rb]
        spec = f"{''.join(l_sub)},{''.join(r_sub)}->{''.join(batch + l_free + r_free)}"
        out = np.einsum(spec, lhs, rhs)
    if out.dtype != out_dtype and dtypes.is_float(out.dtype):  # XLA's conversion (saturating)
        return _convert_element_type_impl(out, new_dtype=out_dtype, weak_type=False)
    return out.astype(out_dtype, copy=False)


def _numpy_product(nl: int, nr: int, dimension_numbers):
    """NumPy's own product for dimension numbers it computes as they are, else None."""
    (lc, rc), (lb, rb) = dimension_numbers
    if not lb and nl >= 1 and 1 <= nr <= 2 and lc == (nl - 1,) \
            and rc == (0 if nr == 1 else nr - 2,):
        return np.ndarray.dot  # jnp.dot's contraction (BLAS for floats): np.dot, unwrapped
    if (nl == nr == len(lb) + 2 and lb == rb == tuple(range(len(lb)))
            and lc == (nl - 1,) and rc == (nr - 2,)):
        return np.matmul  # batched matrix products (jnp.matmul's)
    return None


def _dot_general_specialized_impl(lhs, rhs, *, dimension_numbers, precision,
                                  preferred_element_type, out_sharding=None):
    # minijax/dispatch.py specialized_impls: operands already of the output dtype need no
    # conversion, and NumPy's product is the whole impl
    out_dtype = preferred_element_type or lhs.dtype
    if lhs.dtype != out_dtype or rhs.dtype != out_dtype or out_dtype == dtypes.bfloat16 or (
            precision is not None and type(precision) is not tuple):  # a dot algorithm
        return None
    return _numpy_product(lhs.ndim, rhs.ndim, dimension_numbers)


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding):
    (lc, rc), (lb, rb) = dimension_numbers

    def error(what: str) -> TypeError:  # built only when raised: this rule is on the hot path
        return TypeError(f"dot_general({lhs.str_short()}, {rhs.str_short()}, "
                         f"dimension_numbers={dimension_numbers}): {what}")
    if lhs.dtype != rhs.dtype:
        raise error("operands must have the same dtype (jnp.dot promotes)")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise error("contracting/batch dimension lists differ in length")
    for a, b in zip(lc + lb, rc + rb):
        if not (0 <= a < lhs.ndim and 0 <= b < rhs.ndim) or lhs.shape[a] != rhs.shape[b]:
            raise error(f"dimension sizes do not match (lhs dim {a} vs rhs dim {b})")
    batch = [lhs.shape[a] for a in lb]
    l_free = [s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb]
    r_free = [s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb]
    dtype = preferred_element_type or lhs.dtype
    return ShapedArray(tuple(batch + l_free + r_free), dtype,
                       lhs.weak_type and rhs.weak_type)


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _remaining(original, *removed):
    removed = set().union(*map(set, removed))
    return [i for i in original if i not in removed]


def _dot_general_transpose_lhs(ct, x, y, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding, swap_ans=False):
    # The cotangent of x contracts ct with y over y's free dimensions (and batches over the
    # batch dimensions); a final transpose puts x's dimensions back in their original order.
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_aval = x.aval if is_undefined_primal(x) else core.get_aval(x)
    y_ndim = core.get_aval(y).ndim if not is_undefined_primal(y) else y.aval.ndim
    x_kept = _remaining(range(x_aval.ndim), x_contract, x_batch)
    y_kept = _remaining(range(y_ndim), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    out_axes = np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    ct_dtype = core.get_aval(ct).dtype
    if core.get_aval(y).dtype != ct_dtype:  # preferred_element_type made ct wider than y
        y = convert_element_type(y, ct_dtype)
    # the cotangent carries the primal's sharding (JAX does the same): spelled out here, as
    # a contracting dimension may be split on both ct and y
    x_sh = None
    if x_aval.sharding is not None:
        inv = np.argsort(out_axes)
        x_sh = NamedSharding(x_aval.sharding.mesh,
                             P(*[x_aval.sharding.spec[int(i)] for i in inv]))
    x_bar = dot_general(ct, y, dims, precision=precision,
                        preferred_element_type=preferred_element_type, out_sharding=x_sh)
    x_bar = transpose(x_bar, tuple(int(a) for a in out_axes))
    if core.get_aval(x_bar).dtype != x_aval.dtype:
        x_bar = convert_element_type(x_bar, x_aval.dtype)
    return x_bar


def _dot_general_transpose(ct, x, y, *, dimension_numbers, precision, preferred_element_type,
                           out_sharding):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x):
        return [_dot_general_transpose_lhs(ct, x, y, dimension_numbers=dimension_numbers,
                                           precision=precision,
                                           preferred_element_type=preferred_element_type,
                                           out_sharding=None),
                None]
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return [None, _dot_general_transpose_lhs(ct, y, x, dimension_numbers=swapped,
                                             precision=precision,
                                             preferred_element_type=preferred_element_type,
                                             out_sharding=None, swap_ans=True)]


def _dot_general_batch_rule(vals, dims, *, axis_size, dimension_numbers, precision,
                            preferred_element_type, out_sharding):
    (lhs, rhs), (ld, rd) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    shift = lambda ds: tuple(d + 1 for d in ds)
    def params(out_dim):  # an out_sharding given for the unbatched result: the batch dim
        if out_sharding is None:  # is not split
            return dict(precision=precision, preferred_element_type=preferred_element_type)
        spec = list(out_sharding.spec)
        return dict(precision=precision, preferred_element_type=preferred_element_type,
                    out_sharding=NamedSharding(out_sharding.mesh,
                                               P(*spec[:out_dim], None, *spec[out_dim:])))
    if ld is not not_mapped and rd is not not_mapped:
        lhs, rhs = batching.moveaxis(lhs, ld, 0), batching.moveaxis(rhs, rd, 0)
        dn = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        return dot_general(lhs, rhs, dn, **params(0)), 0
    if ld is not not_mapped:
        # the batch axis becomes the first free dimension of lhs
        lhs = batching.moveaxis(lhs, ld, 0)
        dn = ((shift(lc), rc), (shift(lb), rb))
        return dot_general(lhs, rhs, dn, **params(len(lb))), len(lb)
    rhs = batching.moveaxis(rhs, rd, 0)
    dn = ((lc, shift(rc)), (lb, shift(rb)))
    lhs_ndim = core.get_aval(lhs).ndim
    n_lhs_free = lhs_ndim - len(lc) - len(lb)
    return dot_general(lhs, rhs, dn, **params(len(lb) + n_lhs_free)), len(lb) + n_lhs_free


# JAX: jax/_src/lax/lax.py _dot_general_lower — one rule per platform, as in JAX (the CPU's
# refuses the algorithms XLA's CPU backend would silently ignore)
def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision,
                          preferred_element_type, out_sharding, platform="default"):
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = mlir.hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    aval_out = ctx.avals_out[0]
    if not isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        config_attr = mlir.ir.ArrayAttr.get(  # as JAX: DEFAULT written out when none is given
            [mlir.hlo.PrecisionAttr.get(Precision(p).name)
             for p in precision or (Precision.DEFAULT,) * 2])
        return mlir.make_op("stablehlo.dot_general", mlir.aval_to_ir_type(aval_out),  # hlo.
                            [lhs, rhs], dot_dimension_numbers=dnums, precision_config=config_attr)
    # a dot algorithm: operands converted to its types, the product accumulated in its type
    # and converted to the result's, the algorithm written on the op (JAX:
    # jax/_src/lax/lax.py _handle_dot_precision)
    (l_aval, r_aval), types = ctx.avals_in, _dot_algorithm_types(
        precision, ctx.avals_in[0].dtype, ctx.avals_in[1].dtype, aval_out.dtype, platform)
    lhs, rhs = (x if a.dtype == t else mlir.hlo.convert(
        mlir.aval_to_ir_type(ShapedArray(a.shape, t)), x)
        for x, a, t in ((lhs, l_aval, types[0]), (rhs, r_aval, types[1])))
    acc_aval = ShapedArray(aval_out.shape, types[2])
    extra = {} if precision is DotAlgorithmPreset.DEFAULT else {
        "algorithm": _dot_algorithm_attr(precision, types)}
    out = mlir.hlo.dot_general(mlir.aval_to_ir_type(acc_aval), lhs, rhs, dnums,
                               precision_config=mlir.ir.ArrayAttr.get(
                                   [mlir.hlo.PrecisionAttr.get("DEFAULT")] * 2), **extra)
    return out if acc_aval.dtype == aval_out.dtype else mlir.hlo.convert(
        mlir.aval_to_ir_type(aval_out), out)


# JAX: jax/_src/lax/lax.py Precision
class Precision(enum.Enum):
    """How many passes a matrix product on an accelerator makes over low-precision parts
    of float32 operands: DEFAULT (one, bfloat16), HIGH (three, about tensorfloat32), HIGHEST
    (float32). CPUs compute in float32 whatever it says; the lowering passes it to XLA."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {"default": "DEFAULT", "bfloat16": "DEFAULT", "fastest": "DEFAULT",
                 "high": "HIGH", "bfloat16_3x": "HIGH", "tensorfloat32": "HIGH",
                 "highest": "HIGHEST", "float32": "HIGHEST"}
        return cls[names[value]] if value in names else None

    def __repr__(self) -> str:
        return f"Precision.{self.name}"

    def __str__(self) -> str:  # the bare name, as JAX prints it
        return self.name


# JAX: jax/_src/lax/lax.py canonicalize_precision
def canonicalize_precision(precision):
    """None (or, unset, `jax_default_matmul_precision`), a Precision or its lower-case name,
    or a pair of them, as a pair of Precisions or None; a DotAlgorithm, a DotAlgorithmPreset
    or a preset's name (e.g. "BF16_BF16_F32_X3") as itself. Raises ValueError for anything
    else (a preset the CPU cannot run is refused later, when the product is computed)."""
    if precision is None:
        precision = config.jax_default_matmul_precision
        if precision is None:
            return None
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        return precision
    if isinstance(precision, str) and precision not in _PRECISION_NAMES \
            and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    if isinstance(precision, Precision) or (isinstance(precision, str)
                                            and precision in _PRECISION_NAMES):
        return (Precision(precision),) * 2
    if isinstance(precision, (tuple, list)) and len(precision) == 2 and all(
            isinstance(p, Precision) or p in _PRECISION_NAMES for p in precision):
        return tuple(Precision(p) for p in precision)
    raise ValueError(f"Precision argument must be one of:\n- None,\n- a string in "
                     f"{list(_PRECISION_NAMES)},\n- a lax.Precision value,\n- a tuple of two "
                     f"lax.Precision values or strings,\n- a lax.DotAlgorithmPreset or the "
                     f"name of one of these presets, or\n- a lax.DotAlgorithm value;\n"
                     f"but got {precision}.")


_PRECISION_NAMES = ("highest", "float32", "high", "bfloat16_3x", "tensorfloat32", "default",
                    "bfloat16", "fastest")


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """Generalized tensor contraction.

    Args:
      dimension_numbers: `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`,
        tuples of dimension indices.
      preferred_element_type: output dtype (default: the operands' dtype).
      out_sharding: the result's NamedSharding (a PartitionSpec under `set_mesh`); needed
        when both operands split a contracting dimension (sharding in types).
    Returns: an array of shape `batch + lhs_free + rhs_free`.
    Raises TypeError on mismatched dtypes or dimension sizes, ShardingTypeError when the
    result's sharding is ambiguous.
    """
    global _last_dot_general_params
    last = _last_dot_general_params
    if dimension_numbers is last[0] and preferred_element_type is last[1]:
        dn, pet = last[2]  # the very objects of the last call (a loop of one jnp.dot)
    else:
        try:
            dn, pet = _canonical_dot_general_params(dimension_numbers, preferred_element_type)
            _last_dot_general_params = (dimension_numbers, preferred_element_type, (dn, pet))
        except TypeError:  # unhashable (lists): not cached
            dn, pet = _canonical_dot_general_params.__wrapped__(dimension_numbers,
                                                                preferred_element_type)
    if out_sharding is not None:
        out_sharding = canonicalize_out_sharding(out_sharding, "dot_general")
    if precision is not None or config.jax_default_matmul_precision is not None:
        precision = canonicalize_precision(precision)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=pet, out_sharding=out_sharding)


# JAX: jax/_src/lax/lax.py dot
def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """`dot_general` with the matrix-product dimension numbers when none are given: lhs
    `[m]` or `[m,k]` contracted on its last axis with rhs `[k]` or `[k,n]`. Operands of one
    dtype, as `dot_general` takes them. Raises ValueError for other ranks without
    `dimension_numbers`. Mirrors jax/_src/lax/lax.py: dot."""
    if dimension_numbers is None:
        ls, rs = np.shape(lhs), np.shape(rhs)
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError("lax.dot: dimension_numbers must be specified when not performing "
                             "simple un-batched matrix-matrix, matrix-vector, or vector-vector "
                             f"products; got lhs_shape={ls} rhs_shape={rs}")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision=precision,
                       preferred_element_type=preferred_element_type, out_sharding=out_sharding)


# the last hashable (so immutable) arguments canonicalized, checked by identity before the
# cache below is asked: hashing the dimension numbers costs more than the rest of the call
_last_dot_general_params: tuple = (object(), object(), None)


@functools.lru_cache(maxsize=256)
def _canonical_dot_general_params(dimension_numbers, preferred_element_type) -> tuple:
    # the params as dot_general_p takes them: tuples of ints, a numpy dtype or None (cached:
    # they are the same for every call of one jnp.dot)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(int(d) for d in lc), tuple(int(d) for d in rc)),
          (tuple(int(d) for d in lb), tuple(int(d) for d in rb)))
    return dn, None if preferred_element_type is None else np.dtype(preferred_element_type)


dot_general_p = Primitive("dot_general")
dot_general_p.pp_hidden_params = ("out_sharding",)
dot_general_p.pp_hide_if_empty = ("precision", "preferred_element_type")
dot_general_p.pp_param_formatters = {  # JAX prints the dimension lists as lists
    "dimension_numbers": lambda dn: str(tuple(tuple(list(d) for d in pair) for pair in dn))}
dot_general_p.def_impl(_dot_general_impl)
dispatch.specialized_impls[dot_general_p] = _dot_general_specialized_impl
dot_general_p.def_abstract_eval(_dot_general_abstract_eval)
dot_general_p.def_sharding_rule(lambda lhs, rhs, *, dimension_numbers, out_sharding, **_:
                                dot_general_sharding_rule(lhs, rhs, dimension_numbers,
                                                          out_sharding))
defjvp(dot_general_p,
       lambda g, x, y, **p: dot_general_p.bind(g, y, **p),
       lambda g, x, y, **p: dot_general_p.bind(x, g, **p))
ad.primitive_transposes[dot_general_p] = _dot_general_transpose
batching.primitive_batchers[dot_general_p] = _dot_general_batch_rule
mlir.register_lowering(dot_general_p, _dot_general_lowering)
for _platform in ("cpu", "tpu"):
    mlir.register_lowering(dot_general_p, functools.partial(_dot_general_lowering,
                                                            platform=_platform), _platform)


# ---------------------------------------------------------------------------------------------
# ragged_dot_general
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/lax.py RaggedDotDimensionNumbers
@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dimensions of a `ragged_dot_general`: `dot_dimension_numbers` as `dot_general`
    takes them, the one lhs dimension that is split into groups (`lhs_ragged_dimensions`) and
    the rhs dimension that indexes the groups (`rhs_group_dimensions`: one when the ragged
    dimension is a free lhs dimension, none otherwise). Sequences are stored as tuples."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        dn = tuple(tuple(tuple(int(d) for d in ds) for ds in pair)
                   for pair in dot_dimension_numbers)
        object.__setattr__(self, "dot_dimension_numbers", dn)
        object.__setattr__(self, "lhs_ragged_dimensions",
                           tuple(int(d) for d in lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions",
                           tuple(int(d) for d in rhs_group_dimensions))


# JAX: jax/_src/lax/lax.py RaggedDotMode
class RaggedDotMode(enum.Enum):
    RAGGED_NONCONTRACTING = 1  # [b,m,k], [g,b,k,n], [b,g] -> [b,m,n]
    RAGGED_CONTRACTING = 2     # [b,m,k], [b,k,n],   [b,g] -> [g,b,m,n]
    RAGGED_BATCH = 3           # [b,m,k], [b,k,n],   [g]   -> [b,m,n]


def _ragged_dot_mode_and_dim(lhs_ndim: int, rdn: RaggedDotDimensionNumbers):
    (lc, _), (lb, _) = rdn.dot_dimension_numbers
    (ragged,) = rdn.lhs_ragged_dimensions
    if ragged in lc:
        return RaggedDotMode.RAGGED_CONTRACTING, ragged
    if ragged in lb:
        return RaggedDotMode.RAGGED_BATCH, ragged
    return RaggedDotMode.RAGGED_NONCONTRACTING, ragged


def _ragged_dot_prefix_dims(mode, ndim: int, ragged: int, batch, contract) -> list[int]:
    """The operand dimensions that index group_sizes ahead of its last (group) axis."""
    free = _remaining(range(ndim), contract, batch)
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        return list(batch) + free[:free.index(ragged)]
    if mode is RaggedDotMode.RAGGED_CONTRACTING:
        return list(batch) + list(contract[:list(contract).index(ragged)])
    return list(batch[:list(batch).index(ragged)])


def _ragged_mask_np(shape, dim: int, gs, prefix) -> np.ndarray:
    # mask[j, i...] says element i... of an operand of `shape` lies in group j along `dim`
    ends = np.cumsum(gs, axis=-1)
    order = np.argsort(prefix)
    keep = [1] * len(shape)
    for p in prefix:
        keep[p] = shape[p]
    def place(a):  # (prefix..., g) -> (g, 1 or prefix size per operand dimension)
        return np.moveaxis(a, -1, 0).transpose(0, *(order + 1)).reshape(-1, *keep)
    pos = np.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(len(shape))])
    return (place(ends - gs) <= pos) & (pos < place(ends))


def _ragged_to_dense(x, dim: int, gs, prefix):
    # the expansion as minijax operations, in the order of JAX's CPU lowering: broadcast x,
    # iota, a cumsum of the sizes, the starts shifted from the ends, two compares, a select
    from minijax.lax.control_flow.loops import cumsum  # loops imports this module
    g_shape = core.get_aval(gs).shape
    n = len(g_shape)
    full = (g_shape[-1],) + tuple(core.get_aval(x).shape)
    xb = broadcast_in_dim(x, full, tuple(range(1, len(full))))
    pos = broadcasted_iota(core.get_aval(gs).dtype, full, dim + 1)
    ends = cumsum(gs, axis=n - 1)
    starts = concatenate([slice(full_like(gs, 0), [0] * n, (*g_shape[:-1], 1)),
                          slice(ends, [0] * n, (*g_shape[:-1], g_shape[-1] - 1))], n - 1)
    order = [int(i) for i in np.argsort(prefix)]
    dims = (0,) + tuple(sorted(p + 1 for p in prefix))
    ends, starts = (broadcast_in_dim(transpose(a, [n - 1] + order), full, dims)
                    for a in (ends, starts))
    mask = bitwise_and(le(starts, pos), lt(pos, ends))
    return select(mask, xb, full_like(xb, 0))


def _ragged_dot_general_dense(lhs, rhs, group_sizes, rdn, precision, preferred_element_type,
                              xp):
    """ragged_dot_general as one dot_general of operands expanded with a leading group
    axis (zero outside each group). `xp` is numpy (the impl) or minijax's lax (the lowering)."""
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    mode, ragged = _ragged_dot_mode_and_dim(len(lhs_shape), rdn)
    (lc, rc), (lb, rb) = rdn.dot_dimension_numbers
    prefix = _ragged_dot_prefix_dims(mode, len(lhs_shape), ragged, lb, lc)
    inc = lambda ds: tuple(d + 1 for d in ds)
    eager = xp is np

    def expand(x, shape, dim, prefix):
        gs = group_sizes
        if np.ndim(gs) == 1 and prefix:  # [g] stands for every prefix index
            gshape = tuple(shape[p] for p in prefix) + (np.shape(gs)[0],)
            gs = (np.broadcast_to(gs, gshape) if eager
                  else broadcast_in_dim(gs, gshape, (len(prefix),)))
        if eager:
            return np.where(_ragged_mask_np(shape, dim, gs, prefix), x[None],
                            np.zeros((), x.dtype))
        return _ragged_to_dense(x, dim, gs, prefix)

    dot = _dot_general_impl if eager else dot_general
    pet = None if preferred_element_type is None else np.dtype(preferred_element_type)
    common = _ragged_dot_operand_dtype(np.dtype(lhs.dtype), np.dtype(rhs.dtype))
    if not eager and lhs.dtype != rhs.dtype:  # minijax's dot_general takes one dtype
        lhs, rhs = convert_element_type(lhs, common), convert_element_type(rhs, common)
    elif eager:
        pet = pet or common
    params = dict(precision=precision, preferred_element_type=pet)
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        (rg,) = rdn.rhs_group_dimensions
        dn = ((inc(lc) + (0,), rc + (rg,)), (inc(lb), rb))
        return dot(expand(lhs, lhs_shape, ragged, prefix), rhs, dimension_numbers=dn, **params)
    if mode is RaggedDotMode.RAGGED_CONTRACTING:
        r_ragged = rc[lc.index(ragged)]
        r_prefix = _ragged_dot_prefix_dims(mode, len(rhs_shape), r_ragged, rb, rc)
        dn = ((inc(lc), inc(rc)), ((0,) + inc(lb), (0,) + inc(rb)))
        return dot(expand(lhs, lhs_shape, ragged, prefix),
                   expand(rhs, rhs_shape, r_ragged, r_prefix), dimension_numbers=dn, **params)
    return dot(lhs, rhs, dimension_numbers=rdn.dot_dimension_numbers, **params)


def _ragged_dot_general_impl(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers, precision,
                             preferred_element_type, group_offset, out_sharding):
    return _ragged_dot_general_dense(lhs, rhs, np.asarray(group_sizes),
                                     ragged_dot_dimension_numbers, precision,
                                     preferred_element_type, np)


def _ragged_dot_general_abstract_eval(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers,
                                      precision, preferred_element_type, group_offset,
                                      out_sharding):
    rdn = ragged_dot_dimension_numbers
    def error(what: str) -> TypeError:
        return TypeError(f"ragged_dot_general({lhs.str_short()}, {rhs.str_short()}, "
                         f"{group_sizes.str_short()}): {what}")
    def check_in_range(dim, ndim, dim_name, arg_name):
        if not 0 <= dim < ndim:
            raise error(f"ragged_dot_general requires {dim_name} numbers to be nonnegative and "
                        f"less than the number of axes of the {arg_name} value, got {dim} for "
                        f"{arg_name} of rank {ndim}.")
    if len(rdn.lhs_ragged_dimensions) != 1:
        raise error("ragged_dot_general expects exactly one lhs ragged dimension.")
    ragged = rdn.lhs_ragged_dimensions[0]
    check_in_range(ragged, lhs.ndim, "lhs ragged dimension", "lhs")
    (lc, rc), (lb, rb) = rdn.dot_dimension_numbers
    for ds, x, side in ((lc + lb, lhs, "lhs"), (rc + rb, rhs, "rhs")):
        for d in ds:
            check_in_range(d, x.ndim, "dot dimension", side)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise error("contracting/batch dimension lists differ in length")
    for a, b in zip(lc + lb, rc + rb):
        if lhs.shape[a] != rhs.shape[b]:
            raise error(f"dimension sizes do not match (lhs dim {a} vs rhs dim {b})")
    mode, _ = _ragged_dot_mode_and_dim(lhs.ndim, rdn)
    if group_sizes.ndim == 0:
        raise error("expected rank of group_sizes to be >=1.")
    if group_sizes.ndim != 1:
        prefix = _ragged_dot_prefix_dims(mode, lhs.ndim, ragged, lb, lc)
        expected = tuple(lhs.shape[i] for i in prefix) + (group_sizes.shape[-1],)
        if group_sizes.shape != expected:
            raise error(f"expected group_sizes to have shape {expected}, got "
                        f"{group_sizes.shape}.")
    g = group_sizes.shape[-1]
    groups = rdn.rhs_group_dimensions
    if mode is not RaggedDotMode.RAGGED_NONCONTRACTING and groups:
        raise error("ragged_dot_general requires zero group dimensions in the rhs when lhs "
                    "ragged dimension is contracting or batch.")
    if mode is RaggedDotMode.RAGGED_NONCONTRACTING:
        if len(groups) != 1:
            raise error("ragged_dot_general requires exactly one rhs group dimension when lhs "
                        "ragged dimension is noncontracting.")
        check_in_range(groups[0], rhs.ndim, "rhs group dimension", "rhs")
        if groups[0] in rb or groups[0] in rc:
            raise error("ragged_dot_general requires rhs group dimension numbers to be "
                        "distinct from contracting and batch dimensions.")
        if rhs.shape[groups[0]] != g:
            raise error(f"expected rhs group dimension size to be {g}, got "
                        f"{rhs.shape[groups[0]]}.")
    if not dtypes.issubdtype(group_sizes.dtype, np.integer):
        raise error("ragged_dot_general requires that group_sizes.dtype is subtype of "
                    "np.integer.")
    l_free = [lhs.shape[i] for i in _remaining(range(lhs.ndim), lc, lb)]
    r_free = [rhs.shape[i] for i in _remaining(range(rhs.ndim), rc, rb, groups)]
    shape = ((g,) if mode is RaggedDotMode.RAGGED_CONTRACTING else ()) + tuple(
        [lhs.shape[i] for i in lb] + l_free + r_free)
    dtype = _ragged_dot_operand_dtype(lhs.dtype, rhs.dtype, error)
    if preferred_element_type is not None:
        dtype = np.dtype(preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _ragged_dot_operand_dtype(a: np.dtype, b: np.dtype, error=None) -> np.dtype:
    # JAX's _dot_general_dtype_rule (XLA's HigherPrecisionType): operands of two dtypes meet
    # in the one with more exponent, then mantissa, then bits (a transpose multiplies an f32
    # cotangent by a bf16 operand)
    def rank(dt):
        fl = dtypes.issubdtype(dt, np.floating)
        fi = dtypes.finfo(dt) if fl else None
        bits = fi.bits if fl else (1 if dt == np.bool_ else dtypes.iinfo(dt).bits)
        return (dtypes.issubdtype(dt, np.complexfloating), fi.maxexp if fl else -1,
                fi.nmant if fl else -1, bits, not dtypes.issubdtype(dt, np.unsignedinteger))
    if a != b and rank(a) == rank(b):
        raise (error or TypeError)(f"lax.ragged_dot_general argument type error: {a}, {b}")
    return a if rank(a) >= rank(b) else b


def _ragged_dot_general_jvp(primals, tangents, **params):
    (x, y, gs), (dx, dy, _) = primals, tangents
    out = ragged_dot_general_p.bind(x, y, gs, **params)
    t = Zero(core.get_aval(out).to_tangent_aval())
    if type(dx) is not Zero:
        t = ad.add_tangents(t, ragged_dot_general_p.bind(dx, y, gs, **params))
    if type(dy) is not Zero:
        t = ad.add_tangents(t, ragged_dot_general_p.bind(x, dy, gs, **params))
    return out, t


def _ragged_dot_general_transpose(ct, x, y, group_sizes, *, ragged_dot_dimension_numbers,
                                  precision, preferred_element_type, group_offset,
                                  out_sharding):
    rdn = ragged_dot_dimension_numbers
    (x_contract, y_contract), (x_batch, y_batch) = rdn.dot_dimension_numbers
    x_aval = x.aval if is_undefined_primal(x) else core.get_aval(x)
    y_aval = y.aval if is_undefined_primal(y) else core.get_aval(y)
    if type(ct) is Zero:
        return [Zero(x_aval) if is_undefined_primal(x) else None,
                Zero(y_aval) if is_undefined_primal(y) else None, None]
    mode, ragged = _ragged_dot_mode_and_dim(x_aval.ndim, rdn)
    if mode is not RaggedDotMode.RAGGED_NONCONTRACTING:  # as in JAX
        raise NotImplementedError(f"transpose rule for 'ragged_dot_general' in mode {mode.name} "
                                  "not implemented (JAX has none either) — see "
                                  "chapters/28-ragged-dot-gmm.md")
    y_group = rdn.rhs_group_dimensions
    x_kept = _remaining(range(x_aval.ndim), x_contract, x_batch)
    y_kept = _remaining(range(y_aval.ndim), y_contract, y_batch, y_group)

    def grad(lhs, rhs, dims, unsorted_axes, aval):
        out = ragged_dot_general(lhs, rhs, group_sizes, dims, precision=precision,
                                 preferred_element_type=preferred_element_type)
        out = transpose(out, tuple(int(a) for a in np.argsort(unsorted_axes)))
        if core.get_aval(out).dtype != aval.dtype:
            out = convert_element_type(out, aval.dtype)
        return out
    x_bar = y_bar = None
    if is_undefined_primal(x):
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
        dims = RaggedDotDimensionNumbers(((ans_y, y_kept), (ans_batch, y_batch)),
                                         [len(x_batch) + x_kept.index(ragged)], y_group)
        x_sorted = [x_contract[i] for i in np.argsort(y_contract)]
        x_bar = grad(ct, y, dims, list(x_batch) + x_kept + x_sorted, x_aval)
    else:
        ans_batch, ans_x, _ = _ranges_like(x_batch, x_kept, y_kept)
        dims = RaggedDotDimensionNumbers(((x_kept, ans_x), (x_batch, ans_batch)), [ragged], [])
        y_sorted = [y_contract[i] for i in np.argsort(x_contract)]
        y_bar = grad(x, ct, dims, list(y_group) + list(y_batch) + y_sorted + y_kept, y_aval)
    return [x_bar, y_bar, None]


def _ragged_dot_general_batch_rule(vals, dims, *, axis_size, ragged_dot_dimension_numbers,
                                   **params):
    # every operand gets the mapped axis in front (an unmapped lhs or rhs is broadcast), and
    # the dimension numbers gain that axis as a batch dimension; JAX takes only all-mapped-at-0
    lhs, rhs, gs = vals
    rdn = ragged_dot_dimension_numbers
    (lc, rc), (lb, rb) = rdn.dot_dimension_numbers
    lhs_ndim = np.ndim(lhs) - (dims[0] is not not_mapped)
    mode, ragged = _ragged_dot_mode_and_dim(lhs_ndim, rdn)
    prefix = _ragged_dot_prefix_dims(mode, lhs_ndim, ragged, lb, lc)
    lhs, rhs = (batching.bdim_at_front(v, d, axis_size) for v, d in zip((lhs, rhs), dims[:2]))
    if dims[2] is not not_mapped:
        gs = batching.moveaxis(gs, dims[2], 0)
        if np.ndim(gs) == 2 and prefix:  # [B, g] for every prefix index: spell it out
            sizes = [np.shape(lhs)[p + 1] for p in prefix]
            gs = broadcast_in_dim(gs, (axis_size, *sizes, np.shape(gs)[1]),
                                  (0, len(sizes) + 1))
    inc = lambda ds: tuple(d + 1 for d in ds)
    new = RaggedDotDimensionNumbers(((inc(lc), inc(rc)), ((0,) + inc(lb), (0,) + inc(rb))),
                                    inc(rdn.lhs_ragged_dimensions),
                                    inc(rdn.rhs_group_dimensions))
    out = ragged_dot_general_p.bind(lhs, rhs, gs, ragged_dot_dimension_numbers=new, **params)
    return out, 1 if mode is RaggedDotMode.RAGGED_CONTRACTING else 0


def _ragged_dot_general_lowering(ctx, lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers,
                                 precision, preferred_element_type, group_offset,
                                 out_sharding):
    # JAX's CPU lowering: the dense expansion (JAX's TPU/GPU ones use chlo.ragged_dot instead)
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
        lambda *xs: [_ragged_dot_general_dense(*xs, ragged_dot_dimension_numbers, precision,
                                               preferred_element_type, None)],
        ctx.avals_in, fun_name="ragged_dot_general")
    (out,) = mlir.lower_jaxpr(jaxpr, consts, [lhs, rhs, group_sizes])
    return out


# JAX: jax/_src/lax/lax.py _ragged_dot_general_lower — XLA's own ragged dot, which the TPU
# (and the GPU) run as grouped matmuls instead of the dense expansion's masked products
def _ragged_dot_general_xla_lowering(ctx, lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers,
                                     precision, preferred_element_type, group_offset,
                                     out_sharding, platform):
    if group_offset is not None:
        raise NotImplementedError("Unimplemented group_offset support.")
    ir, chlo, rdn = mlir.ir, mlir.chlo, ragged_dot_dimension_numbers
    (l_aval, r_aval, _), (aval_out,) = ctx.avals_in, ctx.avals_out
    acc_dtype = aval_out.dtype
    precision = None if precision is None else canonicalize_precision(precision)
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):  # as dot_general's
        l_t, r_t, acc_dtype = _dot_algorithm_types(precision, l_aval.dtype, r_aval.dtype,
                                                   aval_out.dtype, platform)
        lhs, rhs = (x if a.dtype == t else mlir.hlo.convert(
            mlir.aval_to_ir_type(a.update(dtype=t)), x)
            for x, a, t in ((lhs, l_aval, l_t), (rhs, r_aval, r_t)))
    (lc, rc), (lb, rb) = rdn.dot_dimension_numbers
    dnums = chlo.RaggedDotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc),
        lhs_ragged_dimensions=list(rdn.lhs_ragged_dimensions),
        rhs_group_dimensions=list(rdn.rhs_group_dimensions))
    pair = precision if isinstance(precision, tuple) else (Precision.DEFAULT,) * 2
    out = chlo.ragged_dot(mlir.aval_to_ir_type(aval_out.update(dtype=acc_dtype)), lhs, rhs,
                          group_sizes, dnums, precision_config=ir.ArrayAttr.get(
                              [chlo.PrecisionAttr.get(p.name) for p in pair]))
    return out if acc_dtype == aval_out.dtype else mlir.hlo.convert(
        mlir.aval_to_ir_type(aval_out), out)


# JAX: jax/_src/lax/lax.py ragged_dot_general
def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """`dot_general` where one lhs dimension is cut into consecutive groups of
    `group_sizes[..., j]` elements, each meeting its own slice of rhs. Three modes, by the kind
    of the lhs ragged dimension:

    1. free (`m`): `[b...,m...,k...], [g,b...,k...,n...], gs [b...,x...,g] -> [b...,m...,n...]`
       (rows past `sum(group_sizes)` are zero);
    2. contracting (`k`): `[b...,m...,k...], [b...,k...,n...] -> [g,b...,m...,n...]`;
    3. batch: `[b...,m...,k...], [b...,k...,n...] -> [b...,m...,n...]`.

    Args:
      ragged_dot_dimension_numbers: a `RaggedDotDimensionNumbers`.
      group_sizes: integer array `[g]` or with the prefix dimensions before `g`.
      preferred_element_type: the output dtype (default: the operands').
    Raises TypeError (JAX's messages) for bad dimension numbers, shapes or dtypes;
    NotImplementedError for `group_offset` or `out_sharding`.
    Mirrors jax/_src/lax/lax.py: ragged_dot_general.
    """
    if group_offset is not None or out_sharding is not None:
        raise NotImplementedError("ragged_dot_general: group_offset and out_sharding are not "
                                  "supported (JAX has no group_offset support either)")
    if not isinstance(ragged_dot_dimension_numbers, RaggedDotDimensionNumbers):
        raise TypeError("ragged_dot_general: ragged_dot_dimension_numbers must be a "
                        f"RaggedDotDimensionNumbers, got {ragged_dot_dimension_numbers!r}")
    # preferred_element_type is kept as given (JAX's jaxprs print it so), read with np.dtype;
    # the precision, as dot_general's, from `jax_default_matmul_precision` when unset
    if precision is not None or config.jax_default_matmul_precision is not None:
        precision = canonicalize_precision(precision)
    return ragged_dot_general_p.bind(
        lhs, rhs, group_sizes, ragged_dot_dimension_numbers=ragged_dot_dimension_numbers,
        precision=precision, preferred_element_type=preferred_element_type, group_offset=None,
        out_sharding=None)


_BASIC_RAGGED_DOT_DIMENSION_NUMBERS = RaggedDotDimensionNumbers(
    dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0],
    rhs_group_dimensions=[0])


# JAX: jax/_src/lax/lax.py ragged_dot
def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None):
    """Grouped matrix product: lhs `f32[m,k]`, rhs `f32[g,k,n]`, group_sizes `i32[g]`; rows
    `sum(group_sizes[:j]) <= i < sum(group_sizes[:j+1])` of the `f32[m,n]` result are
    `lhs[i] @ rhs[j]`, rows past `sum(group_sizes)` are zero. Raises TypeError for shapes or
    dtypes that do not fit. Mirrors jax/_src/lax/lax.py: ragged_dot."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC_RAGGED_DOT_DIMENSION_NUMBERS,
                              precision=precision, preferred_element_type=preferred_element_type,
                              group_offset=group_offset)


ragged_dot_general_p = Primitive("ragged_dot_general")
ragged_dot_general_p.pp_param_formatters = {"preferred_element_type": str}  # as JAX prints it
ragged_dot_general_p.def_impl(_ragged_dot_general_impl)
ragged_dot_general_p.def_abstract_eval(_ragged_dot_general_abstract_eval)
ad.primitive_jvps[ragged_dot_general_p] = _ragged_dot_general_jvp
ad.primitive_transposes[ragged_dot_general_p] = _ragged_dot_general_transpose
batching.primitive_batchers[ragged_dot_general_p] = _ragged_dot_general_batch_rule
mlir.register_lowering(ragged_dot_general_p, _ragged_dot_general_lowering)
for _platform in ("tpu", "gpu"):
    mlir.register_lowering(ragged_dot_general_p, functools.partial(
        _ragged_dot_general_xla_lowering, platform=_platform), _platform)


# ---------------------------------------------------------------------------------------------
# iota, slice, concatenate, pad
# ---------------------------------------------------------------------------------------------

def _iota_impl(*, dtype, shape, dimension, sharding):
    ar = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(expanded), shape)


def _iota_abstract_eval(*, dtype, shape, dimension, sharding):
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


def iota(dtype, size: int):
    """`[0, 1, ..., size-1]` of `dtype`."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape: Sequence[int], dimension: int):
    """An array of `shape` whose entries count along `dimension`."""
    dtype = dtypes.canonicalize_dtype(dtype)
    # `sharding`: None until minijax has sharding in types (JAX prints it)
    shape = core.canonicalize_shape(shape)
    return iota_p.bind(dtype=dtype, shape=shape,
                       dimension=operator.index(dimension), sharding=None)


iota_p = Primitive("iota")
iota_p.def_impl(_iota_impl)
iota_p.def_abstract_eval(_iota_abstract_eval)
iota_p.def_sharding_rule(lambda **params: params["sharding"] or _replicated(len(params["shape"])),
                         reads_context_mesh=True)
defjvp_zero(iota_p)
# iota takes no operands, so it is never batched: BatchTrace binds it in the parent trace.
def _iota_lowering(ctx, *, dtype, shape, dimension, sharding):
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    if not mlir.is_static(shape):  # a symbolic size: computed from the dimension variables
        return mlir.hlo.dynamic_iota(out_type, mlir.eval_dynamic_shape_as_tensor(shape),
                                     dimension)
    return mlir.hlo.iota(out_type, dimension)


mlir.register_lowering(iota_p, _iota_lowering)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, l, st)
                   for s, l, st in zip(start_indices, limit_indices, strides))]


def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim) or any(
            not 0 <= s <= l <= d or st < 1
            for s, l, d, st in zip(start_indices, limit_indices, x.shape, strides)):
        raise TypeError(f"slice: start_indices={start_indices}, limit_indices={limit_indices},"
                        f" strides={strides} are not valid for operand {x.str_short()}; "
                        "expected 0 <= start <= limit <= size and strides >= 1 per dimension")
    shape = tuple((l - s + st - 1) // st for s, l, st in zip(start_indices, limit_indices,
                                                               strides))
    return x.update(shape=shape)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    # the padding computed with numpy, as JAX's _slice_transpose_fancy does
    if strides is None or np.all(np.equal(strides, 1)):
        config = zip(start_indices, np.subtract(x.aval.shape, limit_indices),
                     (0,) * len(start_indices))
    else:
        out_shape = core.get_aval(ct).shape
        used = np.add(start_indices, np.where(np.array(out_shape) == 0, 0, np.add(
            1, np.multiply(np.subtract(out_shape, 1), strides))))
        config = zip(start_indices, np.subtract(x.aval.shape, used), np.subtract(strides, 1))
    return [pad(ct, _const(ct, 0), config)]


def _slice_batch_rule(vals, dims, *, axis_size, start_indices, limit_indices, strides):
    # JAX: jax/_src/lax/slicing.py _slice_batching_rule — the batch axis stays where it is
    (x,), (d,) = vals, dims
    ins = lambda seq, v: (*seq[:d], v, *seq[d:])
    strides = None if strides is None else ins(tuple(strides), 1)
    return slice(x, ins(tuple(start_indices), 0), ins(tuple(limit_indices), axis_size),
                 strides), d


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    if not mlir.is_static(limit_indices):  # a symbolic limit (chapters/31-export.md)
        return mlir.hlo.real_dynamic_slice(
            mlir.aval_to_ir_type(ctx.avals_out[0]), x,
            *[mlir.eval_dynamic_shape_as_tensor(v) for v in (start_indices, limit_indices,
                                                              strides)])
    return mlir.hlo.slice(x, list(start_indices), list(limit_indices), list(strides))


def slice(x, start_indices, limit_indices, strides=None):
    """`x[start:limit:stride]` per dimension, with static bounds."""
    return slice_p.bind(x, start_indices=tuple(start_indices),
                        limit_indices=tuple(limit_indices),
                        strides=None if strides is None else tuple(strides))


slice_p = Primitive("slice")
slice_p.def_impl(_slice_impl)
slice_p.def_abstract_eval(_slice_abstract_eval)
slice_p.def_sharding_rule(lambda x, **p: varying_shape_sharding_rule(
    "slicing", x, _slice_abstract_eval(x, **p).shape))
deflinear(slice_p, _slice_transpose)
batching.primitive_batchers[slice_p] = _slice_batch_rule
mlir.register_lowering(slice_p, _slice_lowering)


def _concatenate_abstract_eval(*xs, dimension):
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise TypeError(f"concatenate: dimension {dimension} out of range for "
                        f"{first.str_short()}")
    for x in xs[1:]:
        if (x.dtype != first.dtype or x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != dimension)):
            raise TypeError(f"concatenate: operands must agree in dtype and in every "
                            f"dimension but {dimension}, got "
                            f"{', '.join(x.str_short() for x in xs)}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, first.dtype, all(x.weak_type for x in xs))


# JAX: jax/_src/lax/lax.py _concatenate_transpose_rule
def _concatenate_transpose(ct, *xs, dimension):
    avals = [x.aval if is_undefined_primal(x) else core.get_aval(x) for x in xs]
    if type(ct) is Zero:
        return [Zero(a) if is_undefined_primal(x) else None for x, a in zip(xs, avals)]
    # as JAX's: one split into every operand's part (those of known operands left unused)
    return split(ct, [a.shape[dimension] for a in avals], axis=dimension)


def _concatenate_batch_rule(vals, dims, *, axis_size, dimension):
    xs = [batching.bdim_at_front(x, d, axis_size) for x, d in zip(vals, dims)]
    return concatenate(xs, dimension + 1), 0


def concatenate(operands: Sequence, dimension: int):
    """Join arrays of one dtype along `dimension` (other dimensions must agree)."""
    return concatenate_p.bind(*operands, dimension=int(dimension))


concatenate_p = Primitive("concatenate")
concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))
concatenate_p.def_abstract_eval(_concatenate_abstract_eval)
concatenate_p.def_sharding_rule(lambda *xs, dimension: same_sharding_rule("concatenate",
                                                                           *xs),
                                reads_context_mesh=True)
deflinear(concatenate_p, _concatenate_transpose)
batching.primitive_batchers[concatenate_p] = _concatenate_batch_rule
mlir.register_lowering(concatenate_p, lambda ctx, *xs, dimension:
                       mlir.hlo.concatenate(list(xs), dimension))


def _stack_abstract_eval(*xs, axis):
    if not xs:
        raise ValueError("stack expects at least one operand, got 0.")
    if len({(x.shape, x.dtype) for x in xs}) != 1:
        raise TypeError(f"stack: operands must agree in shape and dtype, got "
                        f"{', '.join(x.str_short() for x in xs)}")
    if not 0 <= axis <= xs[0].ndim:
        raise TypeError(f"stack: axis {axis} out of range for {xs[0].str_short()}")
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


def _stack_sharding_rule(*xs, axis):
    s = same_sharding_rule("stack", *xs)
    if s is None:
        return None
    spec = list(s.spec) + [None] * (xs[0].ndim - len(s.spec))
    spec.insert(axis, None)
    return NamedSharding(s.mesh, P(*spec))


def _stack_transpose(ct, *xs, axis):
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None for x in xs]
    return unstack_p.bind(ct, axis=axis)


def _stack_batch_rule(vals, dims, *, axis_size, axis):
    if dims[0] is not None and all(d == dims[0] for d in dims):
        out_axis, out_dim = (axis, dims[0] + 1) if axis <= dims[0] else (axis + 1, dims[0])
        return stack_p.bind(*vals, axis=out_axis), out_dim
    xs = [batching.bdim_at_front(x, d, axis_size) for x, d in zip(vals, dims)]
    return stack_p.bind(*xs, axis=axis + 1), 0


def _stack_lowering(ctx, *xs, axis):
    aval = ctx.avals_in[0]
    shape = list(aval.shape)
    shape.insert(axis, 1)
    piece = mlir.aval_to_ir_type(ShapedArray(shape, aval.dtype))
    dims = [i for i in range(aval.ndim + 1) if i != axis]
    return mlir.hlo.concatenate([mlir.hlo.broadcast_in_dim(piece, x, dims) for x in xs], axis)


def stack(operands: Sequence, axis: int = 0):
    """Join arrays of one shape and dtype along a new dimension `axis` (one `stack`
    equation, as JAX 0.10's `lax.stack`)."""
    xs = list(operands)
    if not xs:
        raise ValueError("stack expects at least one operand, got 0.")
    return stack_p.bind(*xs, axis=canonicalize_axis(axis, core.get_aval(xs[0]).ndim + 1))


# JAX: jax/_src/lax/lax.py stack_p
stack_p = Primitive("stack")
stack_p.def_impl(lambda *xs, axis: np.stack(xs, axis=axis))
stack_p.def_abstract_eval(_stack_abstract_eval)
stack_p.def_sharding_rule(_stack_sharding_rule, reads_context_mesh=True)
deflinear(stack_p, _stack_transpose)
batching.primitive_batchers[stack_p] = _stack_batch_rule
mlir.register_lowering(stack_p, _stack_lowering)


def _unstack_abstract_eval(x, *, axis):
    if x.ndim == 0:
        raise ValueError(f"unstack requires arrays with rank > 0, got {x.str_short()}")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type)] * x.shape[axis]


def _unstack_transpose(cts, x, *, axis):
    if all(type(ct) is Zero for ct in cts):
        return [Zero(x.aval)]
    return [stack_p.bind(*map(ad.instantiate_zeros, cts), axis=axis)]


def _unstack_batch_rule(vals, dims, *, axis_size, axis):
    (x,), (d,) = vals, dims
    out_axis, out_dim = (axis, d - 1) if axis < d else (axis + 1, d)
    outs = unstack_p.bind(x, axis=out_axis)
    return outs, [out_dim] * len(outs)


def _unstack_lowering(ctx, x, *, axis):
    aval = ctx.avals_in[0]
    outs = []
    for i, out in enumerate(ctx.avals_out):
        start, limit = [0] * aval.ndim, list(aval.shape)
        start[axis], limit[axis] = i, i + 1
        piece = mlir.hlo.slice(x, start, limit, [1] * aval.ndim)
        outs.append(mlir.hlo.reshape(mlir.aval_to_ir_type(out), piece))
    return outs


def unstack(x, axis: int = 0) -> tuple:
    """The slices of `x` along `axis`, each without that dimension (JAX 0.10's
    `lax.unstack`)."""
    return tuple(unstack_p.bind(x, axis=canonicalize_axis(axis, core.get_aval(x).ndim)))


# JAX: jax/_src/lax/lax.py unstack_p
unstack_p = Primitive("unstack")
unstack_p.multiple_results = True
unstack_p.def_impl(lambda x, *, axis: [np.take(x, i, axis) for i in range(x.shape[axis])])
unstack_p.def_abstract_eval(_unstack_abstract_eval)
unstack_p.def_sharding_rule(lambda x, *, axis: [NamedSharding(x.sharding.mesh, P(
    *[s for i, s in enumerate(x.sharding.spec) if i != axis]))] * x.shape[axis])
deflinear(unstack_p, _unstack_transpose)
batching.primitive_batchers[unstack_p] = _unstack_batch_rule
mlir.register_lowering(unstack_p, _unstack_lowering)


def _pad_impl(x, padding_value, *, padding_config):
    # interior and positive edge padding first, then crop the negative edges
    shape = [lo_pos + hi_pos + d + _max(d - 1, 0) * interior
             for d, (lo_pos, hi_pos, interior) in
             zip(x.shape, [(_max(lo, 0), _max(hi, 0), i) for lo, hi, i in padding_config])]
    out = np.full(shape, padding_value, dtype=x.dtype)
    index = tuple(builtins.slice(_max(lo, 0), _max(lo, 0) + (d - 1) * (i + 1) + 1 if d else
                                 _max(lo, 0), i + 1)
                  for d, (lo, hi, i) in zip(x.shape, padding_config))
    out[index] = x
    crop = tuple(builtins.slice(-_min(lo, 0), s + _min(hi, 0))
                 for s, (lo, hi, _) in zip(shape, padding_config))
    return out[crop]


def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise TypeError(f"pad: padding_value must be a scalar of the operand's dtype, got "
                        f"{padding_value.str_short()} for operand {x.str_short()}")
    if len(padding_config) != x.ndim or any(i < 0 for _, _, i in padding_config):
        raise ValueError(f"pad: padding_config {padding_config} needs one (low, high, "
                         f"interior) per dimension of {x.str_short()}, with interior >= 0")
    shape = tuple(lo + hi + d + _max(d - 1, 0) * i for d, (lo, hi, i) in
                  zip(x.shape, padding_config))
    if any(s < 0 for s in shape):
        raise TypeError(f"pad: negative output size {shape} for {x.str_short()}")
    return x.update(shape=shape, weak_type=x.weak_type and padding_value.weak_type)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    lo, hi, interior = zip(*padding_config)
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(padding_value.aval) if is_undefined_primal(padding_value) else None]
    # the cotangent at the operand's positions; the padding value's is the total minus it
    unpadded = pad(ct, _const(ct, 0), zip(np.negative(lo), np.negative(hi),
                                          np.zeros_like(interior)))
    ct_operand = slice(unpadded, list(np.zeros_like(lo)), core.get_aval(unpadded).shape,
                       list(np.add(interior, 1)))
    ct_pv = None
    if is_undefined_primal(padding_value):
        all_axes = lambda t: tuple(range(core.get_aval(t).ndim))
        ct_pv = sub(reduce_sum(ct, all_axes(ct)), reduce_sum(ct_operand, all_axes(ct_operand)))
    return [ct_operand if is_undefined_primal(x) else None, ct_pv]


def _pad_batch_rule(vals, dims, *, axis_size, padding_config):
    (x, pv), (xd, pvd) = vals, dims
    config = ((0, 0, 0),) + tuple(padding_config)
    x = batching.bdim_at_front(x, xd, axis_size)
    if pvd is not_mapped:
        return pad(x, pv, config), 0
    # a batched padding value: pad with zeros, then select the padding positions per example
    x_aval = core.get_aval(x)
    padded = pad(x, _const(x, 0), config)
    mask = pad(full(x_aval.shape, True, np.bool_), np.array(False), config)
    out_shape = core.get_aval(padded).shape
    pv_full = broadcast_in_dim(batching.moveaxis(pv, pvd, 0), out_shape, (0,))
    return select_n(mask, pv_full, padded), 0


def pad(x, padding_value, padding_config):
    """Pad `x` with the scalar `padding_value`.

    Args:
      padding_config: one `(low, high, interior)` per dimension; low/high may be negative
        (cropping), interior (inserted between elements) must be >= 0.
    """
    config = tuple((lo, hi, i) for lo, hi, i in padding_config)
    return pad_p.bind(x, padding_value, padding_config=config)


pad_p = Primitive("pad")
pad_p.def_impl(_pad_impl)
pad_p.def_abstract_eval(_pad_abstract_eval)
pad_p.def_sharding_rule(lambda x, v, **p: varying_shape_sharding_rule(
    "padding", x, _pad_abstract_eval(x, v, **p).shape))
deflinear(pad_p, _pad_transpose)
batching.primitive_batchers[pad_p] = _pad_batch_rule
mlir.register_lowering(pad_p, lambda ctx, x, pv, *, padding_config: mlir.hlo.pad(
    x, pv, [c[0] for c in padding_config], [c[1] for c in padding_config],
    [c[2] for c in padding_config]))


# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------

_WEAK_SCALAR_TYPES = {"f": float, "c": complex, "i": int, "u": int, "b": bool}


# JAX: jax/_src/lax/lax.py asarray — differs: converted on the host, not by convert_element_type
def asarray(x):
    """Lightweight conversion of an array-like `x` to an Array (what `while_loop` makes of its
    carry under disable_jit): Arrays and tracers as they are, NumPy values and Python scalars
    in their canonical dtype (Python scalars but bools weakly typed). TypeError otherwise."""
    if isinstance(x, (core.Tracer, Array)):
        return x
    if not isinstance(x, (bool, int, float, builtins.complex, np.ndarray, np.generic)):
        raise TypeError(f"asarray: expected ArrayLike, got {x} of type {type(x)}.")
    aval = core.get_aval(x)
    return array_from_numpy(core.to_numpy(x, aval), aval.weak_type)


def _const(example, val):
    """A 0-d constant with the dtype of `example` (written inline as a literal): a Python
    scalar when `example` is weakly typed, so the rule's result stays weak, as in JAX."""
    aval = core.get_aval(example)
    scalar_type = _WEAK_SCALAR_TYPES.get(aval.dtype.kind) if aval.weak_type else None
    if scalar_type is not None:
        return scalar_type(val)
    if aval.sharding is not None and core.trace_ctx.trace is not core.eval_trace:
        return _replicated_scalar(np.array(val, dtype=aval.dtype), aval.sharding.mesh)
    return np.array(val, dtype=aval.dtype)


# JAX: jax/_src/lax/lax.py full_like (its sharding=) — a scalar typed on the operand's mesh
def _replicated_scalar(val, mesh):
    """Sharding in types: a constant next to a value typed on a mesh is typed replicated on
    that mesh, as JAX's `full_like(x, v, shape=())` makes it (`reshard 1.0:f32[]`)."""
    return reshard_p.bind(val, dst_sharding=NamedSharding(mesh, P()),
                          concrete_mesh=None)


def full(shape: Sequence[int], fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (dtype: given, or that of the value)."""
    if dtype is None:
        dtype, weak = dtypes.dtype_and_weak(fill_value)
    else:
        weak = False
    return _full(shape, fill_value, dtype, weak)


def _full(shape: Sequence[int], fill_value, dtype, weak: bool):
    shape = core.canonicalize_shape(shape)
    fill = convert_element_type(fill_value, dtype, weak)
    if core.get_aval(fill).shape != ():
        raise TypeError(f"full: fill_value must be a scalar, got {core.get_aval(fill)}")
    if not shape:
        return fill
    return broadcast_in_dim_p.bind(fill, shape=shape, broadcast_dimensions=(), sharding=None)


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like `x` (its shape and dtype unless given) filled with `fill_value`."""
    aval = core.get_aval(x)
    # a weakly typed `x` gives a weakly typed result, unless a dtype is asked for (as JAX)
    out = _full(aval.shape if shape is None else shape, fill_value,
                aval.dtype if dtype is None else dtype, dtype is None and aval.weak_type)
    return _vary_like(out, aval.vma)


def _vary_like(out, vma):
    # JAX: jax/_src/lax/lax.py _full_like_insert_pvary — inside shard_map, as varying as `x`
    if not vma:
        return out
    return core.pvary(out, tuple(sorted(vma)))


def zeros_like_array(x):
    return full_like(x, 0)


# JAX: jax/_src/lax/lax.py zeros_like_shaped_array
def zeros_like_shaped_array(aval: ShapedArray):
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)  # float0 zeros stay numpy, as in JAX
    # JAX's zero is a typed literal, written inline (`0.0:f32[]`) even when made eagerly
    zero = array_from_numpy(np.zeros((), aval.dtype), aval.weak_type, literal=True)
    return _vary_like(broadcast_in_dim(zero, aval.shape, ()), aval.vma)


aval_zeros_likers[ShapedArray] = zeros_like_shaped_array


# JAX: jax/_src/lax/lax.py empty2_p — a scalar whose value no one reads (lowered as a zero):
# what partial evaluation of `cond` fills the residual slots of the other branches with
def _empty2_impl(*, dtype, memory_space):
    return np.zeros((), dtype)


def _empty2_abstract_eval(*, dtype, memory_space):
    return ShapedArray((), dtype)


empty2_p = Primitive("empty2")
empty2_p.def_impl(_empty2_impl)
empty2_p.def_abstract_eval(_empty2_abstract_eval)
defjvp_zero(empty2_p)
mlir.register_lowering(empty2_p, lambda ctx, *, dtype, memory_space:
                       mlir.ir_constant(np.zeros((), dtype)))


# JAX: jax/_src/lax/lax.py empty_like_shaped_array
def empty_like_shaped_array(aval: ShapedArray):
    """An array of type `aval` whose values do not matter: `empty2`, broadcast."""
    empty = _vary_like(empty2_p.bind(dtype=aval.dtype, memory_space=dispatch.MemorySpace.Device),
                       aval.vma)
    return broadcast_in_dim(empty, aval.shape, ()) if aval.shape else empty


# ---------------------------------------------------------------------------------------------
# Bits: xor, shifts and bitcasts (the threefry PRNG in minijax/prng.py is built from these)
# ---------------------------------------------------------------------------------------------

def bitwise_xor(x, y):
    """Elementwise logical xor (bool) or bitwise xor (integers)."""
    return xor_p.bind(x, y)


xor_p = naryop("xor", _int_or_bool, np.bitwise_xor)
defjvp_zero(xor_p)
defbroadcasting(xor_p)
mlir.register_lowering(xor_p, mlir.nary_lowering("xor"))


def _shift_amounts(x, y):
    # XLA reads a shift amount as unsigned: a negative amount counts as a huge one. Amounts of
    # the bit width or more shift every bit out, which C and numpy leave undefined, so they
    # are masked here and the in-range amounts clamped to stay defined.
    bits = x.dtype.itemsize * 8
    y = np.asarray(y).astype(f"uint{bits}")
    return bits, y >= bits, np.minimum(y, bits - 1)


def _shift_left_impl(x, y):
    bits, too_far, y = _shift_amounts(x, y)
    return np.where(too_far, 0, np.left_shift(x, y.astype(x.dtype))).astype(x.dtype)


def _shift_right_logical_impl(x, y):
    bits, too_far, y = _shift_amounts(x, y)
    xu = x.astype(f"uint{bits}")  # logical: the bits as unsigned, zeros shifted in
    return np.where(too_far, 0, np.right_shift(xu, y)).astype(x.dtype)


def _shift_right_arithmetic_impl(x, y):
    bits, too_far, y = _shift_amounts(x, y)
    xs = x.astype(f"int{bits}")  # arithmetic: the bits as signed, copies of the sign shifted in
    y = np.where(too_far, bits - 1, y).astype(xs.dtype)
    return np.right_shift(xs, y).astype(x.dtype)


def shift_left(x, y):
    """Elementwise `x << y` (integers). Amounts >= the bit width give 0, as in XLA."""
    return shift_left_p.bind(x, y)


shift_left_p = naryop("shift_left", _int, _shift_left_impl)
defjvp_zero(shift_left_p)
defbroadcasting(shift_left_p)
mlir.register_lowering(shift_left_p, mlir.nary_lowering("shift_left"))


def shift_right_logical(x, y):
    """Elementwise `x >> y` shifting in zeros (integers, signed ones included). Amounts >= the
    bit width give 0, as in XLA."""
    return shift_right_logical_p.bind(x, y)


shift_right_logical_p = naryop("shift_right_logical", _int, _shift_right_logical_impl)
defjvp_zero(shift_right_logical_p)
defbroadcasting(shift_right_logical_p)
mlir.register_lowering(shift_right_logical_p, mlir.nary_lowering("shift_right_logical"))


def shift_right_arithmetic(x, y):
    """Elementwise `x >> y` shifting in copies of the sign bit (integers, unsigned ones read as
    signed). Amounts >= the bit width give 0 or -1 (the sign), as in XLA."""
    return shift_right_arithmetic_p.bind(x, y)


shift_right_arithmetic_p = naryop("shift_right_arithmetic", _int, _shift_right_arithmetic_impl)
defjvp_zero(shift_right_arithmetic_p)
defbroadcasting(shift_right_arithmetic_p)
mlir.register_lowering(shift_right_arithmetic_p, mlir.nary_lowering("shift_right_arithmetic"))


def _bitcast_convert_type_abstract_eval(x, *, new_dtype):
    if x.dtype.itemsize != new_dtype.itemsize:
        raise TypeError(f"bitcast_convert_type: {x.str_short()} to {new_dtype.name} changes the "
                        "bit width; minijax only bitcasts between dtypes of the same width")
    return ShapedArray(x.shape, new_dtype)


def bitcast_convert_type(x, new_dtype):
    """The bits of `x` reinterpreted as `new_dtype` (same bit width), e.g. f32 <-> u32."""
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new_dtype))


bitcast_convert_type_p = Primitive("bitcast_convert_type")
bitcast_convert_type_p.def_impl(lambda x, *, new_dtype:
                               np.ascontiguousarray(x).view(new_dtype).reshape(np.shape(x)))
bitcast_convert_type_p.def_abstract_eval(_bitcast_convert_type_abstract_eval)
bitcast_convert_type_p.def_sharding_rule(lambda x, **_: x.sharding)
defjvp_zero(bitcast_convert_type_p)
defvectorized(bitcast_convert_type_p)
mlir.register_lowering(bitcast_convert_type_p, lambda ctx, x, *, new_dtype:
                       mlir.hlo.bitcast_convert(mlir.aval_to_ir_type(ctx.avals_out[0]), x))


# ---------------------------------------------------------------------------------------------
# sort and top_k
# ---------------------------------------------------------------------------------------------

def _sort_impl(*operands, dimension, is_stable, num_keys):
    # np.lexsort is stable, sorts by its *last* key first, puts NaNs last and treats -0.0 and
    # 0.0 as equal: the order of JAX's comparator.
    keys = [np.asarray(k) for k in operands[:num_keys]]
    perm = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(op, perm, axis=dimension) for op in operands]


def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    shape = operands[0].shape
    if any(op.shape != shape for op in operands):
        raise TypeError(f"sort: operands must have the same shape, got "
                        f"{', '.join(op.str_short() for op in operands)}")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"sort: dimension {dimension} out of range for {operands[0].str_short()}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands ({len(operands)})")
    return [op.strip_weak_type() for op in operands]


# JAX: jax/_src/lax/lax.py _sort_jvp
def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    # sort an iota along with the operands: it records where each output came from, and each
    # tangent is gathered from there, the other dims being batching dims of the gather
    from minijax.lax import slicing  # not at the top: slicing imports this module
    shape = core.get_aval(primals[0]).shape
    index_dtype = np.uint32 if all(d < 2 ** 32 for d in shape) else np.uint64
    *sorted_primals, idx = sort_p.bind(*primals, broadcasted_iota(index_dtype, shape, dimension),
                                       dimension=dimension, is_stable=is_stable,
                                       num_keys=num_keys)
    batch_dims = tuple(np.delete(np.arange(len(shape), dtype=np.int64), dimension))
    dnums = slicing.GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(dimension,), start_index_map=(dimension,),
        operand_batching_dims=batch_dims, start_indices_batching_dims=batch_dims)
    idx = expand_dims(idx, (len(shape),))
    tangents_out = [Zero.from_primal_value(p) if type(t) is Zero else slicing.gather(
        t, idx, dnums, (1,) * len(shape), mode=slicing.GatherScatterMode.PROMISE_IN_BOUNDS)
        for p, t in zip(sorted_primals, tangents)]
    return sorted_primals, tangents_out


def _sort_batch_rule(vals, dims, *, axis_size, dimension, is_stable, num_keys):
    # as JAX's: every operand gets the first batched one's batch axis, where it is (unbatched
    # ones broadcast to its shape, numbered with Python ints)
    proto, bdim = next((v, d) for v, d in zip(vals, dims) if d is not batching.not_mapped)
    shape = core.get_aval(proto).shape
    keep = [int(i) for i in np.delete(np.arange(len(shape)), bdim)]
    vals = [broadcast_in_dim(v, shape, keep) if d is batching.not_mapped
            else batching.moveaxis(v, d, bdim) for v, d in zip(vals, dims)]
    outs = sort_p.bind(*vals, dimension=dimension + (bdim <= dimension), is_stable=is_stable,
                       num_keys=num_keys)
    return outs, [bdim] * len(outs)


def _sort_compare(a, b, dtype):
    """(a < b, a == b) for sort's comparator. Floats: -0.0 is made 0.0 and every NaN the same
    NaN, then compared in IEEE total order, so NaNs sort last (JAX's _sort_lt_comparator)."""
    hlo = mlir.hlo
    direction = lambda d: hlo.ComparisonDirectionAttr.get(d)
    if dtypes.is_float(dtype):
        scalar = ShapedArray((), dtype)
        zero, nan = mlir.full_like_aval(0, scalar), mlir.full_like_aval(np.nan, scalar)
        float_type = hlo.ComparisonTypeAttr.get("FLOAT")

        def canonical(v):
            v = hlo.select(hlo.compare(v, zero, direction("EQ"), compare_type=float_type),
                           zero, v)
            return hlo.select(hlo.compare(v, v, direction("NE"), compare_type=float_type),
                              nan, v)
        a, b = canonical(a), canonical(b)
        ctype = hlo.ComparisonTypeAttr.get("TOTALORDER")
    else:
        ctype = hlo.ComparisonTypeAttr.get(
            "UNSIGNED" if np.dtype(dtype).kind in "ub" else "SIGNED")
    return (hlo.compare(a, b, direction("LT"), compare_type=ctype),
            hlo.compare(a, b, direction("EQ"), compare_type=ctype))


def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    hlo = mlir.hlo
    op = hlo.SortOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(operands),
                    dimension=dimension, is_stable=is_stable)
    scalar_types = [mlir.aval_to_ir_type(ShapedArray((), a.dtype))
                    for a in ctx.avals_in for _ in range(2)]
    block = op.comparator.blocks.append(*scalar_types)
    with mlir.ir.InsertionPoint(block):
        args = block.arguments
        pred = None  # lexicographic: key i decides unless equal, then key i+1
        for i in reversed(range(num_keys)):
            lt, eq_ = _sort_compare(args[2 * i], args[2 * i + 1], ctx.avals_in[i].dtype)
            pred = lt if pred is None else hlo.or_(lt, hlo.and_(eq_, pred))
        hlo.return_([pred])
    return list(op.results)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort along `dimension`. `operand` is an array or a sequence of arrays of one shape: all
    are permuted together, ordered lexicographically by the first `num_keys`. Floats order as
    -inf < ... < -0.0 == 0.0 < ... < inf < NaN. Returns an array or a list like `operand`."""
    ops = [operand] if not isinstance(operand, (list, tuple)) else list(operand)
    nd = core.get_aval(ops[0]).ndim
    dimension = canonicalize_axis(dimension, nd) if nd else int(dimension)
    outs = sort_p.bind(*ops, dimension=dimension, is_stable=bool(is_stable),
                       num_keys=operator.index(num_keys))
    return outs if isinstance(operand, (list, tuple)) else outs[0]


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """`(sorted keys, values permuted the same way)` along `dimension`."""
    k, v = sort([keys, values], dimension, is_stable, num_keys=1)
    return k, v


sort_p = Primitive("sort")
sort_p.multiple_results = True
sort_p.def_impl(_sort_impl)
sort_p.def_abstract_eval(_sort_abstract_eval)
ad.primitive_jvps[sort_p] = _sort_jvp
batching.primitive_batchers[sort_p] = _sort_batch_rule
mlir.register_lowering(sort_p, _sort_lowering)


def _top_k_impl(x, *, k, axis):
    # a stable sort, NaNs first, then by descending value: ties keep the lower index first,
    # as XLA's TopK (np.lexsort sorts by its last key first)
    x64 = np.asarray(x, np.float64)
    order = np.lexsort((-x64, ~np.isnan(x64)), axis=axis)
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)]


def _top_k_abstract_eval(x, *, k, axis):
    if x.ndim == 0:
        raise TypeError(f"top_k: operand must have at least one dimension, got {x.str_short()}")
    _check_dtype("top_k", x, _num)
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"top_k: k={k} must be between 0 and the size of axis {axis} of "
                         f"{x.str_short()}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype), ShapedArray(shape, np.dtype(np.int32))]


def _top_k_jvp(primals, tangents, *, k, axis):
    # the tangents at the chosen indices: one gather whose other dims are batch dims, as JAX's
    # _top_k_jvp (its transpose, a scatter-add, is the gradient)
    from minijax.lax import slicing  # not at the top: slicing imports this module
    (x,), (t,) = primals, tangents
    values, idx = top_k_p.bind(x, k=k, axis=axis)
    if type(t) is Zero:
        return [values, idx], [Zero.from_primal_value(values), Zero.from_primal_value(idx)]
    shape = core.get_aval(idx).shape
    rest = tuple(d for d in range(len(shape)) if d != axis)
    dnums = slicing.GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
        operand_batching_dims=rest, start_indices_batching_dims=rest)
    t_out = slicing.gather(t, reshape(idx, shape + (1,)), dnums, (1,) * len(shape))
    return [values, idx], [t_out, Zero.from_primal_value(idx)]


def _top_k_batch_rule(vals, dims, *, axis_size, k, axis):
    (x,), (d,) = vals, dims
    outs = top_k_p.bind(x, k=k, axis=axis + (d <= axis))
    return outs, [d, d]


def _top_k_lowering(ctx, x, *, k, axis):
    # chlo.top_k works on the last axis: swap `axis` there and back
    hlo = mlir.hlo
    ndim = ctx.avals_in[0].ndim
    perm = list(range(ndim))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    if axis != ndim - 1:
        x = hlo.transpose(x, mlir.ir.DenseI64ArrayAttr.get(perm))
    outs = list(mlir.chlo.top_k(x, k))
    if axis != ndim - 1:
        outs = [hlo.transpose(o, mlir.ir.DenseI64ArrayAttr.get(perm)) for o in outs]
    return outs


# JAX: jax/_src/lax/lax.py top_k
def top_k(operand, k: int, *, axis: int = -1):
    """The `k` largest entries along `axis` and their positions: `(values, indices)`, both of
    `operand`'s shape with `k` at `axis`; indices are i32, ties go to the lower index.
    TypeError for a rank-0 operand, ValueError unless 0 <= k <= the axis size."""
    nd = core.get_aval(operand).ndim
    axis = canonicalize_axis(axis, nd) if nd else int(axis)
    values, indices = top_k_p.bind(operand, k=int(k), axis=axis)
    return values, indices


top_k_p = Primitive("top_k")
top_k_p.multiple_results = True
top_k_p.def_impl(_top_k_impl)
top_k_p.def_abstract_eval(_top_k_abstract_eval)
ad.primitive_jvps[top_k_p] = _top_k_jvp
batching.primitive_batchers[top_k_p] = _top_k_batch_rule
mlir.register_lowering(top_k_p, _top_k_lowering)


# ---------------------------------------------------------------------------------------------
# More elementwise primitives: exp2, round, and the bit counters clz, population_count, mulhi
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/lax.py AccuracyMode
class AccuracyMode(enum.Enum):
    """The accuracy a transcendental op may trade for speed (passed through to XLA; the CPU
    backend computes the same either way)."""
    HIGHEST = 1
    DEFAULT = 2


# JAX: jax/_src/lax/lax.py Tolerance
@dataclasses.dataclass(frozen=True)
class Tolerance:
    """An error bound a transcendental op may stay within: absolute, relative and in ulps."""
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0


def exp2(x, *, accuracy=None):
    """Elementwise 2 ** x (float dtypes), lowered as exp(log(2) * x) as in JAX. `accuracy`
    (a Tolerance or AccuracyMode) is accepted and not used: CPU results do not change."""
    return exp2_p.bind(x)


exp2_p = unop("exp2", _float, np.exp2)
defjvp2(exp2_p, lambda g, ans, x: mul(g, mul(_const(x, np.log(2)), ans)))
defvectorized(exp2_p)
mlir.register_lowering(exp2_p, lambda ctx, x: mlir.hlo.exponential(mlir.hlo.multiply(
    mlir.full_like_aval(np.log(2), ctx.avals_in[0]), x)))


# JAX: jax/_src/lax/lax.py RoundingMethod
class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties: away from zero (2.5 -> 3), or to the even neighbour (2)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _round_impl(x, *, rounding_method):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.round(x)
    # the integer part, one further from zero where the fraction is a half or more: every step
    # is exact (floor(|x| + 0.5) rounds the sum first: 0.49999997 -> 1, 2**23 + 1 -> 2**23 + 2)
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole).astype(x.dtype)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # JAX's name
    """Elementwise rounding to an integer value (float dtypes), ties broken by
    `rounding_method`. Same aval in and out; zero derivative."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


round_p = Primitive("round")
round_p.def_impl(_round_impl)
round_p.def_abstract_eval(lambda x, *, rounding_method: unop_abstract_eval("round", x, _float))
defjvp_zero(round_p)
defvectorized(round_p)
mlir.register_lowering(round_p, lambda ctx, x, *, rounding_method: (
    mlir.hlo.round_nearest_even(x) if rounding_method == RoundingMethod.TO_NEAREST_EVEN
    else mlir.hlo.round_nearest_afz(x)))


def unop_abstract_eval(name: str, x: ShapedArray, kind: str) -> ShapedArray:
    _check_dtype(name, x, kind)
    return x


def _clz_impl(x):
    bits = x.dtype.itemsize * 8
    u = x.view(f"u{x.dtype.itemsize}").astype(np.uint64)
    out = np.full(x.shape, bits, np.int64)
    for b in range(bits):  # the highest set bit decides
        out = np.where((u >> np.uint64(b)) & np.uint64(1), bits - 1 - b, out)
    return out.astype(x.dtype)


def clz(x):
    """Elementwise count of leading zero bits (integer dtypes), same dtype out."""
    return clz_p.bind(x)


clz_p = unop("clz", _int, _clz_impl)
defjvp_zero(clz_p)
defvectorized(clz_p)
mlir.register_lowering(clz_p, mlir.nary_lowering("count_leading_zeros"))


def population_count(x):
    """Elementwise count of set bits (integer dtypes; negative values count their two's
    complement bits), same dtype out."""
    return population_count_p.bind(x)


population_count_p = unop("population_count", _int,
                          lambda x: np.bitwise_count(x.view(f"u{x.dtype.itemsize}"))
                          .astype(x.dtype))
defjvp_zero(population_count_p)
defvectorized(population_count_p)
mlir.register_lowering(population_count_p, mlir.nary_lowering("popcnt"))


def _mulhi_impl(x, y):
    bits = x.dtype.itemsize * 8
    wide = np.int64 if x.dtype.kind == "i" else np.uint64
    if bits == 64:
        raise NotImplementedError("mulhi: minijax's eager impl has no 128-bit product; "
                                  "use it under jit")
    return ((x.astype(wide) * y.astype(wide)) >> wide(bits)).astype(x.dtype)


def _mulhi_lowering(ctx, x, y):
    # the product in twice the width, shifted down: what XLA's expansion of MulHi computes
    aval = ctx.avals_in[0]
    wide = np.dtype(f"{aval.dtype.kind}{2 * aval.dtype.itemsize}")
    wide_aval = aval.update(dtype=wide)
    conv = lambda v: mlir.hlo.convert(mlir.aval_to_ir_type(wide_aval), v)
    prod = mlir.hlo.multiply(conv(x), conv(y))
    shift = mlir.full_like_aval(aval.dtype.itemsize * 8, wide_aval)
    shifted = (mlir.hlo.shift_right_arithmetic if aval.dtype.kind == "i"
               else mlir.hlo.shift_right_logical)(prod, shift)
    return mlir.hlo.convert(mlir.aval_to_ir_type(ctx.avals_out[0]), shifted)


def mulhi(x, y, /):
    """Elementwise high half of the full-width product x * y (8- to 32-bit integers, one
    dtype): (x * y) >> bits, computed in twice the width."""
    return mulhi_p.bind(x, y)


mulhi_p = naryop("mulhi", _int, _mulhi_impl)
defjvp_zero(mulhi_p)
defbroadcasting(mulhi_p)
mlir.register_lowering(mulhi_p, _mulhi_lowering)


# ---------------------------------------------------------------------------------------------
# More reductions: prod, and, or, xor, and `reduce` with any computation
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/lax.py _reduce_prod_jvp_rule and _reduce_jvp
def _reduce_prod_jvp(primals, tangents, *, axes):
    # As JAX's: the reduced axes moved to the front and flattened to one, then halved until
    # one row is left (an odd half padded with the unit 1), each step a product of the halves;
    # the whole tree is differentiated with jvp, so the primal result is the tree's too.
    (x,), (t,) = primals, tangents
    if type(t) is Zero:
        return reduce_prod_p.bind(x, axes=axes), Zero.from_primal_value(x)
    aval = core.get_aval(x)
    kept = [d for d in range(aval.ndim) if d not in axes]
    perm = tuple(axes) + tuple(kept)
    out_shape = tuple(aval.shape[d] for d in kept)
    flat_shape = (math.prod(aval.shape[d] for d in axes),) + out_shape
    one = np.array(1, aval.dtype)

    def flat(v):
        if perm == tuple(range(aval.ndim)):
            return v if core.get_aval(v).shape == flat_shape else reshape(v, flat_shape)
        return reshape(v, flat_shape, perm)

    def tree(v):
        while core.get_aval(v).shape[0] > 1:
            n = core.get_aval(v).shape[0]
            n1 = (n + 1) // 2
            v1, v2 = slice_in_dim(v, 0, n1), slice_in_dim(v, n1, None)
            if n - n1 != n1:
                v2 = pad(v2, one, [(0, 1, 0)] + [(0, 0, 0)] * len(out_shape))
            v = mul(v1, v2)
        if core.get_aval(v).shape[0] == 0:
            return full(out_shape, one)
        return squeeze(v, (0,))
    (ans,), (ans_dot,) = ad.jvp_flat(lambda v: [tree(v)], [flat(x)], [flat(t)])
    return ans, ans_dot


def reduce_prod(x, axes: Sequence[int]):
    """Product of `x` over `axes` (the dimensions are removed)."""
    return reduce_prod_p.bind(x, axes=tuple(int(a) for a in axes))


reduce_prod_p = Primitive("reduce_prod")
reduce_prod_p.def_impl(lambda x, *, axes: np.prod(x, axis=axes, dtype=x.dtype))
reduce_prod_p.def_abstract_eval(_reduce_abstract_eval("reduce_prod", _num))
reduce_prod_p.def_sharding_rule(_reduce_sharding_rule)
ad.primitive_jvps[reduce_prod_p] = _reduce_prod_jvp
defreducer(reduce_prod_p)
mlir.register_lowering(reduce_prod_p, _reduce_lowering("multiply", lambda d: 1))


def _bitwise_reducer(name: str, ufunc, op_name: str, identity):
    prim = Primitive(name)
    prim.def_impl(lambda x, *, axes: ufunc.reduce(x, axis=axes).astype(x.dtype)
                  if axes else x)
    prim.def_abstract_eval(_reduce_abstract_eval(name, _int_or_bool))
    prim.def_sharding_rule(_reduce_sharding_rule)
    defjvp_zero(prim)
    defreducer(prim)
    mlir.register_lowering(prim, _reduce_lowering(op_name, identity))
    return prim


def reduce_and(x, axes: Sequence[int]):
    """Logical (bool) or bitwise (integers) and of `x` over `axes`."""
    return reduce_and_p.bind(x, axes=tuple(int(a) for a in axes))


def reduce_or(x, axes: Sequence[int]):
    """Logical (bool) or bitwise (integers) or of `x` over `axes`."""
    return reduce_or_p.bind(x, axes=tuple(int(a) for a in axes))


def reduce_xor(x, axes: Sequence[int]):
    """Logical (bool) or bitwise (integers) xor of `x` over `axes`."""
    return reduce_xor_p.bind(x, axes=tuple(int(a) for a in axes))


reduce_and_p = _bitwise_reducer("reduce_and", np.bitwise_and, "and_",
                                lambda d: True if d == np.bool_ else -1)
reduce_or_p = _bitwise_reducer("reduce_or", np.bitwise_or, "or_", lambda d: 0)
reduce_xor_p = _bitwise_reducer("reduce_xor", np.bitwise_xor, "xor", lambda d: 0)


# The monoids `reduce` recognises: the primitive of a one-equation computation, the
# identity its init value must be, and the reducer it becomes (as JAX's _get_monoid_reducer).
_MONOIDS = {"add": (lambda d: 0, reduce_sum), "mul": (lambda d: 1, reduce_prod),
            "max": (_lowest, reduce_max), "min": (_highest, reduce_min),
            "and": (lambda d: True if d == np.bool_ else -1, reduce_and),
            "or": (lambda d: 0, reduce_or), "xor": (lambda d: 0, reduce_xor)}


def _monoid_reducer(jaxpr, init_values):
    if len(jaxpr.jaxpr.eqns) != 1 or len(init_values) != 1 or jaxpr.consts:
        return None
    (eqn,) = jaxpr.jaxpr.eqns
    if eqn.primitive.name not in _MONOIDS or list(eqn.outvars) != list(jaxpr.jaxpr.outvars):
        return None
    identity, reducer = _MONOIDS[eqn.primitive.name]
    try:
        init = np.asarray(init_values[0])  # only a concrete init value can be compared
    except Exception:  # a tracer: not known to be the identity
        return None
    if init.shape or init != np.array(identity(init.dtype), init.dtype):
        return None
    return reducer


def reduce(operands, init_values, computation, dimensions: Sequence[int]):
    """Reduce `operands` (an array or a pytree of arrays of one shape) over `dimensions`
    with `computation(accumulated, element)` from scalar `init_values` of the same
    structure. A computation that is one add/mul/max/min/and/or/xor with its identity as
    init becomes reduce_sum, reduce_prod, ... (so it differentiates); any other binds
    `reduce_p` with the computation's jaxpr (no derivative). JAX: jax/_src/lax/lax.py reduce."""
    from minijax.tree_util import tree_flatten, tree_unflatten  # beside its use
    flat_ops, tree = tree_flatten(operands)
    flat_inits, init_tree = tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands {tree} and init_values {init_tree} must have the "
                         "same tree structure")
    dims = tuple(canonicalize_axis(d, core.get_aval(flat_ops[0]).ndim) for d in dimensions)
    scalars = [ShapedArray((), core.get_aval(v).dtype) for v in flat_inits]

    def flat_comp(*args):
        n = len(scalars)
        out = computation(tree_unflatten(tree, args[:n]), tree_unflatten(tree, args[n:]))
        return tree_flatten(out)[0]

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_comp, scalars * 2, purpose="reduce")
    closed = core.ClosedJaxpr(jaxpr, consts)
    reducer = _monoid_reducer(closed, flat_inits)
    if reducer is not None:
        return tree_unflatten(tree, [reducer(flat_ops[0], dims)])
    inits = [convert_element_type(v, core.get_aval(o).dtype) for v, o in zip(flat_inits,
                                                                              flat_ops)]
    outs = reduce_p.bind(*flat_ops, *inits, computation=closed, dimensions=dims)
    return tree_unflatten(tree, outs)


def _reduce_p_abstract_eval(*avals, computation, dimensions):
    ops = avals[:len(avals) // 2]
    if len({a.shape for a in ops}) != 1:
        raise TypeError(f"reduce: operands must have one shape, got "
                        f"{', '.join(a.str_short() for a in ops)}")
    shape = tuple(s for i, s in enumerate(ops[0].shape) if i not in dimensions)
    return [ShapedArray(shape, a.dtype) for a in ops]


def _reduce_p_batch_rule(vals, dims, *, axis_size, computation, dimensions):
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError("reduce: batched init_values are not supported by minijax")
    ops = [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_p.bind(*ops, *vals[n:], computation=computation,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


def _reduce_p_lowering(ctx, *args, computation, dimensions):
    n = len(args) // 2
    scalars = [mlir.aval_to_ir_type(ShapedArray((), a.dtype)) for a in ctx.avals_out]
    op = mlir.hlo.ReduceOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(args[:n]),
                           list(args[n:]), list(dimensions))
    block = op.regions[0].blocks.append(*scalars, *scalars)
    with mlir.ir.InsertionPoint(block):
        outs = mlir.lower_jaxpr(computation.jaxpr, computation.consts, list(block.arguments))
        mlir.hlo.return_(outs)
    return list(op.results)


def _reduce_p_impl(*args, computation, dimensions):
    # eagerly: the computation applied along the reduced axes one element at a time
    n = len(args) // 2
    aval = core.get_aval(args[0])
    kept = tuple(d for d in range(aval.ndim) if d not in dimensions)
    out_shape = tuple(aval.shape[d] for d in kept)
    m = math.prod(aval.shape[d] for d in dimensions)
    ops = [reshape(transpose(o, kept + dimensions), out_shape + (m,)) for o in args[:n]]
    acc = [broadcast_in_dim(v, out_shape, ()) for v in args[n:]]
    for i in range(m):
        elems = [squeeze(slice_in_dim(o, i, i + 1, axis=-1), (len(out_shape),)) for o in ops]
        acc = core.eval_jaxpr(computation.jaxpr, computation.consts, *acc, *elems)
    return acc


reduce_p = Primitive("reduce")
reduce_p.multiple_results = True
reduce_p.def_impl(_reduce_p_impl)
reduce_p.def_abstract_eval(_reduce_p_abstract_eval)
batching.primitive_batchers[reduce_p] = _reduce_p_batch_rule
mlir.register_lowering(reduce_p, _reduce_p_lowering)


# ---------------------------------------------------------------------------------------------
# Shape helpers, tile and split
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/slicing.py slice_in_dim — differs: beside `slice` here, which it calls
def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0):
    """`operand[start:limit:stride]` along `axis` only (None and negative bounds as in
    Python slicing, clamped to the axis)."""
    shape = core.get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, _max(start, limit), int(stride)
    return slice(operand, starts, limits, strides)


# JAX: jax/_src/lax/slicing.py index_in_dim — differs: beside `slice` here
def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """The slice at `index` of `axis` (negative counts from the end), keeping that axis
    with size 1 or dropping it."""
    size = core.get_aval(operand).shape[canonicalize_axis(axis, core.get_aval(operand).ndim)]
    index = int(index) + size if index < 0 else int(index)
    if not 0 <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (canonicalize_axis(axis, core.get_aval(out).ndim),))


# JAX: jax/_src/lax/lax.py broadcast_shapes
def broadcast_shapes(*shapes):
    """The shape lax's (and NumPy's) rank-promoting broadcasting gives `shapes`; ValueError
    for incompatible ones."""
    shapes = [tuple(int(d) for d in s) for s in shapes]
    rank = _max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out = []
    for ds in zip(*padded):
        sizes = {d for d in ds if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# JAX: jax/_src/lax/lax.py broadcast_to_rank
def broadcast_to_rank(x, rank: int):
    """`x` with leading size-1 dimensions added up to `rank` (unchanged when it has them)."""
    ndim = core.get_aval(x).ndim
    return x if ndim >= rank else broadcast(x, (1,) * (rank - ndim))


# JAX: jax/_src/lax/lax.py broadcast_like
def broadcast_like(arr, like_arr):
    """`arr` broadcast (trailing dimensions aligned) to the shape of `like_arr`."""
    shape, a_shape = core.get_aval(like_arr).shape, core.get_aval(arr).shape
    return broadcast_in_dim(arr, shape, tuple(range(len(shape) - len(a_shape), len(shape))))


# JAX: jax/_src/lax/lax.py collapse
def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """`operand` with dimensions [start, stop) merged into one (row-major)."""
    shape = core.get_aval(operand).shape
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(len(shape))
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


# JAX: jax/_src/lax/lax.py dtype
def dtype(x):
    """The canonical dtype of `x` (an array, a scalar or a dtype-like), as JAX reports it."""
    return dtypes.canonicalize_dtype(dtypes.dtype_and_weak(x)[0])


# JAX: jax/_src/lax/lax.py empty — differs: zeros (XLA may give garbage; minijax does not)
def empty(shape, dtype):
    """An array of `shape` and `dtype` whose values no one should read (zeros here)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return full(shape, 0, dtypes.canonicalize_dtype(dtype))


# JAX: jax/_src/lax/lax.py batch_matmul
def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product of f[..., m, k] and f[..., k, n] (the same batch shape)."""
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.ndim < 2 or la.ndim != ra.ndim or la.shape[:-2] != ra.shape[:-2]:
        raise ValueError(f"batch_matmul requires operands of one rank >= 2 and one batch "
                         f"shape, got {la.str_short()} and {ra.str_short()}")
    batch = tuple(range(la.ndim - 2))
    return dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)),
                       precision=precision)


def _tile_abstract_eval(x, *, reps):
    if len(reps) != x.ndim or _min(reps, default=1) < 0:
        raise ValueError(f"tile: reps {reps} must be one non-negative int per dimension of "
                         f"{x.str_short()}")
    return x.update(shape=tuple(d * r for d, r in zip(x.shape, reps)))


# JAX: jax/_src/lax/lax.py _tile_abstract_eval's sharding check
def _tile_sharding_rule(x, *, reps):
    if any(r != 1 and s is not None for r, s in zip(reps, x.sharding.spec)):
        raise ShardingTypeError("Operand cannot be sharded on a dimension it tiles "
                                f"non-trivially: {x.str_short()} with reps {reps}")
    return x.sharding


# JAX: jax/_src/lax/lax.py _tile_lower
def _tile_lowering(ctx, x, *, reps):
    # each dimension d as (1, d), broadcast to (r, d), then merged: the copies follow one
    # another; emitted even where every r is 1, as JAX does
    (aval,), (out,) = ctx.avals_in, ctx.avals_out
    unit = mlir.hlo.reshape(mlir.aval_to_ir_type(aval.update(
        shape=tuple(v for d in aval.shape for v in (1, d)))), x)
    wide = aval.update(shape=tuple(v for d, r in zip(aval.shape, reps) for v in (r, d)))
    wide = mlir.hlo.broadcast_in_dim(mlir.aval_to_ir_type(wide), unit,
                                     list(range(2 * aval.ndim)))
    return mlir.hlo.reshape(mlir.aval_to_ir_type(out), wide)


def _tile_transpose(ct, x, *, reps):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    wide = tuple(v for d, r in zip(x.aval.shape, reps) for v in (r, d))
    return [reduce_sum(reshape(ct, wide), tuple(range(0, 2 * x.aval.ndim, 2)))]


def _tile_batch_rule(vals, dims, *, axis_size, reps):
    (x,), (d,) = vals, dims
    return tile_p.bind(batching.moveaxis(x, d, 0), reps=(1,) + reps), 0


# JAX: jax/_src/lax/lax.py tile
def tile(operand, reps: Sequence[int]):
    """`operand` repeated `reps[i]` times along dimension i (as np.tile at full rank)."""
    return tile_p.bind(operand, reps=tuple(int(r) for r in reps))


tile_p = Primitive("tile")
tile_p.def_impl(lambda x, *, reps: np.tile(x, reps))
tile_p.def_abstract_eval(_tile_abstract_eval)
tile_p.def_sharding_rule(_tile_sharding_rule)
deflinear(tile_p, _tile_transpose)
batching.primitive_batchers[tile_p] = _tile_batch_rule
mlir.register_lowering(tile_p, _tile_lowering)


def _split_abstract_eval(x, *, sizes, axis):
    if not 0 <= axis < x.ndim or sum(sizes) != x.shape[axis] or _min(sizes, default=0) < 0:
        raise ValueError(f"split: sizes {sizes} must be non-negative and sum to the size of "
                         f"axis {axis} of {x.str_short()}")
    return [x.update(shape=x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]


def _split_pieces(x, *, sizes, axis):
    starts = np.cumsum((0,) + sizes)
    return [slice_in_dim(x, int(a), int(b), 1, axis) for a, b in zip(starts[:-1], starts[1:])]


def _split_transpose(cts, x, *, sizes, axis):
    cts = [zeros_like_shaped_array(a) if type(c) is Zero else c
           for c, a in zip(cts, _split_abstract_eval(x.aval, sizes=sizes, axis=axis))]
    return [concatenate(cts, axis)]


def _split_batch_rule(vals, dims, *, axis_size, sizes, axis):
    (x,), (d,) = vals, dims
    outs = split_p.bind(batching.moveaxis(x, d, 0), sizes=sizes, axis=axis + 1)
    return outs, [0] * len(outs)


# JAX: jax/_src/lax/lax.py split
def split(operand, sizes: Sequence[int], axis: int = 0):
    """`operand` cut along `axis` into consecutive pieces of `sizes` (which must sum to the
    axis size): a list of arrays. The transpose of `concatenate`."""
    axis = canonicalize_axis(axis, core.get_aval(operand).ndim)
    return split_p.bind(operand, sizes=tuple(int(s) for s in sizes), axis=axis)


split_p = Primitive("split")
split_p.multiple_results = True
split_p.def_impl(lambda x, *, sizes, axis: np.split(x, np.cumsum(sizes)[:-1], axis=axis))
split_p.def_abstract_eval(_split_abstract_eval)
deflinear(split_p, _split_transpose)
batching.primitive_batchers[split_p] = _split_batch_rule
mlir.register_lowering(split_p, mlir.lower_fun(_split_pieces))


# ---------------------------------------------------------------------------------------------
# optimization_barrier; dot algorithms and the other names lax's signatures use
# ---------------------------------------------------------------------------------------------

def _optimization_barrier_jvp(primals, tangents):
    nonzero = [type(t) is not Zero for t in tangents]
    outs = optimization_barrier_p.bind(*primals)
    ts = optimization_barrier_p.bind(*[t for t, nz in zip(tangents, nonzero) if nz])
    it = iter(ts)
    return outs, [next(it) if nz else t for t, nz in zip(tangents, nonzero)]


def _optimization_barrier_transpose(cts, *xs):
    # the cotangents of the linear operands go through a barrier of their own
    live = [i for i, (c, x) in enumerate(zip(cts, xs))
            if is_undefined_primal(x) and type(c) is not Zero]
    out = [Zero(x.aval) if is_undefined_primal(x) else None for x in xs]
    for i, c in zip(live, optimization_barrier_p.bind(*[cts[i] for i in live])):
        out[i] = c
    return out


# JAX: jax/_src/lax/lax.py optimization_barrier
def optimization_barrier(operand, /):
    """`operand` (a pytree of arrays) unchanged, but XLA may not move computation across
    it: what `remat` uses to keep a recomputation from being merged back."""
    from minijax.tree_util import tree_flatten, tree_unflatten  # beside its use
    flat, tree = tree_flatten(operand)
    return tree_unflatten(tree, optimization_barrier_p.bind(*flat))


optimization_barrier_p = Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True
optimization_barrier_p.def_impl(lambda *xs: list(xs))
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
ad.primitive_jvps[optimization_barrier_p] = _optimization_barrier_jvp
ad.primitive_transposes[optimization_barrier_p] = _optimization_barrier_transpose
batching.primitive_batchers[optimization_barrier_p] = lambda vals, dims, *, axis_size: (
    optimization_barrier_p.bind(*vals), list(dims))
mlir.register_lowering(optimization_barrier_p, lambda ctx, *xs: list(
    mlir.hlo.OptimizationBarrierOp(list(xs)).results) if xs else [])


# JAX: jax/_src/lax/lax.py DotAlgorithm
@dataclasses.dataclass(frozen=True)
class DotAlgorithm:
    """A dot algorithm spelt out: the operand and accumulation types and how many passes.
    `dot_general(..., precision=DotAlgorithm(...))` traces and prints it; XLA's CPU backend
    runs none (computing one raises ValueError, as in JAX). Mirrors jax/_src/lax/lax.py:
    DotAlgorithm."""
    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


# JAX: jax/_src/lax/lax.py DotAlgorithmPreset
class DotAlgorithmPreset(enum.Enum):
    """JAX's named dot algorithms, `LHS_RHS_ACCUMULATION` (`_X3`: three bfloat16 passes
    emulating float32). Passed as `precision=` (or by name), the operands are converted to the
    preset's types, the product is accumulated in its type and converted to the result's
    dtype, and the algorithm is written on the StableHLO op. XLA's CPU backend runs DEFAULT,
    F16_F16_F16, BF16_BF16_F32(_X3, _X6), F32_F32_F32 and F64_F64_F64; the others raise
    ValueError when computed. Mirrors jax/_src/lax/lax.py: DotAlgorithmPreset."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"DotAlgorithmPreset.{self.name}"

    def __str__(self) -> str:  # the bare name, as jaxprs print it
        return self.name

    @property
    def supported_lhs_types(self) -> tuple | None:
        """The operand dtypes the preset computes in (an operand of another dtype is
        converted to the first); None: any."""
        return _PRESET_TYPES[self.name][0]

    supported_rhs_types = supported_lhs_types

    @property
    def accumulation_type(self):
        """The dtype the products are summed in; None: the result's."""
        return _PRESET_TYPES[self.name][1]

    def supported_output_types(self, lhs_dtype, rhs_dtype) -> tuple | None:
        """The accumulation dtypes the preset allows for these operands (the result's dtype
        if listed, else the first); None: any."""
        name, acc = self.name, self.accumulation_type
        if name.startswith("ANY_F8_ANY_F8_F32"):
            return (np.dtype(np.float32), np.dtype(np.float16), np.dtype(dtypes.bfloat16),
                    *map(np.dtype, _FLOAT8))
        low = {"F16_F16_F32": np.float16, "BF16_BF16_F32": dtypes.bfloat16}.get(name)
        if low is not None and np.promote_types(lhs_dtype, rhs_dtype) == low:
            return (np.dtype(np.float32), np.dtype(low))
        return None if acc is None else (np.dtype(acc),)


_F16, _BF16, _F32, _F64 = (np.dtype(t) for t in (np.float16, dtypes.bfloat16, np.float32,
                                                  np.float64))
_FLOAT8 = tuple(getattr(dtypes, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(dtypes, n))
# preset name -> (operand dtypes, accumulation dtype, the op's (lhs, rhs, acc) types, passes)
_PRESET_TYPES = {
    "DEFAULT": (None, None, None, 1),
    "ANY_F8_ANY_F8_F32": (None, _F32, None, 1),
    "ANY_F8_ANY_F8_F32_FAST_ACCUM": (None, _F32, None, 1),
    "ANY_F8_ANY_F8_ANY": (None, None, None, 1),
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM": (None, None, None, 1),
    "F16_F16_F16": ((_F16,), _F16, (_F16, _F16, _F16), 1),
    "F16_F16_F32": ((_F16,), _F32, (_F16, _F16, _F32), 1),
    "BF16_BF16_BF16": ((_BF16, _F32), _BF16, (_BF16, _BF16, _BF16), 1),
    "BF16_BF16_F32": ((_BF16, _F32), _F32, (_BF16, _BF16, _F32), 1),
    "BF16_BF16_F32_X3": ((_F32,), _F32, (_BF16, _BF16, _F32), 3),
    "BF16_BF16_F32_X6": ((_F32,), _F32, (_BF16, _BF16, _F32), 6),
    "BF16_BF16_F32_X9": ((_F32,), _F32, (_BF16, _BF16, _F32), 9),
    "TF32_TF32_F32": ((_F32,), _F32, ("tf32", "tf32", _F32), 1),
    "TF32_TF32_F32_X3": ((_F32,), _F32, ("tf32", "tf32", _F32), 3),
    "F32_F32_F32": ((_F32,), _F32, (_F32, _F32, _F32), 1),
    "F64_F64_F64": ((_F64,), _F64, (_F64, _F64, _F64), 1),
}
# the algorithms XLA's CPU backend computes (it ignores an algorithm rather than refusing it,
# so the check is made here, as JAX makes it)
_CPU_PRESETS = frozenset({"DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64",
                          "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"})


# JAX: jax/_src/lax/lax.py get_algorithm_compute_types (and _handle_dot_precision's CPU check)
def _dot_algorithm_types(algorithm, lhs_dtype, rhs_dtype, out_dtype,
                         platform: str = "cpu") -> tuple:
    """(lhs, rhs, accumulation) dtypes `algorithm` computes in for these operands and result.
    Raises ValueError, on the 'cpu' platform, for an algorithm the CPU backend does not run."""
    if platform == "cpu" and not (isinstance(algorithm, DotAlgorithmPreset)
                                  and algorithm.name in _CPU_PRESETS):
        raise ValueError(f"The precision '{algorithm}' is not supported by dot_general on CPU "
                         f"(operands {np.dtype(lhs_dtype).name} and {np.dtype(rhs_dtype).name}; "
                         f"the CPU runs {', '.join(sorted(_CPU_PRESETS))})")

    def pick(dtype, allowed):
        return dtype if allowed is None or np.dtype(dtype) in allowed else allowed[0]
    lhs_t = pick(lhs_dtype, algorithm.supported_lhs_types)
    rhs_t = pick(rhs_dtype, algorithm.supported_rhs_types)
    return lhs_t, rhs_t, pick(out_dtype, algorithm.supported_output_types(lhs_t, rhs_t))


def _dot_algorithm_attr(preset, types):
    """The `#stablehlo.dot_algorithm<...>` a preset writes on the op."""
    op_types, passes = _PRESET_TYPES[preset.name][2:]
    if op_types is None:  # the float8 presets name the operands' own types
        op_types = (types[0], types[1], types[2])

    def ir_type(t):
        return mlir.ir.FloatTF32Type.get() if t == "tf32" else mlir.dtype_to_ir_type(t)
    return mlir.hlo.DotAlgorithm.get(*map(ir_type, op_types), 1, 1, passes,
                                     preset.name.endswith("FAST_ACCUM"))


# JAX: jax/_src/lax/lax.py RandomAlgorithm
class RandomAlgorithm(enum.IntEnum):
    """The bit generators of XLA's RngBitGenerator (minijax's keys use threefry)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


# The type names lax's signatures use (JAX: jax/_src/lax/lax.py PrecisionLike, ...)
PrecisionLike = None | str | Precision | tuple | DotAlgorithm | DotAlgorithmPreset
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]


# ---------------------------------------------------------------------------------------------
# composite: a named operation with its decomposition
# ---------------------------------------------------------------------------------------------

def _composite_batch_rule(vals, dims, *, axis_size, name, attributes, version, jaxpr):
    vals = [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims)]

    def batched_fun(*xs):
        return batching.vmap_flat(lambda *ys: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *ys),
                                  xs, [0] * len(xs), axis_size, lambda n: [0] * n,
                                  fun_name=name)
    batched = pe.trace_to_jaxpr_dynamic(batched_fun, [core.get_aval(v) for v in vals],
                                        purpose="composite")
    closed = core.ClosedJaxpr(batched[0], batched[1])
    outs = composite_p.bind(*vals, name=name, attributes=attributes, version=version,
                            jaxpr=closed)
    return outs, [0] * len(outs)


# JAX: jax/_src/lax/lax.py composite — differs: lowered inline (JAX emits a
# stablehlo.composite naming `decomposition` as a function, for compilers that know `name`)
def composite(decomposition, name: str, version: int = 0):
    """`decomposition` as one operation named `name`: calling the result traces it into a
    `composite` equation holding its jaxpr; keyword arguments are static attributes. Its
    values are the decomposition's. Not differentiable (as JAX: use custom_jvp)."""
    from minijax.tree_util import tree_flatten, tree_unflatten  # beside its use

    @functools.wraps(decomposition)
    def wrapped(*args, **kwargs):
        if any(isinstance(v, core.Tracer) for v in kwargs.values()):
            raise TypeError(f"composite {name!r}: attributes (keyword arguments) must be "
                            "static, not traced values; pass arrays positionally")
        flat, in_tree = tree_flatten(args)
        out_tree = []

        def flat_fun(*xs):
            out, tree = tree_flatten(decomposition(*tree_unflatten(in_tree, xs), **kwargs))
            out_tree.append(tree)
            return out

        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
            flat_fun, [core.get_aval(x) for x in flat], purpose="composite")
        attributes = tuple(sorted((k, repr(v)) for k, v in kwargs.items() if v is not None))
        outs = composite_p.bind(*flat, name=name, attributes=attributes, version=int(version),
                                jaxpr=core.ClosedJaxpr(jaxpr, consts))
        return tree_unflatten(out_tree[0], outs)
    return wrapped


composite_p = Primitive("composite")
composite_p.multiple_results = True
composite_p.def_impl(lambda *args, jaxpr, **_: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts,
                                                                *args))
composite_p.def_abstract_eval(lambda *avals, jaxpr, **_: [v.aval for v in
                                                           jaxpr.jaxpr.outvars])
batching.primitive_batchers[composite_p] = _composite_batch_rule
mlir.register_lowering(composite_p, lambda ctx, *args, jaxpr, **_: mlir.lower_jaxpr(
    jaxpr.jaxpr, jaxpr.consts, list(args)))


# ---------------------------------------------------------------------------------------------
# rng_bit_generator: XLA's stateful-looking, functional bit generator
# ---------------------------------------------------------------------------------------------

def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm):
    if key.shape != (4,) or key.dtype != np.uint32:
        raise TypeError(f"rng_bit_generator: key must be u32[4], got {key.str_short()}")
    if dtype.kind != "u":
        raise TypeError(f"rng_bit_generator: dtype must be unsigned, got {dtype}")
    return [key, ShapedArray(shape, dtype)]


def _rng_bit_generator_lowering(ctx, key, *, shape, dtype, algorithm):
    # XLA's state is u64[2]: the four words reinterpreted, and back
    hlo, ir = mlir.hlo, mlir.ir
    u32, u64 = ir.IntegerType.get_unsigned(32), ir.IntegerType.get_unsigned(64)
    state = hlo.bitcast_convert(ir.RankedTensorType.get([2], u64),
                                hlo.reshape(ir.RankedTensorType.get([2, 2], u32), key))
    op = hlo.RngBitGeneratorOp(ir.RankedTensorType.get([2], u64),
                               mlir.aval_to_ir_type(ctx.avals_out[1]),
                               hlo.RngAlgorithmAttr.get(_RNG_NAMES[algorithm]), state)
    new_key = hlo.reshape(mlir.aval_to_ir_type(ctx.avals_out[0]), hlo.bitcast_convert(
        ir.RankedTensorType.get([2, 2], u32), op.output_state))
    return [new_key, op.output]


_RNG_NAMES = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}


def _rng_bit_generator_impl(key, **params):
    # no NumPy version: compiled and run by XLA, whose bits these are
    from minijax.pjit import jit  # beside its use; pjit is loaded by now
    return jit(lambda k: rng_bit_generator_p.bind(k, **params))(key)


# JAX: jax/_src/lax/control_flow/loops.py _rng_bit_generator_batching_rule
def _rng_bit_generator_batch_rule(vals, dims, *, axis_size, shape, **params):
    # as JAX: one call with the first key draws the whole batch of bits; that key's next
    # state replaces it, the other keys are returned unchanged
    (keys,), (d,) = vals, dims
    keys = batching.moveaxis(keys, d, 0)
    first = squeeze(slice(keys, (0, 0), (1, 4)), (0,))
    new_key, bits = rng_bit_generator_p.bind(first, shape=(axis_size,) + shape, **params)
    rest = slice(keys, (1, 0), (axis_size, 4))
    return [concatenate([broadcast(new_key, (1,)), rest], 0), bits], [0, 0]


# JAX: jax/_src/lax/lax.py rng_bit_generator
def rng_bit_generator(key, shape: Sequence[int], dtype=np.uint32,
                      algorithm=RandomAlgorithm.RNG_DEFAULT):
    """`(new_key, bits)`: random unsigned bits of `shape` from XLA's RngBitGenerator with
    state `key` (u32[4]), and the state to use next. The bits depend on the backend and
    `algorithm` (not minijax.random's threefry); with x64 off uint64 becomes uint32."""
    dtype = dtypes.canonicalize_dtype(dtype)
    return tuple(rng_bit_generator_p.bind(key, shape=tuple(int(d) for d in shape),
                                          dtype=np.dtype(dtype),
                                          algorithm=RandomAlgorithm(algorithm)))


rng_bit_generator_p = Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
rng_bit_generator_p.def_impl(_rng_bit_generator_impl)
rng_bit_generator_p.def_abstract_eval(_rng_bit_generator_abstract_eval)
defjvp_zero(rng_bit_generator_p)
batching.primitive_batchers[rng_bit_generator_p] = _rng_bit_generator_batch_rule
mlir.register_lowering(rng_bit_generator_p, _rng_bit_generator_lowering)


# ---------------------------------------------------------------------------------------------
# stage, copy, dce_sink, rng_uniform, shape_as_value: identity-like and XLA-state primitives
# ---------------------------------------------------------------------------------------------

class _StagePrimitive(Primitive):
    # JAX: jax/_src/lax/lax.py _stage_bind_with_trace (trace.stage_value) — differs: a
    # jaxpr trace makes the value a constant of the jaxpr, other traces apply the identity
    def bind(self, x):
        trace = core.current_trace()
        if isinstance(x, core.Tracer) and getattr(x, "_trace", None) is trace:
            return x  # already a value of this trace
        if isinstance(trace, pe.DynamicJaxprTrace) and not isinstance(x, core.Tracer):
            return pe.DynamicJaxprTracer(trace, trace.new_const(x))
        if isinstance(x, Array) and trace is core.eval_trace:
            return x
        return super().bind(x)


# JAX: jax/_src/lax/lax.py stage
def stage(x, /):
    """`x` (an array or a Python/NumPy scalar or array) lifted into the current trace: under
    `jit` a value of the jaxpr (a literal or constant, no equation), eagerly a minijax Array of
    the same shape and dtype (a Python scalar stays weakly typed). Mirrors
    jax/_src/lax/lax.py: stage."""
    return stage_p.bind(x)


stage_p = _StagePrimitive("stage")
stage_p.def_impl(lambda x: x)
stage_p.def_abstract_eval(lambda x: x)
deflinear(stage_p, lambda ct, x: [ct])
defvectorized(stage_p)
mlir.register_lowering(stage_p, lambda ctx, x: [x])

# JAX: jax/_src/lax/lax.py copy_p — a fresh buffer holding x (jnp.array(x, copy=True) binds it)
copy_p = Primitive("copy")
copy_p.def_impl(np.copy)
copy_p.def_abstract_eval(lambda x: x)
deflinear(copy_p, lambda ct, x: [ct if type(ct) is Zero else copy_p.bind(ct)])
defvectorized(copy_p)
mlir.register_lowering(copy_p, lambda ctx, x: [x])


# JAX: jax/_src/lax/lax.py NoDCEEffect
class NoDCEEffect(effects.Effect):
    """What keeps a `dce_sink` (and the computation of its operand) from dead-code removal."""
    __hash__ = lambda self: hash(type(self))  # one instance's worth of identity
    __eq__ = lambda self, other: type(self) is type(other)
    __str__ = lambda self: "NoDCE"


no_dce_effect = NoDCEEffect()


# JAX: jax/_src/lax/lax.py dce_sink
def dce_sink(val, *, prevent_mlir_dce: bool = False) -> None:
    """Mark every array of the pytree `val` as used: the equations computing it survive the
    jaxpr's dead-code elimination. With `prevent_mlir_dce`, the lowering also keeps it alive
    in the compiled program (a side-effecting `custom_call @dce_sink`, as JAX emits; XLA's
    CPU backend ignores it). Returns None. Mirrors jax/_src/lax/lax.py: dce_sink."""
    tree_map(lambda x: dce_sink_p.bind(x, prevent_mlir_dce=bool(prevent_mlir_dce)), val)


def _dce_sink_lowering(ctx, x, *, prevent_mlir_dce):
    if prevent_mlir_dce:  # the typed-FFI call JAX emits (ffi_lowering("dce_sink"))
        ir = mlir.ir
        op = mlir.hlo.CustomCallOp.build_generic(results=[], operands=[x], attributes=dict(
            call_target_name=ir.StringAttr.get("dce_sink"),
            has_side_effect=ir.BoolAttr.get(True), backend_config=ir.StringAttr.get(""),
            api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
            called_computations=ir.ArrayAttr.get([]),
            output_operand_aliases=ir.ArrayAttr.get([]),
            operand_layouts=ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(
                np.zeros(0, np.int64), type=ir.IndexType.get())]),
            result_layouts=ir.ArrayAttr.get([])))
        op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get({})
    return []


dce_sink_p = Primitive("dce_sink")
dce_sink_p.multiple_results = True
dce_sink_p.def_impl(lambda x, **_: [])
dce_sink_p.def_effectful_abstract_eval(lambda x, **_: ([], {no_dce_effect}))
deflinear(dce_sink_p, lambda cts, x, **_: [Zero(x.aval)])
batching.primitive_batchers[dce_sink_p] = lambda vals, dims, *, axis_size, **params: (
    dce_sink_p.bind(*vals, **params), [])
mlir.register_lowering(dce_sink_p, _dce_sink_lowering)


# JAX: jax/_src/lax/lax.py rng_uniform
def rng_uniform(a, b, shape: Sequence[int]):
    """Numbers uniform in [a, b) of `shape` and the dtype of the scalars `a` and `b` (floats or
    integers), from XLA's stateful RngUniform: each compiled program draws its own sequence,
    so the values are XLA's and differ from call to call; prefer minijax.random. No jvp and
    no batching rule (as JAX). Raises ValueError for operands of different dtypes or that are
    not scalars. Mirrors jax/_src/lax/lax.py: rng_uniform."""
    return rng_uniform_p.bind(a, b, shape=tuple(int(d) for d in shape))


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got "
                         f"{a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} "
                         f"and {b.shape}.")
    return ShapedArray(shape, a.dtype, weak_type=a.weak_type and b.weak_type)


def _rng_uniform_lowering(ctx, a, b, *, shape):
    dims = mlir.ir_constant(np.array(shape, np.int64))
    return [mlir.hlo.rng(a, b, dims, mlir.hlo.RngDistributionAttr.get("UNIFORM"))]


def _rng_uniform_impl(a, b, *, shape):
    # no NumPy version: XLA's generator, compiled and run (each run draws anew, as in JAX)
    from minijax.pjit import jit  # beside its use; pjit is loaded by now
    # (as NumPy: dispatch wraps it with the abstract eval's type, weak for Python scalars)
    return np.asarray(jit(lambda a, b: rng_uniform_p.bind(a, b, shape=shape))(a, b))


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.def_impl(_rng_uniform_impl)
rng_uniform_p.def_abstract_eval(_rng_uniform_abstract_eval)
mlir.register_lowering(rng_uniform_p, _rng_uniform_lowering)


# JAX: jax/_src/lax/lax.py shape_as_value
def shape_as_value(shape: Sequence[int]):
    """`shape` as a 1-d int32 array (int64 for a dimension int32 cannot hold): a NumPy array
    for a shape of integers, an `i32[0]` Array for `()`. Mirrors jax/_src/lax/lax.py:
    shape_as_value."""
    dtype = np.int32 if all(-2**31 <= int(d) < 2**31 for d in shape) else np.int64
    if len(shape) == 0:
        return full((0,), np.array(0, dtype))
    return np.asarray(shape, dtype=dtype)
