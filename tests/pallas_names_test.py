"""jax.experimental.pallas's and pallas.tpu's names in minijax, each against JAX: every kernel
is written once against a module alias `J` (jax or minijax), run in interpret mode by both,
and the values compared; the names that reach the Mosaic lowering (`multiple_of`,
`CostEstimate`, `SideEffectType`) compare the custom call with JAX's as well."""

from __future__ import annotations

import importlib

import jax
import numpy as np
import pytest

import minijax
from compare._mosaic_kernels import custom_call_configs, normalise

F32 = np.float32
X = (np.arange(16 * 128, dtype=F32).reshape(16, 128) - 700) / 50


def _pl(J):
    return (importlib.import_module(J.__name__ + ".experimental.pallas"),
            importlib.import_module(J.__name__ + ".experimental.pallas.tpu"))


def both(make, *args):
    """`make(J)(*args)` for J = jax and minijax, as NumPy arrays (pytrees of)."""
    out = []
    for J in (jax, minijax):
        out.append(jax.tree.map(np.asarray, make(J)(*args)))
    return out


def assert_same(make, *args, **tol):
    want, got = both(make, *args)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, **tol), got, want)


def test_block_dims_element_squeezed_blocked_as_jax():
    def make(J):
        pl, _ = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2
        # rows: Element(4) with padding (an offset, not a block index); then squeezed, blocked
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((4, 4, 128), F32), grid=(4,),
            in_specs=[pl.BlockSpec((pl.Element(4, (1, 2)), pl.Blocked(128)),
                                   lambda i: (3 * i, 0))],
            out_specs=pl.BlockSpec((pl.squeezed, 4, pl.Blocked(128)), lambda i: (i, 0, 0)),
            interpret=True)(x)
    want, got = both(make, X)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want))


def test_element_output_and_no_block_spec_as_jax():
    def make(J):
        pl, _ = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 128), F32), grid=(2,),
            in_specs=pl.no_block_spec,
            out_specs=pl.BlockSpec((pl.Element(16), 128), lambda i: (0, 0)),
            interpret=True)(x)
    assert_same(make, X)


def test_bounded_slice_and_a_bad_block_dim_refused_as_jax():
    for J in (jax, minijax):
        pl, _ = _pl(J)
        f = pl.pallas_call(lambda x_ref, o_ref: None,
                           out_shape=J.ShapeDtypeStruct((16, 128), F32),
                           in_specs=[pl.BlockSpec((pl.BoundedSlice(8), 128),
                                                  lambda pl=pl: (pl.ds(0, 8), 0))],
                           out_specs=pl.BlockSpec((16, 128), lambda: (0, 0)), interpret=True)
        with pytest.raises(ValueError):  # JAX: its interpreter's zip; minijax: JAX's words
            f(X)
        with pytest.raises(ValueError):
            pl.pallas_call(lambda x_ref, o_ref: None, out_shape=J.ShapeDtypeStruct((16,), F32),
                           in_specs=[pl.BlockSpec(("a",), lambda: (0,))], interpret=True)(X[0])


def test_buffered_compiler_params_cost_estimate_accepted_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = pl.reciprocal(x_ref[...]) + pl.multiple_of(pl.program_id(0) * 8, 8)
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 128), F32), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0),
                                   pipeline_mode=pl.Buffered(3))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=(pltpu.CORE_PARALLEL,),
                has_side_effects=pltpu.SideEffectType.DATAFLOW_SIDE_EFFECTING),
            cost_estimate=pl.CostEstimate(flops=10, transcendentals=0, bytes_accessed=64),
            interpret=True)(x)
    assert_same(make, X + 0.5, rtol=1e-6)
    for J in (jax, minijax):
        pl, _ = _pl(J)
        with pytest.raises(ValueError, match="must be ints"):
            pl.CostEstimate(flops=1.5, transcendentals=0, bytes_accessed=0)
    assert issubclass(minijax.experimental.pallas.tpu.CompilerParams,
                      minijax.experimental.pallas.CompilerParams)


def test_mosaic_custom_call_with_multiple_of_cost_and_side_effects_matches_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + pl.multiple_of(pl.program_id(0) * 8, 8).astype(F32)
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 128), F32), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            compiler_params=pltpu.CompilerParams(
                has_side_effects=pltpu.SideEffectType.DATAFLOW_SIDE_EFFECTING),
            cost_estimate=pl.CostEstimate(flops=10, transcendentals=2, bytes_accessed=64),
            interpret=False)(x)
    jax_text = jax.jit(make(jax)).trace(X).lower(lowering_platforms=("tpu",)).as_text()
    mini_text = minijax.jit(make(minijax)).trace(X).lower().as_text()
    (want,), (got,) = custom_call_configs(jax_text), custom_call_configs(mini_text)
    assert normalise(got) == normalise(want)
    assert "tpu.assume_multiple" in normalise(got)
    assert {k: v for k, v in got["custom_call_config"].items() if k != "body"} == {
        k: v for k, v in want["custom_call_config"].items() if k != "body"}
    for text in (jax_text, mini_text):
        assert "xla_allow_dce_side_effecting_op" in text


def test_loop_run_scoped_with_scoped_helpers_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref):
            def body(tmp_ref):
                tmp_ref[...] = x_ref[...] * 3
                o_ref[...] = tmp_ref[...]

            pl.run_scoped(body, pltpu.VMEM((8, 128), F32))

            @pl.loop(1, 8, step=3)
            def _(i):
                o_ref[...] = o_ref[...] + i.astype(F32)

            @pl.with_scoped(pltpu.VMEM((8, 128), F32))
            def scaled(k, tmp):
                tmp[...] = o_ref[...] * k
                return tmp[...].sum()
            o_ref[0, 0] = scaled(2.0) + pl.cdiv(7, 2) + pl.align_to(5, 4)
            total = pl.loop(0, 4, init_carry=0.0)(lambda i, c: c + x_ref[i, 0])
            o_ref[1, 0] = total
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 128), F32), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=True)(x)
    assert_same(make, X, rtol=1e-6)
    for J in (jax, minijax):
        pl, _ = _pl(J)
        assert (pl.next_power_of_2(0), pl.next_power_of_2(17)) == (1, 32)
        assert pl.strides_from_shape((2, 3, 4)) == (12, 4, 1)
    # cdiv of arrays rounds toward zero, as JAX's lax.div
    np.testing.assert_array_equal(
        minijax.experimental.pallas.cdiv(np.array([-7, 7]), 2),
        jax.experimental.pallas.cdiv(np.array([-7, 7]), 2))


def test_empty_broadcast_debug_print_delay_as_jax(capsys):
    def make(J):
        pl, _ = _pl(J)

        def kernel(x_ref, o_ref):
            e = pl.empty_like(J.ShapeDtypeStruct((8, 128), F32))
            pl.debug_print("first {}", x_ref[0, 0])
            o_ref[...] = pl.broadcast_to(x_ref[0:1, :], (8, 128)) + 0 * e.shape[0]
        return lambda x: pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((8, 128), F32), interpret=True)(x)
    want, got = both(make, X[:8])
    np.testing.assert_allclose(got, want)
    minijax.effects_barrier() if hasattr(minijax, "effects_barrier") else None
    jax.effects_barrier()
    assert capsys.readouterr().out.count("first -14.0") == 2


def test_semaphores_and_dma_copies_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref, r_ref, buf, sem, dma):
            pl.semaphore_signal(sem, 3)
            pl.semaphore_wait(sem, 1)
            copy = pltpu.make_async_copy(x_ref, buf, dma)
            copy.start()
            copy.wait()
            o_ref[...] = buf[...]
            r_ref[0] = pl.semaphore_read(sem)
            r_ref[1] = pl.semaphore_read(dma)
        return lambda x: pl.pallas_call(
            kernel, out_shape=(J.ShapeDtypeStruct((8, 128), F32),
                               J.ShapeDtypeStruct((2,), np.int32)),
            out_specs=(pl.BlockSpec((8, 128), lambda: (0, 0)),
                       pl.BlockSpec(memory_space=pltpu.SMEM)),
            scratch_shapes=[pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.REGULAR,
                            pltpu.SemaphoreType.DMA],
            interpret=True)(x)
    want, got = both(make, X[:8])
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_tpu_bitcast_roll_load_store_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, i_ref, o_ref, r_ref, b_ref):
            x = x_ref[...]
            mask = J.numpy.arange(128)[None, :] < 64
            o_ref[...] = J.numpy.zeros((8, 128), F32)
            pltpu.store(o_ref, pltpu.roll(x, 3, 1) + pltpu.load(x_ref), mask=mask)
            r_ref[...] = pltpu.roll(x, 1, 1, stride=2, stride_axis=0)
            b_ref[...] = pltpu.bitcast(i_ref[...], np.int32)  # same width only in minijax
        return lambda x, i: pl.pallas_call(
            kernel, out_shape=(J.ShapeDtypeStruct((8, 128), F32),
                               J.ShapeDtypeStruct((8, 128), F32),
                               J.ShapeDtypeStruct((8, 128), np.int32)), interpret=True)(x, i)
    assert_same(make, X[:8], X[8:])
    for J in (jax, minijax):
        _, pltpu = _pl(J)
        with pytest.raises(ValueError, match="shift must be non-negative"):
            pltpu.roll(np.ones((8, 128), F32), -1, 0)
        with pytest.raises(ValueError, match="bitcast 1D"):
            pltpu.bitcast(np.ones((8,), F32), np.int32)


def test_delay_is_a_no_op_in_interpret_mode():
    # differs: JAX 0.10.2's interpret mode has no rule for delay on a CPU (NotImplementedError)
    pl, _ = _pl(minijax)

    def kernel(x_ref, o_ref):
        pl.delay(100)
        o_ref[...] = x_ref[...]
    out = pl.pallas_call(kernel, out_shape=minijax.ShapeDtypeStruct((8, 128), F32),
                         interpret=True)(X[:8])
    np.testing.assert_array_equal(np.asarray(out), X[:8])


@pytest.mark.parametrize("case", ["matmul_tanh_sum", "exp_plus_one", "jit_pow_sqrt_sin",
                                  "batched_einsum", "pytree_relu_sigmoid", "convert"])
def test_estimate_cost_as_jax(case):
    def make(J):
        pl, _ = _pl(J)
        jnp = J.numpy
        f32 = lambda *s: np.ones(s, F32)
        fun, args, kwargs = {
            "matmul_tanh_sum": (lambda x, w: jnp.tanh(x @ w).sum(), (f32(8, 16), f32(16, 4)),
                                {}),
            "exp_plus_one": (lambda x: jnp.exp(x) + 1,
                             (J.ShapeDtypeStruct((4, 5), np.float32),), {}),
            "jit_pow_sqrt_sin": (lambda x, n: J.jit(
                lambda y: y ** 5 - jnp.sqrt(y) * jnp.sin(y))(x) / n, (f32(3, 7),),
                {"n": 2.0}),
            "batched_einsum": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                               (f32(2, 3, 4), f32(2, 4, 5)), {}),
            "pytree_relu_sigmoid": (lambda d: J.nn.relu(d["x"]) * J.nn.sigmoid(d["y"]),
                                    ({"x": f32(6), "y": f32(6)},), {}),
            "convert": (lambda a: a.astype(np.float32), (np.ones((2, 3), np.float64),), {}),
        }[case]
        est = pl.estimate_cost(fun, *args, **kwargs)
        return lambda: (est.flops, est.transcendentals, est.bytes_accessed)
    want, got = both(make)
    assert got == want
    assert isinstance(minijax.experimental.pallas.estimate_cost(
        lambda x: x, np.ones(2, F32)), minijax.experimental.pallas.CostEstimate)
