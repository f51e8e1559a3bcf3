"""`lax.cond` and `lax.switch`: the `cond` primitive, which holds one jaxpr per branch.

Python's `if` cannot branch on a traced value (it needs a bool *now*), so data-dependent
branching is a primitive: both branches are traced to jaxprs, and `cond_p` picks one at run
time from an int32 index. Every rule transforms the branch jaxprs and binds `cond_p` again,
as jit_p's rules do with its one jaxpr (minijax/pjit.py); under `vmap` with a batched
predicate the cond becomes a `select_n` of all branches' results.
Mirrors jax/_src/lax/control_flow/conditionals.py. Taught in chapters/08-control-flow.md.
"""

from __future__ import annotations

import weakref
from typing import Callable, Sequence

import numpy as np

from minijax import core, traceback_util
from minijax.ad_util import Zero
from minijax.config import config
from minijax.core import ClosedJaxpr, ShapedArray, Var
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.interpreters.batching import not_mapped
from minijax.lax import lax
from minijax.lax.control_flow.common import (
    as_array,
    avals_short,
    batch_jaxpr_flags,
    check_branch_outputs,
    eval_closed,
    initial_style_jaxpr,
    is_zero,
    jaxpr_forwarding,
    merge_common_consts,
    prune_outputs,
    python_control_flow,
    to_concrete_value,
    trace_closed,
    typematch_all,
    with_invars,
)
from minijax.mesh import get_abstract_mesh
from minijax.tree_util import tree_flatten, tree_unflatten
from minijax.util import merge_lists, safe_zip, split_list

_no_operand_sentinel = object()

# ---------------------------------------------------------------------------------------------
# The user-facing functions
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/lax/control_flow/conditionals.py switch
@traceback_util.api_boundary
def switch(index, branches: Sequence[Callable], *operands, operand=_no_operand_sentinel):
    """Apply `branches[index](*operands)`; `index` is clamped to `[0, len(branches) - 1]`.

    Args:
      index: an integer scalar (i32[] or any int dtype; traced values are fine).
      branches: functions of `operands` returning the same pytree of the same types.
      operands: pytrees of arrays passed to the chosen branch.
    Returns: the chosen branch's output. All branches are traced (to jaxprs).
    Raises: TypeError for a non-scalar or non-integer index, non-callable branches, or branch
      outputs of different structure or types; ValueError for an empty list of branches.
    """
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    if operand is not _no_operand_sentinel:
        if operands:
            raise TypeError("if 'operand' keyword is passed then no positional operands can "
                            f"be passed, got operand={operand} and positional operands "
                            f"{operands}")
        operands = (operand,)
    aval = core.get_aval(index)
    if aval.shape != ():
        raise TypeError(f"Branch index must be scalar, got {index} of shape {aval.shape}.")
    if aval.dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {aval.dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = lax.convert_element_type(index, np.int32)
    index = lax.clamp(np.array(0, np.int32), index, np.array(len(branches) - 1, np.int32))
    if python_control_flow() and to_concrete_value(index) is not None:
        return branches[int(to_concrete_value(index))](*operands)
    names = [f"branch {i}" for i in range(len(branches))]
    return _cond_internal("switch", index, branches, names, operands)


# JAX: jax/_src/lax/control_flow/conditionals.py cond
@traceback_util.api_boundary
def cond(pred, true_fun: Callable, false_fun: Callable, *operands,
         operand=_no_operand_sentinel):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, as one primitive.

    Args:
      pred: a boolean (or number, compared with 0) scalar; may be traced.
      true_fun, false_fun: functions of `operands` returning the same pytree of the same types.
      operands: pytrees of arrays passed to the branch.
    Returns: the taken branch's output. Both branches are traced; under `vmap` with a batched
      `pred` both run and the results are selected elementwise.
    Raises: TypeError if `pred` is not a scalar bool/number, a branch is not callable, or the
      branches' outputs differ in pytree structure or types (the message names both types).
    """
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    if operand is not _no_operand_sentinel:
        if operands:
            raise TypeError("if 'operand' keyword is passed then no positional operands can "
                            f"be passed, got operand={operand} and positional operands "
                            f"{operands}")
        operands = (operand,)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, (list, tuple)):
        raise TypeError(f"Pred must be a scalar, got {pred} of type {type(pred)}")
    aval = core.get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {aval.shape}.")
    if aval.dtype.kind != "b":
        if aval.dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {aval.dtype}.")
    if python_control_flow() and to_concrete_value(pred) is not None:
        return (true_fun if to_concrete_value(pred) else false_fun)(*operands)
    if aval.dtype.kind != "b":
        pred = lax.ne(pred, np.zeros((), aval.dtype))
    index = lax.convert_element_type(pred, np.int32)
    return _cond_internal("cond", index, (false_fun, true_fun), ["false_fun", "true_fun"],
                          operands)


def _cond_internal(api_name: str, index, funs: Sequence[Callable], names: Sequence[str],
                   operands: tuple):
    ops_flat, in_tree = tree_flatten(operands)
    avals = [core.get_aval(x) for x in ops_flat]
    # cond's branches come as (false_fun, true_fun); as JAX's, true_fun is traced first, its
    # closed-over values come first, and it is the one the other's outputs are checked against
    order = list(range(len(funs))) if api_name == "switch" else [1, 0]
    jaxprs, all_consts, out_trees = [None] * len(funs), [None] * len(funs), [None] * len(funs)
    for i in order:
        jaxprs[i], all_consts[i], out_trees[i] = _trace_branch(api_name, funs[i], in_tree, avals)
    first = order[0]
    for i in order[1:]:
        check_branch_outputs(api_name, names[first], names[i], out_trees[first],
                              jaxprs[first].out_avals, out_trees[i], jaxprs[i].out_avals)
    merged, consts = merge_common_consts([jaxprs[i] for i in order],
                                         [all_consts[i] for i in order])
    branches = [merged[order.index(i)] for i in range(len(funs))]
    branches, all_inputs = _vary_with_index(index, branches, [*consts, *ops_flat])
    # An output that every branch returns unchanged from the same input needs no cond.
    fwds = [jaxpr_forwarding(b.jaxpr) for b in branches]
    in_fwd = [f[0] if len(set(f)) == 1 else None for f in zip(*fwds)]
    keep = [f is None for f in in_fwd]
    branches = [prune_outputs(b, keep) for b in branches]
    outs = iter(cond_p.bind(index, *all_inputs, branches=tuple(branches)))
    out = [next(outs) if f is None else as_array(all_inputs[f], core.get_aval(all_inputs[f]))
           for f in in_fwd]
    return tree_unflatten(out_trees[0], out)


# branch function -> {(api name, input tree, avals, trace options, mesh):
#                     (jaxpr, consts, output tree)}
_branch_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# JAX: jax/_src/interpreters/partial_eval.py trace_to_jaxpr (its weakref_lru_cache)
def _trace_branch(api_name: str, f: Callable, in_tree, avals: list) -> tuple:
    """`f` traced to (jaxpr, consts, output tree). A branch is traced once per signature (and
    per API: `cond` and `switch` apart) and the jaxpr reused, as JAX caches it, keyed weakly
    on the function; one that closes over tracers, or traced where named axes are bound, is
    traced each time."""
    key = (api_name, in_tree, tuple(avals), config.trace_context, get_abstract_mesh())
    cacheable = not core.axis_env.sizes
    try:
        hit = _branch_cache.get(f, {}).get(key) if cacheable else None
    except TypeError:  # a callable that cannot be weakly referenced
        cacheable, hit = False, None
    if hit is not None:
        return hit
    box = []

    def flat_fun(*leaves):
        out_flat, out_tree = tree_flatten(f(*tree_unflatten(in_tree, leaves)))
        box.append(out_tree)
        return out_flat

    jaxpr, consts = initial_style_jaxpr(flat_fun, avals, getattr(f, "__name__", "branch"))
    entry = (jaxpr, consts, box[0])
    if cacheable and not any(isinstance(c, core.Tracer) for c in consts):
        _branch_cache.setdefault(f, {})[key] = entry
    return entry


def _vary_with_index(index, branches: list[ClosedJaxpr], operands: list):
    """Inside shard_map, an index that varies along manual axes picks a branch per device, so
    the result differs between devices even when every branch's does not: the operands and
    every branch's outputs are made to vary along the index's axes too (`pvary`), and the
    gradient then sums over the devices. JAX 0.10.2 types the outputs by the branches alone
    (jax-ml/jax#40823: an output typed invariant that is not, and a wrong gradient)."""
    axes = core.get_aval(index).vma
    if all(axes <= core.get_aval(x).vma for x in operands) and \
            all(axes <= a.vma for a in branches[0].out_avals):
        return branches, operands
    vary = lambda x, vma: core.pvary(x, tuple(sorted(vma - core.get_aval(x).vma)))
    operands = [vary(x, axes) for x in operands]
    out_vma = [a.vma | axes for a in branches[0].out_avals]

    def retyped(branch):
        def f(*xs):
            return [vary(o, v) for o, v in safe_zip(eval_closed(branch, *xs), out_vma)]
        return trace_closed(f, [core.get_aval(x) for x in operands], "cond")
    return [retyped(b) for b in branches], operands


# ---------------------------------------------------------------------------------------------
# cond_p and its rules
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/control_flow/conditionals.py cond_p — differs: impl evaluates one branch
def _cond_impl(index, *args, branches: tuple[ClosedJaxpr, ...]):
    i = int(np.clip(core.to_numpy(index), 0, len(branches) - 1))
    with core.set_current_trace(core.eval_trace):
        outs = eval_closed(branches[i], *args)
    return [as_array(o, a) for o, a in safe_zip(outs, branches[0].out_avals)]


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_abstract_eval
def _cond_abstract_eval(index: ShapedArray, *avals: ShapedArray, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an i32[] scalar, got "
                        f"{index.str_short()}")
    for i, b in enumerate(branches):
        if not typematch_all(b.in_avals, avals):
            raise TypeError(f"cond: branch {i} takes ({avals_short(b.in_avals)}) but is "
                            f"called with operands ({avals_short(avals)})")
        out0 = branches[0].out_avals
        if not typematch_all(b.out_avals, out0) or \
                [a.vma for a in b.out_avals] != [a.vma for a in out0]:
            raise TypeError(f"cond: branch 0 returns ({avals_short(out0)}) but branch {i} "
                            f"returns ({avals_short(b.out_avals)})")
    return branches[0].out_avals


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_jvp
def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    _, *ops_dot = tangents
    ops_nz = [not is_zero(t) for t in ops_dot]
    branches_out_nz = [ad.jvp_jaxpr(b, ops_nz, instantiate=False)[1] for b in branches]
    out_nz = [any(nz) for nz in zip(*branches_out_nz)]
    branches_jvp = tuple(ad.jvp_jaxpr(b, ops_nz, instantiate=out_nz)[0] for b in branches)
    nz_dots = [t for t, nz in safe_zip(ops_dot, ops_nz) if nz]
    out = cond_p.bind(index, *ops, *nz_dots, branches=branches_jvp)
    out_primals, out_tangents = split_list(out, [len(out_nz)])
    it = iter(out_tangents)
    return out_primals, [next(it) if nz else Zero.from_primal_value(p)
                         for p, nz in safe_zip(out_primals, out_nz)]


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_linearize
def _cond_linearize(is_vjp, nonzeros, index, *ops, branches):
    # each branch linearized on its own (ad.linearize_jaxpr), then joined as partial
    # evaluation joins them: one primal cond computing the outputs and every branch's
    # residuals, one tangent cond reading them
    _, *ops_nz = nonzeros
    branches_out_nz = [ad.linearize_jaxpr(b, ops_nz, is_vjp=is_vjp)[2] for b in branches]
    out_nz = [any(nz) for nz in zip(*branches_out_nz)]
    primal_jaxprs, tangent_jaxprs, res_avals = [], [], []
    for b in branches:
        primal, num_res, _, _, tangent = ad.linearize_jaxpr(b, ops_nz, out_nz, is_vjp=is_vjp)
        primal_jaxprs.append(primal)
        tangent_jaxprs.append(tangent)
        res_avals.append(primal.out_avals[len(primal.out_avals) - num_res:])
    all_res_avals, res_indices = _merge_branch_residuals(res_avals)
    primal_jaxprs = _join_cond_outputs(primal_jaxprs, all_res_avals, res_indices, len(out_nz))
    tangent_jaxprs = _join_cond_pe_staged_jaxpr_inputs(tangent_jaxprs, all_res_avals,
                                                       res_indices)
    primals_out, res = split_list(cond_p.bind(index, *ops, branches=primal_jaxprs),
                                  [len(out_nz)])
    tangent_avals = [a.to_tangent_aval() for a in branches[0].out_avals]

    def tangent_fun(residuals, *tangents):
        nz_tangents = [t for t in tangents[1:] if type(t) is not Zero]
        it = iter(cond_p.bind(*residuals, *nz_tangents, branches=tangent_jaxprs))
        return [next(it) if nz else Zero(a) for a, nz in safe_zip(tangent_avals, out_nz)]

    return primals_out, out_nz, [index, *res], tangent_fun


# JAX: jax/_src/lax/control_flow/conditionals.py _merge_branch_residuals
def _merge_branch_residuals(branch_res_avals: Sequence[Sequence[ShapedArray]]
                            ) -> tuple[list[ShapedArray], list[list[int]]]:
    """One list of residual slots for all branches: slots of equal type are shared between
    branches (only one branch runs). Returns (slot avals, for each branch its slot indices)."""
    def tag(avals):  # the k-th residual of a type in a branch gets the tag (type, k)
        seen: dict[ShapedArray, int] = {}
        out = []
        for a in avals:
            out.append((a, seen.get(a, 0)))
            seen[a] = seen.get(a, 0) + 1
        return out

    tagged = [tag(avals) for avals in branch_res_avals]
    slots = list(dict.fromkeys(t for ts in tagged for t in ts))
    where = {t: i for i, t in enumerate(slots)}
    return [a for a, _ in slots], [[where[t] for t in ts] for ts in tagged]


# JAX: jax/_src/lax/control_flow/conditionals.py _join_cond_outputs
def _join_cond_outputs(jaxprs: Sequence[ClosedJaxpr], all_res_avals: Sequence[ShapedArray],
                       res_indices: Sequence[list[int]], num_non_res: int) -> tuple:
    """Make every known branch return all residual slots: each slot starts as an `empty`
    array (left dead where the branch fills it, as JAX does), then takes the branch's own."""
    def augment(jaxpr, indices):
        def f(*args):
            outs, res = split_list(eval_closed(jaxpr, *args), [num_non_res])
            slots = [lax.empty_like_shaped_array(a) for a in all_res_avals]
            for i, r in safe_zip(indices, res):
                slots[i] = r
            return outs + slots
        return trace_closed(f, jaxpr.in_avals, "partial evaluation")
    return tuple(augment(j, ix) for j, ix in safe_zip(jaxprs, res_indices))


# JAX: jax/_src/lax/control_flow/conditionals.py _join_cond_pe_staged_jaxpr_inputs
def _join_cond_pe_staged_jaxpr_inputs(jaxprs: Sequence[ClosedJaxpr],
                                      all_res_avals: Sequence[ShapedArray],
                                      res_indices: Sequence[list[int]]) -> tuple:
    """Make every unknown branch take all residual slots (ignoring those it does not read);
    the slots a branch ignores are the same variables in every branch, as in JAX."""
    all_res_vars = [Var(a) for a in all_res_avals]

    def augment(jaxpr, indices):
        res_vars, other = split_list(jaxpr.jaxpr.invars, [len(indices)])
        slots = list(all_res_vars)
        for i, v in safe_zip(indices, res_vars):
            slots[i] = v
        return with_invars(jaxpr, slots + other)
    return tuple(augment(j, ix) for j, ix in safe_zip(jaxprs, res_indices))


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_partial_eval
def _cond_partial_eval(trace: pe.JaxprTrace, index, *ops, branches):
    if trace.is_own(index):  # an unknown index: the whole cond is unknown
        return trace.default_process_primitive(cond_p, [index, *ops], dict(branches=branches))
    unknowns = [trace.is_own(x) for x in ops]
    branches_out_uks = [pe.partial_eval_jaxpr_nounits(b, unknowns)[2] for b in branches]
    out_uks = [any(uks) for uks in zip(*branches_out_uks)]
    known, unknown, res_avals = [], [], []
    for b in branches:
        jk, ju, _, num_res = pe.partial_eval_jaxpr_nounits(b, unknowns, instantiate=out_uks)
        known.append(jk)
        unknown.append(ju)
        res_avals.append(jk.out_avals[len(jk.out_avals) - num_res:])
    all_res_avals, res_indices = _merge_branch_residuals(res_avals)
    num_known_outs = len(out_uks) - sum(out_uks)
    known = _join_cond_outputs(known, all_res_avals, res_indices, num_known_outs)
    unknown = _join_cond_pe_staged_jaxpr_inputs(unknown, all_res_avals, res_indices)
    known_ops = [x for x, u in safe_zip(ops, unknowns) if not u]
    outs, unknown_outs = [], []
    if known[0].out_avals:  # the known cond: known outputs and residuals, computed now
        outs = cond_p.bind_with_trace(trace.parent_trace, [index, *known_ops],
                                      dict(branches=known))
    known_outs, res = split_list(outs, [num_known_outs])
    unknown_ops = [x for x, u in safe_zip(ops, unknowns) if u]
    if any(out_uks):  # the unknown cond, recorded: it reads the index and residuals as consts
        unknown_outs = trace.default_process_primitive(
            cond_p, [index, *res, *unknown_ops], dict(branches=unknown))
    return merge_lists(out_uks, known_outs, unknown_outs)


def _transpose_branch(branch: ClosedJaxpr, undefined: Sequence[bool]) -> ClosedJaxpr:
    known_avals = [a for a, u in safe_zip(branch.in_avals, undefined) if not u]
    ct_avals = [a.to_tangent_aval() for a in branch.out_avals]

    def transposed(*args):
        known, cts = split_list(args, [len(known_avals)])
        it = iter(known)
        primals = [ad.UndefinedPrimal(a) if u else next(it)
                   for a, u in safe_zip(branch.in_avals, undefined)]
        cts_in = ad.backward_pass(branch.jaxpr, branch.consts, primals, cts)
        return [ad.instantiate_zeros(c) for c, u in safe_zip(cts_in, undefined) if u]

    return trace_closed(transposed, known_avals + ct_avals, "transpose")


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_transpose_fancy — differs: UndefinedPrimal
def _cond_transpose(cts, index, *ops, branches):
    if ad.is_undefined_primal(index):
        raise ValueError("cond: transposing with respect to the branch index (it is not "
                         "linear) — see chapters/06-reverse-mode.md")
    undefined = [ad.is_undefined_primal(x) for x in ops]
    trans = tuple(_transpose_branch(b, undefined) for b in branches)
    known = [x for x, u in safe_zip(ops, undefined) if not u]
    cts = [ad.instantiate_zeros(c) for c in cts]
    outs = iter(cond_p.bind(index, *known, *cts, branches=trans))
    return [None] + [next(outs) if u else None for u in undefined]


def _bcast_select(pred, on_true, on_false):
    shape = core.get_aval(on_true).shape
    if core.get_aval(pred).shape != shape:
        pred = lax.broadcast_in_dim(pred, shape, (0,))
    return lax.select(pred, on_true, on_false)


def _bcast_select_n(which, *cases):
    shape = core.get_aval(cases[0]).shape
    if core.get_aval(which).shape != shape:
        which = lax.broadcast_in_dim(which, shape, (0,))
    return lax.select_n(which, *cases)


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_batching_rule
def _cond_batch_rule(vals, dims, *, axis_size, branches):
    index, *ops = vals
    index_dim, *op_dims = dims
    if index_dim is not not_mapped:
        # A batched predicate: run every branch on the whole batch and select per example.
        index, *ops = [batching.bdim_at_front(x, d, axis_size) for x, d in safe_zip(vals, dims)]
        in_batched = [True] * len(ops)
        out_batched = [True] * len(branches[0].out_avals)
        branch_outs = []
        for i, b in enumerate(branches):
            b_batched, _ = batch_jaxpr_flags(b, axis_size, in_batched, out_batched)
            # Examples that do not take this branch see their inputs through stop_gradient, so
            # a NaN in the untaken branch's derivative cannot leak (JAX issue #1052).
            pred = lax.eq(index, np.array(i, np.int32))
            ops_ = [_bcast_select(pred, x, lax.stop_gradient(x)) for x in ops]
            branch_outs.append(eval_closed(b_batched, *ops_))
        out = [_bcast_select_n(index, *outs) for outs in zip(*branch_outs)]
        return out, [0] * len(out)
    ops_bat = [d is not not_mapped for d in op_dims]
    ops = [batching.moveaxis(x, d, 0) if b else x for x, d, b in safe_zip(ops, op_dims, ops_bat)]
    branches_out_bat = [batch_jaxpr_flags(b, axis_size, ops_bat, False)[1] for b in branches]
    out_bat = [any(bs) for bs in zip(*branches_out_bat)]
    branches_batched = tuple(batch_jaxpr_flags(b, axis_size, ops_bat, out_bat)[0]
                             for b in branches)
    out = cond_p.bind(index, *ops, branches=branches_batched)
    return out, [0 if b else not_mapped for b in out_bat]


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_lowering
def _cond_lowering(ctx, index, *args, branches):
    # the tokens of ordered effects go in (read from the enclosing scope) and come out first
    effs = mlir.ordered_effects_of(*[b.jaxpr for b in branches])
    tokens = mlir.get_tokens(effs)
    out_types = [mlir.token_type()] * len(effs) + [mlir.aval_to_ir_type(a)
                                                   for a in ctx.avals_out]
    # stablehlo.case runs region `index` (the last one if out of range); the regions read the
    # operands from the enclosing scope.
    case_op = mlir.hlo.CaseOp(out_types, index, len(branches))
    for i, b in enumerate(branches):
        block = case_op.regions[i].blocks.append()
        with mlir.ir.InsertionPoint(block):
            mlir.set_tokens(effs, tokens)
            with mlir.extend_name_stack(f"cond/branch_{i}_fun"):  # JAX's op names
                outs = mlir.lower_jaxpr(b.jaxpr, b.consts, args)
            mlir.hlo.return_([*mlir.get_tokens(effs), *outs])
    results = list(case_op.results)
    mlir.set_tokens(effs, results[:len(effs)])
    return results[len(effs):]


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_dce_rule
def _cond_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    branches = eqn.params["branches"]
    used_inputs = [False] * (len(eqn.invars) - 1)
    for b in branches:
        _, used = pe.dce_jaxpr(b.jaxpr, used_outputs)
        used_inputs = [u or v for u, v in safe_zip(used_inputs, used)]
    new_branches = tuple(pe.dce_closed_jaxpr(b, used_outputs, instantiate=used_inputs)[0]
                         for b in branches)
    return pe.dce_eqn(eqn, [True, *used_inputs], used_outputs, branches=new_branches)


cond_p = core.Primitive("cond")
cond_p.multiple_results = True
cond_p.def_impl(_cond_impl)
cond_p.def_abstract_eval(_cond_abstract_eval)
ad.primitive_jvps[cond_p] = _cond_jvp
ad.primitive_linearizations[cond_p] = _cond_linearize
pe.custom_partial_eval_rules[cond_p] = _cond_partial_eval
ad.primitive_transposes[cond_p] = _cond_transpose
batching.primitive_batchers[cond_p] = _cond_batch_rule
mlir.register_lowering(cond_p, _cond_lowering)
pe.dce_rules[cond_p] = _cond_dce_rule
# JAX: jax/_src/lax/control_flow/conditionals.py _cond_abstract_eval — the outputs have the
# branches' types, vma included; the operands get no pvary (the branches were traced on them)
core.vma_primitives.add(cond_p)


# JAX: jax/_src/lax/control_flow/conditionals.py platform_dependent
def platform_dependent(*args, default: Callable | None = None, **per_platform: Callable):
    """`per_platform[p](*args)` on the platform `p` ('cpu', 'tpu', 'cuda', 'rocm') that runs
    the program, else `default(*args)`. Every branch is traced; the choice is made when
    lowering, for the platform lowered for (with several, by the module's platform index:
    `platform_index_p`), so one export serves them all; eagerly, for the default device's.
    Identical branches are joined. Raises TypeError for a branch that is not callable,
    ValueError for 'gpu' (say 'cuda' or 'rocm'), NotImplementedError (when lowering) for a
    platform with no branch and no default."""
    platforms: list[list[str]] = []
    branches: list[Callable] = []
    for name, fun in per_platform.items():
        if not callable(fun):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
        for ps, b in zip(platforms, branches):
            if b == fun:
                ps.append(name)
                break
        else:
            platforms.append([name])
            branches.append(fun)
    keyed: tuple = tuple(tuple(ps) for ps in platforms)
    if default is not None:
        if not callable(default):
            raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
        branches.append(default)
        keyed += (None,)
    index = platform_index_p.bind(platforms=keyed)
    if to_concrete_value(index) is not None:  # eagerly: the default device's platform
        return branches[int(to_concrete_value(index))](*args)
    return switch(index, branches, *args)


def _platform_index_of(platform: str, platforms: tuple) -> int:
    for i, ps in enumerate(platforms):
        if ps is None or platform in ps:
            return i
    raise NotImplementedError(f"MLIR lowering rule for 'platform_index(platforms={platforms})' "
                              f"not implemented for platform {platform}")


def _platform_index_impl(*, platforms):
    return np.int32(_platform_index_of(mlir.default_platform(), platforms))


def _platform_index_abstract_eval(*, platforms):
    return ShapedArray((), np.dtype(np.int32))


# JAX: jax/_src/lax/control_flow/conditionals.py _platform_index_lowering
def _platform_index_lowering(ctx, *, platforms):
    # the index of the branch: a constant per platform, picked by lower_per_platform
    rules, default = {}, None
    for i, ps in enumerate(platforms):
        rule = lambda ctx, i=i: mlir.ir_constant(np.int32(i))
        if ps is None:
            default = rule
        else:
            rules.update({p: rule for p in ps})
    return mlir.lower_per_platform(ctx, f"platform_index(platforms={platforms})", rules,
                                   default, frozenset())


platform_index_p = core.Primitive("platform_index")
platform_index_p.def_impl(_platform_index_impl)
platform_index_p.def_abstract_eval(_platform_index_abstract_eval)
ad.defjvp_zero(platform_index_p)
mlir.register_lowering(platform_index_p, _platform_index_lowering)
# kept even when unread: its lowering is where an unsupported platform is refused, as JAX's
pe.dce_kept_whole.add(platform_index_p)
