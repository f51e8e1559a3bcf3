"""The grouped-matmul kernels of compare/_ragged_kernels.py (chapter 28), written once and run
under minijax's Pallas and JAX's: `gmm` equals `lax.ragged_dot`, grad through its custom_vjp
(`gmm` + `tgmm`) equals grad of `lax.ragged_dot`, and the fused expert MLP equals two
`ragged_dot`s, forward and backward. Group sizes are random, with empty groups and totals
below M; tiles straddle groups.

What only a TPU would show is checked here without one: every kernel lowers for the TPU
through Mosaic at TPU-sized bf16 tiles (so a kernel that would not compile fails CI), and
every kernel runs under the TPU interpret mode of both modules (`InterpretParams`), which
refuses a grid that leaves an output block and comes back to it, the first `gmm`'s bug.
JAX's interpret modes are slow, so they run few, small cases (compare/ragged.py, tested in
tests/compare_ragged_test.py, runs both modules too)."""

from __future__ import annotations

import contextlib
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax._src import dispatch as jax_dispatch
from jax.experimental import pallas as jpl
from jax.experimental.pallas import tpu as jpltpu

import minijax
from compare import _ragged_kernels
from minijax.experimental import pallas as mpl
from minijax.experimental.pallas import tpu as mpltpu

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the grouped matmuls in interpret mode) is computed once, not once per worker.
# Slow: grouped matmul kernels in interpret mode.
pytestmark = [pytest.mark.xdist_group("ragged_kernels_test"), pytest.mark.slow]

MODULES = {"minijax": (minijax, mpl, mpltpu), "jax": (jax, jpl, jpltpu)}
KERNELS = {name: _ragged_kernels.build(*mods) for name, mods in MODULES.items()}
TPU_INTERPRET = {"minijax": _ragged_kernels.build(minijax, mpl, mpltpu,
                                                 interpret=mpltpu.InterpretParams()),
                 "jax": _ragged_kernels.build(jax, jpl, jpltpu,
                                             interpret=jpltpu.InterpretParams())}
COMPILED = _ragged_kernels.build(jax, jpl, jpltpu, interpret=False)  # for the TPU: lowered only

# small TPU-legal shapes: 4 row tiles of 128 and 3 column tiles; group 1 is empty, tiles 0
# and 2 straddle two groups, 72 rows are in no group
M, K, N, G, TILE = 512, 256, 384, 4, (128, 128, 128)
GS = np.array([100, 0, 250, 90], np.int32)


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
    # the same FLOPs; the unfused pair moves the (M, F) hidden layer twice more, the fused
    # kernel re-reads a group's weights once per row tile it visits
    m, d, f, g = 4096, 1024, 4096, 8
    for bm, tiles_per_group in ((512, 1), (256, 2), (128, 4)):
        c = _ragged_kernels.mlp_cost(g=g, m=m, d=d, f=f, itemsize=2, bm=bm)
        assert c["flops"] == 4 * m * d * f + m * f and c["row_tiles"] == g * tiles_per_group
        extra_weight_reads = 2 * 2 * d * f * g * (tiles_per_group - 1)
        assert c["bytes_unfused"] - c["bytes_fused"] == 2 * 2 * m * f - extra_weight_reads
    # many rows per group: the intensities tend to 2/(s(1/f + 1/bm)) and 2/(s(1/d + 1/f)),
    # so the fused kernel moves fewer bytes exactly when bm > d
    for bm in (256, 2048):
        c = _ragged_kernels.mlp_cost(g=4, m=2 ** 22, d=1024, f=4096, itemsize=2, bm=bm)
        np.testing.assert_allclose(c["flops"] / c["bytes_fused"], 1 / (1 / f + 1 / bm),
                                   rtol=2e-3)
        np.testing.assert_allclose(c["flops"] / c["bytes_unfused"], 1 / (1 / d + 1 / f),
                                   rtol=2e-3)
        assert (c["bytes_fused"] < c["bytes_unfused"]) == (bm > d)
    c = _ragged_kernels.mlp_cost(g=8, m=4096, d=1024, f=4096, itemsize=2, bm=512)
    # 69 GFLOP and 151 MB: compute-bound at 3 TB/s, memory-bound at 1 TB/s
    assert _ragged_kernels.roofline_time(c, 1e15, 3e12, fused=True) == c["flops"] / 1e15
    assert _ragged_kernels.roofline_time(c, 1e15, 1e12, fused=True) == c["bytes_fused"] / 1e12


# ---------------------------------------------------------------------------------------------
# Without a TPU: every kernel lowers for one, and runs under the TPU's interpret mode
# ---------------------------------------------------------------------------------------------

def _tpu_text(f, *avals) -> str:
    return jax.jit(f).trace(*avals).lower(lowering_platforms=("tpu",)).as_text()


def _sds(*shape, dtype=jjnp.bfloat16):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("tiling", [(512, 1024, 512), (256, 512, 256)])
def test_gmm_and_its_gradient_kernels_lower_for_the_tpu(tiling):
    # grad through the custom_vjp: gmm, gmm against the transposed weights, tgmm
    m, k, n, g = 2048, 1024, 2048, 8

    def loss(x, w, gs):
        return COMPILED.grouped_matmul(x, w, gs, tiling).astype(jjnp.float32).sum()
    text = _tpu_text(jax.value_and_grad(loss, (0, 1)), _sds(m, k), _sds(g, k, n),
                     _sds(g, dtype=jjnp.int32))
    assert text.count("tpu_custom_call") == 3


@pytest.mark.parametrize("tiling", [(512, 512), (256, 1024), (256, 4096), (128, 2048)])
def test_fused_mlp_kernels_lower_for_the_tpu(tiling):
    m, d, f, g = 2048, 1024, 4096, 8

    def loss(x, up, down, gs):
        return COMPILED.fused_mlp(x, up, down, gs, tiling).astype(jjnp.float32).sum()
    text = _tpu_text(jax.value_and_grad(loss, (0, 1, 2)), _sds(m, d), _sds(g, d, f),
                     _sds(g, f, d), _sds(g, dtype=jjnp.int32))
    assert text.count("tpu_custom_call") == 2  # forward; (dx, dW_up, dW_down) in one


def test_an_illegal_tile_does_not_lower_for_the_tpu():
    # 64 columns break the (8, 128) rule: the check the tests above rely on is real
    with pytest.raises(Exception, match="divisible by 8 and 128"):
        _tpu_text(lambda x, w, gs: COMPILED.gmm(x, w, gs, (128, 128, 64)), _sds(M, K),
                  _sds(G, K, N), _sds(G, dtype=jjnp.int32))


def _rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _vjp_all(J, f, *args):
    """f's value and its vjp at a cotangent, one function (jitted for JAX: its TPU interpret
    mode runs the kernel on a host callback thread, and eager dispatch between the forward
    and backward kernels can deadlock with it)."""
    def run(ct, *args):
        out, vjp = J.vjp(f, *args)
        return out, vjp(ct)
    return jax.jit(run) if J is jax else run


@pytest.fixture(scope="module")
def gmm_results():
    rng = np.random.RandomState(11)
    x, w = rng.randn(M, K).astype(np.float32), rng.randn(G, K, N).astype(np.float32)
    dy = rng.randn(M, N).astype(np.float32)
    with jax.default_matmul_precision("highest"):
        want = jax.vjp(lambda x, w: jax.lax.ragged_dot(x, w, GS), x, w)
        want = want[0], want[1](dy)
    got = {name: _vjp_all(MODULES[name][0], lambda x, w, K=Kn: K.grouped_matmul(x, w, GS, TILE))(
        dy, x, w) for name, Kn in TPU_INTERPRET.items()}
    return want, got


@pytest.mark.parametrize("which", list(MODULES))
def test_gmm_and_grad_under_tpu_interpret_mode_equal_ragged_dot(which, gmm_results):
    (want, (want_dx, want_dw)), got = gmm_results
    out, (dx, dw) = got[which]
    assert _rel_err(out, want) < 1e-5
    assert _rel_err(dx, want_dx) < 1e-5 and _rel_err(dw, want_dw) < 1e-5
    assert (np.asarray(dw)[1] == 0).all() and (np.asarray(out)[440:] == 0).all()


def test_gmm_under_tpu_interpret_mode_is_the_same_in_both_modules(gmm_results):
    _, got = gmm_results
    for a, b in zip(jax.tree.leaves(got["minijax"]), jax.tree.leaves(got["jax"])):
        assert _rel_err(a, b) < 1e-6


# (128, 128): two F blocks, tiles straddle whole; (256, 256, 128, 128): one F block looped
# in two chunks, straddling tiles in 128-row sub-tiles; (256, 128, 128, 64): two F blocks
# (the backward's dx summed from two partials), 64-row sub-tiles
@pytest.mark.parametrize("tiling", [(128, 128), (256, 256, 128, 128), (256, 128, 128, 64)])
@pytest.mark.parametrize("which", list(MODULES))
def test_fused_mlp_under_tpu_interpret_mode_equals_two_ragged_dots(which, tiling):
    rng = np.random.RandomState(12)
    d, f = 128, 256
    x = rng.randn(M, d).astype(np.float32)
    up = (rng.randn(G, d, f) / np.sqrt(d)).astype(np.float32)
    down = (rng.randn(G, f, d) / np.sqrt(f)).astype(np.float32)
    dy = rng.randn(M, d).astype(np.float32)
    with jax.default_matmul_precision("highest"):
        want, want_vjp = jax.vjp(lambda *a: KERNELS["jax"].ragged_mlp(*a, GS), x, up, down)
        want_grads = want_vjp(dy)
    K_ = TPU_INTERPRET[which]
    out, grads = _vjp_all(MODULES[which][0], lambda *a: K_.fused_mlp(*a, GS, tiling))(
        dy, x, up, down)
    assert _rel_err(out, want) < 1e-5
    for a, b in zip(grads, want_grads):
        assert _rel_err(a, b) < 1e-5


@pytest.mark.parametrize("which", list(MODULES))
def test_bf16_kernels_are_within_bf16_tolerance_of_float32(which):
    # bf16 operands into the MXU, float32 accumulation: the error is bf16's rounding of the
    # inputs (taken out by rounding them first) plus the output's and the hidden layer's
    rng = np.random.RandomState(13)
    bf16 = jjnp.bfloat16
    x = rng.randn(M, K).astype(bf16)
    w = (rng.randn(G, K, N) / np.sqrt(K)).astype(bf16)
    up = (rng.randn(G, K, 2 * K) / np.sqrt(K)).astype(bf16)
    down = (rng.randn(G, 2 * K, K) / np.sqrt(2 * K)).astype(bf16)
    f32 = lambda a: np.asarray(a, np.float32)
    with jax.default_matmul_precision("highest"):
        want_gmm = jax.lax.ragged_dot(f32(x), f32(w), GS)
        want_mlp = KERNELS["jax"].ragged_mlp(f32(x), f32(up), f32(down), GS)
    K_ = TPU_INTERPRET[which]
    J = MODULES[which][0]
    got_gmm = J.jit(lambda x, w: K_.gmm(x, w, GS, TILE))(x, w)
    got_mlp = J.jit(lambda *a: K_.fused_mlp_fwd(*a, GS, (128, 256)))(x, up, down)
    assert got_gmm.dtype == got_mlp.dtype == bf16
    assert _rel_err(got_gmm, want_gmm) < 1e-2 and _rel_err(got_mlp, want_mlp) < 1e-2


def _first_gmm_grid(which, interpret):
    """The first `gmm`'s grid, (visit, column tile, k tile), around a kernel that only writes
    its block: between the two visits of row tile 0 (groups 0 and 2) the column tiles move
    the output block away and back."""
    J, pl, pltpu = MODULES[which]
    meta = KERNELS[which].group_metadata(GS, M, 128, False)
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=4, grid=(meta[1].shape[0], N // 128, K // 128),
        in_specs=[pl.BlockSpec((128, 128), lambda v, j, kk, offs, gid, tid, nv: (tid[v], kk))],
        out_specs=pl.BlockSpec((128, 128), lambda v, j, kk, offs, gid, tid, nv: (tid[v], j)))

    def kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
    x = np.ones((M, K), np.float32)
    return np.asarray(pl.pallas_call(kernel, grid_spec=spec, out_shape=J.ShapeDtypeStruct(
        (M, N), np.float32), interpret=interpret)(*meta, x))


@pytest.mark.parametrize("which", list(MODULES))
def test_the_first_gmm_grid_order_is_refused_by_tpu_interpret_mode(which):
    # plain interpret mode runs it (every block is read and written in place) ...
    assert (_first_gmm_grid(which, True) == 1).all()
    # ... a TPU would lose tile 0's first visit: TPU interpret mode refuses it
    msg = ("Revisited block (slice(0, 128, 1), slice(0, 128, 1)) of output 0 in iteration "
           "(1, 0, 0). The block was previously visited in iterations (0, 0, 0) through "
           "(0, 0, 1) .")
    with pytest.raises(Exception, match=re.escape(msg)):
        _first_gmm_grid(which, MODULES[which][2].InterpretParams())
    if which == "jax":
        # JAX's refusal comes from an ordered io_callback, so its error may also ride on
        # JAX's ordered-effect token (as the callback's timing falls): every later
        # effects_barrier in this process would raise it again and fail whichever test ran
        # next on this worker. Wait for it, drop the tokens, and check the barrier is clear.
        with contextlib.suppress(jax.errors.JaxRuntimeError):
            jax.effects_barrier()
        jax_dispatch.runtime_tokens.clear()
        jax.effects_barrier()
