"""Symbolic dimensions for shape-polymorphic export: `symbolic_shape("b, 4")` gives a shape
whose first dimension is the variable `b` (any size >= 1), and the exported module then works
for every `b`.

A dimension expression is a polynomial with integer coefficients over the dimension
variables (`4*b`, `b + 1`, `b*c`). Arithmetic on them is exact; a comparison is answered
only when it holds, or fails, for every value of the variables (each at least 1), and raises
`InconclusiveDimensionOperation` otherwise, as JAX does. Minimal: no user constraints, no
`floordiv`/`mod`/`max` in expressions, no solving for variables that appear only inside a
larger expression.

Mirrors jax/_src/export/shape_poly.py. Taught in chapters/31-export.md.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from minijax import core, tree_util
from minijax.interpreters import mlir

_HELP = ("Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
         "#comparison-of-symbolic-dimensions-is-partially-supported for more details")


# JAX: jax/_src/export/shape_poly.py InconclusiveDimensionOperation
class InconclusiveDimensionOperation(Exception):
    """A comparison or conversion of symbolic dimensions whose answer depends on the values
    of the dimension variables."""


# JAX: jax/_src/export/shape_poly.py SymbolicScope — differs: no constraints
class SymbolicScope:
    """The scope the dimension variables of one export belong to: two shapes must share one
    to be combined (`symbolic_shape(..., scope=)`)."""

    def __init__(self, constraints_str: Sequence[str] = ()) -> None:
        if constraints_str:
            raise NotImplementedError("SymbolicScope: minijax has no symbolic constraints")


# JAX: jax/_src/export/shape_poly.py _DimExpr — differs: a plain polynomial, sums of
# products of variables, no floordiv/mod/max terms
class DimExpr:
    """A symbolic dimension: `terms` maps a monomial (a sorted tuple of (variable, power)) to
    its integer coefficient; the monomial () is the constant."""

    __slots__ = ("terms", "scope")
    is_symbolic_dim = True  # what core.ShapedArray looks for (core cannot import this module)

    def __init__(self, terms: dict, scope: SymbolicScope) -> None:
        self.terms = {m: c for m, c in terms.items() if c}
        self.scope = scope

    @staticmethod
    def var(name: str, scope: SymbolicScope) -> "DimExpr":
        return DimExpr({((name, 1),): 1}, scope)

    def _lift(self, other) -> "DimExpr":
        if isinstance(other, DimExpr):
            if other.scope is not self.scope:
                raise ValueError(f"Invalid mixing of symbolic scopes: '{self}' and '{other}' "
                                 "come from different calls of symbolic_shape; pass one "
                                 "`scope=` to both")
            return other
        return DimExpr({(): _as_int(other)}, self.scope)

    def _constant(self) -> int | None:
        return self.terms.get((), 0) if set(self.terms) <= {()} else None

    def __add__(self, other):
        if not _is_dim(other):  # an array or a float: arithmetic on the dimension's value
            return self.dimension_as_value() + other
        other = self._lift(other)
        terms = dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return _normal(DimExpr(terms, self.scope))

    def __radd__(self, other):
        return self + other if _is_dim(other) else other + self.dimension_as_value()

    def __neg__(self):
        return DimExpr({m: -c for m, c in self.terms.items()}, self.scope)

    def __sub__(self, other):
        return self + (-self._lift(other)) if _is_dim(other) else \
            self.dimension_as_value() - other

    def __rsub__(self, other):
        return self._lift(other) - self if _is_dim(other) else \
            other - self.dimension_as_value()

    def __mul__(self, other):
        if not _is_dim(other):
            return self.dimension_as_value() * other
        other = self._lift(other)
        terms: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                powers = dict(m1)
                for v, p in m2:
                    powers[v] = powers.get(v, 0) + p
                m = tuple(sorted(powers.items()))
                terms[m] = terms.get(m, 0) + c1 * c2
        return _normal(DimExpr(terms, self.scope))

    def __rmul__(self, other):
        return self * other if _is_dim(other) else other * self.dimension_as_value()

    def __truediv__(self, other):  # a value, as in JAX: `x / x.shape[0]`
        return self.dimension_as_value() / other

    def __rtruediv__(self, other):
        return other / self.dimension_as_value()

    def __floordiv__(self, other):
        d = _as_int(other)
        if d and all(c % d == 0 for c in self.terms.values()):
            return _normal(DimExpr({m: c // d for m, c in self.terms.items()}, self.scope))
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' cannot be divided evenly by {other}: minijax "
            "divides a dimension expression only when every coefficient divides")

    def __mod__(self, other):
        d = _as_int(other)
        if d and all(c % d == 0 for m, c in self.terms.items() if m):
            return self.terms.get((), 0) % d
        raise InconclusiveDimensionOperation(f"Symbolic dimension '{self}' mod {other} is "
                                             "not a constant")

    def __eq__(self, other) -> bool:
        if not isinstance(other, (DimExpr, int)) and not hasattr(other, "__index__"):
            return NotImplemented
        diff = self - other
        return diff == 0 if type(diff) is int else not diff.terms  # equal for all values

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.terms.items())))

    def _bounds(self) -> tuple[float, float]:
        """Lower and upper bound over all variables >= 1 (monomials are >= 1 there)."""
        lo, hi = 0, 0
        for m, c in self.terms.items():
            if not m:
                lo, hi = lo + c, hi + c
            elif c > 0:
                lo, hi = lo + c, float("inf")
            else:
                lo, hi = float("-inf"), hi + c
        return lo, hi

    def _compare(self, other, op: str) -> bool:
        diff = self - other
        lo, hi = diff._bounds() if isinstance(diff, DimExpr) else (diff, diff)
        decided = {">=": (lo >= 0, hi < 0), ">": (lo > 0, hi <= 0),
                   "<=": (hi <= 0, lo > 0), "<": (hi < 0, lo >= 0)}[op]
        if decided[0]:
            return True
        if decided[1]:
            return False
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{self}' {op} '{other}' is inconclusive.\n"
            "Its answer differs between values of the dimension variables (each may be any "
            f"integer >= 1), so it cannot be one Python bool.\n{_HELP}")

    __ge__ = lambda self, other: self._compare(other, ">=")  # noqa: E731
    __gt__ = lambda self, other: self._compare(other, ">")  # noqa: E731
    __le__ = lambda self, other: self._compare(other, "<=")  # noqa: E731
    __lt__ = lambda self, other: self._compare(other, "<")  # noqa: E731

    def __index__(self) -> int:
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant\n"
            "A Python int (an index, a NumPy shape) needs one value, and a dimension "
            f"variable stands for every integer >= 1.\n{_HELP}")

    __int__ = __index__

    def __str__(self) -> str:
        def mono(m, c):
            factors = [v if p == 1 else f"{v}^{p}" for v, p in m]
            return "*".join(([str(c)] if c != 1 else []) + factors)
        parts = [mono(m, c) for m, c in sorted(self.terms.items(), key=lambda mc: (-len(
            mc[0]), mc[0])) if m]
        out = " + ".join(parts).replace("+ -", "- ")
        const = self.terms.get((), 0)
        if const:
            out = f"{out} {'+' if const > 0 else '-'} {abs(const)}" if out else str(const)
        return out or "0"

    __repr__ = __str__

    def evaluate(self, env: dict[str, int]) -> int:
        """The value for the variables' values in `env`."""
        total = 0
        for m, c in self.terms.items():
            for v, p in m:
                c = c * env[v] ** p
            total += c
        return total

    def as_var(self) -> str | None:
        """The variable's name if this expression is one variable alone, else None."""
        ((m, c),) = self.terms.items() if len(self.terms) == 1 else ((None, None),)
        return m[0][0] if c == 1 and m and len(m) == 1 and m[0][1] == 1 else None

    def variables(self) -> set[str]:
        return {v for m in self.terms for v, _ in m}

    # JAX: jax/_src/export/shape_poly.py _DimExpr.dimension_as_value (through
    # core.dimension_as_value)
    def dimension_as_value(self):
        """This dimension as an int32 scalar of the program being exported (`jnp.mean` over
        `b` rows divides by it)."""
        return dim_as_value_p.bind(dim=self)


# JAX: jax/_src/export/shape_poly.py dim_as_value_p
dim_as_value_p = core.Primitive("dim_as_value")


def _dim_as_value_impl(*, dim):
    raise InconclusiveDimensionOperation(
        f"Symbolic dimension '{dim}' has a value only inside a function being exported "
        "(chapters/31-export.md)")


def _dim_as_value_lowering(ctx, *, dim):
    return mlir.eval_dynamic_shape((dim,))[0]


dim_as_value_p.def_impl(_dim_as_value_impl)
dim_as_value_p.def_abstract_eval(lambda *, dim: core.ShapedArray((), np.int32, weak_type=True))
mlir.register_lowering(dim_as_value_p, _dim_as_value_lowering)


def _is_dim(x) -> bool:
    """Whether `x` takes part in dimension arithmetic (an integer or a DimExpr) rather than
    in array arithmetic."""
    return isinstance(x, (int, DimExpr, np.integer))


def _as_int(d) -> int:
    if isinstance(d, DimExpr):
        return d.__index__()
    return int(d.__index__() if hasattr(d, "__index__") else d)


def _normal(e: DimExpr) -> "DimExpr | int":
    c = e._constant()
    return e if c is None else c


# JAX: jax/_src/export/shape_poly.py is_symbolic_dim
def is_symbolic_dim(p: Any) -> bool:
    """Whether `p` is a symbolic dimension (not an integer)."""
    return isinstance(p, DimExpr)


def evaluate(d, env: dict[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, DimExpr) else int(d)


def all_dim_vars(avals) -> list[str]:
    """The dimension variables of `avals`' shapes, sorted (the order of the module's
    dimension arguments)."""
    return sorted({v for a in avals for d in a.shape if isinstance(d, DimExpr)
                   for v in d.variables()})


# ---------------------------------------------------------------------------------------------
# Parsing "b, 4"
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*(),]))")


class _Parser:
    def __init__(self, text: str, scope: SymbolicScope, spec: str) -> None:
        self.tokens, pos = [], 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            if m is None:
                self.fail(f"unexpected character {text[pos:].strip()[:1]!r}", spec)
            self.tokens.append(m.group("num") or m.group("name") or m.group("op"))
            pos = m.end()
        self.i, self.scope, self.spec = 0, scope, spec

    def fail(self, msg: str, spec=None):
        raise ValueError(f"syntax error in symbolic shape '{spec or self.spec}': {msg}")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def dim(self):
        out = self.term()
        while self.peek() in ("+", "-"):
            out = out + self.term() if self.next() == "+" else out - self.term()
        return out

    def term(self):
        out = self.factor()
        while self.peek() == "*":
            self.next()
            out = out * self.factor()
        return out

    def factor(self):
        tok = self.next()
        if tok is None:
            self.fail("expecting a dimension but found the end")
        if tok == "-":
            return -self.factor()
        if tok == "(":
            out = self.dim()
            if self.next() != ")":
                self.fail("expecting ')'")
            return out
        if tok.isdigit():
            return int(tok)
        if tok[0].isalpha() or tok[0] == "_":
            return DimExpr.var(tok, self.scope)
        self.fail(f"expecting a name or a number but found {tok!r}")


# JAX: jax/_src/export/shape_poly.py symbolic_shape
def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: SymbolicScope | None = None) -> tuple:
    """The shape that `shape_spec` writes, e.g. `"b, 4"` -> `(b, 4)`, `"(b, 2*b + 1)"`.

    Args:
      shape_spec: comma-separated dimensions, each an integer or a polynomial of dimension
        variables (names); may be wrapped in parentheses. None or "" is the shape `()`.
      scope: the `SymbolicScope` the variables belong to (a new one if None); shapes used
        in one export must share their scope.
    Returns: a tuple of ints and `DimExpr`s.
    Raises: ValueError for a syntax error, or a dimension that is not >= 1 for all values.
    """
    if constraints:
        raise NotImplementedError("symbolic_shape: minijax has no symbolic constraints")
    scope = SymbolicScope() if scope is None else scope
    spec = (shape_spec or "").strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    dims: list = []
    if not spec.strip():
        return ()
    for i, part in enumerate(spec.split(",")):
        if not part.strip() and i == len(spec.split(",")) - 1:
            break  # a trailing comma, as in "(b,)"
        p = _Parser(part, scope, shape_spec)
        d = p.dim()
        if p.peek() is not None:
            p.fail(f"in dimension {i}: unexpected {p.peek()!r}")
        if isinstance(d, DimExpr) and d._bounds()[0] < 1:
            raise ValueError(f"symbolic_shape '{shape_spec}': dimension {i} ('{d}') must be "
                             ">= 1 for every value of its variables")
        dims.append(d)
    return tuple(dims)


# JAX: jax/_src/export/shape_poly.py symbolic_args_specs
def symbolic_args_specs(args, shapes_specs, *, scope: SymbolicScope | None = None):
    """`ShapeDtypeStruct`s with the dtypes of `args` (a pytree of arrays) and the shapes of
    `shapes_specs` (one string for every leaf, or a pytree of strings like `args`)."""
    scope = SymbolicScope() if scope is None else scope
    leaves, tree = tree_util.tree_flatten(args)
    specs = [shapes_specs] * len(leaves) if isinstance(shapes_specs, str) else \
        tree.flatten_up_to(shapes_specs)
    return tree.unflatten([core.ShapeDtypeStruct(symbolic_shape(s, scope=scope), x.dtype)
                           for x, s in zip(leaves, specs)])
