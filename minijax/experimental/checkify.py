"""checkify: errors as values, so that checks survive `jit` and `vmap`.

`checkify(f, errors=...)(*args)` returns `(err, out)`. It traces `f` to a jaxpr and evaluates
it equation by equation under the current trace (eagerly, under `jit`, under `vmap`), adding
for each equation the checks of the chosen error sets: `check(pred, msg)` calls
(`user_checks`), NaNs made by a primitive (`nan_checks`), division by zero
(`div_checks`), out-of-bounds `dynamic_slice`/`dynamic_update_slice`/`gather` indices
(`index_checks`). The first failure wins: `err` carries a flag, the index of its message and
the values the message prints. `err.get()` is the message (None if nothing failed),
`err.throw()` raises it as `JaxRuntimeError`.
Mirrors jax/_src/checkify.py — differs: an interpreter over the traced jaxpr instead of a
`CheckifyTrace`; the jaxprs of `jit` are inlined (checked inside); `cond`, `scan` and
`while` are rebuilt with the error as an extra output (a loop carries it), as JAX's rules
for them do. Taught in chapters/15-debugging.md.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from minijax import core, lax, numpy as jnp
from minijax.array import Array
from minijax.interpreters import ad, batching, partial_eval as pe
from minijax.tree_util import register_pytree_node, tree_flatten, tree_unflatten

__all__ = ["Error", "JaxRuntimeError", "all_checks", "automatic_checks", "check", "checkify",
           "div_checks", "float_checks", "index_checks", "nan_checks", "user_checks"]


# JAX: jax/_src/checkify.py JaxRuntimeError
class JaxRuntimeError(ValueError):
    """A failed check, raised by `Error.throw()` (and by `check` outside `checkify`)."""


# JAX: jax/_src/checkify.py FailedCheckError, NaNError, DivisionByZeroError, OOBError — the
# error sets are sets of these classes, combined with `|`
class FailedCheckError:
    pass


class NaNError:
    pass


class DivisionByZeroError:
    pass


class OOBError:
    pass


user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
div_checks = frozenset({DivisionByZeroError})
index_checks = frozenset({OOBError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# JAX: jax/_src/checkify.py Error
class Error:
    """The outcome of a checkified function: `err` (bool, batched under vmap), `code` (int32:
    which message), the message formatters and their payloads (the values they print)."""

    def __init__(self, err, code, messages: tuple, payloads: tuple) -> None:
        self.err, self.code = err, code
        self.messages, self.payloads = messages, payloads

    def get(self) -> str | None:
        """The failure's message, or None. Under vmap, one line per failing mapped index
        (`at mapped index i: ...`, `i, j` under two vmaps), as JAX's BatchedError prints.
        Needs concrete values (call it outside `jit`)."""
        err, code = np.asarray(self.err), np.asarray(self.code)
        lines = []
        for idx in np.ndindex(err.shape):
            if err[idx]:
                c = int(code[idx])
                msg = self.messages[c](*[np.asarray(p)[idx] for p in self.payloads[c]])
                if not idx:
                    return msg
                lines.append(f"at mapped index {', '.join(map(str, idx))}: {msg}")
        return "\n".join(lines) if lines else None

    def get_exception(self) -> JaxRuntimeError | None:
        msg = self.get()
        return None if msg is None else JaxRuntimeError(msg)

    def throw(self) -> None:
        """Raise JaxRuntimeError with the message, if a check failed."""
        exc = self.get_exception()
        if exc is not None:
            raise exc

    def __repr__(self) -> str:
        return f"Error({self.get()})"


register_pytree_node(
    Error,
    lambda e: ((e.err, e.code, *[p for ps in e.payloads for p in ps]),
               (e.messages, tuple(len(ps) for ps in e.payloads))),
    lambda aux, leaves: Error(leaves[0], leaves[1], aux[0], _split(leaves[2:], aux[1])))


def _split(flat, sizes) -> tuple:
    out, i = [], 0
    for n in sizes:
        out.append(tuple(flat[i:i + n]))
        i += n
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# check and its primitive
# ---------------------------------------------------------------------------------------------

_functionalizing = [0]  # > 0 while checkify traces a function: check_p may be staged then


# JAX: jax/_src/checkify.py check
def check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Fail with `msg.format(*fmt_args, **fmt_kwargs)` where `pred` (a bool array) is not all
    true. Inside `checkify` the failure becomes its Error; outside, eagerly, it raises
    JaxRuntimeError; staged (under jit) outside `checkify`, ValueError. The format arguments
    must be arrays (TypeError otherwise)."""
    flat, in_tree = tree_flatten((fmt_args, fmt_kwargs))
    for x in flat:
        if not isinstance(x, (core.Tracer, np.ndarray, np.generic, Array)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {x!r} of type {type(x)}.")
    if not _functionalizing[0] and core.current_trace() is not core.eval_trace:
        raise ValueError(_NOT_FUNCTIONALIZED)  # staged outside checkify: nowhere to go
    check_p.bind(pred, *flat, msg=msg, in_tree=in_tree, batch_ndims=0)


def _check_message(msg: str, in_tree, vals) -> str:
    args, kwargs = tree_unflatten(in_tree, list(vals))
    return msg.format(*args, **kwargs) + " (`check` failed)"


_NOT_FUNCTIONALIZED = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This probably "
    "means you tried to stage (jit/scan/pmap/...) a `check` without functionalizing it "
    "through `checkify.checkify`.")


def _first_failure(jnp, pred, fmt, batch_ndims: int):
    """(failed, the format values of the last failing example, as JAX's _reduce_any_error
    picks): `batch_ndims` leading axes of every operand are vmapped axes (one example each),
    the rest of `pred` must be all true."""
    if not batch_ndims:
        return ~jnp.all(pred), tuple(fmt)
    ok = jnp.all(pred, axis=tuple(range(batch_ndims, pred.ndim))).reshape(-1)
    i = ok.size - 1 - jnp.argmax(jnp.flip(~ok))
    return ~jnp.all(ok), tuple(x.reshape((-1, *x.shape[batch_ndims:]))[i] for x in fmt)


def _check_impl(pred, *fmt, msg, in_tree, batch_ndims):
    failed, fmt = _first_failure(np, np.asarray(pred), [np.asarray(x) for x in fmt],
                                 batch_ndims)
    if failed:
        raise JaxRuntimeError(_check_message(msg, in_tree, fmt))
    return []


def _check_abstract_eval(*avals, msg, in_tree, batch_ndims):
    return []


def _check_jvp(primals, tangents, **params):
    return check_p.bind(*primals, **params), []


def _check_batch_rule(vals, dims, *, axis_size, batch_ndims, **params):
    """Every operand gets the vmapped axis in front (one more leading example axis)."""
    vals = [batching.bdim_at_front(x, d, axis_size) for x, d in zip(vals, dims)]
    return check_p.bind(*vals, batch_ndims=batch_ndims + 1, **params), []


# JAX: jax/_src/checkify.py check_p — differs: the operands are the predicate and the format
# values (not an Error); vmap adds leading example axes (`batch_ndims`) instead of batching an
# Error; the last failing example's values are the ones printed, as in JAX
check_p = core.Primitive("check")
check_p.multiple_results = True
check_p.def_impl(_check_impl)
check_p.def_abstract_eval(_check_abstract_eval)
ad.primitive_jvps[check_p] = _check_jvp
batching.primitive_batchers[check_p] = _check_batch_rule


# ---------------------------------------------------------------------------------------------
# checkify: the interpreter
# ---------------------------------------------------------------------------------------------

class _ErrorState:
    """The error being built while the jaxpr is evaluated: the first failure wins."""

    def __init__(self) -> None:
        self.jnp = jnp
        self.err, self.code = jnp.asarray(False), jnp.asarray(0, jnp.int32)
        self.messages: list[Callable] = []
        self.payloads: list[tuple] = []

    def add(self, failed, message: Callable, payload=()) -> None:
        jnp = self.jnp
        first = failed & ~self.err
        self.code = jnp.where(first, jnp.int32(len(self.messages)), self.code)
        self.err = self.err | failed
        self.messages.append(message)
        self.payloads.append(tuple(jnp.where(first, p, jnp.zeros_like(p)) for p in payload))

    def to_error(self) -> Error:
        return Error(self.err, self.code, tuple(self.messages), tuple(self.payloads))

    def absorb(self, err, code, payloads, messages) -> None:
        """Add the error a control-flow body produced (its own messages, codes from 0)."""
        jnp = self.jnp
        first = err & ~self.err
        self.code = jnp.where(first, code + jnp.int32(len(self.messages)), self.code)
        self.err = self.err | err
        self.messages.extend(messages)
        self.payloads.extend(tuple(jnp.where(first, p, jnp.zeros_like(p)) for p in ps)
                             for ps in payloads)


# ---------------------------------------------------------------------------------------------
# checks inside cond, scan and while_loop: the error travels out as values
# ---------------------------------------------------------------------------------------------

def _discover(closed: core.ClosedJaxpr, errors, in_avals) -> tuple[list, list]:
    """The messages the checks of `closed` add, in order, and the avals of their payloads
    (one tracing of the checked body, to size the error a loop carries)."""
    box: dict = {}

    def fn(*args):
        sub = _ErrorState()
        _eval_checked(closed.jaxpr, closed.consts, list(args), sub, errors)
        box["messages"], box["sizes"] = sub.messages, [len(ps) for ps in sub.payloads]
        return [p for ps in sub.payloads for p in ps]

    jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(fn, list(in_avals), purpose="checkify")
    return box["messages"], list(_split([v.aval for v in jaxpr.outvars], box["sizes"]))


def _no_error(payload_avals) -> tuple:
    """(err, code, payloads): nothing failed yet, payloads zero."""
    return (jnp.asarray(False), jnp.asarray(0, jnp.int32),
            [tuple(jnp.zeros(a.shape, a.dtype) for a in ps) for ps in payload_avals])


def _merge(carried: tuple, sub: _ErrorState, offset: int) -> tuple:
    """`carried` (err, code, payloads over all messages) after the checks of `sub`, whose
    messages are number `offset` on; the first failure wins."""
    jnp = sub.jnp
    err, code, payloads = carried
    first = sub.err & ~err
    payloads = list(payloads)
    for j, ps in enumerate(sub.payloads):
        payloads[offset + j] = tuple(jnp.where(first, p, q)
                                     for p, q in zip(ps, payloads[offset + j]))
    return err | sub.err, jnp.where(first, sub.code + jnp.int32(offset), code), payloads


def _run_checked(closed: core.ClosedJaxpr, args, errors) -> tuple[list, _ErrorState]:
    sub = _ErrorState()
    return _eval_checked(closed.jaxpr, closed.consts, list(args), sub, errors), sub


# JAX: jax/_src/checkify.py cond_error_check
def _cond_checked(state: _ErrorState, eqn, ins, errors) -> list:
    branches = eqn.params["branches"]
    index, ops = ins[0], ins[1:]
    found = [_discover(b, errors, [core.get_aval(x) for x in ops]) for b in branches]
    offsets = np.cumsum([0] + [len(m) for m, _ in found]).tolist()
    all_payloads = [ps for _, p in found for ps in p]

    def branch(b):
        def fn(*xs):
            outs, sub = _run_checked(branches[b], xs, errors)
            return _merge(_no_error(all_payloads), sub, offsets[b]), outs
        return fn

    (err, code, payloads), outs = lax.switch(index, [branch(b) for b in range(len(branches))],
                                             *ops)
    state.absorb(err, code, payloads, [m for ms, _ in found for m in ms])
    return outs


# JAX: jax/_src/checkify.py scan_error_check
def _scan_checked(state: _ErrorState, eqn, ins, errors) -> list:
    p = eqn.params
    body, nc, ncarry = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, init, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]
    messages, payload_avals = _discover(body, errors, body.in_avals)

    def step(carry, x):
        carried, c = carry
        outs, sub = _run_checked(body, [*consts, *c, *x], errors)
        return (_merge(carried, sub, 0), outs[:ncarry]), outs[ncarry:]

    ((err, code, payloads), carry), ys = lax.scan(
        step, (_no_error(payload_avals), list(init)), list(xs), length=p["length"],
        reverse=p["reverse"])
    state.absorb(err, code, payloads, messages)
    return [*carry, *ys]


# JAX: jax/_src/checkify.py while_loop_error_check
def _while_checked(state: _ErrorState, eqn, ins, errors) -> list:
    """The condition's checks run before the loop and after each trip (in the body), so the
    loop carries the errors of both; the loop's own condition only computes the predicate."""
    p = eqn.params
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]
    cc, bc, init = (ins[:p["cond_nconsts"]], ins[p["cond_nconsts"]:][:p["body_nconsts"]],
                    ins[p["cond_nconsts"] + p["body_nconsts"]:])
    carry_avals = [core.get_aval(x) for x in init]
    c_msgs, c_avals = _discover(cond, errors, [*cond.in_avals[:len(cc)], *carry_avals])
    b_msgs, b_avals = _discover(body, errors, [*body.in_avals[:len(bc)], *carry_avals])
    nc = len(c_msgs)
    _, sub = _run_checked(cond, [*cc, *init], errors)
    first = _merge(_no_error([*c_avals, *b_avals]), sub, 0)

    def trip(val):
        carried, c = val
        new, sub_b = _run_checked(body, [*bc, *c], errors)
        _, sub_c = _run_checked(cond, [*cc, *new], errors)
        return _merge(_merge(carried, sub_b, nc), sub_c, 0), new

    def keep_going(val):  # the predicate only: no checks (they ran in the body)
        return _run_checked(cond, [*cc, *val[1]], frozenset())[0][0]

    (err, code, payloads), carry = lax.while_loop(keep_going, trip, (first, list(init)))
    state.absorb(err, code, payloads, [*c_msgs, *b_msgs])
    return carry


_control_flow_checks = {"cond": _cond_checked, "scan": _scan_checked,
                        "while": _while_checked}


def _oob(state: _ErrorState, shape, starts, sizes, axes) -> None:
    """Index checks: start `starts[k]` of a slice of `sizes[k]` along axis `axes[k]`."""
    jnp = state.jnp
    if not starts:
        return
    bad = jnp.stack([(s < 0) | (s > shape[a] - n) for s, n, a in zip(starts, sizes, axes)])
    k = jnp.argmax(bad.astype(jnp.int32))
    index = jnp.stack([jnp.asarray(s, jnp.int32) for s in starts])[k]
    axis = jnp.asarray(np.array(axes, np.int32))[k]
    state.add(bad.any(), lambda i, a, shape=tuple(shape): (
        f"out-of-bounds indexing for array of shape {shape}: index {int(i)} is out of bounds "
        f"for axis {int(a)} with size {shape[int(a)]}. "), (index, axis))


def _checks_for(state: _ErrorState, eqn, ins, outs, errors) -> None:
    jnp, name = state.jnp, eqn.primitive.name
    if NaNError in errors and name != "check":
        nan = [jnp.isnan(o).any() for o in outs if np.dtype(o.dtype).kind in "fc"]
        if nan:
            state.add(jnp.stack(nan).any(), lambda n=name: f"nan generated by primitive: {n}.")
    if DivisionByZeroError in errors and name == "div":  # any dtype; not rem, as in JAX
        state.add((ins[1] == 0).any(), lambda: "division by zero")
    if OOBError in errors and name in ("dynamic_slice", "dynamic_update_slice"):
        operand = ins[0]
        if name == "dynamic_slice":
            starts, sizes = ins[1:], eqn.params["slice_sizes"]
        else:
            starts, sizes = ins[2:], ins[1].shape
        _oob(state, operand.shape, list(starts), list(sizes), list(range(operand.ndim)))
    if OOBError in errors and name == "gather":
        operand, indices = ins
        dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
        starts = [indices[..., k] for k in range(indices.shape[-1])]
        axes = list(dn.start_index_map)
        _oob(state, operand.shape, [s.min() for s in starts] + [s.max() for s in starts],
             [sizes[a] for a in axes] * 2, axes * 2)


def _eval_checked(jaxpr: core.Jaxpr, consts, args, state: _ErrorState, errors) -> list:
    env: dict = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if eqn.primitive.name == "jit":  # inlined, so that its checks are seen
            inner = eqn.params["jaxpr"]
            outs = _eval_checked(inner.jaxpr, inner.consts, ins, state, errors)
        elif eqn.primitive.name in _control_flow_checks:
            outs = _control_flow_checks[eqn.primitive.name](state, eqn, ins, errors)
        elif eqn.primitive is check_p:
            outs = []
            if FailedCheckError in errors:
                msg, in_tree = eqn.params["msg"], eqn.params["in_tree"]
                failed, fmt = _first_failure(state.jnp, ins[0], ins[1:],
                                             eqn.params["batch_ndims"])
                state.add(failed, lambda *v, msg=msg, t=in_tree: _check_message(msg, t, v), fmt)
        else:
            for p in eqn.params.values():
                if any(e.primitive is check_p for j in core.jaxprs_in_param(p)
                       for e in j.eqns):
                    raise NotImplementedError(
                        f"checkify: a check inside '{eqn.primitive.name}' is not supported "
                        "in minijax (inside jit, cond, scan and while_loop it is) — see "
                        "chapters/15-debugging.md")
            outs = eqn.primitive.bind(*ins, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            _checks_for(state, eqn, ins, outs, errors)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


# JAX: jax/_src/checkify.py checkify
def checkify(f: Callable, errors: frozenset = user_checks) -> Callable:
    """`checkify(f, errors)(*args) -> (Error, f(*args))`, with the checks of `errors` (a union
    of `user_checks`, `nan_checks`, `div_checks`, `index_checks`; `float_checks`,
    `automatic_checks`, `all_checks`). Composes with `jit` and `vmap` both ways round."""
    def checked(*args, **kwargs) -> tuple[Error, Any]:
        flat, in_tree = tree_flatten((args, kwargs))
        out_tree = []

        def flat_f(*xs):
            a, k = tree_unflatten(in_tree, list(xs))
            out, tree = tree_flatten(f(*a, **k))
            out_tree.append(tree)
            return out

        _functionalizing[0] += 1
        try:
            jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
                flat_f, [core.get_aval(x) for x in flat], purpose="checkify")
        finally:
            _functionalizing[0] -= 1
        state = _ErrorState()
        outs = _eval_checked(jaxpr, consts, flat, state, errors)
        return state.to_error(), tree_unflatten(out_tree[0], outs)
    return checked
