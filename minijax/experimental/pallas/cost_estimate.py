"""`pl.estimate_cost`: a `CostEstimate` for a function, counted from its jaxpr, to hand to
`pallas_call(cost_estimate=...)`. Each primitive with a rule adds to the count: elementwise
binary and cheap unary ops one flop per element, transcendental ones (exp, tanh, sqrt...) one
transcendental per element, `integer_pow` its squarings and multiplies, `dot_general` two flops
per multiply-add; `jit`, `custom_vjp_call` and `run_state` count their inner jaxprs; every
other primitive (reductions, reshapes, control flow...) counts nothing, as in JAX. The bytes
accessed are the inputs' and outputs' sizes. Mirrors jax/_src/pallas/cost_estimate.py.
"""

from __future__ import annotations

import math

from minijax import core
from minijax.experimental.pallas.blocks import CostEstimate
from minijax.interpreters import partial_eval as pe
from minijax.tree_util import tree_flatten, tree_unflatten

_BINARY = frozenset({"add", "mul", "sub", "div", "min", "max", "or", "and", "xor"})
_UNARY = frozenset({"neg", "floor", "ceil", "round", "not"})
_TRANSCENDENTAL = frozenset({"cos", "sin", "tan", "sinh", "cosh", "tanh", "acos", "asin", "atan",
                             "exp", "log", "logistic", "sqrt"})
_INNER = {"jit": "jaxpr", "custom_vjp_call": "call_jaxpr", "run_state": "jaxpr"}


def _size(aval) -> int:
    return math.prod(aval.shape)


def _dot_flops(lhs, rhs, dimension_numbers) -> int:
    (lc, rc), (_, rb) = dimension_numbers
    contracted = math.prod(lhs.shape[d] for d in lc)
    free_lhs = math.prod(d for i, d in enumerate(lhs.shape) if i not in lc)
    free_rhs = math.prod(d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb)
    return 2 * contracted * free_lhs * free_rhs


def _eqn_cost(eqn) -> tuple[int, int]:
    """(flops, transcendentals) of one equation."""
    name, ins = eqn.primitive.name, [v.aval for v in eqn.invars]
    if name in _BINARY:
        return _size(eqn.outvars[0].aval), 0
    if name in _UNARY:
        return _size(ins[0]), 0
    if name in _TRANSCENDENTAL:
        return 0, _size(ins[0])
    if name == "integer_pow":
        y = eqn.params["y"]
        per = 0 if y in (0, 1) else math.floor(math.log(y, 2)) + y.bit_count()
        return _size(ins[0]) * per, 0
    if name == "dot_general":
        return _dot_flops(ins[0], ins[1], eqn.params["dimension_numbers"]), 0
    if name in _INNER:
        inner = eqn.params[_INNER[name]]
        return _jaxpr_cost(getattr(inner, "jaxpr", inner))
    return 0, 0


def _jaxpr_cost(jaxpr) -> tuple[int, int]:
    flops = transcendentals = 0
    for eqn in jaxpr.eqns:
        f, t = _eqn_cost(eqn)
        flops, transcendentals = flops + f, transcendentals + t
    return flops, transcendentals


# JAX: jax/_src/pallas/cost_estimate.py estimate_cost
def estimate_cost(fun, *args, **kwargs) -> CostEstimate:
    """The `CostEstimate` of `fun(*args, **kwargs)`: `args` are arrays or anything with
    `.shape` and `.dtype` (`ShapeDtypeStruct`), pytrees of them; `kwargs` are passed as they
    are (static). Traced once, nothing computed. E.g. `tanh(x @ w).sum()` for x f32[8,16] and
    w f32[16,4] costs 1024 flops, 32 transcendentals and 772 bytes (512 + 256 in, 4 out).
    Mirrors jax/_src/pallas/cost_estimate.py: estimate_cost."""
    flat, tree = tree_flatten(args)
    avals = [core.ShapedArray(tuple(a.shape), a.dtype) for a in flat]

    def flat_fun(*xs):
        out, _ = tree_flatten(fun(*tree_unflatten(tree, list(xs)), **kwargs))
        return out
    jaxpr, _, out_avals = pe.trace_to_jaxpr_dynamic(flat_fun, avals, fun_name="cost_estimate")
    flops, transcendentals = _jaxpr_cost(jaxpr)
    nbytes = sum(_size(a) * a.dtype.itemsize for a in (*avals, *out_avals))
    return CostEstimate(flops=int(flops), transcendentals=int(transcendentals),
                        bytes_accessed=int(nbytes))
