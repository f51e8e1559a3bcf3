"""Rung 8: jit: trace to a jaxpr, lower it to StableHLO with jax.extend.mlir, compile it with
XLA and run it (minijax/interpreters/mlir.py, minijax/compiler.py, minijax/pjit.py;
jax/_src/interpreters/mlir.py, jax/_src/pjit.py)."""

from __future__ import annotations

import numpy as np

from . import core as c
from .core import shape_dtype
from .jaxpr import Var, trace_to_jaxpr


def _ir_type(ir, shape, dtype):
    elem = {"float32": ir.F32Type.get, "bool": lambda: ir.IntegerType.get_signless(1),
            "int32": lambda: ir.IntegerType.get_signless(32)}[np.dtype(dtype).name]()
    return ir.RankedTensorType.get(list(shape), elem)


def _lowering_rules(ir, hlo):
    def reduce_sum(x, *, axes, out):
        zero = hlo.constant(ir.DenseElementsAttr.get(np.zeros((), out.dtype)))
        op = hlo.ReduceOp([_ir_type(ir, out.shape, out.dtype)], [x], [zero], list(axes))
        scalar = _ir_type(ir, (), out.dtype)
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.return_([hlo.add(*block.arguments)])
        return op.result

    def gt(x, y, *, out):
        return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get("GT"))

    def dot(x, y, *, out):
        return hlo.dot(_ir_type(ir, out.shape, out.dtype), x, y)

    def transpose(x, *, perm, out):
        return hlo.transpose(x, ir.DenseI64ArrayAttr.get(list(perm)))

    def broadcast(x, *, shape, dims, out):
        return hlo.broadcast_in_dim(_ir_type(ir, shape, out.dtype), x,
                                    ir.DenseI64ArrayAttr.get(list(dims)))

    def unary(name):
        return lambda *xs, out: getattr(hlo, name)(*xs)
    # BUILD rung 8: one StableHLO op per primitive
    return {c.add_p: unary("add"), c.mul_p: unary("multiply"), c.neg_p: unary("negate"),
            c.sin_p: unary("sine"), c.cos_p: unary("cosine"), c.exp_p: unary("exponential"),
            c.log_p: unary("log"), c.max_p: unary("maximum"), c.select_p: unary("select"),
            c.gt_p: gt, c.reduce_sum_p: reduce_sum, c.dot_p: dot, c.transpose_p: transpose,
            c.broadcast_p: broadcast}
    # END BUILD


def lower(jaxpr) -> str:
    """The StableHLO text of a module whose `main` takes the jaxpr's consts, then its inputs."""
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func, stablehlo as hlo
    ctx = ir.Context()
    hlo.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        rules = _lowering_rules(ir, hlo)
        ins = jaxpr.constvars + jaxpr.invars
        in_types = [_ir_type(ir, v.shape, v.dtype) for v in ins]
        out_types = [_ir_type(ir, v.shape, v.dtype) for v in jaxpr.outvars]
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", (in_types, out_types))
            with ir.InsertionPoint(fn.add_entry_block()):
                # BUILD rung 8: map each variable to its MLIR value, equation by equation
                env = dict(zip(ins, fn.arguments))

                def read(x):
                    if isinstance(x, Var):
                        return env[x]
                    return hlo.constant(ir.DenseElementsAttr.get(np.asarray(x)))
                for e in jaxpr.eqns:
                    rule = rules.get(e.prim)
                    if rule is None:
                        raise NotImplementedError(f"no lowering for '{e.prim}' (rung 8)")
                    env[e.outvar] = rule(*map(read, e.inputs), **e.params, out=e.outvar)
                func.ReturnOp([env[v] for v in jaxpr.outvars])
                # END BUILD
        return str(module)


def jit(f):
    """`jit(f)(*args)`: compiled once per argument (shape, dtype)s, then run on XLA."""
    cache = {}

    def run(*args):
        import jax.extend.backend as jeb
        from jaxlib._jax import DeviceList
        key = tuple(shape_dtype(a) for a in args)
        if key not in cache:
            jaxpr, consts, single = trace_to_jaxpr(f, key)
            backend = jeb.get_backend()
            exe = backend.compile_and_load(lower(jaxpr), DeviceList(tuple(backend.devices()[:1])),
                                           jeb.get_compile_options(num_replicas=1,
                                                                   num_partitions=1))
            cache[key] = exe, consts, single
        exe, consts, single = cache[key]
        import jax  # device buffers only: the one place JAX's arrays appear
        bufs = [jax.device_put(np.asarray(x)) for x in (*consts, *args)]
        outs = [np.asarray(o) for o in exe.execute(bufs)]
        return outs[0] if single else outs
    run.cache = cache
    return run
