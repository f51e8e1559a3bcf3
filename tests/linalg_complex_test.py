"""Complex linear algebra against JAX: values and dtypes (real eigenvalues, singular values and
log|det|) eagerly and under `jit` (the Hermitian LAPACK kernels), triangular_solve's
`conjugate_a`, and the jvp rules on complex operands (eigh, svd, qr, cholesky, slogdet); the
one case minijax lacks (the complete q of a tall complex matrix) raises."""

import jax
import numpy as np
import pytest

import minijax

_RNG = np.random.RandomState(0)
_B = (_RNG.randn(3, 3) + 1j * _RNG.randn(3, 3)).astype(np.complex64)
_HERM = (_B @ _B.conj().T + 3 * np.eye(3)).astype(np.complex64)  # Hermitian positive definite
_TALL = (_RNG.randn(4, 3) + 1j * _RNG.randn(4, 3)).astype(np.complex64)

# name: (J -> function, operand); phases of eigenvectors and singular vectors are not unique,
# so those are compared through quantities that are (absolute values, products)
CASES = {
    "eigvalsh": (lambda J: J.numpy.linalg.eigvalsh, _HERM),
    "eigh reconstructs": (lambda J: lambda a: (lambda w, v: (w, (v * w) @ v.conj().T))(
        *J.numpy.linalg.eigh(a)), _HERM),
    "svd values": (lambda J: lambda a: J.numpy.linalg.svd(a, compute_uv=False), _TALL),
    "svd |u|": (lambda J: lambda a: J.numpy.abs(J.numpy.linalg.svd(a, full_matrices=False)[0]),
                _TALL),
    "qr": (lambda J: lambda a: (lambda q, r: (q @ r, J.numpy.abs(r)))(*J.numpy.linalg.qr(a)),
           _TALL),
    "slogdet": (lambda J: J.numpy.linalg.slogdet, _B),
    "norm 2 and nuc": (lambda J: lambda a: (J.numpy.linalg.norm(a, 2),
                                            J.numpy.linalg.norm(a, "nuc")), _TALL),
    "cholesky": (lambda J: J.numpy.linalg.cholesky, _HERM),
    "inv, det, solve": (lambda J: lambda a: (J.numpy.linalg.inv(a), J.numpy.linalg.det(a),
                                             J.numpy.linalg.solve(a, a[:, 0])), _B),
}


def _check_close(got, want):
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_complex_linalg_matches_jax(name, jit):
    make, x = CASES[name]
    f = make(minijax)
    _check_close((minijax.jit(f) if jit else f)(x), make(jax)(x))


def test_complex_eigvalsh_and_slogdet_jvp_match_jax():
    dh = (_RNG.randn(3, 3) + 1j * _RNG.randn(3, 3)).astype(np.complex64)
    dh = (dh + dh.conj().T) / 2  # a Hermitian tangent
    for make, x, t in [(lambda J: J.numpy.linalg.eigvalsh, _HERM, dh),
                       (lambda J: J.numpy.linalg.slogdet, _B, dh)]:
        _check_close(minijax.jvp(make(minijax), (x,), (t,)), jax.jvp(make(jax), (x,), (t,)))


def test_complex_svd_jvp_matches_jax():
    # values and invariants of the vectors: s, and the tangent of |u| and of u s v^H
    dt = (_RNG.randn(4, 3) + 1j * _RNG.randn(4, 3)).astype(np.complex64)
    for make in (lambda J: lambda a: J.numpy.linalg.svd(a, compute_uv=False),
                 lambda J: lambda a: (lambda u, s, vh: (J.numpy.abs(u), (u * s) @ vh))(
                     *J.numpy.linalg.svd(a, full_matrices=False))):
        for x, t in ((_TALL, dt), (_TALL.T, dt.T)):
            _check_close(minijax.jvp(make(minijax), (x,), (t,)), jax.jvp(make(jax), (x,), (t,)))


def test_complex_qr_jvp_matches_jax():
    dt = (_RNG.randn(4, 3) + 1j * _RNG.randn(4, 3)).astype(np.complex64)
    for x, t, full in ((_TALL, dt, False), (_B, dt[:3], True), (_TALL.T, dt.T, True)):
        def make(J, full=full):
            return lambda a: J.numpy.linalg.qr(a, mode="complete" if full else "reduced")
        _check_close(minijax.jvp(make(minijax), (x,), (t,)), jax.jvp(make(jax), (x,), (t,)))
    with pytest.raises(NotImplementedError, match="complex"):  # the complete q of a tall one
        minijax.jvp(lambda a: minijax.numpy.linalg.qr(a, mode="complete")[0], (_TALL,), (dt,))
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, True), (True, True), (True, False)])
def test_complex_triangular_solve_conjugates_as_jax(jit, transpose_a, conjugate_a):
    a = np.tril(_B) + 3 * np.eye(3, dtype=np.complex64)
    kw = dict(left_side=True, lower=True, transpose_a=transpose_a, conjugate_a=conjugate_a)
    f = lambda a, b: minijax.lax.linalg.triangular_solve(a, b, **kw)
    _check_close((minijax.jit(f) if jit else f)(a, _B),
                 jax.lax.linalg.triangular_solve(a, _B, **kw))


def test_complex_cholesky_jvp_matches_jax():
    dh = (_RNG.randn(3, 3) + 1j * _RNG.randn(3, 3)).astype(np.complex64)
    dh = (dh + dh.conj().T) / 2
    _check_close(minijax.jvp(minijax.numpy.linalg.cholesky, (_HERM,), (dh,)),
                 jax.jvp(jax.numpy.linalg.cholesky, (_HERM,), (dh,)))
