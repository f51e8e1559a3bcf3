"""Helpers shared by `cond`, `while_loop` and `scan`.

Tracing a user's function to a jaxpr whose closed-over values (consts) become explicit leading
operands, the type checks with JAX's error texts, and the small jaxpr surgery the rules of
jaxpr-holding primitives need (reordering binders, finding forwarded outputs).
Mirrors jax/_src/lax/control_flow/common.py. Taught in chapters/08-control-flow.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from minijax import core, dtypes
from minijax.ad_util import Zero
from minijax.array import array_from_numpy
from minijax.config import config
from minijax.core import ClosedJaxpr, Jaxpr, ShapedArray, Tracer, Var
from minijax.interpreters import batching, partial_eval as pe
from minijax.lax import lax
from minijax.tree_util import PyTreeDef
from minijax.util import safe_zip, split_list

# ---------------------------------------------------------------------------------------------
# disable_jit: control flow run as Python
# ---------------------------------------------------------------------------------------------

def python_control_flow() -> bool:
    """Under `minijax.disable_jit()`, control flow runs as Python (`if`, `for`, `while`)
    where its operands allow, so prints and breakpoints in bodies run per iteration."""
    return config.jax_disable_jit


# JAX: jax/_src/core.py to_concrete_value
def to_concrete_value(x):
    """`x`'s value if it is known now (an array, or a tracer of one, e.g. under `jvp`), else
    None."""
    return x.to_concrete_value() if isinstance(x, Tracer) else x


# ---------------------------------------------------------------------------------------------
# Tracing the user's functions
# ---------------------------------------------------------------------------------------------


# JAX: jax/_src/interpreters/partial_eval.py separate_consts — differs: also traces
def initial_style_jaxpr(flat_fun: Callable, in_avals: Sequence[ShapedArray], fun_name: str
                         ) -> tuple[Jaxpr, list]:
    """Trace `flat_fun` (flat args -> flat outputs) to a jaxpr. Returns (jaxpr, consts): the
    consts are what the function closed over (arrays, or tracers of outer transformations),
    still bound to the jaxpr's constvars; `hoist_consts` turns them into operands."""
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_fun, list(in_avals), fun_name=fun_name,
                                                 purpose="a control-flow primitive")
    return jaxpr, consts


def hoist_consts(jaxpr: Jaxpr) -> ClosedJaxpr:
    """The jaxpr with its constvars turned into leading invars: a const-free ClosedJaxpr, so a
    primitive's params never hold tracers (the consts are passed as operands instead)."""
    return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])


# JAX: jax/_src/lax/control_flow/common.py _merge_common_consts
def merge_common_consts(jaxprs: Sequence[Jaxpr], all_consts: Sequence[list]
                         ) -> tuple[list[ClosedJaxpr], list]:
    """Give several jaxprs (cond's branches) one shared list of leading const operands.

    Consts are deduplicated by identity; each jaxpr gets an unused binder for the consts only
    the other jaxprs read. Returns (const-free ClosedJaxprs, consts).
    """
    merged: list = []
    index: dict[int, int] = {}
    for consts in all_consts:
        for c in consts:
            if id(c) not in index:
                index[id(c)] = len(merged)
                merged.append(c)
    out = []
    for jaxpr, consts in safe_zip(jaxprs, all_consts):
        own = {index[id(c)]: v for v, c in safe_zip(jaxpr.constvars, consts)}
        constvars = [own[i] if i in own else Var(core.get_aval(c))
                     for i, c in enumerate(merged)]
        out.append(ClosedJaxpr(Jaxpr([], constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns),
                               []))
    return out, merged


# JAX: jax/_src/lax/control_flow/loops.py _promote_weak_typed_input
def promote_weak_typed_input(in_val, in_aval: ShapedArray, out_aval: ShapedArray
                              ) -> tuple[Any, bool]:
    """A weakly typed initial carry (a Python scalar) whose loop output has another dtype is
    converted to that dtype, so `scan(f, 0, xs)` with a float body works as in JAX. Returns
    (value, changed)."""
    if in_aval.weak_type and not core.typematch(in_aval, out_aval):
        new_dtype, _ = dtypes.result_type_weak((in_aval.dtype, True),
                                               (out_aval.dtype, out_aval.weak_type))
        return lax.convert_element_type(in_val, new_dtype), True
    return in_val, False


def as_array(x, aval: ShapedArray):
    """A value an impl returns, as a minijax Array of exactly the output's aval (concrete
    inputs passed through a jaxpr may be Python scalars or numpy arrays, and literals
    re-evaluated eagerly lose their weak type)."""
    if isinstance(x, Tracer) or getattr(x, "aval", None) == aval:
        return x
    return array_from_numpy(core.to_numpy(x, aval), aval.weak_type)


def is_zero(t) -> bool:
    """A tangent that carries nothing: symbolic `Zero`, or a float0 array (the tangent of an
    integer input passed explicitly to `jvp`)."""
    return type(t) is Zero or (not isinstance(t, Tracer) and getattr(t, "dtype", None)
                               == dtypes.float0)


# ---------------------------------------------------------------------------------------------
# Type checks, with JAX's error texts
# ---------------------------------------------------------------------------------------------

def typematch_all(xs: Sequence[ShapedArray], ys: Sequence[ShapedArray]) -> bool:
    return len(xs) == len(ys) and all(core.typematch(x, y) for x, y in zip(xs, ys))


def avals_short(avals: Sequence[ShapedArray]) -> str:
    return ", ".join(a.str_short() for a in avals)


# JAX: jax/_src/core.py aval_mismatch_extra
def _aval_mismatch_extra(a1: ShapedArray, a2: ShapedArray) -> str:
    what = [f"the {w} do not match" for w, differ in (
        ("dtypes", a1.dtype != a2.dtype), ("shapes", a1.shape != a2.shape),
        ("manual axis types", a1.vma != a2.vma)) if differ]
    if len(what) > 1:
        what = [", ".join(what[:-1]) + ", and " + what[-1]]
    return ", so " + what[0] if what else ""


def _component(i: int, n: int) -> str:
    return f" {i}" if n > 1 else ""


# JAX: jax/_src/lax/control_flow/conditionals.py _check_branch_outputs — differs: leaf
# indices instead of pytree paths
def check_branch_outputs(api_name: str, name1: str, name2: str, tree1: PyTreeDef,
                          avals1: Sequence[ShapedArray], tree2: PyTreeDef,
                          avals2: Sequence[ShapedArray]) -> None:
    """Raise TypeError unless two branches return the same pytree of the same types."""
    if tree1 != tree2:
        raise TypeError(
            f"{api_name} branch outputs must have the same pytree structure, but they differ:"
            f"\n\n{name1} output is {tree1}\n{name2} output is {tree2}\n\n"
            f"Revise {name1} and/or {name2} so that they have the same pytree structure.")
    n = len(avals1)
    # JAX's typematch compares the varying manual axes too (minijax's core.typematch does not)
    same = lambda a1, a2: core.typematch(a1, a2) and a1.vma == a2.vma
    differ = [(i, a1, a2) for i, (a1, a2) in enumerate(safe_zip(avals1, avals2))
              if not same(a1, a2)]
    diffs = [f"the output{_component(i, n)} of {name1} has type {a1.str_short()} but the "
             f"corresponding output of {name2} has type {a2.str_short()}"
             f"{_aval_mismatch_extra(a1, a2)}" for i, a1, a2 in differ]
    # an output that varies along fewer manual axes than the other branch's: pcast it
    fixes = [f"applying `jax.lax.pcast(..., {tuple(sorted(b.vma - a.vma))}, to='varying')` "
             f"to the output{_component(i, n)} of {name}" for i, a1, a2 in differ
             for name, a, b in ((name1, a1, a2), (name2, a2, a1)) if b.vma - a.vma]
    hint = ""
    if fixes:
        hint = ("This might be fixed by " + fixes[0] + ".\n" if len(fixes) == 1 else
                "This might be fixed by:\n" + "\n".join(f"  * {d};" for d in fixes[:-1]) +
                f"\n  * {fixes[-1]}.\n") + \
            ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for more "
             "information.\n\n")
    if diffs:
        text = _bullets(diffs)
        raise TypeError(
            f"{api_name} branches must have equal output types but they differ.\n\n{text}\n\n"
            f"{hint}Revise {name1} and/or {name2} so that all output types match.")


def _bullets(diffs: list[str]) -> str:
    """One difference as a sentence; several as a bulleted list (JAX's message layout)."""
    if len(diffs) == 1:
        return diffs[0][0].upper() + diffs[0][1:] + "."
    return "\n".join(f"  * {d};" for d in diffs)


# JAX: jax/_src/lax/control_flow/loops.py _check_carry_type — differs: leaf indices
def check_carry_type(name: str, in_tree: PyTreeDef, in_avals: Sequence[ShapedArray],
                      out_tree: PyTreeDef, out_avals: Sequence[ShapedArray]) -> None:
    """Raise TypeError unless a loop body returns a carry of the input carry's pytree and
    types (weak types may differ)."""
    if in_tree != out_tree:
        raise TypeError(
            f"{name} function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\nthe input tree structure is:\n{in_tree}\n"
            f"the output tree structure is:\n{out_tree}\n\nRevise the function so that the "
            "carry output has the same pytree structure as the carry input.")
    n = len(in_avals)
    carry = lambda i: f"the input carry{' component' + _component(i, n) if n > 1 else ''}"
    # JAX's typematch compares the varying manual axes too (minijax's core.typematch does not)
    differ = [(i, a, b) for i, (a, b) in enumerate(safe_zip(in_avals, out_avals))
              if not (core.typematch(a, b) and a.vma == b.vma)]
    diffs = [f"{carry(i)} has type {a.str_short()} but the corresponding output carry "
             f"component has type {b.str_short()}{_aval_mismatch_extra(a, b)}"
             for i, a, b in differ]
    # a carry that starts varying along fewer manual axes than the body makes it: pcast it
    fixes = [f"applying `jax.lax.pcast(..., {tuple(sorted(b.vma - a.vma))}, to='varying')`, "
             f"to the initial carry value corresponding to {carry(i)}"
             for i, a, b in differ if b.vma - a.vma]
    hint = ""
    if fixes:
        hint = ("This might be fixed by " + fixes[0] + ".\n" if len(fixes) == 1 else
                "This might be fixed by:\n" + "\n".join(f"  * {d};" for d in fixes[:-1]) +
                f"\n  * {fixes[-1]}.\n") + \
            ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for more "
             "information.\n\n")
    if diffs:
        text = _bullets(diffs)
        raise TypeError(
            f"{name} function carry input and carry output must have equal types, but they "
            f"differ:\n\n{text}\n\n{hint}Revise the function so that all output types match "
            "the corresponding input types.")


# ---------------------------------------------------------------------------------------------
# Jaxpr surgery
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/interpreters/partial_eval.py _jaxpr_forwarding
def jaxpr_forwarding(jaxpr: Jaxpr) -> list[int | None]:
    """For each output, the index of the input it simply returns (None if it computes it)."""
    where = {v: i for i, v in enumerate(jaxpr.invars)}
    return [where.get(v) if isinstance(v, Var) else None for v in jaxpr.outvars]


def prune_outputs(closed: ClosedJaxpr, keep: Sequence[bool]) -> ClosedJaxpr:
    """The jaxpr with only the outputs where `keep` (the equations stay; DCE drops them)."""
    j = closed.jaxpr
    outvars = [v for v, k in safe_zip(j.outvars, keep) if k]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, outvars, j.eqns), closed.consts)


def with_invars(closed: ClosedJaxpr, invars: Sequence[Var]) -> ClosedJaxpr:
    """The same jaxpr with its binders replaced (reordered, or padded with unused ones)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, list(invars), j.outvars, j.eqns), closed.consts)


def _interleave(primal_counts: Sequence[int], tangent_counts: Sequence[int], xs: Sequence
                ) -> list:
    n = sum(primal_counts)
    primals = split_list(xs[:n], list(primal_counts[:-1]))
    tangents = split_list(xs[n:], list(tangent_counts[:-1]))
    return [x for p, t in safe_zip(primals, tangents) for x in p + t]


# JAX: jax/_src/interpreters/ad.py rearrange_binders
def rearrange_binders(closed: ClosedJaxpr, primals_in: Sequence[int],
                       tangents_in: Sequence[int], primals_out: Sequence[int],
                       tangents_out: Sequence[int]) -> ClosedJaxpr:
    """Reorder a jvp jaxpr's binders from `[P1 P2 .. T1 T2 ..]` (all primals, then all
    tangents, as `ad.jvp_jaxpr` makes them) to `[P1 T1 P2 T2 ..]`, group by group (the groups
    are e.g. consts, carry, xs of a scan), for inputs and outputs."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, _interleave(primals_in, tangents_in, j.invars),
                             _interleave(primals_out, tangents_out, j.outvars), j.eqns),
                       closed.consts)


def trace_closed(fun: Callable, in_avals: Sequence[ShapedArray], purpose: str
                  ) -> ClosedJaxpr:
    """Trace a flat function built by a rule (its consts are concrete values)."""
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(fun, list(in_avals), purpose=purpose)
    return ClosedJaxpr(jaxpr, consts)


def eval_closed(closed: ClosedJaxpr, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


# JAX: jax/_src/interpreters/batching.py batch_jaxpr — differs: batch axes always at 0
def batch_jaxpr_flags(closed: ClosedJaxpr, axis_size: int, in_batched: Sequence[bool],
                 instantiate: bool | Sequence[bool]) -> tuple[ClosedJaxpr, list[bool]]:
    """`batching.batch_jaxpr` with batch axes at 0, in terms of flags: inputs where
    `in_batched` have a leading axis of size `axis_size`; an output is batched if it depends on
    a batched input or if `instantiate` (one bool, or one per output) asks for it.

    Returns (batched_jaxpr, out_batched): loop rules need to know which outputs come out
    batched to find the fixpoint of which carries are batched.
    """
    dims = [0 if b else batching.not_mapped for b in in_batched]
    b_closed, out_dims = batching.batch_jaxpr(closed, dims, axis_size, instantiate)
    return b_closed, [d is not batching.not_mapped for d in out_dims]
