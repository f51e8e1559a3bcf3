"""Solution: an interpreter that rewrites a program — `inverse(f)` (chapter 03).

JAX's tutorial "Writing custom interpreters in JAX" builds `inverse`: trace `f` to a jaxpr and
run the jaxpr *backwards*, replacing each primitive by its inverse. Here `f` maps one array to
one array of the same shape, and every equation has exactly one operand that depends on the
input; the others are literals (`2.0:f32[]`) or constvars (arrays `f` closed over). The
primitives to invert: `exp`, `log`, `neg`, `add`, `sub`, `mul`, `div`.

Because `inverse_jaxpr` computes with `minijax.lax` operations, the inverse is an ordinary
traceable function: `jit(inverse(f))`, `grad(inverse(f))` and `make_jaxpr(inverse(f))` work.
Fill in the two functions marked `NotImplementedError`; the tests compare `inverse(f)(f(x))`
with `x` (`f(x)` computed by real JAX) and `grad(inverse(f))` with the inverse function
theorem, `1 / f'(x)`.
"""

from __future__ import annotations

import minijax
from minijax import core, lax


def read(env: dict, atom):
    """The value of a jaxpr atom: a Literal's value, or what `env` holds for a Var."""
    return atom.val if isinstance(atom, core.Literal) else env[atom]


def depends_on_input(jaxpr: core.Jaxpr) -> set:
    """The variables of `jaxpr` whose values depend on its input."""
    dep = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        if any(isinstance(a, core.Var) and a in dep for a in eqn.invars):
            dep.update(eqn.outvars)
    return dep


def invert_eqn(eqn: core.JaxprEqn, out, i: int, other):
    """The value of operand `i` of `eqn` (the one that depends on the input), given the value
    `out` of the equation's output and, for a binary primitive, the value `other` of the other
    operand (None for a unary one). E.g. for `c = sub a 3.0` (i = 0): `out + 3.0`; for
    `c = sub 3.0 a` (i = 1): `3.0 - out`."""
    name = eqn.primitive.name
    if name == "exp":
        return lax.log(out)
    if name == "log":
        return lax.exp(out)
    if name == "neg":
        return lax.neg(out)
    if name == "add":
        return lax.sub(out, other)
    if name == "mul":
        return lax.div(out, other)
    if name == "sub":
        return lax.add(out, other) if i == 0 else lax.sub(other, out)
    if name == "div":
        return lax.mul(out, other) if i == 0 else lax.div(other, out)
    raise NotImplementedError(f"inverse: no inverse for the primitive {name!r}")


def inverse_jaxpr(jaxpr: core.Jaxpr, consts, y):
    """Run `jaxpr` backwards from its output value `y` and return the value of its input.
    Walk the equations in reverse; `env` starts with the consts (and the output = `y`); use
    `depends_on_input` to find each equation's input-dependent operand and `invert_eqn` to
    compute it."""
    env = dict(zip(jaxpr.constvars, consts))
    dep = depends_on_input(jaxpr)
    (outvar,) = jaxpr.outvars
    if not isinstance(outvar, core.Var) or outvar not in dep:
        raise ValueError("inverse: the output does not depend on the input")
    env[outvar] = y
    for eqn in reversed(jaxpr.eqns):
        (o,) = eqn.outvars
        if o not in dep:
            continue
        (i,) = [k for k, a in enumerate(eqn.invars) if isinstance(a, core.Var) and a in dep]
        others = [read(env, a) for k, a in enumerate(eqn.invars) if k != i]
        env[eqn.invars[i]] = invert_eqn(eqn, env[o], i, others[0] if others else None)
    (invar,) = jaxpr.invars
    return env[invar]


def inverse(fun):
    """`inverse(f)(y)`: the `x` with `f(x) == y`."""
    def wrapped(y):
        closed = minijax.make_jaxpr(fun)(y)  # f's jaxpr at y's type (f keeps the shape)
        return inverse_jaxpr(closed.jaxpr, closed.consts, y)
    return wrapped


