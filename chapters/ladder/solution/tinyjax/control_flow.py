"""Rung 9: `cond` as a primitive that holds its branches as jaxprs
(minijax/lax/control_flow/conditionals.py; jax/_src/lax/control_flow/conditionals.py)."""

from __future__ import annotations

from . import core as c
from .core import Primitive, shape_dtype
from .jaxpr import eval_jaxpr, trace_to_jaxpr
from .jvp import jvp, jvp_rules
from .vmap import batch_rules, bdim_at_front


def _cond_impl(pred, *args, branches, n_consts):
    # BUILD rung 9: run the chosen branch's jaxpr on its constants and the operands
    k = n_consts[0] + n_consts[1]
    consts, ops = args[:k], args[k:]
    true_consts, false_consts = consts[:n_consts[0]], consts[n_consts[0]:]
    if bool(pred):
        return eval_jaxpr(branches[0], true_consts, *ops)[0]
    return eval_jaxpr(branches[1], false_consts, *ops)[0]
    # END BUILD


def _cond_shape_rule(pred, *args, branches, n_consts):
    out = branches[0].outvars[0]
    return out.shape, out.dtype


cond_p = Primitive("cond", _cond_impl, _cond_shape_rule)


def cond(pred, true_fn, false_fn, *operands):
    """true_fn(*operands) if pred else false_fn(*operands): both traced to jaxprs first, so
    the choice can wait until `pred` is known (under jit, at run time). TypeError when the
    branches return different shapes or dtypes."""
    avals = [shape_dtype(x) for x in operands]
    # BUILD rung 9: trace both branches; their constants become operands of the equation
    t_jaxpr, t_consts, _ = trace_to_jaxpr(true_fn, avals)
    f_jaxpr, f_consts, _ = trace_to_jaxpr(false_fn, avals)
    t_out, f_out = t_jaxpr.outvars[0], f_jaxpr.outvars[0]
    if (t_out.shape, t_out.dtype) != (f_out.shape, f_out.dtype):
        raise TypeError(f"cond branches differ: {t_out.type_str()} vs {f_out.type_str()}")
    return cond_p.bind(pred, *t_consts, *f_consts, *operands, branches=(t_jaxpr, f_jaxpr),
                       n_consts=(len(t_consts), len(f_consts)))
    # END BUILD


def _branch_fns(args, branches, n_consts):
    k = n_consts[0] + n_consts[1]
    consts, ops = args[:k], args[k:]
    t = lambda *xs: eval_jaxpr(branches[0], consts[:n_consts[0]], *xs)[0]
    f = lambda *xs: eval_jaxpr(branches[1], consts[n_consts[0]:], *xs)[0]
    return t, f, list(ops)


def _cond_jvp(primals, tangents, *, branches, n_consts):
    # both branches' jvps, then a select (JAX builds a cond of the two jvp jaxprs instead,
    # which runs one branch; tinyjax's primitives have a single output, so it selects)
    pred, args = primals[0], primals[1:]
    k = n_consts[0] + n_consts[1]
    t, f, ops = _branch_fns(list(args), branches, n_consts)
    t_ops = list(tangents[1 + k:])
    t_out, t_tan = jvp(t, ops, t_ops)
    f_out, f_tan = jvp(f, ops, t_ops)
    return c.select(pred, t_out, f_out), c.select(pred, t_tan, f_tan)


def _cond_batch(trace, vals, dims, *, branches, n_consts):
    # a batched predicate picks per example: both branches run, batched, then a select
    k = n_consts[0] + n_consts[1]
    if any(d is not None for d in dims[1:1 + k]):
        raise NotImplementedError("vmap of a cond whose branches close over batched values")
    args = list(vals[1:1 + k]) + [bdim_at_front(v, d, trace.size)
                                  for v, d in zip(vals[1 + k:], dims[1 + k:])]
    t, f, ops = _branch_fns(args, branches, n_consts)
    from .vmap import vmap
    out_t, out_f = vmap(t)(*ops), vmap(f)(*ops)
    pred = bdim_at_front(vals[0], dims[0], trace.size)
    shape = shape_dtype(out_t)[0]
    pred = c.broadcast_in_dim(pred, shape, (0,)) if len(shape) > 1 else pred
    return c.select(pred, out_t, out_f), 0


jvp_rules[cond_p] = _cond_jvp
batch_rules[cond_p] = _cond_batch
