"""Tests for minijax/experimental/pallas/: pallas_call in interpret mode.

The kernels of compare/_pallas_kernels.py run under `jax.experimental.pallas` and
`minijax.experimental.pallas` (both interpret=True); each result is checked against JAX's and
against a jnp reference. Also: grids that do not divide the array (out-of-bounds blocks),
refs through scan and cond inside kernels, vmap (a new grid axis), jvp (the kernel jaxpr
differentiated) and grad's failure, aliasing, `pl.ANY` operands, the kernel jaxpr before and
after discharge, and the errors JAX raises. The TPU-first kernels (`build(..., pltpu=...)`)
lower through Mosaic at TPU-sized bf16 blocks and run under both modules' TPU interpret modes.
Mirrors
tests/pallas/pallas_test.py in JAX (interpret-mode parts). Small shapes: one compilation per
kernel and module.
"""

import functools

import jax
import numpy as np
import pytest
from jax.experimental import pallas as jpl
from jax.experimental.pallas import tpu as jpltpu, triton as jplgpu

import minijax
import minijax.numpy as mnp
from compare import _pallas_kernels
from minijax.experimental import pallas as mpl
from minijax.experimental.pallas import tpu as mpltpu, triton as mplgpu

# Slow (CI runs it, `make test-fast` does not): kernels in interpret mode, grid step by step.
pytestmark = pytest.mark.slow

J = _pallas_kernels.build(jax, jpl, jplgpu)
M = _pallas_kernels.build(minijax, mpl, mplgpu)
RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def check(name, *args, ref=None, tol=1e-5, **kw):
    """Run kernel wrapper `name` under both modules; compare with each other and `ref`."""
    got = getattr(M, name)(*args, **kw)
    want = getattr(J, name)(*args, **kw)
    got, want = [x if isinstance(x, tuple) else (x,) for x in (got, want)]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
    if ref is not None:
        np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref), rtol=tol, atol=tol)
    return got


def test_vector_add_with_a_partial_last_block():
    x, y = rand(20), rand(20)
    check("vector_add", x, y, ref=x + y, block=8)  # grid cdiv(20, 8) = 3, last block OOB


def test_out_of_bounds_blocks_read_uninitialized_values_as_jax_does():
    # the last block of a grid of cdiv(20, 8) = 3 reads 4 elements past the end: interpret
    # mode pads with NaN (floats) or the smallest int, and drops writes past the end
    def call(J, pl, x):
        def copy_kernel(x_ref, o_ref, seen_ref):
            o_ref[...] = x_ref[...] + 1
            seen_ref[...] = x_ref[...]

        blocks = pl.BlockSpec((8,), lambda i: (i,))
        rows = pl.BlockSpec((None, 8), lambda i: (i, 0))
        out = (J.ShapeDtypeStruct((20,), x.dtype), J.ShapeDtypeStruct((3, 8), x.dtype))
        return pl.pallas_call(copy_kernel, out_shape=out, grid=(3,), in_specs=[blocks],
                              out_specs=(blocks, rows), interpret=True)(x)

    for x in (rand(20), np.arange(20, dtype=np.int32)):
        for g, w in zip(call(minijax, mpl, x), call(jax, jpl, x)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _control_flow_call(J, pl, x):
    """Refs read and written inside scan and cond bodies of a kernel."""
    jnp = J.numpy

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        def body(c, i):
            o_ref[pl.ds(i, 1)] = x_ref[pl.ds(i, 1)] + c
            return c + 1.0, c * x_ref[i]

        c, ys = J.lax.scan(body, 0.0, jnp.arange(8))
        o_ref[0] = c + ys.sum()
        J.lax.cond(x_ref[0] > 0, lambda: o_ref.__setitem__(slice(2, 8), o_ref[2:] * 3.0),
                   lambda: o_ref.__setitem__(1, -7.0))

    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), np.float32),
                          interpret=True)(x)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_refs_through_scan_and_cond_inside_a_kernel(sign):
    x = np.abs(rand(8)) * sign
    got = _control_flow_call(minijax, mpl, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(_control_flow_call(jax, jpl, x)),
                               rtol=1e-6)


def test_masked_load_store():
    x, y = rand(20), rand(20)
    check("masked_add", x, y, ref=x + y, block=8)


def test_tiled_matmul_with_fused_bias_and_activation():
    a, b, bias = rand(16, 24), rand(24, 16), rand(16)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0)
    check("matmul", a, b, bias, ref=ref, bm=8, bn=8, bk=8, tol=2e-5)


def test_row_softmax_and_layer_norm():
    x, g, b = rand(16, 32) * 3, rand(32), rand(32)
    check("row_softmax", x, ref=J.softmax_ref(x))
    check("layer_norm", x, g, b, ref=J.layer_norm_ref(x, g, b))


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward(causal):
    q, k, v = rand(2, 32, 8), rand(2, 32, 8), rand(2, 32, 8)
    o, lse = check("flash_forward", q, k, v, bq=8, bk=8, causal=causal)
    np.testing.assert_allclose(np.asarray(o), np.asarray(J.attention_ref(q, k, v, causal)),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(J.lse_ref(q, k, causal)),
                               rtol=1e-5, atol=1e-5)


def _program_id_call(pl, shape_dtype, x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + pl.program_id(0).astype(np.float32) * pl.num_programs(0)

    spec = pl.BlockSpec((4,), lambda i: (i,))
    return pl.pallas_call(kernel, out_shape=shape_dtype((8,), np.float32), grid=(2,),
                          in_specs=[spec], out_specs=spec, interpret=True)(x)


def test_vmap_adds_a_grid_axis():
    xs = rand(3, 8)
    want = jax.vmap(functools.partial(_program_id_call, jpl, jax.ShapeDtypeStruct))(xs)
    f = functools.partial(_program_id_call, mpl, minijax.ShapeDtypeStruct)
    got = minijax.vmap(f)(xs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    jaxpr = minijax.make_jaxpr(minijax.vmap(f))(xs)
    (eqn,) = jaxpr.jaxpr.eqns
    assert eqn.params["grid"] == (3, 2)
    # an unbatched operand is shared by every batch element
    y = rand(8)
    got = minijax.vmap(M.vector_add, in_axes=(0, None))(xs, y)
    np.testing.assert_allclose(np.asarray(got), xs + y, rtol=1e-6)


def test_input_output_aliases_and_jit():
    def call(J, pl, x):
        def kernel(x_ref, o_ref):
            o_ref[pl.ds(0, 4)] = x_ref[pl.ds(0, 4)] + 1.0  # the rest keeps x's values
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), np.float32),
                              input_output_aliases={0: 0}, interpret=True)(x)

    x = rand(8)
    want = jax.jit(functools.partial(call, jax, jpl))(x)
    got = minijax.jit(functools.partial(call, minijax, mpl))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("in_axes", [1, 2])
def test_vmap_over_a_non_leading_axis_indexes_it_in_place_as_jax(in_axes):
    # the batch axis stays where it is: a squeezed block dimension at that axis, no transpose
    x = rand(16, 3, 8) if in_axes == 1 else rand(16, 8, 3)
    want = jax.vmap(J.block_transpose, in_axes=in_axes)(x)
    got = minijax.vmap(M.block_transpose, in_axes=in_axes)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    jprims = [str(e.primitive) for e in jax.make_jaxpr(
        jax.vmap(J.block_transpose, in_axes=in_axes))(x).jaxpr.eqns]
    (eqn,) = minijax.make_jaxpr(minijax.vmap(M.block_transpose, in_axes=in_axes))(x).jaxpr.eqns
    assert [str(eqn.primitive)] == jprims == ["pallas_call"]
    assert eqn.params["grid"] == (3, 2, 2)
    assert eqn.params["in_block_mappings"][0].block_shape[in_axes] is None


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 1), (1, 0)])
def test_vmap_of_an_aliased_kernel_moves_or_broadcasts_the_aliased_input(in_axes):
    x, acc = rand(3, 12), rand(3, 12)
    args = [a if ax is None else (a if ax == 0 else a.T) for a, ax in zip((x, acc), in_axes)]
    args = [a[0] if ax is None else a for a, ax in zip(args, in_axes)]
    want = jax.vmap(J.axpy_inplace, in_axes=in_axes)(*args)
    got = minijax.jit(minijax.vmap(M.axpy_inplace, in_axes=in_axes))(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_a_donated_aliased_input_is_updated_in_place_as_in_jax():
    x, acc = rand(12), rand(12)
    texts = {}
    for mod, k in ((jax, J), (minijax, M)):
        f = mod.jit(k.axpy_inplace, donate_argnums=1)
        lowered = f.lower(x, acc)
        (main,) = [ln for ln in lowered.as_text().splitlines() if "func.func public @main" in ln]
        texts[mod.__name__] = main
        hlo = lowered.compile().as_text()
        assert "input_output_alias={ {}: (1, {}, may-alias) }" in hlo
        buf = mod.device_put(acc)
        out = f(x, buf)
        assert buf.is_deleted()
        np.testing.assert_allclose(np.asarray(out), acc + 2 * x, rtol=1e-6)
        not_donated = mod.device_put(acc)
        k.axpy_inplace(x, not_donated)  # eagerly nothing is donated, in either module
        assert not not_donated.is_deleted()
    for main in texts.values():
        assert "%arg1: tensor<12xf32> {tf.aliasing_output = 0 : i32}" in main


def test_kernel_jaxpr_before_and_after_discharge():
    from minijax.state import discharge_state
    x = rand(16)
    closed = minijax.make_jaxpr(functools.partial(M.vector_add, block=8))(x, x)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive is mpl.pallas_call_p and eqn.params["name"] == "add_kernel"
    kernel = eqn.params["jaxpr"]
    assert [e.primitive.name for e in kernel.jaxpr.eqns] == ["get", "get", "add", "swap"]
    assert "Ref{f32[8]}" in str(kernel)
    pure, _ = discharge_state(kernel.jaxpr, kernel.consts)
    assert "Ref" not in str(pure)
    assert [e.primitive.name for e in pure.eqns].count("dynamic_update_slice") == 1
    # the compiled program is a loop over the grid
    text = minijax.jit(functools.partial(M.vector_add, block=8)).lower(x, x).as_text()
    assert "stablehlo.while" in text and "stablehlo.dynamic_update_slice" in text


def _add_call(pl, SDS, in_spec, x, **kw):
    def add_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    out = pl.BlockSpec((4,), lambda i: (i,))
    kw.setdefault("interpret", True)
    return pl.pallas_call(add_one, out_shape=SDS((8,), np.float32), grid=(2,),
                          in_specs=[in_spec], out_specs=out, **kw)(x)


@pytest.mark.parametrize("which", ["rank", "index_map"])
def test_bad_block_specs_name_the_kernel_and_the_spec(which):
    x = rand(8)
    specs = {"rank": lambda pl: pl.BlockSpec((4, 4), lambda i: (i, 0)),
             "index_map": lambda pl: pl.BlockSpec((4,), lambda i: (i, 0))}[which]
    with pytest.raises(ValueError) as want:
        _add_call(jpl, jax.ShapeDtypeStruct, specs(jpl), x)
    with pytest.raises(ValueError) as got:
        _add_call(mpl, minijax.ShapeDtypeStruct, specs(mpl), x)
    assert "args[0]" in str(want.value) and "args[0]" in str(got.value)
    assert "add_one" in str(got.value)
    key = "same number of dimensions" if which == "rank" else "must return 1 values"
    assert key in str(want.value) and key in str(got.value)


def test_jvp_differentiates_the_kernel_and_grad_fails_as_in_jax():
    # JAX's jvp rule jvps the kernel jaxpr: one pallas_call with a tangent ref beside each
    # ref. There is no transpose, so grad fails in linearization, in both modules.
    x, y, t = rand(16), rand(16), rand(16)
    add = functools.partial(M.vector_add, block=8)
    got = minijax.jvp(add, (x, y), (t, x))
    want = jax.jvp(functools.partial(J.vector_add, block=8), (x, y), (t, x))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    (eqn,) = minijax.make_jaxpr(lambda x, t: minijax.jvp(add, (x, y), (t, t)))(x, t).eqns
    assert len(eqn.params["jaxpr"].jaxpr.invars) == 6 and len(eqn.outvars) == 2
    # loops and scratch: JAX's rule fails on the scratch accumulator (and on causal
    # attention); minijax's is checked against jax.jvp of the jnp references
    q, tq = rand(1, 16, 8), rand(1, 16, 8)
    got = minijax.jvp(functools.partial(M.flash_forward, bq=8, bk=8, causal=True),
                      (q, q, q), (tq, tq, tq))
    want = jax.jvp(lambda q: (J.attention_ref(q, q, q, True), J.lse_ref(q, q, True)), (q,), (tq,))
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
    a, b = rand(16, 16), rand(16, 16)
    got = minijax.jvp(lambda a: M.matmul(a, b, b[0], bm=8, bn=8, bk=8), (a,), (b,))
    want = jax.jvp(lambda a: J.matmul_ref(a, b, b[0]), (a,), (b,))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="Linearization failed") as err_j:
        jax.grad(lambda x: J.vector_add(x, y, block=8).sum())(x)
    with pytest.raises(ValueError, match="Linearization failed") as err_m:
        minijax.grad(lambda x: mnp.sum(M.vector_add(x, y, block=8)))(x)
    assert str(err_j.value).split(".")[0] == str(err_m.value).split(":")[0]


def test_no_interpret_and_bad_kernels():
    # interpret=False compiles for a TPU (tests/pallas_mosaic_test.py): a block shape the TPU
    # cannot tile is refused with JAX's words, and on a CPU the compile names the kernel
    x = rand(8)
    spec = mpl.BlockSpec((4,), lambda i: (i,))
    with pytest.raises(ValueError, match="rank 1 block shapes"):
        _add_call(mpl, minijax.ShapeDtypeStruct, spec, x, interpret=False)
    def add_two(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 2.0
    with pytest.raises(ValueError, match="pallas_call of add_two: .*interpret=True"):
        mpl.pallas_call(add_two, out_shape=minijax.ShapeDtypeStruct((8,), np.float32))(x)
    with pytest.raises(ValueError, match="must return None"):
        mpl.pallas_call(lambda x_ref, o_ref: x_ref[...],
                        out_shape=minijax.ShapeDtypeStruct((8,), np.float32),
                        interpret=True)(x)
    with pytest.raises(ValueError, match="inside a kernel"):
        mpl.program_id(0)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_backward_through_custom_vjp(causal):
    q, k, v, ct = rand(1, 32, 8), rand(1, 32, 8), rand(1, 32, 8), rand(1, 32, 8)

    def loss(mod, att):
        return lambda q, k, v: mod.numpy.sum(att(q, k, v) * ct)

    got = minijax.grad(loss(minijax, lambda *a: M.flash_attention(*a, 8, 8, causal)),
                       argnums=(0, 1, 2))(q, k, v)
    want = jax.grad(loss(jax, lambda *a: J.flash_attention(*a, 8, 8, causal)),
                    argnums=(0, 1, 2))(q, k, v)
    ref = jax.grad(loss(jax, lambda *a: J.attention_ref(*a, causal)), argnums=(0, 1, 2))(q, k, v)
    for g, w, r in zip(got, want, ref):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4)


def test_a_ref_used_outside_its_kernel_is_an_error_naming_the_kernel():
    leaked = []

    def leaky_kernel(x_ref, o_ref):
        leaked.append(x_ref)
        o_ref[...] = x_ref[...]

    x = rand(4)
    out = mpl.pallas_call(leaky_kernel, out_shape=minijax.ShapeDtypeStruct((4,), np.float32),
                          interpret=True)(x)
    np.testing.assert_array_equal(np.asarray(out), x)
    with pytest.raises(minijax.UnexpectedTracerError, match="leaky_kernel"):
        leaked[0][...]
    jpl.pallas_call(leaky_kernel, out_shape=jax.ShapeDtypeStruct((4,), np.float32),
                    interpret=True)(x)
    with pytest.raises(jax.errors.UnexpectedTracerError):  # JAX's error type is the same
        leaked[1][...]
    with pytest.raises(ValueError, match="2 in_specs for 1 inputs"):
        spec = mpl.BlockSpec((4,), lambda: (0,))
        mpl.pallas_call(leaky_kernel, out_shape=minijax.ShapeDtypeStruct((4,), np.float32),
                        in_specs=[spec, spec], interpret=True)(x)


def test_eager_calls_compile_once_per_kernel_program():
    import importlib
    pc_module = importlib.import_module("minijax.experimental.pallas.pallas_call")

    def call(c, x):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + c  # c: a numpy constant of the kernel jaxpr
        return mpl.pallas_call(kernel, out_shape=minijax.ShapeDtypeStruct((4,), np.float32),
                               interpret=True)(x)

    x = rand(4)
    n0 = len(pc_module._impl_cache)
    one, two = np.full(4, 1.0, np.float32), np.full(4, 2.0, np.float32)
    np.testing.assert_allclose(np.asarray(call(one, x)), x + 1)
    np.testing.assert_allclose(np.asarray(call(one, x)), x + 1)  # a retrace, same program
    assert len(pc_module._impl_cache) == n0 + 1
    np.testing.assert_allclose(np.asarray(call(two, x)), x + 2)  # other consts: not shared
    assert len(pc_module._impl_cache) == n0 + 2


def test_program_id_inside_when_and_loop_bodies():
    # JAX's interpret mode cannot lower a program_id read inside a `when` branch or a loop
    # body; minijax's can. JAX runs the variant that reads it outside, as the reference.
    def call(J, pl, x, inside=False, loop=False):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...]
            pid = None if inside else pl.program_id(0)

            @pl.when(pl.program_id(0) > 0)
            def _():
                p = pl.program_id(0) if inside else pid
                o_ref[...] += p.astype(np.float32)

            if loop:
                t = J.lax.fori_loop(0, 3, lambda i, c: c + pl.program_id(0), 0)
                o_ref[0] = o_ref[0] + t.astype(np.float32) * 10.0

        spec = pl.BlockSpec((4,), lambda i: (i,))
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((12,), np.float32),
                              grid=(3,), in_specs=[spec], out_specs=spec, interpret=True)(x)

    x = rand(12)
    want = np.asarray(call(jax, jpl, x))
    for inside in (False, True):
        np.testing.assert_allclose(np.asarray(call(minijax, mpl, x, inside)), want, rtol=1e-6)
    expect = want.copy()
    expect[[4, 8]] += np.array([30.0, 60.0], np.float32)  # 3 * program_id * 10
    got = call(minijax, mpl, x, inside=True, loop=True)
    np.testing.assert_allclose(np.asarray(got), expect, rtol=1e-6)
    jaxpr = minijax.make_jaxpr(functools.partial(call, minijax, mpl))(x)
    kernel = jaxpr.jaxpr.eqns[0].params["jaxpr"]
    jkernel = jax.make_jaxpr(functools.partial(call, jax, jpl))(x).jaxpr.eqns[0].params["jaxpr"]
    line = "= program_id[axis=0]"
    assert line in str(kernel) and line in str(jkernel)


def test_jvp_and_vmap_of_a_kernel_compose():
    s, t = rand(3, 8, 16), rand(3, 8, 16)
    want = jax.vmap(lambda x, tx: jax.jvp(J.softmax_ref, (x,), (tx,))[1])(s, t)
    got = minijax.vmap(lambda x, tx: minijax.jvp(M.row_softmax, (x,), (tx,))[1])(s, t)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    got = minijax.jvp(minijax.vmap(M.row_softmax), (s,), (t,))[1]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_an_any_memory_space_operand_is_the_whole_array():
    # pl.BlockSpec(memory_space=pl.ANY): the kernel sees the whole array at every grid point
    # (on TPU it stays in HBM, for the kernel to copy by hand; interpret mode has one memory)
    def call(J, pl, x):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 4, 4)] + x_ref[0]

        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), np.float32),
                              grid=(2,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec((4,), lambda i: (i,)), interpret=True)(x)

    x = rand(8)
    np.testing.assert_allclose(np.asarray(call(minijax, mpl, x)), np.asarray(call(jax, jpl, x)))
    np.testing.assert_allclose(np.asarray(call(minijax, mpl, x)), x + x[0], rtol=1e-6)


# a static out-of-bounds `pl.ds` (load or store) and a store of another dtype raise JAX's
# ValueError (its message); a start known only at run time is not checked, as in JAX; JAX's
# implicit casts (an integer into an integer ref, a weak float into a floating ref) are kept
def _kernels(pl, jnp):
    def load_oob(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(6, 4)]

    def load_start_past_end(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(8, 4)]

    def store_oob(x_ref, o_ref):
        o_ref[pl.ds(6, 4)] = x_ref[pl.ds(0, 4)]

    def store_int_into_float(x_ref, o_ref):
        o_ref[pl.ds(0, 4)] = x_ref[pl.ds(0, 4)].astype(jnp.int32)

    def store_weak_float(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 0 + 2.0

    def store_int8_into_int32(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.int8)

    def traced_start(x_ref, o_ref):
        o_ref[pl.ds(0, 4)] = x_ref[pl.ds(pl.program_id(0) * 4, 4)]
    return {f.__name__: f for f in (load_oob, load_start_past_end, store_oob,
                                    store_int_into_float, store_weak_float,
                                    store_int8_into_int32, traced_start)}


@pytest.mark.parametrize("name", ["load_oob", "load_start_past_end", "store_oob",
                                  "store_int_into_float", "store_weak_float",
                                  "store_int8_into_int32", "traced_start"])
def test_ref_bounds_and_dtypes_as_jax(name):
    dtype = np.int32 if name.endswith("int32") else np.float32
    x = np.arange(8).astype(np.int32 if dtype == np.int32 else np.float32)

    def run(Jm, pl):
        kernel = _kernels(pl, Jm.numpy)[name]
        return pl.pallas_call(kernel, out_shape=Jm.ShapeDtypeStruct((8,), dtype), grid=(2,),
                              interpret=True)(x)
    try:
        want = run(jax, jpl)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            run(minijax, mpl)
        assert str(got.value) == str(e)
        return
    got = run(minijax, mpl)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("which", ["minijax", "jax"])
def test_scalar_prefetch_grid_spec_feeds_index_maps_and_kernel(which):
    # PrefetchScalarGridSpec: the first operand reaches every index map (which block to read)
    # and the kernel (its first ref); vmap over the other operands keeps it unbatched
    J, pl, pltpu = (minijax, mpl, mpltpu) if which == "minijax" else (jax, jpl, jpltpu)

    def kernel(order_ref, x_ref, o_ref, acc_ref):
        i = pl.program_id(0)
        acc_ref[...] = x_ref[...] * 2.0
        o_ref[...] = acc_ref[...] + order_ref[i].astype(np.float32)

    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(4,),
        in_specs=[pl.BlockSpec((1, 3), lambda i, order: (order[i], 0))],
        out_specs=pl.BlockSpec((1, 3), lambda i, order: (i, 0)),
        scratch_shapes=[pl.ANY((1, 3), np.float32)])
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((4, 3), np.float32),
                       grid_spec=spec, interpret=True)
    order, x = np.array([2, 0, 3, 1], np.int32), rand(4, 3)
    want = 2.0 * x[order] + order[:, None]
    np.testing.assert_allclose(np.asarray(f(order, x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(J.jit(f)(order, x)), want, rtol=1e-6)
    xs = np.stack([x, x + 1.0])
    np.testing.assert_allclose(np.asarray(J.vmap(f, in_axes=(None, 0))(order, xs)),
                               2.0 * xs[:, order] + order[:, None], rtol=1e-6)


# ------------------------------------------------------------------ the kernels on a TPU
# With `pltpu`, build() gives the TPU-first kernels. Three checks without a TPU: they lower
# through Mosaic at TPU-sized bf16 blocks (the (8, 128) block rule and the memory spaces are
# checked there), they run under JAX's TPU interpret mode (which models the TPU's pipeline)
# equal to their references, and minijax's interpret mode gives JAX's result.
JT = _pallas_kernels.build(jax, jpl, jplgpu, pltpu=jpltpu, interpret=jpltpu.InterpretParams())
MT = _pallas_kernels.build(minijax, mpl, mplgpu, pltpu=mpltpu,
                          interpret=mpltpu.InterpretParams())
JC = _pallas_kernels.build(jax, jpl, jplgpu, pltpu=jpltpu, interpret=False)  # for Mosaic


def lower_for_tpu(f, *shapes):
    args = [jax.ShapeDtypeStruct(s, jax.numpy.bfloat16) for s in shapes]
    return jax.jit(f).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def _flash_fwd_bwd(causal, bq, bk):
    def f(q, k, v, do):
        return jax.vjp(lambda *a: JC.flash_attention(*a, bq, bk, causal), q, k, v)[1](do)
    return f


QKV = (4, 2048, 128)
TPU_CASES = {  # name: (function, argument shapes, number of kernels)
    "flash_forward": (lambda q, k, v: JC.flash_forward(q, k, v, bq=512, bk=512), [QKV] * 3, 1),
    "flash_forward_causal_256_512": (
        lambda q, k, v: JC.flash_forward(q, k, v, bq=256, bk=512, causal=True), [QKV] * 3, 1),
    "flash_fwd_bwd": (_flash_fwd_bwd(False, 512, 512), [QKV] * 4, 3),
    "flash_fwd_bwd_causal": (_flash_fwd_bwd(True, 512, 512), [QKV] * 4, 3),
    "matmul": (lambda x, w, b: JC.matmul(x, w, b, bm=512, bn=512, bk=512),
               [(2048, 2048), (2048, 2048), (2048,)], 1),
    "row_softmax": (JC.row_softmax, [(256, 1024)], 1),
    "layer_norm": (JC.layer_norm, [(256, 1024), (1024,), (1024,)], 1),
}


@pytest.mark.parametrize("name", list(TPU_CASES))
def test_tpu_kernels_lower_through_mosaic(name):
    f, shapes, n_kernels = TPU_CASES[name]
    assert lower_for_tpu(f, *shapes).count("tpu_custom_call") == n_kernels


def test_a_block_that_breaks_the_8_128_rule_is_refused_by_the_tpu_lowering():
    # the GPU-style forward writes its lse in (bq,) blocks of a [bh, seq] array: the last two
    # block dimensions are (squeezed, 512), and a squeezed one is not the whole dimension
    gpu_style = _pallas_kernels.build(jax, jpl, jplgpu, interpret=False)
    with pytest.raises(ValueError, match=r"divisible by 8 and 128.*outputs\[1\].*fa_fwd_kernel"):
        lower_for_tpu(lambda q, k, v: gpu_style.flash_forward(q, k, v, bq=512, bk=512),
                      *[QKV] * 3)


def tpu_interpret(f, *args):
    """jit(f)(*args) with JAX's TPU interpret mode inside, waited for. Its kernels call back
    into JAX from another thread while they run; JAX work dispatched meanwhile from this
    thread can deadlock with them, so nothing else runs until they finish."""
    return jax.block_until_ready(jax.jit(f)(*args))


def check_tpu(name, *args, ref, tol=1e-5, **kw):
    """Kernel `name` under JAX's and minijax's TPU interpret modes, in float32 at the highest
    matmul precision: JAX's equals `ref`, and minijax's equals JAX's."""
    with jax.default_matmul_precision("highest"):
        ref = jax.block_until_ready(ref())
        want = tpu_interpret(lambda *a: getattr(JT, name)(*a, **kw), *args)
    got = getattr(MT, name)(*args, **kw)
    for g, w, r in zip(*[x if isinstance(x, tuple) else (x,) for x in (got, want, ref)]):
        assert g.shape == w.shape == r.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(w), np.asarray(r), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("causal,bq,bk", [(False, 128, 128), (True, 128, 128),
                                          (True, 64, 128), (True, 128, 64)])
def test_tpu_flash_forward_in_tpu_interpret_mode(causal, bq, bk):
    q, k, v = rand(1, 256, 128), rand(1, 256, 128), rand(1, 256, 128)
    check_tpu("flash_forward", q, k, v, bq=bq, bk=bk, causal=causal,
              ref=lambda: (J.attention_ref(q, k, v, causal), J.lse_ref(q, k, causal)))


@pytest.mark.parametrize("causal,bq,bk", [(False, 128, 128), (True, 128, 64)])
def test_tpu_flash_attention_grads_in_tpu_interpret_mode(causal, bq, bk):
    q, k, v, ct = (rand(1, 256, 128) for _ in range(4))

    def grads(mod, att):
        loss = lambda q, k, v: mod.numpy.sum(att(q, k, v) * ct)
        return mod.grad(loss, argnums=(0, 1, 2))(q, k, v)

    with jax.default_matmul_precision("highest"):
        ref = jax.block_until_ready(grads(jax, lambda *a: J.attention_ref(*a, causal)))
        want = tpu_interpret(lambda: grads(jax, lambda *a: JT.flash_attention(*a, bq, bk, causal)))
    got = grads(minijax, lambda *a: MT.flash_attention(*a, bq, bk, causal))
    for g, w, r in zip(got, want, ref):
        scale = np.abs(np.asarray(r)).max()
        np.testing.assert_allclose(np.asarray(w) / scale, np.asarray(r) / scale, atol=1e-5)
        np.testing.assert_allclose(np.asarray(g) / scale, np.asarray(w) / scale, atol=1e-5)


def test_tpu_flash_forward_in_bf16_is_within_bf16_of_float32():
    q, k, v = rand(1, 256, 128), rand(1, 256, 128), rand(1, 256, 128)
    bf = [jax.numpy.asarray(x, jax.numpy.bfloat16) for x in (q, k, v)]
    with jax.default_matmul_precision("highest"):
        ref = J.attention_ref(*[np.asarray(x, np.float32) for x in bf], True)
    o, lse = tpu_interpret(lambda *a: JT.flash_forward(*a, bq=128, bk=128, causal=True), *bf)
    assert o.dtype == jax.numpy.bfloat16 and lse.dtype == np.float32
    np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(ref), atol=2e-2)
    mo, mlse = MT.flash_forward(*[minijax.numpy.asarray(x, minijax.numpy.bfloat16) for x in bf],
                                bq=128, bk=128, causal=True)
    np.testing.assert_array_equal(np.asarray(mo, np.float32), np.asarray(o, np.float32))


def test_tpu_matmul_softmax_and_layer_norm_in_tpu_interpret_mode():
    x, w, b = rand(256, 256), rand(256, 256), rand(256)
    check_tpu("matmul", x, w, b, bm=128, bn=128, bk=128, activation="gelu",
              ref=lambda: J.matmul_ref(x, w, b, "gelu"), tol=1e-4)
    s, g, beta = rand(16, 256) * 3, rand(256), rand(256)
    check_tpu("row_softmax", s, ref=lambda: J.softmax_ref(s))
    check_tpu("layer_norm", s, g, beta, ref=lambda: J.layer_norm_ref(s, g, beta))


@pytest.mark.parametrize("shift", [-1, -3, 1, 5])
def test_block_index_out_of_range_as_jax(shift):
    # interpret mode cuts blocks with lax.dynamic_slice as JAX's: a negative start is
    # counted from the end once, then any start is clamped into the array (reads and writes)
    x = np.arange(32.0, dtype=np.float32).reshape(4, 8)

    def run(J, pl):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1.0

        return np.asarray(pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((4, 8), np.float32), grid=(2,),
            in_specs=[pl.BlockSpec((2, 8), lambda i: (i + shift, 0))],
            out_specs=pl.BlockSpec((2, 8), lambda i: (i - shift, 0)), interpret=True)(x))

    np.testing.assert_array_equal(run(minijax, mpl), run(jax, jpl))


def test_strided_ds_loads_and_stores_as_jax():
    # pl.ds(start, size, stride): every stride-th element, read, written and added to (the
    # elements between keep their values); a static slice past the end: JAX's ValueError
    x = np.arange(10.0, dtype=np.float32)

    def run(J, pl):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...]
            o_ref[pl.ds(0, 5, stride=2)] = x_ref[pl.ds(1, 5, stride=2)] * 10.0
            o_ref[pl.ds(1, 3, stride=3)] += 100.0

        return np.asarray(pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((10,), np.float32),
                                         interpret=True)(x))

    np.testing.assert_array_equal(run(minijax, mpl), run(jax, jpl))

    def out_of_bounds(J, pl):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[pl.ds(2, 5, stride=2)]

        with pytest.raises(ValueError) as e:
            pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((5,), np.float32),
                           interpret=True)(x)
        return str(e.value)

    assert out_of_bounds(minijax, mpl) == out_of_bounds(jax, jpl)
