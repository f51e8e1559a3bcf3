"""Solution: jvp rules (chapter 04).

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

from minijax import lax
from minijax.ad_util import Zero


def sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return lax.sin(x), lax.mul(t, lax.cos(x))


def cos_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return lax.cos(x), lax.neg(lax.mul(t, lax.sin(x)))


def exp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = lax.exp(x)
    return y, lax.mul(t, y)  # reuse the output: d exp(x) = exp(x) dx


def log_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return lax.log(x), lax.div(t, x)


def mul_jvp(primals, tangents):
    """d(x·y) = dx·y + x·dy, where either tangent may be a Zero."""
    (x, y), (tx, ty) = primals, tangents
    out = lax.mul(x, y)
    parts = []
    if type(tx) is not Zero:
        parts.append(lax.mul(tx, y))
    if type(ty) is not Zero:
        parts.append(lax.mul(x, ty))
    if not parts:
        return out, Zero.from_primal_value(out)
    return out, parts[0] if len(parts) == 1 else lax.add(*parts)


def div_jvp(primals, tangents):
    """d(x/y) = dx/y - dy·x/y², where either tangent may be a Zero."""
    (x, y), (tx, ty) = primals, tangents
    out = lax.div(x, y)
    parts = []
    if type(tx) is not Zero:
        parts.append(lax.div(tx, y))
    if type(ty) is not Zero:
        parts.append(lax.neg(lax.mul(ty, lax.div(out, y))))
    if not parts:
        return out, Zero.from_primal_value(out)
    return out, parts[0] if len(parts) == 1 else lax.add(*parts)


RULES = {"sin": sin_jvp, "cos": cos_jvp, "exp": exp_jvp, "log": log_jvp, "mul": mul_jvp,
         "div": div_jvp}
