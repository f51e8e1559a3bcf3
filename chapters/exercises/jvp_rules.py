"""Exercise: jvp rules (chapter 04).

A jvp rule gets the primal operands and their tangents and returns the primal output and its
tangent: `rule(primals, tangents, **params) -> (primal_out, tangent_out)`. A tangent may be a
symbolic `Zero` (`type(t) is Zero`: the operand does not depend on the input being
differentiated); return `Zero.from_primal_value(out)` when the output's tangent is zero, and
never do arithmetic on a `Zero`.

Write the rules below with `minijax.lax` operations (they run under the trace that was current
before `jvp`, so they may themselves be differentiated: jvp of jvp gives second derivatives).
The tests install them in `minijax.interpreters.ad.primitive_jvps` in place of minijax's own
and compare `minijax.jvp` with `jax.jvp`. JAX's rules: jax/_src/lax/lax.py (`ad.defjvp(sin_p,
...)` right below `sin_p = ...`).
"""

from __future__ import annotations

from minijax import lax  # noqa: F401 (for your rules)
from minijax.ad_util import Zero  # noqa: F401


def sin_jvp(primals, tangents):
    raise NotImplementedError("sin_jvp")


def cos_jvp(primals, tangents):
    raise NotImplementedError("cos_jvp")


def exp_jvp(primals, tangents):
    raise NotImplementedError("exp_jvp")


def log_jvp(primals, tangents):
    raise NotImplementedError("log_jvp")


def mul_jvp(primals, tangents):
    """d(x·y) = dx·y + x·dy, where either tangent may be a Zero."""
    raise NotImplementedError("mul_jvp")


def div_jvp(primals, tangents):
    """d(x/y) = dx/y - dy·x/y², where either tangent may be a Zero."""
    raise NotImplementedError("div_jvp")


RULES = {"sin": sin_jvp, "cos": cos_jvp, "exp": exp_jvp, "log": log_jvp, "mul": mul_jvp,
         "div": div_jvp}
