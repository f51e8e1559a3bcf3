"""Tests for minijax/numpy/linalg.py and minijax/lax/linalg.py against real JAX.

Norms (including the gradient at zero, and the gradient semantics of `jnp.where` that
norm-like code relies on), then the decompositions, solves and determinants: each program runs
under both modules eagerly, under jit (the LAPACK custom calls), under vmap and jit of vmap
(batching rules, and lowering with batch axes), and is differentiated with `check_grads` and
against `jax.grad`. Eigenvectors and singular vectors are compared through quantities that do
not depend on their signs (|v|, reconstructions), as JAX's own tests do.

Mirrors JAX's tests/linalg_test.py.
"""

import functools

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minijax
from minijax.public_test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): decompositions with their gradients and batching.
pytestmark = pytest.mark.slow

RNG = np.random.default_rng(4)
V3 = np.array([1.0, -2.0, 0.0], np.float32)
M22 = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
X234 = (RNG.standard_normal((2, 3, 4)) * 3).astype(np.float32)


def check(program, *args, rtol=1e-5):
    got = program(minijax)(*args)
    want = program(jax)(*args)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-6,
                               equal_nan=True)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, -1, 0.5])
def test_vector_norm(ord):
    check(lambda J: lambda v: J.numpy.linalg.norm(v, ord=ord), V3)
    check(lambda J: lambda x: J.numpy.linalg.norm(x, ord=ord, axis=-1, keepdims=True), X234)
    check(lambda J: lambda x: J.numpy.linalg.vector_norm(x, ord=ord, axis=0), X234)


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"])
@pytest.mark.parametrize("axis", [None, (0, 2), (2, 1)])
def test_matrix_norm(ord, axis):
    x = M22 if axis is None else X234
    check(lambda J: lambda a: J.numpy.linalg.norm(a, ord=ord, axis=axis), x)
    check(lambda J: lambda a: J.numpy.linalg.norm(a, ord=ord, axis=axis, keepdims=True), x)


def test_norm_any_rank_and_integers():
    check(lambda J: J.numpy.linalg.norm, X234)
    check(lambda J: J.numpy.linalg.norm, np.arange(5, dtype=np.int32))


@pytest.mark.parametrize("ord", [None, 1, np.inf, 3])
@pytest.mark.parametrize("at_zero", [False, True], ids=["nonzero", "zero"])
def test_norm_gradient_matches_jax(ord, at_zero):
    v = np.zeros(3, np.float32) if at_zero else V3
    check(lambda J: J.grad(lambda x: J.numpy.linalg.norm(x, ord=ord)), v)


def test_norm_gradient_at_zero_is_nan_like_jax():
    g = minijax.grad(minijax.numpy.linalg.norm)(np.zeros(3, np.float32))
    assert np.all(np.isnan(np.asarray(g)))


def test_norm_under_jit_and_vmap():
    check(lambda J: J.jit(J.vmap(lambda x: J.numpy.linalg.norm(x, axis=1))), X234)


def test_norm_errors_match_jax():
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(V3, ord="fro")
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(X234, ord=1, axis=(0, 1, 2))
        with pytest.raises(ValueError):
            J.numpy.linalg.norm(M22, ord="bad")


@pytest.mark.parametrize("x", [0.0, 4.0, -1.0])
def test_where_gradient_semantics_match_jax(x):
    # sqrt'(0) = inf; the unselected branch's inf * 0 cotangent gives NaN in JAX, and here
    def program(J):
        jnp = J.numpy
        return J.grad(lambda a: jnp.where(a > 0, jnp.sqrt(a), 0.0))
    check(program, np.float32(x))

    def safe(J):  # the "double where" trick keeps the gradient finite, in both
        jnp = J.numpy
        return J.grad(lambda a: jnp.where(a > 0, jnp.sqrt(jnp.where(a > 0, a, 1.0)), 0.0))
    check(safe, np.float32(x))


# ---------------------------------------------------------------------------------------------
# Decompositions, solves, determinants
# ---------------------------------------------------------------------------------------------

def _well_conditioned(shape, rng):
    a = rng.standard_normal(shape)
    return (a + 2 * np.eye(shape[-2], shape[-1])).astype(np.float32)


def _spd(shape, rng):
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(np.float32)


SQ = _well_conditioned((3, 3), RNG)
SQ_B = _well_conditioned((2, 3, 3), RNG)
SQ4 = _well_conditioned((4, 4), RNG)
SQ4_B = _well_conditioned((2, 4, 4), RNG)
SPD = _spd((3, 3), RNG)
SPD_B = _spd((2, 3, 3), RNG)
# symmetric indefinite, |eigenvalues| 3, 2, 0.5; no eigenvector entry near 0 (|v| is smooth)
_Q = np.linalg.qr(np.random.default_rng(5).standard_normal((3, 3)))[0]
SYM = ((_Q * np.array([3.0, -2.0, 0.5])) @ _Q.T).astype(np.float32)
SYM_B = np.stack([SYM, SYM[::-1, ::-1]])
TALL = RNG.standard_normal((4, 3)).astype(np.float32)
TALL_B = RNG.standard_normal((2, 4, 3)).astype(np.float32)
WIDE = RNG.standard_normal((3, 4)).astype(np.float32)
RHS = RNG.standard_normal((3, 2)).astype(np.float32)
RHS_B = RNG.standard_normal((2, 3, 2)).astype(np.float32)


def _eigh(J, a, **kw):
    w, v = J.numpy.linalg.eigh(a, **kw)
    return w, J.numpy.abs(v), (v * w[..., None, :]) @ J.numpy.swapaxes(v, -1, -2)


def _svd(J, a, full, hermitian=False):
    u, s, vh = J.numpy.linalg.svd(a, full_matrices=full, hermitian=hermitian)
    k = s.shape[-1]
    return (s, J.numpy.abs(u[..., :k]), J.numpy.abs(vh[..., :k, :]),
            (u[..., :k] * s[..., None, :]) @ vh[..., :k, :])


def _tri(J, a, b, **kw):
    return J.lax.linalg.triangular_solve(a, b, **kw)


# name -> (program(J, *args) -> output pytree, unbatched args, batched args)
PROGRAMS = {
    "cholesky": (lambda J, a: J.numpy.linalg.cholesky(a), (SPD,), (SPD_B,)),
    "cholesky_upper": (lambda J, a: J.numpy.linalg.cholesky(a, upper=True), (SPD,), (SPD_B,)),
    "eigh": (_eigh, (SPD,), (SPD_B,)),
    "eigh_upper_only": (lambda J, a: _eigh(J, a, UPLO="U", symmetrize_input=False),
                        (SPD + np.tril(SQ, -1),), (SPD_B + np.tril(SQ_B, -1),)),
    "eigvalsh": (lambda J, a: J.numpy.linalg.eigvalsh(a), (SPD,), (SPD_B,)),
    "svd_square": (lambda J, a: _svd(J, a, True), (SQ,), (SQ_B,)),
    "svd_tall_thin": (lambda J, a: _svd(J, a, False), (TALL,), (TALL_B,)),
    "svd_hermitian": (lambda J, a: _svd(J, a, True, hermitian=True), (SYM,), (SYM_B,)),
    "svdvals": (lambda J, a: J.numpy.linalg.svdvals(a), (TALL,), (TALL_B,)),
    "qr_reduced": (lambda J, a: J.numpy.linalg.qr(a), (TALL,), (TALL_B,)),
    "qr_complete": (lambda J, a: J.numpy.linalg.qr(a, mode="complete"), (TALL,), (TALL_B,)),
    "qr_wide": (lambda J, a: J.numpy.linalg.qr(a), (WIDE,), (WIDE[None],)),
    "qr_square": (lambda J, a: J.lax.linalg.qr(a), (SQ,), (SQ_B,)),
    "lu": (lambda J, a: J.lax.linalg.lu(a), (SQ,), (SQ_B,)),
    "lu_tall": (lambda J, a: J.lax.linalg.lu(a), (TALL,), (TALL_B,)),
    "lu_wide": (lambda J, a: J.lax.linalg.lu(a), (WIDE,), (WIDE[None],)),
    "solve": (lambda J, a, b: J.numpy.linalg.solve(a, b), (SQ, RHS), (SQ_B, RHS_B)),
    "solve_vector": (lambda J, a, b: J.numpy.linalg.solve(a, b), (SQ, RHS[:, 0]),
                     (SQ_B, RHS_B[:, :, 0])),
    "inv": (lambda J, a: J.numpy.linalg.inv(a), (SQ,), (SQ_B,)),
    "det": (lambda J, a: J.numpy.linalg.det(a), (SQ,), (SQ_B,)),
    "det_4x4": (lambda J, a: J.numpy.linalg.det(a), (SQ4,), (SQ4_B,)),
    "slogdet": (lambda J, a: tuple(J.numpy.linalg.slogdet(-a)), (SQ,), (SQ_B,)),
    "pinv": (lambda J, a: J.numpy.linalg.pinv(a), (TALL,), (TALL_B,)),
    "matrix_rank": (lambda J, a: J.numpy.linalg.matrix_rank(a), (TALL,), (TALL_B,)),
    "norm_2": (lambda J, a: J.numpy.linalg.norm(a, 2, axis=(-2, -1)), (TALL,), (TALL_B,)),
    "norm_nuc": (lambda J, a: J.numpy.linalg.norm(a, "nuc", axis=(-2, -1)), (SQ,), (SQ_B,)),
    "triangular_solve_left": (lambda J, a, b: _tri(J, a, b, left_side=True, lower=True),
                              (SQ, RHS), (SQ_B, RHS_B)),
    "triangular_solve_right_t": (
        lambda J, a, b: _tri(J, a, b.T if b.ndim == 2 else J.numpy.swapaxes(b, 1, 2),
                             transpose_a=True, unit_diagonal=True), (SQ, RHS), (SQ_B, RHS_B)),
}


def check_tree(got, want, rtol=2e-4, atol=2e-4):
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


MODES = {  # how a program runs, given one module J
    "eager": lambda J, f: f,
    "jit": lambda J, f: J.jit(f),
    "vmap": lambda J, f: J.vmap(f),
    "jit_vmap": lambda J, f: J.jit(J.vmap(f)),
}


# jit of vmap (a lowering with batch axes) once per LAPACK kernel, to keep compilations few
JIT_VMAP = {"cholesky", "eigh", "svd_hermitian", "svd_tall_thin", "qr_complete", "qr_wide",
            "lu", "solve", "det_4x4", "triangular_solve_right_t"}


@pytest.mark.parametrize("name,mode", [(n, m) for n in PROGRAMS for m in MODES
                                       if m != "jit_vmap" or n in JIT_VMAP])
def test_linalg_matches_jax(name, mode):
    program, args, batched = PROGRAMS[name]
    args = batched if "vmap" in mode else args
    got = MODES[mode](minijax, lambda *a: program(minijax, *a))(*args)
    check_tree(got, _jax_reference(name, "vmap" in mode))


@functools.cache
def _jax_reference(name, vmapped):
    # JAX under jit: one compilation per program (eager and jit share it, as do the two
    # vmapped modes) instead of one per op in JAX's eager mode
    program, args, batched = PROGRAMS[name]
    f = lambda *a: program(jax, *a)
    return (jax.jit(jax.vmap(f))(*batched) if vmapped else jax.jit(f)(*args))


@pytest.mark.parametrize("name", ["cholesky", "qr_reduced", "lu", "solve", "det",
                                  "triangular_solve_left"])
def test_leading_batch_axes_match_jax(name):
    program, _, batched = PROGRAMS[name]
    check_tree(program(minijax, *batched), program(jax, *batched))


@settings(max_examples=20, deadline=None)
@given(shape=st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(1, 4)),
       seed=st.integers(0, 2**16))
def test_decompositions_of_any_shape_reconstruct_their_input(shape, seed):
    # eager, every shape: the factors multiply back to the input and have their structure
    batch, m, n = shape
    a = np.random.default_rng(seed).standard_normal((batch, m, n)[0 if batch else 1:])
    a = a.astype(np.float32)
    k = min(m, n)
    eye = lambda d: np.broadcast_to(np.eye(d, dtype=np.float32), a.shape[:-2] + (d, d))
    mT = lambda x: np.swapaxes(np.asarray(x), -1, -2)
    close = lambda x, y: np.testing.assert_allclose(np.asarray(x), y, atol=2e-5, rtol=2e-5)
    jl, lax_linalg = minijax.numpy.linalg, minijax.lax.linalg
    for mode, cols in (("reduced", k), ("complete", m)):
        q, r = jl.qr(a, mode=mode)
        assert q.shape[-1] == cols and r.shape[-2] == cols
        close(np.asarray(q) @ np.asarray(r), a)
        close(mT(q) @ np.asarray(q), eye(cols))
        close(np.asarray(r), np.triu(np.asarray(r)))
    u, s, vh = jl.svd(a, full_matrices=False)
    close((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), a)
    assert np.all(np.diff(np.asarray(s), axis=-1) <= 0) and np.all(np.asarray(s) >= 0)
    lu, pivots, perm = lax_linalg.lu(a)
    lu = np.asarray(lu)
    lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k, dtype=np.float32)
    close(lower @ np.triu(lu)[..., :k, :], np.take_along_axis(a, np.asarray(perm)[..., None],
                                                              axis=-2))
    assert pivots.shape == a.shape[:-2] + (k,) and perm.shape == a.shape[:-2] + (m,)


def test_decompositions_reconstruct_their_input():
    jnp = minijax.numpy
    q, r = jnp.linalg.qr(TALL)
    np.testing.assert_allclose(np.asarray(q @ r), TALL, atol=1e-5)
    lu, _, perm = minijax.lax.linalg.lu(SQ)
    lower = np.tril(np.asarray(lu), -1) + np.eye(3)
    np.testing.assert_allclose(lower @ np.triu(np.asarray(lu)), SQ[np.asarray(perm)], atol=1e-5)
    c = jnp.linalg.cholesky(SPD)
    np.testing.assert_allclose(np.asarray(c @ c.T), SPD, rtol=1e-5, atol=1e-5)


# scalar losses whose values do not depend on the signs LAPACK picks for vectors
GRAD_PROGRAMS = {
    "cholesky": (lambda J, a: J.numpy.linalg.cholesky(a), SPD),
    "eigh": (lambda J, a: _eigh(J, a)[:2], SPD),
    "svd": (lambda J, a: _svd(J, a, False)[:3], TALL),
    "svd_wide": (lambda J, a: _svd(J, a, False)[:3], WIDE),
    "svd_hermitian": (lambda J, a: _svd(J, a, False, hermitian=True)[:3], SYM),
    "qr": (lambda J, a: tuple(J.numpy.linalg.qr(a)), TALL),
    "qr_wide": (lambda J, a: tuple(J.numpy.linalg.qr(a)), WIDE),
    "qr_complete": (lambda J, a: tuple(J.numpy.linalg.qr(a, mode="complete")), TALL),
    "lu": (lambda J, a: J.lax.linalg.lu(a)[0], SQ),
    "lu_tall": (lambda J, a: J.lax.linalg.lu(a)[0], TALL),
    "lu_wide": (lambda J, a: J.lax.linalg.lu(a)[0], WIDE),
    "solve": (lambda J, a: J.numpy.linalg.solve(a, RHS), SQ),
    "inv": (lambda J, a: J.numpy.linalg.inv(a), SQ),
    "det": (lambda J, a: J.numpy.linalg.det(a), SQ),
    "det_4x4": (lambda J, a: J.numpy.linalg.det(a), SQ4),
    "slogdet": (lambda J, a: J.numpy.linalg.slogdet(a)[1], SQ),
    "norm_2": (lambda J, a: J.numpy.linalg.norm(a, 2), TALL),
    "norm_nuc": (lambda J, a: J.numpy.linalg.norm(a, "nuc"), TALL),
    "pinv": (lambda J, a: J.numpy.linalg.pinv(a), TALL),
    "triangular_solve": (lambda J, a: _tri(J, a, RHS, left_side=True, lower=True), SQ),
}


def _loss(J, program):
    def loss(a):
        outs = jax.tree.leaves(program(J, a))
        return sum(J.numpy.sum(o * J.numpy.cos(J.numpy.arange(o.size, dtype=o.dtype)
                                                .reshape(o.shape))) for o in outs)
    return loss


@pytest.mark.parametrize("name", list(GRAD_PROGRAMS))
def test_grad_matches_jax(name):
    program, x = GRAD_PROGRAMS[name]
    got = minijax.grad(_loss(minijax, program))(x)
    want = jax.jit(jax.grad(_loss(jax, program)))(x)
    check_tree(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", list(GRAD_PROGRAMS))
def test_check_grads(name):
    program, x = GRAD_PROGRAMS[name]
    order = 2 if name in ("cholesky", "triangular_solve", "solve") else 1
    check_grads(lambda a: program(minijax, a), (x.astype(np.float32),), order=order,
                rtol=5e-3, atol=5e-3)


def test_triangular_solve_is_linear_in_b_and_transposes():
    # grad with respect to b goes through the transpose rule alone
    f = lambda J: J.grad(lambda b: J.numpy.sum(J.numpy.sin(
        J.lax.linalg.triangular_solve(SQ, b, left_side=True, lower=True))))
    check_tree(f(minijax)(RHS), f(jax)(RHS), rtol=1e-4, atol=1e-5)
    check_grads(lambda b: minijax.lax.linalg.triangular_solve(SQ, b, lower=True), (RHS.T,),
                order=1, modes=("rev",))


@pytest.mark.parametrize("left_side", [True, False])
def test_triangular_solve_vmap_over_b_only(left_side):
    # one matrix a for the whole batch: the rule folds the batch into b's columns (or rows)
    bs = RHS_B if left_side else np.swapaxes(RHS_B, 1, 2)
    f = lambda J: J.vmap(lambda b: J.lax.linalg.triangular_solve(
        SQ, b, left_side=left_side, lower=left_side), in_axes=0, out_axes=1)
    check_tree(f(minijax)(bs), jax.jit(f(jax))(bs))
    jaxpr = minijax.make_jaxpr(f(minijax))(bs).jaxpr
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "triangular_solve"]
    assert eqn.invars[0].aval.shape == (3, 3)  # a stays unbatched


def test_vmap_over_other_axes_matches_jax():
    spd = np.moveaxis(SPD_B, 0, 2)  # batch axis last
    f = lambda J: J.vmap(J.numpy.linalg.cholesky, in_axes=2, out_axes=1)
    check_tree(f(minijax)(spd), jax.jit(f(jax))(spd))
    a, b = np.moveaxis(SQ_B, 0, 1), np.moveaxis(RHS_B, 0, 2)
    g = lambda J: J.vmap(lambda a, b: J.lax.linalg.triangular_solve(a, b, left_side=True),
                         in_axes=(1, 2))
    check_tree(g(minijax)(a, b), jax.jit(g(jax))(a, b))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0)])
def test_solve_vmap_with_one_operand_batched(in_axes):
    a = SQ_B if in_axes[0] == 0 else SQ
    b = RHS_B if in_axes[1] == 0 else RHS
    f = lambda J: J.vmap(J.numpy.linalg.solve, in_axes=in_axes)
    check_tree(f(minijax)(a, b), jax.jit(f(jax))(a, b))


def test_float64_uses_the_double_kernels():
    def program(J, a, spd, b):
        jl = J.numpy.linalg
        return (jl.cholesky(spd), jl.eigvalsh(spd), jl.svdvals(a), jl.qr(a).R, jl.solve(a, b),
                jl.det(a))
    args = [v.astype(np.float64) for v in (SQ, SPD, RHS)]
    with minijax.config.override("jax_enable_x64", True), jax.enable_x64(True):
        f = minijax.jit(lambda *a: program(minijax, *a))
        text = f.lower(*args).as_text()
        for kernel in ("dpotrf", "dsyevd", "dgesdd", "dgeqrf", "dorgqr", "dgetrf", "dtrsm"):
            assert f"@lapack_{kernel}_ffi(" in text, kernel
        check_tree(f(*args), jax.jit(lambda *a: program(jax, *a))(*args), rtol=1e-10,
                   atol=1e-10)
        check_grads(minijax.numpy.linalg.det, (SQ4.astype(np.float64),), order=2)
        check_grads(lambda a: minijax.numpy.linalg.eigh(a)[0], (args[1],), order=1)


def test_lapack_custom_calls_in_lowering():
    jnp = minijax.numpy
    for f, target in [(jnp.linalg.cholesky, "lapack_spotrf_ffi"),
                      (jnp.linalg.eigh, "lapack_ssyevd_ffi"),
                      (jnp.linalg.svd, "lapack_sgesdd_ffi"),
                      (jnp.linalg.qr, "lapack_sorgqr_ffi"),
                      (jnp.linalg.inv, "lapack_sgetrf_ffi"),
                      (lambda a: jnp.linalg.solve(a, a), "lapack_strsm_ffi")]:
        text = minijax.jit(f).lower(SPD).as_text()
        assert f"@{target}(" in text, (target, text)


def test_singular_and_not_positive_definite_inputs_match_jax():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    check(lambda J: J.numpy.linalg.det, singular)
    check(lambda J: lambda a: tuple(J.numpy.linalg.slogdet(a)), singular)
    # not positive definite: NaNs from the eager impl and from LAPACK's info, as in JAX
    check(lambda J: J.numpy.linalg.cholesky, -SPD)
    check(lambda J: J.jit(J.numpy.linalg.cholesky), -SPD)


@pytest.mark.parametrize("rank", [3, 2])
def test_det_gradient_of_singular_matrices_matches_jax(rank):
    # the adjugate: finite for corank 1, zero for lower ranks (JAX's _cofactor_solve)
    u = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], np.float32)[:, :rank]
    v = np.array([[1, 2, 0, 1], [0, 1, 1, -1], [1, 0, 2, 0]], np.float32)[:rank]
    singular = u @ v
    assert np.linalg.matrix_rank(singular) == rank
    small = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32)  # explicit 3x3 formula
    programs = [(lambda J: J.grad(J.numpy.linalg.det), singular),
                (lambda J: J.grad(J.numpy.linalg.det), small)]
    if rank == 3:  # and the lowering of the cofactor solve
        programs.append((lambda J: J.jit(J.grad(J.numpy.linalg.det)), singular))
    for program, x in programs:
        check_tree(program(minijax)(x), jax.jit(program(jax))(x), atol=1e-5)


def test_linalg_errors_match_jax():
    def raised(J, bad):
        with pytest.raises((TypeError, ValueError)) as info:
            bad(J.numpy.linalg)
        return type(info.value)

    bads = [lambda jl: jl.inv(TALL), lambda jl: jl.det(V3), lambda jl: jl.slogdet(TALL),
            lambda jl: jl.solve(SQ, np.ones(4, np.float32)), lambda jl: jl.eigh(SQ, "X"),
            lambda jl: jl.eigvalsh(TALL, symmetrize_input=False),
            lambda jl: jl.qr(SQ, mode="bogus"), lambda jl: jl.qr(V3), lambda jl: jl.svd(V3)]
    for bad in bads:
        assert raised(minijax, bad) is raised(jax, bad)
    for J in (jax, minijax):
        with pytest.raises(TypeError, match="rank at least 2"):
            J.lax.linalg.lu(V3)
        with pytest.raises(ValueError, match="triangular_solve"):
            J.lax.linalg.triangular_solve(SQ, TALL, left_side=True)
    with pytest.raises(ValueError, match=r"shape \[\.\.\., n, n\], got \(4, 3\)"):
        minijax.numpy.linalg.cholesky(TALL)  # JAX: a TypeError from adding TALL to TALL.T
    with pytest.raises(TypeError, match="cholesky does not accept dtype int32"):
        minijax.lax.linalg.cholesky(np.eye(2, dtype=np.int32))
