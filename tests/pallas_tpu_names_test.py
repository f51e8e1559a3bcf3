"""jax.experimental.pallas.tpu's names added for issue 45, each against JAX: kernels written once
against a module alias `J` and run by both in TPU interpret mode (`InterpretParams()`), values
compared; where JAX's interpret mode has no rule for an operation (pack_elementwise,
stochastic_round, the MXU, the stateful samplers), the reference is real JAX outside a kernel
computing what the operation's docstring defines; descriptive names (enums, dataclasses) are
checked member for member."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from pallas_names_test import F32, X, _pl, both  # the same inputs and helpers

import minijax


def call(J, kernel, out_shape, *args, **kw):
    pl, pltpu = _pl(J)
    return pl.pallas_call(kernel, out_shape=out_shape, interpret=pltpu.InterpretParams(),
                          **kw)(*args)


def test_enums_and_dataclasses_have_jax_members():
    _, jt = _pl(jax)
    _, mt = _pl(minijax)
    for name in ("ChipVersion", "CoreType", "Tiling", "BufferType"):
        assert [(m.name, m.value) for m in getattr(mt, name)] == [
            (m.name, m.value) for m in getattr(jt, name)], name
    assert [f.name for f in dataclasses.fields(mt.TpuInfo)] == [
        f.name for f in dataclasses.fields(jt.TpuInfo)]
    for c in jt.ChipVersion:
        mc = mt.ChipVersion(c.value)
        assert (mc.is_lite, mc.supports_megacore, mc.num_physical_tensor_cores_per_chip,
                str(mc)) == (c.is_lite, c.supports_megacore,
                             c.num_physical_tensor_cores_per_chip, str(c))
        for n in (1, 2):
            try:
                want = dataclasses.asdict(jt.get_tpu_info_for_chip(c, n))
            except ValueError:
                with pytest.raises(ValueError, match="num_tensor_cores_per_logical_device"):
                    mt.get_tpu_info_for_chip(mc, n)
                continue
            got = dataclasses.asdict(mt.get_tpu_info_for_chip(mc, n))
            assert str(got.pop("chip_version")) == str(want.pop("chip_version"))
            assert got == want, (c, n)
    assert [t.shape for t in mt.Tiling] == [t.shape for t in jt.Tiling]
    assert mt.is_tpu_device() == jt.is_tpu_device()
    if not jt.is_tpu_device():
        for m in (jt, mt):
            with pytest.raises(ValueError, match="Unsupported TPU device kind"):
                m.get_tpu_info()
    assert mt.BufferType.INPUT_OUTPUT.is_input and mt.BufferType.INPUT_OUTPUT.is_output
    mesh = mt.create_tensorcore_mesh("core", num_cores=2)
    assert mesh.shape == dict(jt.create_tensorcore_mesh("core", num_cores=2).shape)
    with pytest.raises(ValueError, match="both devices and num_cores"):
        mt.create_tensorcore_mesh("core", devices=minijax.devices(), num_cores=1)
    assert mt.dma_semaphore.__name__ == jt.dma_semaphore.__name__


def test_einshape_as_jax():
    x = np.arange(4 * 6 * 2, dtype=F32).reshape(4, 6, 2)
    for eq, sizes in [("a(bc)d->bdac", {"b": 2}), ("abc->(ca)b", {}), ("a(bc)d->(ab)cd",
                                                                         {"c": 3})]:
        _, jt = _pl(jax)
        _, mt = _pl(minijax)
        np.testing.assert_array_equal(mt.einshape(eq, x, **sizes), jt.einshape(eq, x, **sizes))

    def make(J):
        return lambda x: call(J, lambda x_ref, o_ref: o_ref.__setitem__(
            ..., _pl(J)[1].einshape("ab->ba", x_ref[...])), J.ShapeDtypeStruct((128, 16), F32),
            x)
    want, got = both(make, X)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="einshape"):
        _pl(minijax)[1].einshape("a(bc)->abc", x[0], b=4)


def test_remote_copy_to_this_device_touch_trace_value_prng_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref, bits_ref, send, recv):
            c = pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=0,
                                             device_id_type=pl.DeviceIdType.LOGICAL)
            c.start()
            c.wait()
            pltpu.prng_seed(7)
            bits_ref[...] = pltpu.prng_random_bits((8, 128))
        return lambda x: call(
            J, kernel, (J.ShapeDtypeStruct((8, 128), F32),
                        J.ShapeDtypeStruct((8, 128), np.int32)), x,
            out_specs=(pl.BlockSpec((8, 128), lambda: (0, 0)),
                       pl.BlockSpec((8, 128), lambda: (0, 0))),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA])
    want, got = both(make, X[:8])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # touch and trace_value: JAX's interpret mode refuses a kernel with either (an effect it
    # cannot place); minijax runs them as what they are there, no-ops on the values
    pl, mt = _pl(minijax)

    def kernel(x_ref, o_ref):
        mt.touch(x_ref)
        mt.trace_value("first", x_ref[0, 0])
        o_ref[...] = x_ref[...]
    np.testing.assert_array_equal(np.asarray(call(
        minijax, kernel, minijax.ShapeDtypeStruct((8, 128), F32), X[:8])), X[:8])
    with pytest.raises(TypeError, match="expected a ref"):
        mt.touch(X)
    with pytest.raises(ValueError, match="i32 or f32"):
        mt.trace_value("x", minijax.numpy.int16(1))


def test_pack_and_unpack_elementwise_as_jax_bitcasts():
    _, mt = _pl(minijax)
    a, b = X[:8], X[8:]
    got = np.asarray(mt.pack_elementwise([a, b], packed_dtype=ml_dtypes.bfloat16))
    lo, hi = (jax.lax.bitcast_convert_type(jjnp.asarray(v, jjnp.bfloat16), jjnp.uint16)
              .astype(jjnp.uint32) for v in (a, b))
    np.testing.assert_array_equal(got, np.asarray(lo | (hi << 16)))
    ints = [(np.arange(64, dtype=np.int32).reshape(8, 8) * k - 100) for k in (3, 5, 7, 11)]
    packed = mt.pack_elementwise(ints, packed_dtype=np.int8)
    # JAX's docstring: unpacking index k gives the k-th int8 of each word, sign-extended
    as_i8 = np.asarray(jax.lax.bitcast_convert_type(jjnp.asarray(np.asarray(packed)), jjnp.int8))
    for k in range(4):
        u = mt.unpack_elementwise(packed.astype(np.int32) if packed.dtype != np.int32 else
                                  packed, index=k, packed_dtype=np.int8,
                                  unpacked_dtype=np.int32)
        np.testing.assert_array_equal(u, as_i8[..., k].astype(np.int32))
        np.testing.assert_array_equal(u, ints[k].astype(np.int8).astype(np.int32))
    with pytest.raises(ValueError, match="packing factor"):
        mt.pack_elementwise(ints[:3], packed_dtype=np.int8)
    with pytest.raises(ValueError, match="out of bounds"):
        mt.unpack_elementwise(np.zeros(4, np.int32), index=4, packed_dtype=np.int8,
                              unpacked_dtype=np.int32)


def test_stochastic_round_brackets_and_truncates_as_math():
    _, mt = _pl(minijax)
    x = X[:8]
    down = np.asarray(jax.lax.reduce_precision(jjnp.asarray(x), 8, 7))  # nearest, a reference
    bits = np.random.default_rng(0).integers(0, 2 ** 32, x.shape, dtype=np.uint32)
    got = np.asarray(mt.stochastic_round(x, bits, target_dtype=ml_dtypes.bfloat16), F32)
    trunc = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(F32)  # toward zero
    away = (trunc.view(np.uint32) + np.uint32(0x10000)).view(F32)  # one bf16 ulp further out
    assert np.all((got == trunc) | (got == away))
    assert np.all((down == trunc) | (down == away))  # nearest is one of the two as well
    assert 0 < np.mean(got == away) < 1
    zero = np.asarray(mt.stochastic_round(x, np.zeros_like(bits),
                                          target_dtype=ml_dtypes.bfloat16), F32)
    np.testing.assert_array_equal(zero, trunc)
    with pytest.raises(ValueError, match="uint32"):
        mt.stochastic_round(x, bits.astype(np.int32), target_dtype=ml_dtypes.bfloat16)


def test_mxu_push_acc_pop_as_jax_dot():
    a, b = X[:8, :16], X[:16, :128] / 10

    def kernel(a_ref, b_ref, o_ref):
        _, pltpu = _pl(minijax)
        pltpu.matmul_push_rhs(b_ref[...], 0, 0)
        pltpu.matmul_acc_lhs(0, a_ref[...], 0, load_staged_rhs=0)
        pltpu.matmul_acc_lhs(0, a_ref[...], 0)
        o_ref[...] = pltpu.matmul_pop(0, (8, 128), np.float32, 0)
    got = call(minijax, kernel, minijax.ShapeDtypeStruct((8, 128), F32), a, b)
    want = 2 * jjnp.dot(a, b, precision="highest")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    _, mt = _pl(minijax)
    with pytest.raises(TypeError, match="load_staged_rhs"):
        mt.matmul_acc_lhs(0, a, 0, load_staged_rhs=True)
    with pytest.raises(ValueError, match="accumulators"):
        mt.matmul_pop(0, (8, 128), np.float16, 0)


def test_stateful_samplers_as_jax_samplers_of_interpret_bits():
    # JAX's TPU interpret mode gives zeros for prng_random_bits; its samplers, run on the
    # bits of a PRNG implementation that gives zeros too, are the reference
    from jax._src.random import prng as jprng
    impl = jprng.PRNGImpl(key_shape=(1,), seed=lambda s: jjnp.zeros((1,), jjnp.uint32),
                          split=None, random_bits=lambda k, bw, shape: jjnp.zeros(
                              shape, jjnp.uint32), fold_in=None, name="zeros_p3", tag="z3")
    try:
        jprng.register_prng(impl)
    except ValueError:
        pass
    key = jax.random.key(0, impl="zeros_p3")
    _, mt = _pl(minijax)

    def kernel(o1, o2, o3, o4):
        mt.prng_seed(1)
        o1[...] = mt.stateful_uniform((8, 128), minval=-2.0, maxval=3.0)
        o2[...] = mt.stateful_normal((8, 128))
        o3[...] = mt.stateful_bernoulli(0.3, (8, 128)).astype(np.int32)
        o4[...] = mt.stateful_bits((8, 128))
    S = minijax.ShapeDtypeStruct
    got = call(minijax, kernel, (S((8, 128), F32), S((8, 128), F32), S((8, 128), np.int32),
                                 S((8, 128), np.uint32)))
    want = (jax.random.uniform(key, (8, 128), minval=-2.0, maxval=3.0),
            jax.random.normal(key, (8, 128)), jax.random.bernoulli(key, 0.3, (8, 128)),
            jax.random.bits(key, (8, 128)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w).astype(np.asarray(g).dtype))


def test_emit_pipeline_as_numpy():
    # JAX's emit_pipeline asks get_tpu_info() for the tiling, which raises on a CPU: the
    # reference is the blockwise computation in NumPy
    def make(J):
        pl, pltpu = _pl(J)

        def inner(x_blk, o_blk):
            o_blk[...] = x_blk[...] * 2 + 1

        def kernel(x_hbm, o_hbm):
            pltpu.emit_pipeline(inner, grid=(4, 2),
                                in_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, j))],
                                out_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, 1 - j))]
                                )(x_hbm, o_hbm)
        return lambda x: call(J, kernel, J.ShapeDtypeStruct((16, 128), F32), x,
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY))
    got = np.asarray(make(minijax)(X))
    want = np.empty_like(X)
    for i in range(4):
        for j in range(2):
            want[4 * i:4 * i + 4, 64 * (1 - j):64 * (2 - j)] = (
                X[4 * i:4 * i + 4, 64 * j:64 * j + 64] * 2 + 1)
    np.testing.assert_array_equal(got, want)

    def kernel2(x_hbm, o_hbm):
        pl, pltpu = _pl(minijax)
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pipe, make_alloc = pltpu.emit_pipeline_with_allocations(
            lambda x, o: o.__setitem__(..., -x[...]), grid=(2,), in_specs=[spec],
            out_specs=[spec])
        allocs = make_alloc(x_hbm, o_hbm)
        assert [a.buffer_type for a in allocs] == [pltpu.BufferType.INPUT,
                                                   pltpu.BufferType.OUTPUT]
        assert isinstance(allocs[0], pltpu.BufferedRefBase)
        pipe(x_hbm, o_hbm, allocations=allocs)
    pl = _pl(minijax)[0]
    got = call(minijax, kernel2, minijax.ShapeDtypeStruct((16, 128), F32), X,
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY))
    np.testing.assert_array_equal(np.asarray(got), -X)
    with pytest.raises(ValueError, match="strictly positive"):
        _pl(minijax)[1].emit_pipeline(lambda: None, grid=(0,))


def test_run_on_first_core_and_core_barrier_with_one_core_as_jax():
    def make(J):
        _, pltpu = _pl(J)

        def f(x):
            return pltpu.run_on_first_core("core")(lambda: x * 3)
        return lambda x: J.vmap(f, axis_name="core")(x)
    want, got = both(make, X[:1])
    np.testing.assert_array_equal(got, want)


def test_force_and_set_tpu_interpret_mode_as_jax():
    def make(J):
        pl, pltpu = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1

        def f(x):
            with pltpu.force_tpu_interpret_mode():
                return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 128), F32))(x)
        return f
    want, got = both(make, X)
    np.testing.assert_array_equal(got, want)
    pl, mt = _pl(minijax)
    mt.set_tpu_interpret_mode(mt.InterpretParams(uninitialized_memory="zero"))
    try:
        out = pl.pallas_call(lambda x_ref, o_ref: None,
                             out_shape=minijax.ShapeDtypeStruct((8, 128), F32))(X[:8])
        np.testing.assert_array_equal(np.asarray(out), np.zeros((8, 128), F32))
    finally:
        mt.set_tpu_interpret_mode(None)
    mt.reset_tpu_interpret_mode_state()
