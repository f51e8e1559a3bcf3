"""`minijax.numpy.linalg`: norms, decompositions, solves and determinants.

Norms are built from `minijax.numpy` operations, so their derivatives are those of the pieces:
the 2-norm's gradient at the zero vector is NaN in minijax as in JAX (sqrt'(0) = inf times a
zero tangent). Decompositions call the primitives of `minijax.lax.linalg`. `solve` and `inv`
go through `lu` and `triangular_solve` and are differentiated through those primitives' jvp
rules (JAX wraps the solve in `custom_linear_solve`; the derivatives agree). `det` and
`slogdet` have JAX's custom jvps: `det`'s uses the adjugate (`_cofactor_solve`), so its
gradient stays finite at singular matrices.
Mirrors jax/_src/numpy/linalg.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from minijax import core, dtypes, lax, numpy as jnp
from minijax.custom_derivatives import custom_jvp
from minijax.lax import lax as lax_internal, linalg as lax_linalg
from minijax.numpy.util import (
    canonicalize_axis,
    check_arraylike,
    jit_when_traced,
    promote_args_inexact,
    promote_dtypes,
)


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


# JAX: jax/_src/numpy/linalg.py norm (under jit, as JAX's)
@jit_when_traced(static_argnames=("ord", "axis", "keepdims"))
def norm(x, ord=None, axis=None, keepdims: bool = False):
    """The norm of a vector (one axis) or a matrix (two axes) of `x`.

    Args:
      x: an array `T[...]`; integers are promoted to the default float dtype.
      ord: for vectors see `vector_norm`; for matrices None/'fro' (Frobenius), 1 / -1
        (max / min column sum of |x|), inf / -inf (max / min row sum of |x|), 2 / -2
        (largest / smallest singular value), 'nuc' (sum of singular values).
      axis: None (with ord=None: the 2-norm of all entries, any rank; otherwise all axes), an
        int, or a tuple of one or two ints.
      keepdims: keep the reduced axes with size 1.
    Returns: a float array with the reduced axes removed.
    Raises ValueError for an invalid `ord` or number of axes.
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
        rest = [i for i in range(nd) if i not in axis]
        s = svdvals(lax.transpose(x, (*rest, row, col)))
        reducer = {2: jnp.max, -2: jnp.min, "nuc": jnp.sum}[ord]
        y = reducer(s, axis=-1)
        return lax.expand_dims(y, tuple(sorted(axis))) if keepdims else y
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


# ---------------------------------------------------------------------------------------------
# Decompositions
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/linalg.py EighResult
class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


# JAX: jax/_src/numpy/linalg.py SVDResult
class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


# JAX: jax/_src/numpy/linalg.py QRResult
class QRResult(NamedTuple):
    Q: Any
    R: Any


# JAX: jax/_src/numpy/linalg.py SlogdetResult
class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


def _dtype(x) -> np.dtype:
    return core.get_aval(x).dtype


# JAX: jax/_src/numpy/util.py promote_dtypes_inexact
def _promote_dtypes_inexact(name: str, *args):
    """One float dtype for all `args` (ints -> the default float); shapes left alone."""
    check_arraylike(name, *args)
    args = promote_dtypes(*args)
    d, weak = dtypes.dtype_and_weak(args[0])
    if not dtypes.is_float(d):
        args = [lax.convert_element_type(a, dtypes.default_float_dtype(), weak) for a in args]
    return args


def _matrix_arg(name: str, a, square: bool = True):
    """`a` promoted to a float dtype; ValueError unless `T[..., n, n]` when `square` (a
    rectangular `a` of rank < 2 is left to the primitive's TypeError, as in JAX)."""
    (a,) = promote_args_inexact(f"jnp.linalg.{name}", a)
    shape = jnp.shape(a)
    if square and (len(shape) < 2 or shape[-1] != shape[-2]):
        raise ValueError(f"Argument to jnp.linalg.{name} must have shape [..., n, n], got "
                         f"{shape}.")
    return a


# JAX: jax/_src/numpy/linalg.py cholesky
def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor of a symmetric positive definite `a: f32[..., n, n]`.

    Returns: `f32[..., n, n]`: lower `L` with `a = L L^T` (upper: `L^T`); NaNs where `a` is
    not positive definite. Raises ValueError for a non-square `a`.
    """
    a = _matrix_arg("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return lax_linalg._T(L) if upper else L


# JAX: jax/_src/numpy/linalg.py eigh
def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigen-decomposition of a symmetric `a: f32[..., n, n]`.

    Returns: `EighResult(eigenvalues: f32[..., n] ascending, eigenvectors: f32[..., n, n]
    in columns)`. Raises ValueError for a non-square `a` or `UPLO` not None, 'L' or 'U'.
    """
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    a = _matrix_arg("eigh", a)
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


# JAX: jax/_src/numpy/linalg.py eigvalsh
def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True):
    """The eigenvalues `f32[..., n]` (ascending) of a symmetric `a: f32[..., n, n]`."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


# JAX: jax/_src/numpy/linalg.py svd
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """Singular value decomposition `a = U diag(S) Vh` of `a: f32[..., m, n]`, k = min(m, n).

    Returns: `SVDResult(U: f32[..., m, m], S: f32[..., k] descending, Vh: f32[..., n, n])`
    (`[..., m, k]` and `[..., k, n]` if not `full_matrices`), or `S` alone if not
    `compute_uv`. `hermitian=True` takes `a` symmetric and computes it from `eigh`.
    Raises TypeError for rank < 2 (ValueError if `hermitian` and not square).
    """
    if hermitian:
        return _svd_hermitian(_matrix_arg("svd", a), compute_uv, subset_by_index)
    a = _matrix_arg("svd", a, square=False)
    if not compute_uv:
        return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False,
                              subset_by_index=subset_by_index)
    u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=True,
                              subset_by_index=subset_by_index)
    return SVDResult(u, s, vh)


def _svd_hermitian(a, compute_uv: bool, subset_by_index):
    # a = V diag(w) V^T = (V) diag(|w|) (sign(w) V)^T, ordered by |w| descending
    vecs, vals = lax_linalg.eigh(a, subset_by_index=subset_by_index)
    last = jnp.ndim(vals) - 1
    s = lax.abs(vals)
    if not compute_uv:
        return lax.rev(lax.sort(s, dimension=last), (last,))
    order = lax.broadcasted_iota(np.int32, jnp.shape(s), last)
    s, order, sign = [lax.rev(v, (last,)) for v in
                      lax.sort([s, order, lax.sign(vals)], dimension=last, num_keys=1)]
    u = jnp.take_along_axis(vecs, jnp.broadcast_to(jnp.expand_dims(order, -2),
                                                   jnp.shape(vecs)), axis=-1)
    return SVDResult(u, s, lax_linalg._T(jnp.multiply(u, jnp.expand_dims(sign, -2))))


# JAX: jax/_src/numpy/linalg.py svdvals
def svdvals(x):
    """The singular values `f32[..., min(m, n)]` (descending) of `x: f32[..., m, n]`."""
    return svd(x, compute_uv=False)


# JAX: jax/_src/numpy/linalg.py qr
def qr(a, mode: str = "reduced"):
    """QR decomposition of `a: f32[..., m, n]`, k = min(m, n).

    Args:
      mode: 'reduced' (`Q: f32[..., m, k]`, `R: f32[..., k, n]`), 'complete'
        (`Q: f32[..., m, m]`, `R: f32[..., m, n]`), or 'r' (only the reduced `R`).
    Returns: `QRResult(Q, R)`, or `R` for mode 'r'.
    Raises ValueError for an unknown mode, TypeError for rank < 2; NotImplementedError for
    'raw'.
    """
    if mode == "raw":
        raise NotImplementedError("jnp.linalg.qr(mode='raw') is not supported by minijax")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    a = _matrix_arg("qr", a, square=False)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# ---------------------------------------------------------------------------------------------
# Solves and determinants, through LU
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/linalg.py solve
def solve(a, b):
    """The solution `x` of `a x = b`.

    Args:
      a: `f32[..., m, m]`.
      b: `f32[m]` (one vector for every matrix) or `f32[..., m, n]` (batch axes broadcast
        against `a`'s).
    Returns: `f32[..., m]` or `f32[..., m, n]`.
    Raises ValueError for rank < 2, a non-square `a`, or incompatible shapes.
    """
    a, b = _promote_dtypes_inexact("jnp.linalg.solve", a, b)
    a_shape, b_shape = jnp.shape(a), jnp.shape(b)
    if len(a_shape) < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got {a_shape=}")
    m = a_shape[-1]
    if a_shape[-2] != m or len(b_shape) < 1 or (
            b_shape[-1] if len(b_shape) == 1 else b_shape[-2]) != m:
        raise ValueError(f"Invalid shapes for solve: {a_shape}, {b_shape}: expected a of "
                         "shape [..., m, m] and b of shape [m] or [..., m, n]")
    vector = len(b_shape) == 1
    if vector:
        b = lax.broadcast_in_dim(b, (*a_shape[:-2], m, 1), (len(a_shape) - 2,))
    else:
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        a = jnp.broadcast_to(a, (*batch, m, m))
        b = jnp.broadcast_to(b, (*batch, *b_shape[-2:]))
    lu, _, permutation = lax_linalg.lu(a)
    x = lax_linalg._lu_solve(lu, permutation, b)
    return lax.squeeze(x, (len(a_shape) - 1,)) if vector else x


# JAX: jax/_src/numpy/linalg.py inv
def inv(a):
    """The inverse `f32[..., n, n]` of `a: f32[..., n, n]` (inf/NaN where singular).
    Raises ValueError for a non-square `a`."""
    a = _matrix_arg("inv", a)
    return solve(a, jnp.broadcast_to(jnp.eye(jnp.shape(a)[-1], dtype=_dtype(a)),
                                     jnp.shape(a)))


def _lu_diagonal_and_parity(a):
    lu, pivots, _ = lax_linalg.lu(a)
    diag = lax_linalg._extract_diagonal(lu)
    steps = lax.broadcasted_iota(np.int32, jnp.shape(pivots), jnp.ndim(pivots) - 1)
    return diag, jnp.count_nonzero(lax.ne(pivots, steps), axis=-1)


def _parity_sign(count, dtype):
    """(-1) ** count, as `dtype`."""
    odd = jnp.equal(jnp.remainder(count, 2), 1)
    return jnp.where(odd, np.array(-1, dtype), np.array(1, dtype))


# JAX: jax/_src/numpy/linalg.py slogdet
def slogdet(a, *, method: str | None = None) -> SlogdetResult:
    """Sign and log|det| of `a: f32[..., n, n]`.

    Returns: `SlogdetResult(sign: f32[...], logabsdet: f32[...])`; (0, -inf) where singular.
    The derivative of logabsdet is trace(a^-1 a') (inf where singular), that of sign zero.
    Raises ValueError for a non-square `a` or a method other than None/'lu'.
    """
    if method not in (None, "lu"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr' is not supported by minijax.")
    sign, logdet = _slogdet_lu(_matrix_arg("slogdet", a))
    return SlogdetResult(sign, logdet)


# JAX: jax/_src/numpy/linalg.py _slogdet_lu
@custom_jvp
def _slogdet_lu(a):
    diag, swaps = _lu_diagonal_and_parity(a)
    is_zero = jnp.any(jnp.equal(diag, 0), axis=-1)
    if jnp.iscomplexobj(a):  # as JAX: the sign is the product of the pivots' phases
        sign = jnp.multiply(jnp.prod(jnp.divide(diag, jnp.abs(diag).astype(diag.dtype)), axis=-1),
                            _parity_sign(swaps, _dtype(a)))
    else:
        sign = _parity_sign(jnp.add(swaps, jnp.count_nonzero(jnp.less(diag, 0), axis=-1)),
                            _dtype(a))
    sign = jnp.where(is_zero, np.zeros((), _dtype(a)), sign)
    real = np.finfo(_dtype(a)).dtype  # log|det| is real, for complex `a` too
    logdet = jnp.where(is_zero, np.array(-np.inf, real),
                       jnp.sum(jnp.log(jnp.abs(diag)), axis=-1))
    return sign, logdet


# JAX: jax/_src/numpy/linalg.py _slogdet_jvp
@_slogdet_lu.defjvp
def _slogdet_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    sign, logdet = _slogdet_lu(x)
    logdet_dot = jnp.trace(solve(x, g), axis1=-1, axis2=-2)
    if jnp.iscomplexobj(x):  # as JAX: the imaginary part of trace(x^-1 g) turns the sign
        sign_dot = jnp.multiply(jnp.subtract(logdet_dot, jnp.real(logdet_dot).astype(
            logdet_dot.dtype)), sign)
        return (sign, logdet), (sign_dot, jnp.real(logdet_dot))
    return (sign, logdet), (jnp.zeros_like(sign), logdet_dot)


# JAX: jax/_src/numpy/linalg.py _cofactor_solve
def _cofactor_solve(a, b):
    """`(det(a), adj(a) @ b)`, which for an invertible `a` is `det(a) * solve(a, b)`, and stays
    finite where `a` is singular. With `a[perm] = L U`: `det(a) solve(a, b) = prod(diag U) U^-1
    L^-1 b[perm]`. For rank n-1 only U's last pivot is zero: replace it by 1 / (the product of
    the others) and scale the other rows of `L^-1 b[perm]` by det(a) (= 0); for a lower rank
    the adjugate is zero, and `U^-1` of ones shows inf/NaN. `a`, `b`: `f32[..., n, n]`."""
    if jnp.shape(a)[-1] == 1:
        return a[..., 0, 0], b
    lu, pivots, permutation = lax_linalg.lu(a)
    diag = lax_linalg._extract_diagonal(lu)
    steps = lax.broadcasted_iota(np.int32, jnp.shape(pivots), jnp.ndim(pivots) - 1)
    sign = _parity_sign(jnp.count_nonzero(lax.ne(pivots, steps), axis=-1), _dtype(a))
    partial_det = jnp.multiply(jnp.cumprod(diag, axis=-1), jnp.expand_dims(sign, -1))
    lu = lu.at[..., -1, -1].set(jnp.divide(1.0, partial_det[..., -2]))
    ones = jnp.ones(jnp.shape(a)[:-1] + (1,), _dtype(a))
    probe = lax_linalg.triangular_solve(lu, ones, left_side=True, lower=False)
    low_rank = jnp.any(jnp.logical_not(jnp.isfinite(probe)), axis=(-2, -1))
    low_rank = jnp.broadcast_to(low_rank[..., None, None], jnp.shape(b))
    x = jnp.where(low_rank, jnp.zeros_like(b), b)
    x = lax_linalg._matmul(lax_linalg._permutation_matrix(permutation, _dtype(a)), x)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate([jnp.multiply(x[..., :-1, :], partial_det[..., -1, None, None]),
                         x[..., -1:, :]], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return partial_det[..., -1], jnp.where(low_rank, jnp.zeros_like(x), x)


# JAX: jax/_src/numpy/linalg.py det
def det(a):
    """The determinant `f32[...]` of `a: f32[..., n, n]`: explicit products for n = 2 and 3,
    otherwise U's diagonal from `a`'s LU decomposition, signed by the parity of the row swaps.
    Its derivative is trace(adj(a) a'), finite also where `a` is singular.
    Raises ValueError for a non-square `a`."""
    a = _matrix_arg("det", a)
    n = jnp.shape(a)[-1]
    if n == 2:
        return _det_2x2(a)
    if n == 3:
        return _det_3x3(a)
    return _det(a)


# JAX: jax/_src/numpy/linalg.py _det_2x2
def _det_2x2(a):
    return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]


# JAX: jax/_src/numpy/linalg.py _det_3x3
def _det_3x3(a):
    return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2] +
            a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0] +
            a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1] -
            a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0] -
            a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1] -
            a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])


# JAX: jax/_src/numpy/linalg.py _det
@custom_jvp
def _det(a):
    sign, logdet = _slogdet_lu(a)
    return jnp.multiply(sign, jnp.exp(logdet))


# JAX: jax/_src/numpy/linalg.py _det_jvp
@_det.defjvp
def _det_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    y, z = _cofactor_solve(x, g)
    return y, jnp.trace(z, axis1=-1, axis2=-2)


# ---------------------------------------------------------------------------------------------
# Through the SVD
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/numpy/linalg.py pinv — differs: differentiated through svd's jvp rule, not a
# custom jvp (the same derivative where the rank does not change)
def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse `f32[..., n, m]` of `a: f32[..., m, n]`: singular
    values at most `rtol` times the largest (default 10 * max(m, n) * eps) count as zero.
    Raises ValueError if both `rtol` and `rcond` are given, TypeError for rank < 2."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = _matrix_arg("pinv", a, square=False)
    dtype = _dtype(a)
    if rtol is None:
        rtol = 10.0 * max(jnp.shape(a)[-2:]) * dtypes.finfo(dtype).eps
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = jnp.multiply(jnp.expand_dims(jnp.asarray(rtol, dtype), -1),
                          s[..., 0:1])
    s = jnp.where(jnp.greater(s, cutoff), s, np.array(np.inf, dtype))
    return jnp.matmul(lax_linalg._T(vh), jnp.divide(lax_linalg._T(u), jnp.expand_dims(s, -1)))


# JAX: jax/_src/numpy/linalg.py matrix_rank
def matrix_rank(M, rtol=None, *, tol=None):
    """The number of singular values of `M: f32[..., m, n]` above `rtol` times the largest
    (default max(m, n) * eps); `i32[...]`. A vector's rank is 1 unless it is all zeros.
    Raises ValueError if both `rtol` and `tol` are given."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (M,) = promote_args_inexact("jnp.linalg.matrix_rank", M)
    if jnp.ndim(M) < 2:
        return lax.convert_element_type(jnp.any(jnp.not_equal(M, 0)), np.int32)
    s = svd(M, full_matrices=False, compute_uv=False)
    if rtol is None:
        rtol = jnp.multiply(jnp.max(s, axis=-1),
                            max(jnp.shape(M)[-2:]) * dtypes.finfo(_dtype(s)).eps)
    rtol = jnp.expand_dims(jnp.asarray(rtol), jnp.ndim(rtol))
    return jnp.sum(jnp.greater(s, rtol), axis=-1)


# ---------------------------------------------------------------------------------------------
# Least squares, conditioning, powers; tensor solves; the array API's aliases
# ---------------------------------------------------------------------------------------------

class LstsqResult(NamedTuple):
    x: Any
    residuals: Any
    rank: Any
    s: Any


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False) -> LstsqResult:
    """The least-squares solution of `a @ x = b` (`a: f32[m, n]`, `b: f32[m]` or `f32[m, k]`)
    by an SVD: singular values below `rcond` times the largest (default max(m, n) * eps) are
    dropped. Returns (x: f32[n(, k)], residuals: the squared norms of b - a x per column
    (f32[k], or f32[1] for 1-D b; with `numpy_resid`, empty unless a has full column rank
    and m > n), rank: int32[], s: f32[min(m, n)]). Raises TypeError unless a is 2-D and b is
    1-D or 2-D with a's rows."""
    a, b = _promote_dtypes_inexact("lstsq", a, b)
    if jnp.ndim(a) != 2 or jnp.ndim(b) not in (1, 2) or jnp.shape(a)[0] != jnp.shape(b)[0]:
        raise TypeError(f"lstsq: expected a 2-D a and a 1-D or 2-D b with a's rows, got "
                        f"{jnp.shape(a)} and {jnp.shape(b)}")
    m, n = jnp.shape(a)
    dtype = _dtype(a)
    rcond = float(dtypes.finfo(dtype).eps) * max(m, n) if rcond is None or rcond < 0 else rcond
    b2 = b if jnp.ndim(b) == 2 else b[:, None]
    u, s, vh = svd(a, full_matrices=False)
    keep = jnp.greater(s, rcond * s[0]) if s.shape[0] else s > 0
    s_inv = jnp.where(keep, jnp.divide(1, jnp.where(keep, s, 1)), 0)
    x = jnp.matmul(lax_linalg._H(vh), s_inv[:, None] * jnp.matmul(lax_linalg._H(u), b2))
    rank = jnp.sum(keep, dtype=np.int32)
    resid = jnp.sum(jnp.square(jnp.abs(b2 - jnp.matmul(a, x))), axis=0)
    if numpy_resid and (int(rank) < n or m <= n):
        resid = jnp.zeros((0,), resid.dtype)
    return LstsqResult(x if jnp.ndim(b) == 2 else x[:, 0], resid, rank, s)


def cond(x, p=None):
    """The condition number of square `x` (batch `f32[..., n, n]` -> `f32[...]`): the ratio
    of extreme singular values for p in (None, 2, -2), else norm(x, p) * norm(inv(x), p)
    (inf where x is singular)."""
    x = _matrix_arg("cond", x, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r), np.array(np.inf, _dtype(r)), r)


def matrix_power(a, n: int):
    """`a` (`T[..., m, m]`) raised to the integer power n by repeated squaring (n < 0: of
    inv(a); n == 0: the identity). Raises TypeError for a non-integer n."""
    a = jnp.asarray(a)
    if jnp.ndim(a) < 2 or jnp.shape(a)[-1] != jnp.shape(a)[-2]:
        raise ValueError(f"matrix_power: a must have shape [..., m, m], got {jnp.shape(a)}")
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}")
    if n == 0:
        return jnp.broadcast_to(jnp.eye(jnp.shape(a)[-1], dtype=_dtype(a)), jnp.shape(a))
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else jnp.matmul(result, a)
        n >>= 1
        if n:
            a = jnp.matmul(a, a)
    return result


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """`norm` over the last two axes (the array API's matrix norm)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def multi_dot(arrays, *, precision=None):
    """The chained product of `arrays` (the first may be 1-D, a row; the last 1-D, a
    column), left to right. Raises ValueError for fewer than two arrays."""
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expected at least two arrays, got {len(arrays)}")
    out = arrays[0]
    for x in arrays[1:]:
        out = jnp.matmul(out, x, precision=precision)
    return out


def tensorinv(a, ind: int = 2):
    """The inverse of `a` seen as a matrix from its first `ind` axes to the rest: shape
    a.shape[ind:] + a.shape[:ind]. Raises ValueError unless the two sizes match."""
    a = jnp.asarray(a)
    shape = jnp.shape(a)
    rows, cols = int(np.prod(shape[:ind])), int(np.prod(shape[ind:]))
    if ind <= 0 or rows != cols:
        raise ValueError(f"tensorinv: a.shape[:ind] and a.shape[ind:] must have the same "
                         f"size, got {shape} with ind={ind}")
    return jnp.reshape(inv(jnp.reshape(a, (rows, cols))), shape[ind:] + shape[:ind])


def tensorsolve(a, b, axes=None):
    """The x with `tensordot(a, x, x.ndim) == b` (x.shape = a.shape[b.ndim:]); `axes`
    first moves those axes of a to the end."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if axes is not None:
        a = jnp.moveaxis(a, axes, tuple(range(jnp.ndim(a) - len(axes), jnp.ndim(a))))
    out_shape = jnp.shape(a)[jnp.ndim(b):]
    n = int(np.prod(out_shape))
    if int(np.prod(jnp.shape(b))) != n:
        raise ValueError(f"tensorsolve: a {jnp.shape(a)} and b {jnp.shape(b)} do not make a "
                         "square system")
    return jnp.reshape(solve(jnp.reshape(a, (n, n)), jnp.ravel(b)), out_shape)


def cross(x1, x2, /, *, axis: int = -1):
    """The cross product of 3-vectors along `axis` (the array API's; jnp.cross also takes
    2-vectors)."""
    return jnp.cross(x1, x2, axis=axis)


def outer(x1, x2, /):
    """The outer product of two 1-D arrays. Raises ValueError for other ranks."""
    if jnp.ndim(x1) != 1 or jnp.ndim(x2) != 1:
        raise ValueError(f"linalg.outer: inputs must be 1-D, got {jnp.shape(x1)} and "
                         f"{jnp.shape(x2)}")
    return jnp.outer(x1, x2)


def diagonal(x, /, *, offset: int = 0):
    """The diagonals of the last two axes."""
    return jnp.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The traces of the last two axes."""
    return jnp.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """`jnp.matmul` (the array API's name in linalg)."""
    return jnp.matmul(x1, x2, precision=precision,
                      preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """`jnp.tensordot` with axes keyword-only (the array API's)."""
    return jnp.tensordot(x1, x2, axes=axes, precision=precision,
                         preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """`jnp.vecdot`."""
    return jnp.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type)


def matrix_transpose(x, /):
    """`jnp.matrix_transpose`: the last two axes swapped."""
    return jnp.matrix_transpose(x)
