"""Linear algebra primitives: cholesky, eigh, svd, qr, lu and triangular_solve.

Each primitive works on the last two axes of its operand (`T[..., m, n]`); leading axes are
batch axes, as in JAX. Eager evaluation uses numpy.linalg (LU with partial pivoting is written
out here, since numpy has no LU). Under `jit`, each lowers for CPU the way JAX does: a
`stablehlo.custom_call` to one of the LAPACK kernels that jaxlib registers with XLA
(`lapack_spotrf_ffi`, `lapack_ssyevd_ffi`, `lapack_sgesdd_ffi`, `lapack_sgeqrf_ffi` with
`lapack_sorgqr_ffi`, `lapack_sgetrf_ffi`, `lapack_strsm_ffi`, and the `d` variants for float64),
with column-major operand layouts and the kernel's `info` output turned into NaNs.
The jvp rules follow JAX's (perturbation theory for eigh and svd, De Hoog et al. for lu,
Murray 2016 for cholesky); `triangular_solve` is linear in `b` and has a transpose rule.
Real and complex floating dtypes, as in JAX (complex: `eigh`'s eigenvalues and `svd`'s
singular values are real, Hermitian kernels `heevd`/`ungqr`, conjugate transposes in the jvp
rules; the jvp of the complete `qr` of a tall complex matrix is not implemented).
`minijax.numpy.linalg` builds the NumPy API on these. Mirrors jax/_src/lax/linalg.py.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from minijax import core, dtypes, xla_bridge
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.lax import lax
from minijax.lax.control_flow import fori_loop

# ---------------------------------------------------------------------------------------------
# Helpers on lax values (batched over leading axes)
# ---------------------------------------------------------------------------------------------


def _shape(x) -> tuple[int, ...]:
    return core.get_aval(x).shape


def _T(x):
    nd = len(_shape(x))
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _is_complex(x) -> bool:
    return np.issubdtype(core.get_aval(x).dtype, np.complexfloating)


# JAX: jax/_src/lax/linalg.py _H
def _H(x):
    """The conjugate transpose of the last two axes (the transpose for real `x`)."""
    return lax.conj(_T(x)) if _is_complex(x) else _T(x)


def _real_dtype(dtype) -> np.dtype:
    """float32 for complex64, float64 for complex128; a real dtype as it is."""
    return np.finfo(dtype).dtype


def _no_complex_jvp(name: str, x) -> None:
    if _is_complex(x):
        raise NotImplementedError(f"{name}: the jvp of a complex operand "
                                  f"({core.get_aval(x).str_short()}) is not implemented in "
                                  "minijax (JAX has it)")


# JAX: jax/_src/lax/lax.py batch_matmul
def _matmul(a, b):
    """`a @ b` for `T[..., m, k] @ T[..., k, n]` with equal batch axes."""
    nd = len(_shape(a))
    batch = tuple(range(nd - 2))
    return lax.dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


# JAX: jax/_src/lax/linalg.py _tril
def _tril(x, k: int = 0):
    *batch, n, m = _shape(x)
    return lax.select(lax.broadcast(lax._tri((n, m), k), batch), x, lax.full_like(x, 0))


# JAX: jax/_src/lax/linalg.py _triu
def _triu(x, k: int = 0):  # as JAX: zeros where the lower triangle below diagonal k is
    *batch, n, m = _shape(x)
    return lax.select(lax.broadcast(lax._tri((n, m), k - 1), batch), lax.full_like(x, 0), x)


def _eye(dtype, shape: Sequence[int]):
    """An identity `T[..., n, n]` broadcast to `shape`."""
    nd = len(shape)
    mask = lax.eq(lax.broadcasted_iota(np.int32, shape, nd - 2),
                  lax.broadcasted_iota(np.int32, shape, nd - 1))
    return lax.convert_element_type(mask, dtype)


# JAX: jax/_src/lax/linalg.py _extract_diagonal
def _extract_diagonal(x):
    """The diagonal `T[..., n]` of a square `T[..., n, n]`."""
    return lax.reduce_sum(lax.mul(x, _eye(core.get_aval(x).dtype, _shape(x))),
                          (len(_shape(x)) - 1,))


def _row(v):
    """`T[..., n]` as `T[..., 1, n]`, broadcast against a matrix with `_bcast`."""
    return lax.expand_dims(v, (len(_shape(v)) - 1,))


def _col(v):
    return lax.expand_dims(v, (len(_shape(v)),))


def _bcast(x, shape):
    """Broadcast `x` (same rank as `shape`, size-1 axes allowed) to `shape`."""
    keep = tuple(i for i, (a, b) in enumerate(zip(_shape(x), shape)) if a == b)
    squeezed = lax.reshape(x, tuple(_shape(x)[i] for i in keep))
    return lax.broadcast_in_dim(squeezed, tuple(shape), keep)


# JAX: jax/_src/lax/linalg.py symmetrize
def symmetrize(x):
    """`(x + x^H) / 2` over the last two axes (`x^T` for real `x`)."""
    return lax.div(lax.add(x, _H(x)), lax._const(x, 2))


def _check_matrix(name: str, x: ShapedArray, square: bool) -> None:
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"{name} does not accept dtype {np.dtype(x.dtype).name}: minijax's "
                        "linear algebra takes floating or complex dtypes")
    if x.ndim < 2:
        raise TypeError(f"Input 0 to {name} must have rank at least 2, but got shape={x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: argument must have shape [..., n, n], got {x.str_short()}")


def _front_batch_rule(prim: Primitive) -> Callable:
    """Batching for a one-operand primitive that maps over leading axes: move the batch axis
    to the front and bind once; every output is batched at 0."""
    def rule(vals, dims, *, axis_size, **params):
        (x,), (d,) = vals, dims
        out = prim.bind(batching.moveaxis(x, d, 0), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    rule.__name__ = f"_{prim.name}_batch_rule"
    return rule


# ---------------------------------------------------------------------------------------------
# Lowering helpers: LAPACK custom calls, as JAX emits them
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/linalg.py _column_major_matrix_layout
def _column_major_layout(ndim: int) -> tuple[int, ...]:
    # minor-to-major: the row axis varies fastest, then the column axis, then batch axes
    return (ndim - 2, ndim - 1) + tuple(range(ndim - 3, -1, -1))


# JAX: jax/_src/lax/linalg.py _linalg_ffi_lowering
def _lapack_call(fn_base: str, operands: Sequence, avals_in: Sequence[ShapedArray],
                 avals_out: Sequence[ShapedArray], aliases: dict[int, int],
                 **config: str) -> list:
    """A `stablehlo.custom_call` to `lapack_<s|d><fn_base>`: FFI (api_version 1 with an
    `mhlo.backend_config` dictionary of one-letter LAPACK flags as ui8), column-major layouts
    for the operands and results of the operand's rank, `num_batch_dims` for XLA."""
    ir, hlo = mlir.ir, mlir.hlo
    target = xla_bridge.lapack_target(fn_base, avals_in[0].dtype)
    rank = max(a.ndim for a in avals_in)

    def layouts(avals):
        return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(
            np.asarray(_column_major_layout(a.ndim) if a.ndim == rank
                       else tuple(range(a.ndim - 1, -1, -1)), np.int64),
            type=ir.IndexType.get()) for a in avals])

    out_types = [mlir.aval_to_ir_type(a) for a in avals_out]
    i32 = ir.IntegerType.get_signless(32)
    attributes = dict(
        call_target_name=ir.StringAttr.get(target),
        has_side_effect=ir.BoolAttr.get(False),
        backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(i32, 1),
        called_computations=ir.ArrayAttr.get([]),
        output_operand_aliases=ir.ArrayAttr.get([
            hlo.OutputOperandAlias.get(output_tuple_indices=[o] if len(avals_out) > 1 else [],
                                       operand_index=i, operand_tuple_indices=[])
            for i, o in aliases.items()]),
        operand_layouts=layouts(avals_in),
        result_layouts=layouts(avals_out),
    )
    op = hlo.CustomCallOp.build_generic(results=out_types, operands=list(operands),
                                        attributes=attributes)
    ui8 = ir.IntegerType.get_unsigned(8)
    op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(
        {k: ir.IntegerAttr.get(ui8, ord(v)) for k, v in config.items()})
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"num_batch_dims": ir.StringAttr.get(str(rank - 2))})
    return list(op.results)


# JAX: jax/_src/interpreters/mlir.py custom_call
def _xla_call(target: str, operands: Sequence, avals_out: Sequence[ShapedArray],
              api_version: int = 1, backend_config: str = "") -> list:
    """A `stablehlo.custom_call` to one of XLA's own expansions (`Qr`, `Eigh`,
    `LuDecomposition`...: what JAX's rules for TPU emit instead of LAPACK kernels)."""
    ir, hlo = mlir.ir, mlir.hlo
    op = hlo.CustomCallOp.build_generic(
        results=[mlir.aval_to_ir_type(a) for a in avals_out], operands=list(operands),
        attributes=dict(call_target_name=ir.StringAttr.get(target),
                        backend_config=ir.StringAttr.get(backend_config),
                        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                       api_version)))
    return list(op.results)


def _info_ok(info, batch: tuple[int, ...], direction: str = "EQ"):
    zero = mlir.full_like_aval(0, ShapedArray(batch, np.int32))
    return mlir.compare_hlo(info, zero, direction, "SIGNED")


# JAX: jax/_src/lax/linalg.py _replace_not_ok_with_nan
def _nan_unless_ok(ok, x, aval: ShapedArray, batch: tuple[int, ...]):
    """`x` where the batch element's `info` was OK, else NaN."""
    hlo = mlir.hlo
    pred_type = mlir.ir.RankedTensorType.get(aval.shape, mlir.ir.IntegerType.get_signless(1))
    ok = hlo.broadcast_in_dim(pred_type, ok, list(range(len(batch))))
    return hlo.select(ok, x, mlir.full_like_aval(np.nan, aval))


# JAX: jax/_src/interpreters/mlir.py lower_fun
def _lower_fun(fun: Callable, avals_in: Sequence[ShapedArray], *args) -> list:
    """Emit the ops of `fun` (minijax operations, list of outputs) on the IR values `args`."""
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(lambda *xs: list(fun(*xs)), avals_in,
                                                 fun_name=getattr(fun, "__name__", "fun"))
    return mlir.lower_jaxpr(jaxpr, consts, args)


# ---------------------------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------------------------

def _cholesky_one(x: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        return np.full_like(x, np.nan)


def _cholesky_impl(x):
    # like LAPACK's potrf: the factor in the lower triangle and the input's upper triangle
    # kept; all NaNs for a matrix that is not positive definite (JAX's lowering does the same)
    try:
        low = np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        flat = x.reshape((-1,) + x.shape[-2:])
        low = np.stack([_cholesky_one(m) for m in flat]).reshape(x.shape)
    upper = np.where(np.isnan(low).all(axis=(-2, -1), keepdims=True), np.nan, x)
    return np.where(np.tri(x.shape[-1], dtype=bool), low, upper).astype(x.dtype)


def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x, square=True)
    return x.strip_weak_type()


# JAX: jax/_src/lax/linalg.py _cholesky_jvp_rule
def _cholesky_jvp(primals, tangents):
    (x,), (sigma_dot,) = primals, tangents
    L = _tril(cholesky_p.bind(x))
    sigma_dot = ad.instantiate_zeros(sigma_dot)
    # L_dot = L phi(L^-1 sigma_dot L^-H), phi: the lower triangle with the diagonal halved
    tmp = triangular_solve(L, sigma_dot, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)
    inner = _tril(triangular_solve(L, tmp, left_side=True, lower=True))
    shape = _shape(x)
    phi = lax.div(inner, lax.add(lax.full_like(inner, 1), _eye(core.get_aval(x).dtype, shape)))
    return L, _matmul(L, phi)


# JAX: jax/_src/lax/linalg.py _cholesky_lowering — XLA's own expansion (TPU, and the default)
def _cholesky_lowering(ctx, x):
    return mlir.hlo.cholesky(x, lower=mlir.ir.BoolAttr.get(True))


# JAX: jax/_src/lax/linalg.py _cholesky_cpu_lowering
def _cholesky_cpu_lowering(ctx, x):
    (aval,) = ctx.avals_in
    batch = aval.shape[:-2]
    factor, info = _lapack_call("potrf_ffi", [x], [aval],
                                [aval, ShapedArray(batch, np.int32)], {0: 0}, uplo="L")
    return _nan_unless_ok(_info_ok(info, batch), factor, aval, batch)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor `L` of a symmetric positive definite `x` (`x = L L^T`).

    Args:
      x: `f32[..., n, n]`; only its lower triangle is read unless `symmetrize_input`.
      symmetrize_input: use `(x + x^T) / 2` (what makes the gradient symmetric).
    Returns: `f32[..., n, n]`, zero above the diagonal; NaNs where `x` is not positive definite.
    Raises TypeError for a non-float dtype or rank < 2, ValueError for a non-square operand.
    JAX: jax/_src/lax/linalg.py cholesky.
    """
    if symmetrize_input:
        x = symmetrize(x)
    return _tril(cholesky_p.bind(x))


cholesky_p = Primitive("cholesky")
cholesky_p.def_impl(_cholesky_impl)
cholesky_p.def_abstract_eval(_cholesky_abstract_eval)
ad.primitive_jvps[cholesky_p] = _cholesky_jvp
batching.primitive_batchers[cholesky_p] = _front_batch_rule(cholesky_p)
mlir.register_lowering(cholesky_p, _cholesky_lowering)
mlir.register_lowering(cholesky_p, _cholesky_cpu_lowering, platform="cpu")


# ---------------------------------------------------------------------------------------------
# eigh
# ---------------------------------------------------------------------------------------------

def _check_subset(name: str, subset_by_index, n: int) -> None:
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        raise NotImplementedError(f"{name}: subset_by_index={subset_by_index} (a partial "
                                  "decomposition) is not supported by minijax")


def _eigh_impl(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    return [v.astype(x.dtype), w.astype(_real_dtype(x.dtype))]


def _eigh_abstract_eval(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    _check_matrix("eigh", x, square=True)
    _check_subset("eigh", subset_by_index, x.shape[-1])
    if algorithm is not None:
        raise NotImplementedError(f"eigh: algorithm={algorithm} is not supported by minijax")
    x = x.strip_weak_type()
    return [x, x.update(shape=x.shape[:-1], dtype=_real_dtype(x.dtype))]


# JAX: jax/_src/lax/linalg.py _eigh_jvp_rule
def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    (a,), (a_dot,) = primals, tangents
    v, w = eigh_p.bind(symmetrize(a), lower=lower, sort_eigenvalues=sort_eigenvalues,
                       subset_by_index=subset_by_index, algorithm=algorithm)
    a_dot = ad.instantiate_zeros(a_dot)
    shape = _shape(a)
    eye = _eye(core.get_aval(w).dtype, shape)
    # F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (distinct eigenvalues assumed)
    diffs = lax.sub(_bcast(_row(w), shape), _bcast(_col(w), shape))
    f = lax.sub(lax.integer_pow(lax.add(eye, diffs), -1), eye)
    vt_adot_v = _matmul(_matmul(_H(v), a_dot), v)
    if _is_complex(a):  # as JAX: dw is the real part of the diagonal of V^H A' V
        f = lax.convert_element_type(f, core.get_aval(a).dtype)
        dv = _matmul(v, lax.mul(f, vt_adot_v))
        return [v, w], [dv, lax.real(_extract_diagonal(vt_adot_v))]
    dv = _matmul(v, lax.mul(f, vt_adot_v))
    dw = _extract_diagonal(vt_adot_v)
    return [v, w], [dv, dw]


# JAX: jax/_src/tpu/linalg/eigh.py _eigh_tpu_lowering — differs: XLA's Jacobi `Eigh` at every
# size (JAX uses it up to n = 256 and its QDWH divide-and-conquer above)
def _eigh_tpu_lowering(ctx, x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    (aval,) = ctx.avals_in
    if subset_by_index is not None and tuple(subset_by_index) != (0, aval.shape[-1]):
        raise NotImplementedError("eigh on TPU: minijax has no rule for subset_by_index")
    return _xla_call("Eigh", [x], ctx.avals_out,
                     backend_config=f"{int(lower)},{int(sort_eigenvalues)},100,1e-6")


def _eigh_cpu_lowering(ctx, x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    (aval,), (v_aval, w_aval) = ctx.avals_in, ctx.avals_out
    batch = aval.shape[:-2]
    kernel = "heevd_ffi" if np.issubdtype(aval.dtype, np.complexfloating) else "syevd_ffi"
    v, w, info = _lapack_call(kernel, [x], [aval],
                              [v_aval, w_aval, ShapedArray(batch, np.int32)], {0: 0},
                              mode="V", uplo="L" if lower else "U")
    ok = _info_ok(info, batch)
    return [_nan_unless_ok(ok, v, v_aval, batch), _nan_unless_ok(ok, w, w_aval, batch)]


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None):
    """Eigenvectors and eigenvalues of a symmetric `x`: `x = v diag(w) v^T`.

    Args:
      x: `f32[..., n, n]`; the `lower` (or upper) triangle is read unless `symmetrize_input`.
    Returns: `(v, w)`: `v: f32[..., n, n]` (eigenvectors in columns), `w: f32[..., n]`
      ascending.
    Raises TypeError for a non-float dtype or rank < 2, ValueError for a non-square operand,
    NotImplementedError for a `subset_by_index` short of all eigenvalues.
    JAX: jax/_src/lax/linalg.py eigh.
    """
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=lower, sort_eigenvalues=sort_eigenvalues,
                       subset_by_index=subset_by_index, algorithm=None)
    return v, w


eigh_p = Primitive("eigh")
eigh_p.multiple_results = True
eigh_p.def_impl(_eigh_impl)
eigh_p.def_abstract_eval(_eigh_abstract_eval)
ad.primitive_jvps[eigh_p] = _eigh_jvp
batching.primitive_batchers[eigh_p] = _front_batch_rule(eigh_p)
mlir.register_lowering(eigh_p, _eigh_cpu_lowering, platform="cpu")
mlir.register_lowering(eigh_p, _eigh_tpu_lowering, platform="tpu")


# ---------------------------------------------------------------------------------------------
# svd
# ---------------------------------------------------------------------------------------------

def _svd_impl(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False).astype(_real_dtype(x.dtype))]
    u, s, vt = np.linalg.svd(x, full_matrices=full_matrices)
    return [s.astype(_real_dtype(x.dtype)), u.astype(x.dtype), vt.astype(x.dtype)]


def _svd_abstract_eval(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    _check_matrix("svd", x, square=False)
    *batch, m, n = x.shape
    k = min(m, n)
    _check_subset("svd", subset_by_index, k)
    if algorithm is not None:
        raise NotImplementedError(f"svd: algorithm={algorithm} is not supported by minijax")
    x = x.strip_weak_type()
    s = x.update(shape=(*batch, k), dtype=_real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    u = x.update(shape=(*batch, m, m if full_matrices else k))
    vt = x.update(shape=(*batch, n if full_matrices else k, n))
    return [s, u, vt]


# JAX: jax/_src/lax/linalg.py _svd_jvp_rule
def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm):
    (a,), (da,) = primals, tangents
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True,
                          subset_by_index=subset_by_index, algorithm=algorithm)
    *_, m, n = _shape(a)
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "Singular value decomposition JVP not implemented for full matrices")
    da = ad.instantiate_zeros(da)
    cplx = _is_complex(a)
    # the real quantities (s and what is built from it) cast to a's complex dtype, as JAX's
    c = (lambda r: lax.convert_element_type(r, core.get_aval(a).dtype)) if cplx else \
        (lambda r: r)
    ut, v = _H(u), _H(vt)
    ds_mat = _matmul(_matmul(ut, da), v)
    ds = _extract_diagonal(lax.real(ds_mat) if cplx else ds_mat)
    if not compute_uv:
        return [s], [ds]
    kk = _shape(ds_mat)
    s_row, s_col = _bcast(_row(s), kk), _bcast(_col(s), kk)
    eye = _eye(core.get_aval(s).dtype, kk)
    # F[i, j] = 1 / (s[j]^2 - s[i]^2) off the diagonal, 0 on it
    s_diffs = lax.mul(lax.add(s_row, s_col), lax.sub(s_row, s_col))
    f = c(lax.sub(lax.div(lax.full_like(eye, 1), lax.add(s_diffs, eye)), eye))
    dss = lax.mul(c(s_row), ds_mat)
    sds = lax.mul(c(s_col), ds_mat)
    s_zeros = lax.convert_element_type(lax.eq(s, lax.full_like(s, 0)), core.get_aval(s).dtype)
    s_inv = lax.sub(lax.div(lax.full_like(s, 1), lax.add(s, s_zeros)), s_zeros)
    s_inv_mat = c(lax.mul(_bcast(_row(s_inv), kk), eye))
    du_dv_diag = lax.mul(lax.mul(lax._const(a, 0.5), lax.sub(ds_mat, _H(ds_mat))), s_inv_mat)
    du = _matmul(u, lax.add(lax.mul(f, lax.add(dss, _H(dss))), du_dv_diag))
    dv = _matmul(v, lax.mul(f, lax.add(sds, _H(sds))))
    if m > n:
        dav = _matmul(da, v)
        du = lax.add(du, lax.div(lax.sub(dav, _matmul(u, _matmul(ut, dav))),
                                 c(_bcast(_row(s), _shape(dav)))))
    if n > m:
        dahu = _matmul(_H(da), u)
        dv = lax.add(dv, lax.div(lax.sub(dahu, _matmul(v, _matmul(vt, dahu))),
                                 c(_bcast(_row(s), _shape(dahu)))))
    return [s, u, vt], [ds, du, _H(dv)]


def _svd_lowering(ctx, x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    (aval,) = ctx.avals_in
    *batch, m, n = aval.shape
    batch = tuple(batch)
    k = min(m, n)
    s_aval = ctx.avals_out[0]
    u_aval = aval.update(shape=(*batch, m, m if full_matrices else k))
    vt_aval = aval.update(shape=(*batch, n if full_matrices else k, n))
    mode = ("A" if full_matrices else "S") if compute_uv else "N"
    _, s, u, vt, info = _lapack_call(
        "gesdd_ffi", [x], [aval], [aval, s_aval, u_aval, vt_aval, ShapedArray(batch, np.int32)],
        {0: 0}, mode=mode)
    ok = _info_ok(info, batch)
    outs = [_nan_unless_ok(ok, s, s_aval, batch)]
    if compute_uv:
        outs += [_nan_unless_ok(ok, u, u_aval, batch), _nan_unless_ok(ok, vt, vt_aval, batch)]
    return outs


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None,
        algorithm=None):
    """Singular value decomposition `x = u diag(s) vt`.

    Args:
      x: `f32[..., m, n]`; with k = min(m, n):
      full_matrices: `u: f32[..., m, m]`, `vt: f32[..., n, n]` (else `[..., m, k]`,
        `[..., k, n]`).
      compute_uv: False returns only `s`.
      subset_by_index, algorithm: None only (the whole decomposition, LAPACK's gesdd).
    Returns: `(u, s, vt)` with `s: f32[..., k]` descending, or `s` alone.
    Raises TypeError for a non-float dtype or rank < 2; NotImplementedError for a partial
    `subset_by_index` or another `algorithm`.
    JAX: jax/_src/lax/linalg.py svd.
    """
    outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv,
                      subset_by_index=subset_by_index, algorithm=algorithm)
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


svd_p = Primitive("svd")
svd_p.multiple_results = True
svd_p.def_impl(_svd_impl)
svd_p.def_abstract_eval(_svd_abstract_eval)
ad.primitive_jvps[svd_p] = _svd_jvp
batching.primitive_batchers[svd_p] = _front_batch_rule(svd_p)
mlir.register_lowering(svd_p, _svd_lowering, platform="cpu")  # else: minijax/tpu/linalg/svd.py


# ---------------------------------------------------------------------------------------------
# qr
# ---------------------------------------------------------------------------------------------

def _qr_impl(x, *, pivoting, full_matrices, use_magma):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q.astype(x.dtype), r.astype(x.dtype)]


def _qr_abstract_eval(x, *, pivoting, full_matrices, use_magma):
    _check_matrix("qr", x, square=False)
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported by minijax")
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    x = x.strip_weak_type()
    return [x.update(shape=(*batch, m, k)), x.update(shape=(*batch, k, n))]


# JAX: jax/_src/lax/linalg.py _thin_qr_jvp
def _thin_qr_jvp(q, r, dx):
    dx_rinv = triangular_solve(r, dx)  # dx r^-1 (a right-side solve)
    qt_dx_rinv = _matmul(_H(q), dx_rinv)
    lower = _tril(qt_dx_rinv, -1)
    do = lax.sub(lower, _H(lower))  # skew-Hermitian
    if _is_complex(q):  # as JAX: the imaginary part of the diagonal, for complex inputs
        dtype = core.get_aval(q).dtype
        imag = lax.sub(qt_dx_rinv, lax.convert_element_type(lax.real(qt_dx_rinv), dtype))
        do = lax.add(do, lax.mul(_eye(dtype, _shape(do)), imag))
    dq = lax.add(_matmul(q, lax.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _matmul(lax.sub(qt_dx_rinv, do), r)
    return dq, dr


# JAX: jax/_src/lax/linalg.py qr_jvp_rule
def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    *batch, m, n = _shape(x)
    dx = ad.instantiate_zeros(dx)
    nb = len(batch)
    cols = lambda a, lo, hi: lax.slice(a, (0,) * (nb + 1) + (lo,), (*_shape(a)[:-1], hi))
    if m < n:
        # x = [x1 x2] with x1 square: x1 = q r1 is a square QR, and r2 = q^T x2
        dq, dr1 = _thin_qr_jvp(q, cols(r, 0, m), cols(dx, 0, m))
        dr2 = lax.add(_matmul(_H(dq), cols(x, m, n)), _matmul(_H(q), cols(dx, m, n)))
        return [q, r], [dq, lax.concatenate([dr1, dr2], nb + 1)]
    if not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, dx)
        return [q, r], [dq, dr]
    _no_complex_jvp("qr (full_matrices=True of a tall matrix)", x)
    # a tall matrix's complete q: its first n columns as in the thin case, the other p = m - n
    # from orthogonality (Roberts & Roberts, arXiv:2409.13374, eqs. 32-33)
    rows = lambda a, lo, hi: lax.slice(a, (0,) * nb + (lo, 0), (*_shape(a)[:-2], hi,
                                                                _shape(a)[-1]))
    q_mn, q_mp = cols(q, 0, n), cols(q, n, m)
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, rows(r, 0, n), dx)
    q_nn, q_pn = rows(q_mn, 0, n), rows(q_mn, n, m)
    dq_nn, dq_pn = rows(dq_mn, 0, n), rows(dq_mn, n, m)
    # z_pn = q_pn (q_nn - I)^-1, from the solve (q_nn - I)^T z_pn^T = q_pn^T
    eye = _eye(core.get_aval(x).dtype, _shape(q_nn))
    lu_, _, permutation = lu(_T(lax.sub(q_nn, eye)))
    z_pn_t = _lu_solve(lu_, permutation, _T(q_pn))
    z_pn = _T(z_pn_t)
    dq_mp = lax.sub(_matmul(dq_mn, z_pn_t),
                    _matmul(lax.add(q_mn, _matmul(q_mp, z_pn)),
                            _T(lax.sub(dq_pn, _matmul(z_pn, dq_nn)))))
    dq = lax.concatenate([dq_mn, dq_mp], nb + 1)
    dr = lax.concatenate([dr_nn, lax.full((*batch, m - n, n), 0, core.get_aval(x).dtype)], nb)
    return [q, r], [dq, dr]


# JAX: jax/_src/lax/linalg.py _geqrf_cpu_gpu_lowering
def _geqrf_lapack(x, aval: ShapedArray, taus_aval: ShapedArray) -> list:
    return _lapack_call("geqrf_ffi", [x], [aval], [aval, taus_aval], {0: 0})


# JAX: jax/_src/lax/linalg.py _householder_product_cpu_gpu_lowering
def _householder_product_lapack(h, taus, h_aval: ShapedArray, taus_aval: ShapedArray):
    kernel = "ungqr_ffi" if np.issubdtype(h_aval.dtype, np.complexfloating) else "orgqr_ffi"
    return _lapack_call(kernel, [h, taus], [h_aval, taus_aval], [h_aval], {0: 0})[0]


# JAX: jax/_src/lax/linalg.py _geqrf_lowering_rule — XLA's own `Qr` (TPU, and the default)
def _geqrf_xla(x, aval: ShapedArray, taus_aval: ShapedArray) -> list:
    return _xla_call("Qr", [x], [aval, taus_aval])


# JAX: jax/_src/lax/linalg.py _householder_product_lowering
def _householder_product_xla(h, taus, h_aval: ShapedArray, taus_aval: ShapedArray):
    return _xla_call("ProductOfElementaryHouseholderReflectors", [h, taus], [h_aval])[0]


def _qr_lowering(ctx, x, *, pivoting, full_matrices, use_magma, geqrf=_geqrf_xla,
                 householder_product=_householder_product_xla):
    # JAX's lowering: geqrf leaves r above the diagonal and the Householder vectors below it;
    # householder_product turns those into q (LAPACK's kernels on a CPU, XLA's own elsewhere)
    (aval,) = ctx.avals_in
    q_aval, r_aval = ctx.avals_out
    *batch, m, n = aval.shape
    k = min(m, n)
    nb = len(batch)
    taus_aval = aval.update(shape=(*batch, k))
    r, taus = geqrf(x, aval, taus_aval)
    if m < n:
        (h,) = _lower_fun(lambda a: [lax.slice(a, (0,) * (nb + 2), (*batch, m, m))], [aval], r)
    elif full_matrices:
        (h,) = _lower_fun(lambda a: [lax.pad(a, lax._const(a, 0), [(0, 0, 0)] * (nb + 1)
                                             + [(0, m - n, 0)])], [aval], r)
    else:
        h = r
    q = householder_product(h, taus, q_aval, taus_aval)
    if r_aval.shape != aval.shape:  # the thin r of a tall matrix: its top n rows
        (r,) = _lower_fun(lambda a: [lax.slice(a, (0,) * (nb + 2), r_aval.shape)], [aval], r)
    (r,) = _lower_fun(lambda a: [_triu(a)], [r_aval], r)
    return [q, r]


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """QR decomposition `x = q r`, `q` orthonormal columns, `r` upper triangular.

    Args:
      x: `f32[..., m, n]`, k = min(m, n).
      full_matrices: `q: f32[..., m, m]`, `r: f32[..., m, n]` (else `[..., m, k]`,
        `[..., k, n]`).
      pivoting, use_magma: False / None only (no column pivoting; magma is for GPUs).
    Returns: `(q, r)`, signs as LAPACK's Householder QR gives them.
    Raises TypeError for a non-float dtype or rank < 2; NotImplementedError for pivoting.
    JAX: jax/_src/lax/linalg.py qr.
    """
    q, r = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    return q, r


qr_p = Primitive("qr")
qr_p.multiple_results = True
qr_p.def_impl(_qr_impl)
qr_p.def_abstract_eval(_qr_abstract_eval)
ad.primitive_jvps[qr_p] = _qr_jvp
batching.primitive_batchers[qr_p] = _front_batch_rule(qr_p)
mlir.register_lowering(qr_p, _qr_lowering)
mlir.register_lowering(qr_p, functools.partial(
    _qr_lowering, geqrf=_geqrf_lapack, householder_product=_householder_product_lapack),
    platform="cpu")


# ---------------------------------------------------------------------------------------------
# lu
# ---------------------------------------------------------------------------------------------

def _lu_one(a: np.ndarray):
    """LU with partial pivoting of one matrix, as LAPACK's getf2 computes it."""
    a = a.copy()
    m, n = a.shape
    k = min(m, n)
    pivots = np.zeros(k, np.int32)
    perm = np.arange(m, dtype=np.int32)
    for j in range(k):
        p = j + int(np.argmax(np.abs(a[j:, j])))
        pivots[j] = p
        a[[j, p]] = a[[p, j]]
        perm[[j, p]] = perm[[p, j]]
        if a[j, j] != 0:
            a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    return a, pivots, perm


def _lu_impl(x):
    *batch, m, n = x.shape
    lu_ = np.empty_like(x)
    pivots = np.empty((*batch, min(m, n)), np.int32)
    perm = np.empty((*batch, m), np.int32)
    for idx in np.ndindex(*batch):
        lu_[idx], pivots[idx], perm[idx] = _lu_one(x[idx])
    return [lu_, pivots, perm]


def _lu_abstract_eval(x):
    _check_matrix("lu", x, square=False)
    *batch, m, n = x.shape
    return [x.strip_weak_type(), ShapedArray((*batch, min(m, n)), np.dtype(np.int32)),
            ShapedArray((*batch, m), np.dtype(np.int32))]


def _permutation_matrix(permutation, dtype):
    """`P[..., i, j] = (permutation[..., i] == j)`, so `P @ a == a[..., permutation, :]`."""
    shape = _shape(permutation) + (_shape(permutation)[-1],)
    idx = _bcast(_col(permutation), shape)
    return lax.convert_element_type(
        lax.eq(idx, lax.broadcasted_iota(np.int32, shape, len(shape) - 1)), dtype)


# JAX: jax/_src/lax/linalg.py _lu_jvp_rule — differs: batched directly, rows permuted by a
# one-hot matmul instead of a gather
def _lu_jvp(primals, tangents):
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, permutation = lu_p.bind(a)
    *batch, m, n = _shape(a)
    nb, k = len(batch), min(m, n)
    dtype = core.get_aval(a).dtype
    a_dot = ad.instantiate_zeros(a_dot)
    # L' = L tril(L^-1 P a' U^-1, -1),  U' = triu(L^-1 P a' U^-1) U  (De Hoog et al.)
    zero = lax._const(lu_, 0)
    low = lax.slice(lu_, (0,) * (nb + 2), (*batch, m, k))
    low = lax.pad(_tril(low, -1), zero, [(0, 0, 0)] * (nb + 1) + [(0, m - k, 0)])
    low = lax.add(low, _eye(dtype, (*batch, m, m)))
    up = lax.pad(_triu(lax.slice(lu_, (0,) * (nb + 2), (*batch, k, n))), zero,
                 [(0, 0, 0)] * nb + [(0, n - k, 0), (0, 0, 0)])
    if n > k:  # a unit diagonal below the k rows of U makes it invertible
        tail = lax.pad(_eye(dtype, (*batch, n - k, n - k)), zero,
                       [(0, 0, 0)] * nb + [(k, 0, 0), (k, 0, 0)])
        up = lax.add(up, tail)
    x = _matmul(_permutation_matrix(permutation, dtype), a_dot)
    la = triangular_solve(low, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(up, la, left_side=False, lower=False)
    lu_dot = lax.add(_matmul(low, _tril(lau, -1)), _matmul(_triu(lau), up))
    return [lu_, pivots, permutation], [lu_dot, Zero.from_primal_value(pivots),
                                        Zero.from_primal_value(permutation)]


# JAX: jax/_src/lax/linalg.py _generic_lu_pivots_to_permutation — differs: a function, not
# the primitive lu_pivots_to_permutation_p; one-hot selects, not gather/scatter, so one loop
# body serves every batch shape
def _lu_pivots_to_permutation(pivots, permutation_size: int):
    """Apply the row swaps `i <-> pivots[..., i]` in order to the identity permutation."""
    *batch, k = _shape(pivots)
    shape = (*batch, permutation_size)
    positions = lax.broadcasted_iota(np.int32, shape, len(batch))
    steps = lax.broadcasted_iota(np.int32, (*batch, k), len(batch))
    pick = lambda v, where: lax.reduce_sum(lax.select(where, v, lax.full_like(v, 0)),
                                           (len(batch),))
    spread = lambda s: lax.broadcast_in_dim(s, shape, tuple(range(len(batch))))

    def swap(i, perm):
        i = lax.convert_element_type(i, np.int32)
        j = spread(pick(pivots, lax.eq(steps, i)))
        at_i, at_j = lax.eq(positions, i), lax.eq(positions, j)
        p_i, p_j = spread(pick(perm, at_i)), spread(pick(perm, at_j))
        return lax.select(at_i, p_j, lax.select(at_j, p_i, perm))
    return fori_loop(0, k, swap, positions)


# JAX: jax/_src/lax/linalg.py _lu_tpu_lowering_rule
def _lu_tpu_lowering(ctx, x):
    return _xla_call("LuDecomposition", [x], ctx.avals_out, api_version=2)


def _lu_cpu_lowering(ctx, x):
    (aval,), (lu_aval, piv_aval, _) = ctx.avals_in, ctx.avals_out
    batch = aval.shape[:-2]
    lu_, pivots, info = _lapack_call("getrf_ffi", [x], [aval],
                                     [lu_aval, piv_aval, ShapedArray(batch, np.int32)], {0: 0})
    hlo = mlir.hlo
    pivots = hlo.subtract(pivots, mlir.full_like_aval(1, piv_aval))  # 1-based -> 0-based
    lu_ = _nan_unless_ok(_info_ok(info, batch, "GE"), lu_, lu_aval, batch)
    (perm,) = _lower_fun(lambda p: [_lu_pivots_to_permutation(p, aval.shape[-2])],
                         [piv_aval], pivots)
    return [lu_, pivots, perm]


def lu(x):
    """LU decomposition with partial pivoting: `x[..., permutation, :] = L U`.

    Args:
      x: `f32[..., m, n]`, k = min(m, n).
    Returns: `(lu, pivots, permutation)`: `lu: f32[..., m, n]` holds U on and above the
      diagonal and L (unit diagonal, not stored) below it; `pivots: i32[..., k]` (row i was
      swapped with row pivots[i]); `permutation: i32[..., m]`.
    Raises TypeError for a non-float dtype or rank < 2.
    JAX: jax/_src/lax/linalg.py lu.
    """
    lu_, pivots, permutation = lu_p.bind(x)
    return lu_, pivots, permutation


lu_p = Primitive("lu")
lu_p.multiple_results = True
lu_p.def_impl(_lu_impl)
lu_p.def_abstract_eval(_lu_abstract_eval)
ad.primitive_jvps[lu_p] = _lu_jvp
batching.primitive_batchers[lu_p] = _front_batch_rule(lu_p)
mlir.register_lowering(lu_p, _lu_cpu_lowering, platform="cpu")
mlir.register_lowering(lu_p, _lu_tpu_lowering, platform="tpu")


# JAX: jax/_src/lax/linalg.py _lu_solve_core — differs: rows permuted by a one-hot matmul
def _lu_solve(lu_, permutation, b):
    """`a^-1 b` from `a`'s LU factors; `b: f32[..., m, k]` with `lu_`'s batch axes."""
    x = _matmul(_permutation_matrix(permutation, core.get_aval(lu_).dtype), b)
    x = triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, x, left_side=True, lower=False)


# ---------------------------------------------------------------------------------------------
# triangular_solve
# ---------------------------------------------------------------------------------------------

def _substitute(a: np.ndarray, b: np.ndarray, lower: bool, unit_diagonal: bool) -> np.ndarray:
    """Solve `a x = b` for triangular `a: [..., m, m]`, `b: [..., m, n]`, row by row (forward
    substitution if `lower`, else backward). A zero pivot gives inf/NaN, as LAPACK's trsm."""
    x = np.array(b, copy=True)
    m = a.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in (range(m) if lower else range(m - 1, -1, -1)):
            done = slice(0, i) if lower else slice(i + 1, m)
            x[..., i, :] -= np.einsum("...j,...jk->...k", a[..., i, done], x[..., done, :])
            if not unit_diagonal:
                x[..., i, :] /= a[..., i, i, None]
    return x


def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    # op(a) x = b directly; x op(a) = b as op(a)^T x^T = b^T. Transposing flips the triangle.
    t = np.swapaxes
    if conjugate_a and np.iscomplexobj(a):
        a = np.conj(a)
    if transpose_a:
        a, lower = t(a, -1, -2), not lower
    if left_side:
        return _substitute(a, b, lower, unit_diagonal)
    return t(_substitute(t(a, -1, -2), t(b, -1, -2), not lower, unit_diagonal), -1, -2)


def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a, square=True)
    _check_matrix("triangular_solve", b, square=False)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: operands must have the same dtype, got "
                        f"{a.str_short()} and {b.str_short()}")
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != common:
        raise ValueError(f"Incompatible shapes for arguments to triangular_solve: "
                         f"{a.str_short()} and {b.str_short()} (left_side={left_side})")
    return b.strip_weak_type()


# JAX: jax/_src/lax/linalg.py _triangular_solve_jvp_rule_a
def _triangular_solve_jvp_a(g_a, ans, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    k = 1 if unit_diagonal else 0
    g_a = lax.neg(_tril(g_a, -k) if lower else _triu(g_a, k))
    g_a = _T(g_a) if transpose_a else g_a
    m, n = _shape(b)[-2:]
    # X = A^-1 B: X' = -A^-1 A' X (left) or -X A' A^-1 (right), cheapest order first
    if left_side:
        if m > n:
            return triangular_solve_p.bind(a, _matmul(g_a, ans), **params)
        return _matmul(triangular_solve_p.bind(a, g_a, **params), ans)
    if m < n:
        return triangular_solve_p.bind(a, _matmul(ans, g_a), **params)
    return _matmul(ans, triangular_solve_p.bind(a, g_a, **params))


# JAX: jax/_src/lax/linalg.py _triangular_solve_transpose_rule
def _triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    if ad.is_undefined_primal(a):
        raise NotImplementedError("triangular_solve is linear in b only: cannot transpose it "
                                  "with respect to a — see chapters/06-reverse-mode.md")
    if type(ct) is Zero:
        return [None, Zero(b.aval)]
    return [None, triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                          transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                          unit_diagonal=unit_diagonal)]


# JAX: jax/_src/lax/linalg.py _triangular_solve_batching_rule
def _triangular_solve_batch_rule(vals, dims, *, axis_size, **params):
    (a, b), (da, db) = vals, dims
    if da is batching.not_mapped:
        # one matrix a for every example: fold the batch into b's free axis
        bshape = _shape(b)
        axis = len(bshape) - 1 if params["left_side"] else len(bshape) - 2
        b = batching.moveaxis(b, db, axis)
        moved = _shape(b)
        flat = moved[:axis - 1] + (moved[axis - 1] * moved[axis],) + moved[axis + 1:]
        out = triangular_solve_p.bind(a, lax.reshape(b, flat), **params)
        return lax.reshape(out, moved), axis
    a = batching.bdim_at_front(a, da, axis_size)
    b = batching.bdim_at_front(b, db, axis_size)
    return triangular_solve_p.bind(a, b, **params), 0


# JAX: jax/_src/lax/linalg.py _triangular_solve_lowering — XLA's op (TPU, and the default)
def _triangular_solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    hlo, ir = mlir.hlo, mlir.ir
    conjugate_a = conjugate_a and np.issubdtype(ctx.avals_in[0].dtype, np.complexfloating)
    if conjugate_a and not transpose_a:
        (a,), conjugate_a = _lower_fun(lambda v: [lax.conj(v)], ctx.avals_in[:1], a), False
    transpose = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
    return hlo.triangular_solve(a, b, ir.BoolAttr.get(left_side), ir.BoolAttr.get(lower),
                                ir.BoolAttr.get(unit_diagonal), hlo.TransposeAttr.get(transpose))


# JAX: jax/_src/lax/linalg.py _triangular_solve_cpu_lower
def _triangular_solve_cpu_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                   unit_diagonal):
    a_aval, b_aval = ctx.avals_in
    conjugate_a = conjugate_a and np.issubdtype(a_aval.dtype, np.complexfloating)
    if conjugate_a and not transpose_a:  # as JAX: trsm conjugates only with the transpose
        (a,), conjugate_a = _lower_fun(lambda v: [lax.conj(v)], [a_aval], a), False
    trans = "C" if transpose_a and conjugate_a else "T" if transpose_a else "N"
    (out,) = _lapack_call("trsm_ffi", [a, b], [a_aval, b_aval], [b_aval], {1: 0},
                          diag="U" if unit_diagonal else "N", side="L" if left_side else "R",
                          trans_x=trans, uplo="L" if lower else "U")
    return out


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """Solve `op(a) x = b` (left_side) or `x op(a) = b` for `x`, `a` triangular.

    Args:
      a: `f32[..., m, m]`; only its `lower` (or upper) triangle is read, and not its diagonal
        if `unit_diagonal` (taken as ones).
      b: `f32[..., m, n]` (left_side) or `f32[..., n, m]`, the same batch axes as `a`.
      transpose_a: op(a) = a^T; conjugate_a has no effect on real inputs.
    Returns: `x`, shaped like `b`.
    Raises TypeError for non-float or mismatched dtypes, ValueError for incompatible shapes.
    JAX: jax/_src/lax/linalg.py triangular_solve.
    """
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


triangular_solve_p = Primitive("triangular_solve")
triangular_solve_p.def_impl(_triangular_solve_impl)
triangular_solve_p.def_abstract_eval(_triangular_solve_abstract_eval)
ad.defjvp2(triangular_solve_p, _triangular_solve_jvp_a,
           lambda g_b, ans, a, b, **params: triangular_solve_p.bind(a, g_b, **params))
ad.primitive_transposes[triangular_solve_p] = _triangular_solve_transpose
batching.primitive_batchers[triangular_solve_p] = _triangular_solve_batch_rule
mlir.register_lowering(triangular_solve_p, _triangular_solve_lowering)
mlir.register_lowering(triangular_solve_p, _triangular_solve_cpu_lowering, platform="cpu")
