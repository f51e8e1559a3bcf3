"""Loops: `lax.while_loop`, `lax.scan`, and `fori_loop` / `map` built on them.

A Python loop inside `jit` is unrolled while tracing; a loop *primitive* holds its body as a
jaxpr and runs it many times, so a long loop traces once and compiles to one
`stablehlo.while`. `while_p` runs until a predicate jaxpr says stop (so its trip count is
unknown: forward-mode differentiable, not reverse-mode); `scan_p` runs a fixed number of
times, slicing inputs `xs` and stacking outputs `ys` along a leading axis, and so has a
reverse-mode rule: its transpose is a scan running backwards over the transposed body.
Mirrors jax/_src/lax/control_flow/loops.py. Taught in chapters/08-control-flow.md.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, sharding_impls, traceback_util
from minijax.ad_util import Zero
from minijax.array import Array
from minijax.core import ClosedJaxpr, Jaxpr, ShapedArray
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.interpreters.batching import not_mapped
from minijax.lax import lax
from minijax.lax.control_flow.common import (
    as_array,
    avals_short,
    batch_jaxpr_flags,
    check_carry_type,
    eval_closed,
    hoist_consts,
    initial_style_jaxpr,
    is_zero,
    jaxpr_forwarding,
    promote_weak_typed_input,
    prune_outputs,
    python_control_flow,
    rearrange_binders,
    trace_closed,
    typematch_all,
    with_invars,
)
from minijax.pjit import jit
from minijax.tree_util import tree_flatten, tree_map, tree_unflatten
from minijax.util import canonicalize_axis, merge_lists, partition_list, safe_zip, split_list


def _carry_fixpoint(step: Callable[[list[bool]], tuple[Any, list[bool]]],
                    init_flags: Sequence[bool]) -> tuple[list[bool], Any]:
    """The loop rules' fixpoint over per-carry flags (nonzero tangent, unknown, batched, used):
    a carry has the property if it starts with it or the body gives it to the carry output.
    `step(flags)` transforms the body assuming `flags` and returns (result, out_flags), with
    out_flags >= flags; repeats until out_flags == flags. Returns (flags, result)."""
    flags = list(init_flags)
    for _ in range(1 + len(flags)):  # each repeat turns at least one flag on
        result, out = step(flags)
        if out == flags:
            return flags, result
        flags = [x or y for x, y in safe_zip(flags, out)]
    raise AssertionError("loop rule: the carry fixpoint was not reached")


# =============================================================================================
# scan
# =============================================================================================

# JAX: jax/_src/lax/control_flow/loops.py _infer_scan_length
def _infer_scan_length(xs_avals: Sequence[ShapedArray], length) -> int:
    if any(a.ndim == 0 for a in xs_avals):
        raise ValueError("scan got value with no leading axis to scan over: "
                         f"{avals_short([a for a in xs_avals if a.ndim == 0])}.")
    lengths = [a.shape[0] for a in xs_avals]
    if length is not None:
        try:
            length = int(length)
        except core.ConcretizationTypeError:
            raise core.ConcretizationTypeError(
                "The `length` argument to `scan` expects a concrete `int` value. For "
                "scan-like iteration with a dynamic length, use `while_loop` or "
                "`fori_loop`.") from None
        if not all(length == n for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return length
    if len(set(lengths)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(map(str, lengths))}.")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return lengths[0]


# JAX: jax/_src/lax/control_flow/loops.py scan — differs: a carry the body passes through is
# not moved to the consts, nor an xs passed through to ys copied around the loop (only the
# partial-eval rule forwards, residuals that are slices of xs)
@traceback_util.api_boundary
def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`, stacking the `y`s.

    Semantics (for arrays; `init`, `xs` and the outputs may be pytrees):

        carry, ys = init, []
        for x in (reversed(xs) if reverse else xs):   # or `length` times with x = None
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)                       # ys reversed back when `reverse`

    Args:
      f: `(carry, x) -> (carry, y)`; the carry keeps its pytree structure and types
        (f32[3] stays f32[3]); `x` has `xs`'s leading axis removed (f32[n,3] -> f32[3]).
      init: the initial carry (pytree of arrays).
      xs: a pytree of arrays with a common leading size n, or None (then give `length`).
      length: the trip count n; must agree with `xs` if both are given.
      reverse: scan from the end (ys still line up with xs).
      unroll: accepted for JAX compatibility (a bool or non-negative int); minijax always
        lowers to a rolled `stablehlo.while`.
    Returns: `(carry, ys)` with ys' leaves of shape `(n, *y.shape)`.
    Raises: TypeError if `f` is not callable, does not return a pair, or changes the carry's
      structure or types; ValueError for inconsistent or missing lengths, a bad `unroll`, or
      xs split along their leading axis in their type (an Explicit mesh axis).
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    init_flat, init_tree = tree_flatten(init)
    xs_flat, xs_tree = tree_flatten(xs)
    xs_avals = [core.get_aval(x) for x in xs_flat]
    if any(a.sharding is not None and a.ndim and a.sharding.spec[0] is not None
           for a in xs_avals):  # sharding in types: each step reads one whole slice
        raise ValueError("0th dimension of all xs should be replicated. Got " + ", ".join(
            str(a.sharding.spec if a.sharding is not None else None) for a in xs_avals))
    length = _infer_scan_length(xs_avals, length)
    if isinstance(unroll, bool):
        unroll = max(length, 1) if unroll else 1
    if int(unroll) < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    if python_control_flow():
        return _scan_in_python(f, init, xs_flat, xs_tree, length, reverse)
    x_avals = [sharding_impls.unstacked(a) for a in xs_avals]
    num_carry = len(init_flat)
    trees: dict[str, Any] = {}

    def flat_fun(*leaves):
        carry = tree_unflatten(init_tree, leaves[:num_carry])
        out = f(carry, tree_unflatten(xs_tree, leaves[num_carry:]))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan body output must be a pair, got {out}.")
        carry_flat, trees["carry"] = tree_flatten(out[0])
        ys_flat, trees["ys"] = tree_flatten(out[1])
        return carry_flat + ys_flat

    def trace(init_avals):
        jaxpr, consts = initial_style_jaxpr(flat_fun, init_avals + x_avals,
                                             getattr(f, "__name__", "scan_body"))
        return jaxpr, consts, jaxpr.out_avals[:trees["carry"].num_leaves]

    init_avals = [core.get_aval(x) for x in init_flat]
    jaxpr, consts, carry_out_avals = trace(init_avals)
    if trees["carry"] == init_tree:
        promoted = [promote_weak_typed_input(x, a, b)
                    for x, a, b in safe_zip(init_flat, init_avals, carry_out_avals)]
        if any(changed for _, changed in promoted):
            init_flat = [x for x, _ in promoted]
            init_avals = [core.get_aval(x) for x in init_flat]
            jaxpr, consts, carry_out_avals = trace(init_avals)
    check_carry_type("scan body", init_tree, init_avals, trees["carry"], carry_out_avals)
    carry, ys = _scan_forwarding_bind(hoist_consts(jaxpr).jaxpr, list(consts), list(init_flat),
                                      list(xs_flat), reverse=bool(reverse), length=length,
                                      unroll=int(unroll))
    return tree_unflatten(init_tree, carry), tree_unflatten(trees["ys"], ys)


# JAX: jax/_src/lax/control_flow/loops.py scan (its forwarding of carries and extensive outputs)
def _scan_forwarding_bind(jaxpr, consts, init, xs, **params):
    """Bind scan_p as JAX's `scan` does: a carry the body returns unchanged is read-only, so
    it becomes a const (and its output is the initial value); a stacked output that is a
    stacked input is not copied by the loop but read from the input."""
    n_c, n_carry = len(consts), len(init)
    index = {v: i for i, v in enumerate(jaxpr.invars)}
    fwd = [index.get(v) if isinstance(v, core.Var) else None for v in jaxpr.outvars]
    move = [fwd[i] == n_c + i for i in range(n_carry)]
    keep_carry = [v for v, m in zip(jaxpr.outvars[:n_carry], move) if not m]
    moved = [v for v, m in zip(jaxpr.invars[n_c:n_c + n_carry], move) if m]
    invars = moved + jaxpr.invars[:n_c] + [
        v for v, m in zip(jaxpr.invars[n_c:n_c + n_carry], move) if not m] + \
        jaxpr.invars[n_c + n_carry:]
    consts = [x for x, m in zip(init, move) if m] + consts
    args = [x for x, m in zip(init, move) if not m] + xs
    n_carry -= sum(move)
    ext = [f - n_c - sum(move) if f is not None and f >= n_c + len(init) else None
           for f in fwd[len(init):]]  # an extensive output that is an extensive input
    ys_out = [v for v, f in zip(jaxpr.outvars[len(init):], ext) if f is None]
    new = core.Jaxpr([], invars, keep_carry + ys_out, jaxpr.eqns, jaxpr.effects)
    outs = scan_p.bind(*consts, *args, jaxpr=ClosedJaxpr(new, []), num_consts=len(consts),
                       num_carry=n_carry, **params)
    carry_out, ys_it = iter(outs[:n_carry]), iter(outs[n_carry:])
    init_it = iter(init)
    carry = [lax.asarray(next(init_it)) if m else (next(init_it), next(carry_out))[1]
             for m in move]
    return carry, [next(ys_it) if f is None else lax.asarray(args[f]) for f in ext]


# JAX: jax/_src/lax/control_flow/loops.py scan (its disable_jit branch)
def _scan_in_python(f: Callable, init, xs_flat: list, xs_tree, length: int, reverse: bool):
    """`scan` under `disable_jit()`: the semantics above, literally: `f` runs once per step,
    on slices of `xs` (tracers of outer transformations too)."""
    if length == 0:
        raise ValueError("zero-length scan is not supported in disable_jit() mode because "
                         "the output type is unknown.")
    carry, ys = init, []
    steps = reversed(range(length)) if reverse else range(length)
    for i in steps:
        x = tree_unflatten(xs_tree, [lax.squeeze(lax.slice(
            v, (i, *[0] * (v.ndim - 1)), (i + 1, *v.shape[1:])), (0,)) for v in xs_flat])
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    stacked = tree_map(lambda *y: lax.concatenate([lax.expand_dims(v, (0,)) for v in y], 0),
                       *ys)
    return carry, stacked


# JAX: jax/_src/lax/control_flow/loops.py _scan_impl — differs: a Python loop
def _scan_impl(*args, reverse, length, jaxpr, num_consts, num_carry, unroll):
    if any(type(x) is Array and x._sharding is not None and x._sharding.num_devices > 1
           for x in args):
        # operands on a mesh: compiled for it, as JAX runs every eager primitive, so that the
        # results stay laid out there (the NumPy loop below would gather them on one device)
        params = dict(reverse=reverse, length=length, jaxpr=jaxpr, num_consts=num_consts,
                      num_carry=num_carry, unroll=unroll)
        return jit(lambda *a: scan_p.bind(*a, **params))(*args)
    consts, carry, xs = split_list(args, [num_consts, num_carry])
    xs = [core.to_numpy(x) for x in xs]
    carry_avals, y_avals = split_list(jaxpr.out_avals, [num_carry])
    ys = []
    with core.set_current_trace(core.eval_trace):
        for i in (reversed(range(length)) if reverse else range(length)):
            carry, y = split_list(eval_closed(jaxpr, *consts, *carry, *[x[i] for x in xs]),
                                  [num_carry])
            ys.append([core.to_numpy(v, a) for v, a in safe_zip(y, y_avals)])
    if reverse:
        ys.reverse()
    stacked = [np.stack([y[j] for y in ys]) if ys else np.zeros((0, *a.shape), a.dtype)
               for j, a in enumerate(y_avals)]
    return ([as_array(c, a) for c, a in safe_zip(carry, carry_avals)]
            + [as_array(s, a) for s, a in safe_zip(stacked, y_avals)])


# JAX: jax/_src/lax/control_flow/loops.py _scan_abstract_eval
def _scan_abstract_eval(*avals, reverse, length, jaxpr, num_consts, num_carry, unroll):
    if len(avals) != len(jaxpr.in_avals):
        raise TypeError(f"scan: {len(avals)} operands, but the body takes "
                        f"{len(jaxpr.in_avals)}")
    consts, init, xs = split_list(avals, [num_consts, num_carry])
    for x in xs:
        if x.ndim == 0 or x.shape[0] != length:
            raise TypeError(f"scan: xs operand {x.str_short()} has no leading axis of the scan "
                            f"length {length}")
    given = [*consts, *init, *[sharding_impls.unstacked(x) for x in xs]]
    if not typematch_all(given, jaxpr.in_avals):
        raise TypeError(f"scan: the body takes ({avals_short(jaxpr.in_avals)}) but is given "
                        f"({avals_short(given)})")
    carry_avals, y_avals = split_list(jaxpr.out_avals, [num_carry])
    if not typematch_all(init, carry_avals):
        raise TypeError(f"scan: the body maps the carry ({avals_short(init)}) to "
                        f"({avals_short(carry_avals)}), of another type")
    return carry_avals + [sharding_impls.stacked(a, length) for a in y_avals]


# JAX: jax/_src/lax/control_flow/loops.py _scan_jvp
def _scan_jvp(primals, tangents, *, reverse, length, jaxpr, num_consts, num_carry, unroll):
    num_xs = len(jaxpr.in_avals) - num_consts - num_carry
    num_ys = len(jaxpr.out_avals) - num_carry
    nonzeros = [not is_zero(t) for t in tangents]
    const_nz, init_nz, xs_nz = split_list(nonzeros, [num_consts, num_carry])
    # Fixpoint: a carry tangent is nonzero if it starts nonzero or the body makes it so.
    def step(carry_nz):
        jaxpr_jvp, nz_out = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                         instantiate=carry_nz + [False] * num_ys)
        return (jaxpr_jvp, nz_out), nz_out[:num_carry]
    carry_nz, (jaxpr_jvp, nz_out) = _carry_fixpoint(step, init_nz)
    nonzeros = const_nz + carry_nz + xs_nz
    consts, init, xs = split_list(primals, [num_consts, num_carry])
    tangents = [ad.instantiate_zeros(t) if nz else None for t, nz in safe_zip(tangents, nonzeros)]
    consts_dot, init_dot, xs_dot = [[t for t in ts if t is not None]
                                    for ts in split_list(tangents, [num_consts, num_carry])]
    jaxpr_jvp = rearrange_binders(
        jaxpr_jvp, [num_consts, num_carry, num_xs], [len(consts_dot), len(init_dot), len(xs_dot)],
        [num_carry, num_ys], [len(init_dot), sum(nz_out) - len(init_dot)])
    out = scan_p.bind(*consts, *consts_dot, *init, *init_dot, *xs, *xs_dot, reverse=reverse,
                      length=length, jaxpr=jaxpr_jvp, num_consts=num_consts + len(consts_dot),
                      num_carry=num_carry + len(init_dot), unroll=unroll)
    carry, carry_dot, ys, ys_dot = split_list(out, [num_carry, len(init_dot), num_ys])
    primals_out = carry + ys
    it = iter(carry_dot + ys_dot)
    return primals_out, [next(it) if nz else Zero.from_primal_value(p)
                         for p, nz in safe_zip(primals_out, nz_out)]


# JAX: jax/_src/lax/control_flow/loops.py _scan_linearize
def _scan_linearize(is_vjp, nonzeros, *primals_in, reverse, length, jaxpr, num_consts,
                    num_carry, unroll):
    const_nz, init_nz, xs_nz = split_list(list(nonzeros), [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry
    # residuals that are consts or xs are read from the scan's operands, not stacked again
    allow_fwds = [True] * len(jaxpr.consts) + [
        (i < num_consts or i >= num_consts + num_carry) and not isinstance(x, np.ndarray)
        for i, x in enumerate(primals_in)]

    def step(carry_nz):  # a carry tangent is nonzero if it starts so or the body makes it so
        lin = ad.linearize_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                 carry_nz + [False] * num_ys, allow_fwds, is_vjp=is_vjp)
        return lin, lin[2][:num_carry]
    carry_nz, (primal, num_res, nzs_out, in_fwd_res, tangent) = _carry_fixpoint(step, init_nz)
    nzs = const_nz + carry_nz + xs_nz
    num_primals_out = len(primal.out_avals) - num_res

    # hoisting (JAX's _scan_known_hoisting): residuals computed from the consts alone are
    # computed once, before the loop; the others are stacked outputs of the primal scan
    consts, carry_xs = split_list(primals_in, [num_consts])
    jaxpr_hoist, primal, out_uk, num_new_consts = pe.partial_eval_jaxpr_nounits(
        primal, [False] * num_consts + [True] * (len(primal.in_avals) - num_consts),
        instantiate=[True] * num_primals_out + [False] * num_res)
    hoisted, new_consts = split_list(eval_closed(jaxpr_hoist, *consts),
                                     [len(jaxpr_hoist.out_avals) - num_new_consts])
    which_hoisted = [not u for u in out_uk[num_primals_out:]]
    # the tangent scan's binders: [consts' residuals, tangents, stacked residuals]
    hoisted_it = iter(which_hoisted)
    res_to_move = [not next(hoisted_it) if f is None
                   else f >= len(jaxpr.consts) + num_consts + num_carry for f in in_fwd_res]
    res_vars, tangent_vars = split_list(tangent.jaxpr.invars, [len(in_fwd_res)])
    int_vars, ext_vars = partition_list(res_to_move, res_vars)
    tangent = with_invars(tangent, int_vars + tangent_vars + ext_vars)

    out = []
    if primal.out_avals:
        out = scan_p.bind(*new_consts, *carry_xs, reverse=reverse, length=length, jaxpr=primal,
                          num_consts=len(new_consts), num_carry=num_carry, unroll=unroll)
    primals_out, ext_res = split_list(out, [num_primals_out])
    computed = iter(merge_lists(which_hoisted, ext_res, hoisted))
    sources = [*jaxpr.consts, *primals_in]
    res = [next(computed) if f is None else sources[f] for f in in_fwd_res]
    tangent_avals = [core.get_aval(p).to_tangent_aval() for p in primals_out]

    def tangent_fun(residuals, *tangents):
        int_res, ext_res = partition_list(res_to_move, residuals)
        nz_tangents = [ad.instantiate_zeros(t) for t, nz in safe_zip(tangents, nzs) if nz]
        it = iter(scan_p.bind(
            *int_res, *nz_tangents, *ext_res, reverse=reverse, length=length, jaxpr=tangent,
            num_consts=len(int_res) + sum(const_nz), num_carry=sum(carry_nz), unroll=unroll))
        return [next(it) if nz else Zero(a) for a, nz in safe_zip(tangent_avals, nzs_out)]

    return primals_out, nzs_out, res, tangent_fun


# JAX: jax/_src/lax/control_flow/loops.py _scan_partial_eval
def _scan_partial_eval(trace: pe.JaxprTrace, *args, reverse, length, jaxpr, num_consts,
                       num_carry, unroll):
    num_ys = len(jaxpr.out_avals) - num_carry
    const_uk, init_uk, xs_uk = split_list([trace.is_own(x) for x in args],
                                          [num_consts, num_carry])
    # Fixpoint: a carry is unknown if it starts unknown or the body makes it so.
    def step(carry_uk):
        split = pe.partial_eval_jaxpr_nounits(jaxpr, const_uk + carry_uk + xs_uk,
                                              instantiate=carry_uk + [False] * num_ys)
        return split, split[2][:num_carry]
    carry_uk, (jaxpr_known, jaxpr_unknown, out_uk, num_res) = _carry_fixpoint(step, init_uk)
    unknowns = const_uk + carry_uk + xs_uk
    known_args, unknown_args = partition_list(unknowns, args)
    known_consts, known_init, known_xs = split_list(
        known_args, [num_consts - sum(const_uk), num_carry - sum(carry_uk)])
    num_known_outs = len(out_uk) - sum(out_uk)

    # jaxpr_known: [known consts, carry, xs] -> [known carry, known ys, residuals]. Residuals
    # that depend on the consts only are loop-invariant: compute them once, before the loop
    # ("hoisting"), rather than stacking `length` copies; the rest become extensive outputs.
    n_kc = len(known_consts)
    jaxpr_hoist, jaxpr_known, out_uk2, num_res2 = pe.partial_eval_jaxpr_nounits(
        jaxpr_known, [False] * n_kc + [True] * (len(jaxpr_known.in_avals) - n_kc),
        instantiate=[True] * num_known_outs + [False] * num_res)
    with core.set_current_trace(trace.parent_trace):
        hoisted_res2 = eval_closed(jaxpr_hoist, *known_consts)
    hoisted, res2 = split_list(hoisted_res2, [len(hoisted_res2) - num_res2])
    which_hoisted = [not u for u in out_uk2[num_known_outs:]]
    # Residuals that are just slices of a known xs are read from that xs, not copied.
    xs_start = len(res2) + len(known_init)
    res_fwd = [f if f is not None and f >= xs_start else None
               for f in jaxpr_forwarding(jaxpr_known.jaxpr)[num_known_outs:]]
    jaxpr_known = prune_outputs(jaxpr_known,
                                 [True] * num_known_outs + [f is None for f in res_fwd])
    if jaxpr_known.out_avals:
        outs = scan_p.bind_with_trace(
            trace.parent_trace, [*res2, *known_init, *known_xs],
            dict(reverse=reverse, length=length, jaxpr=jaxpr_known, num_consts=len(res2),
                 num_carry=len(known_init), unroll=unroll))
    else:
        outs = []
    known_outs, stacked = split_list(outs, [num_known_outs])
    it = iter(stacked)
    ext_res = [next(it) if f is None else known_xs[f - xs_start] for f in res_fwd]

    # jaxpr_unknown: [residuals, unknown consts, carry, xs] -> [unknown carry, unknown ys];
    # hoisted residuals join its consts, the others its xs.
    res_vars, uk_vars = split_list(jaxpr_unknown.jaxpr.invars, [num_res])
    ext_vars, int_vars = partition_list(which_hoisted, res_vars)
    jaxpr_unknown = with_invars(jaxpr_unknown, int_vars + uk_vars + ext_vars)
    if any(out_uk):
        unknown_outs = trace.default_process_primitive(
            scan_p, [*hoisted, *unknown_args, *ext_res],
            dict(reverse=reverse, length=length, jaxpr=jaxpr_unknown,
                 num_consts=len(hoisted) + sum(const_uk), num_carry=sum(carry_uk),
                 unroll=unroll))
    else:
        unknown_outs = []
    return merge_lists(out_uk, known_outs, unknown_outs)


# JAX: jax/_src/lax/control_flow/loops.py _transpose_scan_jaxpr_fancy
def _transpose_scan_jaxpr(jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
                          const_lin: Sequence[bool], xs_lin: Sequence[bool]) -> ClosedJaxpr:
    # The transposed body, scanned in the other direction:
    #   [ires | ct_consts_acc, ct_carry | ct_y, eres] -> [ct_consts_acc', ct_carry' | ct_x]
    # where ires / eres are the known (residual) consts / xs, and ct_consts_acc accumulates the
    # cotangents of the linear consts over the iterations.
    const_avals, carry_avals, x_avals = split_list(jaxpr.in_avals, [num_consts, num_carry])
    ires_avals = [a for a, lin in safe_zip(const_avals, const_lin) if not lin]
    eres_avals = [a for a, lin in safe_zip(x_avals, xs_lin) if not lin]
    ct_const_avals = [a.to_tangent_aval() for a, lin in safe_zip(const_avals, const_lin) if lin]
    ct_carry_avals = [a.to_tangent_aval() for a in carry_avals]
    ct_y_avals = [a.to_tangent_aval() for a in jaxpr.out_avals[num_carry:]]

    def transposed(*args):
        ires, ct_consts, ct_carry, ct_y, eres = split_list(
            args, [len(ires_avals), len(ct_const_avals), num_carry, len(ct_y_avals)])
        ires_it, eres_it = iter(ires), iter(eres)
        primals = ([ad.UndefinedPrimal(a) if lin else next(ires_it)
                    for a, lin in safe_zip(const_avals, const_lin)]
                   + [ad.UndefinedPrimal(a) for a in carry_avals]
                   + [ad.UndefinedPrimal(a) if lin else next(eres_it)
                      for a, lin in safe_zip(x_avals, xs_lin)])
        # a linear const's cotangent starts from the accumulator, and each contribution is
        # added where the body's transpose makes it (JAX's ValAccum)
        acc_it = iter(ct_consts)
        init = ([next(acc_it) if lin else None for lin in const_lin]
                + [None] * (len(primals) - num_consts))
        cts = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, primals, [*ct_carry, *ct_y], init)
        ct_c, ct_init, ct_x = split_list(cts, [num_consts, num_carry])
        ct_c = [c for c, lin in safe_zip(ct_c, const_lin) if lin]
        ct_x = [c for c, lin in safe_zip(ct_x, xs_lin) if lin]
        return [ad.instantiate_zeros(c) for c in ct_c + ct_init + ct_x]

    return trace_closed(transposed, ires_avals + ct_const_avals + ct_carry_avals + ct_y_avals
                         + eres_avals, "transpose")


# JAX: jax/_src/lax/control_flow/loops.py _scan_transpose_fancy — differs: UndefinedPrimal
def _scan_transpose(cts, *args, reverse, length, jaxpr, num_consts, num_carry, unroll):
    # Every carry is treated as linear (a carry whose initial value is a known zero tangent
    # still carries tangents); known consts and xs are residuals.
    consts, init, xs = split_list(args, [num_consts, num_carry])
    const_lin = [ad.is_undefined_primal(x) for x in consts]
    xs_lin = [ad.is_undefined_primal(x) for x in xs]
    ires = [x for x, lin in safe_zip(consts, const_lin) if not lin]
    eres = [x for x, lin in safe_zip(xs, xs_lin) if not lin]
    # as JAX's: the carry cotangents instantiated first, then the consts' zero accumulators
    ct_carry = [ad.instantiate_zeros(c) for c in cts[:num_carry]]
    ct_consts = [ad.zeros_like_aval(x.aval.to_tangent_aval())
                 for x, lin in safe_zip(consts, const_lin) if lin]
    cts = ct_carry + [ad.instantiate_zeros(c) for c in cts[num_carry:]]
    jaxpr_trans = _transpose_scan_jaxpr(jaxpr, num_consts, num_carry, const_lin, xs_lin)
    outs = scan_p.bind(*ires, *ct_consts, *cts, *eres, reverse=not reverse, length=length,
                       jaxpr=jaxpr_trans, num_consts=len(ires),
                       num_carry=len(ct_consts) + num_carry, unroll=unroll)
    ct_consts, ct_init, ct_xs = split_list(outs, [len(ct_consts), num_carry])
    ct_consts_it, ct_xs_it = iter(ct_consts), iter(ct_xs)
    return ([next(ct_consts_it) if lin else None for lin in const_lin]
            + [c if ad.is_undefined_primal(x) else None for x, c in safe_zip(init, ct_init)]
            + [next(ct_xs_it) if lin else None for lin in xs_lin])


# JAX: jax/_src/lax/control_flow/loops.py _scan_batching_rule
def _scan_batch_rule(vals, dims, *, axis_size, reverse, length, jaxpr, num_consts, num_carry,
                     unroll):
    num_ys = len(jaxpr.out_avals) - num_carry
    const_b, init_b, xs_b = split_list([d is not not_mapped for d in dims],
                                       [num_consts, num_carry])
    # Fixpoint: a carry is batched if it starts batched or the body makes it so.
    def step(carry_b):
        jaxpr_b, out_b = batch_jaxpr_flags(jaxpr, axis_size, const_b + carry_b + xs_b,
                                      instantiate=carry_b + [False] * num_ys)
        return (jaxpr_b, out_b), out_b[:num_carry]
    carry_b, (jaxpr_b, out_b) = _carry_fixpoint(step, init_b)
    consts, init, xs = split_list(vals, [num_consts, num_carry])
    const_d, init_d, xs_d = split_list(dims, [num_consts, num_carry])
    consts = [x if d is not_mapped else batching.moveaxis(x, d, 0)
              for x, d in safe_zip(consts, const_d)]
    init = [batching.bdim_at_front(x, d, axis_size) if b else x
            for x, d, b in safe_zip(init, init_d, carry_b)]
    # xs keep the scanned axis in front: their batch axis goes to 1.
    xs = [x if d is not_mapped else batching.moveaxis(x, d, 1) for x, d in safe_zip(xs, xs_d)]
    outs = scan_p.bind(*consts, *init, *xs, reverse=reverse, length=length, jaxpr=jaxpr_b,
                       num_consts=num_consts, num_carry=num_carry, unroll=unroll)
    return outs, ([0 if b else not_mapped for b in carry_b]
                  + [1 if b else not_mapped for b in out_b[num_carry:]])


def _scalar_i32(v):
    """`v` as a `tensor<i32>`: an int, or a symbolic length (chapters/31-export.md)."""
    return mlir.eval_dynamic_shape((v,))[0] if type(v) is not int else \
        mlir.ir_constant(np.array(v, np.int32))


# JAX: jax/_src/lax/control_flow/loops.py _scan_impl — differs: emits the while directly
def _scan_lowering(ctx, *args, reverse, length, jaxpr, num_consts, num_carry, unroll):
    # A stablehlo.while over an index i: the loop state is (i, consts, carry, xs, ys buffers);
    # each trip slices x = xs[i], runs the body and writes ys[i] = y. (`unroll` is ignored.)
    hlo, ir = mlir.hlo, mlir.ir
    num_xs = len(args) - num_consts - num_carry
    xs_avals = ctx.avals_in[num_consts + num_carry:]
    ys_avals = ctx.avals_out[num_carry:]
    state_avals = [ShapedArray((), np.int32), *ctx.avals_in, *ys_avals]
    # the tokens of the body's ordered effects lead the loop state (one trip after another)
    effs = mlir.ordered_effects_of(jaxpr.jaxpr)
    ntok = len(effs)
    types = [mlir.token_type()] * ntok + [mlir.aval_to_ir_type(a) for a in state_avals]
    init = [*mlir.get_tokens(effs), _scalar_i32(0), *args,
            *[mlir.full_like_aval(0, a) for a in ys_avals]]
    while_op = hlo.WhileOp(types, init)

    cond_block = while_op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        pred = mlir.compare_hlo(cond_block.arguments[ntok], _scalar_i32(length), "LT")
        hlo.return_([pred])

    body_block = while_op.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        tokens, (i, *state) = split_list(list(body_block.arguments), [ntok])
        mlir.set_tokens(effs, tokens)
        consts, carry, xs, ys = split_list(state, [num_consts, num_carry, num_xs])
        idx = hlo.subtract(_scalar_i32(length - 1), i) if reverse else i
        zero = _scalar_i32(0)
        x_slices = []
        for x, a in safe_zip(xs, xs_avals):
            sliced = hlo.dynamic_slice(x, [idx] + [zero] * (a.ndim - 1), [1, *a.shape[1:]])
            x_slices.append(hlo.reshape(mlir.aval_to_ir_type(a.update(shape=a.shape[1:])),
                                        sliced))
        # JAX lowers scan to a while loop whose body calls the scan body: its op names
        with mlir.extend_name_stack("while/body/closed_call"):
            new_carry, y = split_list(mlir.lower_jaxpr(jaxpr.jaxpr, jaxpr.consts,
                                                       [*consts, *carry, *x_slices]),
                                      [num_carry])
        new_ys = []
        for buf, v, a in safe_zip(ys, y, ys_avals):
            update = hlo.reshape(mlir.aval_to_ir_type(a.update(shape=(1, *a.shape[1:]))), v)
            new_ys.append(hlo.dynamic_update_slice(buf, update, [idx] + [zero] * (a.ndim - 1)))
        hlo.return_([*mlir.get_tokens(effs), hlo.add(i, _scalar_i32(1)), *consts, *new_carry,
                     *xs, *new_ys])

    tokens, _, _, carry_out, _, ys_out = split_list(list(while_op.results),
                                                    [ntok, 1, num_consts, num_carry, num_xs])
    mlir.set_tokens(effs, tokens)
    return carry_out + ys_out


# JAX: jax/_src/lax/control_flow/loops.py _scan_dce_rule
def _scan_dce_rule(eqn: core.JaxprEqn, used_outputs: list[bool]) -> core.JaxprEqn:
    jaxpr = eqn.params["jaxpr"]
    num_consts, num_carry = eqn.params["num_consts"], eqn.params["num_carry"]
    num_xs = len(jaxpr.in_avals) - num_consts - num_carry
    used_carry, used_ys = split_list(used_outputs, [num_carry])
    # Fixpoint: a carry output is needed if it is used, or if the body reads that carry.
    def step(used_carry):
        new_jaxpr, used_inputs = pe.dce_closed_jaxpr(
            jaxpr, used_carry + used_ys,
            instantiate=[False] * num_consts + used_carry + [False] * num_xs)
        return (new_jaxpr, used_inputs), used_inputs[num_consts:num_consts + num_carry]
    used_carry, (new_jaxpr, used_inputs) = _carry_fixpoint(step, used_carry)
    used_consts = used_inputs[:num_consts]
    outvars = [v if u else core.DropVar(v.aval)
               for v, u, keep in safe_zip(eqn.outvars, used_outputs, used_carry + used_ys)
               if keep]
    return eqn.replace(
        invars=[v for v, u in safe_zip(eqn.invars, used_inputs) if u], outvars=outvars,
        params=dict(eqn.params, jaxpr=new_jaxpr, num_consts=sum(used_consts),
                    num_carry=sum(used_carry)))


scan_p = core.Primitive("scan")
scan_p.multiple_results = True
scan_p.def_impl(_scan_impl)
scan_p.def_abstract_eval(_scan_abstract_eval)
ad.primitive_jvps[scan_p] = _scan_jvp
ad.primitive_linearizations[scan_p] = _scan_linearize
pe.custom_partial_eval_rules[scan_p] = _scan_partial_eval
ad.primitive_transposes[scan_p] = _scan_transpose
batching.primitive_batchers[scan_p] = _scan_batch_rule
mlir.register_lowering(scan_p, _scan_lowering)
pe.dce_rules[scan_p] = _scan_dce_rule


# =============================================================================================
# while_loop
# =============================================================================================

# JAX: jax/_src/lax/control_flow/loops.py while_loop — differs: no forwarding optimizations
@traceback_util.api_boundary
def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Run `val = body_fun(val)` while `cond_fun(val)`, as one primitive.

    Semantics:

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    Args:
      cond_fun: `val -> bool[]` (a boolean scalar).
      body_fun: `val -> val`, keeping the pytree structure and types of `val`.
      init_val: the initial value (pytree of arrays).
    Returns: the final value. Forward-mode differentiable; reverse mode raises (the trip count
      is unknown, so the values of every iteration cannot be stored): use `scan` or a
      `fori_loop` with concrete bounds.
    Raises: TypeError if a function is not callable, `cond_fun` does not return a boolean
      scalar, or `body_fun` changes the structure or types of the carry.
    """
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    if python_control_flow():  # JAX: loops.py while_loop (its disable_jit branch)
        try:
            val = tree_map(lax.asarray, init_val)
            while cond_fun(val):
                val = tree_map(lax.asarray, body_fun(val))
            return val
        except core.ConcretizationTypeError:
            pass  # e.g. a batched predicate under vmap: the primitive, as without disable_jit
    init_flat, in_tree = tree_flatten(init_val)
    trees: dict[str, Any] = {}

    def cond_flat(*leaves):
        out_flat, trees["cond"] = tree_flatten(cond_fun(tree_unflatten(in_tree, leaves)))
        return out_flat

    def body_flat(*leaves):
        out_flat, trees["body"] = tree_flatten(body_fun(tree_unflatten(in_tree, leaves)))
        return out_flat

    def trace(avals):
        cond_jaxpr, cond_consts = initial_style_jaxpr(
            cond_flat, avals, getattr(cond_fun, "__name__", "cond_fun"))
        body_jaxpr, body_consts = initial_style_jaxpr(
            body_flat, avals, getattr(body_fun, "__name__", "body_fun"))
        if trees["cond"].num_leaves != 1 or trees["cond"].node_type is not None:
            raise TypeError(f"cond_fun must return a boolean scalar, but got pytree "
                            f"{trees['cond']}.")
        pred = cond_jaxpr.out_avals[0]
        if pred.shape != () or pred.dtype != np.bool_:
            raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                            f"[{pred.str_short()}].")
        return cond_jaxpr, cond_consts, body_jaxpr, body_consts

    init_avals = [core.get_aval(x) for x in init_flat]
    cond_jaxpr, cond_consts, body_jaxpr, body_consts = trace(init_avals)
    if trees["body"] == in_tree:
        promoted = [promote_weak_typed_input(x, a, b)
                    for x, a, b in safe_zip(init_flat, init_avals, body_jaxpr.out_avals)]
        if any(changed for _, changed in promoted):
            init_flat = [x for x, _ in promoted]
            init_avals = [core.get_aval(x) for x in init_flat]
            cond_jaxpr, cond_consts, body_jaxpr, body_consts = trace(init_avals)
    check_carry_type("while_loop body", in_tree, init_avals, trees["body"],
                      body_jaxpr.out_avals)
    cond_j, body_j = hoist_consts(cond_jaxpr).jaxpr, hoist_consts(body_jaxpr).jaxpr
    # JAX: jax/_src/lax/control_flow/loops.py while_loop
    # A carry the body returns unchanged and the cond does not read becomes a body const (so
    # e.g. vmap with a batched predicate does not batch it).
    nb, nc = len(body_consts), len(cond_consts)
    fwd = [v is body_j.invars[nb + i] for i, v in enumerate(body_j.outvars)]
    cond_dce, keep = pe.dce_jaxpr(cond_j, [True], [True] * nc + [not f for f in fwd])
    move = [not k for k in keep[nc:]]
    if any(move):
        cond_j = cond_dce
        body_invars = [v for v, m in safe_zip(body_j.invars[nb:], move) if m]
        body_invars += body_j.invars[:nb] + [v for v, m in safe_zip(body_j.invars[nb:], move)
                                              if not m]
        body_j = Jaxpr([], body_invars, [v for v, m in safe_zip(body_j.outvars, move) if not m],
                       body_j.eqns)
        moved = [x for x, m in safe_zip(init_flat, move) if m]
        body_consts = [*moved, *body_consts]
        init_flat = [x for x, m in safe_zip(init_flat, move) if not m]
    outs = while_p.bind(*cond_consts, *body_consts, *init_flat,
                        cond_jaxpr=ClosedJaxpr(cond_j, []), body_jaxpr=ClosedJaxpr(body_j, []),
                        cond_nconsts=nc, body_nconsts=len(body_consts))
    if any(move):
        outs_it, moved_it = iter(outs), iter(moved)
        outs = [next(moved_it) if m else next(outs_it) for m in move]
    return tree_unflatten(in_tree, outs)


# JAX: jax/_src/lax/control_flow/loops.py while_p — differs: impl is a Python loop
def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split_list(args, [cond_nconsts, body_nconsts])
    with core.set_current_trace(core.eval_trace):
        while bool(core.to_numpy(eval_closed(cond_jaxpr, *cond_consts, *carry)[0])):
            carry = eval_closed(body_jaxpr, *body_consts, *carry)
    return [as_array(c, a) for c, a in safe_zip(carry, body_jaxpr.out_avals)]


# JAX: jax/_src/lax/control_flow/loops.py _while_loop_abstract_eval
def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split_list(avals, [cond_nconsts, body_nconsts])
    if not typematch_all([*cond_consts, *carry], cond_jaxpr.in_avals):
        raise TypeError(f"while: cond_jaxpr takes ({avals_short(cond_jaxpr.in_avals)}) but is "
                        f"given ({avals_short([*cond_consts, *carry])})")
    if not typematch_all([*body_consts, *carry], body_jaxpr.in_avals):
        raise TypeError(f"while: body_jaxpr takes ({avals_short(body_jaxpr.in_avals)}) but is "
                        f"given ({avals_short([*body_consts, *carry])})")
    (pred,) = cond_jaxpr.out_avals
    if pred.shape != () or pred.dtype != np.bool_:
        raise TypeError(f"while: cond_jaxpr must return bool[], got {pred.str_short()}")
    if not typematch_all(carry, body_jaxpr.out_avals):
        raise TypeError(f"while: body_jaxpr maps the carry ({avals_short(carry)}) to "
                        f"({avals_short(body_jaxpr.out_avals)}), of another type")
    return body_jaxpr.out_avals


# JAX: jax/_src/lax/control_flow/loops.py _while_loop_jvp
def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nonzeros = [not is_zero(t) for t in tangents]
    _, bconst_nz, init_nz = split_list(nonzeros, [cond_nconsts, body_nconsts])
    carry_nz, body_jvp = _carry_fixpoint(
        lambda carry_nz: ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz),
        init_nz)
    cconsts, bconsts, init = split_list(primals, [cond_nconsts, body_nconsts])
    _, bconst_t, init_t = split_list(tangents, [cond_nconsts, body_nconsts])
    bconst_dot = [t for t, nz in safe_zip(bconst_t, bconst_nz) if nz]
    init_dot = [ad.instantiate_zeros(t) for t, nz in safe_zip(init_t, carry_nz) if nz]
    num_carry = len(init)
    body_jvp = rearrange_binders(body_jvp, [body_nconsts, num_carry],
                                  [len(bconst_dot), len(init_dot)], [num_carry], [len(init_dot)])
    # The predicate reads the primal carry only: extra binders for the tangents, unused.
    cond_aug = with_invars(cond_jaxpr, cond_jaxpr.jaxpr.invars
                            + [core.Var(core.get_aval(t)) for t in init_dot])
    out = while_p.bind(*cconsts, *bconsts, *bconst_dot, *init, *init_dot,
                       cond_jaxpr=cond_aug, body_jaxpr=body_jvp, cond_nconsts=cond_nconsts,
                       body_nconsts=body_nconsts + len(bconst_dot))
    carry, carry_dot = split_list(out, [num_carry])
    it = iter(carry_dot)
    return carry, [next(it) if nz else Zero.from_primal_value(p)
                   for p, nz in safe_zip(carry, carry_nz)]


# JAX: jax/_src/lax/control_flow/loops.py _while_partial_eval
def _while_partial_eval(trace: pe.JaxprTrace, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                        body_nconsts):
    # As JAX does: the known carries are computed by a while over the known part of the body;
    # the unknown ones by recording the *whole* loop (recomputing the known part), since no
    # residuals can be saved per iteration of a loop of unknown length. This keeps `linearize`
    # (forward mode) working; transposing the recorded loop raises the reverse-mode error.
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    unknowns = [trace.is_own(x) for x in args]
    cconst_uk, bconst_uk, init_uk = split_list(unknowns, [cond_nconsts, body_nconsts])

    def split_body(carry_uk):
        split = pe.partial_eval_jaxpr_nounits(body_jaxpr, bconst_uk + carry_uk,
                                              instantiate=carry_uk)
        return split, split[2]
    carry_uk, body_split = _carry_fixpoint(split_body, init_uk)
    cond_split = pe.partial_eval_jaxpr_nounits(cond_jaxpr, cconst_uk + carry_uk)
    if cond_split[2][0] or all(carry_uk):
        return trace.default_process_primitive(while_p, args, params)
    # The known loop: the known parts of the predicate and body, as partial evaluation left
    # them (as JAX's: not pruned, so what only fed the residuals stays in the body), with the
    # residual outputs dropped.
    num_known = len(carry_uk) - sum(carry_uk)
    cond_known = _keep_outputs(cond_split[0], 1)
    body_known = _keep_outputs(body_split[0], num_known)
    cconsts, bconsts, init = split_list(args, [cond_nconsts, body_nconsts])
    known = lambda xs, uks: [x for x, u in safe_zip(xs, uks) if not u]
    known_cconsts, known_bconsts = known(cconsts, cconst_uk), known(bconsts, bconst_uk)
    out_known = while_p.bind_with_trace(
        trace.parent_trace, [*known_cconsts, *known_bconsts, *known(init, carry_uk)],
        dict(cond_jaxpr=cond_known, body_jaxpr=body_known, cond_nconsts=len(known_cconsts),
             body_nconsts=len(known_bconsts)))
    if not any(carry_uk):  # only unused inputs were unknown
        return out_known
    out_all = trace.default_process_primitive(while_p, args, params)
    return merge_lists(carry_uk, out_known, [o for o, u in safe_zip(out_all, carry_uk) if u])


def _keep_outputs(closed: ClosedJaxpr, n: int) -> ClosedJaxpr:
    """The jaxpr with only its first `n` outputs (its equations all kept)."""
    j = closed.jaxpr
    return ClosedJaxpr(core.Jaxpr(j.constvars, j.invars, j.outvars[:n], j.eqns, j.effects),
                       closed.consts)


# JAX: jax/_src/lax/control_flow/loops.py _while_transpose_error
def _while_transpose(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                     "using fori_loop with static start/stop.")


# JAX: jax/_src/lax/control_flow/loops.py _while_loop_batching_rule — differs: see below
def _while_batch_rule(vals, dims, *, axis_size, cond_jaxpr, body_jaxpr, cond_nconsts,
                      body_nconsts):
    cconst_b, bconst_b, init_b = split_list([d is not not_mapped for d in dims],
                                            [cond_nconsts, body_nconsts])
    # Fixpoint: a carry is batched if it starts batched or the body makes it so.
    carry_b, _ = _carry_fixpoint(
        lambda carry_b: batch_jaxpr_flags(body_jaxpr, axis_size, bconst_b + carry_b,
                                     instantiate=carry_b),
        init_b)
    _, (pred_b,) = batch_jaxpr_flags(cond_jaxpr, axis_size, cconst_b + carry_b, instantiate=False)
    if pred_b:  # every example loops until its own predicate is false: batch all carries
        carry_b = [True] * len(carry_b)
    cconsts, bconsts, init = split_list(vals, [cond_nconsts, body_nconsts])
    cdims, bdims, idims = split_list(dims, [cond_nconsts, body_nconsts])
    cconsts = [x if d is not_mapped else batching.moveaxis(x, d, 0)
               for x, d in safe_zip(cconsts, cdims)]
    bconsts = [x if d is not_mapped else batching.moveaxis(x, d, 0)
               for x, d in safe_zip(bconsts, bdims)]
    init = [batching.bdim_at_front(x, d, axis_size) if b else x
            for x, d, b in safe_zip(init, idims, carry_b)]
    cond_b, _ = batch_jaxpr_flags(cond_jaxpr, axis_size, cconst_b + carry_b, pred_b)
    body_b, _ = batch_jaxpr_flags(body_jaxpr, axis_size, bconst_b + carry_b, carry_b)
    if not pred_b:
        outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=cond_b, body_jaxpr=body_b,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return outs, [0 if b else not_mapped for b in carry_b]
    # A batched predicate: loop while *any* example's predicate holds; an example whose
    # predicate is false keeps its carry (a select), so it stops changing. (JAX keeps the
    # bool[n] predicate in the cond jaxpr and does the `any` and the select in the lowering;
    # here they are ordinary equations of the jaxprs.)
    carry_avals = [v.aval for v in body_b.jaxpr.outvars]
    ncc, nbc = len(cconsts), len(bconsts)

    def cond_any(*args):
        (pred,) = eval_closed(cond_b, *args)
        return [lax.reduce_max(pred, (0,))]

    def body_select(*args):
        cc, bc, carry = split_list(args, [ncc, nbc])
        (pred,) = eval_closed(cond_b, *cc, *carry)
        new = eval_closed(body_b, *bc, *carry)
        return [lax.select(_bcast_pred(pred, a), n, c)
                for n, c, a in safe_zip(new, carry, carry_avals)]

    cond_avals = cond_b.in_avals
    cond_any_jaxpr = trace_closed(cond_any, cond_avals, "vmap")
    body_select_jaxpr = trace_closed(
        body_select, cond_avals[:ncc] + body_b.in_avals, "vmap")
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=cond_any_jaxpr,
                        body_jaxpr=body_select_jaxpr, cond_nconsts=ncc, body_nconsts=ncc + nbc)
    return outs, [0] * len(outs)


# JAX: jax/_src/lax/control_flow/loops.py _while_lowering (its cond_ordered_effects branch)
def _while_lowering_cond_effects(ctx, args, cond_jaxpr, body_jaxpr, cond_nconsts,
                                 body_nconsts) -> list:
    """An ordered effect in the condition: XLA's condition region cannot pass a token on,
    so the condition runs before the loop and at the end of each trip, inside the body, and
    the loop carries its predicate (the new loop's condition only reads it). The host calls
    then happen in program order: cond, body, cond, ..., cond."""
    def fun(*vals):
        cc, bc, carry = split_list(list(vals), [cond_nconsts, body_nconsts])

        def pred_of(c):
            return eval_closed(cond_jaxpr, *cc, *c)[0]

        def trip(state):
            new = eval_closed(body_jaxpr, *bc, *state[1])
            return pred_of(new), new

        return while_loop(lambda state: state[0], trip, (pred_of(carry), carry))[1]

    closed = trace_closed(fun, ctx.avals_in, "a while_loop with effects in cond_fun")
    return mlir.lower_jaxpr(closed.jaxpr, closed.consts, list(args))


def _bcast_pred(pred, aval: ShapedArray):
    return pred if aval.ndim == 1 else lax.broadcast_in_dim(pred, aval.shape, (0,))


# JAX: jax/_src/lax/control_flow/loops.py _while_lowering
def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # The consts travel through the loop state with the carry (regions only see their
    # arguments here, as in JAX's lowering), after the tokens of the body's ordered effects.
    hlo, ir = mlir.hlo, mlir.ir
    if mlir.ordered_effects_of(cond_jaxpr.jaxpr):
        return _while_lowering_cond_effects(ctx, args, cond_jaxpr, body_jaxpr, cond_nconsts,
                                            body_nconsts)
    effs = mlir.ordered_effects_of(body_jaxpr.jaxpr)
    ntok = len(effs)
    types = [mlir.token_type()] * ntok + [mlir.aval_to_ir_type(a) for a in ctx.avals_in]
    while_op = hlo.WhileOp(types, [*mlir.get_tokens(effs), *args])
    cond_block = while_op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        cc, _, carry = split_list(list(cond_block.arguments)[ntok:],
                                  [cond_nconsts, body_nconsts])
        with mlir.extend_name_stack("while/cond"):  # JAX's op names
            hlo.return_(mlir.lower_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cc, *carry]))
    body_block = while_op.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        tokens, cc, bc, carry = split_list(list(body_block.arguments),
                                           [ntok, cond_nconsts, body_nconsts])
        mlir.set_tokens(effs, tokens)
        with mlir.extend_name_stack("while/body"):
            new = mlir.lower_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, [*bc, *carry])
        hlo.return_([*mlir.get_tokens(effs), *cc, *bc, *new])
    results = list(while_op.results)
    mlir.set_tokens(effs, results[:ntok])
    return results[ntok + cond_nconsts + body_nconsts:]


while_p = core.Primitive("while")
while_p.multiple_results = True
while_p.def_impl(_while_impl)
while_p.def_abstract_eval(_while_abstract_eval)
ad.primitive_jvps[while_p] = _while_jvp
pe.custom_partial_eval_rules[while_p] = _while_partial_eval
ad.primitive_transposes[while_p] = _while_transpose
batching.primitive_batchers[while_p] = _while_batch_rule
mlir.register_lowering(while_p, _while_lowering)


# =============================================================================================
# fori_loop and map
# =============================================================================================

# JAX: jax/_src/lax/control_flow/loops.py fori_loop
@traceback_util.api_boundary
def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """`val = body_fun(i, val)` for `i` in `range(lower, upper)`.

    With concrete bounds (Python ints or concrete arrays) this is a `scan` of length
    `upper - lower`, so reverse mode works; with traced bounds it is a `while_loop` (forward
    mode only). `i` is an integer scalar of the bounds' dtype.
    Raises: TypeError for bounds of different dtypes or a non-callable body; ValueError for
      `unroll` with traced bounds.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lower_aval, upper_aval = core.get_aval(lower), core.get_aval(upper)
    dtype = lower_aval.dtype
    if lower_aval.dtype != upper_aval.dtype:
        # as JAX: only a weak (Python) signed integer bound takes the other bound's dtype
        signed = all(np.issubdtype(a.dtype, np.signedinteger) for a in (lower_aval, upper_aval))
        if signed and lower_aval.weak_type and not upper_aval.weak_type:
            dtype = upper_aval.dtype
        elif signed and upper_aval.weak_type and not lower_aval.weak_type:
            dtype = lower_aval.dtype
        else:
            raise TypeError("lower and upper arguments to fori_loop must have equal types, "
                            f"got {lower_aval.dtype.name} and {upper_aval.dtype.name}")
    if core.is_concrete(lower) and core.is_concrete(upper):
        lower_, upper_ = int(core.to_numpy(lower)), int(core.to_numpy(upper))

        def scanned(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None

        if python_control_flow() and upper_ <= lower_:
            return init_val  # (a Python scan of length 0 is refused)
        (_, result), _ = scan(scanned, (lower_, init_val), None,
                              length=max(upper_ - lower_, 0),
                              unroll=False if unroll is None else unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    # as JAX: a bound already of the loop's dtype is used as it is (no no-op conversion)
    if lower_aval.dtype != dtype:
        lower = lax.convert_element_type(lower, dtype)
    if upper_aval.dtype != dtype:
        upper = lax.convert_element_type(upper, dtype)

    def while_body(carry):
        i, hi, x = carry
        return lax.add(i, np.array(1, dtype)), hi, body_fun(i, x)

    _, _, result = while_loop(lambda carry: lax.lt(carry[0], carry[1]), while_body,
                              (lower, upper, init_val))
    return result


# JAX: jax/_src/lax/control_flow/loops.py map — differs: no batch_size
@traceback_util.api_boundary
def map(f: Callable, xs):
    """`stack([f(x) for x in xs])` over the leading axis of the pytree `xs`, as a `scan`
    (one traced body, one loop; unlike `vmap`, the examples run one after another)."""
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys


# =============================================================================================
# Cumulative reductions: cumsum, cumprod, cummax, cummin, cumlogsumexp
# =============================================================================================

def _cumred_impl(ufunc):
    def impl(x, *, axis, reverse):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return ufunc.accumulate(x, axis=axis, dtype=x.dtype)
    return impl


def _cumred_abstract_eval(name: str, kind: str):
    def rule(x, *, axis, reverse):
        lax._check_dtype(name, x, kind)
        if not 0 <= axis < x.ndim:
            raise TypeError(f"{name}: axis {axis} out of range for {x.str_short()}")
        return x
    return rule


def _cumred_batch_rule(prim, vals, dims, *, axis_size, axis, reverse):
    (x,), (d,) = vals, dims
    return prim.bind(x, axis=axis + (d <= axis), reverse=reverse), d


def _cumred_lowering(combine, init, broadcast_init: bool):
    # As JAX on CPU (cumred_reduce_window_impl): a reduce_window whose window is the whole
    # axis, padded by n-1 identities `init(dtype)` on one side, so output i combines inputs
    # [0, i] (XLA rewrites it into an efficient scan).
    def rule(ctx, x, *, axis, reverse):
        hlo = mlir.hlo
        aval = ctx.avals_in[0]
        n = aval.shape[axis]
        if n == 0:
            return x
        if not mlir.is_static(aval.shape):
            return _dynamic_cumred(x, aval, axis, reverse, combine, init)
        window = [1] * aval.ndim
        window[axis] = n
        padding = np.zeros((aval.ndim, 2), np.int64)
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval.dtype))
        init_value = mlir.ir_constant(np.array(init(aval.dtype), aval.dtype))
        if broadcast_init:  # as JAX's reduce_window_{sum,max,min} rule, unlike the generic one
            init_value = hlo.broadcast_in_dim(scalar, init_value, [])
        op = hlo.ReduceWindowOp([mlir.aval_to_ir_type(aval)], [x], [init_value],
                                window, window_strides=[1] * aval.ndim,
                                base_dilations=[1] * aval.ndim,
                                window_dilations=[1] * aval.ndim,
                                padding=mlir.ir.DenseIntElementsAttr.get(padding))
        block = op.body.blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            hlo.return_([combine(*block.arguments)])
        return op.result
    return rule


_reducers = itertools.count()


# JAX: jax/_src/lax/windowed_reductions.py _reduce_window_lower (its dynamic-shape branch)
def _dynamic_cumred(x, aval, axis: int, reverse: bool, combine, init):
    """The cumulative reduction's reduce_window over a symbolic shape: the custom call
    `stablehlo.dynamic_reduce_window`, its sizes and padding as tensors and its reducer a
    private function, as JAX emits it (shape refinement makes it a reduce_window)."""
    ir, hlo, func = mlir.ir, mlir.hlo, mlir.func
    scalar = mlir.aval_to_ir_type(ShapedArray((), aval.dtype))
    name = f"reduce_window_{aval.dtype.name}_reducer_{next(_reducers)}"
    with ir.InsertionPoint(mlir.enclosing_module().regions[0].blocks[0]):
        reducer = func.FuncOp(name, ir.FunctionType.get([scalar, scalar], [scalar]))
        reducer.attributes["sym_visibility"] = ir.StringAttr.get("private")
        with ir.InsertionPoint(reducer.add_entry_block()):
            func.ReturnOp([combine(*reducer.arguments)])
    n, ones = aval.shape[axis], (1,) * aval.ndim
    window = tuple(n if d == axis else 1 for d in range(aval.ndim))
    pads = [p for d in range(aval.ndim) for p in (
        ((0, n - 1) if reverse else (n - 1, 0)) if d == axis else (0, 0))]
    pad_type = ir.RankedTensorType.get((aval.ndim, 2), ir.IntegerType.get_signless(32))
    operands = [x, mlir.ir_constant(np.array(init(aval.dtype), aval.dtype)),
                *[mlir.eval_dynamic_shape_as_tensor(v) for v in (window, ones, ones, ones)],
                hlo.reshape(pad_type, mlir.eval_dynamic_shape_as_tensor(pads))]
    op = hlo.CustomCallOp([mlir.aval_to_ir_type(aval)], operands,
                          "stablehlo.dynamic_reduce_window",
                          api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2),
                          called_computations=ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(name)]))
    return op.result


# JAX: jax/_src/lax/control_flow/loops.py _cumulative_reduction_primitive
def _cumulative_reduction_primitive(name: str, kind: str, ufunc, combine, init,
                                    broadcast_init: bool = False) -> core.Primitive:
    """A cumulative reduction along one axis: impl (`ufunc.accumulate`), abstract eval,
    batching and lowering (`combine` of two scalars, identity `init(dtype)`, broadcast to its
    own scalar shape where JAX reduces with reduce_window_sum, _max or _min, which do). Its
    jvp or transpose is registered by the caller."""
    prim = core.Primitive(name)
    prim.def_impl(_cumred_impl(ufunc))
    prim.def_abstract_eval(_cumred_abstract_eval(name, kind))
    batching.primitive_batchers[prim] = functools.partial(_cumred_batch_rule, prim)
    mlir.register_lowering(prim, _cumred_lowering(combine, init, broadcast_init))
    return prim


def _cumulative_jvp(primals, tangents, *, prim, weights, axis, reverse):
    # Every cumulative reduction's tangent is linear in t: t_out[i] = sum_j w[j, i] * t[j],
    # with w (zero where j is not yet reduced into i) built from primals only, so the jvp
    # transposes. JAX differentiates an associative_scan instead; this dense form is O(n^2)
    # but reads as the math. `wide` holds j at `axis` and i at `axis + 1`.
    (x,), (t,) = primals, tangents
    out = prim.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero:
        return out, Zero.from_primal_value(out)
    shape = core.get_aval(x).shape
    wide = shape[:axis] + (shape[axis],) + shape[axis:]
    j_dims = tuple(range(axis + 1)) + tuple(range(axis + 2, len(wide)))
    i_dims = tuple(d for d in range(len(wide)) if d != axis)
    j = lax.broadcasted_iota(np.int32, wide, axis)
    i = lax.broadcasted_iota(np.int32, wide, axis + 1)
    reached = lax.ge(j, i) if reverse else lax.le(j, i)
    w = weights(x, out, lambda v: lax.broadcast_in_dim(v, wide, j_dims),
                lambda v: lax.broadcast_in_dim(v, wide, i_dims), j, i, reached, axis, reverse)
    w = lax.select(reached, w, lax.full_like(w, 0))
    return out, lax.reduce_sum(lax.mul(w, lax.broadcast_in_dim(t, wide, j_dims)), (axis,))


def _cumprod_weights(x, out, at_j, at_i, j, i, reached, axis, reverse):
    # w[j, i] = product of x[k] over the k reduced into i, except k == j (no division by x[j])
    x_k = at_i(x)
    return cumprod(lax.select(lax.eq(j, i), lax.full_like(x_k, 1), x_k), axis + 1, reverse)


def _cumextreme_weights(x, out, at_j, at_i, j, i, reached, axis, reverse):
    # the tangent of the extreme so far; tied positions share it equally
    hits = lax.convert_element_type(lax.eq(at_j(x), at_i(out)), core.get_aval(x).dtype)
    hits = lax.select(reached, hits, lax.full_like(hits, 0))
    return lax.div(hits, at_i(lax.reduce_sum(hits, (axis,))))


def _cumlogsumexp_weights(x, out, at_j, at_i, j, i, reached, axis, reverse):
    # d out[i] / d x[j] = exp(x[j] - out[i]), the softmax weight of j among those reduced
    return lax.exp(lax.sub(at_j(x), at_i(out)))


def _logaddexp_hlo(a, b):
    # log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); a - b is NaN when both are the same
    # infinity, and then a + b is the answer (JAX's logaddexp)
    hlo = mlir.hlo
    amax = hlo.maximum(a, b)
    delta = hlo.subtract(a, b)
    is_nan = mlir.compare_hlo(delta, delta, "NE", "FLOAT")
    return hlo.select(is_nan, hlo.add(a, b),
                      hlo.add(amax, hlo.log_plus_one(hlo.exponential(hlo.negate(hlo.abs(delta))))))


def _cumred_bind(prim: core.Primitive, x, axis: int, reverse: bool):
    nd = core.get_aval(x).ndim
    axis = canonicalize_axis(axis, nd) if nd else int(axis)
    return prim.bind(x, axis=axis, reverse=bool(reverse))


# JAX: jax/_src/lax/control_flow/loops.py cumsum
def cumsum(x, axis: int = 0, reverse: bool = False):
    """Running sum of `x` along `axis` (from the end when `reverse`); number dtypes."""
    return _cumred_bind(cumsum_p, x, axis, reverse)


# JAX: jax/_src/lax/control_flow/loops.py cumprod
def cumprod(x, axis: int = 0, reverse: bool = False):
    """Running product of `x` along `axis` (from the end when `reverse`); number dtypes."""
    return _cumred_bind(cumprod_p, x, axis, reverse)


# JAX: jax/_src/lax/control_flow/loops.py cummax
def cummax(x, axis: int = 0, reverse: bool = False):
    """Running maximum of `x` along `axis` (from the end when `reverse`); NaN propagates."""
    return _cumred_bind(cummax_p, x, axis, reverse)


# JAX: jax/_src/lax/control_flow/loops.py cummin
def cummin(x, axis: int = 0, reverse: bool = False):
    """Running minimum of `x` along `axis` (from the end when `reverse`); NaN propagates."""
    return _cumred_bind(cummin_p, x, axis, reverse)


# JAX: jax/_src/lax/control_flow/loops.py cumlogsumexp
def cumlogsumexp(x, axis: int = 0, reverse: bool = False):
    """Running log(sum(exp(x))) along `axis` (from the end when `reverse`), computed stably;
    float dtypes."""
    return _cumred_bind(cumlogsumexp_p, x, axis, reverse)


def _cumsum_transpose(ct, x, *, axis, reverse):
    return [Zero(x.aval) if type(ct) is Zero else cumsum(ct, axis, not reverse)]


cumsum_p = _cumulative_reduction_primitive("cumsum", lax._num, np.add,
                                           lambda a, b: mlir.hlo.add(a, b), lambda dt: 0,
                                           broadcast_init=True)
ad.deflinear(cumsum_p, _cumsum_transpose)

cumprod_p = _cumulative_reduction_primitive("cumprod", lax._num, np.multiply,
                                            lambda a, b: mlir.hlo.multiply(a, b), lambda dt: 1)
ad.primitive_jvps[cumprod_p] = functools.partial(_cumulative_jvp, prim=cumprod_p,
                                                 weights=_cumprod_weights)

cummax_p = _cumulative_reduction_primitive("cummax", lax._num, np.maximum,
                                           lambda a, b: mlir.hlo.maximum(a, b), lax._lowest,
                                           broadcast_init=True)
ad.primitive_jvps[cummax_p] = functools.partial(_cumulative_jvp, prim=cummax_p,
                                                weights=_cumextreme_weights)

cummin_p = _cumulative_reduction_primitive("cummin", lax._num, np.minimum,
                                           lambda a, b: mlir.hlo.minimum(a, b), lax._highest,
                                           broadcast_init=True)
ad.primitive_jvps[cummin_p] = functools.partial(_cumulative_jvp, prim=cummin_p,
                                                weights=_cumextreme_weights)

cumlogsumexp_p = _cumulative_reduction_primitive("cumlogsumexp", lax._float, np.logaddexp,
                                                 _logaddexp_hlo, lambda dt: -np.inf)
ad.primitive_jvps[cumlogsumexp_p] = functools.partial(_cumulative_jvp, prim=cumlogsumexp_p,
                                                      weights=_cumlogsumexp_weights)


# ---------------------------------------------------------------------------------------------
# associative_scan: a parallel prefix in O(log n) levels of elementwise work (Blelloch-style)
# ---------------------------------------------------------------------------------------------

def _interleave(a, b, axis: int):
    """[a0, b0, a1, b1, ...] along `axis` (a has as many elements as b, or one more): each
    padded with zeros between its elements, offset by one, and added (or-ed for bools)."""
    nd = core.get_aval(a).ndim
    n_a, n_b = core.get_aval(a).shape[axis], core.get_aval(b).shape[axis]
    cfg = lambda lo, hi: [(lo, hi, 1) if d == axis else (0, 0, 0) for d in range(nd)]
    zero = lax._const(a, 0)
    pa = lax.pad(a, zero, cfg(0, 1 if n_a == n_b else 0))
    pb = lax.pad(b, zero, cfg(1, 0 if n_a == n_b else 1))
    combine = lax.bitwise_or if core.get_aval(a).dtype == np.bool_ else lax.add
    return combine(pa, pb)


# JAX: jax/_src/lax/control_flow/loops.py associative_scan
def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """All prefix combinations of `elems` (a pytree of arrays of one length along `axis`)
    under the associative `fn(a, b)`, vectorized over slices: the result's element i is
    fn(...fn(e0, e1)..., ei) (from the end with reverse=True). Pairs are combined level by
    level, log2(n) calls of `fn` on halves, so `fn` must accept and return batches.
    ValueError for leaves of different lengths."""
    flat, tree = tree_flatten(elems)
    if not flat:
        return elems
    nd = core.get_aval(flat[0]).ndim
    axis = canonicalize_axis(axis, nd)
    lengths = {core.get_aval(e).shape[axis] for e in flat}
    if len(lengths) != 1:
        raise ValueError(f"Array inputs to associative_scan must have the same first "
                         f"dimension. (saw: {[core.get_aval(e).shape for e in flat]})")
    if reverse:
        flat = [lax.rev(e, (axis,)) for e in flat]

    def combine(a, b):
        out, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of its inputs, "
                            f"{tree}, got {out_tree}")
        return out

    def scan_level(es):
        n = core.get_aval(es[0]).shape[axis]
        if n < 2:
            return es
        # combine neighbours, scan the half, then fill in the even positions
        odd = scan_level(combine([lax.slice_in_dim(e, 0, n - 1, 2, axis) for e in es],
                                 [lax.slice_in_dim(e, 1, n, 2, axis) for e in es]))
        if n % 2 == 0:
            even = combine([lax.slice_in_dim(o, 0, -1, 1, axis) for o in odd],
                           [lax.slice_in_dim(e, 2, n, 2, axis) for e in es])
        else:
            even = combine(odd, [lax.slice_in_dim(e, 2, n, 2, axis) for e in es])
        even = [lax.concatenate([lax.slice_in_dim(e, 0, 1, 1, axis), v], axis)
                for e, v in zip(es, even)]
        return [_interleave(v, o, axis) for v, o in zip(even, odd)]

    out = scan_level(flat)
    if reverse:
        out = [lax.rev(e, (axis,)) for e in out]
    return tree_unflatten(tree, out)
