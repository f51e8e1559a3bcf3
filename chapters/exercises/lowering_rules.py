"""Exercise: lower five primitives to StableHLO and run the program on XLA (chapter 07).

`jit` turns a jaxpr into a StableHLO module, one *lowering rule* per primitive, and hands the
module's text to XLA. Here you write the rules of five primitives with `jax.extend.mlir`'s
builders (`hlo` is its `stablehlo` dialect), and the driver below (given) walks a jaxpr,
calls your rule for each equation, compiles the module with XLA and runs it. The rules take
the equation's operands as MLIR values and its params as keywords (ignore the params you do
not need with `**params`), and return the result's MLIR value:

* `sin`: `hlo.sine`.
* `mul`: `hlo.multiply`, whose operands must have the result's shape. JAX 0.10's `mul`
  broadcasts 1s (`f32[4,5] * f32[1,5]`): give such an operand the result's shape first,
  with `hlo.broadcast_in_dim(ir_type(out), x, dense_i64(range(rank)))`.
* `broadcast_in_dim`: `hlo.broadcast_in_dim` to the result's type, with the equation's
  `broadcast_dimensions` (which dimension of the result each operand dimension becomes).
* `dot_general`: `hlo.dot_general(result_type, lhs, rhs, dnums)`, where
  `dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))` becomes
  `hlo.DotDimensionNumbers.get(lhs_batching_dimensions=..., rhs_batching_dimensions=...,
  lhs_contracting_dimensions=..., rhs_contracting_dimensions=...)`.
* `reduce_sum`: `hlo.ReduceOp([result_type], [x], [zero], dense_i64(axes))`, a reduction
  whose region says how two elements combine: append a block of two scalar arguments to
  `op.regions[0]` and, inside `ir.InsertionPoint(block)`, `hlo.return_` their `hlo.add`.
  The result is `op.result`; `zero` is `hlo.constant(ir.DenseElementsAttr.get(...))`.

`ctx.avals_out[0]` is the result's aval (`.shape`, `.dtype`); `ir_type(aval)` its MLIR type.
The tests lower jaxprs that `minijax.make_jaxpr` *and* `jax.make_jaxpr` trace, run them on
XLA and compare with `jax.jit`: the two libraries' jaxprs name these primitives and their
params alike. In minijax the same rules are `_sin_lowering`, `_dot_general_lowering`, ... in
minijax/lax/lax.py, and the driver is `lower_jaxpr` in minijax/interpreters/mlir.py; in JAX,
the rules sit beside their primitives in jax/_src/lax/lax.py and the driver is
`jaxpr_subcomp` in jax/_src/interpreters/mlir.py.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jax.extend import backend
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import func, stablehlo as hlo


class LoweringRuleContext(NamedTuple):
    """What a rule knows besides its operands: the avals of the equation's inputs and outputs
    (each with `.shape` and `.dtype`)."""
    avals_in: tuple
    avals_out: tuple


def ir_type(aval) -> ir.RankedTensorType:
    """The MLIR tensor type of an aval (float32 or int32): `tensor<4x5xf32>`."""
    elem = {"float32": ir.F32Type.get, "int32": lambda: ir.IntegerType.get_signless(32)}
    return ir.RankedTensorType.get(list(aval.shape), elem[np.dtype(aval.dtype).name]())


def dense_i64(values) -> ir.DenseI64ArrayAttr:
    """An MLIR attribute holding a list of ints (dimensions, axes): `array<i64: 0, 1>`."""
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


# ------------------------------------------------------------------ the five rules
def _sin_lowering(ctx, x, **params):
    raise NotImplementedError("the lowering of 'sin': one stablehlo op (hlo.sine)")


def _mul_lowering(ctx, x, y, **params):
    raise NotImplementedError("the lowering of 'mul': broadcast an operand whose shape is not "
                              "ctx.avals_out[0].shape, then hlo.multiply")


def _broadcast_in_dim_lowering(ctx, x, *, broadcast_dimensions, **params):
    raise NotImplementedError("the lowering of 'broadcast_in_dim': hlo.broadcast_in_dim to "
                              "ir_type(ctx.avals_out[0])")


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, **params):
    raise NotImplementedError("the lowering of 'dot_general': hlo.DotDimensionNumbers.get(...) "
                              "from dimension_numbers, then hlo.dot_general")


def _reduce_sum_lowering(ctx, x, *, axes, **params):
    raise NotImplementedError("the lowering of 'reduce_sum': an hlo.ReduceOp over `axes` whose "
                              "region adds two scalars")


RULES = {"sin": _sin_lowering, "mul": _mul_lowering,
         "broadcast_in_dim": _broadcast_in_dim_lowering, "dot_general": _dot_general_lowering,
         "reduce_sum": _reduce_sum_lowering}


# ------------------------------------------------------------------ given: the driver
def lower(closed_jaxpr, rules: dict | None = None) -> str:
    """The StableHLO text of a module whose `main` computes `closed_jaxpr` (minijax's or
    JAX's; no consts), one rule of `rules` (default: RULES) per equation.

    Raises NotImplementedError naming a primitive that has no rule."""
    rules = RULES if rules is None else rules
    jaxpr = closed_jaxpr.jaxpr
    if closed_jaxpr.consts:
        raise ValueError(f"lower: a jaxpr without consts was expected, got "
                         f"{len(closed_jaxpr.consts)}")
    ctx = ir.Context()
    hlo.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", ([ir_type(v.aval) for v in jaxpr.invars],
                                      [ir_type(v.aval) for v in jaxpr.outvars]))
            with ir.InsertionPoint(fn.add_entry_block()):
                env = dict(zip(jaxpr.invars, fn.arguments))
                for eqn in jaxpr.eqns:
                    name = eqn.primitive.name
                    if name not in rules:
                        raise NotImplementedError(
                            f"no lowering rule for '{name}' in RULES (this exercise lowers "
                            f"{sorted(rules)}) — see chapters/07-jit.md")
                    if any(type(v).__name__ == "Literal" for v in eqn.invars):
                        raise ValueError(f"lower: '{name}' has a literal operand; write the "
                                         "program with array inputs only")
                    rule_ctx = LoweringRuleContext(tuple(v.aval for v in eqn.invars),
                                                   tuple(v.aval for v in eqn.outvars))
                    (out,) = eqn.outvars  # each of these primitives has one result
                    env[out] = rules[name](rule_ctx, *[env[v] for v in eqn.invars],
                                           **eqn.params)
                func.ReturnOp([env[v] for v in jaxpr.outvars])
        return str(module)


def run(closed_jaxpr, *args: np.ndarray) -> list[np.ndarray]:
    """Lower `closed_jaxpr`, compile the module with XLA for the first device and run it on
    `args`; returns the outputs as numpy arrays."""
    import jax  # device buffers only: the inputs and outputs of the executable
    from jaxlib._jax import DeviceList
    client = backend.get_backend()
    devices = client.devices()[:1]
    exe = client.compile_and_load(lower(closed_jaxpr), DeviceList(tuple(devices)),
                                  backend.get_compile_options(num_replicas=1, num_partitions=1))
    outs = exe.execute([jax.device_put(np.asarray(a), devices[0]) for a in args])
    return [np.asarray(o) for o in outs]
