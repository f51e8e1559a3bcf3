"""minijax's Pallas TPU lowering against JAX's, on a CPU: one kernel source, two Mosaic modules.

Each kernel is written once against a module alias `J` (jax or minijax). JAX lowers it for the
TPU without one (`jit(f).trace(*args).lower(lowering_platforms=("tpu",))`), minijax lowers it
with `interpret=False`; both give StableHLO with a `tpu_custom_call` whose `backend_config`
carries the Mosaic module as base64 bytecode. `mosaic_module_text` decodes it (the
`mosaic-serde` pass back from Mosaic's stable form) and `normalise` prints it without
locations and with these documented differences removed:

- unused `arith.constant` ops: JAX's transform functions carry one `arith.constant 0 : i32`
  that nothing reads (`lower_jaxpr_to_transform_func` builds `[ir_constant(0)] * n` for the
  block indices of extended dtypes even when n is 0); minijax emits none.

Everything else must match: the same ops in the same order, the same types and attributes
(SSA names are the printer's, so equal modules print equal names), and the same custom call
config besides the body. A planted bug (a wrong index map) must make the comparison fail.
Taught in chapters/16-pallas.md.
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import re

import jax
import numpy as np
import pytest

import minijax
from compare import pallas_kernels
from minijax.experimental.pallas.mosaic import lowering as mosaic_lowering
from minijax.experimental.pallas.mosaic.pallas_call_registration import mosaic_ir_context


def _pl(J):
    return (importlib.import_module(J.__name__ + ".experimental.pallas"),
            importlib.import_module(J.__name__ + ".experimental.pallas.tpu"))


# ---------------------------------------------------------------------------------------------
# Decoding and normalising a tpu_custom_call
# ---------------------------------------------------------------------------------------------

def custom_call_configs(stablehlo_text: str) -> list[dict]:
    """The JSON backend_config of each tpu_custom_call in a StableHLO module's text."""
    found = re.findall(r'stablehlo.custom_call @tpu_custom_call\(.*?backend_config = "(.*?)"',
                       stablehlo_text)
    return [json.loads(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), f))
            for f in found]


def custom_call_config(stablehlo_text: str) -> dict:
    (config,) = custom_call_configs(stablehlo_text)
    return config


def _drop_unused_constants(op) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                _drop_unused_constants(inner.operation)
                if inner.operation.name == "arith.constant" and not list(
                        inner.operation.results[0].uses):
                    inner.operation.erase()


def normalise(config: dict) -> str:
    """The Mosaic module of a custom call config, printed for comparison (see the docstring)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager
    body = base64.b64decode(config["custom_call_config"]["body"])
    with mosaic_ir_context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(body)
        PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        _drop_unused_constants(module.operation)
        return module.operation.get_asm(enable_debug_info=False)


def _lower_both(make, args):
    """(JAX's configs, minijax's configs) of the program `make(J)` on `args`."""
    jax_text = jax.jit(make(jax)).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    mini_text = minijax.jit(make(minijax)).trace(*args).lower().as_text()
    return custom_call_configs(jax_text), custom_call_configs(mini_text)


def _without_body(config: dict) -> dict:
    return {**config, "custom_call_config": {
        k: v for k, v in config["custom_call_config"].items() if k != "body"}}


def assert_same_kernels(make, args) -> None:
    jax_configs, mini_configs = _lower_both(make, args)
    assert len(mini_configs) == len(jax_configs) > 0
    for mini, want in zip(mini_configs, jax_configs):
        assert normalise(mini) == normalise(want)
        assert _without_body(mini) == _without_body(want)


# ---------------------------------------------------------------------------------------------
# Kernels written for the TPU: blocks of (8, 128) tiles, scratch in VMEM
# ---------------------------------------------------------------------------------------------

F32 = np.float32
X16 = np.arange(16 * 256, dtype=F32).reshape(16, 256) / 100


def copy_kernel(J, index_map=lambda i, j: (i, j)):
    pl, _ = _pl(J)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(2, 2), in_specs=[pl.BlockSpec((8, 128), index_map)],
                              out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
                              interpret=False)(x)
    return f


def matmul_kernel(J):
    pl, pltpu = _pl(J)
    jnp = J.numpy

    def kernel(a_ref, b_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def f(a, b):
        return pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((256, 256), jnp.float32), grid=(2, 2, 2),
            in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")),
            interpret=False)(a, b)
    return f


def matmul_transposed_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(a_ref, b_ref, o_ref):  # a @ b.T, contracting both minor dimensions
        o_ref[...] = lax.dot_general(a_ref[...], b_ref[...], (((1,), (1,)), ((), ())),
                                     preferred_element_type=jnp.float32)

    def f(a, b):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((128, 128), jnp.float32),
                              interpret=False)(a, b)
    return f


def softmax_kernel(J):
    pl, _ = _pl(J)
    jnp = J.numpy

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                              interpret=False)(x)
    return f


def fori_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, o_ref):
        def body(i, acc):
            return acc + x_ref[pl.ds(i * 8, 8), :]
        o_ref[...] = lax.fori_loop(0, 2, body, jnp.zeros((8, 256), jnp.float32))

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8, 256), x.dtype),
                              interpret=False)(x)
    return f


def elementwise_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        row = lax.broadcasted_iota(jnp.int32, x.shape, 0) + pl.program_id(0) * 8
        col = lax.broadcasted_iota(jnp.int32, x.shape, 1)
        y = jnp.tanh(x) * lax.rsqrt(x + 1.0) - jnp.log(x + 2.0) + J.nn.sigmoid(x)
        y = jnp.minimum(jnp.maximum(y, -1.0), 1.0) / 3.0
        y = jnp.where(row >= col, y, -x).astype(jnp.bfloat16)
        o_ref[...] = y.astype(jnp.float32)

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                              interpret=False)(x)
    return f


def squeezed_kernel(J):
    pl, pltpu = _pl(J)

    def kernel(x_ref, o_ref, s_ref):
        s_ref[0] = pl.program_id(0)
        o_ref[...] = x_ref[...] * 2.0

    def f(x):  # x: f32[2, 8, 256]; each instance sees one f32[8, 256] slab
        return pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 256), x.dtype), grid=(2,),
            in_specs=[pl.BlockSpec((None, 8, 256), lambda i: (i, 0, 0))],
            out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
            scratch_shapes=[pltpu.SMEM((1,), J.numpy.int32)], interpret=False)(x)
    return f


def prefetch_kernel(J):
    pl, pltpu = _pl(J)

    def kernel(order_ref, x_ref, o_ref):  # block i of the output is block order[i] of x, doubled
        o_ref[...] = x_ref[...] * 2.0 + order_ref[pl.program_id(0)].astype(J.numpy.float32)

    def f(order, x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 256), x.dtype),
                              grid_spec=pltpu.PrefetchScalarGridSpec(
                                  num_scalar_prefetch=1, grid=(2,),
                                  in_specs=[pl.BlockSpec((None, 8, 256),
                                                         lambda i, order: (order[i], 0, 0))],
                                  out_specs=pl.BlockSpec((8, 256), lambda i, order: (i, 0))),
                              interpret=False)(order, x)
    return f


def vmapped_softmax_kernel(J):
    return J.vmap(softmax_kernel(J))


# The kernels of compare/pallas_kernels.py (chapter 16) at TPU-legal blocks. JAX cannot
# lower its rank-1 blocks without a TPU (it asks the chip for its tiling), so the kernels
# with rank-1 operands (vector add, the matmul's bias, layer norm's scales) are left out.
def chapter16(name, **kw):
    def make(J):
        pl, _ = _pl(J)
        plgpu = importlib.import_module(J.__name__ + ".experimental.pallas.triton")
        K = pallas_kernels.build(J, pl, plgpu, interpret=False)
        if name == "flash_attention_grad":
            loss = lambda q, k, v: J.numpy.sum(K.flash_attention(q, k, v, 128, 128, False))  # noqa: E731
            return J.grad(loss, argnums=(0, 1, 2))
        return functools.partial(getattr(K, name), **kw)
    return make


Q = np.random.default_rng(0).standard_normal((1, 256, 128)).astype(F32)

KERNELS = {
    "ch16_row_softmax": (chapter16("row_softmax"), [X16]),
    "ch16_flash_forward": (chapter16("flash_forward", bq=128, bk=128), [Q, Q, Q]),
    # grad through custom_vjp: the forward kernel, then the dK/dV and dQ kernels
    "ch16_flash_attention_grad": (chapter16("flash_attention_grad"), [Q, Q, Q]),
    "vmap_softmax": (vmapped_softmax_kernel, [np.stack([X16, X16 + 1])]),
    "copy": (copy_kernel, [X16]),
    "matmul": (matmul_kernel, [np.ones((256, 256), F32)] * 2),
    "matmul_transposed": (matmul_transposed_kernel, [np.ones((128, 256), F32)] * 2),
    "softmax": (softmax_kernel, [X16]),
    "fori_loop": (fori_kernel, [X16]),
    "elementwise": (elementwise_kernel, [X16]),
    "squeezed": (squeezed_kernel, [X16.reshape(2, 8, 256)]),
    "scalar_prefetch": (prefetch_kernel, [np.array([1, 0], np.int32), X16.reshape(2, 8, 256)]),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_mosaic_module_matches_jax(name):
    make, args = KERNELS[name]
    assert_same_kernels(make, args)


def test_a_wrong_index_map_is_caught():
    (jax_config,), _ = _lower_both(copy_kernel, [X16])
    bug = lambda J: copy_kernel(J, index_map=lambda i, j: (j, i))  # noqa: E731
    bug_text = minijax.jit(bug(minijax)).trace(X16).lower().as_text()
    assert normalise(custom_call_config(bug_text)) != normalise(jax_config)


def test_the_normaliser_keeps_used_constants():
    # the softmax kernel's transform functions return a constant 0: it must survive
    text = normalise(_lower_both(softmax_kernel, [X16])[1][0])
    assert text.count("= arith.constant 0 : i32") == 2


# ---------------------------------------------------------------------------------------------
# Errors, and the custom call in a jitted program
# ---------------------------------------------------------------------------------------------

def test_block_shape_breaking_the_tile_rule_gets_jax_error():
    def make(J):
        pl, _ = _pl(J)
        return lambda x: pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
            out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
            in_specs=[pl.BlockSpec((4, 256), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((4, 256), lambda i: (i, 0)), interpret=False)(x)
    words = "last two dimensions of your block shape are divisible by 8 and 128"
    with pytest.raises(ValueError, match=words):
        jax.jit(make(jax)).trace(X16).lower(lowering_platforms=("tpu",))
    with pytest.raises(ValueError, match=words):
        minijax.jit(make(minijax)).trace(X16).lower()


def test_unsupported_primitive_names_primitive_and_kernel():
    def make(J):
        pl, _ = _pl(J)

        def my_kernel(x_ref, o_ref):
            o_ref[...] = J.numpy.sort(x_ref[...], axis=0)
        return lambda x: pl.pallas_call(my_kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                                        interpret=False)(x)
    with pytest.raises(mosaic_lowering.LoweringException, match="'sort'.*|my_kernel.*sort"):
        minijax.jit(make(minijax)).trace(X16).lower()


def test_compiling_for_cpu_names_the_kernel():
    f = minijax.jit(copy_kernel(minijax))
    with pytest.raises(ValueError, match="pallas_call of kernel: .*TPU.*interpret=True"):
        f(X16)


def test_custom_call_composes_with_jit_vmap_and_aliases():
    pl, _ = _pl(minijax)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    call = pl.pallas_call(kernel, out_shape=minijax.ShapeDtypeStruct((8, 256), F32),
                          input_output_aliases={0: 0}, interpret=False)
    text = minijax.jit(lambda x: minijax.vmap(call)(x * 2.0)).trace(
        np.ones((3, 8, 256), F32)).lower().as_text()
    assert "stablehlo.multiply" in text and "@tpu_custom_call" in text
    assert "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], "\
        "operand_index = 0" in text
    config = normalise(custom_call_config(text))
    assert "iteration_bounds = array<i64: 3>" in config  # vmap: a parallel grid axis
    assert "dimension_semantics = [#tpu.dimension_semantics<parallel>]" in config
