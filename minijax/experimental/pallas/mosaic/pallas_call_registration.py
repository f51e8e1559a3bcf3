"""`pallas_call` with `interpret=False`: the Mosaic module of the kernel (`lowering.py`),
serialised as Mosaic's bytecode and emitted in the jit's StableHLO as a `tpu_custom_call`
whose `backend_config` carries it. XLA on a TPU compiles that custom call (Mosaic then picks
layouts and builds the pipeline that copies blocks between HBM and VMEM); no other backend
can. Mirrors jax/_src/pallas/mosaic/pallas_call_registration.py and
jax/_src/tpu_custom_call.py. Taught in chapters/16-pallas.md.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re

import numpy as np

from minijax.experimental.pallas.mosaic import lowering
from minijax.experimental.pallas.pallas_call import _pallas_call_interpret_lowering, pallas_call_p
from minijax.interpreters import mlir

# JAX: jax/_src/tpu_custom_call.py _FWD_COMPAT_VERSION — differs: always this version (the
# one every libtpu of JAX 0.10's window reads; JAX picks a newer one on a newer libtpu)
MOSAIC_IR_VERSION = 11


def mosaic_ir_context():
    """An MLIR context with the upstream dialects and Mosaic's `tpu` dialect."""
    lowering._load()
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext  # the upstream dialects' registry
    registry = lowering.ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = lowering.ir.Context()
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    lowering.tpu.register_dialect(ctx)
    return ctx


# JAX: jax/_src/tpu_custom_call.py _lower_mosaic_module_to_asm
def lower_mosaic_module_to_asm(module) -> bytes:
    """The module as Mosaic reads it: its ops rewritten to Mosaic's stable (versioned) form by
    the `mosaic-serde` pass, then written as MLIR bytecode."""
    from jaxlib.mlir.passmanager import PassManager
    ctx = module.context
    with ctx, module.operation.location:
        op = module.operation.clone()
        ctx.allow_unregistered_dialects = True
        try:
            PassManager.parse("builtin.module(mosaic-serde{serialize=true "
                              f"target-version={MOSAIC_IR_VERSION}}})").run(op)
        finally:
            ctx.allow_unregistered_dialects = False
        buffer = io.BytesIO()
        op.write_bytecode(buffer, desired_version=0)
    return buffer.getvalue()


# JAX: jax/_src/tpu_custom_call.py CustomCallBackendConfig.to_json — differs: the fields a
# TensorCore kernel without communication uses
def backend_config(asm: bytes, vmem_limit_bytes: int | None = None,
                   allow_input_fusion=None, cost_estimate=None) -> str:
    config: dict = {"body": base64.b64encode(asm).decode("ascii")}
    if cost_estimate is not None:  # a pl.CostEstimate: its fields, as JAX writes them
        config["cost_estimate"] = dict(sorted(dataclasses.asdict(cost_estimate).items()))
    config.update(serialization_format=1, needs_layout_passes=True)
    if allow_input_fusion is not None:
        config["allow_input_fusion"] = [bool(b) for b in allow_input_fusion]
    out = {"custom_call_config": config}
    if vmem_limit_bytes is not None:
        out["scoped_memory_configs"] = [{"memory_space": 1, "offset": 0,
                                         "size": int(vmem_limit_bytes)}]
    return json.dumps(out)


def _layouts(avals):
    ir = mlir.ir
    return ir.ArrayAttr.get([
        ir.DenseIntElementsAttr.get(np.arange(a.ndim - 1, -1, -1, dtype=np.int64),
                                    type=ir.IndexType.get()) for a in avals])


# JAX: jax/_src/tpu_custom_call.py _tpu_custom_call_lowering
def tpu_custom_call(ctx, *args, config: str, kernel_name: str, input_output_aliases=(),
                    has_side_effects=False):
    """The `stablehlo.custom_call @tpu_custom_call` running one Mosaic kernel.
    `has_side_effects`: a bool or a `pltpu.SideEffectType` (by its value: "pure",
    "dataflow_side_effecting" (XLA may still drop it if unused), "side_effecting")."""
    effect = getattr(has_side_effects, "value", None) or (
        "side_effecting" if has_side_effects else "pure")
    ir, hlo = mlir.ir, mlir.hlo
    i32 = ir.IntegerType.get_signless(32)
    n_out = len(ctx.avals_out)
    op = hlo.CustomCallOp.build_generic(
        results=[mlir.aval_to_ir_type(a) for a in ctx.avals_out], operands=list(args),
        attributes=dict(
            call_target_name=ir.StringAttr.get("tpu_custom_call"),
            has_side_effect=ir.BoolAttr.get(effect != "pure"),
            backend_config=ir.StringAttr.get(config),
            api_version=ir.IntegerAttr.get(i32, 1),
            called_computations=ir.ArrayAttr.get([]),
            output_operand_aliases=ir.ArrayAttr.get([
                hlo.OutputOperandAlias.get(output_tuple_indices=[o] if n_out > 1 else [],
                                           operand_index=i, operand_tuple_indices=[])
                for i, o in input_output_aliases]),
            operand_layouts=_layouts(ctx.avals_in),
            result_layouts=_layouts(ctx.avals_out),
            kernel_name=ir.StringAttr.get(kernel_name)))
    # JAX's (empty) kernel metadata: what a profile shows beside the kernel's name
    attrs = {"kernel_metadata": ir.StringAttr.get("{}")}
    if effect == "dataflow_side_effecting":
        attrs["xla_allow_dce_side_effecting_op"] = ir.StringAttr.get("true")
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(attrs)
    return list(op.results)


# JAX: jax/_src/interpreters/mlir.py sanitize_name
def sanitize_name(name: str) -> str:
    """A kernel's name as an MLIR symbol: `<lambda>` becomes `_lambda_`."""
    return re.sub(r"[^\w.-]", "_", name)


def _dimension_semantics(compiler_params):
    return getattr(compiler_params, "dimension_semantics", None)


# JAX: jax/_src/pallas/mosaic/pallas_call_registration.py pallas_call_tpu_lowering_rule
def pallas_call_tpu_lowering_rule(ctx, *args, jaxpr, grid, in_block_mappings,
                                  out_block_mappings, scratch_avals, input_output_aliases,
                                  name, vmapped_dims, num_scalar_prefetch, interpret,
                                  compiler_params, cost_estimate):
    """The pallas_call as a Mosaic kernel in a `tpu_custom_call`. Raises
    NotImplementedError for block dimensions other than blocked or squeezed ones."""
    del interpret
    for bm in (*in_block_mappings, *out_block_mappings):
        if bm.block_dims is not None:
            raise NotImplementedError(
                f"pallas_call of {name}: the Mosaic lowering takes blocked and squeezed block "
                f"dimensions only, {bm.origin} has {bm.block_dims} (use interpret mode)")
    name = sanitize_name(name)
    with mosaic_ir_context() as mosaic_ctx, lowering.ir.Location.unknown(mosaic_ctx):
        module = lowering.lower_jaxpr_to_module(
            jaxpr, name=name, grid=grid, in_block_mappings=in_block_mappings,
            out_block_mappings=out_block_mappings, scratch_avals=scratch_avals,
            num_scalar_prefetch=num_scalar_prefetch, vmapped_dims=vmapped_dims,
            dimension_semantics=_dimension_semantics(compiler_params))
        asm = lower_mosaic_module_to_asm(module)
    config = backend_config(asm, getattr(compiler_params, "vmem_limit_bytes", None),
                            getattr(compiler_params, "allow_input_fusion", None), cost_estimate)
    return tpu_custom_call(ctx, *args, config=config, kernel_name=name,
                           input_output_aliases=input_output_aliases,
                           has_side_effects=getattr(compiler_params, "has_side_effects", False))


# JAX: jax/_src/pallas/pallas_call.py _pallas_call_lowering — differs: one platform. JAX
# lowers interpret mode, or else one rule per platform (the CPU's raises, the TPU's is
# `pallas_call_tpu_lowering_rule`). minijax lowers for one platform so far, so
# `interpret=False` always emits the TPU's custom call and compiling it elsewhere raises
# (minijax/compiler.py `_check_tpu_kernels`); once lowering is per platform (DESIGN.md, "The
# accelerator"), the second branch becomes a per-platform choice of that rule.
def _pallas_call_lowering(ctx, *args, **params):
    if params["interpret"]:
        return _pallas_call_interpret_lowering(ctx, *args, **params)
    return pallas_call_tpu_lowering_rule(ctx, *args, **params)


mlir.register_lowering(pallas_call_p, _pallas_call_lowering)
