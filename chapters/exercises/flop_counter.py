"""Exercise: a FLOP-counting jaxpr interpreter, checked against XLA (chapter 30).

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

Fill in the three functions that raise NotImplementedError; the tests compare your counts
with `cost_analysis()` of the programs minijax and JAX compile.
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
    raise NotImplementedError("multiplies")


def dot_general_flops(eqn) -> int:
    """2 * size(out) * K for a `dot_general` equation."""
    raise NotImplementedError("dot_general_flops")


def count_flops(jaxpr, xla_loops: bool = False) -> tuple[int, int]:
    """(flops, transcendentals) of one run of `jaxpr` (a Jaxpr, not a ClosedJaxpr)."""
    raise NotImplementedError("count_flops")
