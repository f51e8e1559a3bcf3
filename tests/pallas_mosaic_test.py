"""minijax's Pallas TPU lowering against JAX's, on a CPU: one kernel source, two Mosaic modules.

Each kernel of compare/_mosaic_kernels.py is written once against a module alias `J` (jax or
minijax). JAX lowers it for the TPU without one (`jit(f).trace(*args).lower(
lowering_platforms=("tpu",))`), minijax lowers it with `interpret=False`; both give StableHLO
with a `tpu_custom_call` whose `backend_config` carries the Mosaic module as base64 bytecode.
`compare._mosaic_kernels.normalise` decodes it (the `mosaic-serde` pass back from Mosaic's
stable form) and prints it without locations and without the one documented difference
(unused constants; see its docstring). Everything else must match: the same ops in the same
order, the same types and attributes (SSA names are the printer's, so equal modules print
equal names), and the same custom call config besides the body. A planted bug (a wrong
index map) must make the comparison fail. Taught in chapters/16-pallas.md.
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import minijax
from compare._mosaic_kernels import (
    F32,
    KERNELS,
    TPU_ONLY,
    X16,
    _pl,
    copy_kernel,
    custom_call_config,
    custom_call_configs,
    normalise,
    run_on_tpu,
    softmax_kernel,
)
from minijax.experimental.pallas.mosaic import lowering as mosaic_lowering

# ---------------------------------------------------------------------------------------------
# Decoding and normalising a tpu_custom_call
# ---------------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_mosaic_module_matches_jax(name):
    make, args = KERNELS[name]
    assert_same_kernels(make, args)


@pytest.mark.parametrize("name", sorted(TPU_ONLY))
def test_tpu_only_kernels_lower(name):
    # JAX needs the chip to lower these; minijax's lowering must at least build and verify
    make, args = TPU_ONLY[name]
    text = minijax.jit(make(minijax)).trace(*args).lower().as_text()
    assert all(normalise(c).startswith("module") for c in custom_call_configs(text))


@pytest.mark.parametrize("name", ["matmul", "lambda", "aliased"])
def test_custom_call_op_matches_jax(name):
    def call_line(text):
        (line,) = [x for x in text.splitlines() if "@tpu_custom_call" in x]
        return re.sub(r'backend_config = ".*?"', "", line)
    make, args = KERNELS[name]
    jax_text = jax.jit(make(jax)).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    assert call_line(minijax.jit(make(minijax)).trace(*args).lower().as_text()) == call_line(
        jax_text)


def test_a_wrong_index_map_is_caught():
    (jax_config,), _ = _lower_both(copy_kernel, [X16])
    bug = lambda J: copy_kernel(J, index_map=lambda i, j: (j, i))
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


def test_operand_left_in_any_memory_space_is_refused():
    pl, _ = _pl(minijax)

    def dma_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    f = pl.pallas_call(dma_kernel, out_shape=minijax.ShapeDtypeStruct((16, 256), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)], interpret=False)
    with pytest.raises(mosaic_lowering.LoweringException, match="dma_kernel.*args.0. .*DMA"):
        minijax.jit(f).trace(X16).lower()


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


def test_run_on_tpu_reports_bits_and_times():
    # the TPU check's plumbing, on a CPU: an interpret-mode kernel stands in for a compiled one
    def make(J):
        pl, _ = _pl(J)

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0
        return lambda x: pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                                        interpret=True)(x)
    (row,) = run_on_tpu(reps=2, kernels={"double": (make, [X16])})
    assert row["kernel"] == "double" and row["bits_equal"] is True
    assert row["impl"] == "minijax_pallas" and row["ref"] == "jax_pallas"
    assert row["ms"] > 0 and row["ref_ms"] > 0
