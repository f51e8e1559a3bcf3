"""The grouped-matmul kernels of compare/ragged_kernels.py (chapter 28), written once and run
under minijax's Pallas and JAX's (interpret mode): `gmm` equals `lax.ragged_dot`, grad
through its custom_vjp (`gmm` + `tgmm`) equals grad of `lax.ragged_dot`, and the fused expert
MLP equals two `ragged_dot`s, forward and backward. Group sizes are random, with empty groups
and totals below M; tiles straddle groups. JAX's interpret mode is slow, so it runs fewer
cases (compare/ragged.py, tested in tests/compare_ragged_test.py, runs both modules too)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.experimental import pallas as jpl
from jax.experimental.pallas import tpu as jpltpu

import minijax
from compare import ragged_kernels
from minijax.experimental import pallas as mpl
from minijax.experimental.pallas import tpu as mpltpu

MODULES = {"minijax": (minijax, mpl, mpltpu), "jax": (jax, jpl, jpltpu)}
KERNELS = {name: ragged_kernels.build(*mods) for name, mods in MODULES.items()}


def group_sizes(rng, g: int, m: int) -> np.ndarray:
    cuts = np.sort(rng.randint(0, m + 1, size=g))
    sizes = np.diff(np.concatenate([[0], cuts]))
    sizes[rng.rand(g) < 0.3] = 0
    return sizes.astype(np.int32)


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("visit_empty", [False, True])
def test_group_metadata_visits_each_tile_group_pair_once(seed, visit_empty):
    rng = np.random.RandomState(seed)
    m, bm, g = 32, 8, int(rng.randint(1, 6))
    gs = group_sizes(rng, g, m)
    meta = {name: J.jit(lambda s, K=KERNELS[name]: K.group_metadata(s, m, bm, visit_empty))
            for name, (J, _, _) in MODULES.items()}
    offs, gid, tid, nv = (np.asarray(a) for a in meta["minijax"](gs))
    np.testing.assert_array_equal(offs, np.concatenate([[0], np.cumsum(gs)]))
    assert gid.shape == tid.shape == (m // bm + g - 1,)
    visits = list(zip(tid[:nv[0]], gid[:nv[0]]))
    meets = [(t, j) for j in range(g) for t in range(m // bm)
             if gs[j] and offs[j] < (t + 1) * bm and offs[j + 1] > t * bm]
    extra = set(visits) - set(meets)
    assert set(meets) <= set(visits) and len(visits) == len(set(visits))
    if visit_empty:  # one visit per empty group, and groups in order
        assert sorted(j for _, j in extra) == [j for j in range(g) if gs[j] == 0]
        assert list(gid[:nv[0]]) == sorted(gid[:nv[0]])
    else:  # one visit per row tile no group reaches, and tiles in order
        covered = {t for t, _ in meets}
        assert sorted(t for t, _ in extra) == [t for t in range(m // bm) if t not in covered]
        assert list(tid[:nv[0]]) == sorted(tid[:nv[0]])
    # the minijax and JAX versions of the metadata agree
    for a, b in zip((offs, gid, tid, nv), meta["jax"](gs)):
        np.testing.assert_array_equal(a, np.asarray(b))


@pytest.mark.parametrize("seed", range(3))
def test_gmm_equals_ragged_dot_under_minijax(seed):
    rng = np.random.RandomState(seed)
    m, k, n, g = 32, 16, 8, int(rng.randint(1, 5))
    x, w = rng.randn(m, k).astype(np.float32), rng.randn(g, k, n).astype(np.float32)
    gs = group_sizes(rng, g, m)
    K = KERNELS["minijax"]
    close(K.gmm(x, w, gs), jax.lax.ragged_dot(x, w, gs))
    dy = rng.randn(m, n).astype(np.float32)
    close(K.tgmm(x, dy, gs), jax.vjp(lambda w: jax.lax.ragged_dot(x, w, gs), w)[1](dy)[0])


@pytest.mark.parametrize("which", list(MODULES))
def test_grad_of_the_gmm_kernel_equals_grad_of_ragged_dot(which):
    J = MODULES[which][0]
    K = KERNELS[which]
    rng = np.random.RandomState(7)
    m, k, n = 24, 8, 8
    gs = np.array([5, 0, 11, 3], np.int32)  # tiles of 8 straddle groups; 5 rows in none
    x, w = rng.randn(m, k).astype(np.float32), rng.randn(4, k, n).astype(np.float32)
    dy = rng.randn(m, n).astype(np.float32)
    out, vjp = J.vjp(lambda x, w: K.grouped_matmul(x, w, gs), x, w)
    want_out, want_vjp = jax.vjp(lambda x, w: jax.lax.ragged_dot(x, w, gs), x, w)
    close(out, want_out)
    for a, b in zip(vjp(dy), want_vjp(dy)):
        close(a, b)


@pytest.mark.parametrize("which", list(MODULES))
def test_fused_mlp_equals_two_ragged_dots_forward_and_backward(which):
    J = MODULES[which][0]
    K = KERNELS[which]
    rng = np.random.RandomState(8)
    m, d, f = 24, 8, 16
    gs = np.array([9, 0, 6, 4], np.int32)
    x = rng.randn(m, d).astype(np.float32)
    up, down = (0.3 * rng.randn(*s).astype(np.float32) for s in ((4, d, f), (4, f, d)))
    dy = rng.randn(m, d).astype(np.float32)
    ref = KERNELS["jax"].ragged_mlp  # two jax.lax.ragged_dot calls
    out, vjp = J.vjp(lambda *a: K.fused_mlp(*a, gs), x, up, down)
    want_out, want_vjp = jax.vjp(lambda *a: ref(*a, gs), x, up, down)
    close(out, want_out)
    for a, b in zip(vjp(dy), want_vjp(dy)):
        close(a, b)
    assert (np.asarray(out)[19:] == 0).all()  # rows past the last group


def test_fused_mlp_cost_model():
    # the same FLOPs, and the unfused version moves the (M, F) hidden layer twice more
    c = ragged_kernels.mlp_cost(g=8, m=4096, d=1024, f=4096, itemsize=2)
    assert c["flops"] == 4 * 4096 * 1024 * 4096 + 4096 * 4096
    assert c["bytes_unfused"] - c["bytes_fused"] == 2 * 2 * 4096 * 4096
    peak, bw = 1e15, 3e12
    assert ragged_kernels.roofline_time(c, peak, bw, fused=True) <= \
        ragged_kernels.roofline_time(c, peak, bw, fused=False)
