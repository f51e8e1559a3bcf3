"""The SVD on a TPU: a polar decomposition `a = u_p h` (QDWH), then the eigendecomposition of
`h = v diag(s) v^H` (XLA's Jacobi `Eigh`), and `u = u_p v`. Registered as `svd_p`'s lowering
for every platform without LAPACK, as JAX does; the CPU keeps its LAPACK rule.
Mirrors jax/_src/tpu/linalg/svd.py.
"""

from __future__ import annotations

import numpy as np

from minijax import numpy as jnp
from minijax.api import vmap
from minijax.config import default_matmul_precision
from minijax.interpreters import mlir
from minijax.lax import linalg as lax_linalg
from minijax.lax.control_flow import while_loop
from minijax.tpu.linalg.qdwh import qdwh


# JAX: jax/_src/tpu/linalg/svd.py _svd_tall_and_square_input
def _svd_tall_and_square_input(a, compute_uv: bool, max_iterations: int, subset_by_index):
    u_p, h, _, _ = qdwh(a, max_iterations=max_iterations)
    v, s = lax_linalg.eigh(h, subset_by_index=subset_by_index, sort_eigenvalues=False,
                           symmetrize_input=False)
    s = jnp.maximum(s, 0.0)  # eigh may give tiny negative values
    order = jnp.argsort(s, descending=True)
    s_out = s[order]
    if not compute_uv:
        return s_out
    v_out = v[:, order]
    u_out = u_p @ v_out

    def correct_rank_deficiency(u_out):  # u from a rank-deficient a: orthonormalize it
        u_out, r = lax_linalg.qr(u_out, full_matrices=False)
        return u_out @ jnp.diag(jnp.where(jnp.diag(r) >= 0, 1, -1).astype(u_out.dtype))
    eps = float(np.finfo(a.dtype).eps)
    do_correction = s_out[-1] <= a.shape[1] * eps * s_out[0]
    u_out, _ = while_loop(lambda s: s[1], lambda s: (correct_rank_deficiency(s[0]), False),
                          (u_out, do_correction))
    return u_out, s_out, v_out


# JAX: jax/_src/tpu/linalg/svd.py svd
def svd(a, full_matrices: bool, compute_uv: bool = True, max_iterations: int = 10,
        subset_by_index=None):
    """`(u, s, vh)` of one matrix `a: f32[m, n]` (or `s` alone), singular values descending."""
    m, n = a.shape
    if subset_by_index is not None:  # eigenvalues count up, singular values down
        rank = min(m, n)
        subset_by_index = (rank - subset_by_index[1], rank - subset_by_index[0])
    is_flip = m < n
    if is_flip:
        a = a.T.conj()
        m, n = n, m
    q = u_out_null = None
    if full_matrices and m > n:
        q_full, a_full = lax_linalg.qr(a, full_matrices=True)
        q, u_out_null, a = q_full[:, :n], q_full[:, n:], a_full[:n, :]
    elif m > 1.15 * n:  # Nakatsukasa's threshold: reduce a tall matrix to a square one first
        q, a = lax_linalg.qr(a, full_matrices=False)
    with default_matmul_precision("float32"):
        if not compute_uv:
            return _svd_tall_and_square_input(a, compute_uv, max_iterations, subset_by_index)
        u_out, s_out, v_out = _svd_tall_and_square_input(a, compute_uv, max_iterations,
                                                         subset_by_index)
        if q is not None:
            u_out = q @ u_out
    if u_out_null is not None:
        u_out = jnp.hstack((u_out, u_out_null))
    nan = lambda s: (True, *(jnp.full_like(x, np.nan) for x in s[1:]))
    _, u_out, s_out, v_out = while_loop(lambda s: jnp.logical_not(s[0]), nan,
                                        (jnp.all(jnp.isfinite(a)), u_out, s_out, v_out))
    if is_flip:
        return v_out, s_out, u_out.T.conj()
    return u_out, s_out, v_out.T.conj()


# JAX: jax/_src/tpu/linalg/svd.py _svd_tpu
def _svd_tpu(a, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    def one(x):
        return svd(x, full_matrices=full_matrices, compute_uv=compute_uv,
                   subset_by_index=subset_by_index)
    fn = one
    for _ in range(a.ndim - 2):
        fn = vmap(fn)
    if compute_uv:
        u, s, vh = fn(a)
        return [s, u, vh]
    return [fn(a)]


# JAX: jax/_src/tpu/linalg/svd.py _svd_tpu_lowering_rule
def _svd_tpu_lowering(ctx, operand, *, full_matrices, compute_uv, subset_by_index,
                      algorithm=None):
    m, n = ctx.avals_in[0].shape[-2:]
    if m == 0 or n == 0:
        raise NotImplementedError("svd of an empty matrix on TPU: not in minijax")
    return mlir.lower_fun(_svd_tpu, multiple_results=True)(
        ctx, operand, full_matrices=full_matrices, compute_uv=compute_uv,
        subset_by_index=subset_by_index, algorithm=algorithm)


mlir.register_lowering(lax_linalg.svd_p, _svd_tpu_lowering)
