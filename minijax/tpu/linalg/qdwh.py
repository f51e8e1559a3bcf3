"""QR-based dynamically weighted Halley iteration (QDWH) for the polar decomposition
`x = u h` (`u` with orthonormal columns, `h` Hermitian positive semidefinite), in lax.

Nakatsukasa, Bai and Gygi (2010): each step maps every singular value of `u` closer to 1 by
a rational function whose weights `a, b, c` are planned ahead from a lower bound `l` of the
smallest one; the first steps (large `c`) use a QR decomposition, the later ones a Cholesky
factorization, which is cheaper and stable once `c` is small. Mirrors
jax/_src/tpu/linalg/qdwh.py without its padded (dynamic) shapes.
"""

from __future__ import annotations

import numpy as np

from minijax import numpy as jnp
from minijax.config import default_matmul_precision
from minijax.lax import lax, linalg as lax_linalg
from minijax.lax.control_flow import fori_loop, while_loop
from minijax.lax.slicing import dynamic_index_in_dim

_CHOLESKY_CUTOFF = 100  # plan a QR step while c is above this, a Cholesky step after


# JAX: jax/_src/tpu/linalg/qdwh.py _use_qr
def _use_qr(u, params):
    a_minus_e_by_sqrt_c, sqrt_c, e = params
    m, n = u.shape
    y = jnp.concatenate([sqrt_c * u, jnp.eye(n, dtype=u.dtype)])
    q, _ = lax_linalg.qr(y, full_matrices=False)
    q1, q2 = q[:m], q[m:].T.conj()
    return e * u + a_minus_e_by_sqrt_c * (q1 @ q2)


# JAX: jax/_src/tpu/linalg/qdwh.py _use_cholesky
def _use_cholesky(u, params):
    a_minus_e, c, e = params
    n = u.shape[1]
    x = c * (u.T.conj() @ u) + jnp.eye(n, dtype=u.dtype)
    y = lax_linalg.cholesky(x, symmetrize_input=False)
    z = lax_linalg.triangular_solve(y, u.T, left_side=True, lower=True,
                                    conjugate_a=True).conj()
    z = lax_linalg.triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                                    conjugate_a=True).T.conj()
    return e * u + a_minus_e * z


def _plan(eps: float, max_iterations: int) -> tuple[list, list]:
    """The weights of the QR steps and of the Cholesky steps, computed in Python: from the
    lower bound `l = eps` of the smallest scaled singular value until it reaches 1."""
    qr_coefs, chol_coefs = [], []
    l, tol_l, k = eps, 10.0 * eps / 2.0, 0
    while l + tol_l < 1 and k < max_iterations:
        k += 1
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** (1 / 2)
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** (1 / 2)
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        if c > _CHOLESKY_CUTOFF:
            qr_coefs.append(((a - b / c) / c ** (1 / 2), c ** (1 / 2), b / c))
        else:
            chol_coefs.append((a - b / c, c, b / c))
    return qr_coefs, chol_coefs


# JAX: jax/_src/tpu/linalg/qdwh.py _qdwh
def _qdwh(x, max_iterations: int, eps: float):
    one_norm = jnp.linalg.norm(x, ord=1)
    inf_norm = jnp.linalg.norm(x, ord=np.inf)
    alpha_inverse = jnp.where(one_norm == 0, 1.0, lax.rsqrt(one_norm) * lax.rsqrt(inf_norm))
    u = x * alpha_inverse.astype(x.dtype)
    tol_norm = float(np.cbrt(10.0 * eps / 2.0))
    qr_coefs, chol_coefs = _plan(eps, max_iterations)

    def step(update, coefs, k, u, test):
        # past the plan: the weights of a = 3, b = 1, c = 3 (Halley's fixed iteration)
        params = (3.0 - 1.0 / 3.0, 3.0, 1.0 / 3.0) if coefs is None else tuple(
            dynamic_index_in_dim(coefs, k, keepdims=False)[i] for i in range(3))
        new = update(u, params)
        return new, (jnp.linalg.norm(new - u) > tol_norm) if test else True

    not_converged = jnp.array(True)
    for update, coefs, test in ((_use_qr, qr_coefs, False),
                                (_use_cholesky, chol_coefs, True)):
        if coefs:
            table = jnp.array(coefs, dtype=x.dtype)
            u, not_converged = fori_loop(
                0, len(coefs), lambda k, s, update=update, table=table, test=test:
                step(update, table, k, s[0], test), (u, not_converged))

    def body(state):
        k, u, _ = state
        return (k + 1, *step(_use_cholesky, None, k, u, True))
    k = len(qr_coefs) + len(chol_coefs)
    num_iters, u, not_converged = while_loop(
        lambda s: jnp.logical_and(s[2], s[0] < max_iterations), body,
        (k, u, jnp.asarray(not_converged)))
    u = 1.5 * u - 0.5 * u @ (u.T.conj() @ u)  # one Newton-Schulz step: orthonormal columns
    h = u.T.conj() @ x
    h = (h + h.T.conj()) / 2
    return u, h, num_iters, jnp.logical_not(not_converged)


# JAX: jax/_src/tpu/linalg/qdwh.py qdwh
def qdwh(x, *, max_iterations: int | None = None, eps: float | None = None):
    """The polar decomposition of `x: f32[m, n]` (`m >= n`, full rank): `(u: f32[m, n],
    h: f32[n, n], num_iters: i32[], is_converged: bool[])` with `x = u @ h`. Matrix products
    at float32 precision. Raises ValueError for `m < n`."""
    m, n = x.shape
    if m < n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    with default_matmul_precision("float32"):
        return _qdwh(x, 10 if max_iterations is None else max_iterations, eps)
