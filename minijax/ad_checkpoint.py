"""Rematerialization: `checkpoint` (alias `remat`) and its saving policies.

`checkpoint(f)` binds the primitive `remat2`, which holds `f`'s jaxpr. It computes what `f`
computes; the difference shows under reverse mode. Linearizing an ordinary function saves every
intermediate the tangent computation reads (`cos x` for `sin x`) as a residual. Linearizing a
`remat2` equation saves only what the *policy* allows (by default: nothing but its inputs) and
puts the recomputation of everything else inside the `remat2[differentiated=True]` equation of
the linear program, so it runs again in the backward pass. The known/unknown split walks the
equations in program order (`partial_eval_jaxpr_custom`, as JAX's): the policy decides, per
known equation, whether its outputs are saved or the equation is recomputed in the backward
pass, where it runs among the tangent equations as in the program.

Mirrors jax/_src/ad_checkpoint.py. Taught in chapters/06-reverse-mode.md (rematerialization).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, dtypes, traceback_util
from minijax.ad_util import Zero
from minijax.api import vjp
from minijax.core import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.interpreters.partial_eval import Offloadable
from minijax.lax.lax import reduce_precision_p
from minijax.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten
from minijax.util import merge_lists, safe_zip, split_list

# ---------------------------------------------------------------------------------------------
# Policies: `policy(prim, *avals_in, **params) -> bool`, True if the equation's outputs may be
# saved as residuals
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/ad_checkpoint.py everything_saveable
def everything_saveable(*_, **__) -> bool:
    """Save every residual: differentiation behaves as if `checkpoint` were not used."""
    return True


# JAX: jax/_src/ad_checkpoint.py nothing_saveable
def nothing_saveable(*_, **__) -> bool:
    """Save only the inputs of the checkpointed function; recompute everything else. This is
    what `policy=None` means."""
    return False


# JAX: jax/_src/ad_checkpoint.py DotsSaveable
class DotsSaveable:
    """Save the results of matrix multiplications (`dot_general`), recompute the rest; with
    `only_if_no_batch_dims`, only those without batch dimensions."""

    def __init__(self, only_if_no_batch_dims: bool) -> None:
        self.only_if_no_batch_dims = only_if_no_batch_dims
        self.__name__ = ("dots_with_no_batch_dims_saveable" if only_if_no_batch_dims
                         else "dots_saveable")

    def __call__(self, prim, *avals, **params) -> bool:
        if prim.name != "dot_general":
            return False
        if self.only_if_no_batch_dims:
            (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
            return not lhs_batch and not rhs_batch
        return True

    def __repr__(self) -> str:  # as JAX's jaxprs print the policy
        return f"DotsSaveable(only_if_no_batch_dims={self.only_if_no_batch_dims})"


dots_saveable = DotsSaveable(False)
dots_with_no_batch_dims_saveable = DotsSaveable(True)


# JAX: jax/_src/ad_checkpoint.py SaveOnlyTheseNames
@dataclasses.dataclass(frozen=True)
class SaveOnlyTheseNames:
    """Save the values named (by `checkpoint_name`) with one of `saveable_names`, nothing
    else."""
    saveable_names: frozenset

    def __call__(self, prim, *_, **params) -> bool:
        return prim is name_p and params["name"] in self.saveable_names


# JAX: jax/_src/ad_checkpoint.py SaveAnyNamesButThese
@dataclasses.dataclass(frozen=True)
class SaveAnyNamesButThese:
    """Save every named value except those named one of `names`; unnamed values are
    recomputed."""
    names: frozenset

    def __call__(self, prim, *_, **params) -> bool:
        return prim is name_p and params["name"] not in self.names


# JAX: jax/_src/ad_checkpoint.py save_only_these_names
def save_only_these_names(*names_which_can_be_saved: str) -> SaveOnlyTheseNames:
    """A policy saving only the `checkpoint_name`d values among the names given."""
    return SaveOnlyTheseNames(frozenset(names_which_can_be_saved))


# JAX: jax/_src/ad_checkpoint.py save_any_names_but_these
def save_any_names_but_these(*names_not_to_save: str) -> SaveAnyNamesButThese:
    """A policy saving every `checkpoint_name`d value except the names given."""
    return SaveAnyNamesButThese(frozenset(names_not_to_save))


# JAX: jax/_src/ad_checkpoint.py save_anything_except_these_names
def save_anything_except_these_names(*names_not_to_save: str) -> Callable:
    """A policy meant to save every value but the `checkpoint_name`d ones given. As in JAX
    0.10.2 it saves everything: JAX's body ignores the names (`everything_saveable`)."""
    return everything_saveable


# JAX: jax/_src/ad_checkpoint.py offload_dot_with_no_batch_dims
def offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Callable:
    """`dots_with_no_batch_dims_saveable`, but the saved matmul results go to memory
    `offload_dst` (e.g. "pinned_host") instead of staying on the device."""
    def policy(prim, *avals, **params):
        if dots_with_no_batch_dims_saveable(prim, *avals, **params):
            return Offloadable(offload_src, offload_dst)
        return False
    return policy


# JAX: jax/_src/ad_checkpoint.py save_and_offload_only_these_names
def save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                      offload_src: str, offload_dst: str) -> Callable:
    """Save the values named in `names_which_can_be_saved`, offload those named in
    `names_which_can_be_offloaded` to memory `offload_dst`, recompute the rest. ValueError
    if a name is in both lists."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError(f"The names should be exclusive and should not intersect in "
                         f"`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
                         f"names_which_can_be_saved={saved}, names_which_can_be_offloaded="
                         f"{offloaded} and the intersection={saved & offloaded}")

    def policy(prim, *_, **params):
        if prim is name_p and params["name"] in saved:
            return True
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(offload_src, offload_dst)
        return False
    return policy


# JAX: jax/_src/ad_checkpoint.py save_from_both_policies
def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """A policy saving what either policy saves."""
    def policy(prim, *args, **params) -> bool:
        return bool(policy_1(prim, *args, **params) or policy_2(prim, *args, **params))
    return policy


# JAX: jax/_src/ad_checkpoint.py checkpoint_policies
checkpoint_policies = types.SimpleNamespace(
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
)


# ---------------------------------------------------------------------------------------------
# The user-facing wrapper
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/ad_checkpoint.py checkpoint — differs: no prevent_cse tuples, no static_argnames
def checkpoint(fun: Callable, *, prevent_cse: bool = True,
               policy: Callable[..., bool] | None = None,
               static_argnums: int | tuple[int, ...] = ()) -> Callable:
    """`fun`, recomputing its intermediate values in the backward pass instead of saving them.

    Args:
      fun: a function of pytrees of arrays.
      prevent_cse: keep XLA from merging the recomputation with the forward computation (an
        optimization barrier on the inputs of the differentiated `remat2` when lowered).
      policy: which intermediates may be saved, e.g. `checkpoint_policies.dots_saveable`;
        None saves nothing but the inputs.
      static_argnums: positional arguments passed as Python values (not traced).
    Returns: a function with `fun`'s signature. Raises TypeError for a non-bool prevent_cse and
    ValueError for out-of-range static_argnums.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if not isinstance(prevent_cse, bool):
        raise TypeError(f"prevent_cse must be a bool, got {type(prevent_cse)=}")

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def fun_remat(*args, **kwargs):
        nargs = len(args)
        if not all(-nargs <= i < nargs for i in static_argnums):
            raise ValueError("the `static_argnums` argument to `jax.checkpoint` / `jax.remat` "
                             "can only take integer values greater than or equal to "
                             f"`-len(args)` and less than `len(args)`, but got {static_argnums},"
                             f" while `len(args)` = {nargs}")
        static = {i % nargs: args[i] for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        flat, in_tree = tree_flatten((dyn, kwargs))
        store: list = []

        def flat_fun(*leaves):
            d, kw = tree_unflatten(in_tree, leaves)
            it = iter(d)
            out = fun(*[static[i] if i in static else next(it) for i in range(nargs)], **kw)
            out_flat, out_tree = tree_flatten(out)
            store[:] = [out_tree]
            return out_flat

        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
            flat_fun, [core.get_aval(x) for x in flat], fun_name=getattr(fun, "__name__", "fun"),
            purpose="checkpoint")
        outs = remat_p.bind(*consts, *flat, jaxpr=pe.convert_constvars_jaxpr(jaxpr),
                            prevent_cse=prevent_cse, differentiated=False, policy=policy)
        return tree_unflatten(store[0], outs)

    return fun_remat


# JAX: jax/_src/ad_checkpoint.py remat
def remat(fun: Callable, *, prevent_cse: bool = True, policy: Callable[..., bool] | None = None,
          static_argnums: int | tuple[int, ...] = ()) -> Callable:
    """Alias of `checkpoint`."""
    return checkpoint(fun, prevent_cse=prevent_cse, policy=policy,
                      static_argnums=static_argnums)


# ---------------------------------------------------------------------------------------------
# remat2 and its rules
# ---------------------------------------------------------------------------------------------

def _closed(jaxpr: Jaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, [])


def _bind_hoisted(closed: ClosedJaxpr, args: Sequence[Any], **params) -> list:
    """Bind remat2 on `closed`, passing its consts as leading arguments (its jaxpr param has no
    constvars, as in JAX)."""
    return remat_p.bind(*closed.consts, *args, jaxpr=pe.convert_constvars_jaxpr(closed.jaxpr),
                        **params)


def _remat_impl(*args, jaxpr, prevent_cse, differentiated, policy):
    return core.eval_jaxpr(jaxpr, [], *args)


def _remat_abstract_eval(*avals, jaxpr, prevent_cse, differentiated, policy):
    if len(avals) != len(jaxpr.invars) or not all(map(core.typematch, avals, jaxpr.in_avals)):
        raise TypeError(f"remat2: operands {[a.str_short() for a in avals]} do not match the "
                        f"jaxpr's inputs {[a.str_short() for a in jaxpr.in_avals]}")
    return jaxpr.out_avals


def _remat_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(_closed(jaxpr), nonzeros, instantiate=False)
    outs = _bind_hoisted(jvp_closed, [*primals, *(t for t in tangents if type(t) is not Zero)],
                         prevent_cse=prevent_cse, differentiated=differentiated, policy=policy)
    primals_out, nz_tangents_out = split_list(outs, [len(jaxpr.outvars)])
    it = iter(nz_tangents_out)
    return primals_out, [next(it) if nz else Zero(a.to_tangent_aval())
                         for nz, a in safe_zip(out_nz, jaxpr.out_avals)]


# JAX: jax/_src/ad_checkpoint.py _insert_reduce_precision
def _insert_reduce_precision(closed: ClosedJaxpr, num_res: int) -> ClosedJaxpr:
    """Round each float residual made by an equation that the known jaxpr also uses through
    `reduce_precision` to its own format, right where it is made, so that XLA cannot keep it
    in more precision in the forward pass than the saved copy has in the backward pass (as
    JAX does; inputs passed on as they are need none)."""
    jaxpr = closed.jaxpr
    used = {x for e in jaxpr.eqns for x in e.invars if isinstance(x, Var)}
    made = {o for e in jaxpr.eqns for o in e.outvars}
    eqns = list(jaxpr.eqns)
    for v in jaxpr.outvars[len(jaxpr.outvars) - num_res:]:
        if v not in made or v not in used or not np.issubdtype(v.aval.dtype, np.inexact):
            continue
        info = dtypes.finfo(v.aval.dtype)
        params = dict(exponent_bits=int(info.nexp), mantissa_bits=int(info.nmant))
        new = Var(v.aval)
        i = next(i for i, e in enumerate(eqns) if v in e.outvars)
        if eqns[i].primitive is reduce_precision_p and eqns[i].params == params:
            continue
        e = eqns[i]
        eqns[i] = JaxprEqn(e.invars, [new if o is v else o for o in e.outvars], e.primitive,
                           e.params, e.effects, e.source_info, e.ctx, e.name_stack)
        eqns.insert(i + 1, JaxprEqn([new], [v], reduce_precision_p, params))
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns), closed.consts)


# JAX: jax/_src/ad_checkpoint.py remat_partial_eval
def _remat_partial_eval(trace: pe.JaxprTrace, *tracers, jaxpr, prevent_cse, differentiated,
                        policy):
    unknowns = [trace.is_own(x) for x in tracers]
    jaxpr_known, jaxpr_staged, out_unknowns, out_inst, num_res = pe.partial_eval_jaxpr_custom(
        _closed(jaxpr), unknowns, [True] * len(unknowns), policy or nothing_saveable)
    # what the staged jaxpr does not read is neither computed nor passed; of its outputs only
    # the unknown ones are kept (not the known ones it also recomputes)
    jaxpr_unknown, used = pe.dce_jaxpr(
        jaxpr_staged.jaxpr, [u for u, i in safe_zip(out_unknowns, out_inst) if i])
    used_res, used_in = split_list(used, [num_res])
    n_known_out = len(jaxpr_known.jaxpr.outvars) - num_res
    jaxpr_known, _ = pe.dce_closed_jaxpr(
        jaxpr_known, [True] * n_known_out + used_res, instantiate=True)
    num_res = sum(used_res)
    jaxpr_known = _insert_reduce_precision(jaxpr_known, num_res)
    known_args = [x for x, u in safe_zip(tracers, unknowns) if not u]
    # The known part (the primal computation, plus the saved residuals) runs now, outside remat2.
    with core.set_current_trace(trace.parent_trace):
        known_outs = core.eval_jaxpr(jaxpr_known.jaxpr, jaxpr_known.consts, *known_args)
    known_outs, residuals = split_list(known_outs, [n_known_out])
    if not any(out_unknowns):
        return known_outs
    # The unknown part, recomputation included, is recorded as one remat2 equation.
    params = dict(jaxpr=jaxpr_unknown, prevent_cse=prevent_cse, differentiated=True,
                  policy=policy)
    staged_args = [x for x, u in safe_zip(tracers, used_in) if u]
    unknown_outs = trace.default_process_primitive(remat_p, [*residuals, *staged_args], params)
    return merge_lists(out_unknowns, known_outs, unknown_outs)


# JAX: jax/_src/interpreters/partial_eval.py call_partial_eval_custom_rule (with
# jax/_src/ad_checkpoint.py remat_partial_eval_custom_params_updater)
def _remat_partial_eval_custom(saveable, unks_in, inst_in, eqn):
    """A checkpoint inside another one, split by the outer policy (as JAX's); None where the
    split made constants, which a `remat2` jaxpr cannot hold (the ordinary rule splits it)."""
    known, staged, unks_out, inst_out, num_res = pe.partial_eval_jaxpr_custom(
        _closed(eqn.params["jaxpr"]), unks_in, inst_in, saveable)
    if known.consts:
        return None
    residuals = [Var(a) for a in staged.in_avals[:num_res]]
    eqn_known = eqn.replace(
        invars=[x for x, u in safe_zip(eqn.invars, unks_in) if not u],
        outvars=[*(v for v, u in safe_zip(eqn.outvars, unks_out) if not u), *residuals],
        params=dict(eqn.params, jaxpr=known.jaxpr))
    eqn_staged = eqn.replace(
        invars=[*residuals, *(x for x, i in safe_zip(eqn.invars, inst_in) if i)],
        outvars=[v for v, i in safe_zip(eqn.outvars, inst_out) if i],
        params=dict(eqn.params, jaxpr=staged.jaxpr, differentiated=True))
    not_passed = [x for x, i in safe_zip(eqn.invars, inst_in) if isinstance(x, Var) and not i]
    return eqn_known, eqn_staged, unks_out, inst_out, [*not_passed, *residuals]


# JAX: jax/_src/ad_checkpoint.py transpose_jaxpr
def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool]) -> ClosedJaxpr:
    """A jaxpr mapping (non-linear inputs, output cotangents) to the cotangents of the linear
    inputs. Its non-linear part (the recomputation) is split off by partial evaluation, as in
    JAX (so an inner `jit` that recomputes primal values and computes tangents is cut in two),
    and evaluated first, so it ends up in the transposed jaxpr; the linear part is then
    transposed by `ad.backward_pass`."""
    known_avals = [a for a, lin in safe_zip(closed.in_avals, linear) if not lin]
    ct_avals = [a.to_tangent_aval() for a in closed.out_avals]
    rematted, lin_jaxpr, out_unknowns, _ = pe.partial_eval_jaxpr_nounits(closed, linear)

    def transposed(*args):
        known, cts = split_list(args, [len(known_avals)])
        res = core.eval_jaxpr(rematted.jaxpr, rematted.consts, *known)[
            len(out_unknowns) - sum(out_unknowns):]
        undefined = [ad.UndefinedPrimal(a) for a in lin_jaxpr.in_avals[len(res):]]
        cts_in = ad.backward_pass(lin_jaxpr.jaxpr, lin_jaxpr.consts, [*res, *undefined],
                                  [c for c, u in safe_zip(cts, out_unknowns) if u])
        return [ad.instantiate_zeros(c) for c in cts_in[len(res):]]

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(transposed, known_avals + ct_avals,
                                                 purpose="transpose")
    return ClosedJaxpr(jaxpr, consts)


def _remat_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = [ad.is_undefined_primal(x) for x in args]
    t_closed = transpose_jaxpr(_closed(jaxpr), linear)
    known = [x for x, lin in safe_zip(args, linear) if not lin]
    outs = iter(_bind_hoisted(t_closed, [*known, *map(ad.instantiate_zeros, cts)],
                              prevent_cse=prevent_cse, differentiated=differentiated,
                              policy=policy))
    return [next(outs) if lin else None for lin in linear]


def _remat_batch_rule(vals, dims, *, axis_size, jaxpr, prevent_cse, differentiated, policy):
    b_closed, out_dims = batching.batch_jaxpr(_closed(jaxpr), dims, axis_size)
    outs = _bind_hoisted(b_closed, vals, prevent_cse=prevent_cse,
                         differentiated=differentiated, policy=policy)
    return outs, out_dims


def _remat_lowering(ctx, *args, jaxpr, prevent_cse, differentiated, policy):
    if differentiated and prevent_cse and args:
        # keep XLA from sharing the recomputation with the forward pass (JAX does the same)
        args = list(mlir.hlo.OptimizationBarrierOp(list(args)).results)
    return mlir.lower_jaxpr(jaxpr, [], args)


def _remat_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    inner, used_inputs = pe.dce_jaxpr(eqn.params["jaxpr"], used_outputs)
    return pe.dce_eqn(eqn, used_inputs, used_outputs, jaxpr=inner)


# JAX: jax/_src/ad_checkpoint.py remat_p (named 'remat2' there too)
remat_p = core.Primitive("remat2")
remat_p.pp_param_formatters = {"policy": lambda p: core.mask_addresses(repr(p))}  # as JAX's
remat_p.multiple_results = True
remat_p.def_impl(_remat_impl)
remat_p.def_abstract_eval(_remat_abstract_eval)
ad.primitive_jvps[remat_p] = _remat_jvp
pe.custom_partial_eval_rules[remat_p] = _remat_partial_eval
pe.partial_eval_jaxpr_custom_rules[remat_p] = _remat_partial_eval_custom
ad.primitive_transposes[remat_p] = _remat_transpose
batching.primitive_batchers[remat_p] = _remat_batch_rule
mlir.register_lowering(remat_p, _remat_lowering)
pe.dce_rules[remat_p] = _remat_dce_rule


# ---------------------------------------------------------------------------------------------
# Names for policies: checkpoint_name and the name primitive
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/ad_checkpoint.py checkpoint_name
def checkpoint_name(x, name: str):
    """`x` (a pytree of arrays) unchanged, each leaf tagged `name` in the jaxpr (`name[name=y]`)
    so that policies like `save_only_these_names(name)` can pick it as a residual."""
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


def _name_impl(x, *, name):
    return x


def _name_abstract_eval(x, *, name):
    return x


def _name_jvp(primals, tangents, *, name):
    (x,), (t,) = primals, tangents
    return name_p.bind(x, name=name), t  # only the primal value is named, as in JAX


def _name_batch_rule(vals, dims, *, axis_size, name):
    (x,), (d,) = vals, dims
    return name_p.bind(x, name=name), d


def _name_lowering(ctx, x, *, name):
    return x


# JAX: jax/_src/ad_checkpoint.py name_p
name_p = core.Primitive("name")
name_p.def_impl(_name_impl)
name_p.def_abstract_eval(_name_abstract_eval)
ad.primitive_jvps[name_p] = _name_jvp
batching.primitive_batchers[name_p] = _name_batch_rule
mlir.register_lowering(name_p, _name_lowering)


# ---------------------------------------------------------------------------------------------
# Which values reverse mode saves
# ---------------------------------------------------------------------------------------------

def _arg_names(f: Callable, args: tuple, kwargs: dict) -> list[str]:
    """A name per flat argument: the parameter's name plus the leaf's key path (`p['w']`)."""
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in tree_flatten_with_path((args, kwargs))[0]:
        (_, where), rest = path[:2], path[2:]
        base = getattr(where, "key", None)
        if base is None:
            i = where.idx
            base = params[i] if i < len(params) else f"args[{i}]"
        names.append(f"{base}{keystr(rest)}")
    return names


# JAX: jax/_src/ad_checkpoint.py saved_residuals — differs: no source locations
def saved_residuals(f: Callable, *args, **kwargs) -> list[tuple[core.ShapedArray, str]]:
    """The residuals `vjp(f, *args)` keeps for the backward pass, as (aval, where it comes
    from): a literal, a constant, an argument, a named value or the output of a primitive."""
    flat, in_tree = tree_flatten((args, kwargs))

    def residuals(*leaves):
        a, kw = tree_unflatten(in_tree, leaves)
        return tree_flatten(vjp(lambda *a: f(*a, **kw), *a)[1])[0]

    core.source_info_capture[0] += 1  # the equations record where the user bound them
    try:
        jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(residuals, [core.get_aval(x) for x in flat],
                                                purpose="saved_residuals")
    finally:
        core.source_info_capture[0] -= 1
    names = _arg_names(f, args, kwargs)
    # In JAX's order: literals, constants, arguments, then outputs of equations in program order
    res_vars = {v for v in jaxpr.outvars if not isinstance(v, core.Literal)}
    # a residual rounded by reduce_precision (_insert_reduce_precision) comes from its operand
    subst = {e.outvars[0]: e.invars[0] for e in jaxpr.eqns if e.primitive is reduce_precision_p}
    res_vars = {subst.get(v, v) for v in res_vars}
    result = [(v.aval, "from a literal") for v in jaxpr.outvars if isinstance(v, core.Literal)]
    result += [(v.aval, "from a constant") for v in jaxpr.constvars if v in res_vars]
    result += [(v.aval, f"from the argument {name}")
               for v, name in safe_zip(jaxpr.invars, names) if v in res_vars]
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if v in res_vars:
                what = (f"named '{eqn.params['name']}'" if eqn.primitive is name_p
                        else f"output of {eqn.primitive.name}")
                if eqn.primitive.name == "device_put":  # an offloaded residual
                    what += f" to {eqn.params['devices'][0]!r}"
                if eqn.source_info is not None:
                    what += f" from {eqn.source_info}"
                result.append((v.aval, what))
    return result


# JAX: jax/_src/ad_checkpoint.py print_saved_residuals
def print_saved_residuals(f: Callable, *args, **kwargs) -> None:
    """Print one line per residual of `vjp(f, *args)`: `f32[3] named 'y'`, `f32[3] output of
    cos`, `f32[3] from the argument x` (see saved_residuals)."""
    for aval, src in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {src}")
