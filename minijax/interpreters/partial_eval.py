"""Tracing to jaxprs, partial evaluation (the known/unknown split), and dead-code elimination.

`DynamicJaxprTrace` records every primitive bound while it is current as an equation: this is
how `make_jaxpr` and `jit` turn a Python function into a jaxpr. `JaxprTrace` does the same only
for operations that touch *unknown* values and evaluates the rest right away: run a jvp under it
with unknown tangents and the recorded jaxpr is the linear (tangent) part of the program — how
`linearize` and reverse mode are built here. Mirrors jax/_src/interpreters/partial_eval.py.
Taught in chapters/03-jaxprs.md and chapters/06-reverse-mode.md.
"""

from __future__ import annotations

import enum
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from minijax import core, dtypes, effects
from minijax.config import config
from minijax.core import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, ShapedArray, Tracer, Var
from minijax.mesh import empty_abstract_mesh, get_abstract_mesh
from minijax.util import merge_lists, safe_zip, split_list

# ---------------------------------------------------------------------------------------------
# Tracing to a jaxpr
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/interpreters/partial_eval.py JaxprStackFrame
class JaxprStackFrame:
    """The jaxpr being built: its input variables, equations and constants (by identity; the
    frame holds each constant, so its id stays unique). A tracer's variable lives on the tracer
    (`DynamicJaxprTracer.val`)."""

    def __init__(self) -> None:
        self.invars: list[Var] = []
        self.eqns: list[JaxprEqn] = []
        self.const_to_var: dict[int, Var] = {}
        self.constvar_to_val: dict[Var, Any] = {}

    def to_jaxpr(self, outvars: Sequence[core.Atom]) -> tuple[Jaxpr, list]:
        constvars = list(self.constvar_to_val)
        consts = [self.constvar_to_val[v] for v in constvars]
        # unused outputs stay Vars: the printer shows the top level's as `_`, as JAX's does
        return Jaxpr(constvars, self.invars, list(outvars), self.eqns), consts


# JAX: jax/_src/interpreters/partial_eval.py DynamicJaxprTracer — differs: `val` is always a
# Var (JAX's may be a Literal for a constant-folded value)
class DynamicJaxprTracer(Tracer):
    """A value being recorded: `val` is the jaxpr variable that stands for it."""

    __slots__ = ("val",)

    def __init__(self, trace: "DynamicJaxprTrace", val: Var) -> None:
        self._trace = trace
        self.val = val

    @property
    def aval(self) -> ShapedArray:
        return self.val.aval

    def _short_repr(self) -> str:  # JAX: JitTracer, under jit and make_jaxpr alike
        return f"JitTracer({self.aval})"


# JAX: jax/_src/core.py is_literalable
def _is_literalable(x) -> bool:
    # Python and NumPy scalars, and Arrays made from them, are written inline (`2.0:f32[]`);
    # anything bigger, and a scalar Array computed eagerly (a cond's index kept for reverse
    # mode), becomes a constvar, as in JAX
    if isinstance(x, Tracer):
        return False
    if dtypes.is_python_scalar(x):
        return True
    return core.get_aval(x).shape == () and getattr(x, "_literal", True)


# JAX: jax/_src/interpreters/partial_eval.py DynamicJaxprTrace
class DynamicJaxprTrace(core.Trace):
    """Records each primitive as an equation of a jaxpr, computing output avals with the
    primitive's abstract evaluation rule. Values that are not its own tracers (numpy arrays,
    Python scalars, tracers of outer transformations) become literals or constvars."""

    def __init__(self, fun_name: str = "fun", purpose: str = "make_jaxpr") -> None:
        super().__init__()
        self.frame = JaxprStackFrame()
        self.fun_name = fun_name
        self.purpose = purpose

    def describe(self) -> str:
        return f" while tracing the function {self.fun_name} for {self.purpose}"

    def new_arg(self, aval: ShapedArray) -> DynamicJaxprTracer:
        t = DynamicJaxprTracer(self, Var(aval))
        self.frame.invars.append(t.val)
        return t

    def is_own(self, x) -> bool:
        return isinstance(x, DynamicJaxprTracer) and x._trace is self

    def to_jaxpr_atom(self, x) -> core.Atom:
        if isinstance(x, DynamicJaxprTracer) and x._trace is self:  # is_own, inline: hot
            return x.val
        core.check_not_escaped(x)
        return self.new_const(x)

    def new_const(self, x) -> core.Atom:
        aval = core.get_aval(x)
        if getattr(x, "_literal", False) is True and not aval.shape and not aval.weak_type:
            return Literal(core.to_numpy(x, aval), aval)  # (`x * 0.5`'s converted scalar)
        if _is_literalable(x):
            val = x if dtypes.is_python_scalar(x) else core.to_numpy(x, aval)
            if aval.weak_type and not dtypes.is_python_scalar(val):
                # keep a weak literal weak when the jaxpr is evaluated again (jvp of jit...)
                item = val.item()
                val = item if core.get_aval(item) == aval else val
            return Literal(val, aval)
        var = self.frame.const_to_var.get(id(x))
        if var is None:
            var = self.frame.const_to_var[id(x)] = Var(aval)
            self.frame.constvar_to_val[var] = x
        return var

    def process_primitive(self, primitive, tracers, params):
        if config.eager_constant_folding and not any(
                isinstance(x, core.Tracer) for x in tracers):  # ensure_compile_time_eval
            return core.eval_trace.process_primitive(primitive, tracers, params)
        return self.default_process_primitive(primitive, tracers, params)

    # JAX: jax/_src/interpreters/partial_eval.py DynamicJaxprTrace.default_process_primitive
    def default_process_primitive(self, primitive, tracers, params):
        """Record `primitive` as one equation, whatever a subclass does in process_primitive
        (the rules of JaxprTrace call this to record the unknown part of a primitive)."""
        invars = [x.val if type(x) is DynamicJaxprTracer and x._trace is self  # (the usual)
                  else self.to_jaxpr_atom(x) for x in tracers]
        avals = [v.aval for v in invars]
        if primitive not in core.vma_primitives and any([a.vma for a in avals]):
            return self._process_varying(primitive, invars, params)
        return self.emit(primitive, invars, *abstract_eval(primitive, avals, params), params)

    # JAX: jax/_src/core.py standard_vma_rule (and standard_insert_pvary)
    def _process_varying(self, primitive, invars, params):
        """Inside shard_map: operands that vary along fewer manual axes than the others get a
        `pvary` first, and the outputs vary along the union (minijax/shard_map.py)."""
        vma = frozenset().union(*(v.aval.vma for v in invars))
        invars = [v if v.aval.vma == vma else self.emit(
            core.pvary_p, [v], v.aval.update(vma=vma), None,
            dict(axes=tuple(sorted(vma - v.aval.vma)))).val for v in invars]
        out_avals = primitive.abstract_eval(*[v.aval for v in invars], **params)
        out_avals = [a.update(vma=vma) for a in
                     (out_avals if primitive.multiple_results else [out_avals])]
        return self.emit(primitive, invars,
                         out_avals if primitive.multiple_results else out_avals[0], None, params)

    def emit(self, primitive, invars, out_avals, effects, params):
        """Append an equation (with `effects`, or those `eqn_effects` finds where None) and
        return tracers for its outputs."""
        multiple = primitive.multiple_results
        outvars = [Var(a) for a in out_avals] if multiple else [Var(out_avals)]
        self.frame.eqns.append(JaxprEqn(
            invars, outvars, primitive, params, effects,
            core.user_source_info() if core.source_info_capture[0] else None,
            core.current_jaxpr_eqn_context() if config.compute_on_context_manager else None,
            core.trace_ctx.name_stack))
        if multiple:
            return [DynamicJaxprTracer(self, v) for v in outvars]
        return DynamicJaxprTracer(self, outvars[0])

    def to_jaxpr(self, out_tracers: Sequence[Any]) -> tuple[Jaxpr, list]:
        """The recorded jaxpr with `out_tracers` (any values) as outputs, and its consts."""
        outvars = [self.to_jaxpr_atom(x) for x in out_tracers]
        return self.frame.to_jaxpr(outvars)


# (primitive, rule, avals, params, trace context) -> out avals: a signature's abstract evaluation
# is done once while tracing, then looked up. Differs: JAX runs the rules at every bind
# (jax/_src/lax/utils.py standard_abstract_eval), caching only some helpers of theirs
_abstract_evals: dict = {}
CACHE_LIMIT = 50_000  # entries of a trace-time cache, which is emptied when it has as many
_PLAIN_PARAM_TYPES = (int, float, bool, str, type(None), enum.Enum, np.dtype)


def is_plain(v) -> bool:
    """A param compared by value (a function or an array would be compared by identity)."""
    return isinstance(v, _PLAIN_PARAM_TYPES) or (isinstance(v, tuple) and all(map(is_plain, v)))


def context_is_plain() -> bool:
    """No named axes, mesh, compute_on or source capture in context: rules that see avals
    and params only give the same answer for the same ones."""
    return not (core.axis_env.sizes or core.source_info_capture[0]
                or config.compute_on_context_manager is not None
                or get_abstract_mesh() is not empty_abstract_mesh)


def static_avals(avals) -> bool:
    """No symbolic dimension: those of two `symbolic_shape` scopes compare equal by name."""
    return all(type(d) is int for a in avals for d in a.shape)


def abstract_eval(primitive: core.Primitive, avals: list, params: dict) -> tuple:
    """(`primitive.abstract_eval(*avals, **params)`, the equation's effects or None where
    `core.eqn_effects` must find them), looked up after its first time where the params are
    plain values, the shapes static and the context plain (a user's primitive is always
    asked). Plain params hold no jaxpr, so such an equation's effects are its rule's own.
    Only a signature that passed those checks is stored, so a hit needs no check again."""
    if primitive.user_defined or not context_is_plain():
        return primitive.abstract_eval(*avals, **params), None
    rule = primitive.abstract_eval  # (in the key: a rule defined again is asked again)
    key = (primitive, rule, tuple(avals), tuple(params.items()), config.trace_context)
    try:
        out = _abstract_evals.get(key)
    except TypeError:  # an unhashable param: an array
        return rule(*avals, **params), None
    if out is None:
        out = rule(*avals, **params)
        if not (all(map(is_plain, params.values())) and static_avals(avals)):
            return out, None
        if primitive.multiple_results:
            out = tuple(out)
        if len(_abstract_evals) >= CACHE_LIMIT:
            _abstract_evals.clear()
        _abstract_evals[key] = out
    effects = None if primitive.effectful_abstract_eval is not None else core.no_effects
    return (list(out) if primitive.multiple_results else out), effects


# JAX: jax/_src/interpreters/partial_eval.py trace_to_jaxpr_dynamic
def trace_to_jaxpr_dynamic(fun: Callable, in_avals: Sequence[ShapedArray], *,
                           fun_name: str = "fun", purpose: str = "make_jaxpr"
                           ) -> tuple[Jaxpr, list, list]:
    """Trace `fun` (flat args -> flat list of outputs) on abstract inputs.

    Returns (jaxpr, consts, out_avals). Tracers of outer transformations that `fun` closes over
    end up among the consts.
    """
    trace = DynamicJaxprTrace(fun_name, purpose)
    try:
        in_tracers = [trace.new_arg(a) for a in in_avals]
        with core.set_current_trace(trace), core.reset_name_stack():
            outs = fun(*in_tracers)
        jaxpr, consts = trace.to_jaxpr(outs)
    finally:
        trace.invalidate()
    del in_tracers, outs  # what is left of the trace's tracers after this has leaked
    trace.check_leaks()
    if config.jax_enable_checks:  # JAX: jax/_src/config.py enable_checks
        core.check_jaxpr(jaxpr)
    return jaxpr, consts, [v.aval for v in jaxpr.outvars]


# JAX: jax/_src/interpreters/partial_eval.py convert_constvars_jaxpr
def convert_constvars_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Turn constvars into leading invars (so consts can be passed as arguments)."""
    return Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns)


# ---------------------------------------------------------------------------------------------
# Partial evaluation: known values are computed now, unknown ones are recorded
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/partial_eval.py custom_partial_eval_rules
custom_partial_eval_rules: dict[core.Primitive, Callable] = {}


# JAX: jax/_src/interpreters/partial_eval.py JaxprTrace — differs: unknown values are recorded
# directly into a jaxpr (as DynamicJaxprTrace does) instead of through a graph of recipes.
class JaxprTrace(DynamicJaxprTrace):
    """Partial evaluation. Its own tracers are *unknown* values; everything else is *known*
    and lives in the parent trace. A primitive with only known inputs is evaluated in the parent
    right away; one with any unknown input is recorded, and its known inputs become constvars
    of the recorded jaxpr (the *residuals*)."""

    def __init__(self, parent_trace: core.Trace, fun_name: str = "fun",
                 purpose: str = "linearize", toposort_residuals: bool = False) -> None:
        super().__init__(fun_name, purpose)
        self.parent_trace = parent_trace
        # residuals in the order of JAX's tracers_to_jaxpr (partial_eval_jaxpr_nounits); else
        # in order of first use, as the rules JAX runs on a DynamicJaxprTrace make them (a
        # jit's or a custom rule's linearization, which minijax runs as jvp + this trace)
        self.toposort_residuals = toposort_residuals

    def process_primitive(self, primitive, tracers, params):
        if not any(self.is_own(x) for x in tracers):
            return primitive.bind_with_trace(self.parent_trace, tracers, params)
        rule = custom_partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, *tracers, **params)
        return self.default_process_primitive(primitive, tracers, params)

    # JAX: jax/_src/interpreters/partial_eval.py JaxprTrace.process_custom_jvp_call
    def process_custom_derivative_call(self, primitive, fun, tracers, rules):
        if not any(self.is_own(x) for x in tracers):  # all known: applied in the parent
            return self.parent_trace.process_custom_derivative_call(primitive, fun, tracers,
                                                                    rules)
        return super().process_custom_derivative_call(primitive, fun, tracers, rules)

    # JAX: jax/_src/interpreters/partial_eval.py tracers_to_jaxpr
    def to_jaxpr(self, out_tracers: Sequence[Any]) -> tuple[Jaxpr, list]:
        """The recorded jaxpr and its residuals (consts), these in JAX's order: JAX collects
        them walking its graph of tracers in `toposort` order (not in order of first use)."""
        jaxpr, consts = _reachable(*super().to_jaxpr(out_tracers))
        if not self.toposort_residuals or len(jaxpr.constvars) < 2:
            return jaxpr, consts
        order = _toposort_constvars(jaxpr)
        found = set(order)
        rest = [v for v in jaxpr.constvars if v not in found]  # read by no output
        constvars = order + rest
        val = dict(zip(jaxpr.constvars, consts))
        return (Jaxpr(constvars, jaxpr.invars, jaxpr.outvars, jaxpr.eqns, jaxpr.effects),
                [val[v] for v in constvars])


def _reachable(jaxpr: Jaxpr, consts: list) -> tuple[Jaxpr, list]:
    # as JAX's tracers_to_jaxpr: only the equations the outputs need (and effectful ones), and
    # only the residuals those read
    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars) or eqn.primitive in dce_kept_whole or \
                effects.dceable_effects.filter_not_in(eqn.effects):
            eqns.append(eqn)
            live.update(v for v in eqn.invars if isinstance(v, Var))
    if len(eqns) == len(jaxpr.eqns) and all(v in live for v in jaxpr.constvars):
        return jaxpr, consts
    kept = [(v, c) for v, c in safe_zip(jaxpr.constvars, consts) if v in live]
    return (Jaxpr([v for v, _ in kept], jaxpr.invars, jaxpr.outvars, eqns[::-1]),
            [c for _, c in kept])


class _Node:
    # a tracer of JAX's JaxprTrace graph: an input, an equation's output or one use of a known
    # value (each use is a tracer of its own there: `instantiate_const`)
    __slots__ = ("const", "parents")

    def __init__(self, const: Var | None = None, parents: Sequence["_Node"] = ()) -> None:
        self.const, self.parents = const, parents


def _toposort_constvars(jaxpr: Jaxpr) -> list[Var]:
    """`jaxpr`'s constvars in the order JAX's tracers_to_jaxpr finds them: that of jaxlib's
    `topological_sort` of the tracers (a DFS counting children from the inputs and outputs,
    then childless nodes popped from a stack, the result reversed)."""
    constset = set(jaxpr.constvars)
    nodes: dict[Var, _Node] = {v: _Node() for v in jaxpr.invars}

    def use(atom) -> _Node | None:
        if isinstance(atom, Literal):
            return None
        return _Node(atom) if atom in constset else nodes.get(atom)
    for eqn in jaxpr.eqns:
        parents = [n for n in map(use, eqn.invars) if n is not None]
        for v in eqn.outvars:
            nodes[v] = _Node(None, parents)
    end, seen = [], set()
    for n in [nodes[v] for v in jaxpr.invars] + [use(a) for a in jaxpr.outvars]:
        if n is not None and id(n) not in seen:
            seen.add(id(n))
            end.append(n)
    counts: dict[int, int] = {}
    stack = list(end)
    while stack:
        n = stack.pop()
        if id(n) not in counts:
            counts[id(n)] = 0
            stack.extend(n.parents)
        counts[id(n)] += 1
    for n in end:
        counts[id(n)] -= 1
    childless = [n for n in end if counts[id(n)] == 0]
    popped = []
    while childless:
        n = childless.pop()
        popped.append(n)
        for p in n.parents:
            if counts[id(p)] == 1:
                childless.append(p)
            else:
                counts[id(p)] -= 1
    order: dict[Var, None] = {}
    for n in reversed(popped):
        if n.const is not None:
            order.setdefault(n.const, None)
    return list(order)


# JAX: jax/_src/interpreters/partial_eval.py partial_eval_jaxpr_nounits
def partial_eval_jaxpr_nounits(jaxpr: ClosedJaxpr, unknowns: Sequence[bool],
                               instantiate: bool | Sequence[bool] = False,
                               toposort_residuals: bool = True
                               ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split a jaxpr into the part computable from the known inputs and the rest.

    Returns (jaxpr_known, jaxpr_unknown, out_unknowns, num_res): `jaxpr_known` maps the known
    inputs to the known outputs followed by `num_res` residuals; `jaxpr_unknown` maps the
    residuals followed by the unknown inputs to the unknown outputs. Outputs where
    `instantiate` (one bool, or one per output) is true are made unknown even if they are known
    (their value becomes a residual), as control-flow rules need to line up branch outputs.
    The residuals come in the order of JAX's tracers_to_jaxpr; with `toposort_residuals`
    false, in order of first use (a jit linearized: JAX's DynamicJaxprTrace order).
    """
    known_avals = [a for a, u in safe_zip(jaxpr.in_avals, unknowns) if not u]
    unknown_avals = [a for a, u in safe_zip(jaxpr.in_avals, unknowns) if u]
    holder: dict[str, Any] = {}

    def known_fun(*known_args):
        # Runs under a DynamicJaxprTrace (the known jaxpr); a JaxprTrace on top records the rest.
        pe_trace = JaxprTrace(core.current_trace(), purpose="partial evaluation",
                              toposort_residuals=toposort_residuals)
        try:
            unk_tracers = [pe_trace.new_arg(a) for a in unknown_avals]
            kit, uit = iter(known_args), iter(unk_tracers)
            args = [next(uit) if u else next(kit) for u in unknowns]
            with core.set_current_trace(pe_trace):
                outs = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
            inst = [instantiate] * len(outs) if isinstance(instantiate, bool) else instantiate
            out_unknowns = [pe_trace.is_own(o) or i for o, i in safe_zip(outs, inst)]
            unk_outs = [o for o, u in zip(outs, out_unknowns) if u]
            jaxpr_unk, residuals = pe_trace.to_jaxpr(unk_outs)
        finally:
            pe_trace.invalidate()
        holder.update(jaxpr_unk=jaxpr_unk, out_unknowns=out_unknowns, num_res=len(residuals))
        known_outs = [o for o, u in zip(outs, out_unknowns) if not u]
        return known_outs + list(residuals)

    jaxpr_k, consts_k, _ = trace_to_jaxpr_dynamic(known_fun, known_avals,
                                                  purpose="partial evaluation")
    jaxpr_unk = convert_constvars_jaxpr(holder["jaxpr_unk"])
    return (ClosedJaxpr(jaxpr_k, consts_k), ClosedJaxpr(jaxpr_unk, []),
            holder["out_unknowns"], holder["num_res"])


# ---------------------------------------------------------------------------------------------
# Partial evaluation with a policy: what checkpoint's reverse mode saves, what it recomputes
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/partial_eval.py Offloadable
class Offloadable(NamedTuple):
    """A policy's answer "save this residual, but in memory `dst`; bring it back to `src` for
    the backward pass" (memory kinds: "device", "pinned_host"). A non-empty tuple, so it also
    reads as True ("saveable") where only saving matters."""
    src: str
    dst: str


# JAX: jax/_src/interpreters/partial_eval.py partial_eval_jaxpr_custom_rules: per primitive
# holding a jaxpr (and the debug callbacks), rule(saveable, unks_in, inst_in, eqn) -> (known
# eqn or None, staged eqn or None, unks_out, inst_out, residuals), or None: no split of its own
partial_eval_jaxpr_custom_rules: dict[core.Primitive, Callable] = {}


# JAX: jax/_src/interpreters/partial_eval.py partial_eval_jaxpr_custom — differs: no
# ensure_out_unknowns/ensure_out_inst; an equation holding a jaxpr with no rule in
# partial_eval_jaxpr_custom_rules, with known and unknown inputs, is split by its
# custom_partial_eval_rules rule (`partial_eval_jaxpr_nounits` of that one equation), which
# saves what its unknown part reads
def partial_eval_jaxpr_custom(closed: ClosedJaxpr, in_unknowns: Sequence[bool],
                              in_inst: Sequence[bool], saveable: Callable
                              ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], list[bool], int]:
    """Split `closed` into a known jaxpr and a staged one, with the policy `saveable` saying
    which known values the staged one may read (the others it computes again).

    `in_inst[i]`: the staged jaxpr receives input i (a known input it does not receive and
    reads is a residual). Walks the equations in program order: one with a rule in
    `partial_eval_jaxpr_custom_rules` (`jit` and `remat2`: the policy applied inside their
    jaxprs; the debug callbacks) is split by it; one with an unknown input is staged; one with
    only known inputs is known, and also staged (recomputed) unless the policy saves its
    outputs (or it has effects). A known value the staged jaxpr reads and does not receive is
    a residual. An `Offloadable` answer saves the
    value in memory `dst`: the known jaxpr moves it there, the staged one brings it back.
    Returns (jaxpr_known, jaxpr_staged, out_unknowns, out_inst, num_res): `jaxpr_known` maps the
    known inputs to the known outputs followed by `num_res` residuals; `jaxpr_staged` maps the
    residuals followed by the inputs in `in_inst` to the outputs it makes (`out_inst`: the
    unknown ones and the known ones it recomputes).
    """
    walk = _CustomSplit(closed, in_unknowns, in_inst, saveable)
    for eqn in closed.jaxpr.eqns:
        walk.eqn(eqn.replace(invars=[walk.sub(x) for x in eqn.invars]))
    jaxpr, outvars = closed.jaxpr, [walk.sub(v) for v in closed.jaxpr.outvars]
    out_unknowns, out_inst = [walk.read(v)[0] for v in outvars], [walk.read(v)[1] for v in outvars]
    res = list(walk.residuals)
    jaxpr_known = Jaxpr(list(walk.constvars),
                        [v for v, u in zip(jaxpr.invars, in_unknowns) if not u],
                        [*(v for v, u in zip(outvars, out_unknowns) if not u), *res],
                        walk.known_eqns)
    jaxpr_staged = Jaxpr(jaxpr.constvars, [*res, *(v for v, i in zip(jaxpr.invars, in_inst) if i)],
                         [v for v, i in zip(outvars, out_inst) if i], walk.staged_eqns)
    return (ClosedJaxpr(jaxpr_known, list(walk.constvars.values())),
            ClosedJaxpr(jaxpr_staged, list(closed.consts)), out_unknowns, out_inst, len(res))


# The walk of `partial_eval_jaxpr_custom`: the state it carries from one equation to the next,
# and one method per way an equation is split (JAX keeps the same state in locals of one
# function; here each way of splitting is a named step).
class _CustomSplit:
    def __init__(self, closed: ClosedJaxpr, in_unknowns: Sequence[bool],
                 in_inst: Sequence[bool], saveable: Callable):
        jaxpr, self.saveable = closed.jaxpr, saveable
        self.env: dict[Var, tuple[bool, bool]] = {}  # var -> (unknown, available to staged)
        self.subst: dict[Var, core.Atom] = {}  # an equation's outputs, as its split made them
        self.residuals: dict[Var, None] = {}  # ordered: as the staged equations first read them
        self.known_eqns: list[JaxprEqn] = []
        self.staged_eqns: list[JaxprEqn] = []
        self.constvars: dict[Var, Any] = dict(safe_zip(jaxpr.constvars, closed.consts))
        self.env.update((v, (u, i)) for v, u, i in safe_zip(jaxpr.invars, in_unknowns, in_inst))
        self.env.update((v, (False, True)) for v in jaxpr.constvars)

    def sub(self, x):
        return self.subst.get(x, x) if isinstance(x, Var) else x

    def read(self, x) -> tuple[bool, bool]:
        return self.env[x] if isinstance(x, Var) else (False, True)

    def staged_input(self, x):
        # a known value the staged jaxpr reads and does not receive becomes a residual
        if isinstance(x, Var) and not self.env[x][1]:
            self.residuals.setdefault(x)
        return x

    def splice(self, split: ClosedJaxpr, ins: Sequence[Any], into: list) -> list:
        # copy `split`'s equations into `into`, its inputs renamed to `ins`; its outputs
        rename = dict(zip(split.jaxpr.invars, ins))
        for v, c in safe_zip(split.jaxpr.constvars, split.consts):
            self.constvars[v] = c
            self.env[v] = (False, False)
        for e in split.jaxpr.eqns:
            into.append(e.replace(invars=[rename.get(x, x) if isinstance(x, Var) else x
                                          for x in e.invars]))
        return [rename.get(x, x) if isinstance(x, Var) else x for x in split.jaxpr.outvars]

    def eqn(self, eqn: JaxprEqn) -> None:
        unks_in = [self.read(x)[0] for x in eqn.invars]
        rule = partial_eval_jaxpr_custom_rules.get(eqn.primitive)
        split = rule and rule(self.saveable, unks_in, [self.read(x)[1] for x in eqn.invars], eqn)
        if split is not None:  # a rule's split (jit, remat2, the debug callbacks)
            eqn_known, eqn_staged, unks_out, inst_out, res = split
            self.known_eqns.extend([eqn_known] if eqn_known is not None else [])
            self.staged_eqns.extend([eqn_staged] if eqn_staged is not None else [])
            self.residuals.update(dict.fromkeys(res))
            self.env.update(zip(eqn.outvars, zip(unks_out, inst_out)))
        elif any(unks_in) and not all(unks_in) and eqn.primitive in custom_partial_eval_rules:
            self.by_nounits(eqn, unks_in)
        elif any(unks_in):
            self.stage(eqn, unknown=True)
        else:
            self.known(eqn)

    def by_nounits(self, eqn: JaxprEqn, unks_in: list[bool]) -> None:
        # an equation holding a jaxpr, without a rule here: its custom_partial_eval_rules rule
        # splits it (partial_eval_jaxpr_nounits of the one equation), saving what it reads
        fresh = [Var(x.aval) for x in eqn.invars]
        one = ClosedJaxpr(Jaxpr([], fresh, eqn.outvars, [eqn.replace(invars=fresh)]), [])
        known, unknown, out_unks, num_res = partial_eval_jaxpr_nounits(one, unks_in)
        known_outs = self.splice(known, [x for x, u in zip(eqn.invars, unks_in) if not u],
                                 self.known_eqns)
        self.env.update((x, (False, False)) for x in known_outs
                        if isinstance(x, Var) and x not in self.env)
        known_outs, res = split_list(known_outs, [len(known_outs) - num_res])
        ins = [*map(self.staged_input, res), *(x for x, u in zip(eqn.invars, unks_in) if u)]
        outs = self.splice(unknown, ins, self.staged_eqns)
        self.env.update((x, (True, True)) for x in outs if isinstance(x, Var))
        self.subst.update(safe_zip(eqn.outvars, merge_lists(out_unks, known_outs, outs)))

    def known(self, eqn: JaxprEqn) -> None:
        # only known inputs: known, and also staged (recomputed) unless the policy saves its
        # outputs (or it has effects); an Offloadable answer moves them to memory `dst` and back
        self.known_eqns.append(eqn)
        case = self.saveable(eqn.primitive, *[x.aval for x in eqn.invars], **eqn.params)
        if isinstance(case, Offloadable):
            for v in eqn.outvars:
                moved = Var(v.aval)
                self.env[moved], self.env[v] = (False, False), (False, True)
                self.known_eqns.append(_device_put_eqn(v, moved, case.dst))
                self.staged_eqns.append(_device_put_eqn(self.staged_input(moved), v, case.src))
        elif case or eqn.effects:
            self.env.update((v, (False, False)) for v in eqn.outvars)
        else:
            self.stage(eqn, unknown=False)

    def stage(self, eqn: JaxprEqn, unknown: bool) -> None:
        self.staged_eqns.append(eqn.replace(invars=[self.staged_input(x) for x in eqn.invars]))
        self.env.update((v, (unknown, True)) for v in eqn.outvars)


def _device_put_eqn(x: Var, out: Var, kind: str) -> JaxprEqn:
    # not at the top: dispatch sits above the interpreters (JAX imports device_put_p here too)
    from minijax.dispatch import MemorySpace, device_put_p
    return JaxprEqn([x], [out], device_put_p, dict(devices=(MemorySpace.of_kind(kind),),
                                                   srcs=(None,)))


# ---------------------------------------------------------------------------------------------
# Dead-code elimination
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/partial_eval.py dce_rules
dce_rules: dict[core.Primitive, Callable] = {}
# primitives whose equations DCE keeps even when nothing reads their outputs (JAX: a dce rule
# returning the equation whole, as pallas_call's: a kernel may do more than its outputs say)
dce_kept_whole: set[core.Primitive] = set()


# JAX: jax/_src/interpreters/partial_eval.py dce_jaxpr_closed_call_rule — differs: only the
# equation's tail; each rule has dead-code-eliminated its own jaxpr(s) into `params`
def dce_eqn(eqn: JaxprEqn, used_inputs: Sequence[bool], used_outputs: Sequence[bool],
            **params) -> JaxprEqn:
    """`eqn` with only its used inputs and outputs and `params` replaced: the end of the DCE
    rule of a primitive that holds a jaxpr (jit, remat, cond...)."""
    return eqn.replace(invars=[v for v, u in safe_zip(eqn.invars, used_inputs) if u],
                       outvars=[v for v, u in safe_zip(eqn.outvars, used_outputs) if u],
                       params=dict(eqn.params, **params))


# JAX: jax/_src/interpreters/partial_eval.py dce_jaxpr
def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool] | None = None,
              instantiate: bool | Sequence[bool] = False) -> tuple[Jaxpr, list[bool]]:
    """Drop equations whose outputs are not needed and that have no effects (an effectful
    equation, e.g. an `io_callback` or `debug.print`, stays; see minijax/effects.py).

    Returns (new_jaxpr, used_inputs). Invars where `instantiate` (one bool, or one per invar)
    is true are kept even if unused, and count as used. Outputs not in `used_outputs` are
    removed from the jaxpr's outvars.
    """
    if used_outputs is None:
        used_outputs = [True] * len(jaxpr.outvars)
    outvars = [v for v, u in safe_zip(jaxpr.outvars, used_outputs) if u]
    live: set[Var] = {v for v in outvars if isinstance(v, Var)}
    new_eqns = []
    for eqn in reversed(jaxpr.eqns):
        used = [v in live for v in eqn.outvars]
        if not any(used) and not effects.dceable_effects.filter_not_in(eqn.effects) and \
                eqn.primitive not in dce_kept_whole:
            continue
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            eqn = rule(eqn, used)
        elif not all(used):
            eqn = eqn.replace(outvars=[v if u else DropVar(v.aval)
                                       for v, u in zip(eqn.outvars, used)])
        new_eqns.append(eqn)
        live.update([v for v in eqn.invars if isinstance(v, Var)])
    new_eqns.reverse()
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(jaxpr.invars)
    used_inputs = [v in live or i for v, i in safe_zip(jaxpr.invars, instantiate)]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u]
    constvars = [v for v in jaxpr.constvars if v in live]
    return Jaxpr(constvars, invars, outvars, new_eqns), used_inputs


# JAX: jax/_src/interpreters/partial_eval.py dce_jaxpr_consts — differs: keeps the consts bound
def dce_closed_jaxpr(closed: ClosedJaxpr, used_outputs: Sequence[bool] | None = None,
                     instantiate: bool | Sequence[bool] = False
                     ) -> tuple[ClosedJaxpr, list[bool]]:
    """`dce_jaxpr` of a ClosedJaxpr that also drops the consts no remaining equation reads.

    Returns (new_closed, used_inputs), with `used_outputs` and `instantiate` as in dce_jaxpr.
    A jaxpr this made is handed back as it is when asked again for every output and input.
    """
    if used_outputs is None and instantiate is True and closed in _dead_code_free:
        return closed, [True] * len(closed.jaxpr.invars)
    new, used_inputs = dce_jaxpr(closed.jaxpr, used_outputs, instantiate=instantiate)
    kept = set(new.constvars)
    consts = [c for v, c in safe_zip(closed.jaxpr.constvars, closed.consts) if v in kept]
    out = ClosedJaxpr(new, consts)
    _dead_code_free.add(out)
    return out, used_inputs


# the jaxprs dce_closed_jaxpr made (every equation of theirs is needed or has an effect)
_dead_code_free: weakref.WeakSet = weakref.WeakSet()


def count_eqns(jaxpr: Jaxpr) -> int:
    """Equations in a jaxpr, counting those of jaxprs nested in params (for benchmarks)."""
    n = 0
    for e in jaxpr.eqns:
        n += 1
        for p in e.params.values():
            for sub in core.jaxprs_in_param(p):
                n += count_eqns(sub)
    return n
