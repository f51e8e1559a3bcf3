"""Automatic differentiation: forward mode (JVPTrace), linearization and transposition.

Forward mode pushes a tangent alongside every primal value, using each primitive's jvp rule.
Reverse mode is built the way JAX builds it: *linearize* (split the jvp into the primal
computation, done now, and the tangent computation, recorded as a linear jaxpr), then
*transpose* that linear jaxpr with `backward_pass`, running it backwards with each primitive's
transpose rule.

Which linearization? Two paths, selected by the option `jax_use_direct_linearize`
(`minijax.config.update`, JAX's name; on by default, as in JAX). The classic one
(`linearize_flat_jvp_pe`) runs the jvp under partial evaluation (`partial_eval.JaxprTrace`:
known primal work is done at once, unknown tangent work is recorded); it needs no rule beyond
jvp and transpose and is Autodidax's path.
The direct one (`LinearizeTrace`, JAX 0.10's only path: JAX defines the option, default True,
but nothing reads it) sends each primitive's primal work to the parent trace and its tangent
work to a separate jaxpr trace; a primitive may register its own rule in
`primitive_linearizations`, the others fall back to their jvp rule, partially evaluated one
primitive at a time (`fallback_linearize_rule`). chapters/06-reverse-mode.md contrasts the two.
Mirrors jax/_src/interpreters/ad.py.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from minijax import core
from minijax.ad_util import Zero, add_jaxvals_p, zeros_like_aval
from minijax.array import Array
from minijax.config import config
from minijax.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Tracer, Var
from minijax.interpreters import partial_eval as pe
from minijax.util import safe_zip

_CHAPTER_JVP = "chapters/04-forward-mode.md"
_CHAPTER_REV = "chapters/06-reverse-mode.md"
_CHAPTER_PALLAS = "chapters/16-pallas.md"

# JAX: jax/_src/interpreters/ad.py primitive_jvps
primitive_jvps: dict[core.Primitive, Callable] = {}
# JAX: jax/_src/interpreters/ad.py primitive_transposes
primitive_transposes: dict[core.Primitive, Callable] = {}
# JAX: jax/_src/interpreters/ad.py primitive_linearizations
primitive_linearizations: dict[core.Primitive, Callable] = {}

# ---------------------------------------------------------------------------------------------
# Tangent helpers
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/interpreters/ad.py instantiate_zeros
def instantiate_zeros(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


# JAX: jax/_src/interpreters/ad.py add_tangents
def add_tangents(x, y):
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add_jaxvals_p.bind(x, y)


# ---------------------------------------------------------------------------------------------
# Forward mode
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/ad.py JVPTracer
class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal, tangent) -> None:
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> ShapedArray:
        return core.get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p

    # JAX: jax/_src/interpreters/ad.py JVPTracer._short_repr, LinearizeTracer._short_repr —
    # reverse mode here is jvp into a JaxprTrace; JAX's LinearizeTracer prints as GradTracer
    def _short_repr(self) -> str:
        pp = lambda x: x._short_repr() if isinstance(x, Tracer) else str(x)
        if isinstance(self.tangent, Tracer) and isinstance(self.tangent._trace, pe.JaxprTrace):
            tangent = core.get_aval(self.tangent).str_short()
            return f"GradTracer(primal={pp(self.primal)}, typeof(tangent)={tangent})"
        return f"JVPTracer(primal={pp(self.primal)}, tangent={pp(self.tangent)})"


# JAX: jax/_src/interpreters/ad.py JVPTrace
class JVPTrace(core.Trace):
    """Forward mode: each tracer carries (primal, tangent). A primitive's jvp rule runs in the
    parent trace and returns the primal and tangent outputs."""

    def __init__(self, parent_trace: core.Trace, fun_name: str = "fun") -> None:
        super().__init__()
        self.parent_trace = parent_trace
        self.fun_name = fun_name

    def describe(self) -> str:
        return f" while differentiating the function {self.fun_name} (jvp)"

    def to_primal_tangent_pair(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        core.check_not_escaped(x)
        return x, Zero.from_primal_value(x)

    def process_primitive(self, primitive, tracers, params):
        primals, tangents = zip(*map(self.to_primal_tangent_pair, tracers)) if tracers else ((), ())
        if all(type(t) is Zero for t in tangents):
            return primitive.bind_with_trace(self.parent_trace, primals, params)
        rule = primitive_jvps.get(primitive)
        if rule is None:
            raise NotImplementedError(
                f"Differentiation rule for '{primitive.name}' not implemented "
                f"(no jvp rule) — see {_CHAPTER_JVP}")
        with core.set_current_trace(self.parent_trace):
            primal_out, tangent_out = rule(primals, tangents, **params)
        if primitive.multiple_results:
            return [maybe_jvp_tracer(self, p, t) for p, t in safe_zip(primal_out, tangent_out)]
        return maybe_jvp_tracer(self, primal_out, tangent_out)

    # JAX: jax/_src/interpreters/ad.py JVPTrace.process_custom_jvp_call (and _vjp_call)
    def process_custom_derivative_call(self, primitive, fun, tracers, rules):
        # `fun` is not run, not even traced: the rule computes the primal output (JAX's order)
        primals, tangents = zip(*map(self.to_primal_tangent_pair, tracers)) if tracers else ((), ())
        if all(type(t) is Zero for t in tangents):
            return self.parent_trace.process_custom_derivative_call(primitive, fun, primals,
                                                                    rules)
        with core.set_current_trace(self.parent_trace):
            primal_out, tangent_out = primitive_jvps[primitive](primals, tangents, num_consts=0,
                                                                **rules)
        return [maybe_jvp_tracer(self, p, t) for p, t in safe_zip(primal_out, tangent_out)]


def maybe_jvp_tracer(trace: JVPTrace, primal, tangent):
    if type(tangent) is Zero:
        return primal
    return JVPTracer(trace, primal, tangent)


# JAX: jax/_src/interpreters/ad.py jvp_subtrace (jvp_subtrace_aux with has_aux)
def jvp_flat(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any],
             fun_name: str = "fun", has_aux: bool = False):
    """Forward mode on a flat function. Tangents may be `Zero`. Returns (primals_out,
    tangents_out), with Zero tangents left symbolic. With `has_aux`, `fun` returns
    (outs, aux) and a third list is returned: aux's primal values (not differentiated)."""
    trace = JVPTrace(core.current_trace(), fun_name)
    try:
        in_tracers = [maybe_jvp_tracer(trace, p, t) for p, t in safe_zip(primals, tangents)]
        with core.set_current_trace(trace):
            outs = fun(*in_tracers)
        outs, aux = outs if has_aux else (outs, [])
        pairs = [trace.to_primal_tangent_pair(o) for o in outs]
        # aux leaves that are not tracers (ints, strings, ...) pass untouched, as in JAX
        aux = [trace.to_primal_tangent_pair(a)[0] if isinstance(a, Tracer) else a for a in aux]
    finally:
        trace.invalidate()
    primals_out, tangents_out = [p for p, _ in pairs], [t for _, t in pairs]
    return (primals_out, tangents_out, aux) if has_aux else (primals_out, tangents_out)


# ---------------------------------------------------------------------------------------------
# Rule helpers (as in JAX's ad.py)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/ad.py defjvp
def defjvp(primitive: core.Primitive, *jvprules: Callable | None) -> None:
    """Register a jvp built from one rule per operand: `rule(t_i, *primals, **params)` gives
    that operand's contribution to the output tangent (None: the output does not depend on it).
    """
    _defjvp_sum(primitive, jvprules, with_ans=False)


# JAX: jax/_src/interpreters/ad.py defjvp2
def defjvp2(primitive: core.Primitive, *jvprules: Callable | None) -> None:
    """Like defjvp, but each rule also gets the primal output: `rule(t_i, ans, *primals)`,
    so e.g. tanh's derivative 1 - ans**2 reuses the computed tanh instead of recomputing it."""
    _defjvp_sum(primitive, jvprules, with_ans=True)


def _defjvp_sum(primitive: core.Primitive, jvprules, with_ans: bool) -> None:
    # The output tangent is the sum of each nonzero input tangent's contribution.
    def jvp(primals, tangents, **params):
        primal_out = primitive.bind(*primals, **params)
        ans = (primal_out,) if with_ans else ()
        out = Zero(core.get_aval(primal_out).to_tangent_aval())
        for rule, t in zip(jvprules, tangents):
            if rule is not None and type(t) is not Zero:
                out = add_tangents(out, rule(t, *ans, *primals, **params))
        return primal_out, out
    primitive_jvps[primitive] = jvp


# JAX: jax/_src/interpreters/ad.py defjvp_zero
def defjvp_zero(primitive: core.Primitive) -> None:
    """The output tangent is zero (integer/boolean results, stop_gradient...)."""
    def jvp(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [Zero.from_primal_value(o) for o in out]
        return out, Zero.from_primal_value(out)
    primitive_jvps[primitive] = jvp


# JAX: jax/_src/interpreters/ad.py deflinear2 — differs: one helper for unary and n-ary
def deflinear(primitive: core.Primitive, transpose_rule: Callable) -> None:
    """A primitive linear in all its operands: its jvp applies it to the tangents."""
    def jvp(primals, tangents, **params):
        primal_out = primitive.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return primal_out, Zero.from_primal_value(primal_out)
        tangent_out = primitive.bind(*map(instantiate_zeros, tangents), **params)
        return primal_out, tangent_out
    primitive_jvps[primitive] = jvp
    primitive_transposes[primitive] = transpose_rule


# ---------------------------------------------------------------------------------------------
# Linearize: jvp under partial evaluation
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/ad.py linearize — differs: JAX 0.10 has only the direct path
def linearize_flat(fun: Callable, primals: Sequence[Any], fun_name: str = "fun",
                   has_aux: bool = False, is_vjp: bool = False):
    """Evaluate `fun` at `primals` and record its linear tangent map as a jaxpr.

    Returns (primals_out, lin) where `lin` is a ClosedJaxpr taking one tangent per primal and
    returning one tangent per output; its consts are the residuals (values the tangent
    computation needs from the primal one, e.g. `cos x` for `sin`). With `has_aux` (`fun`
    returns (outs, aux)), also aux's values: (primals_out, lin, aux). The option
    `jax_use_direct_linearize` picks `linearize_flat_direct` (True) or `linearize_flat_jvp_pe`.
    """
    if config.jax_use_direct_linearize:
        return linearize_flat_direct(fun, primals, fun_name, has_aux, is_vjp)
    return linearize_flat_jvp_pe(fun, primals, fun_name, has_aux)


# JAX: jax/_src/interpreters/ad.py linearize_from_jvp — differs: over the whole function (JAX's
# classic path; JAX 0.10 runs it one primitive at a time, as fallback_linearize_rule does)
def linearize_flat_jvp_pe(fun: Callable, primals: Sequence[Any], fun_name: str = "fun",
                          has_aux: bool = False):
    """The classic linearization: `jvp_flat` under a `partial_eval.JaxprTrace` whose unknowns
    are the tangents. Returns what `linearize_flat` returns."""
    parent = core.current_trace()
    pe_trace = pe.JaxprTrace(parent, fun_name, "linearize")
    try:
        tangent_avals = [core.get_aval(p).to_tangent_aval() for p in primals]
        tangents_in = [pe_trace.new_arg(a) for a in tangent_avals]
        with core.set_current_trace(pe_trace):
            primals_out, tangents_out, *aux = jvp_flat(fun, primals, tangents_in, fun_name,
                                                       has_aux)
            tangents_out = [instantiate_zeros(t) for t in tangents_out]
        for p in primals_out:
            if pe_trace.is_own(p):
                # JAX: jax/_src/interpreters/ad.py linearize_from_jvp raises the same ValueError
                raise ValueError(
                    "Linearization failed to produce known values for all output primals: a "
                    "primitive with a jvp rule but no partial-evaluation split made a primal "
                    f"output depend on a tangent (e.g. pallas_call: see {_CHAPTER_PALLAS})")
        jaxpr, consts = pe_trace.to_jaxpr(tangents_out)
    finally:
        pe_trace.invalidate()
    lin, _ = pe.dce_closed_jaxpr(ClosedJaxpr(jaxpr, consts), instantiate=True)
    return (list(primals_out), lin, *aux)


# ---------------------------------------------------------------------------------------------
# Linearize directly: LinearizeTrace
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/ad.py LinearizeTracer
class LinearizeTracer(Tracer):
    """A value being linearized: its primal (a value of the parent trace) and its tangent (a
    tracer of the tangent jaxpr trace)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: "LinearizeTrace", primal, tangent) -> None:
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> ShapedArray:
        return core.get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p

    # JAX: jax/_src/interpreters/ad.py LinearizeTracer._short_repr
    def _short_repr(self) -> str:
        p = self.primal
        primal = p._short_repr() if isinstance(p, Tracer) else str(p)
        return f"GradTracer(primal={primal}, typeof(tangent)={self.tangent.aval.str_short()})"


# JAX: jax/_src/interpreters/ad.py LinearizeTrace
class LinearizeTrace(core.Trace):
    """Linearization without partial evaluation of the whole function: a primitive's primal
    outputs are computed in the parent trace, its tangent outputs are recorded in
    `tangent_trace` (a DynamicJaxprTrace), and what the tangent part reads from the primal part
    (the residuals) becomes that jaxpr's consts. `is_vjp` tells the rules the linear map will
    be transposed."""

    def __init__(self, parent_trace: core.Trace, tangent_trace: pe.DynamicJaxprTrace,
                 is_vjp: bool = False, fun_name: str = "fun") -> None:
        super().__init__()
        self.parent_trace = parent_trace
        self.tangent_trace = tangent_trace
        self.is_vjp = is_vjp
        self.fun_name = fun_name

    def describe(self) -> str:
        return f" while differentiating the function {self.fun_name} (linearize)"

    def to_primal_tangent_pair(self, x):
        if isinstance(x, LinearizeTracer) and x._trace is self:
            return x.primal, x.tangent
        core.check_not_escaped(x)
        return x, Zero.from_primal_value(x)

    def process_primitive(self, primitive, tracers, params):
        primals, tangents = zip(*map(self.to_primal_tangent_pair, tracers)) if tracers else ((), ())
        if all(type(t) is Zero for t in tangents):
            return primitive.bind_with_trace(self.parent_trace, primals, params)
        nonzeros = [type(t) is not Zero for t in tangents]
        rule = primitive_linearizations.get(primitive)
        with core.set_current_trace(self.parent_trace):
            if rule is None:
                out = fallback_linearize_rule(primitive, self.is_vjp, nonzeros, *primals,
                                              **params)
            else:
                out = rule(self.is_vjp, nonzeros, *primals, **params)
        return self._tangents_out(primitive.multiple_results, tangents, *out)

    # JAX: jax/_src/interpreters/ad.py LinearizeTrace.process_custom_jvp_call (and _vjp_call)
    def process_custom_derivative_call(self, primitive, fun, tracers, rules):
        # `fun` is not run, not even traced: the rule computes the primal output (JAX's order)
        primals, tangents = zip(*map(self.to_primal_tangent_pair, tracers)) if tracers else ((), ())
        if all(type(t) is Zero for t in tangents):
            return self.parent_trace.process_custom_derivative_call(primitive, fun, primals,
                                                                    rules)
        rule = primitive_jvps[primitive]
        with core.set_current_trace(self.parent_trace):
            out = linearize_from_jvp(lambda ps, ts: rule(ps, ts, num_consts=0, **rules), True,
                                     [type(t) is not Zero for t in tangents], primals,
                                     primitive.name)
        return self._tangents_out(True, tangents, *out)

    def _tangents_out(self, multiple_results, tangents, primal_out, nonzeros_out, residuals,
                      linearized):
        with core.set_current_trace(self.tangent_trace):
            tangent_out = linearized(residuals, *tangents)
        if multiple_results:
            return [maybe_linearize_tracer(self, p, nz, t)
                    for p, nz, t in safe_zip(primal_out, nonzeros_out, tangent_out)]
        return maybe_linearize_tracer(self, primal_out, nonzeros_out, tangent_out)


# JAX: jax/_src/interpreters/ad.py maybe_linearize_tracer
def maybe_linearize_tracer(trace: LinearizeTrace, primal, nonzero: bool, tangent):
    return LinearizeTracer(trace, primal, tangent) if nonzero else primal


# JAX: jax/_src/interpreters/ad.py fallback_linearize_rule — differs: under `jit`, the split
# of a primitive's jvp is traced once per (primitive, params, avals, nonzero tangents) and
# replayed after that (`_linearizations`); JAX traces the jvp again at every application
def fallback_linearize_rule(primitive: core.Primitive, is_vjp: bool, nonzeros: Sequence[bool],
                            *primals, **params):
    """A primitive with no linearize rule: its jvp rule, partially evaluated on its own."""
    rule = primitive_jvps.get(primitive)
    if rule is None:
        raise NotImplementedError(
            f"Differentiation rule for '{primitive.name}' not implemented "
            f"(no jvp rule) — see {_CHAPTER_JVP}")

    def jvp(ps, ts):
        return rule(tuple(ps), tuple(ts), **params)
    key = _linearization_key(primitive, rule, nonzeros, primals, params)
    if key is None:
        return linearize_from_jvp(jvp, primitive.multiple_results, nonzeros, primals,
                                  primitive.name)
    split = _linearizations.get(key)
    if split is None:
        if len(_linearizations) >= pe.CACHE_LIMIT:
            _linearizations.clear()
        split = _linearizations[key] = _LinearizedSplit.trace(
            jvp, primitive.multiple_results, nonzeros, primals, primitive.name)
    return split.apply(primals)


# (primitive, jvp rule, nonzeros, avals, params, trace context) -> _LinearizedSplit
_linearizations: dict = {}


def _linearization_key(primitive, rule, nonzeros, primals, params) -> tuple | None:
    """The key of a primitive's split in `_linearizations`, or None where a split traced on
    avals might differ from the rule run on these values: outside a plain jit trace; a user's
    primitive; a concrete operand other than a scalar literal (keyed by its bits: the split
    holds it); a symbolic dimension; named axes, a mesh or compute_on in context; source info
    being recorded; a param that is not a plain value."""
    if (type(core.current_trace()) is not pe.DynamicJaxprTrace or primitive.user_defined
            or not pe.context_is_plain() or not all(map(pe.is_plain, params.values()))):
        return None
    operands = []
    for p in primals:
        if isinstance(p, Tracer):
            if p.aval.vma or not pe.static_avals((p.aval,)):
                return None
            operands.append(p.aval)
        elif type(p) is Array and p._literal and not p.aval.shape:
            operands.append((p.aval, p._value().tobytes()))  # (-0.0 and 0.0 differ)
        else:
            return None
    return (primitive, rule, tuple(nonzeros), tuple(operands), tuple(params.items()),
            config.trace_context)  # (the rule: one may be swapped for another, as a test does)


class _LinearizedSplit(NamedTuple):
    """A primitive's jvp split once on avals: `known` maps the traced primals (`traced`: which
    they are; the others, scalar literals, are held inside) to the primal outputs and the
    residuals (the work done now, in the trace that called); `linearized(residuals,
    *tangents)` replays the tangent equations. Names are recorded relative to the primitive's
    own scope, so replaying either half adds the scope it is replayed in."""
    known: ClosedJaxpr
    traced: tuple
    multiple_results: bool
    nonzeros_out: list
    linearized: Callable
    evaluate: Callable  # `_replay` where no equation has a scope of its own, else eval_jaxpr

    @staticmethod
    def trace(jvp, multiple_results, nonzeros, primals, name) -> "_LinearizedSplit":
        found: dict = {}
        traced = tuple(isinstance(p, Tracer) for p in primals)

        def known(*args):
            it = iter(args)
            full = [next(it) if t else p for p, t in zip(primals, traced)]
            primals_out, nonzeros_out, lin, out_avals = _split_jvp(jvp, multiple_results,
                                                                   nonzeros, full, name)
            found.update(lin=lin.jaxpr, nonzeros_out=nonzeros_out, out_avals=out_avals)
            return [*primals_out, *lin.consts]
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
            known, [p.aval for p, t in zip(primals, traced) if t], fun_name=name,
            purpose="linearize")
        lin, nonzeros_out = found["lin"], found["nonzeros_out"]
        plain = not any(e.name_stack or e.ctx is not None for e in (*jaxpr.eqns, *lin.eqns))
        evaluate = _replay if plain else core.eval_jaxpr
        return _LinearizedSplit(
            ClosedJaxpr(jaxpr, consts), traced, multiple_results, nonzeros_out,
            _replayer(lin, multiple_results, nonzeros, nonzeros_out, found["out_avals"],
                      evaluate), evaluate)

    def apply(self, primals):
        outs = self.evaluate(self.known.jaxpr, self.known.consts,
                             *[p for p, t in zip(primals, self.traced) if t])
        n = len(self.nonzeros_out)
        if self.multiple_results:
            return outs[:n], list(self.nonzeros_out), outs[n:], self.linearized
        return outs[0], self.nonzeros_out[0], outs[n:], self.linearized


# JAX: jax/_src/interpreters/ad.py linearize_from_jvp
def linearize_from_jvp(jvp: Callable, multiple_results: bool, nonzeros: Sequence[bool],
                       primals: Sequence[Any], name: str = "jvp"):
    """Run `jvp(primals, tangents)` under a JaxprTrace whose unknowns are the nonzero
    tangents. Returns JAX's linearize-rule tuple (primals_out, nonzeros_out, residuals,
    linearized): `linearized(residuals, *tangents)` replays the recorded tangent equations on
    whatever trace is current (the LinearizeTrace's tangent trace)."""
    primals_out, nonzeros_out, lin, out_avals = _split_jvp(jvp, multiple_results, nonzeros,
                                                           primals, name)
    linearized = _replayer(lin.jaxpr, multiple_results, nonzeros, nonzeros_out, out_avals,
                           _eval_with_recorded_names)
    if multiple_results:
        return primals_out, nonzeros_out, lin.consts, linearized
    return primals_out[0], nonzeros_out[0], lin.consts, linearized


def _split_jvp(jvp, multiple_results, nonzeros, primals, name):
    # the primal outputs (known: computed in the current trace), which tangent outputs are
    # nonzero, the tangent equations (their residuals as consts), the tangent output avals
    trace = pe.JaxprTrace(core.current_trace(), name, "linearize")
    try:
        tangent_avals = [core.get_aval(p).to_tangent_aval() for p in primals]
        tangents = [trace.new_arg(a) if nz else Zero(a)
                    for a, nz in safe_zip(tangent_avals, nonzeros)]
        with core.set_current_trace(trace):
            primals_out, tangents_out = jvp(tuple(primals), tuple(tangents))
        if not multiple_results:
            primals_out, tangents_out = [primals_out], [tangents_out]
        if any(trace.is_own(p) for p in primals_out):
            # JAX: jax/_src/interpreters/ad.py linearize_from_jvp raises the same ValueError
            raise ValueError(
                "Linearization failed to produce known values for all output primals: "
                f"'{name}' has a jvp rule but no partial-evaluation split, so a primal output "
                f"depends on a tangent (e.g. pallas_call: see {_CHAPTER_PALLAS})")
        nonzeros_out = [trace.is_own(t) for t in tangents_out]
        jaxpr, consts = trace.to_jaxpr([t for t, nz in zip(tangents_out, nonzeros_out) if nz])
    finally:
        trace.invalidate()
    lin, _ = pe.dce_closed_jaxpr(ClosedJaxpr(jaxpr, consts), instantiate=True)
    out_avals = [core.get_aval(p).to_tangent_aval() for p in primals_out]
    return list(primals_out), nonzeros_out, lin, out_avals


def _eval_with_recorded_names(jaxpr: Jaxpr, consts, *args) -> list:
    # equations recorded under the current scopes keep them (the current ones), where those of
    # a split traced once add the scope they are replayed in
    with core.reset_name_stack():
        return core.eval_jaxpr(jaxpr, consts, *args)


def _replay(jaxpr: Jaxpr, consts, *args) -> list:
    """eval_jaxpr for a split's jaxpr whose equations have no scope, context or source of
    their own to restore: each primitive bound in turn."""
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*[v.val if type(v) is Literal else env[v]
                                    for v in eqn.invars], **eqn.params)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = outs
    return [v.val if type(v) is Literal else env[v] for v in jaxpr.outvars]


def _replayer(lin: Jaxpr, multiple_results, nonzeros, nonzeros_out, out_avals,
              evaluate: Callable) -> Callable:
    def linearized(residuals, *tangents):
        outs = iter(evaluate(lin, residuals,
                             *[t for t, nz in safe_zip(tangents, nonzeros) if nz]))
        tangents_out = [next(outs) if nz else Zero(a) for a, nz in zip(out_avals, nonzeros_out)]
        return tangents_out if multiple_results else tangents_out[0]
    return linearized


# JAX: jax/_src/interpreters/ad.py linearize_subtrace
def linearize_flat_direct(fun: Callable, primals: Sequence[Any], fun_name: str = "fun",
                          has_aux: bool = False, is_vjp: bool = False):
    """Linearization by `LinearizeTrace`: the primal work runs in the current trace, the
    tangent work is recorded in a DynamicJaxprTrace of its own. Returns what `linearize_flat`
    returns."""
    tangent_trace = pe.DynamicJaxprTrace(fun_name, "linearize")
    trace = LinearizeTrace(core.current_trace(), tangent_trace, is_vjp, fun_name)
    try:
        in_tracers = [LinearizeTracer(trace, p, tangent_trace.new_arg(
            core.get_aval(p).to_tangent_aval())) for p in primals]
        with core.set_current_trace(trace):
            outs = fun(*in_tracers)
        outs, aux = outs if has_aux else (outs, [])
        primals_out, tangents_out = [], []
        for o in outs:
            p, t = trace.to_primal_tangent_pair(o)
            primals_out.append(p)
            tangents_out.append(t)
        aux = [trace.to_primal_tangent_pair(a)[0] if isinstance(a, Tracer) else a for a in aux]
        # A zero output tangent is JAX's symbolic zero: `linearize`'s function makes the zeros
        # when called (an equation of the tangent trace); `vjp` never transposes it, so it is
        # made in the parent trace, a residual that backward_pass reads no equation of.
        with core.set_current_trace(trace.parent_trace if is_vjp else tangent_trace):
            tangents_out = [instantiate_zeros(t) for t in tangents_out]
        jaxpr, consts = tangent_trace.to_jaxpr(tangents_out)
    finally:
        trace.invalidate()
        tangent_trace.invalidate()
    lin, _ = pe.dce_closed_jaxpr(ClosedJaxpr(jaxpr, consts), instantiate=True)
    return (primals_out, lin, *([aux] if has_aux else []))


# ---------------------------------------------------------------------------------------------
# Transposition
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/ad.py UndefinedPrimal
class UndefinedPrimal:
    """Marks a linear input of an equation being transposed: its value is unknown, only its
    aval; the transpose rule returns the cotangent for it."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


# JAX: jax/_src/interpreters/ad.py backward_pass
def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], primals_in: Sequence[Any],
                  cts_out: Sequence[Any], cts_in_init: Sequence[Any] | None = None) -> list:
    """Transpose a jaxpr that is linear in the inputs given as `UndefinedPrimal`.

    Walks the equations in reverse; each linear equation's transpose rule maps the cotangents of
    its outputs to cotangents of its linear inputs, which are summed per variable. Equations
    with no linear input are evaluated forward first. `cts_in_init` (one per invar, None for
    none) are cotangents the invars start with: each contribution is added to it where it is
    made (JAX's `ValAccum` of backward_pass3, which scan's transpose starts from the
    accumulated cotangents of its consts). Returns one cotangent per invar (Zero where none
    flowed; None for inputs that were not linear).
    """
    primal_env: dict[Var, Any] = {}
    ct_env: dict[Var, Any] = {}

    def read_primal(v):
        if isinstance(v, Literal):
            return v.val
        return primal_env[v] if v in primal_env else UndefinedPrimal(v.aval)

    def write_ct(v, ct):
        if isinstance(v, Var) and ct is not None and type(ct) is not Zero:
            ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, c in safe_zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, x in safe_zip(jaxpr.invars, primals_in):
        if not is_undefined_primal(x):
            primal_env[v] = x
    linear_eqns = _eval_nonlinear(jaxpr, read_primal, primal_env)
    for v, ct in safe_zip(jaxpr.invars, cts_in_init or [None] * len(jaxpr.invars)):
        write_ct(v, ct)
    for v, ct in safe_zip(jaxpr.outvars, cts_out):
        write_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(c is None for c in cts):
            continue
        cts = [Zero(v.aval) if c is None else c for v, c in zip(eqn.outvars, cts)]
        rule = primitive_transposes.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"Transpose rule (for reverse-mode differentiation) for "
                f"'{eqn.primitive.name}' not implemented — see {_CHAPTER_REV}")
        invals = [read_primal(v) for v in eqn.invars]
        ct_arg = cts if eqn.primitive.multiple_results else cts[0]
        # JAX: jax/_src/interpreters/ad.py backward_pass — differs: the transposed equations,
        # and the sums of cotangents they make, get the scopes of the one they transpose (not
        # wrapped in `transpose(...)`) and keep its compute_on
        with core.source_info_of(eqn), core.eqn_context_of(eqn):
            cts_in = rule(ct_arg, *invals, **eqn.params)
            for v, x, ct in safe_zip(eqn.invars, invals, cts_in):
                if is_undefined_primal(x):
                    write_ct(v, ct)
    out = []
    for v, x in safe_zip(jaxpr.invars, primals_in):
        if is_undefined_primal(x):
            out.append(ct_env.get(v, Zero(v.aval)))
        else:
            out.append(None)
    return out


def _eval_nonlinear(jaxpr: Jaxpr, read_primal: Callable, primal_env: dict) -> list:
    """backward_pass's forward pass: bind, in order, the equations none of whose inputs is an
    UndefinedPrimal, their outputs written to `primal_env`; returns the others (linear)."""
    linear_eqns = []
    for eqn in jaxpr.eqns:
        invals = [read_primal(v) for v in eqn.invars]
        if any(is_undefined_primal(x) for x in invals):
            linear_eqns.append(eqn)
            continue
        with core.source_info_of(eqn), core.eqn_context_of(eqn):
            outs = eqn.primitive.bind(*invals, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for v, x in safe_zip(eqn.outvars, outs):
            primal_env[v] = x
    return linear_eqns


def vjp_flat(fun: Callable, primals: Sequence[Any], fun_name: str = "fun",
             has_aux: bool = False):
    """Returns (primals_out, pullback, lin): pullback(cts_out) gives one cotangent per primal
    (instantiated as arrays); `lin` is the linear jaxpr it transposes (see linearize_flat).
    With `has_aux`, `fun` returns (outs, aux) and aux's values come fourth."""
    primals_out, lin, *aux = linearize_flat(fun, primals, fun_name, has_aux,
                                             is_vjp=True)

    def pullback(cts_out: Sequence[Any]) -> list:
        undef = [UndefinedPrimal(a) for a in lin.in_avals]
        cts = backward_pass(lin.jaxpr, lin.consts, undef, cts_out)
        return [instantiate_zeros(c) for c in cts]

    return (primals_out, pullback, lin, *aux)


# ---------------------------------------------------------------------------------------------
# Transforming jaxprs (used by the rules of primitives that hold jaxprs, like jit_p)
# ---------------------------------------------------------------------------------------------

def jvp_jaxpr(closed: ClosedJaxpr, nonzeros: Sequence[bool],
              instantiate: bool | Sequence[bool] = True) -> tuple[ClosedJaxpr, list[bool]]:
    """A jaxpr computing (primals_out, tangents_out) from (primals, nonzero tangents).

    Returns (jaxpr, out_nonzeros); the tangents of outputs where `instantiate` (one bool, or one
    per output) is true are present even when zero.
    """
    tangent_avals = [a.to_tangent_aval() for a, nz in safe_zip(closed.in_avals, nonzeros) if nz]
    n = len(closed.in_avals)
    out_nz: list[bool] = []

    def fun(*args):
        primals, tans = args[:n], iter(args[n:])
        tangents = [next(tans) if nz else Zero(a.to_tangent_aval())
                    for nz, a in safe_zip(nonzeros, closed.in_avals)]
        outs_p, outs_t = jvp_flat(lambda *xs: core.eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                  primals, tangents)
        inst = [instantiate] * len(outs_t) if isinstance(instantiate, bool) else instantiate
        outs_t = [instantiate_zeros(t) if i else t for t, i in safe_zip(outs_t, inst)]
        out_nz[:] = [type(t) is not Zero for t in outs_t]
        return list(outs_p) + [t for t in outs_t if type(t) is not Zero]

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(fun, list(closed.in_avals) + tangent_avals,
                                                 purpose="jvp")
    return ClosedJaxpr(jaxpr, consts), out_nz


# JAX: jax/_src/interpreters/ad.py linearize_jaxpr
def linearize_jaxpr(closed: ClosedJaxpr, nonzeros: Sequence[bool],
                    instantiate: bool | Sequence[bool] = False,
                    allow_fwds: bool | Sequence[bool] = False, is_vjp: bool = False
                    ) -> tuple[ClosedJaxpr, int, list[bool], list[int | None], ClosedJaxpr]:
    """`closed` linearized by `LinearizeTrace`, for the linearize rules of control flow.

    Returns (primal_jaxpr, num_res, out_nonzeros, in_fwd_res, tangent_jaxpr). `tangent_jaxpr`
    maps the residuals followed by the nonzero tangents (those where `nonzeros`) to the
    nonzero output tangents (`out_nonzeros`; an output where `instantiate` is true always has
    one). A residual that is one of `closed`'s consts or inputs where `allow_fwds` (one bool,
    or one per const then input) is read from there: `in_fwd_res[k]` is its index among
    (consts, inputs), else None; `primal_jaxpr` maps the primals to the primal outputs followed
    by the `num_res` other residuals. Both jaxprs are dead-code eliminated, as JAX's are: the
    primal part of a jvp rule that only its tangent part needed (select_n's zeros) is not left
    in the primal jaxpr.
    """
    n_outs, n_fwd = len(closed.out_avals), len(closed.consts) + len(closed.in_avals)
    inst = [instantiate] * n_outs if isinstance(instantiate, bool) else list(instantiate)
    allow = [allow_fwds] * n_fwd if isinstance(allow_fwds, bool) else list(allow_fwds)
    holder: dict[str, Any] = {}

    def primal_fun(*primals):
        tangent_trace = pe.DynamicJaxprTrace("linearize_jaxpr", "linearize")
        trace = LinearizeTrace(core.current_trace(), tangent_trace, is_vjp)
        try:
            tracers = [maybe_linearize_tracer(trace, p, nz, tangent_trace.new_arg(
                a.to_tangent_aval()) if nz else None)
                for p, a, nz in safe_zip(primals, closed.in_avals, nonzeros)]
            with core.set_current_trace(trace):
                outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *tracers)
                pairs = [trace.to_primal_tangent_pair(o) for o in outs]
                # as JAX: zeros made here are primal values, so residuals of the tangent part
                tangents_out = [instantiate_zeros(t) if i else t
                                for (_, t), i in safe_zip(pairs, inst)]
            nzs_out = [type(t) is not Zero for t in tangents_out]
            jaxpr, residuals = tangent_trace.to_jaxpr(
                [t for t, nz in safe_zip(tangents_out, nzs_out) if nz])
        finally:
            trace.invalidate()
            tangent_trace.invalidate()
        tangent, _ = pe.dce_closed_jaxpr(ClosedJaxpr(jaxpr, residuals), instantiate=True)
        where = {id(x): i for i, (x, a) in enumerate(safe_zip([*closed.consts, *primals], allow))
                 if a}
        fwds = [where.get(id(r)) for r in tangent.consts]
        holder.update(tangent=tangent, nzs_out=nzs_out, fwds=fwds)
        return [p for p, _ in pairs] + [r for r, f in safe_zip(tangent.consts, fwds) if f is None]

    jaxpr, consts, out_avals = pe.trace_to_jaxpr_dynamic(primal_fun, closed.in_avals,
                                                         purpose="linearize")
    primal, _ = pe.dce_closed_jaxpr(ClosedJaxpr(jaxpr, consts), instantiate=True)
    tangent = holder["tangent"]
    tangent_jaxpr = ClosedJaxpr(pe.convert_constvars_jaxpr(tangent.jaxpr), [])
    return (primal, len(out_avals) - n_outs, holder["nzs_out"], holder["fwds"], tangent_jaxpr)
