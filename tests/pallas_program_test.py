"""The whole jitted program around minijax's Pallas TPU kernels against JAX's, on a CPU.

tests/pallas_mosaic_test.py checks the Mosaic module inside each `tpu_custom_call`; this checks
everything else XLA gets for the TPU: the ops around the calls (the lse, `delta = rowsum(dO*O)`
and its lane broadcast, `group_metadata`'s jnp program, custom_vjp residuals, reshapes,
converts), each call's operands, layouts, aliases and config, and main's signature (donation).
The programs are those tools/accelerator_tpu.py times on the chip (`measure_minijax`: the same
kernel source built against minijax and against JAX), at small sizes, and the kernels of
compare/_mosaic_kernels.py. `compare._mosaic_kernels.program_ops` is the one normaliser (its
docstring lists what it treats as equal); a lowering that emits another op, or another
Mosaic module, fails here. Found this way (issue 42): `jnp.tile` as a 4-D broadcast (Mosaic
relayouts) where JAX binds `tile` (a `tpu.concatenate`), dead scalar ops left in kernels,
and the fill-mode gather's mask in another form.
"""

from __future__ import annotations

import difflib
import functools

import jax
import ml_dtypes
import numpy as np
import pytest

import minijax
from compare import _mosaic_kernels, _pallas_kernels, _ragged_kernels
from compare._mosaic_kernels import KERNELS, program_ops

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the kernels under both modules) is computed once, not once per worker.
pytestmark = pytest.mark.xdist_group("pallas_program_test")

BF16 = ml_dtypes.bfloat16
BH, SEQ, D = 2, 256, 128
M, K, N, G = 512, 128, 256, 4
FLASH, MATMUL, GMM, MLP = (128, 128), (128, 128, 128), (128, 128, 256), (128, 128)


def _groups(m, g):
    cuts = np.sort(np.random.default_rng(0).choice(m, g - 1, replace=False))
    return np.diff(np.r_[0, cuts, m]).astype(np.int32)


def _modules(J):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    if J is minijax:
        from minijax.experimental import pallas as pl
        from minijax.experimental.pallas import tpu as pltpu
    return pl, pltpu


def _kernels(J):
    pl, pltpu = _modules(J)
    return (_pallas_kernels.build(J, pl, None, pltpu=pltpu, interpret=False),
            _ragged_kernels.build(J, pl, pltpu, interpret=False))


# name -> (program(J, P, R), args): as tools/accelerator_tpu.py measure_minijax builds them
def _vjp(J, f, *args):
    return J.vjp(f, *args[:-1])[1](args[-1])


Q = np.zeros((BH, SEQ, D), BF16)
X, BIAS = np.zeros((256, 256), BF16), np.zeros((256,), BF16)
LHS, RHS, XS = np.zeros((M, K), BF16), np.zeros((G, K, N), BF16), _groups(M, G)
UP, DOWN = np.zeros((G, K, N), BF16), np.zeros((G, N, K), BF16)
PROGRAMS = {
    "flash_fwd": (lambda J, P, R: lambda q, k, v: P.flash_attention(q, k, v, *FLASH, False),
                  (Q, Q, Q)),
    "flash_fwdbwd": (lambda J, P, R: lambda q, k, v, do: _vjp(
        J, lambda q, k, v: P.flash_attention(q, k, v, *FLASH, False), q, k, v, do),
        (Q, Q, Q, Q)),
    "flash_causal_fwdbwd": (lambda J, P, R: lambda q, k, v, do: _vjp(
        J, lambda q, k, v: P.flash_attention(q, k, v, *FLASH, True), q, k, v, do),
        (Q, Q, Q, Q)),
    "matmul_relu": (lambda J, P, R: lambda x, w, b: P.matmul(
        x, w, b, bm=MATMUL[0], bn=MATMUL[1], bk=MATMUL[2], activation="relu"), (X, X, BIAS)),
    "gmm": (lambda J, P, R: lambda l, r, gs: R.gmm(l, r, gs, tiling=GMM), (LHS, RHS, XS)),
    "fused_mlp_fwd": (lambda J, P, R: lambda x, u, w, gs: R.fused_mlp_fwd(x, u, w, gs,
                                                                         tiling=MLP),
                      (LHS, UP, DOWN, XS)),
    "fused_mlp_fwdbwd": (lambda J, P, R: lambda x, u, w, gs, dy: _vjp(
        J, lambda x, u, w: R.fused_mlp(x, u, w, gs, MLP), x, u, w, dy),
        (LHS, UP, DOWN, XS, LHS)),
}


@pytest.fixture(scope="module")
def kernels():
    return {J: _kernels(J) for J in (jax, minijax)}


def _lower(J, f, args) -> str:
    return J.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def assert_same_program(mini_text: str, jax_text: str) -> None:
    ours, theirs = program_ops(mini_text), program_ops(jax_text)
    assert ours == theirs, "\n".join(difflib.unified_diff(
        theirs, ours, "jax", "minijax", lineterm="", n=1))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_benchmarked_program_matches_jax(name, kernels):
    program, args = PROGRAMS[name]
    texts = [_lower(J, program(J, *kernels[J]), args) for J in (minijax, jax)]
    assert sum("tpu_custom_call" in line for line in texts[0].splitlines()) >= 1
    assert_same_program(*texts)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_small_kernel_program_matches_jax(name):
    make, args = KERNELS[name]
    assert_same_program(_lower(minijax, make(minijax), args), _lower(jax, make(jax), args))


def test_the_normaliser_sees_one_more_op_and_another_kernel():
    make, args = KERNELS["copy"]
    jax_text = _lower(jax, make(jax), args)
    extra = _lower(minijax, lambda x: make(minijax)(x) * 2, args)  # one multiply after the call
    with pytest.raises(AssertionError, match="stablehlo.multiply"):
        assert_same_program(extra, jax_text)
    wrong = _lower(minijax, _mosaic_kernels.copy_kernel(minijax, lambda i, j: (j, i)), args)
    with pytest.raises(AssertionError):  # the call's Mosaic module differs
        assert_same_program(wrong, jax_text)


def test_tile_lowers_as_jax_in_and_out_of_kernels():
    # jnp.tile is one `tile` equation (JAX 0.10's lax.tile); in a kernel Mosaic gets copies
    # side by side (tpu.concatenate), never a 4-D shape_cast and broadcast to relayout
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    for reps in [(1, 1), (1, 4), (2, 1)]:
        tile = {J: functools.partial(J.numpy.tile, reps=reps) for J in (jax, minijax)}
        assert str(minijax.make_jaxpr(tile[minijax])(x)) == str(jax.make_jaxpr(tile[jax])(x))
        assert_same_program(_lower(minijax, tile[minijax], (x,)), _lower(jax, tile[jax], (x,)))
        np.testing.assert_array_equal(np.asarray(minijax.jit(tile[minijax])(x)),
                                      np.tile(x, reps))

    def make(J):
        pl, _ = _modules(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = J.numpy.tile(x_ref[...], (1, 4))
        out = J.ShapeDtypeStruct((16, 512), np.float32)
        return lambda a: pl.pallas_call(kernel, out_shape=out, interpret=False)(a)
    mini = _lower(minijax, make(minijax), (x,))
    assert_same_program(mini, _lower(jax, make(jax), (x,)))
    assert "tpu.concatenate" in _mosaic_kernels.normalise(_mosaic_kernels.custom_call_config(mini))
