"""Symbolic dimensions for shape-polymorphic export: `symbolic_shape("b, 4")` gives a shape
whose first dimension is the variable `b` (any size >= 1), and the exported module then works
for every `b`.

A dimension expression is a sum of terms with integer coefficients; a term is a product of
factors; a factor is a dimension variable or an operation of two expressions: `floordiv`,
`mod`, `max`, `min` (`b // 2` is `floordiv(b, 2)` unless it divides exactly). Arithmetic is
exact; a comparison is answered only when it holds, or fails, for every value the variables
may take (each at least 1, and within the scope's constraints, `"b >= 2"`), and raises
`InconclusiveDimensionOperation` otherwise, as JAX does. The bounds come from interval
arithmetic refined by the constraints (explicit ones, and `floordiv`'s and `max`'s own), not
from JAX's full decision procedure.

Mirrors jax/_src/export/shape_poly.py. Taught in chapters/31-export.md.
"""

from __future__ import annotations

import math
import operator
import re
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from minijax import core, tree_util
from minijax.interpreters import mlir

_HELP = ("Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
         "#comparison-of-symbolic-dimensions-is-partially-supported for more details")
_INF = float("inf")


# JAX: jax/_src/export/shape_poly.py InconclusiveDimensionOperation
class InconclusiveDimensionOperation(Exception):
    """A comparison or conversion of symbolic dimensions whose answer depends on the values
    of the dimension variables."""


class _UnknownDimVar(Exception):
    """Evaluating an expression met a variable the environment has no value for."""


# JAX: jax/_src/export/shape_poly.py SymbolicScope
class SymbolicScope:
    """The scope the dimension variables of one export belong to, with their constraints:
    shapes combined in one program must share it (`symbolic_shape(..., scope=)`).

    Args:
      constraints_str: strings `"e1 >= e2"`, `"e1 <= e2"` or `"e1 == e2"` of dimension
        expressions. An equality's left side must be one term (`"a"`, `"2*b"`,
        `"mod(b, 4)"`); it is replaced by the right side wherever it appears.
    Raises: ValueError for a string rather than a sequence, a constraint without a
      comparison, an unsatisfiable constant one, or an equality whose left side is not one
      term.
    """

    def __init__(self, constraints_str: Sequence[str] = ()) -> None:
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self._constraints: list[tuple[str, str, Any]] = []  # (text, "==" or ">=", e1 - e2)
        self._facts: list[dict] = []  # terms of expressions known to be >= 0
        self._rules: dict = {}  # term -> (expression, coefficient): `t*k == e`
        self._var_bounds: dict[str, tuple[float, float]] = {}
        for c in constraints_str:
            self._add_constraint(c)

    def _add_constraint(self, c: str) -> None:
        if not isinstance(c, str):
            raise ValueError(f"SymbolicScope constraint must be a string: got {c!r}")
        m = re.search(r"==|>=|<=", c)
        if m is None:
            raise ValueError("Constraint parsing error: must contain one of '==' or '>=' or "
                             "'<='")
        e1, e2 = (_parse_one(part, self, repr(part)) for part in (c[:m.start()], c[m.end():]))
        if m.group() == "<=":
            e1, e2 = e2, e1
        diff = e1 - e2
        if not isinstance(diff, DimExpr):
            if diff < 0 or (m.group() == "==" and diff != 0):
                raise ValueError(f"Unsatisfiable explicit constraint: {c}")
            return
        if m.group() == "==":
            if not isinstance(e1, DimExpr) or len(e1.terms) != 1 or () in e1.terms:
                raise ValueError(f"Invalid equality constraint: {e1} == {e2}. The "
                                 "left-hand-side must be of the form `term * coefficient`.")
            ((term, k),) = e1.terms.items()
            if term in self._rules:
                raise NotImplementedError("Found multiple equality constraints with the "
                                          f"same left-hand-side: {e1}")
            self._rules[term] = (e2, k)
            f = term[0][0]
            if k == 1 and e2 == 0 and len(term) == 1 and f.op == "mod" and \
                    not isinstance(f.operands[1], DimExpr):  # mod(a, n) == 0: n*floordiv(a, n) == a
                q = DimExpr({((_Factor(op="floordiv", operands=f.operands), 1),): 1}, self)
                self._rules[next(iter(q.terms))] = (f.operands[0], f.operands[1])
        else:
            self._facts.append(diff.terms)
            self._learn_var_bound(diff.terms)
        self._constraints.append((c, "==" if m.group() == "==" else ">=", diff))

    def _learn_var_bound(self, terms: dict) -> None:
        """`k*v + m >= 0` for one variable `v`: a bound of `v` for interval arithmetic."""
        nonconst = [(t, c) for t, c in terms.items() if t]
        if len(nonconst) != 1 or len(nonconst[0][0]) != 1:
            return
        ((mono, k),) = nonconst
        if mono[0][1] != 1 or mono[0][0].var is None:
            return
        m, v = terms.get((), 0), mono[0][0].var
        lo, hi = self._var_bounds.get(v, (1, _INF))
        if k > 0:
            lo = max(lo, -(m // k))
        else:
            hi = min(hi, m // -k)
        self._var_bounds[v] = (lo, hi)

    def __str__(self) -> str:
        return f"{id(self)}" + "".join([" with constraints:"] * bool(self._constraints)) + \
            "".join(f"\n  {c}" for c, _, _ in self._constraints)

    __repr__ = __str__


# JAX: jax/_src/export/shape_poly.py _DimFactor
class _Factor:
    """A dimension variable (`var`), or `op(*operands)` for op one of floordiv, mod, max,
    min and the operands expressions or ints."""

    __slots__ = ("var", "op", "operands", "size", "key")

    def __init__(self, var: str | None = None, op: str | None = None,
                 operands: tuple = ()) -> None:
        self.var, self.op, self.operands = var, op, operands
        self.size = 1 if var is not None else 1 + sum(_expr_key(o)[0] for o in operands)
        # JAX's syntactic order: by size, then by name or operation and operands
        self.key = (self.size, var or "", op or "", tuple(_expr_key(o) for o in operands))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Factor) and self.key == other.key

    def __str__(self) -> str:
        return self.var if self.var is not None else \
            f"{self.op}({', '.join(map(str, self.operands))})"

    def variables(self) -> set[str]:
        if self.var is not None:
            return {self.var}
        return set().union(*(o.variables() for o in self.operands if isinstance(o, DimExpr)))

    def evaluate(self, env: dict, ops):
        if self.var is not None:
            if self.var not in env:
                raise _UnknownDimVar(self.var)
            return env[self.var]
        a, b = (o.evaluate(env, ops) if isinstance(o, DimExpr) else ops.const(o)
                for o in self.operands)
        return getattr(ops, self.op)(a, b)


def _term_key(mono: tuple) -> tuple:
    return (sum(1 + p * f.size for f, p in mono), tuple((f.key, p) for f, p in mono))


def _expr_key(e) -> tuple:
    if not isinstance(e, DimExpr):
        return (1, (((0, ()), e),))
    terms = e.sorted_terms()
    return (sum(1 + abs(c) * _term_key(m)[0] for m, c in terms),
            tuple((_term_key(m), c) for m, c in terms))


class _IntOps:
    """Evaluating an expression to an int (`DimExpr.evaluate`'s default)."""
    const = staticmethod(int)
    add, mul = staticmethod(operator.add), staticmethod(operator.mul)
    floordiv, mod = staticmethod(operator.floordiv), staticmethod(operator.mod)
    max, min = staticmethod(max), staticmethod(min)


# JAX: jax/_src/export/shape_poly.py _DimExpr — differs: bounds by interval arithmetic
# and one-step use of constraints, not shape_poly_decision.py's elimination
class DimExpr:
    """A symbolic dimension: `terms` maps a term (a tuple of (factor, power), factors in
    syntactic order) to its integer coefficient; the term () is the constant."""

    __slots__ = ("terms", "scope")
    is_symbolic_dim = True  # what core.ShapedArray looks for (core cannot import this module)

    def __init__(self, terms: dict, scope: SymbolicScope) -> None:
        self.terms = {m: c for m, c in terms.items() if c}
        self.scope = scope

    @staticmethod
    def var(name: str, scope: SymbolicScope) -> "DimExpr | int":
        return _normal(DimExpr({((_Factor(var=name), 1),): 1}, scope))

    @staticmethod
    def _op(op: str, a, b, scope: SymbolicScope) -> "DimExpr | int":
        a, b = (_normal(x) if isinstance(x, DimExpr) else x for x in (a, b))
        return _normal(DimExpr({((_Factor(op=op, operands=(a, b)), 1),): 1}, scope))

    def _lift(self, other) -> "DimExpr":
        if isinstance(other, DimExpr):
            if other.scope is not self.scope:
                raise ValueError(f"Invalid mixing of symbolic scopes: '{self}' and '{other}' "
                                 "come from different calls of symbolic_shape; pass one "
                                 "`scope=` to both")
            return other
        return DimExpr({(): _as_int(other)}, self.scope)

    def sorted_terms(self) -> list:
        """(term, coefficient) pairs, largest first (the constant last), as JAX prints."""
        return sorted(self.terms.items(), key=lambda mc: _term_key(mc[0]), reverse=True)

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
                m = _mono_mul(m1, m2)
                terms[m] = terms.get(m, 0) + c1 * c2
        return _normal(DimExpr(terms, self.scope))

    def __rmul__(self, other):
        return self * other if _is_dim(other) else other * self.dimension_as_value()

    def __truediv__(self, other):  # a value, as in JAX: `x / x.shape[0]`
        return self.dimension_as_value() / other

    def __rtruediv__(self, other):
        return other / self.dimension_as_value()

    # JAX: jax/_src/export/shape_poly.py _DimExpr._divmod
    def __divmod__(self, divisor):
        """Polynomial division by the leading terms; a constant divisor may leave a constant
        remainder. What does not divide so is `floordiv(self, divisor)`, `mod(...)`."""
        divisor = divisor if isinstance(divisor, DimExpr) else _as_int(divisor)
        dividend, quotient = self, 0
        while isinstance(dividend, DimExpr):  # invariant: self = dividend + divisor*quotient
            mono, count = dividend.sorted_terms()[0]
            if isinstance(divisor, DimExpr):
                dmono, dcount = divisor.sorted_terms()[0]
                qmono = _mono_divide(mono, dmono)
            else:
                qmono, dcount = mono, divisor
            qcount, rcount = divmod(count, dcount) if dcount else (0, 1)
            if qmono is None or rcount:
                return (DimExpr._op("floordiv", self, divisor, self.scope),
                        DimExpr._op("mod", self, divisor, self.scope))
            q = _normal(DimExpr({qmono: qcount}, self.scope))
            quotient, dividend = quotient + q, dividend - q * divisor
        if isinstance(divisor, DimExpr):
            if dividend:
                return (DimExpr._op("floordiv", self, divisor, self.scope),
                        DimExpr._op("mod", self, divisor, self.scope))
            return quotient, 0
        q, r = divmod(dividend, divisor)
        return quotient + q, r

    def __rdivmod__(self, dividend):
        return divmod(self._lift(dividend), self)

    def __floordiv__(self, other):
        return divmod(self, other)[0] if _is_dim(other) else \
            self.dimension_as_value() // other

    def __rfloordiv__(self, other):
        return divmod(self._lift(other), self)[0] if _is_dim(other) else \
            other // self.dimension_as_value()

    def __mod__(self, other):
        return divmod(self, other)[1] if _is_dim(other) else self.dimension_as_value() % other

    def __rmod__(self, other):
        return divmod(self._lift(other), self)[1] if _is_dim(other) else \
            other % self.dimension_as_value()

    # JAX: jax/_src/export/shape_poly.py _DimExpr.max (core.max_dim)
    def max(self, other) -> "DimExpr | int":
        lo, hi = _bounds(self - other)
        return self if lo >= 0 else other if hi <= 0 else \
            DimExpr._op("max", self, self._lift(other), self.scope)

    def min(self, other) -> "DimExpr | int":
        lo, hi = _bounds(self - other)
        return other if lo >= 0 else self if hi <= 0 else \
            DimExpr._op("min", self, self._lift(other), self.scope)

    def __eq__(self, other) -> bool:
        if not isinstance(other, (DimExpr, int)) and not hasattr(other, "__index__"):
            return NotImplemented
        diff = self - other
        return diff == 0 if type(diff) is int else False  # equal only as the same expression

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(_expr_key(self))

    def _compare(self, other, op: str) -> bool:
        lo, hi = _bounds(self - other)
        decided = {">=": (lo >= 0, hi < 0), ">": (lo > 0, hi <= 0),
                   "<=": (hi <= 0, lo > 0), "<": (hi < 0, lo >= 0)}[op]
        if decided[0]:
            return True
        if decided[1]:
            return False
        scope = f"\nUsing symbolic scope {self.scope}" if self.scope._constraints else ""
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{self}' {op} '{other}' is inconclusive.{scope}\n"
            "Its answer differs between values of the dimension variables (each may be any "
            "integer >= 1 that the scope's constraints allow), so it cannot be one Python "
            f"bool.\n{_HELP}")

    __ge__ = lambda self, other: self._compare(other, ">=")
    __gt__ = lambda self, other: self._compare(other, ">")
    __le__ = lambda self, other: self._compare(other, "<=")
    __lt__ = lambda self, other: self._compare(other, "<")

    def __index__(self) -> int:
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used in a context that requires a constant\n"
            "A Python int (an index, a NumPy shape) needs one value, and a dimension "
            f"variable stands for every integer >= 1.\n{_HELP}")

    __int__ = __index__

    def __str__(self) -> str:
        def one(m, c):
            sign = "+" if c > 0 else "-"
            if not m:
                return f"{sign} {abs(c)}"
            mono = "*".join(f"{f}^{p}" if p != 1 else str(f) for f, p in m)
            return f"{sign} {mono}" if abs(c) == 1 else f"{sign} {abs(c)}*{mono}"
        out = " ".join(one(m, c) for m, c in self.sorted_terms())
        return out[2:] if out.startswith("+ ") else out

    __repr__ = __str__

    def evaluate(self, env: dict, ops=_IntOps) -> Any:
        """The value for the variables' values in `env`, computed with `ops` (`const`, `add`,
        `mul`, `floordiv`, `mod`, `max`, `min`: ints by default; the lowering passes ops
        that emit StableHLO). _UnknownDimVar for a variable not in `env`."""
        total = None
        for m, c in self.sorted_terms():
            term = None if m else ops.const(c)
            for f, p in m:
                v = f.evaluate(env, ops)
                for _ in range(p):
                    term = v if term is None else ops.mul(term, v)
            if m and c != 1:
                term = ops.mul(term, ops.const(c))
            total = term if total is None else ops.add(total, term)
        return total

    def as_var(self) -> str | None:
        """The variable's name if this expression is one variable alone, else None."""
        ((m, c),) = self.terms.items() if len(self.terms) == 1 else ((None, None),)
        return m[0][0].var if c == 1 and m and len(m) == 1 and m[0][1] == 1 else None

    def variables(self) -> set[str]:
        return set().union(*(f.variables() for m in self.terms for f, _ in m))

    # JAX: jax/_src/export/shape_poly.py _DimExpr.dimension_as_value (through
    # core.dimension_as_value)
    def dimension_as_value(self):
        """This dimension as an int32 scalar of the program being exported (`jnp.mean` over
        `b` rows divides by it)."""
        return dim_as_value_p.bind(dim=self)


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    powers = dict(m1)
    for f, p in m2:
        powers[f] = powers.get(f, 0) + p
    return tuple(sorted(powers.items(), key=lambda fp: fp[0].key))


def _mono_divide(m: tuple, d: tuple) -> tuple | None:
    """`m / d` as a term, or None if `d` does not divide `m`."""
    powers = dict(m)
    for f, p in d:
        if powers.get(f, 0) < p:
            return None
        powers[f] -= p
    return tuple(sorted(((f, p) for f, p in powers.items() if p), key=lambda fp: fp[0].key))


def _normal(e: DimExpr) -> "DimExpr | int":
    """`e` with the scope's equality constraints applied, an int if it is constant."""
    for _ in range(len(e.scope._rules)):
        hit = [(m, c) for m, c in e.terms.items() if m in e.scope._rules and
               c % e.scope._rules[m][1] == 0]
        if not hit:
            break
        terms = dict(e.terms)
        for m, c in hit:
            after, k = e.scope._rules[m]
            del terms[m]
            for m2, c2 in (after.terms.items() if isinstance(after, DimExpr) else
                           [((), after)]):
                terms[m2] = terms.get(m2, 0) + c2 * (c // k)
        e = DimExpr(terms, e.scope)
    if set(e.terms) <= {()}:
        return e.terms.get((), 0)
    return e


# ---------------------------------------------------------------------------------------------
# Bounds: what comparisons, max and min decide with
# ---------------------------------------------------------------------------------------------

def _times(a, b):
    return 0 if a == 0 or b == 0 else a * b


def _interval(terms: dict, scope: SymbolicScope) -> tuple[float, float]:
    lo, hi = 0, 0
    for m, c in terms.items():
        tlo, thi = 1, 1
        for f, p in m:
            flo, fhi = _factor_bounds(f, scope)
            for _ in range(p):
                ends = [_times(x, y) for x in (tlo, thi) for y in (flo, fhi)]
                tlo, thi = min(ends), max(ends)
        ends = (_times(c, tlo), _times(c, thi))
        lo, hi = lo + min(ends), hi + max(ends)
    return lo, hi


def _factor_bounds(f: _Factor, scope: SymbolicScope) -> tuple[float, float]:
    if f.var is not None:
        return scope._var_bounds.get(f.var, (1, _INF))
    (alo, ahi), (blo, bhi) = (_bounds(o) for o in f.operands)
    if f.op == "max":
        return max(alo, blo), max(ahi, bhi)
    if f.op == "min":
        return min(alo, blo), min(ahi, bhi)
    if f.op == "mod" and blo > 0:  # 0 <= mod(a, b) < b
        return (alo, ahi) if 0 <= alo and ahi < blo else (0, bhi - 1)
    if not blo == bhi > 0:  # a divisor that is not a positive constant
        return -_INF, _INF
    if f.op == "mod":
        return (alo, ahi) if 0 <= alo and ahi < blo else (0, blo - 1)
    return (alo if alo in (_INF, -_INF) else alo // blo,
            ahi if ahi in (_INF, -_INF) else ahi // blo)


def _implicit_facts(e: DimExpr) -> list[dict]:
    """What the operations in `e`'s factors imply, as expressions >= 0:
    `0 <= a - k*floordiv(a, k) < k`, `max(a, b) >= a, b`, `min(a, b) <= a, b`."""
    facts = []
    for m in e.terms:
        for f, _ in m:
            if f.var is not None:
                continue
            fe, (a, b) = DimExpr({((f, 1),): 1}, e.scope), f.operands
            if f.op == "floordiv" and not isinstance(b, DimExpr) and b > 0:
                r = a - b * fe
                facts += [_terms(r), _terms(b - 1 - r)]
            elif f.op == "mod" and isinstance(b, DimExpr) and _bounds(b)[0] > 0:
                facts.append(_terms(b - 1 - fe))
            elif f.op in ("max", "min"):
                sign = 1 if f.op == "max" else -1
                facts += [_terms(sign * (fe - a)), _terms(sign * (fe - b))]
    return facts


def _terms(e) -> dict:
    return e.terms if isinstance(e, DimExpr) else {(): e}


def _refine(terms: dict, facts: list[dict], scope: SymbolicScope, depth: int):
    """Bounds of `terms`: its interval, tightened by writing it as `rest + k*fact` (a fact
    is >= 0) for each fact sharing a term with it, `depth` times over."""
    lo, hi = _interval(terms, scope)
    for fact in facts if depth else ():
        for m, ce in terms.items():
            if not m or not fact.get(m):
                continue
            k = Fraction(ce, fact[m])
            rest = {t: terms.get(t, 0) - k * fact.get(t, 0) for t in {*terms, *fact}}
            rlo, rhi = _refine({t: c for t, c in rest.items() if c}, facts, scope, depth - 1)
            lo, hi = (max(lo, rlo), hi) if k > 0 else (lo, min(hi, rhi))
    return lo, hi


def _bounds(e) -> tuple[float, float]:
    """Integer lower and upper bounds of `e` over the values its variables may take."""
    if not isinstance(e, DimExpr):
        return e, e
    lo, hi = _refine(e.terms, e.scope._facts + _implicit_facts(e), e.scope, 2)
    return (lo if lo == -_INF else math.ceil(lo)), (hi if hi == _INF else math.floor(hi))
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
# Solving for the dimension variables
# ---------------------------------------------------------------------------------------------

_ASSERT_HELP = (". Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
                "#shape-assertion-errors for more details.")


# JAX: jax/_src/export/shape_poly.py _solve_dim_equations
def solve_dim_vars(avals) -> tuple[dict, list]:
    """Each dimension variable of `avals`' shapes as an expression of the argument sizes
    (variables named `args[i].shape[j]`), and the checks a call must pass: a list of
    `(kind, e1, e2, message_pieces)` with kind "==" or ">=" and the pieces strings and
    expressions (the values the message shows). Each equation `dim = size` solves for a
    variable that appears in it alone, once the others are known (`2*b` gives `b` with a
    check that the size is even), as JAX's. ValueError if some variable cannot be solved."""
    specs = ",".join(f"args[{i}].shape = ({', '.join(map(str, a.shape))})"
                     for i, a in enumerate(avals))
    specs = f" Using the following polymorphic shapes specifications: {specs}."
    eqns = [(d, f"args[{i}].shape[{j}]") for i, a in enumerate(avals)
            for j, d in enumerate(a.shape) if isinstance(d, DimExpr)]
    if not eqns:
        return {}, []
    scope = eqns[0][0].scope
    env: dict = {}
    solution: list = [" Obtained dimension variables: "]
    checks: list = []
    mismatch = "Input shapes do not match the polymorphic shapes specification. "

    def process(d: DimExpr, name: str) -> bool:
        size, var, var_k = DimExpr.var(name, scope), None, 0
        for m, c in d.sorted_terms():
            try:
                size = size - DimExpr({m: c}, scope).evaluate(env, _SymbolicOps)
            except _UnknownDimVar:
                if var is not None or len(m) != 1 or m[0][1] != 1 or m[0][0].var is None:
                    return False
                var, var_k = m[0][0].var, c
        if var is None:
            checks.append(("==", DimExpr.var(name, scope), d.evaluate(env, _SymbolicOps), [
                f"{mismatch}Found inconsistency between dimension size {name} (= ",
                DimExpr.var(name, scope), f") and the specification '{d}' (= ",
                d.evaluate(env, _SymbolicOps), ")." + specs, *solution, _ASSERT_HELP]))
            return True
        value, rem = (size, 0) if var_k == 1 else divmod(size, var_k)
        if var_k != 1:
            checks.append(("==", rem, 0, [f"{mismatch}Division had remainder ", rem,
                                          f" when computing the value of '{var}'." + specs,
                                          *solution, _ASSERT_HELP]))
        env[var] = value
        solution.extend([f"'{var}' = ", value, f" from specification '{d}' for dimension "
                         f"{name} (= ", DimExpr.var(name, scope), "), "])
        checks.append((">=", value, 1, [f"{mismatch}Expected value >= 1 for dimension "
                                        f"variable '{var}'." + specs, *solution,
                                        _ASSERT_HELP]))
        return True

    while eqns:
        left = [(d, name) for d, name in eqns if not process(d, name)]
        if len(left) == len(eqns):
            unsolved = set().union(*(d.variables() for d, _ in left)) - set(env)
            raise ValueError(
                f"Cannot solve for values of dimension variables {unsolved}. We can only "
                f"solve linear uni-variate constraints.{specs} Unprocessed specifications: " +
                ", ".join(f"'{d}' for dimension size {name}" for d, name in left) +
                ". Please see https://docs.jax.dev/en/latest/export/shape_poly.html"
                "#dimension-variables-must-be-solvable-from-the-input-shapes for more details.")
        eqns = left
    for c, kind, diff in scope._constraints:
        value = diff.evaluate(env, _SymbolicOps) if isinstance(diff, DimExpr) else diff
        checks.append((kind, value, 0, [
            f"Input shapes do not match the symbolic shape constraint {c}. Expected '{diff}' "
            f"to be {'greater or equal' if kind == '>=' else 'equal'} to 0, but found ", value,
            ". " + specs, *solution, _ASSERT_HELP]))
    return env, checks


class _SymbolicOps(_IntOps):
    """Evaluating an expression over other expressions (the solver's sizes)."""
    const = staticmethod(lambda c: c)
    max = staticmethod(lambda a, b: a.max(b) if isinstance(a, DimExpr) else
                       b.max(a) if isinstance(b, DimExpr) else max(a, b))
    min = staticmethod(lambda a, b: a.min(b) if isinstance(a, DimExpr) else
                       b.min(a) if isinstance(b, DimExpr) else min(a, b))


def check_dim_values(checks: list, env: dict[str, int]) -> None:
    """Raise JAX's ValueError for the first of `solve_dim_vars`' checks that the argument
    sizes in `env` (`args[i].shape[j]` -> int) fail."""
    for kind, e1, e2, pieces in checks:
        v1, v2 = evaluate(e1, env), evaluate(e2, env)
        if not (v1 == v2 if kind == "==" else v1 >= v2):
            raise ValueError("".join(p if isinstance(p, str) else str(evaluate(p, env))
                                     for p in pieces))


# ---------------------------------------------------------------------------------------------
# Parsing "b, 4", "2*b + 1", "floordiv(b, 2)"
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*^(),]))")
_OPERATIONS = ("floordiv", "mod", "max", "min")


# JAX: jax/_src/export/shape_poly.py _Parser
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
        raise ValueError(f"syntax error in symbolic shape {spec or self.spec}: {msg}")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def expect(self, tok: str) -> None:
        if self.next() != tok:
            self.fail(f"expecting {tok!r}")

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def shape(self) -> tuple:
        """Comma-separated dimensions, the whole possibly in parentheses."""
        wrapped = self.peek() == "(" and self._closes_at_end()
        self.i += wrapped
        dims: list = []
        while self.peek() not in (None, ")"):
            dims.append(self.dim())
            if self.peek() == ",":
                self.next()
            elif self.peek() not in (None, ")"):
                self.fail(f"in dimension {len(dims) - 1}: unexpected {self.peek()!r}")
        if wrapped:
            self.expect(")")
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r}")
        return tuple(dims)

    def _closes_at_end(self) -> bool:
        depth = 0
        for k, tok in enumerate(self.tokens):
            depth += (tok == "(") - (tok == ")")
            if depth == 0:
                return k == len(self.tokens) - 1
        return False

    def dim(self):
        out = self.term()
        while self.peek() in ("+", "-"):
            out = out + self.term() if self.next() == "+" else out - self.term()
        return out

    def term(self):
        out = self.power()
        while self.peek() == "*":
            self.next()
            out = out * self.power()
        return out

    def power(self):
        base = out = self.factor()
        if self.peek() == "^":
            self.next()
            tok = self.next()
            if tok is None or not tok.isdigit():
                self.fail("expecting an integer exponent after '^'")
            for _ in range(int(tok) - 1):
                out = out * base
        return out

    def factor(self):
        tok = self.next()
        if tok is None:
            self.fail("expecting a dimension but found the end")
        if tok == "-":
            return -self.factor()
        if tok == "(":
            out = self.dim()
            self.expect(")")
            return out
        if tok.isdigit():
            return int(tok)
        if tok in _OPERATIONS and self.peek() == "(":
            self.next()
            a = self.dim()
            self.expect(",")
            b = self.dim()
            self.expect(")")
            a, b = (x if isinstance(x, DimExpr) else DimExpr({(): x}, self.scope)
                    for x in (a, b))
            return {"floordiv": operator.floordiv, "mod": operator.mod,
                    "max": DimExpr.max, "min": DimExpr.min}[tok](a, b)
        if tok[0].isalpha() or tok[0] == "_":
            return DimExpr.var(tok, self.scope)
        self.fail(f"expecting a name or a number but found {tok!r}")


def _parse_one(text: str, scope: SymbolicScope, spec: str):
    p = _Parser(text, scope, spec)
    d = p.dim()
    if p.peek() is not None:
        p.fail(f"unexpected {p.peek()!r}")
    return d


# JAX: jax/_src/export/shape_poly.py symbolic_shape
def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: SymbolicScope | None = None) -> tuple:
    """The shape that `shape_spec` writes, e.g. `"b, 4"` -> `(b, 4)`, `"(b, 2*b + 1)"`,
    `"floordiv(b, 2), max(a, 3)"`.

    Args:
      shape_spec: comma-separated dimensions, each an integer or an expression of dimension
        variables (names) with `+`, `-`, `*`, `^` (an integer power) and `floordiv(e1, e2)`,
        `mod(e1, e2)`, `max(e1, e2)`, `min(e1, e2)`; may be wrapped in parentheses. None or
        "" is the shape `()`.
      constraints: strings `"e1 >= e2"`, `"e1 <= e2"`, `"e1 == e2"` for a new scope (see
        `SymbolicScope`).
      scope: the `SymbolicScope` the variables belong to (a new one if None); shapes used
        in one export must share their scope.
    Returns: a tuple of ints and `DimExpr`s.
    Raises: ValueError for a syntax error, a spec that is not a string, or both `scope` and
      `constraints`.
    """
    if shape_spec is not None and not isinstance(shape_spec, str):
        raise ValueError("polymorphic shape spec should be None or a string. "
                         f"Found {shape_spec!r}.")
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    return _Parser(shape_spec or "", scope, repr(shape_spec)).shape()


# JAX: jax/_src/export/shape_poly.py symbolic_args_specs
def symbolic_args_specs(args, shapes_specs, constraints: Sequence[str] = (), *,
                        scope: SymbolicScope | None = None):
    """`ShapeDtypeStruct`s with the dtypes of `args` (a pytree of arrays) and the shapes of
    `shapes_specs` (one string for every leaf, or a pytree of strings like `args`), all in
    one scope (`scope`, or a new one with `constraints`)."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    leaves, tree = tree_util.tree_flatten(args)
    specs = [shapes_specs] * len(leaves) if isinstance(shapes_specs, str) else \
        tree.flatten_up_to(shapes_specs)
    return tree.unflatten([core.ShapeDtypeStruct(symbolic_shape(s, scope=scope), x.dtype)
                           for x, s in zip(leaves, specs)])
