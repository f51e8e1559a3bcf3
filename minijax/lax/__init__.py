"""`minijax.lax`: the primitives and thin wrappers around `bind`, as `jax.lax`."""

from minijax.lax.lax import (  # noqa: F401
    abs, add, argmax, argmin, bitwise_and, bitwise_not, bitwise_or, broadcast,
    broadcast_in_dim, broadcasted_iota, concatenate, convert_element_type, cos, div, dot_general,
    eq, exp, expand_dims, floor, full, full_like, ge, gt, integer_pow, iota, le, log, log1p,
    logistic, lt, max, min, mul, ne, neg, pad, pow, reduce_max, reduce_min, reduce_sum, rem,
    reshape, rev, rsqrt, select, select_n, sign, sin, slice, sqrt, square, squeeze, stop_gradient,
    sub, tanh, transpose, zeros_like_array,
)
from minijax.lax.slicing import (  # noqa: F401
    dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim, dynamic_update_index_in_dim,
    dynamic_update_slice, dynamic_update_slice_in_dim,
)
from minijax.lax.slicing import (  # noqa: F401
    GatherDimensionNumbers, ScatterDimensionNumbers, gather, scatter, scatter_add, scatter_max,
    scatter_min, scatter_mul,
)
from minijax.lax.convolution import (  # noqa: F401
    ConvDimensionNumbers, conv_dimension_numbers, conv_general_dilated, padtype_to_pads,
)
from minijax.lax.windowed_reductions import reduce_window  # noqa: F401
from minijax.lax.lax import (  # noqa: F401
    bitcast_convert_type, bitwise_xor, cumsum, nextafter, shift_left, shift_right_arithmetic,
    shift_right_logical, sort, sort_key_val,
)
from minijax.lax.special import erf, erf_inv  # noqa: F401
from minijax.lax.lax import (  # noqa: F401
    atan2, clamp, cumlogsumexp, cummax, cummin, cumprod, expm1, is_finite, reduce_precision,
    top_k,
)
from minijax.lax.special import digamma, lgamma  # noqa: F401
from minijax.lax.control_flow import (  # noqa: F401
    cond, fori_loop, map, scan, switch, while_loop,
)
from minijax.lax import linalg  # noqa: F401,E402
