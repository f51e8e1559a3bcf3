"""Reference solution: five lowering rules, and a jaxpr run on XLA through them (chapter 07)."""

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
    return hlo.sine(x)


def _mul_lowering(ctx, x, y, **params):
    out = ctx.avals_out[0]
    # an operand may have a 1 where the result has n (`f32[4,5] * f32[1,5]`): stablehlo
    # multiplies only equal shapes, so such an operand is broadcast first
    x, y = (v if tuple(a.shape) == tuple(out.shape) else
            hlo.broadcast_in_dim(ir_type(out), v, dense_i64(range(len(out.shape))))
            for v, a in zip((x, y), ctx.avals_in))
    return hlo.multiply(x, y)


def _broadcast_in_dim_lowering(ctx, x, *, broadcast_dimensions, **params):
    return hlo.broadcast_in_dim(ir_type(ctx.avals_out[0]), x, dense_i64(broadcast_dimensions))


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, **params):
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    return hlo.dot_general(ir_type(ctx.avals_out[0]), lhs, rhs, dnums)


def _reduce_sum_lowering(ctx, x, *, axes, **params):
    out = ctx.avals_out[0]
    scalar = ir.RankedTensorType.get([], ir_type(out).element_type)
    zero = hlo.constant(ir.DenseElementsAttr.get(np.zeros((), out.dtype)))
    op = hlo.ReduceOp([ir_type(out)], [x], [zero], dense_i64(axes))
    body = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(body):  # the region: how two elements combine
        hlo.return_([hlo.add(*body.arguments)])
    return op.result


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
