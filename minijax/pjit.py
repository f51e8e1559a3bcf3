"""`jit`: trace once per input signature, lower to StableHLO, compile with XLA, run.

`jit_p` is a primitive whose param is a jaxpr. Binding it under EvalTrace compiles and runs
that jaxpr; under the other traces its rules (jvp, partial eval, transpose, batching, lowering)
transform the *inner jaxpr* and bind `jit_p` again, so every transformation composes with jit
in either order. Mirrors jax/_src/pjit.py. Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
import types
import warnings
import weakref
from typing import Any, Callable, Sequence

from minijax import _tree_fastpath, api_util, array as array_mod, compiler, core, traceback_util
from minijax.ad_util import Zero
from minijax.array import Array, execution_results
from minijax.config import config
from minijax.core import ClosedJaxpr, Tracer, eval_trace, trace_ctx
from minijax.interpreters import ad, batching, mlir, partial_eval as pe, pxla
from minijax.mesh import AxisType, Mesh, get_abstract_mesh, get_concrete_mesh, set_mesh
from minijax.named_sharding import IndivisibleError, NamedSharding, Sharding
from minijax.partition_spec import PartitionSpec, _axes_of, _Unconstrained
from minijax.sharding_impls import (
    SingleDeviceSharding,
    aval_sharding,
    canonicalize_out_sharding,
    canonicalize_sharding,
    normalize_to_ndim,
)
from minijax.stages import Lowered, Traced, cache_stats, prune_unused_inputs
from minijax.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten
from minijax.util import safe_zip, split_list

# JAX: jax/_src/dispatch.py logger — jax_log_compiles writes here, at WARNING as JAX does
logger = logging.getLogger("minijax")


@api_util.identity_cache
def _const_free(closed: ClosedJaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])


class _Consts(tuple):
    """A jit's consts as a cache key: equal when they are the same objects."""
    __hash__ = lambda self: hash(tuple(map(id, self)))
    __eq__ = lambda self, other: len(self) == len(other) and all(
        a is b for a, b in zip(self, other))


# JAX: jax/_src/pjit.py _trace_for_jit — consts that are no tracers stay closed over
@api_util.identity_cache
def _reclosed(closed: ClosedJaxpr, n: int, consts: tuple) -> ClosedJaxpr:
    """The jaxpr whose `n` leading arguments are `consts` (arrays, no tracers), closed over
    them again: a nested call staged into a jaxpr prints them as its constvars, as JAX's."""
    j = closed.jaxpr
    return ClosedJaxpr(core.Jaxpr(j.invars[:n], j.invars[n:], j.outvars, j.eqns, j.effects),
                       list(consts))


def _hoist_consts(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn a ClosedJaxpr's consts into leading arguments: (const-free jaxpr, consts).

    Memoized on the jaxpr's identity, so the same transformed jaxpr always yields the same
    const-free jaxpr object, and the executable cache (keyed by identity) hits."""
    if not closed.consts:
        return closed, []
    return _const_free(closed), list(closed.consts)


def bind_jit(closed: ClosedJaxpr, args: Sequence[Any], name: str, trace=None) -> list:
    """Bind jit_p on `args` (nothing donated), passing the jaxpr's consts as leading args."""
    closed, consts = _hoist_consts(closed)
    params = dict(jaxpr=closed, name=name, donated_invars=(False,) * (len(consts) + len(args)))
    trace = trace or core.current_trace()
    return jit_p.bind_with_trace(trace, [*consts, *args], params)


# ---------------------------------------------------------------------------------------------
# jit_p and its rules
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pjit.py _resolve_and_lower + compile — differs: cached on the jaxpr's identity
@api_util.identity_cache
def _executor(jaxpr: ClosedJaxpr, donated_invars: tuple[bool, ...], name: str,
              in_shardings: tuple = (), out_shardings: tuple = ()
              ) -> pxla.ExecuteReplicated:
    """Lower and compile `jaxpr` once; the executor every call of it goes through. With
    shardings (per input/output a NamedSharding or None), the program for those layouts."""
    donated = donated_invars if any(donated_invars) else ()
    return _log_compile(name, jaxpr, lambda: Lowered(jaxpr, None, None, name, donated,
                                                     in_shardings, out_shardings).compile())


def _log_compile(name: str, jaxpr: ClosedJaxpr, compile_fn: Callable):
    """compile_fn()'s executor; with jax_log_compiles, logged with the types and the time."""
    if not config.jax_log_compiles:
        return compile_fn()._executor
    types = ", ".join(a.str_short() for a in jaxpr.in_avals)
    logger.warning("Compiling jit(%s) with global shapes and types (%s)", name, types)
    t0 = time.perf_counter()
    executor = compile_fn()._executor
    logger.warning("Finished XLA compilation of jit(%s) in %.6f sec", name,
                   time.perf_counter() - t0)
    return executor


# JAX: jax/_src/pjit.py _pjit_call_impl
def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str, donated_invars: tuple[bool, ...]):
    if array_mod.sharded_arrays_made:
        # arguments laid out on a mesh keep their layouts (as a top-level call does)
        shardings = tuple(x._sharding if type(x) is Array else None for x in args)
        if any(s is not None for s in shardings):
            return _executor(jaxpr, donated_invars, name, shardings,
                             (None,) * len(jaxpr.out_avals))(args)
    return _executor(jaxpr, donated_invars, name)(args)


def _jit_abstract_eval(*avals, jaxpr: ClosedJaxpr, name: str, donated_invars=()):
    for i, (a, b) in enumerate(zip(avals, jaxpr.in_avals)):
        if not core.typematch(a, b):
            raise TypeError(f"jit {name}: argument {i} has type {a.str_short()}, but the "
                            f"jaxpr expects {b.str_short()}")
    return jaxpr.out_avals


@api_util.identity_cache
def _jvp_of(jaxpr: ClosedJaxpr, nonzeros: tuple[bool, ...]):
    return ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)


def _jit_jvp(primals, tangents, *, jaxpr, name, donated_invars):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jvp_closed, out_nz = _jvp_of(jaxpr, nonzeros)
    nz_tangents = [t for t in tangents if type(t) is not Zero]
    outs = bind_jit(jvp_closed, [*primals, *nz_tangents], name)
    primals_out, tangents_nz = split_list(outs, [len(jaxpr.out_avals)])
    it = iter(tangents_nz)
    tangents_out = [next(it) if nz else Zero(a.to_tangent_aval())
                    for nz, a in safe_zip(out_nz, jaxpr.out_avals)]
    return primals_out, tangents_out


@api_util.identity_cache
def _partial_eval_of(jaxpr: ClosedJaxpr, unknowns: tuple[bool, ...], toposort: bool):
    return pe.partial_eval_jaxpr_nounits(jaxpr, unknowns, toposort_residuals=toposort)


# JAX: jax/_src/pjit.py _pjit_partial_eval (in_fwd_res) — a residual that is a known input
# is passed from outside instead of being returned by the known call
@api_util.identity_cache
def _partial_eval_forwarding_of(jaxpr: ClosedJaxpr, unknowns: tuple[bool, ...],
                                toposort: bool):
    """`_partial_eval_of`, with the outputs (known values and residuals) that are known inputs
    dropped from the known jaxpr's outputs, and its dead equations removed. Also returns, per
    output of the known jaxpr as made, the position of the known input it forwards (or
    None)."""
    jaxpr_known, jaxpr_unknown, out_unknowns, num_res = _partial_eval_of(jaxpr, unknowns,
                                                                         toposort)
    jk = jaxpr_known.jaxpr
    in_pos = {v: i for i, v in enumerate(jk.invars)}
    fwd = [in_pos.get(v) if isinstance(v, core.Var) else None for v in jk.outvars]
    kept = [v for v, f in zip(jk.outvars, fwd) if f is None]  # known outputs too, as JAX's
    jk = core.Jaxpr(jk.constvars, jk.invars, kept, jk.eqns)
    # as JAX: the known jaxpr loses the equations nothing reads (e.g. a jvp's unused zeros)
    jk, _ = pe.dce_jaxpr(jk, instantiate=True)
    jaxpr_known = ClosedJaxpr(jk, jaxpr_known.consts)
    if toposort:  # as JAX's _pjit_partial_eval (pe.move_binders_to_back): residuals last;
        # linearized (JAX's _pjit_linearize), the tangent call takes them first
        ju = jaxpr_unknown.jaxpr
        ju = core.Jaxpr(ju.constvars, ju.invars[num_res:] + ju.invars[:num_res], ju.outvars,
                        ju.eqns, ju.effects)
        jaxpr_unknown = ClosedJaxpr(ju, jaxpr_unknown.consts)
    return jaxpr_known, jaxpr_unknown, out_unknowns, num_res, fwd


def _jit_partial_eval(trace: pe.JaxprTrace, *args, jaxpr, name, donated_invars):
    unknowns = tuple(trace.is_own(x) for x in args)
    jaxpr_known, jaxpr_unknown, out_unknowns, num_res, fwd = \
        _partial_eval_forwarding_of(jaxpr, unknowns, trace.toposort_residuals)
    known_args = [x for x, u in zip(args, unknowns) if not u]
    known_outs = iter(bind_jit(jaxpr_known, known_args, name, trace=trace.parent_trace))
    num_known_vals = len(out_unknowns) - sum(out_unknowns)
    known_vals, residuals = split_list(
        [known_args[f] if f is not None else next(known_outs) for f in fwd], [num_known_vals])
    unknown_args = [x for x, u in zip(args, unknowns) if u]
    if any(out_unknowns):
        unknown_ins = ([*unknown_args, *residuals] if trace.toposort_residuals
                       else [*residuals, *unknown_args])
        unknown_outs = trace.default_process_primitive(
            jit_p, unknown_ins,
            dict(jaxpr=jaxpr_unknown, name=name, donated_invars=(False,) * len(unknown_ins)))
    else:
        unknown_outs = []
    kit, uit = iter(known_vals), iter(unknown_outs)
    return [next(uit) if u else next(kit) for u in out_unknowns]


# JAX: jax/_src/interpreters/partial_eval.py _closed_jaxpr_partial_eval_custom_cached
@api_util.identity_cache
def _partial_eval_custom_of(jaxpr: ClosedJaxpr, unks_in: tuple[bool, ...],
                            inst_in: tuple[bool, ...], saveable: Callable):
    """`pe.partial_eval_jaxpr_custom` of a jit's jaxpr, with the residuals that are known
    inputs or known outputs (`in_fwd`, `out_fwd`: their positions, or None) dropped from the
    known jaxpr's outputs: the staged call reads them from outside."""
    known, staged, unks_out, inst_out, num_res = pe.partial_eval_jaxpr_custom(
        jaxpr, unks_in, inst_in, saveable)
    jk = known.jaxpr
    outs, res = split_list(jk.outvars, [len(jk.outvars) - num_res])
    in_pos = {v: i for i, v in enumerate(jk.invars)}
    out_pos = {v: i for i, v in enumerate(outs) if isinstance(v, core.Var)}
    in_fwd, out_fwd = [in_pos.get(v) for v in res], [out_pos.get(v) for v in res]
    kept = [v for v, f, g in zip(res, in_fwd, out_fwd) if f is g is None]
    known = ClosedJaxpr(core.Jaxpr(jk.constvars, jk.invars, [*outs, *kept], jk.eqns),
                        known.consts)
    return known, staged, unks_out, inst_out, num_res, in_fwd, out_fwd


# JAX: jax/_src/interpreters/partial_eval.py closed_call_partial_eval_custom_rule (with
# jax/_src/pjit.py _pjit_partial_eval_custom_params_updater)
def _jit_partial_eval_custom(saveable, unks_in, inst_in, eqn):
    known, staged, unks_out, inst_out, num_res, in_fwd, out_fwd = _partial_eval_custom_of(
        eqn.params["jaxpr"], tuple(unks_in), tuple(inst_in), saveable)
    ins_known = [x for x, u in zip(eqn.invars, unks_in) if not u]
    ins_staged = [x for x, i in zip(eqn.invars, inst_in) if i]
    outs_known = [v for v, u in zip(eqn.outvars, unks_out) if not u]
    res_binders = [core.Var(a) for a, f, g in zip(staged.in_avals, in_fwd, out_fwd)
                   if f is g is None]
    fresh = iter(res_binders)
    res_vars = [outs_known[g] if g is not None else ins_known[f] if f is not None
                else next(fresh) for f, g in zip(in_fwd, out_fwd)]
    donated = eqn.params["donated_invars"]
    eqn_known = eqn.replace(
        invars=ins_known, outvars=[*outs_known, *res_binders],
        params=dict(eqn.params, jaxpr=known,
                    donated_invars=tuple(d for d, u in zip(donated, unks_in) if not u)))
    eqn_staged = eqn.replace(
        invars=[*res_vars, *ins_staged],
        outvars=[v for v, i in zip(eqn.outvars, inst_out) if i],
        params=dict(eqn.params, jaxpr=staged, donated_invars=(False,) * num_res + tuple(
            d for d, i in zip(donated, inst_in) if i)))
    not_passed = [x for x, i in zip(eqn.invars, inst_in) if isinstance(x, core.Var) and not i]
    return eqn_known, eqn_staged, unks_out, inst_out, [*not_passed, *res_vars]


@api_util.identity_cache
def _transpose_of(jaxpr: ClosedJaxpr, undefined: tuple[bool, ...]):
    in_avals = jaxpr.in_avals
    known_avals = [a for a, u in zip(in_avals, undefined) if not u]
    ct_avals = [a.to_tangent_aval() for a in jaxpr.out_avals]

    def transposed(*args):
        known, cts = split_list(args, [len(known_avals)])
        kit = iter(known)
        primals_in = [ad.UndefinedPrimal(a) if u else next(kit)
                      for a, u in zip(in_avals, undefined)]
        cts_in = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, primals_in, cts)
        return [ad.instantiate_zeros(c) for c, u in zip(cts_in, undefined) if u]

    t_jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(transposed, known_avals + ct_avals,
                                                   purpose="transpose")
    return ClosedJaxpr(t_jaxpr, consts)


def _jit_transpose(cts, *args, jaxpr, name, donated_invars):
    undefined = tuple(ad.is_undefined_primal(x) for x in args)
    t_closed = _transpose_of(jaxpr, undefined)
    known = [x for x in args if not ad.is_undefined_primal(x)]
    cts = [ad.instantiate_zeros(c) for c in cts]
    outs = iter(bind_jit(t_closed, [*known, *cts], name))
    return [next(outs) if u else None for u in undefined]


@api_util.identity_cache
def _batch_of(jaxpr: ClosedJaxpr, dims: tuple, axis_size: int):
    # outputs that do not depend on a mapped input stay unbatched (JAX: instantiate=False)
    b_closed, out_dims = batching.batch_jaxpr(jaxpr, dims, axis_size)
    return b_closed, tuple(out_dims)


def _jit_batch_rule(vals, dims, *, axis_size, jaxpr, name, donated_invars):
    b_closed, out_dims = _batch_of(jaxpr, tuple(dims), axis_size)
    outs = bind_jit(b_closed, vals, name)
    return outs, list(out_dims)


def _jit_lowering(ctx, *args, jaxpr, name, donated_invars):
    # JAX: jax/_src/pjit.py _pjit_lowering — differs: inlined into the caller, its ops named
    # `.../jit(name)/...` as XLA names those of JAX's called function once inlined
    with mlir.extend_name_stack(f"jit({name})"):
        return mlir.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts, args)


@api_util.identity_cache
def _dce_of(closed: ClosedJaxpr, used_outputs: tuple[bool, ...]):
    return pe.dce_closed_jaxpr(closed, used_outputs)


def _jit_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    # memoized, so DCE keeps handing out the same inner jaxpr object (caches key on identity)
    new_closed, used_inputs = _dce_of(eqn.params["jaxpr"], tuple(used_outputs))
    donated = tuple(d for d, u in zip(eqn.params["donated_invars"], used_inputs) if u)
    return pe.dce_eqn(eqn, used_inputs, used_outputs, jaxpr=new_closed, donated_invars=donated)


jit_p = core.Primitive("jit")
jit_p.multiple_results = True
jit_p.pp_hide_if_empty = ("donated_invars",)
jit_p.pp_first_params = ("name",)  # JAX prints jit's name before its jaxpr
jit_p.pp_inner_names_like_outer = True  # JAX: jax/_src/pjit.py _pjit_pp_rule
jit_p.def_impl(_jit_impl)
jit_p.def_abstract_eval(_jit_abstract_eval)
ad.primitive_jvps[jit_p] = _jit_jvp
pe.custom_partial_eval_rules[jit_p] = _jit_partial_eval
pe.partial_eval_jaxpr_custom_rules[jit_p] = _jit_partial_eval_custom
ad.primitive_transposes[jit_p] = _jit_transpose
batching.primitive_batchers[jit_p] = _jit_batch_rule
mlir.register_lowering(jit_p, _jit_lowering)
pe.dce_rules[jit_p] = _jit_dce_rule


# ---------------------------------------------------------------------------------------------
# The user-facing wrapper and its stages
# ---------------------------------------------------------------------------------------------

_ONE_LEAF = tree_flatten(0)[1]

# fun -> {jit options: (trace cache, fast cache)}: every jit(fun) with the same options shares
# the caches (as JAX keys its caches on the function and jit's options, not on the wrapper), and
# they die with the function (held weakly), taking their jaxprs and executables with them.
_jit_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _leaf_avals(leaves) -> tuple | None:
    try:
        return tuple([x.aval if type(x) is Array else core.get_aval(x) for x in leaves])
    except TypeError:
        return None


def _pytree_key(args: tuple, last: tuple | None) -> tuple[Sequence, tuple, Any]:
    """(leaves, fast-cache key, pytree structure) of arguments that are not all Arrays. The
    key is (structure, the leaves' avals). When `last`, the previous call, had a structure of
    builtin containers, its specialised flatten (`_tree_fastpath.specialize`) checks and
    flattens these arguments with no PyTreeDef built: the key then holds the previous call's
    structure itself, which compares by identity. (JAX's C++ dispatch, jaxlib's PjitFunction,
    flattens with its C++ PyTreeDef instead.)"""
    if last is not None and last[4] is not None:
        leaves = last[4](args)
        if leaves is not None:
            avals = [x.aval for x in leaves if type(x) is Array]
            if len(avals) == len(leaves):
                return leaves, (last[3], tuple(avals)), last[3]
    leaves, in_tree = tree_flatten(args)
    return leaves, (in_tree, _leaf_avals(leaves)), in_tree  # None: _get_jaxpr reports it


def _unflattener(out_tree) -> Callable:
    """outs -> the output pytree: code written for this structure, with its own dict keys,
    where it is made of builtin containers (`_tree_fastpath.specialize`), else
    `tree_unflatten`. Once per compiled signature."""
    found = _tree_fastpath.specialize(out_tree)
    return found[1] if found else functools.partial(tree_unflatten, out_tree)


# JAX: jax/_src/pjit.py _get_fastpath_data
def _get_fastpath_data(executor, consts, kept, unflatten) -> pxla.MeshExecutableFastpathData | None:
    """What `JitWrapped.__call__` needs to run `executor`'s program itself; None where the
    executor's own steps are needed: a subclass's program (a mesh, a committed device, other
    memories), effects, donation, closed-over arrays, float0 outputs."""
    if (type(executor) is not pxla.ExecuteReplicated or executor.has_effects or consts
            or executor.donated is not None or executor.handlers is None):
        return None
    return pxla.MeshExecutableFastpathData(executor.executable, executor.handlers,
                                           executor.out_avals, unflatten, kept)


def _caches_for(fun: Callable, options: tuple) -> tuple[dict, dict]:
    try:
        per_fun = _jit_caches.get(fun)
        if per_fun is None:
            per_fun = _jit_caches[fun] = {}
    except TypeError:  # not weakly referenceable or not hashable: the wrapper's own caches
        return {}, {}
    return per_fun.setdefault(options, ({}, {}))


# JAX: jax/_src/pjit.py JitWrapped (the object `jax.jit` returns)
class JitWrapped:
    """`jit(fun)`: call it like `fun`. Traces once per (pytree structure, input avals incl.
    weak_type, static arguments), compiles once per traced jaxpr, and then only dispatches."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 donate_argnames=(), in_shardings=None, out_shardings=None,
                 inline: bool = False, keep_unused: bool = False) -> None:
        self.fun = fun
        self.inline = inline
        self.keep_unused = keep_unused
        # PartitionSpecs stay as given: they mean the mesh in context when called
        self._given_in_shardings = _check_shardings(in_shardings, "in_shardings")
        self._given_out_shardings = _check_shardings(out_shardings, "out_shardings")
        self._specs_need_mesh = any(isinstance(s, PartitionSpec) for s in tree_flatten(
            (self._given_in_shardings, self._given_out_shardings),
            is_leaf=lambda s: isinstance(s, PartitionSpec))[0])
        self._has_shardings = in_shardings is not None or out_shardings is not None
        self.__name__ = getattr(fun, "__name__", "fun")
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None
        # an argument marked static (or donated) by position is also marked by name, and the
        # other way round, however it is passed (JAX: infer_argnums_and_argnames)
        self.static_argnums, self.static_argnames = api_util.infer_argnums_and_argnames(
            self._signature, api_util.ensure_index_tuple(static_argnums),
            (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames))
        self.donate_argnums, self.donate_argnames = api_util.infer_argnums_and_argnames(
            self._signature, api_util.ensure_index_tuple(donate_argnums),
            (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames))
        # (pytree structure, avals, static arguments and their types) -> (jaxpr, consts,
        # out_tree, donated); (avals) or (pytree structure, avals) -> run(leaves), the whole
        # call for top-level calls with no static or keyword arguments (what JAX's C++
        # dispatch caches). Shared by every jit of `fun` with these options.
        # ... and with the options that change tracing (x64, dtype promotion): JAX's
        # trace_context. The caches are refetched when `config.trace_context` changes.
        self._options = (self.static_argnums, self.static_argnames, self.donate_argnums,
                         self.donate_argnames, _sharding_key(self._given_in_shardings),
                         _sharding_key(self._given_out_shardings), keep_unused)
        self._use_trace_context(config.trace_context)

    @property
    def in_shardings(self):
        return (_resolve_specs(self._given_in_shardings, "in_shardings")
                if self._specs_need_mesh else self._given_in_shardings)

    @property
    def out_shardings(self):
        return (_resolve_specs(self._given_out_shardings, "out_shardings")
                if self._specs_need_mesh else self._given_out_shardings)

    def _use_trace_context(self, ctx: tuple) -> None:
        self._trace_context = ctx
        self._cache, self._fast_cache = _caches_for(self.fun, self._options + ctx)
        # the last call: (key, run, fastpath data, its arguments' pytree structure (None:
        # all Arrays), the structure's specialised flatten or None)
        self._last_call: tuple | None = None

    def _donated_leaves(self, args, kwargs, statics) -> tuple[bool, ...]:
        """One flag per flat dynamic leaf: does it belong to a donated argument?"""
        if not self.donate_argnums and not self.donate_argnames:
            return ()
        static_nums = {i for i, _ in statics}
        nargs = len(args)
        donate = {i % nargs for i in self.donate_argnums if -nargs <= i < nargs}
        flags: list[bool] = []
        for i, a in enumerate(args):
            if i not in static_nums:
                flags += [i in donate] * len(tree_flatten(a)[0])
        for k in sorted(kwargs):
            if k not in self.static_argnames:
                flags += [k in self.donate_argnames] * len(tree_flatten(kwargs[k])[0])
        return tuple(flags)

    def __get__(self, obj, objtype=None):
        # a jitted method binds to its instance, as a plain function does
        return self if obj is None else types.MethodType(self, obj)

    def _get_jaxpr(self, args, kwargs):
        if config.trace_context is not self._trace_context:
            self._use_trace_context(config.trace_context)
        statics, static_kw, dyn_args, dyn_kwargs = api_util.split_static(
            args, kwargs, self.static_argnums, self.static_argnames)
        flat, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        try:
            avals = tuple(core.get_aval(x) for x in flat)
        except TypeError as e:
            raise self._argument_error(args, dyn_kwargs, statics, e) from None
        # static values of different types (2 and 2.0) are different keys, as in JAX
        static_types = tuple(type(v) for _, v in statics + static_kw)
        # the mesh in context too: tracing types values over it (JAX keys on its ctx_mesh)
        key = (in_tree, avals, statics, static_kw, static_types, get_abstract_mesh())
        hit = self._cache.get(key)
        if hit is not None:
            return hit, flat, in_tree
        if self.in_shardings is not None:  # JAX checks them against the types before tracing
            names = ([p.name for p in self._signature.parameters.values()]
                     if self._signature is not None else [])
            _check_fit(self._leaf_in_shardings([None] * len(flat), [None] * len(flat), in_tree),
                       avals, in_tree, "arguments", names)
        reason = (_explain_cache_miss(self.__name__, key, list(self._cache))
                  if config.jax_explain_cache_misses or config.jax_log_compiles else None)
        t0 = time.perf_counter()
        out_tree_box = []

        def flat_fun(*dyn_flat):
            d_args, d_kwargs = tree_unflatten(in_tree, dyn_flat)
            out = self.fun(*api_util.merge_static(statics, d_args), **d_kwargs, **dict(static_kw))
            out_flat, out_tree = tree_flatten(out)
            for x in out_flat:
                if not isinstance(x, Tracer):
                    try:
                        core.get_aval(x)
                    except TypeError:
                        raise TypeError(f"function {self._where()} traced for jit returned a "
                                        f"value of type {type(x)}, which is not a valid "
                                        "minijax type") from None
            out_tree_box.append(out_tree)
            return out_flat

        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_fun, avals, fun_name=self.__name__,
                                                     purpose="jit")
        cache_stats["traces"] += 1
        if config.jax_log_compiles:
            logger.warning("Finished tracing %s for jit in %.6f sec (%s)", self.__name__,
                           time.perf_counter() - t0, reason)
        closed, hoisted = _hoist_consts(ClosedJaxpr(jaxpr, consts))
        donated = self._donated_leaves(args, kwargs, statics)
        donated = (False,) * len(hoisted) + (donated or (False,) * len(flat))
        entry = (closed, hoisted, out_tree_box[0], donated)
        if not any(isinstance(c, Tracer) for c in hoisted):
            self._cache[key] = entry
        return entry, flat, in_tree

    def _where(self) -> str:
        code = getattr(self.fun, "__code__", None)
        where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
        return f"{self.__name__}{where}"

    def _argument_error(self, args, dyn_kwargs, statics, error: TypeError) -> TypeError:
        """The error for a dynamic argument that is not an array: which one, at which path."""
        static_nums = {i for i, _ in statics}
        names = ([p.name for p in self._signature.parameters.values()]
                 if self._signature is not None else [])
        parts = [(names[i] if i < len(names) else f"args[{i}]", a)
                 for i, a in enumerate(args) if i not in static_nums]
        parts += sorted(dyn_kwargs.items())
        path, bad = "?", None
        for name, a in parts:
            leaves = tree_flatten(a)[0]
            for j, x in enumerate(leaves):
                try:
                    core.get_aval(x)
                except TypeError:
                    path, bad = (name if len(leaves) == 1 else f"{name} (leaf {j})"), x
                    break
            if bad is not None:
                break
        return TypeError(
            f"Error interpreting argument to {self._where()} as an abstract array. The "
            f"problematic value is of type {type(bad)} and was passed to the function at path "
            f"{path}.\nThis typically means that a jit-wrapped function was called with a "
            "non-array argument, and this argument was not marked as static using the "
            f"static_argnums or static_argnames parameters of jit. ({error})")

    def _runner(self, entry, leaves, in_tree) -> tuple | None:
        """(run(leaves), fastpath data) for a top-level call of a cached signature: run calls
        the executor, with the closed-over arrays as leading inputs; the data (or None) lets
        `__call__` run a plain program itself. None if a const is a tracer: bind reports it."""
        closed, consts, out_tree, donated = entry
        if any(isinstance(c, Tracer) for c in consts):
            return None
        arg_shardings = [x._sharding if type(x) is Array else None for x in leaves]
        consts = [c if type(c) is Array else Array(a, core.to_numpy(c, a))
                  for c, a in zip(consts, closed.in_avals)]
        n = len(consts)
        # as JAX (keep_unused=False): arguments nothing reads are no inputs of the executable
        pruned = None if self.keep_unused else prune_unused_inputs(closed, n)
        kept = None
        if pruned is not None and pruned[1] is not None:  # (else the jaxpr itself: the
            closed, kept = pruned  # executor is cached on its identity)
            donated = donated[:n] + tuple(donated[n + i] for i in kept)
        if self._has_shardings or any(s is not None for s in arg_shardings):
            leaf_sh = self._leaf_in_shardings(leaves, arg_shardings, in_tree)
            out_sh = _leaf_out_shardings(self.out_shardings, out_tree)
            _check_fit(out_sh, closed.out_avals, out_tree, "outputs")  # before lowering
            self._check_devices(leaves, leaf_sh, in_tree)
            if kept is not None:
                leaf_sh = tuple(leaf_sh[i] for i in kept)
            executor = _executor(closed, donated, self.__name__, (None,) * n + leaf_sh, out_sh)
        else:
            executor = _executor(closed, donated, self.__name__)
        unflatten = None if out_tree == _ONE_LEAF else _unflattener(out_tree)
        fast = _get_fastpath_data(executor, consts, kept, unflatten)
        if kept is not None:
            run = executor
            executor = lambda leaves, consts: run([leaves[i] for i in kept], consts)
        if unflatten is None:
            return (lambda leaves: executor(leaves, consts)[0]), fast
        return (lambda leaves: unflatten(executor(leaves, consts))), fast

    # JAX: jax/_src/interpreters/pxla.py _get_and_check_device_assignment
    def _check_devices(self, leaves, shardings, in_tree) -> None:
        """Every sharding (an argument's own or one `in_shardings` gives) on the same devices
        in the same order; else JAX's ValueError naming each side's device ids."""
        first = None
        for i, (x, s) in enumerate(zip(leaves, shardings)):
            if s is None and type(x) is Array and x._committed:
                s = x.sharding  # committed to the default device
            if not isinstance(s, Sharding):
                continue
            ids = [d.id for d in s._device_assignment]
            if first is None:
                first = i, ids
            elif ids != first[1]:
                platform = s._device_assignment[0].platform.upper()
                raise ValueError("Received incompatible devices for jitted computation. Got "
                                 f"{self._device_source(leaves, first[0], in_tree)} with "
                                 f"device ids {first[1]} on platform {platform} and "
                                 f"{self._device_source(leaves, i, in_tree)} with device ids "
                                 f"{ids} on platform {platform}")

    def _device_source(self, leaves, i, in_tree) -> str:
        x = leaves[i]
        if type(x) is not Array or self.in_shardings is not None:
            return "ARG_SHARDING"
        positions, _ = tree_unflatten(in_tree, list(range(len(leaves))))
        names = ([p.name for p in self._signature.parameters.values()]
                 if self._signature is not None else [])
        arg = next(k for k, p in enumerate(positions) if i in tree_flatten(p)[0])
        name = names[arg] if arg < len(names) else f"args[{arg}]"
        return (f"argument {name} of {getattr(self.fun, '__qualname__', self.__name__)} with "
                f"shape {x.dtype.name}[{','.join(map(str, x.shape))}] and")

    def _leaf_in_shardings(self, leaves, arg_shardings, in_tree) -> tuple:
        """Per flat argument leaf: the sharding `in_shardings` gives it (one sharding for all
        arguments, or a tuple with one entry per positional argument, each a sharding, None
        (the argument's own) or a pytree prefix of the argument), else the argument's own
        NamedSharding, else None (the partitioner chooses)."""
        given = self.in_shardings
        if given is None:
            return tuple(arg_shardings)
        if isinstance(given, Sharding):
            _check_committed(leaves, (given,) * len(leaves))
            return (given,) * len(leaves)
        positions, _ = tree_unflatten(in_tree, list(range(len(leaves))))
        if len(given) != len(positions):
            raise ValueError(
                "pjit in_shardings specification must be a tree prefix of the positional "
                "arguments tuple. In particular, pjit in_shardings must either be a Sharding, "
                "a PartitionSpec, or a tuple of length equal to the number of positional "
                "arguments. But pjit in_shardings is the wrong length: got a tuple or list of "
                f"length {len(given)} for an args tuple of length {len(positions)}.")
        out = list(arg_shardings)
        _broadcast_prefix(given, tuple(positions), out, "in_shardings")
        _check_committed(leaves, out)
        return tuple(out)

    # JAX: jax/_src/pjit.py _cpp_pjit (jaxlib's PjitFunction::Call, in C++) — differs: Python
    @traceback_util.boundary
    def __call__(self, *args, **kwargs):
        """Call `fun` compiled. A top-level call of a cached signature is looked up by its
        avals, and a plain program (`_get_fastpath_data`) on device Arrays runs right here;
        anything else goes through `_call`."""
        __tracebackhide__ = True  # read by pytest and IPython
        try:
            if (kwargs or self.static_argnums or trace_ctx.trace is not eval_trace
                    or config.trace_context is not self._trace_context
                    or config.jax_disable_jit):
                return self._call(args, kwargs)
            # the key: the avals when every argument is an Array (no flattening needed),
            # else the pytree structure and the leaves' avals
            last, tree = self._last_call, None
            if len(args) == 1 and type(args[0]) is Array:  # one Array: no list
                leaves, key = args, (args[0].aval,)
            else:
                avals = [x.aval for x in args if type(x) is Array]
                leaves, key, tree = (args, tuple(avals), None) if len(avals) == len(args) \
                    else _pytree_key(args, last)
            if array_mod.sharded_arrays_made or self._specs_need_mesh:
                # the layouts too: they pick the executable (and, for arrays on the default
                # device, whether they are committed to it); and the mesh in context, whose
                # devices a PartitionSpec in in/out_shardings names
                key = (key, tuple(getattr(x, "_sharding", None) or
                                  getattr(x, "_committed", False) for x in leaves),
                       get_abstract_mesh(), self._specs_need_mesh and get_concrete_mesh())
            # the signature of the previous call first: comparing avals that are the same
            # objects (outputs of one executor share them) is cheaper than hashing them
            if last is None or last[0] != key:
                hit = self._fast_cache.get(key)
                if hit is None:
                    return self._call(args, kwargs, key)
                if len(hit) == 2:  # its first hit: the structure's flatten, written once
                    found = None if tree is None else _tree_fastpath.specialize(tree)
                    hit = self._fast_cache[key] = (*hit, tree, found and found[0])
                run, fast_data, tree, flatten = hit
                self._last_call = last = (key, run, fast_data, tree, flatten)
            fast: pxla.MeshExecutableFastpathData | None = last[2]
            if fast is not None and config._plain_dispatch:
                bufs = []  # the leaves the program reads (JAX's kept_var_idx)
                for x in leaves if fast.kept is None else map(leaves.__getitem__, fast.kept):
                    if type(x) is not Array or x._buf is None or x._committed:
                        break  # uncommitted Arrays on the device; else the executor's way
                    bufs.append(x._buf)
                else:
                    executable, handlers, out_avals, unflatten, _ = fast
                    outs = executable.execute_sharded(bufs).consume_with_handlers(handlers)
                    if unflatten is None:
                        return Array(out_avals[0], None, outs[0])
                    return unflatten(execution_results(out_avals, outs))
            return last[1](leaves)
        except Exception as e:
            traceback_util.filter_raised(e)
            raise

    def _call(self, args: tuple, kwargs: dict, key: tuple | None = None):
        """A call not run from the cache: under a transformation (`jit_p` bound on the
        tracers), with static or keyword arguments, or a first call (cached under `key`)."""
        if config.jax_disable_jit:  # JAX: jax/_src/pjit.py _cpp_pjit's disable_jit check
            return self.fun(*args, **kwargs)
        entry, flat, in_tree = self._get_jaxpr(args, kwargs)
        if core.trace_ctx.trace is core.eval_trace:
            hit = self._runner(entry, flat, in_tree)
            if hit is not None:
                if key is not None:
                    self._fast_cache[key] = hit
                return hit[0](flat)
        elif self.in_shardings is not None:
            # under jvp/grad/vmap the values inside the tracers may be committed Arrays:
            # JAX checks them against in_shardings too (a batch dimension unsplit)
            inner = [_concrete_of(x) for x in flat]
            given = self._leaf_in_shardings(flat, [None] * len(flat), in_tree)
            _check_committed([v for v, _ in inner],
                             [_batched(s, dims) for s, (_, dims) in zip(given, inner)])
        closed, consts, out_tree, donated = entry
        if self.out_shardings is not None:  # JAX checks them when the nested call is traced
            _check_fit(_leaf_out_shardings(self.out_shardings, out_tree), closed.out_avals,
                       out_tree, "outputs")
        if self._has_shardings:
            flat = _constrained(flat, self._leaf_in_shardings(flat, [None] * len(flat), in_tree))
        if self.inline and not self._has_shardings:  # its equations, not a nested jit's
            return tree_unflatten(out_tree, core.eval_jaxpr(closed.jaxpr, closed.consts,
                                                            *consts, *flat))
        if consts and not any(isinstance(c, Tracer) for c in consts):
            closed, donated, consts = _reclosed(closed, len(consts), _Consts(consts)), \
                donated[len(consts):], []
        # under a transformation donation does not apply (JAX: only top-level calls donate)
        outs = jit_p.bind(*consts, *flat, jaxpr=closed, name=self.__name__,
                          donated_invars=(False,) * len(donated))
        if self.out_shardings is not None:
            outs = _constrained(outs, _leaf_out_shardings(self.out_shardings, out_tree), True)
        return tree_unflatten(out_tree, outs)

    def trace(self, *args, **kwargs) -> Traced:
        """Trace for the types of `args` (arrays or `ShapeDtypeStruct`s); no compilation.

        Returns a `Traced` with `.jaxpr`, `.out_info` and `.lower()`. Traced at most once per
        signature: the cache is the one calls use. Mirrors jax/_src/pjit.py JitWrapped.trace.
        """
        (closed, consts, out_tree, donated), flat, in_tree = self._get_jaxpr(args, kwargs)
        arg_shardings = [getattr(x, "_sharding", None) for x in flat]
        in_sh = self._leaf_in_shardings(flat, arg_shardings, in_tree)
        out_sh = _leaf_out_shardings(self.out_shardings, out_tree)
        _check_fit(out_sh, closed.out_avals, out_tree, "outputs")
        return Traced(closed, consts, in_tree, out_tree, self.__name__, donated, in_sh, out_sh,
                      self.keep_unused)

    def lower(self, *args, **kwargs) -> Lowered:
        return self.trace(*args, **kwargs).lower()


def _explain_cache_miss(name: str, key: tuple, previous: list[tuple]) -> str:
    """Why `name` is traced again: what differs from the closest earlier signature; warned
    with jax_explain_cache_misses."""
    if not previous:
        reason = "first call (nothing cached yet)"
        if config.jax_explain_cache_misses:
            warnings.warn(f"TRACING CACHE MISS for jit({name}): {reason}",
                          stacklevel=4)  # the user's call of jit(f) or of .trace
        return reason
    in_tree, avals, statics, static_kw, static_types, mesh = key

    def differences(old) -> list[str]:
        o_tree, o_avals, o_statics, o_kw, o_types, o_mesh = old
        out = [] if o_mesh == mesh else [f"the mesh in context changed from {o_mesh} to {mesh}"]
        if o_tree != in_tree:
            out.append(f"the pytree structure of the arguments changed from {o_tree} to "
                       f"{in_tree}")
        elif o_avals != avals:
            for i, (a, b) in enumerate(zip(o_avals, avals)):
                if a != b:
                    what = ("weak_type changed" if core.typematch(a, b) else "type changed")
                    out.append(f"argument leaf {i}: {what} from {a!r} to {b!r}")
        if o_statics != statics or o_kw != static_kw:
            out.append(f"static arguments changed from {dict(o_statics) | dict(o_kw)} to "
                       f"{dict(statics) | dict(static_kw)}")
        elif o_types != static_types:
            out.append("the types of static arguments changed from "
                       f"{[t.__name__ for t in o_types]} to {[t.__name__ for t in static_types]}")
        return out

    reason = "; ".join(min((differences(k) for k in previous), key=len))
    if config.jax_explain_cache_misses:
        warnings.warn(f"TRACING CACHE MISS for jit({name}) because: {reason}", stacklevel=4)
    return reason


def jit(fun: Callable | None = None, *, in_shardings=None, out_shardings=None,
        static_argnums=(), static_argnames=(), donate_argnums=(), donate_argnames=(),
        keep_unused: bool = False, inline: bool = False):
    """Compile `fun` with XLA.

    Args:
      fun: a function of arrays (pytrees of arrays) returning arrays.
      static_argnums / static_argnames: arguments treated as compile-time constants; they must
        be hashable (ValueError otherwise) and a new value retraces.
      donate_argnums / donate_argnames: arguments whose buffers the computation may reuse for
        outputs of the same type; afterwards those Arrays are deleted (reading them raises
        RuntimeError). A donation no output can use gives a warning.
      in_shardings: None (each argument keeps its own layout), a NamedSharding for every
        array argument, or a tuple with one entry per positional argument (a NamedSharding,
        None, or a pytree prefix of the argument). Uncommitted values are placed as asked; an
        argument already laid out on a mesh in another layout raises ValueError, as in JAX.
        (Top-level calls only: under a transformation shardings other than
        `with_sharding_constraint` are dropped.)
      out_shardings: None (the partitioner chooses, read back from the executable), a
        NamedSharding for every output, or a tuple with one per top-level output.
    Returns: a `JitWrapped` callable with `.trace`, `.lower` stages.
    Mirrors jax/_src/api.py jit and jax/_src/pjit.py.
    """
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, inline=inline)
    api_util.check_callable(fun)
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                      in_shardings, out_shardings, inline, keep_unused)


def _check_shardings(shardings, what: str):
    """None, a Sharding or PartitionSpec, or a tuple/dict pytree of them and None (lists
    become tuples). A PartitionSpec is kept: it means the mesh in context when the jitted
    function is called (`_resolve_specs`), as in JAX."""
    if shardings is None or isinstance(shardings, (Sharding, PartitionSpec)):
        return shardings
    if isinstance(shardings, (tuple, list, dict)):
        for s in tree_flatten(shardings, is_leaf=lambda s: isinstance(s, PartitionSpec))[0]:
            if not isinstance(s, (Sharding, PartitionSpec)):
                raise TypeError(f"jit {what}: expected Sharding or None entries, got {s!r}")
        return _hashable(shardings)
    raise TypeError(f"jit {what}: expected a Sharding, a tuple of them, or None; got "
                    f"{shardings!r}")


# JAX: jax/_src/pjit.py _create_sharding_for_array
def _resolve_specs(shardings, what: str):
    """`shardings` with each PartitionSpec made a NamedSharding over the mesh in context;
    JAX's RuntimeError if there is none."""
    mesh = get_concrete_mesh()

    def resolve(s):
        if not isinstance(s, PartitionSpec):
            return s
        if mesh is None:
            raise RuntimeError(
                f"jit requires a non-empty mesh in context if you are passing `PartitionSpec`s "
                f"to {what}. You can define a context mesh via `jax.set_mesh(mesh)`. "
                f"Alternatively, provide `Sharding`s to {what} and then the mesh context "
                "manager is not required.")
        return NamedSharding(mesh, s)
    if isinstance(shardings, PartitionSpec):
        return resolve(shardings)
    return _hashable(tree_map(resolve, shardings,
                              is_leaf=lambda s: isinstance(s, PartitionSpec)))


# JAX: jax/_src/pjit.py _resolve_in_shardings (the committed-argument check)
def _check_committed(leaves, shardings) -> None:
    """An argument laid out on a mesh is committed: `in_shardings` may not ask for another
    layout of it (JAX raises rather than moving it). ValueError naming both shardings. The
    layouts are compared as JAX compares their HLO shardings: by mesh position, so the same
    layout over the same mesh shape with the devices in another order is accepted and the
    argument moved (as is one on another single device)."""
    for x, s in zip(leaves, shardings):
        if type(x) is Array and x._sharding is not None and s is not None and \
                not x._sharding.is_equivalent_to(s, x.ndim) and \
                not _same_layout_by_position(x._sharding, s, x.ndim) and not (
                    isinstance(s, SingleDeviceSharding) and
                    isinstance(x._sharding, SingleDeviceSharding)):  # moved, as in JAX
            raise ValueError(
                f"Sharding passed to jit does not match the sharding on the respective arg. "
                f"Got jit sharding: {s},\narg sharding: {x._sharding} for arg type: "
                f"{x.dtype.name}[{','.join(map(str, x.shape))}]")


# JAX: jax/_src/op_shardings.py are_hlo_shardings_equal (of the two NamedShardings)
def _same_layout_by_position(a, b, ndim: int) -> bool:
    """Whether two NamedShardings lay out an array of rank `ndim` alike by mesh position:
    the same mesh axis sizes, each dimension split over the same axis positions, the same
    memory kind; which devices sit where is not compared (JAX's HLO sharding numbers a
    mesh's devices by position)."""
    if not (isinstance(a, NamedSharding) and isinstance(b, NamedSharding)) or \
            not isinstance(a.mesh, Mesh) or not isinstance(b.mesh, Mesh) or \
            a.memory_kind != b.memory_kind or a.mesh.axis_sizes != b.mesh.axis_sizes:
        return False

    def positions(s):
        spec = [*s.spec, *[None] * (ndim - len(s.spec))]
        return tuple(tuple(s.mesh.axis_names.index(n) for n in _axes_of(p)
                           if s.mesh.shape[n] != 1) for p in spec)
    return positions(a) == positions(b)


def _constrained(xs, shardings, retype: bool = False) -> list:
    """A jit's in_shardings / out_shardings under a transformation (JAX keeps them on the
    nested call). An output (`retype`) is laid out exactly as its sharding says, as JAX's
    nested call's result sharding lays it out: computed now (under jvp or vmap of concrete
    values) its type follows; staged into a jaxpr its type is its jaxpr's (JAX's
    `_pjit_abstract_eval`). An input keeps its type (as JAX's); on a mesh with Auto axes the
    partitioner is told their part (a `with_sharding_constraint`)."""
    out = []
    for x, s in zip(xs, shardings):
        if isinstance(s, NamedSharding):
            mesh, spec = s.mesh, s.spec
            if retype and isinstance(mesh, Mesh):
                x = sharding_constraint_p.bind(x, sharding=s, exact=True)
            elif mesh.auto_axes:
                x = with_sharding_constraint(x, NamedSharding(mesh, _only_axes(
                    spec, mesh.auto_axes)))
        out.append(x)
    return out


def _only_axes(spec: PartitionSpec, names) -> PartitionSpec:
    parts = []
    for p in spec:
        axes = tuple(a for a in _axes_of(p) if a in names)
        parts.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*parts)


def _concrete_of(x) -> tuple:
    """(the value under the JVP and batch tracers wrapping `x`, the batch dimensions met,
    outermost first)."""
    dims = []
    while True:
        if isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
            x = x.primal
        elif isinstance(x, batching.BatchTracer) and x.batch_dim is not None:
            dims.append(x.batch_dim)
            x = x.val
        else:
            return x, dims


def _batched(s, dims):
    """Sharding `s` of a value, for the value with unsplit batch dimensions `dims` inserted."""
    if not isinstance(s, NamedSharding):
        return s
    for d in dims:
        spec = [*s.spec, *[None] * (d - len(s.spec))]
        s = NamedSharding(s.mesh, PartitionSpec(*spec[:d], None, *spec[d:]))
    return s


def _broadcast_prefix(prefix, positions, out: list, what: str) -> None:
    """Set out[i] for every leaf position i under `positions` (a pytree of leaf indices) to
    the sharding `prefix` gives it: a Sharding covers a whole subtree, None keeps out[i]."""
    if prefix is None:
        return
    if isinstance(prefix, Sharding):
        for i in tree_flatten(positions)[0]:
            out[i] = prefix
        return
    if isinstance(prefix, (tuple, list)) and isinstance(positions, (tuple, list)) and \
            len(prefix) == len(positions):
        for p, sub in zip(prefix, positions):
            _broadcast_prefix(p, sub, out, what)
        return
    if isinstance(prefix, dict) and isinstance(positions, dict) and \
            sorted(prefix) == sorted(positions):
        for k, sub in positions.items():
            _broadcast_prefix(prefix[k], sub, out, what)
        return
    raise ValueError(f"jit {what}: {prefix!r} is not a pytree prefix of the arguments")


def _hashable(tree):
    """Nested tuples for nested lists (dicts stay dicts)."""
    if isinstance(tree, (tuple, list)):
        return tuple(_hashable(t) for t in tree)
    if isinstance(tree, dict):
        return {k: _hashable(v) for k, v in tree.items()}
    return tree


def _sharding_key(tree):
    """A hashable stand-in for a pytree of shardings (the jit caches key on it)."""
    leaves, treedef = tree_flatten(tree)
    return treedef, tuple(leaves)


def _leaf_out_shardings(given, out_tree) -> tuple:
    """Per flat output: the sharding from `out_shardings` (broadcast over each top-level
    output's leaves), or None."""
    n = out_tree.num_leaves
    if given is None:
        return (None,) * n
    if isinstance(given, Sharding):
        return (given,) * n
    positions = tree_unflatten(out_tree, list(range(n)))
    if isinstance(given, tuple) and isinstance(positions, (tuple, list)) and \
            len(positions) != len(given):
        if n == len(given):
            return tuple(given)
        raise ValueError(f"out_shardings has {len(given)} entries, the function returns "
                         f"{out_tree}")
    out: list = [None] * n  # a prefix of the outputs' tree (a dict of a dict output...)
    _broadcast_prefix(given, tuple(positions) if isinstance(positions, list) else positions,
                      out, "out_shardings")
    return tuple(out)


# JAX: jax/_src/pjit.py pjit_check_aval_sharding
def _check_fit(shardings, avals, tree, what: str, names=None) -> None:
    """Each NamedSharding against its leaf's type, before anything is lowered: ValueError
    (JAX's text, naming the leaf's key path) for a spec longer than the rank, IndivisibleError
    for a dimension its shards do not divide. `names`: the positional parameters' names
    (arguments), or None (outputs: `result...`)."""
    paths = tree_flatten_with_path(tree_unflatten(tree, list(range(tree.num_leaves))))[0]
    for (path, i), s in zip(paths, shardings):
        if not isinstance(s, NamedSharding):
            continue
        shape = avals[i].shape
        if names is None:
            where = "result" + keystr(path)
        else:
            k = path[1].idx if len(path) > 1 and path[0].idx == 0 else None
            where = (names[k] if k is not None and k < len(names) else "args") + keystr(
                path[2:] if k is not None else path)
        if len(s.spec) > len(shape):
            extra = " For scalars the PartitionSpec should be P()" if not shape else ""
            raise ValueError(
                f"One of pjit {what} with pytree key path {where} is incompatible with its "
                f"sharding annotation {s}: Sharding {s} is only valid for values of rank at "
                f"least {len(s.spec)}, but was applied to a value of rank {len(shape)}.{extra}")
        factors = s._tiling(len(shape))
        for d, (n, f) in enumerate(zip(shape, factors)):
            if n % f:
                raise IndivisibleError(
                    f"Sharding {s} implies that array axis {d} is partitioned {f} times, but "
                    f"the dimension size is {n} (full shape: {tuple(shape)}, per-dimension "
                    f"tiling factors: {factors} should evenly divide the shape)")


# ---------------------------------------------------------------------------------------------
# with_sharding_constraint: a layout the partitioner must give a value
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pjit.py with_sharding_constraint
def _sharding_per_leaf(shardings, tree, op: str, what: str) -> list:
    """One canonical sharding per leaf of `tree`: `shardings` is a single NamedSharding or
    PartitionSpec (for every leaf) or a pytree of them with `tree`'s structure. Raises
    ValueError naming `op` when the structures differ."""
    if isinstance(shardings, (NamedSharding, PartitionSpec)):
        shs = [shardings] * tree.num_leaves
    else:
        shs, s_tree = tree_flatten(shardings)
        if s_tree != tree:
            raise ValueError(f"{op}: {what} {shardings} do not match the structure of the "
                             f"values {tree}")
    return [canonicalize_sharding(s, op) for s in shs]


def with_sharding_constraint(x, shardings):
    """Ask that the values of pytree `x` have layout `shardings` (a NamedSharding, a
    PartitionSpec over the mesh in context (`set_mesh`), or a pytree of them matching `x`).
    Inside jit it becomes an `sdy.sharding_constraint`; eagerly it lays the value out (as
    `device_put`). Values are unchanged. Under `set_mesh` of a mesh whose axes are all
    Explicit the layout is part of the type already, so the constraint only checks it
    (AssertionError, as JAX, if it differs); elsewhere it may name only Auto axes
    (ValueError otherwise): `reshard` changes the layout of Explicit axes.

    Raises ValueError if a spec is longer than a value's rank, IndivisibleError if a dimension
    does not divide into its shards when the constraint is computed now (staged, uneven blocks
    are the partitioner's, as in JAX), TypeError for something that is not a NamedSharding."""
    leaves, tree = tree_flatten(x)
    given = [shardings] if isinstance(shardings, PartitionSpec) else tree_flatten(shardings)[0]
    if get_concrete_mesh() is None and get_abstract_mesh().empty and \
            any(isinstance(s, PartitionSpec) for s in given):
        raise RuntimeError("with_sharding_constraint requires a non-empty mesh in context if "
                           "you are passing `PartitionSpec`s to shardings: set one with "
                           "`jax.set_mesh(mesh)`, or pass `NamedSharding`s.")
    shs = _sharding_per_leaf(shardings, tree, "with_sharding_constraint", "shardings")
    for s in shs:
        if not isinstance(s, NamedSharding):
            raise TypeError(f"with_sharding_constraint: expected a NamedSharding, got {s!r}")
    explicit = []
    in_context = get_abstract_mesh()
    for v, s in zip(leaves, shs):
        aval = core.get_aval(v)
        s.spec._check_compatible_wrt_shape(aval.shape)  # every leaf before any binding
        if not in_context.empty and in_context.are_all_axes_explicit:
            # sharding in types: under an all-Explicit mesh the layout is already known, so
            # the constraint is a check (JAX: "acts as an assert"); reshard changes layouts
            want = aval_sharding(s, aval.ndim)
            have = aval.sharding.spec if aval.sharding is not None else (None,) * aval.ndim
            if tuple(want.spec) != tuple(have):
                raise AssertionError(
                    f"`with_sharding_constraint` acts as an assert when all axes of mesh are "
                    f"of type `Explicit`. The array sharding: {PartitionSpec(*have)} did not "
                    f"match the sharding provided: {want.spec}. Please use "
                    "`jax.sharding.reshard` to shard your input to the sharding you want.")
            explicit.append(True)
        else:  # (uneven blocks are allowed here, as in JAX: only an eager one raises)
            if any(s.mesh.shape_tuple and a not in s.mesh.auto_axes
                   for p in s.spec for a in _axes_of(p)):
                raise ValueError(
                    f"The spec of NamedSharding passed to with_sharding_constraint can only "
                    f"refer to Auto axes of the mesh. Got spec={s.spec} and "
                    f"mesh={s.mesh.abstract_mesh}. You probably meant to use `reshard` API?")
            explicit.append(False)
    if all(explicit):
        return x
    if core.trace_ctx.trace is core.eval_trace and not any(
            isinstance(p, _Unconstrained) for s in shs for p in s.spec):
        # eagerly: laid out now, exactly as asked (JAX runs `jit(out_shardings=s)`: on a
        # mixed mesh the type then follows `s`)
        return tree_unflatten(tree, [_sharding_constraint_impl(v, sharding=s)
                                     for v, s in zip(leaves, shs)])
    outs = [v if e else sharding_constraint_p.bind(v, sharding=s)
            for v, s, e in zip(leaves, shs, explicit)]
    return tree_unflatten(tree, outs)


def _with_type_axes(s: NamedSharding, aval) -> NamedSharding:
    """A staged constraint naming Auto axes, with the Explicit axes the value's type splits
    each dimension over kept (a mixed mesh: under jit the constraint does not change the type;
    JAX merges them in `_sharding_constraint_hlo_lowering`)."""
    if aval.sharding is None:
        return s
    given = s.spec._normalized_spec_for_aval(aval.ndim)
    parts = []
    for t, g in zip(aval.sharding.spec, given):
        axes = (*_axes_of(t), *_axes_of(g))
        parts.append(g if not axes else axes[0] if len(axes) == 1 else axes)
    return NamedSharding(s.mesh, PartitionSpec(*parts))


def _sharding_constraint_impl(x, *, sharding, exact=False):
    # evaluated eagerly (under jvp or vmap of concrete values, a transpose in backward_pass,
    # eval_jaxpr): laid out exactly as asked, its type following, as JAX's impl runs
    # `jit(out_shardings=sharding)` on the mesh
    if isinstance(sharding.mesh, Mesh):
        sharding.check_compatible_aval(core.get_aval(x).shape, typed=False)
        if any(isinstance(p, _Unconstrained) for p in sharding.spec):  # (a vmapped dimension)
            sharding = NamedSharding(sharding.mesh, PartitionSpec(*[
                None if isinstance(p, _Unconstrained) else p for p in sharding.spec]))
        return compiler.device_put_sharded_tree(x, sharding)
    return x


def _sharding_constraint_abstract_eval(x, *, sharding, exact=False):
    if x.sharding is not None or exact:  # staged, the type is kept (the lowering adds its
        return x  # axes; a nested jit's outputs are typed by its jaxpr)
    s = aval_sharding(sharding, x.ndim)  # an untyped value on a mesh with Explicit axes
    return x if s is None else x.update(sharding=s)


def _sharding_constraint_transpose(ct, x, **params):
    # cotangents get the primal's layout, as in JAX
    return [ct if type(ct) is Zero else sharding_constraint_p.bind(ct, **params)]


def _sharding_constraint_batch_rule(vals, dims, *, axis_size, sharding, exact=False):
    (x,), (d,) = vals, dims
    spec = list(sharding.spec) + [None] * (x.aval.ndim - 1 - len(sharding.spec))
    # the batch dimension: split over vmap's spmd_axis_name if it has one; else a nested
    # jit's out_shardings leave it unsplit (JAX's `_pjit_batcher_for_sharding`), a
    # constraint leaves it to the partitioner (JAX's batcher without spmd_axis_name; on a
    # mesh with no Auto axis that is its ValueError)
    spmd = batching.spmd_axis_name()
    if spmd is not None:
        if set(spmd) & {a for p in sharding.spec for a in _axes_of(p)}:
            raise ValueError(f"vmap spmd_axis_name {spmd} cannot appear in "
                             f"with_sharding_constraint spec, but got spec {sharding.spec}")
        spec.insert(d, spmd[0] if len(spmd) == 1 else spmd)
    else:
        spec.insert(d, None if exact else PartitionSpec.UNCONSTRAINED)
    return sharding_constraint_p.bind(
        x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*spec)),
        **({"exact": True} if exact else {})), d


# JAX: jax/_src/pjit.py _sharding_constraint_hlo_lowering
def _sharding_constraint_lowering(ctx, x, *, sharding, exact=False):
    aval = ctx.avals_in[0]
    return mlir.sdy.sharding_constraint(x, mlir.sharding_attr(
        sharding if exact else _with_type_axes(sharding, aval), aval.ndim))


# `exact=True` (hidden when printed): a nested jit's out_shardings, which JAX lowers as the
# nested function's result sharding: exactly that layout, the type's axes not added
sharding_constraint_p = core.Primitive("sharding_constraint")
sharding_constraint_p.pp_hide_if_empty = ("exact",)
sharding_constraint_p.def_impl(_sharding_constraint_impl)
sharding_constraint_p.def_abstract_eval(_sharding_constraint_abstract_eval)
ad.deflinear(sharding_constraint_p, _sharding_constraint_transpose)
batching.primitive_batchers[sharding_constraint_p] = _sharding_constraint_batch_rule
mlir.register_lowering(sharding_constraint_p, _sharding_constraint_lowering)
mlir._lays_out_itself.add(sharding_constraint_p)


# ---------------------------------------------------------------------------------------------
# reshard: change a value's sharding (its type, with sharding in types)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pjit.py reshard
def reshard(xs, out_shardings):
    """Lay the values of pytree `xs` out as `out_shardings` says (a NamedSharding, a
    PartitionSpec over the mesh in context, or a pytree of them matching `xs`). With sharding
    in types the result's type carries the new sharding (`f32[8@x,4]` -> `f32[8,4@x]`);
    inside jit it lowers to an `sdy.sharding_constraint`, for which the partitioner inserts
    the collectives; eagerly the values are placed at once (`device_put`).

    Raises ValueError as `device_put` does (spec longer than the rank, indivisible
    dimension, no mesh in context for a PartitionSpec); nothing is placed then."""
    leaves, tree = tree_flatten(xs)
    if get_concrete_mesh() is None:  # a PartitionSpec: JAX's error for an out_sharding
        tree_map(lambda s: canonicalize_out_sharding(s, "reshard"), out_shardings,
                 is_leaf=lambda s: isinstance(s, PartitionSpec))
    shs = _sharding_per_leaf(out_shardings, tree, "reshard", "out_shardings")
    for v, s in zip(leaves, shs):
        if not isinstance(s, NamedSharding):
            raise ValueError(f"Reshard should only be used with out_shardings which are "
                             f"non-None and have a non-empty mesh. Got sharding {s}.")
        for a in (a for p in s.spec for a in _axes_of(p)):
            if a not in s.mesh.explicit_axes:  # Auto axes are the partitioner's, not reshard's
                raise ValueError(f"PartitionSpec passed to reshard cannot contain axis names "
                                 f"that are of type Auto or Manual. Got PartitionSpec: "
                                 f"{s.spec} with axis name: {a} of type: "
                                 f"{s.mesh.axis_types[s.mesh.axis_names.index(a)]}")
        s.check_compatible_aval(core.get_aval(v).shape)
    if core.trace_ctx.trace is core.eval_trace:
        return tree_unflatten(tree, [compiler.device_put_sharded_tree(v, s)
                                     for v, s in zip(leaves, shs)])
    outs = []
    for v, s in zip(leaves, shs):
        ndim = core.get_aval(v).ndim
        dst = normalize_to_ndim(canonicalize_out_sharding(s, "reshard"), ndim)
        outs.append(reshard_p.bind(v, dst_sharding=dst,
                                   concrete_mesh=s.mesh if hasattr(s.mesh, "devices") else None))
    return tree_unflatten(tree, outs)


def _reshard_impl(x, *, dst_sharding, concrete_mesh):
    mesh = concrete_mesh or get_concrete_mesh()
    if mesh is not None and mesh.abstract_mesh == dst_sharding.mesh.abstract_mesh:
        return compiler.device_put_sharded_tree(x, NamedSharding(mesh, dst_sharding.spec))
    return x


def _reshard_abstract_eval(x, *, dst_sharding, concrete_mesh):
    return x.update(sharding=aval_sharding(dst_sharding, x.ndim))


def _reshard_transpose(ct, x, *, dst_sharding, concrete_mesh):
    # the cotangent goes back to the primal's sharding
    if type(ct) is Zero or x.aval.sharding is None:
        return [ct]
    return [reshard_p.bind(ct, dst_sharding=x.aval.sharding, concrete_mesh=concrete_mesh)]


def _reshard_batch_rule(vals, dims, *, axis_size, dst_sharding, concrete_mesh):
    (x,), (d,) = vals, dims
    spec = list(dst_sharding.spec)
    spec.insert(d, None)  # the batch dimension is not split
    return reshard_p.bind(x, dst_sharding=NamedSharding(dst_sharding.mesh, PartitionSpec(*spec)),
                          concrete_mesh=concrete_mesh), d


def _reshard_lowering(ctx, x, *, dst_sharding, concrete_mesh):
    sdy = mlir.sdy
    if dst_sharding.mesh.are_all_axes_auto:  # nothing typed: the partitioner decides
        return x
    s = dst_sharding if concrete_mesh is None else NamedSharding(concrete_mesh,
                                                                 dst_sharding.spec)
    return sdy.sharding_constraint(x, mlir.sharding_attr(s, ctx.avals_in[0].ndim,
                                                         open_auto=True))


reshard_p = core.Primitive("reshard")
reshard_p.pp_hidden_params = ("dst_sharding", "concrete_mesh")
reshard_p.def_impl(_reshard_impl)
reshard_p.def_abstract_eval(_reshard_abstract_eval)
ad.deflinear(reshard_p, _reshard_transpose)
batching.primitive_batchers[reshard_p] = _reshard_batch_rule
mlir.register_lowering(reshard_p, _reshard_lowering)
mlir._lays_out_itself.add(reshard_p)


# ---------------------------------------------------------------------------------------------
# auto_axes / explicit_axes: change axis types for part of a program
# ---------------------------------------------------------------------------------------------

def _retyped_mesh(axes, to, api: str):
    outer = get_concrete_mesh()
    if outer is None:
        raise ValueError(f"Context mesh cannot be empty. Please use `jax.set_mesh` API to enter "
                         f"into a mesh context when using `{api}` API.")
    names = outer.axis_names if axes is None else (axes,) if isinstance(axes, str) else \
        tuple(axes)
    types = tuple(to if n in names else t for n, t in zip(outer.axis_names, outer.axis_types))
    return outer, Mesh(outer.devices, outer.axis_names, axis_types=types)


def _spec_without(spec, mesh) -> PartitionSpec:
    """`spec` naming only `mesh`'s Explicit axes (JAX: core.modify_spec_for_auto_manual)."""
    keep = set(mesh.explicit_axes)
    out = []
    for p in spec:
        axes = tuple(a for a in _axes_of(p) if a in keep)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*out)


def _spec_of(x) -> PartitionSpec:
    aval = core.get_aval(x)
    return aval.sharding.spec if aval.sharding is not None else PartitionSpec(*[None] * aval.ndim)


def _given_or_keyword(given, kwargs: dict, name: str):
    """auto_axes/explicit_axes: the sharding given to the decorator, else the call's keyword
    `name` (popped from `kwargs`); TypeError, as JAX's, when neither is there."""
    if given is not None:
        return given
    if name not in kwargs:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return kwargs.pop(name)


# JAX: jax/_src/pjit.py auto_axes
def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """`f` run with mesh axes `axes` (default: all) turned Auto: the arguments lose those axes
    from their types (resharded), `f` is traced with the partitioner choosing their layout,
    and the results are resharded to `out_sharding` (given here or as a keyword argument of
    the call: TypeError if neither). ValueError without a mesh in context (`set_mesh`)."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        out_s = _given_or_keyword(out_sharding, kwargs, "out_sharding")
        outer, inner = _retyped_mesh(axes, AxisType.Auto, "auto_axes")
        with set_mesh(inner):
            args = tree_map(lambda a: reshard(a, NamedSharding(inner, _spec_without(
                _spec_of(a), inner))), args)
            out = f(*args, **kwargs)
        return reshard(out, out_s)
    return wrapped


# JAX: jax/_src/pjit.py explicit_axes
def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """`f` run with mesh axes `axes` (default: all) turned Explicit: the arguments are
    resharded to `in_sharding` (given here or as a keyword argument), so their types carry
    those axes inside `f`; the results leave with the axes dropped from their types again.
    ValueError without a mesh in context (`set_mesh`)."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        in_s = _given_or_keyword(in_sharding, kwargs, "in_sharding")
        outer, inner = _retyped_mesh(axes, AxisType.Explicit, "explicit_axes")
        with set_mesh(inner):
            args = reshard(args, in_s)
            out = f(*args, **kwargs)
        return tree_map(lambda o: reshard(o, NamedSharding(outer, _spec_without(
            _spec_of(o), outer))), out)
    return wrapped
