"""`minijax.numpy` (import as `jnp`): the NumPy API on minijax's primitives."""

from minijax.numpy import array_methods as _array_methods
from minijax.numpy.lax_numpy import (  # noqa: F401
    abs, absolute, add, amax, amin, arange, argmax, argmin, array, asarray, bfloat16,
    bitwise_and, bitwise_or, bool_, broadcast_to, ceil, clip, complex64, concatenate, cos, divide,
    dot, dtype, e, einsum, equal, exp, expand_dims, eye, finfo, float16, float32, float64, floating,
    floor, floor_divide, full, full_like, greater, greater_equal, iinfo, inexact, inf, int8, int16,
    int32, int64, integer, invert, isfinite, isnan, issubdtype, less, less_equal, linspace, log,
    log1p, logical_and, logical_and_or_bitwise_and, logical_not, logical_or,
    logical_or_or_bitwise_or, matmul, max, maximum, mean, min, minimum, mod, moveaxis, multiply,
    nan, ndarray, ndim, negative, newaxis, not_equal, number, ones, ones_like, outer, pi, power,
    promote_types, ravel, reciprocal, remainder, reshape, result_type, shape, sign, sin, size,
    sqrt, square, squeeze, stack, std, subtract, sum, swapaxes, take_along_axis, tanh, transpose,
    true_divide, uint8, uint16, uint32, uint64, var, vdot, where, zeros, zeros_like, _astype,
    _rewriting_take,
)
from minijax.numpy import linalg  # noqa: F401,E402
from minijax.numpy.extra import *  # noqa: F401,F403,E402

_array_methods.install()
