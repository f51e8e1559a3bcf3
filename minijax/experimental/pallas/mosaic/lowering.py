"""A Pallas kernel jaxpr lowered to Mosaic, the TPU's kernel compiler, with jaxlib's MLIR bindings.

`lower_jaxpr_to_module` builds one MLIR module: a `func.func` named after the kernel whose
arguments are the grid indices (i32), the scalar-prefetch operands (SMEM memrefs), one memref
per block of each operand (VMEM: the block Mosaic's pipeline copies in and out), and the
scratch buffers; its attributes tell Mosaic the grid (`iteration_bounds`), the
`dimension_semantics` and, per operand, the block shape (`window_bounds`) and the index map
(`transform_indices`, one small `func.func` each, from the grid indices to block indices).
The body is the kernel jaxpr, one lowering rule per primitive (the table `lowering_rules`):
refs are memrefs, arrays are `vector`s, scalars are scalars (`arith`, `math`, `vector`,
`memref`, `scf` and `tpu` ops). This is minijax's third door to the backend, beside
`interpreters/mlir.py` and `compiler.py`: it imports `jaxlib.mlir` and `jaxlib.mosaic` only.
Mirrors jax/_src/pallas/mosaic/lowering.py. Taught in chapters/16-pallas.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, lax
from minijax.core import Literal, ShapedArray
from minijax.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from minijax.experimental.pallas.pallas_call import program_id_p
from minijax.experimental.pallas.primitives import multiple_of_p
from minijax.lax.control_flow.conditionals import cond_p
from minijax.lax.control_flow.loops import scan_p, while_p
from minijax.pjit import jit_p
from minijax.state.primitives import get_p, swap_p

# The MLIR modules, set by `_load()` (importing lax must not load MLIR).
ir: Any = None
func: Any = None
arith: Any = None
math: Any = None
vector: Any = None
memref: Any = None
scf: Any = None
tpu: Any = None


def _load() -> None:
    global ir, func, arith, math, vector, memref, scf, tpu
    if ir is None:
        from jaxlib.mlir import ir as _ir
        from jaxlib.mlir.dialects import (
            arith as _arith,
            func as _func,
            math as _math,
            memref as _memref,
            scf as _scf,
            vector as _vector,
        )
        from jaxlib.mosaic.python import tpu as _tpu
        ir, func, arith, math, vector, memref, scf, tpu = (
            _ir, _func, _arith, _math, _vector, _memref, _scf, _tpu)


# JAX: jax/_src/pallas/mosaic/lowering.py LoweringException
class LoweringException(Exception):
    """A kernel that Mosaic cannot compile: names the primitive (or block) and the kernel."""


# ---------------------------------------------------------------------------------------------
# Contexts and the rule table
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py LoweringContext — differs: the fields used here
class LoweringContext:
    """What every rule of one kernel (or index map) sees: its name, the grid, and the grid
    indices as MLIR values (None inside an index map, which has no program_id)."""

    def __init__(self, kernel_name: str, grid: tuple[int, ...], vmapped_dims: int,
                 user_grid_indices: Sequence[Any] | None) -> None:
        self.kernel_name, self.grid, self.vmapped_dims = kernel_name, grid, vmapped_dims
        self.user_grid_indices = user_grid_indices
        # the block shapes (None: squeezed) of the operand refs, by MLIR value: a squeezed
        # dimension is 1 in the memref and absent from the ref the kernel indexes
        self.block_shapes: dict[Any, tuple] = {}


# JAX: jax/_src/pallas/mosaic/lowering.py LoweringRuleContext
class LoweringRuleContext:
    """One equation's avals, and the kernel's context."""

    def __init__(self, lowering_context: LoweringContext, avals_in, avals_out) -> None:
        self.lowering_context = lowering_context
        self.avals_in, self.avals_out = list(avals_in), list(avals_out)


# JAX: jax/_src/pallas/mosaic/lowering.py lowering_rules — differs: one kernel type (the
# TensorCore), so one table
lowering_rules: dict[core.Primitive, Callable] = {}
# rules that take Literal operands as Python values and make their own constants
_raw_literal_rules: set[core.Primitive] = set()


# JAX: jax/_src/pallas/mosaic/lowering.py register_lowering_rule
def register_lowering_rule(primitive: core.Primitive, ensure_mlir_values: bool = True):
    def register(rule: Callable) -> Callable:
        lowering_rules[primitive] = rule
        if not ensure_mlir_values:
            _raw_literal_rules.add(primitive)
        return rule
    return register


# ---------------------------------------------------------------------------------------------
# Types and constants
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py _dtype_to_ir_type — differs: the dtypes kernels use
def _dtype_to_ir_type(dtype, is_kernel_boundary: bool = False):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        # Mosaic keeps booleans in mask registers; in memory they are int32
        return ir.IntegerType.get_signless(32 if is_kernel_boundary else 1)
    if dtype == np.float32:
        return ir.F32Type.get()
    if dtype.name == "bfloat16":
        return ir.BF16Type.get()
    if dtype == np.float16:
        return ir.F16Type.get()
    if np.issubdtype(dtype, np.integer):
        return ir.IntegerType.get_signless(dtype.itemsize * 8)
    raise NotImplementedError(f"Mosaic lowering: no TPU type for dtype {dtype}")


# JAX: jax/_src/pallas/mosaic/lowering.py aval_to_ir_type
def aval_to_ir_type(aval, shape=None, is_kernel_boundary: bool = False):
    shape = aval.shape if shape is None else shape
    if not shape:
        return _dtype_to_ir_type(aval.dtype, is_kernel_boundary)
    return ir.VectorType.get(shape, _dtype_to_ir_type(aval.dtype, is_kernel_boundary))


def _memref_type(shape, dtype, memory_space: str):
    return ir.MemRefType.get(shape, _dtype_to_ir_type(dtype, is_kernel_boundary=True),
                             memory_space=ir.Attribute.parse(
                                 f"#tpu.memory_space<{memory_space}>"))


# JAX: jax/_src/pallas/mosaic/lowering.py ir_constant
def ir_constant(x, mlir_type):
    if isinstance(mlir_type, (ir.IntegerType, ir.IndexType)):
        return arith.constant(mlir_type, int(x))
    return arith.constant(mlir_type, float(x))


def _ensure_mlir_value(val, aval):
    if isinstance(val, ir.Value):
        return val
    return ir_constant(val, _dtype_to_ir_type(aval.dtype))


def _splat(aval, value):
    """A vector constant of `aval`'s type holding `value` everywhere."""
    out_type = aval_to_ir_type(aval)
    elt = _dtype_to_ir_type(aval.dtype)
    attr = (ir.IntegerAttr.get(elt, int(value)) if isinstance(elt, ir.IntegerType)
            else ir.FloatAttr.get(elt, float(value)))
    return arith.constant(out_type, ir.DenseElementsAttr.get_splat(out_type, attr))


# ---------------------------------------------------------------------------------------------
# The kernel jaxpr, one equation at a time
# ---------------------------------------------------------------------------------------------

def _literal_value(atom):
    return np.asarray(atom.val).item()


# JAX: jax/_src/pallas/mosaic/lowering.py jaxpr_subcomp — differs: no lowering cache, no
# name-stack trace ops, no locations
def jaxpr_subcomp(ctx: LoweringContext, jaxpr: core.Jaxpr, *args) -> list:
    env: dict[core.Var, Any] = dict(zip(jaxpr.invars, args))

    def read(atom):
        return _literal_value(atom) if isinstance(atom, Literal) else env[atom]

    for eqn in jaxpr.eqns:
        rule = lowering_rules.get(eqn.primitive)
        if rule is None:
            raise LoweringException(
                f"Mosaic lowering of pallas_call {ctx.kernel_name}: no rule for the primitive "
                f"'{eqn.primitive.name}' (in `{eqn}`). See chapters/16-pallas.md")
        invals = [read(v) for v in eqn.invars]
        if eqn.primitive not in _raw_literal_rules:
            invals = [_ensure_mlir_value(x, v.aval) for x, v in zip(invals, eqn.invars)]
        rule_ctx = LoweringRuleContext(ctx, [v.aval for v in eqn.invars],
                                       [v.aval for v in eqn.outvars])
        try:
            ans = rule(rule_ctx, *invals, **eqn.params)
        except LoweringException:
            raise
        except (NotImplementedError, ValueError) as e:
            raise LoweringException(f"Mosaic lowering of pallas_call {ctx.kernel_name}, "
                                    f"primitive '{eqn.primitive.name}': {e}") from e
        outs = ans if eqn.primitive.multiple_results else [ans]
        env.update(zip(eqn.outvars, outs))
    return [ir_constant(_literal_value(v), _dtype_to_ir_type(v.aval.dtype))
            if isinstance(v, Literal) else env[v] for v in jaxpr.outvars]


# ---------------------------------------------------------------------------------------------
# The module: the kernel function and one transform function per operand's index map
# ---------------------------------------------------------------------------------------------

def _memory_space_name(space) -> str:
    """Mosaic's name for a memory space (`pltpu.VMEM`: "vmem"); the default is VMEM."""
    name = getattr(space, "value", None)
    return "vmem" if name in (None, "default") else name


# JAX: jax/_src/pallas/mosaic/lowering.py _check_block_mappings — its words
def _check_block_mappings(kernel_name: str, block_mappings) -> None:
    for bm in block_mappings:
        block = bm.block_sizes
        details = (f"Block spec for {bm.origin} in pallas_call {kernel_name} has block shape "
                   f"{bm.block_shape}, array shape {bm.array_aval.shape}, and index_map "
                   f"{bm.index_map_jaxpr.jaxpr}.")
        if len(block) < 1:
            raise ValueError("The Pallas TPU lowering currently supports only blocks of "
                             "rank >= 1. " + details)
        shape = bm.array_aval.shape
        if len(block) >= 2:
            ok = ((block[-1] == shape[-1] or block[-1] % 128 == 0)
                  and (block[-2] == shape[-2] or block[-2] % 8 == 0))
            if not ok:
                raise ValueError(
                    "The Pallas TPU lowering currently requires that the last two dimensions "
                    "of your block shape are divisible by 8 and 128 respectively, or be equal "
                    "to the respective dimensions of the overall array. " + details)
        else:
            bits = 32 if bm.array_aval.dtype == np.bool_ else bm.array_aval.dtype.itemsize * 8
            min_tiling = 128 * (32 // bits)
            if not (block[0] == shape[0] or block[0] % 1024 == 0
                    or (block[0] >= min_tiling and block[0] & (block[0] - 1) == 0)):
                raise ValueError(
                    "The Pallas TPU lowering currently requires that rank 1 block shapes, "
                    "either 1) the first (and only) dimension of the block shape is equal to "
                    "the first (and only) dimension of the array shape, or 2) the first (and "
                    "only) dimension of the block shape is a multiple of 1024, or 3) the first "
                    "(and only) dimension of the block shape is a power of 2 and at least the "
                    f"tiling size ({min_tiling} = 128 * (32 // {bits})) of the array shape. "
                    + details)


# JAX: jax/_src/pallas/core.py BlockMapping.has_trivial_window
def _has_trivial_window(bm) -> bool:
    """The block is the whole array and the index map returns literal zeros."""
    return (bm.block_sizes == tuple(bm.array_aval.shape) and all(
        isinstance(v, Literal) and v.val == 0 for v in bm.index_map_jaxpr.jaxpr.outvars))


def _build_func(name: str, arg_types, body: Callable):
    """A `func.func @name` whose body `body(*block_args)` emits ops and returns the results."""
    func_op = func.FuncOp(name, (arg_types, []))
    entry = func_op.add_entry_block()
    with ir.InsertionPoint(entry):
        outs = body(*entry.arguments)
        func.ReturnOp(outs)
    func_op.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(arg_types, [o.type for o in outs]))
    return func_op


# JAX: jax/_src/pallas/mosaic/lowering.py lower_jaxpr_to_transform_func
def lower_jaxpr_to_transform_func(ctx: LoweringContext, index_map: core.ClosedJaxpr,
                                  name: str, grid_types, prefetch_types):
    def body(*args):
        return jaxpr_subcomp(ctx, index_map.jaxpr, *args)
    return _build_func(name, [*grid_types, *prefetch_types], body)


# JAX: jax/_src/pallas/mosaic/lowering.py lower_jaxpr_to_pipelined_module — differs: no
# dynamic grids, meshes or extended dtypes
def lower_jaxpr_to_module(jaxpr: core.ClosedJaxpr, *, name: str, grid: tuple[int, ...],
                          in_block_mappings, out_block_mappings, scratch_avals,
                          num_scalar_prefetch: int, vmapped_dims: int,
                          dimension_semantics: Sequence[str] | None):
    """The Mosaic module of one pallas_call (built in the current `ir.Context`)."""
    _load()
    if jaxpr.consts:
        raise LoweringException(f"Mosaic lowering of pallas_call {name}: the kernel closes over "
                                "array constants; pass them as inputs")
    prefetch_bms = in_block_mappings[:num_scalar_prefetch]
    block_bms = [*in_block_mappings[num_scalar_prefetch:], *out_block_mappings]
    for bm in block_bms:
        if _memory_space_name(bm.memory_space) not in ("vmem", "smem"):
            raise LoweringException(
                f"Mosaic lowering of pallas_call {name}: {bm.origin} is left in memory space "
                f"{bm.memory_space} for manual DMAs (pltpu.async_copy), which minijax's Mosaic "
                "lowering does not have; use a VMEM BlockSpec. See chapters/16-pallas.md")
    _check_block_mappings(name, [bm for bm in block_bms
                                 if _memory_space_name(bm.memory_space) != "smem"])
    n_user = len(grid) - vmapped_dims
    semantics = ("arbitrary",) * n_user if dimension_semantics is None else dimension_semantics
    if len(semantics) != n_user:
        raise ValueError(f"pallas_call {name}: length of grid does not match length of "
                         f"dimension semantics. len(grid)={n_user}, "
                         f"len(dimension_semantics)={len(semantics)}")
    semantics = ("parallel",) * vmapped_dims + tuple(semantics)
    i32 = ir.IntegerType.get_signless(32)
    grid_types = [i32] * len(grid)
    prefetch_types = [_memref_type(bm.array_aval.shape, bm.array_aval.dtype, "smem")
                      for bm in prefetch_bms]
    block_types = [_memref_type(bm.block_sizes, bm.array_aval.dtype,
                                _memory_space_name(bm.memory_space)) for bm in block_bms]
    scratch_types = [_memref_type(a.shape, a.dtype, _memory_space_name(a.memory_space))
                     for a in scratch_avals]
    module = ir.Module.create()

    def kernel_body(*args):
        ids, refs = args[:len(grid)], args[len(grid):]
        ctx = LoweringContext(name, grid, vmapped_dims, ids[vmapped_dims:])
        ctx.block_shapes.update(zip(refs[num_scalar_prefetch:],
                                    (bm.block_shape for bm in block_bms)))
        return jaxpr_subcomp(ctx, jaxpr.jaxpr, *refs)

    with ir.InsertionPoint(module.body):
        kernel = _build_func(name, [*grid_types, *prefetch_types, *block_types,
                                    *scratch_types], kernel_body)
        kernel.attributes["tpu.core_type"] = ir.Attribute.parse("#tpu.core_type<tc>")
        if grid:
            window_params = []
            for i, bm in enumerate(block_bms):
                ctx = LoweringContext(name, grid, vmapped_dims, None)
                lower_jaxpr_to_transform_func(ctx, bm.index_map_jaxpr, f"transform_{i}",
                                              grid_types, prefetch_types)
                params = {"transform_indices": ir.FlatSymbolRefAttr.get(f"transform_{i}"),
                          "window_bounds": ir.DenseI64ArrayAttr.get(bm.block_sizes)}
                if _memory_space_name(bm.memory_space) == "vmem" and _has_trivial_window(bm):
                    # the same whole array at every step: one buffer, copied in once
                    params["pipeline_mode"] = ir.Attribute.parse(
                        "#tpu.pipeline_mode<synchronous>")
                window_params.append(ir.DictAttr.get(params))
            kernel.attributes["window_params"] = ir.ArrayAttr.get(window_params)
            kernel.attributes["iteration_bounds"] = ir.DenseI64ArrayAttr.get(grid)
    i64 = ir.IntegerType.get_signless(64)
    kernel.attributes["scalar_prefetch"] = ir.IntegerAttr.get(i64, num_scalar_prefetch)
    kernel.attributes["scratch_operands"] = ir.IntegerAttr.get(i64, len(scratch_avals))
    kernel.attributes["dimension_semantics"] = ir.ArrayAttr.get([
        ir.Attribute.parse(f"#tpu.dimension_semantics<{s}>") for s in semantics])
    module.operation.verify()
    return module


# ---------------------------------------------------------------------------------------------
# Refs: get and swap (vector.load / tpu.vector_store on VMEM, memref.load / store on SMEM)
# ---------------------------------------------------------------------------------------------

def _make_index(s):
    index = ir.IndexType.get()
    if not isinstance(s, ir.Value):
        return ir_constant(s, index)
    return s if s.type == index else arith.index_cast(index, s)


# JAX: jax/_src/pallas/mosaic/lowering.py _indexer_to_start_size_stride — differs: the
# indexer is minijax's (("slice", size) | ("index",) per dimension, starts apart)
def _indexer_to_starts_sizes(ctx: LoweringRuleContext, ref, starts, indexer):
    block_shape = ctx.lowering_context.block_shapes.get(ref) or (1,) * len(indexer)
    it = iter(zip(starts, indexer))
    out_starts, sizes = [], []
    for b in block_shape:
        if b is None:  # squeezed: not in the kernel's ref
            out_starts.append(_make_index(0))
            sizes.append(1)
            continue
        start, spec = next(it)
        if len(spec) > 2:  # JAX lowers strides to tpu.strided_load/store: not here yet
            raise NotImplementedError("pl.ds(..., stride=) in a Mosaic kernel: minijax's "
                                      "lowering has no strided load or store (interpret "
                                      "mode has them)")
        out_starts.append(_make_index(start))
        sizes.append(spec[1] if spec[0] == "slice" else 1)
    return out_starts, sizes


def _memory_space(ref) -> str:
    return str(ir.MemRefType(ref.type).memory_space)


def _any_hint(ref) -> str:
    if _memory_space(ref) == "#tpu.memory_space<any>":
        return " ANY memory space can only be accessed using async_copy."
    return ""


def _maybe_cast_load_to_bool(aval, val):
    if aval.dtype != np.bool_:
        return val
    zero = (_splat(aval.update(dtype=np.int32), 0) if aval.shape
            else ir_constant(0, ir.IntegerType.get_signless(32)))
    return arith.cmpi(arith.CmpIPredicate.ne, val, zero)


# JAX: jax/_src/pallas/mosaic/lowering.py _get_lowering_rule (via _load_lowering_rule)
# JAX: jax/_src/pallas/mosaic/lowering.py _multiple_of_lowering_rule
@register_lowering_rule(multiple_of_p)
def _multiple_of_lowering_rule(ctx: LoweringRuleContext, val, *, values):
    for m in values:
        val = tpu.assume_multiple(val, m)
    return val


@register_lowering_rule(get_p, ensure_mlir_values=False)
def _get_lowering_rule(ctx: LoweringRuleContext, ref, *starts, indexer):
    (aval_out,) = ctx.avals_out
    starts, sizes = _indexer_to_starts_sizes(ctx, ref, starts, indexer)
    if _memory_space(ref) == "#tpu.memory_space<smem>":
        if aval_out.shape:
            raise ValueError("Can only load scalars from SMEM")
        return _maybe_cast_load_to_bool(aval_out, memref.load(ref, starts))
    if _memory_space(ref) != "#tpu.memory_space<vmem>":
        raise ValueError("Loads are only allowed on VMEM and SMEM references." + _any_hint(ref))
    load_aval = ShapedArray(tuple(sizes), aval_out.dtype)
    val = vector.load(aval_to_ir_type(load_aval, is_kernel_boundary=True), ref, starts)
    if load_aval.shape != aval_out.shape:
        if aval_out.shape:
            val = vector.shape_cast(aval_to_ir_type(aval_out, is_kernel_boundary=True), val)
        else:
            val = vector.extract(val, [], [0] * len(sizes))
    return _maybe_cast_load_to_bool(aval_out, val)


# JAX: jax/_src/pallas/mosaic/lowering.py _swap_lowering_rule (via _masked_swap_lowering_rule)
# — differs: no masks
@register_lowering_rule(swap_p, ensure_mlir_values=False)
def _swap_lowering_rule(ctx: LoweringRuleContext, ref, val, *starts, indexer):
    val_aval = ctx.avals_in[1]
    (aval_out,) = ctx.avals_out
    if not isinstance(val, ir.Value):
        val = ir_constant(val, _dtype_to_ir_type(val_aval.dtype))
    starts, sizes = _indexer_to_starts_sizes(ctx, ref, starts, indexer)
    if _memory_space(ref) == "#tpu.memory_space<smem>":
        if val_aval.shape:
            raise ValueError("Can only store scalars to SMEM")
        old = _maybe_cast_load_to_bool(val_aval, memref.load(ref, starts))
        if val_aval.dtype == np.bool_:
            val = arith.extui(_dtype_to_ir_type(np.bool_, True), val)
        memref.store(val, ref, starts)
        return old
    if _memory_space(ref) != "#tpu.memory_space<vmem>":
        raise ValueError("Loads and stores are only allowed on VMEM and SMEM references."
                         + _any_hint(ref))
    if not val_aval.shape:
        raise ValueError("Cannot store scalars to VMEM")
    mem_aval = ShapedArray(tuple(sizes), aval_out.dtype)
    old = vector.load(aval_to_ir_type(mem_aval, is_kernel_boundary=True), ref, starts)
    if val_aval.dtype == np.bool_:
        val = arith.extui(aval_to_ir_type(val_aval, is_kernel_boundary=True), val)
    if mem_aval.shape != aval_out.shape:
        old = vector.shape_cast(aval_to_ir_type(aval_out, is_kernel_boundary=True), old)
        val = vector.shape_cast(aval_to_ir_type(mem_aval, is_kernel_boundary=True), val)
    old = _maybe_cast_load_to_bool(val_aval, old)
    tpu.vector_store(val, ref, starts, strides=[])
    return old


# ---------------------------------------------------------------------------------------------
# The grid
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py _program_id_lowering_rule
@register_lowering_rule(program_id_p)
def _program_id_lowering_rule(ctx: LoweringRuleContext, *, axis):
    ids = ctx.lowering_context.user_grid_indices
    if ids is None:
        raise ValueError("program_id can only be used in the kernel, not in an index map")
    return ids[axis]


# ---------------------------------------------------------------------------------------------
# Elementwise: arith and math ops on vectors (scalar operands broadcast)
# ---------------------------------------------------------------------------------------------

def _is(dtype, kind) -> bool:
    return np.issubdtype(np.dtype(dtype), kind)


def _is_float(dtype) -> bool:
    return _is(dtype, np.floating) or np.dtype(dtype).name == "bfloat16"


# JAX: jax/_src/pallas/mosaic/lowering.py _bcast
def _bcast(x, y, x_aval, y_aval, out_aval):
    x_dtype, y_dtype = x_aval.dtype, y_aval.dtype
    if y_aval.weak_type:
        y_dtype = x_aval.dtype
    elif x_aval.weak_type:
        x_dtype = y_aval.dtype
    if not isinstance(x, ir.Value):
        x = ir_constant(x, _dtype_to_ir_type(x_dtype))
    if not isinstance(y, ir.Value):
        y = ir_constant(y, _dtype_to_ir_type(y_dtype))
    if x_aval.shape != out_aval.shape:
        x = vector.broadcast(ir.VectorType.get(out_aval.shape, _dtype_to_ir_type(x_dtype)), x)
    if y_aval.shape != out_aval.shape:
        y = vector.broadcast(ir.VectorType.get(out_aval.shape, _dtype_to_ir_type(y_dtype)), y)
    return x, y


def _binary_rule(float_op: str | None, signed_op: str, unsigned_op: str | None = None):
    """A rule for a binary primitive: broadcast, then the `arith` op for the output's dtype."""
    def rule(ctx: LoweringRuleContext, x, y, **params):
        x, y = _bcast(x, y, *ctx.avals_in, ctx.avals_out[0])
        dtype = ctx.avals_out[0].dtype
        if _is_float(dtype) and float_op is not None:
            return getattr(arith, float_op)(x, y)
        if _is(dtype, np.unsignedinteger) and unsigned_op is not None:
            return getattr(arith, unsigned_op)(x, y)
        if _is(dtype, np.integer) or dtype == np.bool_:
            return getattr(arith, signed_op)(x, y)
        raise NotImplementedError(f"no TPU op for dtype {dtype}")
    return rule


# JAX: jax/_src/pallas/mosaic/lowering.py _add_lowering_rule (and sub, mul, div, max, min...)
for _prim, _ops in [(lax.add_p, ("addf", "addi")), (lax.sub_p, ("subf", "subi")),
                    (lax.mul_p, ("mulf", "muli")), (lax.div_p, ("divf", "divsi", "divui")),
                    (lax.max_p, ("maximumf", "maxsi", "maxui")),
                    (lax.min_p, ("minimumf", "minsi", "minui")),
                    (lax.rem_p, ("remf", "remsi", "remui")),
                    (lax.and_p, (None, "andi")), (lax.or_p, (None, "ori"))]:
    register_lowering_rule(_prim, ensure_mlir_values=False)(_binary_rule(*_ops))


def _unary_math_rule(name: str):
    # JAX: jax/_src/pallas/mosaic/lowering.py _exp_lowering_rule (and log, tanh, rsqrt, ...)
    def rule(ctx: LoweringRuleContext, x, accuracy=None, **params):
        if accuracy is not None:
            raise NotImplementedError("Not implemented: accuracy")
        return getattr(math, name)(x)
    return rule


for _prim, _name in [(lax.exp_p, "exp"), (lax.log_p, "log"), (lax.tanh_p, "tanh"),
                     (lax.rsqrt_p, "rsqrt"), (lax.sqrt_p, "sqrt"), (lax.log1p_p, "log1p"),
                     (lax.sin_p, "sin"), (lax.cos_p, "cos"), (lax.floor_p, "floor"),
                     (lax.ceil_p, "ceil"), (lax.erf_p, "erf"), (lax.exp2_p, "exp2")]:
    register_lowering_rule(_prim)(_unary_math_rule(_name))


# JAX: jax/_src/pallas/mosaic/lowering.py _cmp_lowering_rule — differs: booleans compare by
# eq and ne only
def _cmp_rule(name: str):
    def rule(ctx: LoweringRuleContext, x, y, **params):
        x, y = _bcast(x, y, *ctx.avals_in, ctx.avals_out[0])
        dtype = ctx.avals_in[0].dtype
        if _is_float(dtype):
            pred = {"eq": "OEQ", "ne": "ONE", "lt": "OLT", "le": "OLE", "gt": "OGT",
                    "ge": "OGE"}[name]
            return arith.cmpf(getattr(arith.CmpFPredicate, pred), x, y)
        if dtype == np.bool_ and name in ("eq", "ne"):  # JAX: _cmp_boolean_lowering_helper
            differ = arith.xori(x, y)
            return differ if name == "ne" else _not_lowering_rule(
                LoweringRuleContext(ctx.lowering_context, ctx.avals_out, ctx.avals_out), differ)
        if _is(dtype, np.integer):
            u = "u" if _is(dtype, np.unsignedinteger) else "s"
            pred = name if name in ("eq", "ne") else u + name
            return arith.cmpi(getattr(arith.CmpIPredicate, pred), x, y)
        raise NotImplementedError(f"Unsupported dtype in cmp: {dtype}")
    return rule


for _prim in [lax.eq_p, lax.ne_p, lax.lt_p, lax.le_p, lax.gt_p, lax.ge_p]:
    register_lowering_rule(_prim)(_cmp_rule(_prim.name))


# JAX: jax/_src/pallas/mosaic/lowering.py _clamp_lowering_rule: min(max(x, lo), hi)
@register_lowering_rule(lax.clamp_p)
def _clamp_lowering_rule(ctx: LoweringRuleContext, lo, x, hi):
    lo_aval, x_aval, hi_aval = ctx.avals_in
    (out,) = ctx.avals_out
    ctx_of = lambda *avals: LoweringRuleContext(ctx.lowering_context, avals, [out])
    x = lowering_rules[lax.max_p](ctx_of(x_aval, lo_aval), x, lo)
    return lowering_rules[lax.min_p](ctx_of(out, hi_aval), x, hi)


# JAX: jax/_src/pallas/mosaic/lowering.py _neg_lowering_rule
@register_lowering_rule(lax.neg_p, ensure_mlir_values=False)
def _neg_lowering_rule(ctx: LoweringRuleContext, x):
    (x_aval,) = ctx.avals_in
    zero_ctx = LoweringRuleContext(ctx.lowering_context,
                                   [ShapedArray((), x_aval.dtype), x_aval], ctx.avals_out)
    return lowering_rules[lax.sub_p](zero_ctx, 0, x)


# JAX: jax/_src/pallas/mosaic/lowering.py _sign_lowering_rule — differs: signed integers
# only, `(x > 0) - (x < 0)` (JAX's float path asks the chip for its generation)
@register_lowering_rule(lax.sign_p)
def _sign_lowering_rule(ctx: LoweringRuleContext, x):
    (aval,) = ctx.avals_in
    if not _is(aval.dtype, np.signedinteger):
        raise NotImplementedError(f"sign of {aval.dtype} (signed integers only)")
    out_type = aval_to_ir_type(aval)

    def compare_with_zero(pred):
        zero = ir_constant(0, _dtype_to_ir_type(aval.dtype))
        if aval.shape:
            zero = vector.broadcast(out_type, zero)
        return arith.extui(out_type, arith.cmpi(pred, x, zero))
    return arith.subi(compare_with_zero(arith.CmpIPredicate.sgt),
                      compare_with_zero(arith.CmpIPredicate.slt))


# JAX: jax/_src/pallas/mosaic/lowering.py _abs_lowering_rule
@register_lowering_rule(lax.abs_p)
def _abs_lowering_rule(ctx: LoweringRuleContext, x):
    return math.absf(x) if _is_float(ctx.avals_out[0].dtype) else math.absi(x)


# JAX: jax/_src/pallas/mosaic/lowering.py _square_lowering_rule
@register_lowering_rule(lax.square_p)
def _square_lowering_rule(ctx: LoweringRuleContext, x):
    return arith.mulf(x, x) if _is_float(ctx.avals_in[0].dtype) else arith.muli(x, x)


# JAX: jax/_src/pallas/mosaic/lowering.py _integer_pow_lowering_rule — differs: the
# square-and-multiply of lax._integer_pow written out, positive powers only
@register_lowering_rule(lax.integer_pow_p)
def _integer_pow_lowering_rule(ctx: LoweringRuleContext, x, *, y):
    if y < 1:
        raise NotImplementedError(f"integer_pow with y={y}")
    mul = arith.mulf if _is_float(ctx.avals_in[0].dtype) else arith.muli
    acc = None
    while y > 0:
        if y & 1:
            acc = x if acc is None else mul(acc, x)
        y >>= 1
        if y > 0:
            x = mul(x, x)
    return acc


# JAX: jax/_src/pallas/mosaic/lowering.py _logistic_lowering_rule
@register_lowering_rule(lax.logistic_p)
def _logistic_lowering_rule(ctx: LoweringRuleContext, x, accuracy=None):
    exp_neg_x = math.exp(arith.negf(x))
    (aval_out,) = ctx.avals_out
    one = ir_constant(1.0, _dtype_to_ir_type(aval_out.dtype))
    if aval_out.shape:
        one = vector.broadcast(aval_to_ir_type(aval_out), one)
    return arith.divf(one, arith.addf(one, exp_neg_x))


# JAX: jax/_src/pallas/mosaic/lowering.py _not_lowering_rule
@register_lowering_rule(lax.not_p)
def _not_lowering_rule(ctx: LoweringRuleContext, x):
    (aval_out,) = ctx.avals_out
    minus_one = (_splat(aval_out, -1) if aval_out.shape
                 else ir_constant(-1, _dtype_to_ir_type(aval_out.dtype)))
    return arith.xori(x, minus_one)


# JAX: jax/_src/pallas/mosaic/lowering.py _select_n_lowering_rule — differs: a boolean
# predicate only
@register_lowering_rule(lax.select_n_p)
def _select_n_lowering_rule(ctx: LoweringRuleContext, pred, x, *args):
    if len(args) > 1:
        raise NotImplementedError("select_n only supported with <= 2 arguments")
    if ctx.avals_in[0].dtype != np.bool_:
        raise NotImplementedError("select_n with an integer predicate")
    return arith.select(pred, args[0], x) if args else x


# JAX: jax/_src/pallas/mosaic/lowering.py _convert_element_type_lowering_rule — differs:
# the casts between bool, 32-bit and 16-bit types
@register_lowering_rule(lax.convert_element_type_p)
def _convert_element_type_lowering_rule(ctx: LoweringRuleContext, x, *, new_dtype, **params):
    old, new = np.dtype(ctx.avals_in[0].dtype), np.dtype(new_dtype)
    out_type = aval_to_ir_type(ctx.avals_out[0])
    if old == new:
        return x
    if _is_float(old) and _is_float(new):
        return (arith.extf if old.itemsize < new.itemsize else arith.truncf)(out_type, x)
    if old == np.bool_ and _is(new, np.integer):
        return arith.extui(out_type, x)
    if _is(old, np.integer) and _is(new, np.integer):
        if old.itemsize < new.itemsize:
            return (arith.extui if _is(old, np.unsignedinteger) else arith.extsi)(out_type, x)
        return arith.trunci(out_type, x) if old.itemsize > new.itemsize else x
    if _is_float(old) and _is(new, np.signedinteger):
        return arith.fptosi(out_type, x)
    if _is(old, np.signedinteger) and _is_float(new):
        return arith.sitofp(out_type, x)
    raise NotImplementedError(f"Unsupported cast: {old} -> {new}")


# ---------------------------------------------------------------------------------------------
# Shapes: broadcast_in_dim, reshape, squeeze, iota, transpose
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py _broadcast_in_dim_lowering_rule
@register_lowering_rule(lax.broadcast_in_dim_p)
def _broadcast_in_dim_lowering_rule(ctx: LoweringRuleContext, val, *, shape,
                                    broadcast_dimensions, **params):
    (aval_in,), (aval_out,) = ctx.avals_in, ctx.avals_out
    if aval_in.shape == tuple(shape):
        return val
    if broadcast_dimensions:
        out_shape = [1] * len(shape)
        for i, s in zip(broadcast_dimensions, aval_in.shape):
            out_shape[i] = s
        val = vector.shape_cast(aval_to_ir_type(aval_out, shape=out_shape), val)
        if tuple(out_shape) == aval_out.shape:
            return val
    return vector.broadcast(aval_to_ir_type(aval_out), val)


# JAX: jax/_src/pallas/mosaic/lowering.py _reshape_lowering_rule
@register_lowering_rule(lax.reshape_p)
def _reshape_lowering_rule(ctx: LoweringRuleContext, x, *, new_sizes, dimensions=None,
                           **params):
    if dimensions is not None:
        raise NotImplementedError("reshape with dimensions")
    (aval_in,), (aval_out,) = ctx.avals_in, ctx.avals_out
    if not aval_in.shape:
        return vector.broadcast(aval_to_ir_type(aval_out), x)
    if not aval_out.shape:
        return vector.extract(x, [], [0] * len(aval_in.shape))
    return vector.shape_cast(aval_to_ir_type(aval_out), x)


# JAX: jax/_src/pallas/mosaic/lowering.py _squeeze_lowering_rule
@register_lowering_rule(lax.squeeze_p)
def _squeeze_lowering_rule(ctx: LoweringRuleContext, x, *, dimensions):
    (aval_in,), (aval_out,) = ctx.avals_in, ctx.avals_out
    if not aval_out.shape:
        return vector.extract(x, [], [0] * len(aval_in.shape))
    return vector.shape_cast(aval_to_ir_type(aval_out), x)


# JAX: jax/_src/pallas/mosaic/lowering.py _slice_lowering_rule
@register_lowering_rule(lax.slice_p)
def _slice_lowering_rule(ctx: LoweringRuleContext, x, *, start_indices, limit_indices,
                         strides=None):
    sizes = [hi - lo for lo, hi in zip(start_indices, limit_indices)]
    return vector.extract_strided_slice(aval_to_ir_type(ctx.avals_out[0]), x,
                                        list(start_indices), sizes,
                                        list(strides or [1] * len(sizes)))


# JAX: jax/_src/pallas/mosaic/lowering.py _iota_lowering_rule — differs: 2-D and up only
@register_lowering_rule(lax.iota_p)
def _iota_lowering_rule(ctx: LoweringRuleContext, *, dtype, shape, dimension, **params):
    if len(shape) < 2:
        raise NotImplementedError("a 1-D iota (use a 2-D broadcasted_iota)")
    return tpu.iota(aval_to_ir_type(ctx.avals_out[0]), dimensions=[dimension])


# JAX: jax/_src/pallas/mosaic/lowering.py _transpose_lowering_rule
@register_lowering_rule(lax.transpose_p)
def _transpose_lowering_rule(ctx: LoweringRuleContext, x, *, permutation):
    return tpu.transpose(aval_to_ir_type(ctx.avals_out[0]), x, permutation)


# JAX: jax/_src/pallas/mosaic/lowering.py _tile_lowering_rule
@register_lowering_rule(lax.tile_p)
def _tile_lowering_rule(ctx: LoweringRuleContext, x, *, reps):
    # copies side by side: no relayout through a higher-rank shape, and nothing where r is 1
    for axis, r in enumerate(reps):
        if r > 1:
            x = tpu.concatenate([x] * r, dimension=axis)
    return x


# ---------------------------------------------------------------------------------------------
# Reductions and matmul
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py reduce_lowering_rule
def _reduce_rule(float_kind: str, int_kind: str, float_identity, int_identity):
    def rule(ctx: LoweringRuleContext, x, *, axes, **params):
        (x_aval,), (aval_out,) = ctx.avals_in, ctx.avals_out
        if _is_float(x_aval.dtype):
            kind, identity = float_kind, float_identity
        elif x_aval.dtype == np.int32:
            kind, identity = int_kind, int_identity
        else:
            raise NotImplementedError(f"Reductions over {x_aval.dtype} not implemented.")
        kind = ir.Attribute.parse(f"#vector.kind<{kind}>")
        if aval_out.shape:
            return vector.multi_reduction(kind, x, _splat(aval_out, identity), list(axes))
        # to a scalar: as JAX, over a leading unit dimension kept to the end, then extracted
        # (Mosaic has no vector of rank 0)
        ones = (1,) * (x_aval.ndim + 1)
        x = vector.shape_cast(aval_to_ir_type(x_aval, shape=(1, *x_aval.shape)), x)
        acc = _splat(aval_out.update(shape=(1,)), identity)
        red = vector.multi_reduction(kind, x, acc, [a + 1 for a in axes])
        red = vector.shape_cast(aval_to_ir_type(aval_out, shape=ones), red)
        return vector.extract(red, [], [0] * len(ones))
    return rule


register_lowering_rule(lax.reduce_sum_p)(_reduce_rule("add", "add", 0.0, 0))
register_lowering_rule(lax.reduce_max_p)(
    _reduce_rule("maximumf", "maxsi", float("-inf"), np.iinfo(np.int32).min))
register_lowering_rule(lax.reduce_min_p)(
    _reduce_rule("minimumf", "minsi", float("inf"), np.iinfo(np.int32).max))


# JAX: jax/_src/pallas/mosaic/lowering.py jax_dot_dims_to_tpu_dot_dot_dims
def _tpu_dot_dimension_numbers(dimension_numbers, lhs_ndim: int, rhs_ndim: int):
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_free = sorted(set(range(lhs_ndim)) - set(lhs_contract) - set(lhs_batch))
    rhs_free = sorted(set(range(rhs_ndim)) - set(rhs_contract) - set(rhs_batch))
    # the output's dimensions, each as (operand, dimension): batch, lhs free, rhs free
    order = [*[(0, d) for d in lhs_batch], *[(0, d) for d in lhs_free],
             *[(1, d) for d in rhs_free]]
    parts = [lhs_contract, rhs_contract, lhs_free, rhs_free,
             [x for pair in order for x in pair], lhs_batch, rhs_batch]
    text = ",".join("[" + ", ".join(map(str, p)) + "]" for p in parts)
    return ir.Attribute.parse(f"#tpu.dot_dimension_numbers<{text}>")


# JAX: jax/_src/pallas/mosaic/lowering.py _dot_general_lowering_rule — differs: no
# matrix-vector special case, default precision or HIGHEST only
@register_lowering_rule(lax.dot_general_p)
def _dot_general_lowering_rule(ctx: LoweringRuleContext, x, y, *, dimension_numbers,
                               precision=None, preferred_element_type=None, **params):
    lhs_aval, rhs_aval = ctx.avals_in
    (aval_out,) = ctx.avals_out
    precision_attr = None
    if isinstance(precision, tuple):
        precision = precision[0]
    if precision is not None and str(precision).upper().endswith("HIGHEST"):
        precision_attr = ir.Attribute.parse("#tpu.contract_precision<fp32>")
    elif precision is not None and not str(precision).upper().endswith("DEFAULT"):
        raise NotImplementedError(f"Unsupported dot precision: {precision}")
    acc = _splat(aval_out, 0)
    return tpu.matmul(aval_to_ir_type(aval_out), x, y, acc, False,
                      dimension_numbers=_tpu_dot_dimension_numbers(
                          dimension_numbers, lhs_aval.ndim, rhs_aval.ndim),
                      precision=precision_attr)


# ---------------------------------------------------------------------------------------------
# Control flow: jit (inlined), cond (scf.if), fori_loop-shaped scan (scf.for)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/mosaic/lowering.py _pjit_lowering_rule
@register_lowering_rule(jit_p)
def _jit_lowering_rule(ctx: LoweringRuleContext, *args, jaxpr, **params):
    return jaxpr_subcomp(ctx.lowering_context, jaxpr.jaxpr, *args)


# JAX: jax/_src/pallas/mosaic/lowering.py _custom_jvp_call_lowering_rule (and
# _custom_vjp_call_lowering_rule): inside a kernel only the primal computation runs
@register_lowering_rule(custom_jvp_call_p)
@register_lowering_rule(custom_vjp_call_p)
def _custom_call_lowering_rule(ctx: LoweringRuleContext, *args, call_jaxpr, **params):
    return jaxpr_subcomp(ctx.lowering_context, call_jaxpr.jaxpr, *args)


# JAX: jax/_src/pallas/mosaic/lowering.py _stop_gradient_lowering_rule
@register_lowering_rule(lax.stop_gradient_p)
def _stop_gradient_lowering_rule(ctx: LoweringRuleContext, x):
    return x


# JAX: jax/_src/pallas/mosaic/lowering.py _cond_lowering_rule — differs: no constant folding
# of the index
@register_lowering_rule(cond_p)
def _cond_lowering_rule(ctx: LoweringRuleContext, index, *args, branches):
    out_types = [aval_to_ir_type(a) for a in ctx.avals_out]
    pred = arith.cmpi(arith.CmpIPredicate.ne, index, ir_constant(0, index.type))
    if_op = scf.IfOp(pred, out_types, has_else=True)
    with ir.InsertionPoint(if_op.then_block):
        if len(branches) > 2:
            rest = arith.subi(index, ir_constant(1, index.type))
            out = _cond_lowering_rule(LoweringRuleContext(
                ctx.lowering_context, ctx.avals_in, ctx.avals_out), rest, *args,
                branches=branches[1:])
        else:
            out = jaxpr_subcomp(ctx.lowering_context, branches[1].jaxpr, *args)
        scf.YieldOp(out)
    with ir.InsertionPoint(if_op.else_block):
        scf.YieldOp(jaxpr_subcomp(ctx.lowering_context, branches[0].jaxpr, *args))
    return list(if_op.results)


# JAX: jax/_src/pallas/utils.py pattern_match_scan_to_fori_loop
def _fori_body(jaxpr: core.Jaxpr, num_consts: int, num_carry: int):
    """The body without its `i + 1` (scf.for counts), or None if the scan is not a fori_loop
    (its first carry is not an i32 counter incremented by 1 and returned first)."""
    if len(jaxpr.invars) != num_consts + num_carry or len(jaxpr.outvars) != num_carry:
        raise NotImplementedError("a scan with extensive inputs or outputs")
    i, out = jaxpr.invars[num_consts], jaxpr.outvars[0]
    if i.aval.shape or i.aval.dtype != np.int32:
        return None
    for k, eqn in enumerate(jaxpr.eqns):
        if (eqn.primitive is lax.add_p and eqn.invars[0] is i and eqn.outvars[0] is out
                and isinstance(eqn.invars[1], Literal) and eqn.invars[1].val == 1):
            return core.Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars[1:],
                              jaxpr.eqns[:k] + jaxpr.eqns[k + 1:])
    return None


# JAX: jax/_src/pallas/mosaic/lowering.py _lower_jaxpr_to_for_loop — differs: never unrolled
def _for_loop(ctx: LoweringRuleContext, body: core.Jaxpr, start, num_steps, consts, carry):
    """`scf.for` from `start` for `num_steps` (an int, or an i32 value known only at run time:
    then, as JAX, a main loop over whole unroll chunks of 1 and a remainder loop after it)."""
    i32 = ir.IntegerType.get_signless(32)

    def loop(lower, upper, carry):
        for_op = scf.ForOp(lower, upper, ir_constant(1, i32), carry)
        with ir.InsertionPoint(for_op.body):
            scf.YieldOp(jaxpr_subcomp(ctx.lowering_context, body, *consts,
                                      for_op.induction_variable, *for_op.inner_iter_args))
        return list(for_op.results)

    if not isinstance(num_steps, ir.Value):
        return loop(start, arith.addi(start, ir_constant(num_steps, i32)), carry)
    upper = arith.addi(start, num_steps)
    one = ir_constant(1, i32)
    main_upper = arith.addi(start, arith.muli(arith.divsi(num_steps, one), one))
    carry = loop(start, main_upper, carry)
    return loop(main_upper, upper, carry)


# JAX: jax/_src/pallas/mosaic/lowering.py _scan_lowering_rule — differs: fori_loop-shaped
# scans only
@register_lowering_rule(scan_p, ensure_mlir_values=False)
def _scan_lowering_rule(ctx: LoweringRuleContext, *args, jaxpr, length, reverse, unroll,
                        num_consts, num_carry, **params):
    if reverse or jaxpr.consts:
        raise NotImplementedError("a reversed scan, or one with constants")
    body = _fori_body(jaxpr.jaxpr, num_consts, num_carry)
    if body is None:
        raise NotImplementedError("a scan that is not a fori_loop")
    consts, (start, *carry) = args[:num_consts], args[num_consts:]
    avals = ctx.avals_in
    consts = [_ensure_mlir_value(c, a) for c, a in zip(consts, avals)]
    carry = [_ensure_mlir_value(c, a) for c, a in zip(carry, avals[num_consts + 1:])]
    start = _ensure_mlir_value(start, avals[num_consts])
    outs = _for_loop(ctx, body, start, length, consts, carry)
    return [ir_constant(length, ir.IntegerType.get_signless(32)), *outs]


# JAX: jax/_src/pallas/utils.py pattern_match_while_to_fori_loop
def _while_fori_body(cond_jaxpr, cond_nconsts, body_jaxpr, body_nconsts):
    """The body of a `while` that is a fori_loop (carry (i, upper, ...), condition `i <
    upper`, `i + 1` in the body), without the counter and the bound; else None."""
    cond, body = cond_jaxpr.jaxpr, body_jaxpr.jaxpr
    if cond_nconsts or len(cond.invars) < 2 or len(cond.eqns) != 1:
        return None
    i, upper = cond.invars[:2]
    if any(v.aval.shape or v.aval.dtype != np.int32 for v in (i, upper)):
        return None
    (eqn,) = cond.eqns
    if eqn.primitive is not lax.lt_p or eqn.invars != [i, upper] or eqn.outvars != cond.outvars:
        return None
    bi, bupper = body.invars[body_nconsts:body_nconsts + 2]
    if body.outvars[1] is not bupper:
        return None
    for k, e in enumerate(body.eqns):
        if (e.primitive is lax.add_p and e.invars[0] is bi and e.outvars[0] is body.outvars[0]
                and isinstance(e.invars[1], Literal) and e.invars[1].val == 1):
            return core.Jaxpr(body.constvars, [*body.invars[:body_nconsts + 1],
                                               *body.invars[body_nconsts + 2:]],
                              body.outvars[2:], body.eqns[:k] + body.eqns[k + 1:])
    return None


# JAX: jax/_src/pallas/mosaic/lowering.py _while_lowering_rule
@register_lowering_rule(while_p)
def _while_lowering_rule(ctx: LoweringRuleContext, *args, cond_jaxpr, body_jaxpr,
                         cond_nconsts, body_nconsts):
    cond_consts = args[:cond_nconsts]
    body_consts, carry = args[cond_nconsts:cond_nconsts + body_nconsts], args[
        cond_nconsts + body_nconsts:]
    fori_body = _while_fori_body(cond_jaxpr, cond_nconsts, body_jaxpr, body_nconsts)
    if fori_body is not None:  # JAX: _lower_while_via_fori
        (lower, upper), rest = carry[:2], carry[2:]
        outs = _for_loop(ctx, fori_body, lower, arith.subi(upper, lower), body_consts, rest)
        return [upper, upper, *outs]
    types = [c.type for c in carry]
    while_op = scf.WhileOp(types, carry)
    before = while_op.before.blocks.append(*types)
    with ir.InsertionPoint.at_block_begin(before):
        (pred,) = jaxpr_subcomp(ctx.lowering_context, cond_jaxpr.jaxpr, *cond_consts,
                                *before.arguments)
        scf.ConditionOp(pred, before.arguments)
    after = while_op.after.blocks.append(*types)
    with ir.InsertionPoint.at_block_begin(after):
        scf.YieldOp(jaxpr_subcomp(ctx.lowering_context, body_jaxpr.jaxpr, *body_consts,
                                  *after.arguments))
    return list(while_op.results)
