"""The rule-coverage matrix: every primitive x every rule table has a rule, or using that
transformation raises an error that names the primitive. Also: every `# JAX: path symbol` bridge
note in minijax/ points at a file and a symbol that exist in the installed JAX.

The matrix is what chapters/09-primitives.md shows as a table (`coverage_table()` renders it).
"""

import importlib
import pathlib
import pkgutil
import re

import jax
import numpy as np
import pytest
from lax_test_util import ALL_CASES, LINEAR_PRIMS

import minijax
import minijax.lax.lax as lax_module
from minijax import core
from minijax.ad_util import add_jaxvals_p
from minijax.core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var
from minijax.interpreters import ad, batching, mlir
from minijax.pjit import jit_p


def _primitives() -> list[core.Primitive]:
    """Every Primitive object defined at module level anywhere in the minijax package."""
    found = {id(add_jaxvals_p): add_jaxvals_p, id(jit_p): jit_p}
    for info in pkgutil.walk_packages(minijax.__path__, "minijax."):
        module = importlib.import_module(info.name)
        found.update({id(p): p for p in vars(module).values() if isinstance(p, core.Primitive)})
    return sorted(found.values(), key=lambda p: p.name)


PRIMITIVES = _primitives()
TABLES = ["impl", "abstract_eval", "jvp", "transpose", "batching", "lowering"]
# Primitives with no operands are never batched: BatchTrace binds them in the parent trace.
NO_OPERANDS = {"iota", "empty2", "platform_index"}


def has_rule(prim: core.Primitive, table: str) -> bool:
    if table in ("impl", "abstract_eval"):
        return (table in vars(prim)
                or getattr(type(prim), table) is not getattr(core.Primitive, table))
    if table == "lowering":  # on the CPU these tests run on (a rule for it, or for all)
        return mlir.has_lowering(prim, "cpu")
    return prim in {"jvp": ad.primitive_jvps, "transpose": ad.primitive_transposes,
                    "batching": batching.primitive_batchers}[table]


def _one_eqn_jaxpr(prim: core.Primitive) -> Jaxpr:
    # Only the rule lookup is exercised, which happens before operands or params are read.
    aval = ShapedArray((3,), np.float32)
    a, b = Var(aval), Var(aval)
    return Jaxpr([], [a], [b], [JaxprEqn([a], [b], prim, {}, effects=frozenset())])


def missing_rule_error(prim: core.Primitive, table: str) -> Exception:
    """Use `table`'s transformation on `prim` (which has no rule there); return the error."""
    x = np.ones(3, np.float32)
    run = {
        "impl": lambda: prim.impl(x),
        "abstract_eval": lambda: minijax.make_jaxpr(lambda v: prim.bind(v))(x),
        "jvp": lambda: minijax.jvp(lambda v: prim.bind(v), (x,), (x,)),
        "transpose": lambda: ad.backward_pass(
            _one_eqn_jaxpr(prim), [], [ad.UndefinedPrimal(ShapedArray((3,), np.float32))], [x]),
        "batching": lambda: minijax.vmap(lambda v: prim.bind(v))(np.ones((2, 3), np.float32)),
        "lowering": lambda: mlir.lower_jaxpr_to_module(ClosedJaxpr(_one_eqn_jaxpr(prim), [])),
    }[table]
    with pytest.raises(NotImplementedError) as info:
        run()
    assert core.trace_ctx.trace is core.eval_trace
    return info.value


def coverage_table() -> str:
    """The matrix as a Markdown table: a rule, `raises` (an error naming the primitive), or n/a."""
    rows = ["| primitive | " + " | ".join(TABLES) + " |",
            "|---" * (len(TABLES) + 1) + "|"]
    for p in PRIMITIVES:
        cells = []
        for t in TABLES:
            if has_rule(p, t):
                cells.append("yes")
            elif t == "batching" and p.name in NO_OPERANDS:
                cells.append("n/a")
            else:
                cells.append("raises")
        rows.append(f"| {p.name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


@pytest.mark.parametrize("prim", PRIMITIVES, ids=lambda p: p.name)
def test_rule_coverage(prim):
    for table in TABLES:
        if table == "transpose":
            linear = prim.name in LINEAR_PRIMS
            assert has_rule(prim, table) == linear, (
                f"'{prim.name}' {'lacks' if linear else 'has'} a transpose rule; update "
                "LINEAR_PRIMS (tests/lax_test_util.py) if it is linear in some operand")
        if table == "batching" and prim.name in NO_OPERANDS:
            assert not has_rule(prim, table)
            continue
        if not has_rule(prim, table):
            err = missing_rule_error(prim, table)
            assert f"'{prim.name}'" in str(err), f"{table} error does not name it: {err}"


def test_coverage_table_lists_every_primitive():
    table = coverage_table()
    assert len(table.splitlines()) == len(PRIMITIVES) + 2
    for p in PRIMITIVES:
        assert f"| {p.name} |" in table


def test_missing_rules_raise_errors_naming_the_primitive():
    # A primitive with no rules at all: every transformation says which primitive and which rule.
    prim = core.Primitive("no_rules_here")
    for table in TABLES:
        assert not has_rule(prim, table)
        err = missing_rule_error(prim, table)
        assert "'no_rules_here'" in str(err), (table, err)


def test_iota_is_not_batched_but_works_under_vmap():
    iota_p = lax_module.iota_p
    assert iota_p not in batching.primitive_batchers
    x = np.ones((4, 5), np.float32)
    f = lambda J, v: J.lax.add(v, J.lax.broadcasted_iota(np.float32, (5,), 0))
    got = minijax.vmap(lambda v: f(minijax, v))(x)
    np.testing.assert_allclose(got, jax.vmap(lambda v: f(jax, v))(x))
    # under a batched value, iota's equation stays unbatched
    jaxpr = minijax.make_jaxpr(minijax.vmap(lambda v: f(minijax, v)))(x).jaxpr
    (eqn,) = [e for e in jaxpr.eqns if e.primitive is iota_p]
    assert eqn.outvars[0].aval.shape == (5,)


def test_linear_primitives_are_known_primitives():
    names = {p.name for p in PRIMITIVES}
    assert LINEAR_PRIMS <= names, LINEAR_PRIMS - names


ASSIGNED = ["neg", "sin", "cos", "exp", "log", "log1p", "tanh", "logistic", "sqrt", "rsqrt",
            "abs", "sign", "floor", "not", "stop_gradient", "integer_pow", "add", "sub", "mul",
            "div", "rem", "pow", "max", "min", "and", "or", "eq", "ne", "lt", "le", "gt", "ge",
            "select_n", "convert_element_type", "broadcast_in_dim", "reshape", "transpose",
            "squeeze", "reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin",
            "dot_general", "iota", "slice", "concatenate", "pad", "rev", "add_any"]


def test_case_table_exercises_each_core_primitive():
    # lax_test/lax_autodiff_test/lax_vmap_test reach each primitive through tests/lax_test_util.py
    covered = {c.prim for c in ALL_CASES}
    assert set(ASSIGNED) <= covered, set(ASSIGNED) - covered
    names = {p.name for p in PRIMITIVES}
    assert set(ASSIGNED) <= names, set(ASSIGNED) - names
    # and the cases really bind the primitive they are filed under
    for case in ALL_CASES:
        args = case.args(np.random.RandomState(0))
        jaxpr = minijax.make_jaxpr(lambda *a, c=case: c(minijax, *a))(*args).jaxpr
        assert case.prim in {e.primitive.name for e in jaxpr.eqns}, case.name


# ---------------------------------------------------------------------------------------------
# Bridge notes: `# JAX: jax/_src/<file>.py Symbol[.method] — ...`
# ---------------------------------------------------------------------------------------------

MINIJAX_DIR = pathlib.Path(minijax.__file__).parent
JAX_ROOT = pathlib.Path(jax.__file__).parent.parent
# a bridge note names a .py file first (other "# JAX: ..." comments are prose)
_NOTE = re.compile(r"^\s*# JAX: (\S+\.py) ([A-Za-z_][\w.]*)")


def _bridge_notes():
    notes = []
    for path in sorted(MINIJAX_DIR.rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            m = _NOTE.match(line)
            if m:
                notes.append((f"{path.relative_to(MINIJAX_DIR.parent)}:{lineno}", m.group(1),
                              m.group(2)))
    return notes


def _defines(text: str, name: str, method: bool = False) -> bool:
    """`name` is defined in `text`: a class or function, or an assigned (maybe annotated)
    variable — at the top level, or anywhere for a `method` (or class attribute)."""
    n, lead = re.escape(name), r"\s*" if method else ""
    kinds = "def" if method else "class|def"
    pattern = rf"^\s*(?:async\s+)?(?:{kinds})\s+{n}\b|^{lead}{n}\s*(?::[^=\n]*)?=(?!=)"
    return re.search(pattern, text, re.M) is not None


def test_bridge_notes_exist():
    assert len(_bridge_notes()) > 50


@pytest.mark.parametrize("where,path,symbol", _bridge_notes(), ids=lambda v: str(v))
def test_bridge_note_names_real_jax_symbol(where, path, symbol):
    assert path.startswith("jax/") and path.endswith(".py"), f"{where}: bad path {path}"
    target = JAX_ROOT / path
    assert target.is_file(), f"{where}: {path} does not exist in jax {jax.__version__}"
    text = target.read_text()
    first, *rest = symbol.split(".")
    assert _defines(text, first), f"{where}: {first} is not defined in {path}"
    for part in rest:
        assert _defines(text, part, method=True), f"{where}: {symbol} not found in {path}"
