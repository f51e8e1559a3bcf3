"""Custom differentiation rules: `custom_jvp` and `custom_vjp`.

A `custom_jvp` function is bound as the primitive `custom_jvp_call`, which holds the traced
jaxpr of the primal function (`call_jaxpr`) and the user's rule as a Python callable (`jvp`).
Evaluating, jit-compiling or batching it uses the jaxpr; differentiating it (JVPTrace) calls the
rule instead of differentiating the jaxpr. `custom_vjp` works the same way with `fwd` and `bwd`:
under JVPTrace the `fwd` rule computes the primal outputs and the residuals, and the tangent
outputs come from a `custom_lin` equation whose *transpose* calls `bwd` — so reverse mode
(linearize, then transpose) runs the user's backward pass, and forward mode alone raises.

Under vmap both the jaxpr and the rules are batched (the rules by running them under `vmap`).
Rules must not close over traced values of enclosing transformations (pass them as arguments);
JAX has the same restriction (see `jax.closure_convert`).

Mirrors jax/_src/custom_derivatives.py (and `custom_lin` from jax/_src/interpreters/ad.py).
Taught in chapters/09-primitives.md (custom rules).
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Sequence

from minijax import core, dtypes, traceback_util
from minijax.ad_util import Zero
from minijax.core import ClosedJaxpr, ShapedArray, Tracer
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.lax import lax
from minijax.tree_util import (
    PyTreeDef,
    register_pytree_node,
    tree_flatten,
    tree_map,
    tree_unflatten,
)
from minijax.util import safe_zip, split_list

_CHAPTER = "chapters/09-primitives.md"


def _fun_name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


# JAX: jax/_src/api_util.py resolve_kwargs
def _resolve_kwargs(fun: Callable, args: tuple, kwargs: dict, kind: str,
                    nondiff_argnums: tuple[int, ...] = ()) -> tuple:
    """Keyword arguments moved to their positions, and defaults filled in (custom rules see
    positional args only). The signature is read only when some are missing."""
    if not kwargs and all(i < len(args) for i in nondiff_argnums):
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        bound.apply_defaults()
    except TypeError as e:
        raise TypeError(f"The input arguments to the {kind}-decorated function "
                        f"{_fun_name(fun)} could not be resolved to positional-only arguments. "
                        f"Binding failed with the error:\n{e}") from e
    if bound.kwargs:
        raise TypeError(f"keyword-only arguments {sorted(bound.kwargs)} of the {kind} "
                        f"function {_fun_name(fun)} cannot be resolved to positions")
    return bound.args


def _split_nondiff(args: tuple, nondiff_argnums: tuple[int, ...]) -> tuple[list, list]:
    for i in nondiff_argnums:
        if not 0 <= i < len(args):
            raise TypeError(f"nondiff_argnums={nondiff_argnums} names argument {i}, but the "
                            f"function was called with {len(args)} positional arguments")
    static = [args[i] for i in nondiff_argnums]
    dyn = [x for i, x in enumerate(args) if i not in nondiff_argnums]
    return static, dyn


def _merge_nondiff(static: Sequence, dyn: Sequence, nondiff_argnums: tuple[int, ...]) -> list:
    s, d = iter(static), iter(dyn)
    return [next(s) if i in nondiff_argnums else next(d)
            for i in range(len(static) + len(dyn))]


# JAX: jax/_src/api_util.py flatten_fun_nokwargs — differs: the store also holds the avals
def _flatten_fun(fun: Callable, in_tree: PyTreeDef, out: dict) -> Callable:
    """`fun` on flat leaves; its output's tree and avals go to `out` (read after it ran)."""
    def flat_fun(*leaves):
        out_flat, out["tree"] = tree_flatten(fun(*tree_unflatten(in_tree, leaves)))
        out["avals"], out["from_fun"] = [core.get_aval(x) for x in out_flat], True
        return out_flat
    return flat_fun


def _check_rule_out(out: dict, tree: PyTreeDef, avals: list, error: Callable) -> None:
    """A rule's primal output against the function's: checked when the function ran (as in
    JAX); else the rule's output tree and avals are the function's from now on."""
    if not out.get("from_fun"):
        out.setdefault("tree", tree)
        out.setdefault("avals", avals)
    elif tree != out["tree"] or not all(map(core.typematch, avals, out["avals"])):
        raise error(_tree_avals_str(tree, avals), _tree_avals_str(out["tree"], out["avals"]))


def _tree_avals_str(tree: PyTreeDef, avals: Sequence[ShapedArray]) -> str:
    return str(tree_unflatten(tree, [a.str_short() for a in avals])).replace("'", "")


def _closure_error(kind: str, name: str) -> Exception:
    # JAX: jax/_src/interpreters/ad.py CustomVJPException (its message, for both kinds here)
    return core.UnexpectedTracerError(
        f"Detected differentiation of a {kind} function ({name}) with respect to a closed-over "
        f"value. That isn't supported because the custom rule only specifies how to "
        f"differentiate the {kind} function with respect to explicit input parameters. Try "
        f"passing the closed-over value into the {kind} function as an argument, and adapting "
        f"the {kind} rule. See {_CHAPTER}.")


# JAX: jax/_src/custom_derivatives.py CustomJVPCallPrimitive, CustomVJPCallPrimitive —
# differs: one class, whose `stage` the traces that stage or batch call
class CustomDerivativeCallPrimitive(core.Primitive):
    """custom_jvp_call / custom_vjp_call: bound with a function and its rules through
    `Trace.process_custom_derivative_call`, which decides whether the function is traced."""
    multiple_results = True

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(name)
        self.kind = kind

    def stage(self, fun: Callable, args: Sequence, rules: dict) -> tuple[list, dict]:
        """`fun` traced to a const-free jaxpr (closed-over values become leading operands):
        the operands and params of this primitive's equation."""
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
            fun, [core.get_aval(x) for x in args], fun_name=rules["name"], purpose=self.kind)
        call_jaxpr = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
        return [*consts, *args], dict(rules, call_jaxpr=call_jaxpr, num_consts=len(consts))


# ---------------------------------------------------------------------------------------------
# custom_jvp
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/custom_derivatives.py custom_jvp — differs: no symbolic_zeros=True
class custom_jvp:  # JAX's name
    """Give `fun` a hand-written forward-mode rule, used by jvp, grad, linearize, vjp.

    Use as a decorator, then register the rule with `defjvp` (or `defjvps`):

        @custom_jvp
        def f(x, y):               # x: f32[n], y: f32[n] -> f32[n]
            return jnp.sin(x) * y

        @f.defjvp
        def f_jvp(primals, tangents):   # tuples of pytrees, one entry per argument
            x, y = primals
            tx, ty = tangents
            return f(x, y), jnp.cos(x) * tx * y + jnp.sin(x) * ty

    Tangents of inputs that are not being differentiated reach the rule as zeros (JAX's
    default `symbolic_zeros=False`). Arguments listed in `nondiff_argnums` are passed, in order,
    before `primals` to the rule (`jvp(*nondiff_args, primals, tangents)`) and get no tangent.

    Raises: AttributeError when called before `defjvp`; TypeError when the rule does not return
    a `(primal_out, tangent_out)` pair matching `fun`'s output structure, shapes and dtypes.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(set(nondiff_argnums)))
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    # JAX: jax/_src/custom_derivatives.py custom_jvp.defjvp
    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Register `jvp(primals, tangents) -> (primal_out, tangent_out)`; returns `jvp`.

        `symbolic_zeros=True` (passing `SymbolicZero` objects) is not supported: raises
        NotImplementedError."""
        if symbolic_zeros:
            raise NotImplementedError("minijax's custom_jvp passes zero tangents as arrays "
                                      "(symbolic_zeros=False) only")
        self.jvp = jvp
        return jvp

    # JAX: jax/_src/custom_derivatives.py custom_jvp.defjvps
    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per positional argument: `jvp_i(t_i, primal_out, *primals)` gives that
        argument's contribution to the output tangent (None: it contributes nothing). Raises
        TypeError with nondiff_argnums."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            contributions = [rule(t, primal_out, *primals)
                             for t, rule in safe_zip(tangents, jvps) if rule is not None]
            if not contributions:
                return primal_out, tree_map(lambda p: ad.zeros_like_aval(
                    core.get_aval(p).to_tangent_aval()), primal_out)
            return primal_out, tree_map(lambda *ts: functools.reduce(_add, ts),
                                        *contributions)

        self.defjvp(jvp)

    @traceback_util.api_boundary
    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_jvp", self.nondiff_argnums)
        if isinstance(core.current_trace(), core.EvalTrace):
            return self.fun(*args)  # JAX: EvalTrace.process_custom_jvp_call calls it as is
        static, dyn = _split_nondiff(args, self.nondiff_argnums)
        nums = self.nondiff_argnums
        args_flat, in_tree = tree_flatten(tuple(dyn))
        out: dict = {}  # the output's tree and avals, from whichever of fun and rule runs
        flat_fun = _flatten_fun(lambda *d: self.fun(*_merge_nondiff(static, d, nums)),
                                in_tree, out)
        rule = lambda primals, tangents: self.jvp(*static, primals, tangents)
        flat_jvp = _flatten_jvp(rule, name, _fun_name(self.jvp), in_tree, out)
        # the current trace decides whether fun is traced (jit, vmap) or only the rule runs
        outs = core.current_trace().process_custom_derivative_call(
            custom_jvp_call_p, flat_fun, args_flat,
            dict(jvp=flat_jvp, name=name, symbolic_zeros=self.symbolic_zeros))
        return tree_unflatten(out["tree"], outs)


def _add(x, y):
    from minijax import numpy as jnp  # not at the top: numpy -> numpy.linalg imports this module
    return jnp.add(x, y)


# JAX: jax/_src/custom_derivatives.py _flatten_jvp
def _flatten_jvp(rule: Callable, fun_name: str, rule_name: str, in_tree: PyTreeDef,
                 out: dict) -> Callable:
    """The rule as a flat function `(*primals, *tangents) -> [*primals_out, *tangents_out]`,
    checking what the user's rule returns against the primal function's output `out`."""
    def flat_jvp(*primals_and_tangents):
        primals, tangents = split_list(primals_and_tangents, [len(primals_and_tangents) // 2])
        pair = rule(tree_unflatten(in_tree, primals), tree_unflatten(in_tree, tangents))
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(f"Custom JVP rule {rule_name} for function {fun_name} must produce "
                            "a pair (list or tuple of length two) representing primal and "
                            f"tangent outputs, but got {pair}.")
        primals_out, tree = tree_flatten(pair[0])
        tangents_out, tree2 = tree_flatten(pair[1])
        if tree != tree2:
            raise TypeError(f"Custom JVP rule {rule_name} for function {fun_name} must produce "
                            "primal and tangent outputs with equal container (pytree) "
                            f"structures, but got {tree} and {tree2} respectively.")
        p_avals = [core.get_aval(p) for p in primals_out]
        _check_rule_out(out, tree, p_avals, lambda got, want: TypeError(
            f"Custom JVP rule {rule_name} for function {fun_name} must produce a pair "
            "(list or tuple of length two) where the first element represents the primal "
            f"output (equal in value to the output of the custom_jvp-decorated function "
            f"{fun_name}, and in particular of the same container/pytree structure and "
            f"leaf shapes/dtypes), but instead the JVP rule output's first element was:\n"
            f"    {got}\nwhile the custom_jvp-decorated function {fun_name} had output:\n"
            f"    {want}"))
        for p, t in safe_zip(p_avals, tangents_out):
            want = p.strip_weak_type().to_tangent_aval()
            got = core.get_aval(t).strip_weak_type()
            if not core.typematch(want, got):
                raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                                f"corresponding shapes and dtypes. Expected {want.str_short()} "
                                f"(tangent type of {p.str_short()}) but got {got.str_short()}.")
        return [*primals_out, *tangents_out]

    flat_jvp.__name__ = rule_name
    return flat_jvp


def _custom_jvp_call_impl(*args, call_jaxpr, jvp, name, num_consts, symbolic_zeros):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _call_abstract_eval(prim_name: str):
    def abstract_eval(*avals, call_jaxpr, **params):
        if len(avals) != len(call_jaxpr.in_avals) or not all(
                map(core.typematch, avals, call_jaxpr.in_avals)):
            raise TypeError(f"{prim_name}: operands {[a.str_short() for a in avals]} do not "
                            f"match call_jaxpr inputs "
                            f"{[a.str_short() for a in call_jaxpr.in_avals]}")
        return call_jaxpr.out_avals
    return abstract_eval


# (also called with no call_jaxpr: JVPTrace.process_custom_derivative_call, fun not traced)
def _custom_jvp_call_jvp(primals, tangents, *, jvp, name, num_consts, symbolic_zeros,
                         call_jaxpr=None):
    const_tangents, arg_tangents = split_list(tangents, [num_consts])
    if any(type(t) is not Zero for t in const_tangents):
        raise _closure_error("custom_jvp", name)
    _, args = split_list(primals, [num_consts])
    outs = jvp(*args, *map(ad.instantiate_zeros, arg_tangents))
    return split_list(outs, [len(outs) // 2])


def _custom_jvp_call_partial_eval(trace: pe.JaxprTrace, *tracers, call_jaxpr, jvp, name,
                                  num_consts, symbolic_zeros):
    # An unknown (tangent) input: we are building a linear function, which needs no custom rule
    # any more, so the primal function is inlined (as JAX's JaxprTrace does).
    with core.set_current_trace(trace):
        return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *tracers)


def _custom_jvp_call_transpose(cts, *args, call_jaxpr, jvp, name, num_consts, symbolic_zeros):
    return ad.backward_pass(call_jaxpr.jaxpr, call_jaxpr.consts, args, cts)


def _hoisted(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """A const-free jaxpr taking the consts of `closed` as leading arguments, and the consts."""
    return ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), []), list(closed.consts)


def _custom_jvp_call_batch_rule(vals, dims, *, axis_size, call_jaxpr, jvp, name, num_consts,
                                symbolic_zeros):
    b_closed, out_dims = batching.batch_jaxpr(call_jaxpr, dims, axis_size)
    b_call, b_consts = _hoisted(b_closed)
    arg_dims = list(dims[num_consts:])

    def batched_jvp(*primals_and_tangents):
        # A tangent is batched exactly like its primal, in and out. (A rule whose tangent
        # output depends on a batched input while its primal output does not is refused by
        # vmap_flat with a ValueError.)
        return batching.vmap_flat(jvp, primals_and_tangents, arg_dims * 2, axis_size,
                                  lambda n: out_dims * 2, fun_name=jvp.__name__)

    batched_jvp.__name__ = jvp.__name__
    outs = custom_jvp_call_p.bind(*b_consts, *vals, call_jaxpr=b_call, jvp=batched_jvp,
                                  name=name, num_consts=len(b_consts) + num_consts,
                                  symbolic_zeros=symbolic_zeros)
    return outs, out_dims


def _call_lowering(ctx, *args, call_jaxpr, **params):
    return mlir.lower_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, args)


def _dce_call_jaxpr(call_jaxpr: ClosedJaxpr, used_outputs: list[bool]) -> ClosedJaxpr:
    # every input is kept: the custom rule may read inputs the primal function does not
    return pe.dce_closed_jaxpr(call_jaxpr, used_outputs, instantiate=True)[0]


def _custom_jvp_call_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    jvp = eqn.params["jvp"]
    n_out = len(used_outputs)

    def dce_jvp(*primals_and_tangents):
        primals_out, tangents_out = split_list(jvp(*primals_and_tangents), [n_out])
        return ([p for p, u in zip(primals_out, used_outputs) if u]
                + [t for t, u in zip(tangents_out, used_outputs) if u])

    dce_jvp.__name__ = jvp.__name__
    return eqn.replace(
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, call_jaxpr=_dce_call_jaxpr(eqn.params["call_jaxpr"],
                                                           used_outputs), jvp=dce_jvp))


custom_jvp_call_p = CustomDerivativeCallPrimitive("custom_jvp_call", "custom_jvp")
custom_jvp_call_p.pp_first_params = ("name",)
custom_jvp_call_p.pp_name_is_debug_info = True
custom_jvp_call_p.pp_hide_if_empty = ("num_consts",)
custom_jvp_call_p.def_impl(_custom_jvp_call_impl)
custom_jvp_call_p.def_abstract_eval(_call_abstract_eval("custom_jvp_call"))
ad.primitive_jvps[custom_jvp_call_p] = _custom_jvp_call_jvp
pe.custom_partial_eval_rules[custom_jvp_call_p] = _custom_jvp_call_partial_eval
ad.primitive_transposes[custom_jvp_call_p] = _custom_jvp_call_transpose
batching.primitive_batchers[custom_jvp_call_p] = _custom_jvp_call_batch_rule
mlir.register_lowering(custom_jvp_call_p, _call_lowering)
pe.dce_rules[custom_jvp_call_p] = _custom_jvp_call_dce_rule


# ---------------------------------------------------------------------------------------------
# custom_vjp
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/custom_derivatives.py custom_vjp — differs: no symbolic_zeros / optimize_remat
class custom_vjp:  # JAX's name
    """Give `fun` a hand-written reverse-mode rule, used by grad, vjp and jacrev.

        @custom_vjp
        def f(x, y):                     # f32[n], f32[n] -> f32[n]
            return jnp.sin(x) * y

        def f_fwd(x, y):                 # same signature as f
            return f(x, y), (jnp.cos(x), jnp.sin(x), y)    # (primal_out, residuals)

        def f_bwd(res, g):               # residuals, output cotangent (pytree like the output)
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)              # one cotangent per argument

        f.defvjp(f_fwd, f_bwd)

    `bwd` may return None for an argument (or any subtree of it) whose cotangent is zero.
    Arguments in `nondiff_argnums` are passed to `fwd` in place and to `bwd` first
    (`bwd(*nondiff_args, res, g)`); they must not be traced values.

    Raises: AttributeError when called before `defvjp`; UnexpectedTracerError for a traced
    nondiff argument; TypeError for forward-mode differentiation ("can't apply forward-mode
    autodiff (jvp) to a custom_vjp function.") and for rules returning the wrong structure;
    ValueError for a cotangent whose shape does not match its argument.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(set(nondiff_argnums)))
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = False

    # JAX: jax/_src/custom_derivatives.py custom_vjp.defvjp
    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Register `fwd(*args) -> (out, residuals)` and `bwd(residuals, g) -> cotangents`.
        `symbolic_zeros` and `optimize_remat` are not supported (NotImplementedError)."""
        if symbolic_zeros or optimize_remat:
            raise NotImplementedError("minijax's custom_vjp supports neither symbolic_zeros "
                                      "nor optimize_remat")
        self.fwd = fwd
        self.bwd = bwd

    @traceback_util.api_boundary
    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp", self.nondiff_argnums)
        static, dyn = _split_nondiff(args, self.nondiff_argnums)
        for x in static:
            if any(isinstance(leaf, Tracer) for leaf in tree_flatten(x)[0]):
                raise core.UnexpectedTracerError(
                    "Found a JAX Tracer object passed as an argument to a custom_vjp function "
                    "in a position indicated by nondiff_argnums as non-differentiable. Tracers "
                    "cannot be passed as non-differentiable arguments to custom_vjp functions; "
                    "instead, nondiff_argnums should only be used for arguments that can't be "
                    "or contain JAX tracers, e.g. function-valued arguments. In particular, "
                    "array-valued arguments should typically not be indicated as "
                    "nondiff_argnums.")
        if isinstance(core.current_trace(), core.EvalTrace):
            return self.fun(*args)  # JAX: EvalTrace.process_custom_vjp_call calls it as is
        nums = self.nondiff_argnums
        args_flat, in_tree = tree_flatten(tuple(dyn))
        out: dict = {}  # the output's tree and avals, from whichever of fun and fwd runs
        flat_fun = _flatten_fun(lambda *d: self.fun(*_merge_nondiff(static, d, nums)),
                                in_tree, out)
        fwd = lambda *d: self.fwd(*_merge_nondiff(static, d, nums))
        bwd = lambda res, g: self.bwd(*static, res, g)
        res_tree: list = []  # filled in when fwd runs, read by bwd
        flat_fwd = _flatten_fwd(fwd, name, _fun_name(self.fwd), in_tree, out, res_tree)
        flat_bwd = _flatten_bwd(bwd, _fun_name(self.bwd), in_tree,
                                [core.get_aval(x) for x in args_flat], out, res_tree)
        # the current trace decides whether fun is traced (jit, vmap) or only fwd runs
        outs = core.current_trace().process_custom_derivative_call(
            custom_vjp_call_p, flat_fun, args_flat,
            dict(fwd=flat_fwd, bwd=flat_bwd, name=name, symbolic_zeros=self.symbolic_zeros))
        return tree_unflatten(out["tree"], outs)


# JAX: jax/_src/custom_derivatives.py _flatten_fwd
def _flatten_fwd(fwd: Callable, fun_name: str, fwd_name: str, in_tree: PyTreeDef,
                 out: dict, res_tree: list) -> Callable:
    """`fwd` as a flat function `(*args) -> [*residuals, *primals_out]`; `.out_type` is `out`,
    the primal output's tree and avals (how many outputs follow the residuals)."""
    def flat_fwd(*args):
        pair = fwd(*tree_unflatten(in_tree, args))
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fun_name} must "
                            "produce a pair (list or tuple of length two) where the first "
                            "element represents the primal output (equal to those of the "
                            f"custom_vjp-decorated function {fun_name}) and the second element "
                            "represents residuals (i.e. values stored from the forward pass for "
                            "use on the backward pass), but instead of a pair the fwd rule "
                            f"{fwd_name} produced {pair}.")
        primals_out, tree = tree_flatten(pair[0])
        res, rtree = tree_flatten(pair[1])
        p_avals = [core.get_aval(p) for p in primals_out]
        _check_rule_out(out, tree, p_avals, lambda got, want: TypeError(
            f"Custom VJP fwd rule {fwd_name} for function {fun_name} must produce a pair "
            "(list or tuple of length two) where the first element represents the primal "
            f"output (equal to the output of the custom_vjp-decorated function {fun_name}),"
            f" but instead the fwd rule output's first element was:\n    {got}\nwhile the "
            f"custom_vjp-decorated function {fun_name} had output:\n    {want}"))
        res_tree[:] = [rtree]
        return [*res, *primals_out]

    flat_fwd.__name__, flat_fwd.out_type = fwd_name, out
    return flat_fwd


def _ct_leaves(ct, treedef: PyTreeDef, what: str) -> list:
    """The leaves of `ct` for an argument of structure `treedef`; a None (sub)tree stands for
    zeros and gives None leaves."""
    if ct is None:
        return [None] * treedef.num_leaves
    if treedef.node_type is None:
        return [ct]
    children, node = tree_flatten(ct, is_leaf=lambda x: x is not ct)
    if node.node_data() != treedef.node_data() or len(children) != len(treedef.children()):
        raise ValueError(what)
    return [leaf for c, t in zip(children, treedef.children())
            for leaf in _ct_leaves(c, t, what)]


# JAX: jax/_src/custom_derivatives.py _flatten_bwd
def _flatten_bwd(bwd: Callable, bwd_name: str, in_tree: PyTreeDef,
                 in_avals: Sequence[ShapedArray], out: dict, res_tree: list) -> Callable:
    """`bwd` as a flat function `(*residuals, *cts_out) -> [ct per input leaf]` (Zero where the
    rule gave None, and for integer inputs)."""
    def flat_bwd(*res_and_cts):
        res, cts = split_list(res_and_cts, [res_tree[0].num_leaves])
        cts_in = bwd(tree_unflatten(res_tree[0], res), tree_unflatten(out["tree"], cts))
        if isinstance(cts_in, list) and len(cts_in) == len(in_tree.children()):
            cts_in = tuple(cts_in)
        msg = ("Custom VJP bwd rule must produce an output with the same container (pytree) "
               "structure as the args tuple of the primal function, and in particular must "
               "produce a tuple of length equal to the number of arguments to the primal "
               f"function, but got bwd output structure {tree_flatten(cts_in)[1]} for primal "
               f"input structure {in_tree}.")
        if not isinstance(cts_in, tuple):
            raise TypeError(msg)
        try:
            leaves = _ct_leaves(cts_in, in_tree, msg)
        except ValueError:
            raise TypeError(msg) from None
        cts_out = []
        for i, (ct, aval) in enumerate(safe_zip(leaves, in_avals)):
            t_aval = aval.to_tangent_aval()
            if ct is None or t_aval.dtype == dtypes.float0:
                cts_out.append(Zero(t_aval))
                continue
            ct_aval = core.get_aval(ct)
            if ct_aval.shape != aval.shape:
                raise ValueError(
                    "Custom VJP bwd rule must produce an output with the same type as the args "
                    f"tuple of the primal function, but at output leaf {i} the bwd rule "
                    f"{bwd_name} produced an output of type {ct_aval.str_short()} "
                    f"corresponding to an input of type {aval.str_short()}")
            cts_out.append(ct)
        return cts_out

    flat_bwd.__name__ = bwd_name
    return flat_bwd


def _custom_vjp_call_impl(*args, call_jaxpr, fwd, bwd, name, num_consts, symbolic_zeros):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


# (also called with no call_jaxpr: JVPTrace.process_custom_derivative_call, fun not traced)
def _custom_vjp_call_jvp(primals, tangents, *, fwd, bwd, name, num_consts, symbolic_zeros,
                         call_jaxpr=None):
    const_tangents, arg_tangents = split_list(tangents, [num_consts])
    if any(type(t) is not Zero for t in const_tangents):
        raise _closure_error("custom_vjp", name)
    _, args = split_list(primals, [num_consts])
    outs = fwd(*args)
    n_out = len(fwd.out_type["avals"] if call_jaxpr is None else call_jaxpr.out_avals)
    res, primals_out = split_list(outs, [len(outs) - n_out])
    in_zeros = tuple(type(t) is Zero for t in arg_tangents)
    out_avals = tuple(core.get_aval(p).to_tangent_aval() for p in primals_out)
    tangents_out = custom_lin_p.bind(*res, *[t for t in arg_tangents if type(t) is not Zero],
                                     num_res=len(res), bwd=bwd, out_avals=out_avals,
                                     symbolic_zeros=symbolic_zeros, in_zeros=in_zeros)
    return primals_out, tangents_out


def _custom_vjp_call_batch_rule(vals, dims, *, axis_size, call_jaxpr, fwd, bwd, name,
                                num_consts, symbolic_zeros):
    b_closed, out_dims = batching.batch_jaxpr(call_jaxpr, dims, axis_size)
    b_call, b_consts = _hoisted(b_closed)
    arg_dims = list(dims[num_consts:])
    arg_avals = call_jaxpr.in_avals[num_consts:]
    keep = [a.to_tangent_aval().dtype != dtypes.float0 for a in arg_avals]
    res_dims: list = []  # where the residuals' batch axes are, set by batched_fwd for bwd

    def batched_fwd(*args):
        outs, dims_out = batching.batch_flat(fwd, args, arg_dims, axis_size, fwd.__name__)
        n_res = len(outs) - len(out_dims)
        res_dims[:] = dims_out[:n_res]
        # primal outputs batched exactly like call_jaxpr's
        return outs[:n_res] + [o if want is None else batching.matchaxis(axis_size, d, 0, o)
                               for o, d, want in zip(outs[n_res:], dims_out[n_res:], out_dims)]

    def batched_bwd(*res_and_cts):
        def bwd_kept(*xs):
            return [ad.instantiate_zeros(c) for c, k in zip(bwd(*xs), keep) if k]
        cts, ct_dims = batching.batch_flat(bwd_kept, res_and_cts, res_dims + out_dims,
                                           axis_size, bwd.__name__)
        cts, ct_dims = iter(cts), iter(ct_dims)
        out = []
        for k, d, aval in zip(keep, arg_dims, arg_avals):
            if not k:
                out.append(Zero(aval.to_tangent_aval()))
                continue
            ct, ct_dim = next(cts), next(ct_dims)
            if d is not batching.not_mapped:
                out.append(batching.matchaxis(axis_size, ct_dim, d, ct))
            elif ct_dim is batching.not_mapped:
                out.append(ct)
            else:  # an input shared by all examples gets the sum of their cotangents
                out.append(lax.reduce_sum(ct, (ct_dim,)))
        return out

    batched_fwd.__name__, batched_bwd.__name__ = fwd.__name__, bwd.__name__
    outs = custom_vjp_call_p.bind(*b_consts, *vals, call_jaxpr=b_call, fwd=batched_fwd,
                                  bwd=batched_bwd, name=name,
                                  num_consts=len(b_consts) + num_consts,
                                  symbolic_zeros=symbolic_zeros)
    return outs, out_dims


def _custom_vjp_call_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    call_jaxpr, fwd, bwd = eqn.params["call_jaxpr"], eqn.params["fwd"], eqn.params["bwd"]
    n_out, n_used = len(used_outputs), sum(used_outputs)

    def dce_fwd(*args):
        outs = fwd(*args)
        res, primals_out = split_list(outs, [len(outs) - n_out])
        return [*res, *(p for p, u in zip(primals_out, used_outputs) if u)]

    def dce_bwd(*res_and_cts):
        res, cts = split_list(res_and_cts, [len(res_and_cts) - n_used])
        it = iter(cts)
        all_cts = [next(it) if u else ad.zeros_like_aval(a.to_tangent_aval())
                   for u, a in zip(used_outputs, call_jaxpr.out_avals)]
        return bwd(*res, *all_cts)

    dce_fwd.__name__, dce_bwd.__name__ = fwd.__name__, bwd.__name__
    return eqn.replace(
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, call_jaxpr=_dce_call_jaxpr(call_jaxpr, used_outputs),
                    fwd=dce_fwd, bwd=dce_bwd))


custom_vjp_call_p = CustomDerivativeCallPrimitive("custom_vjp_call", "custom_vjp")
custom_vjp_call_p.pp_first_params = ("name",)
custom_vjp_call_p.pp_name_is_debug_info = True
custom_vjp_call_p.pp_hide_if_empty = ("num_consts",)
custom_vjp_call_p.def_impl(_custom_vjp_call_impl)
custom_vjp_call_p.def_abstract_eval(_call_abstract_eval("custom_vjp_call"))
ad.primitive_jvps[custom_vjp_call_p] = _custom_vjp_call_jvp
# no transpose rule: reverse mode transposes the custom_lin equation that the jvp rule emits
batching.primitive_batchers[custom_vjp_call_p] = _custom_vjp_call_batch_rule
mlir.register_lowering(custom_vjp_call_p, _call_lowering)
pe.dce_rules[custom_vjp_call_p] = _custom_vjp_call_dce_rule


# ---------------------------------------------------------------------------------------------
# custom_lin: the linear stand-in whose transpose is the user's bwd
# ---------------------------------------------------------------------------------------------

def _custom_vjp_forward_error(*args, **params):
    # JAX: jax/_src/interpreters/ad.py raise_custom_vjp_error_on_jvp
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def _custom_lin_abstract_eval(*avals, num_res, bwd, out_avals, symbolic_zeros, in_zeros):
    return list(out_avals)


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, symbolic_zeros, in_zeros):
    res, _ = split_list(args, [num_res])
    cts_in = bwd(*res, *map(ad.instantiate_zeros, cts))
    return [None] * num_res + [ct for ct, z in safe_zip(cts_in, in_zeros) if not z]


# JAX: jax/_src/interpreters/ad.py custom_lin_p
custom_lin_p = core.Primitive("custom_lin")
custom_lin_p.multiple_results = True
custom_lin_p.pp_hidden_params = ("out_avals",)
custom_lin_p.pp_param_formatters = {"in_zeros": lambda z: str(list(z))}  # JAX's is a list
custom_lin_p.def_impl(_custom_vjp_forward_error)
custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
# no jvp rule: custom_lin only exists inside linear (tangent) programs
ad.primitive_transposes[custom_lin_p] = _custom_lin_transpose
batching.primitive_batchers[custom_lin_p] = _custom_vjp_forward_error
mlir.register_lowering(custom_lin_p, _custom_vjp_forward_error)



# ---------------------------------------------------------------------------------------------
# custom_gradient and closure_convert, built on custom_vjp and tracing to a jaxpr
# ---------------------------------------------------------------------------------------------

class _Residuals:  # JAX: jax/_src/custom_derivatives.py Residuals
    """The vjp rule of `custom_gradient`, staged to a jaxpr: its consts (the values the rule
    closed over) are the residuals; the jaxpr and trees ride along as static data."""

    def __init__(self, jaxpr, in_tree, consts) -> None:
        self.jaxpr, self.in_tree, self.consts = jaxpr, in_tree, list(consts)


register_pytree_node(_Residuals, lambda r: ((r.consts,), (r.jaxpr, r.in_tree)),
                     lambda meta, children: _Residuals(*meta, children[0]))


# JAX: jax/_src/custom_derivatives.py custom_gradient
def custom_gradient(fun: Callable) -> custom_vjp:
    """`fun(*args)` returns `(out, vjp)` where `vjp(ct)` gives the cotangents of `args` (a
    tuple, or one value for one argument); the result computes `out` and differentiates
    through `vjp`. Built as a `custom_vjp` whose residuals are the values `vjp` closes over
    (it is traced to a jaxpr on the output's avals)."""
    @custom_vjp
    def wrapped(*args, **kwargs):
        return fun(*args, **kwargs)[0]

    def fwd(*args, **kwargs):
        ans, rule = fun(*args, **kwargs)
        ans_flat, out_tree = tree_flatten((ans,))
        avals = [core.get_aval(x).to_tangent_aval() for x in ans_flat]
        store: list = []

        def flat_rule(*cts):
            outs = rule(*tree_unflatten(out_tree, cts))
            leaves, tree = tree_flatten(outs)
            store.append(tree)
            return leaves
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_rule, avals,
                                                     fun_name=_fun_name(fun))
        return ans, _Residuals(jaxpr, store[0], consts)

    def bwd(res, ct):
        cts_flat, _ = tree_flatten((ct,))
        cts_in = tree_unflatten(res.in_tree, core.eval_jaxpr(res.jaxpr, res.consts, *cts_flat))
        return cts_in if isinstance(cts_in, tuple) else (cts_in,)

    wrapped.defvjp(fwd, bwd)
    return wrapped


# JAX: jax/_src/custom_derivatives.py closure_convert — differs: every tracer among the
# closed-over values is hoisted (JAX keeps those it can prove unperturbed)
def closure_convert(fun: Callable, *example_args) -> tuple[Callable, list]:
    """`(converted, hoisted)`: `converted(*args, *hoisted)` computes `fun(*args)`, with the
    traced values `fun` closes over (tracers of enclosing transformations) passed as the
    trailing arguments `hoisted`, so a `custom_vjp` can differentiate with respect to them.
    `fun` is traced once, at the avals of `example_args`. Raises TypeError when `args`
    differ in structure from `example_args`."""
    flat, in_tree = tree_flatten(example_args)
    store: list = []

    def flat_fun(*leaves):
        leaves, tree = tree_flatten(fun(*tree_unflatten(in_tree, leaves)))
        store.append(tree)
        return leaves
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
        flat_fun, [core.get_aval(x) for x in flat], fun_name=_fun_name(fun),
        purpose="closure_convert")
    hoist = [isinstance(c, Tracer) for c in consts]
    hoisted = [c for c, h in zip(consts, hoist) if h]

    def converted(*args_and_hoisted):
        args, given = split_list(list(args_and_hoisted), [len(args_and_hoisted) - len(hoisted)])
        leaves, tree = tree_flatten(tuple(args))
        if tree != in_tree:  # JAX's message
            raise TypeError("The inputs to the closure produced by closure_convert must have "
                            "the same Pytree structure as the example arguments passed when "
                            f"closure_convert was called. Expected {in_tree}, but got {tree}")
        it = iter(given)
        all_consts = [next(it) if h else c for c, h in zip(consts, hoist)]
        return tree_unflatten(store[0], core.eval_jaxpr(jaxpr, all_consts, *leaves))

    return converted, hoisted
