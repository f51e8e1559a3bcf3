"""Exercise: an interpreter that rewrites a program — `inverse(f)` (chapter 03).

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
from minijax import core, lax  # noqa: F401 (lax: for your code)


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
    raise NotImplementedError("invert_eqn")


def inverse_jaxpr(jaxpr: core.Jaxpr, consts, y):
    """Run `jaxpr` backwards from its output value `y` and return the value of its input.
    Walk the equations in reverse; `env` starts with the consts (and the output = `y`); use
    `depends_on_input` to find each equation's input-dependent operand and `invert_eqn` to
    compute it."""
    raise NotImplementedError("inverse_jaxpr")


def inverse(fun):
    """`inverse(f)(y)`: the `x` with `f(x) == y`."""
    def wrapped(y):
        closed = minijax.make_jaxpr(fun)(y)  # f's jaxpr at y's type (f keeps the shape)
        return inverse_jaxpr(closed.jaxpr, closed.consts, y)
    return wrapped


