"""`minijax.lax`: the primitives and thin wrappers around `bind`, as `jax.lax`."""

from minijax.lax.lax import (  # noqa: F401
    abs, add, argmax, argmin, bitwise_and, bitwise_not, bitwise_or, broadcast,
    broadcast_in_dim, broadcasted_iota, concatenate, convert_element_type, cos, div, dot_general,
    eq, exp, expand_dims, floor, full, full_like, ge, gt, integer_pow, iota, le, log, log1p,
    logistic, lt, max, min, mul, ne, neg, pad, pow, reduce_max, reduce_min, reduce_sum, rem,
    reshape, rev, rsqrt, select, select_n, sign, sin, slice, sqrt, square, squeeze, stop_gradient,
    sub, tanh, transpose, zeros_like_array,
)
