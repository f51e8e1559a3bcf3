"""Solution: a FLOP-counting jaxpr interpreter, checked against XLA (chapter 30).

`count_flops(jaxpr)` reads a jaxpr, minijax's or JAX's (they have the same fields:
`eqn.primitive.name`, `eqn.invars`, `eqn.outvars`, `eqn.params`, `var.aval.shape`), and returns
`(flops, transcendentals)` as XLA's `cost_analysis()` counts them for the compiled program:

* one FLOP per output element for the primitives in ELEMENTWISE, one transcendental per
  output element for those in TRANSCENDENTAL, nothing for those in FREE;
* `logistic`: 3 FLOPs and 1 transcendental per element (XLA expands it to 1 / (1 + exp(-x)));
* `integer_pow` with exponent `y`: the multiplications of binary exponentiation per element
  (`x**2`: 1, `x**3`: 2, `x**4`: 2, `x**5`: 3);
* reductions (REDUCTIONS) of `n` input elements to `m` outputs: `n - m` FLOPs;
* `dot_general`: `2 * size(out) * K`, K the product of the lhs's contracted dimensions;
* calls (CALLS: the inner jaxpr is `params["jaxpr"]` or `params["call_jaxpr"]`, a ClosedJaxpr):
  the inner jaxpr's cost; `cond`: the maximum over `params["branches"]`, flops and
  transcendentals each on its own;
* `scan`: per iteration the body (`params["jaxpr"]`) plus 2 FLOPs of loop counter, times
  `params["length"]`, or times 1 with `xla_loops=True` (XLA counts a loop body once);
* `while`: with `xla_loops=True`, `params["cond_jaxpr"]` plus `params["body_jaxpr"]` once;
  without it the trip count is unknown: raise ValueError naming `while`.
Any other primitive: raise ValueError naming it.
"""

from __future__ import annotations

import numpy as np

ELEMENTWISE = {"add", "sub", "mul", "div", "max", "min", "neg", "abs", "sign", "select_n",
               "gt", "ge", "lt", "le", "eq", "ne", "and", "or", "not", "clamp",
               "convert_element_type", "floor", "ceil", "round", "rem"}
TRANSCENDENTAL = {"exp", "log", "tanh", "sqrt", "rsqrt", "sin", "cos", "tan", "log1p",
                  "expm1", "pow", "erf", "atan2", "exp2", "cbrt"}
FREE = {"broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice",
        "concatenate", "iota", "stop_gradient", "copy", "dynamic_slice",
        "dynamic_update_slice", "rev", "pad"}
REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"}
CALLS = {"jit", "pjit", "custom_jvp_call", "custom_vjp_call", "checkpoint", "remat"}


def size(v) -> int:
    """The number of elements of a jaxpr variable (or literal)."""
    return int(np.prod(v.aval.shape))


def multiplies(n: int) -> int:
    """The multiplications binary exponentiation takes for x**n (n >= 1)."""
    return n.bit_length() - 1 + bin(n).count("1") - 1


def dot_general_flops(eqn) -> int:
    """2 * size(out) * K for a `dot_general` equation."""
    (contract, _), _ = eqn.params["dimension_numbers"]
    k = int(np.prod([eqn.invars[0].aval.shape[d] for d in contract]))
    return 2 * size(eqn.outvars[0]) * k


def count_flops(jaxpr, xla_loops: bool = False) -> tuple[int, int]:
    """(flops, transcendentals) of one run of `jaxpr` (a Jaxpr, not a ClosedJaxpr)."""
    flops = trans = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        n = size(eqn.outvars[0]) if eqn.outvars else 0
        f = t = 0
        if name in ELEMENTWISE:
            f = n
        elif name in TRANSCENDENTAL:
            t = n
        elif name == "logistic":  # 1 / (1 + exp(-x)) to XLA
            f, t = 3 * n, n
        elif name == "integer_pow":
            f = multiplies(abs(eqn.params["y"])) * n
        elif name in REDUCTIONS:
            f = size(eqn.invars[0]) - n
        elif name == "dot_general":
            f = dot_general_flops(eqn)
        elif name in CALLS:
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            f, t = count_flops(getattr(inner, "jaxpr", inner), xla_loops)
        elif name == "cond":
            costs = [count_flops(b.jaxpr, xla_loops) for b in eqn.params["branches"]]
            f, t = max(c[0] for c in costs), max(c[1] for c in costs)
        elif name == "scan":
            body_f, body_t = count_flops(eqn.params["jaxpr"].jaxpr, xla_loops)
            trips = 1 if xla_loops else eqn.params["length"]
            f, t = trips * (body_f + 2), trips * body_t
        elif name == "while":
            if not xla_loops:
                raise ValueError("count_flops: the trip count of a while loop is not in its "
                                 "jaxpr; count it as XLA does with xla_loops=True")
            cf, ct = count_flops(eqn.params["cond_jaxpr"].jaxpr, xla_loops)
            bf, bt = count_flops(eqn.params["body_jaxpr"].jaxpr, xla_loops)
            f, t = cf + bf, ct + bt
        elif name not in FREE:
            raise ValueError(f"count_flops: no rule for the primitive {name!r}")
        flops, trans = flops + f, trans + t
    return flops, trans
