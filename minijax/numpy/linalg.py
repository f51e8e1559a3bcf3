"""`minijax.numpy.linalg`: vector and matrix norms (decompositions come later).

Built from `minijax.numpy` operations, so its derivatives are those of the pieces: the 2-norm's
gradient at the zero vector is NaN in minijax as in JAX (sqrt'(0) = inf times a zero tangent).
Mirrors jax/_src/numpy/linalg.py.
"""

from __future__ import annotations

import numpy as np

from minijax import lax
from minijax.lax import lax as lax_internal
from minijax import numpy as jnp
from minijax.numpy.util import canonicalize_axis, promote_args_inexact


def _sum_sq(x, axis, keepdims):
    return jnp.sum(jnp.multiply(x, x), axis=axis, keepdims=keepdims)


def _amax0(x, axis, keepdims):
    # JAX's `amax(..., initial=0)`: an empty reduction gives 0
    m = jnp.max(x, axis=axis, keepdims=keepdims)
    return lax.max(lax_internal._const(m, 0), m)


# JAX: jax/_src/numpy/linalg.py vector_norm
def vector_norm(x, ord=2, axis=None, keepdims: bool = False):
    """The vector `ord`-norm of `x` over `axis` (None: all axes, flattened).

    Args:
      x: an array; integers are promoted to the default float dtype.
      ord: 2 or None (sqrt of the sum of squares), inf (max |x|), -inf (min |x|), 0 (number of
        nonzeros), 1 (sum |x|), or another number p (sum(|x|**p)**(1/p)).
    Returns: `f32[...]`, the reduced axes removed (kept as size 1 with keepdims).
    Raises ValueError for a string `ord`.
    """
    (x,) = promote_args_inexact("jnp.linalg.vector_norm", x)
    if ord is None or ord == 2:
        return jnp.sqrt(_sum_sq(x, axis, keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    if ord == np.inf:
        return _amax0(jnp.abs(x), axis, keepdims)
    if ord == -np.inf:
        return jnp.min(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(jnp.not_equal(x, 0), dtype=x.dtype, axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    abs_x = jnp.abs(x)
    p = lax_internal._const(abs_x, ord)
    return jnp.power(jnp.sum(jnp.power(abs_x, p), axis=axis, keepdims=keepdims),
                     lax_internal._const(abs_x, 1.0 / p))


# JAX: jax/_src/numpy/linalg.py norm — differs: no SVD-based norms (ord 2, -2, 'nuc' of matrices)
def norm(x, ord=None, axis=None, keepdims: bool = False):
    """The norm of a vector (one axis) or a matrix (two axes) of `x`.

    Args:
      x: an array `T[...]`; integers are promoted to the default float dtype.
      ord: for vectors see `vector_norm`; for matrices None/'fro' (Frobenius), 1 / -1
        (max / min column sum of |x|), inf / -inf (max / min row sum of |x|).
      axis: None (with ord=None: the 2-norm of all entries, any rank; otherwise all axes), an
        int, or a tuple of one or two ints.
      keepdims: keep the reduced axes with size 1.
    Returns: a float array with the reduced axes removed.
    Raises ValueError for an invalid `ord` or number of axes; NotImplementedError for the
    singular-value norms (matrix ord 2, -2, 'nuc').
    """
    (x,) = promote_args_inexact("jnp.linalg.norm", x)
    nd = jnp.ndim(x)
    if axis is None:
        if ord is None:
            return jnp.sqrt(_sum_sq(x, None, keepdims))
        axis = tuple(range(nd))
    elif isinstance(axis, tuple):
        axis = tuple(canonicalize_axis(a, nd) for a in axis)
    else:
        axis = (canonicalize_axis(axis, nd),)
    if len(axis) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)
    if len(axis) != 2:
        raise ValueError(f"Improper number of axes for norm: {axis=}. Pass one axis to compute a"
                         " vector-norm, or two axes to compute a matrix-norm.")
    row, col = axis
    if ord is None or ord in ("f", "fro"):
        return jnp.sqrt(_sum_sq(x, axis, keepdims))
    if ord in (1, -1):
        col = col - 1 if not keepdims and col > row else col
        sums = jnp.sum(jnp.abs(x), axis=row, keepdims=keepdims)
        return (_amax0(sums, col, keepdims) if ord == 1
                else jnp.min(sums, axis=col, keepdims=keepdims))
    if ord in (np.inf, -np.inf):
        row = row - 1 if not keepdims and row > col else row
        sums = jnp.sum(jnp.abs(x), axis=col, keepdims=keepdims)
        return (_amax0(sums, row, keepdims) if ord == np.inf
                else jnp.min(sums, axis=row, keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"jnp.linalg.norm with ord={ord!r} for matrices needs the "
                                  "singular value decomposition, which minijax does not have yet")
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")
