"""State discharge: a jaxpr that reads and writes refs becomes a pure jaxpr that threads the
refs' values through. Mirrors jax/_src/state/discharge.py.

The discharged jaxpr takes the ref's *contents* where the original took a ref, and returns,
after the original outputs, the final contents of every ref input. Inside, `get` becomes
`dynamic_slice` (then a reshape dropping integer-indexed dimensions), `swap` a `dynamic_slice`
of the old window plus a `dynamic_update_slice`, `addupdate` a read, an add and a write. Refs
used inside `cond`, `while` and `scan` bodies are moved into the operands and carries, so
the loop threads their contents from one iteration to the next.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, lax, numpy as jnp
from minijax.core import ClosedJaxpr, DropVar, Jaxpr, Literal
from minijax.interpreters import partial_eval as pe
from minijax.lax.control_flow.conditionals import cond_p
from minijax.lax.control_flow.loops import scan_p, while_p
from minijax.state.primitives import addupdate_p, get_p, swap_p
from minijax.state.types import AbstractRef, indexed_shape
from minijax.tree_util import tree_flatten, tree_unflatten
from minijax.util import safe_zip, split_list


def _starts(starts):
    return [np.int32(s) if isinstance(s, (int, np.integer)) else
            s if core.get_aval(s).dtype == np.int32 else lax.convert_element_type(s, np.int32)
            for s in starts]


def _window(starts, indexer):
    """The block a read or write covers: a strided slice of `size` covers
    `(size - 1) * stride + 1` elements."""
    return [(s[1] - 1) * _stride(s) + 1 if s[0] == "slice" and s[1] else
            s[1] if s[0] == "slice" else 1 for s in indexer]


def _stride(s) -> int:
    return s[2] if len(s) > 2 else 1


def _read(x, starts, indexer):
    if not indexer:  # a 0-d ref: the value itself (a 0-d dynamic_slice prints as StableHLO
        return x     # text its parser refuses: `dynamic_slice %x, , sizes = []`)
    win = lax.dynamic_slice(x, _starts(starts), _window(starts, indexer),
                            allow_negative_indices=False)
    strides = [_stride(s) for s in indexer]
    if any(st != 1 for st in strides):  # every stride-th element of the block
        win = lax.slice(win, (0,) * win.ndim, win.shape, tuple(strides))
    shape = indexed_shape(indexer)
    return win if tuple(win.shape) == shape else lax.reshape(win, shape)


def _write(x, val, starts, indexer):
    val = jnp.asarray(val, x.dtype)
    if not indexer:  # a 0-d ref: the new value (see _read)
        return lax.reshape(val, ())
    sizes = [s[1] if s[0] == "slice" else 1 for s in indexer]
    if tuple(val.shape) != tuple(sizes):
        val = lax.reshape(val, sizes)
    strides = [_stride(s) for s in indexer]
    if any(st != 1 for st in strides):
        # spread the values `stride` apart over the block; keep the block's own elements
        # between them (a mask spread the same way picks which)
        spread = [(0, 0, st - 1) for st in strides]
        old = lax.dynamic_slice(x, _starts(starts), _window(starts, indexer),
                                allow_negative_indices=False)
        mask = lax.pad(lax.full(val.shape, True, np.bool_), np.bool_(False), spread)
        val = lax.select(mask, lax.pad(val, np.zeros((), x.dtype), spread), old)
    return lax.dynamic_update_slice(x, val, _starts(starts), allow_negative_indices=False)


# JAX: jax/_src/state/discharge.py _discharge_rules — the rules for primitives whose
# operands may include refs: rule(in_vals, is_ref, **params) -> (outs, new ref values), where
# new ref values has one entry per operand (None: unchanged or not a ref).
discharge_rules: dict[core.Primitive, Callable] = {}


def _get_discharge(in_vals, is_ref, *, indexer):
    x, *starts = in_vals
    return _read(x, starts, indexer), [None] * len(in_vals)


def _swap_discharge(in_vals, is_ref, *, indexer):
    x, val, *starts = in_vals
    old = _read(x, starts, indexer)
    return old, [_write(x, val, starts, indexer)] + [None] * (len(in_vals) - 1)


def _addupdate_discharge(in_vals, is_ref, *, indexer):
    x, val, *starts = in_vals
    new = lax.add(_read(x, starts, indexer), val)
    return [], [_write(x, new, starts, indexer)] + [None] * (len(in_vals) - 1)


discharge_rules[get_p] = _get_discharge
discharge_rules[swap_p] = _swap_discharge
discharge_rules[addupdate_p] = _addupdate_discharge


def _eval_discharged(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list:
    """Evaluate `jaxpr` (under the current trace) with the contents of each ref invar given in
    `args`; return its outputs followed by the final contents of its ref invars."""
    env: dict[core.Var, Any] = {}
    refs: set[core.Var] = set()

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    for v, x in safe_zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in safe_zip(jaxpr.invars, args):
        env[v] = x
        if isinstance(v.aval, AbstractRef):
            refs.add(v)
    for eqn in jaxpr.eqns:
        is_ref = [isinstance(v, core.Var) and v in refs for v in eqn.invars]
        in_vals = [read(v) for v in eqn.invars]
        rule = discharge_rules.get(eqn.primitive)
        if rule is not None and (any(is_ref) or eqn.primitive in always_discharge):
            outs, new_refs = rule(in_vals, is_ref, **eqn.params)
            for v, new in zip(eqn.invars, new_refs):
                if new is not None:
                    env[v] = new
        elif any(is_ref):
            raise NotImplementedError(
                f"discharge_state: no discharge rule for '{eqn.primitive.name}', which is "
                "given a ref operand")
        else:
            outs = eqn.primitive.bind(*in_vals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, x in safe_zip(eqn.outvars, outs):
            if not isinstance(v, DropVar):
                env[v] = x
            if isinstance(v.aval, AbstractRef):
                raise NotImplementedError("discharge_state: equations returning refs are "
                                          "not supported")
    return [read(v) for v in jaxpr.outvars] + [env[v] for v in jaxpr.invars if v in refs]


# Primitives whose discharge rule runs even without ref operands: the control-flow ones (their
# bodies may hold equations that must be rewritten, e.g. Pallas' program_id), and any that a
# caller registers (minijax/experimental/pallas/pallas_call.py: program_id_p).
always_discharge: set[core.Primitive] = set()


# JAX: jax/_src/state/discharge.py discharge_state — differs: discharges every ref input
def discharge_state(jaxpr: Jaxpr, consts: Sequence[Any]) -> tuple[Jaxpr, list]:
    """The pure version of `jaxpr`: each `Ref{T}` input becomes a `T` input, and the final
    contents of the ref inputs are appended, in order, to the outputs.

    Returns (jaxpr, consts). Raises NotImplementedError for a primitive given a ref operand
    that has no discharge rule.
    """
    in_avals = [v.aval.inner_aval if isinstance(v.aval, AbstractRef) else v.aval
                for v in jaxpr.invars]
    new, new_consts, _ = pe.trace_to_jaxpr_dynamic(
        lambda *args: _eval_discharged(jaxpr, consts, args), in_avals,
        fun_name="discharged", purpose="discharge_state")
    return new, new_consts


def _discharged_closed(closed: ClosedJaxpr, is_ref: Sequence[bool]) -> ClosedJaxpr:
    """A const-free ClosedJaxpr: `closed` discharged, its ref inputs replaced by values."""
    del is_ref
    jaxpr, consts = discharge_state(closed.jaxpr, closed.consts)
    return ClosedJaxpr(jaxpr, consts)


def _inner(aval):
    return aval.inner_aval if isinstance(aval, AbstractRef) else aval


# JAX: jax/_src/lax/control_flow/conditionals.py _cond_state_discharge_rule
def _cond_discharge(in_vals, is_ref, *, branches):
    index, *ops = in_vals
    refs = is_ref[1:]
    new = [_discharged_closed(b, refs) for b in branches]
    # A re-traced branch may close over values of the enclosing trace: pass every branch's
    # consts to all branches as leading operands (each branch ignores the others').
    all_consts = [c for b in new for c in b.consts]
    n_before = 0
    hoisted = []
    for b in new:
        before = [core.Var(core.get_aval(c)) for c in all_consts[:n_before]]
        after = [core.Var(core.get_aval(c)) for c in all_consts[n_before + len(b.consts):]]
        j = b.jaxpr
        hoisted.append(ClosedJaxpr(Jaxpr([], before + j.constvars + after + j.invars,
                                         j.outvars, j.eqns), []))
        n_before += len(b.consts)
    outs = cond_p.bind(index, *all_consts, *ops, branches=tuple(hoisted))
    n_out = len(branches[0].out_avals)
    outs, finals = outs[:n_out], iter(outs[n_out:])
    return outs, [None] + [next(finals) if r else None for r in refs]


def _move_refs_to_carry(consts, is_ref_consts):
    plain = [c for c, r in zip(consts, is_ref_consts) if not r]
    refs = [c for c, r in zip(consts, is_ref_consts) if r]
    return plain, refs


def _merge(plain, refs, is_ref_consts):
    plain, refs = iter(plain), iter(refs)
    return [next(refs) if r else next(plain) for r in is_ref_consts]


def _trace_closed(fun, avals, name) -> ClosedJaxpr:
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(fun, list(avals), fun_name=name,
                                                 purpose="discharge_state")
    return ClosedJaxpr(jaxpr, consts)


# JAX: jax/_src/lax/control_flow/loops.py _while_partial_discharge_rule — differs: refs
# only as body consts
def _while_discharge(in_vals, is_ref, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cref, bref, carry_ref = split_list(is_ref, [cond_nconsts, body_nconsts])
    if any(cref) or any(carry_ref):
        raise NotImplementedError("discharge_state: a while loop whose condition reads a ref, "
                                  "or that carries a ref, is not supported")
    cconsts, bconsts, carry = split_list(in_vals, [cond_nconsts, body_nconsts])
    plain, rvals = _move_refs_to_carry(bconsts, bref)
    n_r = len(rvals)
    carry_avals = [core.get_aval(x) for x in carry]
    r_avals = [core.get_aval(x) for x in rvals]
    p_avals = [core.get_aval(x) for x in plain]
    c_avals = [core.get_aval(x) for x in cconsts]

    def body(*args):
        p, r, c = split_list(list(args), [len(plain), n_r])
        outs = _eval_discharged(body_jaxpr.jaxpr, body_jaxpr.consts, _merge(p, r, bref) + c)
        new_c, new_r = split_list(outs, [len(carry)])
        return new_r + new_c

    def cond(*args):
        cc, _, c = split_list(list(args), [cond_nconsts, n_r])
        return _eval_discharged(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cc, *c])

    body_c = _trace_closed(body, p_avals + r_avals + carry_avals, "while_body")
    cond_c = _trace_closed(cond, c_avals + r_avals + carry_avals, "while_cond")
    body_c = ClosedJaxpr(pe.convert_constvars_jaxpr(body_c.jaxpr), []), body_c.consts
    cond_c = ClosedJaxpr(pe.convert_constvars_jaxpr(cond_c.jaxpr), []), cond_c.consts
    (bj, bc), (cj, cc) = body_c, cond_c
    outs = while_p.bind(*cc, *cconsts, *bc, *plain, *rvals, *carry, cond_jaxpr=cj,
                        body_jaxpr=bj, cond_nconsts=len(cc) + cond_nconsts,
                        body_nconsts=len(bc) + len(plain))
    finals, outs = split_list(outs, [n_r])
    finals = iter(finals)
    new = [None] * cond_nconsts + [next(finals) if r else None for r in bref]
    return outs, new + [None] * len(carry)


# JAX: jax/_src/lax/control_flow/loops.py _scan_state_partial_discharge_rule — differs:
# refs only as consts
def _scan_discharge(in_vals, is_ref, *, reverse, length, jaxpr, num_consts, num_carry, unroll):
    kref, rest = is_ref[:num_consts], is_ref[num_consts:]
    if any(rest):
        raise NotImplementedError("discharge_state: a scan that carries or scans over a ref "
                                  "is not supported")
    consts, carry, xs = split_list(in_vals, [num_consts, num_carry])
    plain, rvals = _move_refs_to_carry(consts, kref)
    n_r = len(rvals)
    x_avals = [core.get_aval(x) for x in xs]
    x_avals = [a.update(shape=a.shape[1:]) for a in x_avals]
    avals = ([core.get_aval(x) for x in plain] + [core.get_aval(x) for x in rvals]
             + [core.get_aval(x) for x in carry] + x_avals)

    def body(*args):
        p, r, c, x = split_list(list(args), [len(plain), n_r, num_carry])
        outs = _eval_discharged(jaxpr.jaxpr, jaxpr.consts, _merge(p, r, kref) + c + x)
        new_c, ys, new_r = split_list(outs, [num_carry, len(jaxpr.out_avals) - num_carry])
        return new_r + new_c + ys

    body_c = _trace_closed(body, avals, "scan_body")
    bc = body_c.consts
    bj = ClosedJaxpr(pe.convert_constvars_jaxpr(body_c.jaxpr), [])
    outs = scan_p.bind(*bc, *plain, *rvals, *carry, *xs, reverse=reverse, length=length,
                       jaxpr=bj, num_consts=len(bc) + len(plain), num_carry=n_r + num_carry,
                       unroll=unroll)
    finals, outs = split_list(outs, [n_r])
    finals = iter(finals)
    return outs, [next(finals) if r else None for r in kref] + [None] * len(rest)


def _register_control_flow() -> None:
    discharge_rules[cond_p] = _cond_discharge
    discharge_rules[while_p] = _while_discharge
    discharge_rules[scan_p] = _scan_discharge
    always_discharge.update((cond_p, while_p, scan_p))


_register_control_flow()


# JAX: jax/_src/state/discharge.py run_state — differs: a Python function, not a primitive
def run_state(f: Callable) -> Callable:
    """`run_state(f)(init)`: call `f` on refs holding `init` (a pytree of arrays); return their
    final contents. `f` reads and writes the refs and returns nothing."""

    def wrapped(init):
        flat, tree = tree_flatten(init)
        avals = [AbstractRef(core.get_aval(x).strip_weak_type()) for x in flat]

        def flat_f(*refs):
            f(tree_unflatten(tree, list(refs)))
            return []

        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(flat_f, avals, fun_name="run_state")
        pure, pconsts = discharge_state(jaxpr, consts)
        return tree_unflatten(tree, core.eval_jaxpr(pure, pconsts, *flat))
    return wrapped
