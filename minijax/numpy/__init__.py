"""`minijax.numpy` (import as `jnp`): the NumPy API on minijax's primitives.

Re-exports only; each name lives in the module of its concept, as in jax/_src/numpy/.
"""

from minijax.numpy import array_methods as _array_methods
from minijax.numpy.array_constructors import (  # noqa: F401
    array, asarray, from_dlpack, frombuffer, fromfile, fromfunction, fromiter, fromstring, load,
)
from minijax.numpy.scalar_types import (  # noqa: F401
    bfloat16, bool, bool_, cdouble, complex128, complex64, complex_, csingle, double, float16,
    float32, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, float64, float8_e3m4, float8_e4m3,
    float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
    float8_e8m0fnu, float_, int1, int16, int2, int32, int4, int64, int8, int_, single, uint,
    uint1, uint16, uint2, uint32, uint4, uint64, uint8,
)
from minijax.numpy.lax_numpy import (  # noqa: F401
    allclose, angle, append, apply_along_axis, apply_over_axes, arange, argwhere, array_equal,
    array_equiv, array_repr, array_split, array_str, astype, atleast_1d, atleast_2d, atleast_3d,
    bincount, block, broadcast_arrays, broadcast_to, can_cast, character, choose, clip,
    column_stack, complexfloating, ComplexWarning, compress, concat, concatenate, convolve, copy,
    corrcoef, correlate, cov, cross, delete, diag, diag_indices, diag_indices_from, diagflat,
    diagonal, diff, digitize, dsplit, dstack, dtype, e, ediff1d, empty, empty_like, euler_gamma,
    expand_dims, extract, eye, fill_diagonal, finfo, flatnonzero, flexible, flip, fliplr, flipud,
    floating, full, full_like, generic, geomspace, get_printoptions, gradient, histogram,
    histogram2d, histogram_bin_edges, histogramdd, hsplit, hstack, i0, identity, iinfo, indices,
    inexact, inf, insert, integer, interp, isclose, iscomplex, iscomplexobj, isdtype, isreal,
    isrealobj, isscalar, issubdtype, iterable, linspace, logspace, mask_indices, matrix_transpose,
    meshgrid, moveaxis, nan, nan_to_num, ndarray, ndim, newaxis, nonzero, number, object_, ones,
    ones_like, packbits, pad, permute_dims, pi, piecewise, place, printoptions,
    promote_types, put, put_along_axis, ravel, ravel_multi_index, repeat, reshape, resize,
    result_type, roll, rollaxis, rot90, save, savez, searchsorted, select, set_printoptions, shape,
    signedinteger, size, split, squeeze, stack, swapaxes, tile, trace, transpose, trapezoid, tri,
    tril, tril_indices, tril_indices_from, trim_zeros, triu, triu_indices, triu_indices_from,
    unpackbits, unravel_index, unsignedinteger, unstack, unwrap, vander, vsplit, vstack, where,
    zeros, zeros_like,
)
from minijax.numpy.ufuncs import (  # noqa: F401
    abs, absolute, acos, acosh, add, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
    around, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_count, bitwise_invert,
    bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor, cbrt, ceil,
    conj, conjugate, copysign, cos, cosh, deg2rad, degrees, divide, divmod, equal, exp, exp2,
    expm1, fabs, float_power, floor, floor_divide, fmax, fmin, fmod, frexp, gcd, greater,
    greater_equal, heaviside, hypot, imag, invert, isfinite, isinf, isnan, isneginf, isposinf, lcm,
    ldexp, left_shift, less, less_equal, log, log10, log1p, log2, logaddexp, logaddexp2,
    logical_and, logical_not, logical_or, logical_xor, maximum, minimum, mod, modf, multiply,
    negative, nextafter, not_equal, positive, pow, power, rad2deg, radians, real, reciprocal,
    remainder, right_shift, rint, round, sign, signbit, sin, sinc, sinh, spacing, sqrt, square,
    subtract, tan, tanh, true_divide, trunc,
)
from minijax.numpy.reductions import (  # noqa: F401
    all, amax, amin, any, argmax, argmin, average, count_nonzero, cumprod, cumsum, cumulative_prod,
    cumulative_sum, max, mean, median, min, nanargmax, nanargmin, nancumprod, nancumsum, nanmax,
    nanmean, nanmedian, nanmin, nanpercentile, nanprod, nanquantile, nanstd, nansum, nanvar,
    percentile, prod, ptp, quantile, std, sum, var,
)
from minijax.numpy.indexing import (  # noqa: F401
    scatter_update, take, take_along_axis,
)
from minijax.numpy.sorting import (  # noqa: F401
    argpartition, argsort, lexsort, partition, sort, sort_complex,
)
from minijax.numpy.setops import (  # noqa: F401
    intersect1d, isin, setdiff1d, setxor1d, union1d, unique, unique_all, unique_counts,
    unique_inverse, unique_values,
)
from minijax.numpy.tensor_contractions import (  # noqa: F401
    dot, inner, kron, matmul, matvec, outer, tensordot, vdot, vecdot, vecmat,
)
from minijax.numpy.einsum import (  # noqa: F401
    einsum, einsum_path,
)
from minijax.numpy.polynomial import (  # noqa: F401
    poly, polyadd, polyder, polydiv, polyfit, polyint, polymul, polysub, polyval, roots,
)
from minijax.numpy.window_functions import (  # noqa: F401
    bartlett, blackman, hamming, hanning, kaiser,
)
from minijax.numpy.index_tricks import c_, index_exp, ix_, mgrid, ogrid, r_, s_  # noqa: F401
from minijax.numpy.ufunc_api import frompyfunc, ufunc  # noqa: F401
from minijax.numpy.vectorize import vectorize  # noqa: F401
from minijax.numpy.util import broadcast_shapes  # noqa: F401
from minijax.numpy import fft, linalg  # noqa: F401

_array_methods.install()


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
