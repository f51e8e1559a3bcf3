"""Tests for minijax/core.py, minijax/tree_util.py and minijax/dtypes.py, against real JAX.

One program, two modules: `def program(J): ...` runs with `J=jax` and `J=minijax`, and JAX's
result is the expected one (values, dtypes, weak types, pytree structure, printed jaxprs).
"""

import collections

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import minijax
import minijax.numpy as mjnp
from minijax import core, dtypes, tree_util
from minijax.core import ShapedArray
from minijax.interpreters import partial_eval as pe

BOTH = pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])


# ---------------------------------------------------------------------------------------------
# ShapedArray
# ---------------------------------------------------------------------------------------------

def test_shaped_array_attributes():
    a = ShapedArray((2, 3), np.float32)
    assert a.shape == (2, 3) and a.dtype == np.float32 and not a.weak_type
    assert a.ndim == 2 and a.size == 6
    assert ShapedArray((), np.int32, weak_type=True).weak_type
    assert ShapedArray([4], np.int32).shape == (4,)  # shapes become tuples


def test_shaped_array_equality_and_hash():
    a = ShapedArray((2,), np.float32)
    assert a == ShapedArray((2,), np.float32)
    assert hash(a) == hash(ShapedArray((2,), np.float32))
    assert a != ShapedArray((3,), np.float32)
    assert a != ShapedArray((2,), np.int32)
    assert a != ShapedArray((2,), np.float32, weak_type=True)
    # typematch ignores weak_type, as JAX's does
    assert core.typematch(a, ShapedArray((2,), np.float32, weak_type=True))
    assert not core.typematch(a, ShapedArray((2,), np.float16))


def test_shaped_array_update_and_strip_weak_type():
    a = ShapedArray((2,), np.float32, weak_type=True)
    assert a.update(shape=(5, 1)) == ShapedArray((5, 1), np.float32, weak_type=True)
    assert a.update(dtype=np.int32).dtype == np.int32
    assert a.strip_weak_type() == ShapedArray((2,), np.float32)


@pytest.mark.parametrize("shape,dtype", [((2, 3), np.float32), ((), np.int32), ((4,), np.bool_),
                                         ((1, 2), jjnp.bfloat16), ((3,), np.uint8),
                                         ((), np.float16)])
def test_shaped_array_str_short_matches_jax(shape, dtype):
    want = jax.core.ShapedArray(shape, dtype).str_short(short_dtypes=True)
    assert ShapedArray(shape, dtype).str_short() == want


def test_tangent_aval():
    assert ShapedArray((2,), np.float32).to_tangent_aval() == ShapedArray((2,), np.float32)
    assert ShapedArray((2,), np.int32).to_tangent_aval().dtype == dtypes.float0


@pytest.mark.parametrize("make", [
    lambda J: 1.0, lambda J: 2, lambda J: True,
    lambda J: np.float32(1.0), lambda J: np.ones((2, 3), np.float64),
    lambda J: np.arange(3, dtype=np.int64), lambda J: J.numpy.ones(2),
    lambda J: J.numpy.ones(2) * 2.0, lambda J: J.numpy.arange(3) * 2.0,
], ids=["float", "int", "bool", "np_f32", "np_f64", "np_i64", "jnp_ones", "weak_mul",
        "int_times_float"])
def test_get_aval_matches_jax(make):
    want = jax.typeof(make(jax))
    got = core.get_aval(make(minijax))
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)


def test_get_aval_rejects_non_arrays():
    with pytest.raises(TypeError, match="not a valid minijax type"):
        core.get_aval("hello")


# ---------------------------------------------------------------------------------------------
# Pytrees
# ---------------------------------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])


class Box:
    """A class registered with register_pytree_node (children: the contents; aux: the label)."""

    def __init__(self, label, contents):
        self.label, self.contents = label, contents

    def __eq__(self, other):
        return type(other) is Box and (self.label, self.contents) == (other.label, other.contents)


for _tu in (jax.tree_util, tree_util):
    _tu.register_pytree_node(Box, lambda b: ((b.contents,), b.label),
                             lambda label, children: Box(label, children[0]))


class Pair:
    """A class registered with register_pytree_node_class in both libraries."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.b, self.a), "pair"  # children deliberately in reverse order

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "pair"
        b, a = children
        return cls(a, b)

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)


class JaxPair(Pair):
    pass


jax.tree_util.register_pytree_node_class(JaxPair)
tree_util.register_pytree_node_class(Pair)

TREES = [
    1,
    (1, 2),
    [1, [2, 3], (4,)],
    {"b": 1, "a": 2, "c": [3, 4]},
    None,
    (None, 1, [None, 2]),
    [],
    {},
    Point(1, (2, 3)),
    Box("lbl", [1, {"z": 2, "y": 3}]),
    {"p": Point(x=[1, 2], y=None), "q": (Box("k", 3),)},
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_tree_flatten_leaf_order_matches_jax(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    assert leaves == jax.tree_util.tree_leaves(tree)
    assert treedef.num_leaves == jax.tree_util.tree_structure(tree).num_leaves
    assert tree_util.tree_unflatten(treedef, leaves) == tree


def test_register_pytree_node_class_leaf_order():
    tree = [Pair(1, (2, 3)), 4]
    jtree = [JaxPair(1, (2, 3)), 4]
    leaves = tree_util.tree_leaves(tree)
    assert leaves == jax.tree_util.tree_leaves(jtree) == [2, 3, 1, 4]
    rebuilt = tree_util.tree_unflatten(tree_util.tree_structure(tree), [10, 20, 30, 40])
    assert rebuilt == [Pair(30, (10, 20)), 40]


def test_tree_map_and_structure_equality():
    tree = {"a": (1.0, 2.0), "b": [3.0]}
    out = tree_util.tree_map(lambda x, y: x + y, tree, tree)
    assert out == jax.tree_util.tree_map(lambda x, y: x + y, tree, tree)
    assert tree_util.tree_structure(tree) == tree_util.tree_structure(out)
    assert tree_util.tree_structure((1, 2)) != tree_util.tree_structure([1, 2])
    with pytest.raises(ValueError):
        tree_util.tree_map(lambda x, y: x, tree, {"a": (1.0, 2.0)})


def test_tree_unflatten_wrong_leaf_count():
    _, treedef = tree_util.tree_flatten((1, 2))
    with pytest.raises(ValueError):
        tree_util.tree_unflatten(treedef, [1, 2, 3])


def test_is_leaf():
    tree = {"a": (1, 2), "b": (3,)}
    pred = lambda x: isinstance(x, tuple)
    assert tree_util.tree_leaves(tree, is_leaf=pred) == jax.tree_util.tree_leaves(tree,
                                                                                  is_leaf=pred)


# ---------------------------------------------------------------------------------------------
# make_jaxpr: printed text equals JAX's
# ---------------------------------------------------------------------------------------------

_C = np.arange(3.0, dtype=np.float32)

# minijax names variables as JAX does (a, b, ... in order of first appearance) and prints in
# JAX's grammar, so for programs whose primitives carry the same params the texts are compared
# verbatim. (Programs like jnp.sum are left out: JAX's reduce_sum carries an extra
# `out_sharding` param that minijax does not have.)
GOLDEN = {
    "sin": (lambda J: lambda x: J.numpy.sin(x), (np.ones(3, np.float32),)),
    "mul_add_literal": (lambda J: lambda x: x * 2.0 + 1.0, (np.ones(3, np.float32),)),
    "closed_over_const": (lambda J: lambda x: (x + _C, x * _C), (np.ones(3, np.float32),)),
    "neg_exp_log": (lambda J: lambda x: J.numpy.log(J.numpy.exp(-x)),
                    (np.ones((2, 3), np.float32),)),
    "two_outputs": (lambda J: lambda x, y: (x * y, x - y),
                    (np.ones(3, np.float32), np.ones(3, np.float32))),
    "integer_pow": (lambda J: lambda x: x ** 2, (np.ones(4, np.float32),)),
    "no_equations": (lambda J: lambda x, y: x, (1.0, np.int32(2))),
    "int_mul_weak": (lambda J: lambda x: x * 2, (np.arange(3, dtype=np.int32),)),
    "transpose": (lambda J: lambda x: x.T, (np.ones((2, 3), np.float32),)),
    "maximum_relu": (lambda J: lambda x: J.numpy.maximum(x, 0.0), (np.ones(3, np.float32),)),
    "neg_tanh_cos": (lambda J: lambda x: -J.numpy.tanh(x) * J.numpy.cos(x),
                     (np.ones(2, np.float32),)),
    # reverse mode: the residuals, the dead primal output `_` and the linear part all agree
    "grad_sin_mul": (lambda J: J.grad(lambda x: J.numpy.sin(x) * 2.0), (1.0,)),
    "grad_weak_to_strong": (lambda J: J.grad(lambda x: x * np.float32(2)), (1.0,)),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_make_jaxpr_text_equals_jax(name):
    program, args = GOLDEN[name]
    want = str(jax.make_jaxpr(program(jax))(*args))
    got = str(minijax.make_jaxpr(program(minijax))(*args))
    assert got == want


def test_make_jaxpr_pytree_args():
    def program(J):
        def f(params, x):
            return {"y": params["w"] * x + params["b"][0], "n": -x}
        return f
    params = {"w": np.ones(3, np.float32), "b": (np.float32(2.0),)}
    x = np.ones(3, np.float32)
    want = jax.make_jaxpr(program(jax))(params, x)
    got = minijax.make_jaxpr(program(minijax))(params, x)
    assert str(got) == str(want)
    assert [a.str_short() for a in got.in_avals] == ["f32[]", "f32[3]", "f32[3]"]


def test_make_jaxpr_static_argnums():
    f = lambda J: lambda x, n: x * n
    want = jax.make_jaxpr(f(jax), static_argnums=1)(np.ones(2, np.float32), 3)
    got = minijax.make_jaxpr(f(minijax), static_argnums=1)(np.ones(2, np.float32), 3)
    assert str(got) == str(want)


# ---------------------------------------------------------------------------------------------
# eval_jaxpr, check_jaxpr, DCE
# ---------------------------------------------------------------------------------------------

def _prog(J):
    jnp = J.numpy

    def f(x, y):
        z = jnp.sin(x) * y + _C
        return jnp.exp(z) - 1.0, z.sum()
    return f


def test_eval_jaxpr_round_trip():
    x, y = np.linspace(-1, 1, 3).astype(np.float32), np.full(3, 0.5, np.float32)
    closed = minijax.make_jaxpr(_prog(minijax))(x, y)
    outs = core.eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    want = _prog(jax)(x, y)
    assert len(outs) == 2
    for o, w in zip(outs, want):
        np.testing.assert_allclose(np.asarray(o), np.asarray(w), rtol=1e-6)
        assert o.dtype == w.dtype
    core.check_jaxpr(closed.jaxpr)


def test_eval_jaxpr_wrong_arg_count():
    closed = minijax.make_jaxpr(lambda x: x + 1.0)(1.0)
    with pytest.raises(TypeError):
        core.eval_jaxpr(closed.jaxpr, closed.consts)


def test_eval_jaxpr_under_a_transformation():
    closed = minijax.make_jaxpr(lambda x: mjnp.sin(x) * x)(1.0)
    g = minijax.grad(lambda x: core.eval_jaxpr(closed.jaxpr, closed.consts, x)[0])(0.3)
    want = jax.grad(lambda x: jjnp.sin(x) * x)(0.3)
    np.testing.assert_allclose(float(g), float(want), rtol=1e-6)


def _fresh_jaxpr():
    return minijax.make_jaxpr(lambda x: mjnp.exp(mjnp.sin(x)) * 2.0)(np.ones(3, np.float32)).jaxpr


def test_check_jaxpr_accepts_traced_jaxprs():
    core.check_jaxpr(_fresh_jaxpr())


def test_check_jaxpr_use_before_definition():
    j = _fresh_jaxpr()
    broken = core.Jaxpr(j.constvars, j.invars, j.outvars, j.eqns[::-1])
    with pytest.raises(core.JaxprTypeError, match="before it is defined"):
        core.check_jaxpr(broken)


def test_check_jaxpr_wrong_output_type():
    j = _fresh_jaxpr()
    e = j.eqns[0]
    bad_var = core.Var(ShapedArray((4,), np.float32))
    eqns = [e.replace(outvars=[bad_var])] + j.eqns[1:]
    with pytest.raises(core.JaxprTypeError, match="abstract evaluation rule gives f32\\[3\\]"):
        core.check_jaxpr(core.Jaxpr(j.constvars, j.invars, j.outvars, eqns))


def test_check_jaxpr_variable_defined_twice():
    j = _fresh_jaxpr()
    e0, e1 = j.eqns[0], j.eqns[1]
    eqns = [e0, e1.replace(outvars=list(e0.outvars))] + j.eqns[2:]
    with pytest.raises(core.JaxprTypeError, match="defined twice"):
        core.check_jaxpr(core.Jaxpr(j.constvars, j.invars, j.outvars, eqns))


def test_check_jaxpr_undefined_outvar():
    j = _fresh_jaxpr()
    stray = core.Var(ShapedArray((3,), np.float32))
    with pytest.raises(core.JaxprTypeError):
        core.check_jaxpr(core.Jaxpr(j.constvars, j.invars, [stray], j.eqns))


def test_dce_removes_unused_equations():
    def f(x, y):
        unused = mjnp.cos(y) * 3.0  # noqa: F841  (dead code, on purpose)
        return mjnp.sin(x) + 1.0, mjnp.exp(y)

    closed = minijax.make_jaxpr(f)(np.ones(2, np.float32), np.ones(2, np.float32))
    assert [e.primitive.name for e in closed.eqns] == ["cos", "mul", "sin", "add", "exp"]
    new, used_inputs = pe.dce_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in new.eqns] == ["sin", "add", "exp"]
    assert used_inputs == [True, True]
    core.check_jaxpr(new)
    # dropping the second output also drops exp and the now-unused input y
    new2, used2 = pe.dce_jaxpr(closed.jaxpr, [True, False])
    assert [e.primitive.name for e in new2.eqns] == ["sin", "add"]
    assert used2 == [True, False] and len(new2.invars) == 1 and len(new2.outvars) == 1
    x = np.array([0.1, 0.2], np.float32)
    (out,) = core.eval_jaxpr(new2, [], x)
    np.testing.assert_allclose(np.asarray(out), np.sin(x) + 1, rtol=1e-6)
    # instantiate keeps every input
    new3, used3 = pe.dce_jaxpr(closed.jaxpr, [True, False], instantiate=True)
    assert len(new3.invars) == 2 and used3 == [True, True]


# ---------------------------------------------------------------------------------------------
# Weak types and promotion
# ---------------------------------------------------------------------------------------------

WEAK_PROGRAMS = {
    "f32_times_py_float": lambda J: J.numpy.ones(3, J.numpy.float32) * 2.0,
    "py_float_plus_f16": lambda J: 1.5 + J.numpy.ones(3, J.numpy.float16),
    "bf16_times_py_int": lambda J: J.numpy.ones(2, J.numpy.bfloat16) * 3,
    "i32_times_py_float": lambda J: J.numpy.arange(3, dtype=J.numpy.int32) * 2.0,
    "i8_plus_py_int": lambda J: J.numpy.ones(2, J.numpy.int8) + 1,
    "u8_plus_py_int": lambda J: J.numpy.ones(2, J.numpy.uint8) + 1,
    "asarray_py_float": lambda J: J.numpy.asarray(2.0),
    "array_py_float": lambda J: J.numpy.array(2.0),
    "weak_plus_weak": lambda J: J.numpy.arange(3) * 2.0 + 1,
    "weak_f32_plus_f16": lambda J: (J.numpy.arange(3) * 2.0) + J.numpy.ones(3, J.numpy.float16),
    "bool_plus_py_int": lambda J: J.numpy.ones(2, J.numpy.bool_) + 1,
    "i32_plus_f16": lambda J: J.numpy.ones(2, J.numpy.int32) + J.numpy.ones(2, J.numpy.float16),
    "u8_plus_i8": lambda J: J.numpy.ones(2, J.numpy.uint8) + J.numpy.ones(2, J.numpy.int8),
    "f32_true_divide_int": lambda J: J.numpy.arange(3) / 2,
    "sin_of_int": lambda J: J.numpy.sin(J.numpy.arange(3)),
    "jit_weak_arg": lambda J: J.jit(lambda x: x * 2)(1.0),
}


@pytest.mark.parametrize("name", sorted(WEAK_PROGRAMS))
def test_weak_type_and_dtype_match_jax(name):
    want = WEAK_PROGRAMS[name](jax)
    got = WEAK_PROGRAMS[name](minijax)
    assert got.dtype == want.dtype
    assert got.weak_type == want.weak_type
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64))


def test_weak_type_in_jaxpr_avals():
    f = lambda x: x * 2.0
    want = jax.make_jaxpr(f)(np.arange(3, dtype=np.int32))
    got = minijax.make_jaxpr(f)(np.arange(3, dtype=np.int32))
    assert got.out_avals[0].weak_type == want.out_avals[0].weak_type
    assert got.out_avals[0].dtype == want.out_avals[0].dtype


_PROMO_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                 np.uint32, np.uint64, np.float16, jjnp.bfloat16, np.float32, np.float64]


@pytest.mark.parametrize("a", _PROMO_DTYPES, ids=lambda d: np.dtype(d).name)
def test_promote_types_table_matches_jax(a):
    # x64 is off in both: 64-bit results are canonicalized to 32 bits.
    assert not jax.config.jax_enable_x64 and not dtypes.x64_enabled()
    for b in _PROMO_DTYPES:
        want = jjnp.promote_types(a, b)
        got = dtypes.promote_types(a, b)
        assert got == want, (np.dtype(a).name, np.dtype(b).name, got, want)
        assert mjnp.promote_types(a, b) == want


def test_promote_types_python_types_are_weak():
    # JAX: the built-in types int/float/complex stand for weak types in promote_types
    for a in (int, float):
        for b in (np.int8, np.uint8, np.float16, jjnp.bfloat16, int, float, np.bool_):
            assert dtypes.promote_types(a, b) == jjnp.promote_types(a, b), (a, b)


@pytest.mark.parametrize("a", _PROMO_DTYPES, ids=lambda d: np.dtype(d).name)
def test_result_type_with_python_scalars_matches_jax(a):
    for scalar in (1, 1.0, True):
        want = jjnp.result_type(np.dtype(a), scalar)
        assert dtypes.result_type(np.dtype(a), scalar) == want, (np.dtype(a).name, scalar)


def test_canonicalize_dtype():
    assert dtypes.canonicalize_dtype(np.int64) == np.int32
    assert dtypes.canonicalize_dtype(np.float64) == np.float32
    assert dtypes.canonicalize_dtype(np.uint64) == np.uint32
    assert dtypes.canonicalize_dtype(np.float16) == np.float16
    assert mjnp.zeros(2, np.float64).dtype == jjnp.zeros(2, np.float64).dtype


# ---------------------------------------------------------------------------------------------
# Traces and the tracing context
# ---------------------------------------------------------------------------------------------

def test_trace_context_restored_after_transformations():
    assert core.trace_ctx.trace is core.eval_trace
    minijax.grad(lambda x: x * x)(1.0)
    minijax.vmap(lambda x: x * 2)(np.ones(2, np.float32))
    minijax.make_jaxpr(lambda x: x + 1)(1.0)
    assert core.trace_ctx.trace is core.eval_trace


def test_tracer_avals_inside_make_jaxpr():
    seen = []

    def f(x):
        seen.append((x.shape, x.dtype, x.ndim, x.size, x.weak_type))
        return x
    minijax.make_jaxpr(f)(np.ones((2, 3), np.float16))
    assert seen == [((2, 3), np.float16, 2, 6, False)]


def test_tracers_are_unhashable():
    def f(x):
        with pytest.raises(TypeError):
            hash(x)
        return x
    minijax.make_jaxpr(f)(1.0)


# ---------------------------------------------------------------------------------------------
# Error families (issue 18): conversions of tracers and broadcasting, against JAX
# ---------------------------------------------------------------------------------------------

def test_error_classes_in_errors_module_as_in_jax():
    for name in ("ConcretizationTypeError", "TracerBoolConversionError",
                 "TracerIntegerConversionError", "TracerArrayConversionError",
                 "UnexpectedTracerError"):
        ours, theirs = getattr(minijax.errors, name), getattr(jax.errors, name)
        assert issubclass(ours, TypeError) == issubclass(theirs, TypeError)
        assert (issubclass(ours, minijax.errors.ConcretizationTypeError)
                == issubclass(theirs, jax.errors.ConcretizationTypeError)), name


_V = np.arange(3, dtype=np.float32)

# what Python does to a traced value -> the error class JAX raises (looked up by name)
_CONVERSIONS = {
    "bool_of_scalar": (lambda x: bool(x), 1.0),
    "if_on_scalar": (lambda x: 1.0 if x > 0 else 0.0, 1.0),
    "not_of_scalar": (lambda x: not x, 1.0),
    "int_of_scalar": (lambda x: int(x), 1.0),
    "float_of_scalar": (lambda x: float(x), 1.0),
    "complex_of_scalar": (lambda x: complex(x), 1.0),
    "index_of_int_scalar": (lambda i: range(i), np.int32(2)),
    "list_index_by_int": (lambda i: [1, 2][i], np.int32(1)),
    "index_of_float_scalar": (lambda x: range(x), 1.0),
    "bool_of_vector": (lambda x: bool(x), _V),
    "int_of_vector": (lambda x: int(x), _V),
    "float_of_vector": (lambda x: float(x), _V),
    "index_of_int_vector": (lambda i: [1][i], np.arange(2, dtype=np.int32)),
}


@pytest.mark.parametrize("name", list(_CONVERSIONS))
def test_tracer_conversion_errors_match_jax(name):
    fun, arg = _CONVERSIONS[name]
    raised = {}
    for J in (jax, minijax):
        with pytest.raises(Exception) as e:
            J.jit(fun)(arg)
        raised[J.__name__] = e.value
    theirs, ours = raised["jax"], raised["minijax"]
    if type(theirs).__name__ in dir(jax.errors):
        assert type(ours).__name__ == type(theirs).__name__
        assert type(ours) is getattr(minijax.errors, type(theirs).__name__)
    else:  # a builtin: the same class
        assert type(ours) is type(theirs), (ours, theirs)
    assert core.current_trace() is core.eval_trace
    assert float(minijax.jit(lambda x: x * 2.0)(1.0)) == 2.0


def test_bool_conversion_error_is_a_concretization_error():
    with pytest.raises(minijax.errors.ConcretizationTypeError, match="bool()"):
        minijax.jit(lambda x: x if x > 0 else -x)(1.0)
    # the concrete value is used where the trace knows it (jvp of an eager value), as in JAX
    for J in (jax, minijax):
        assert float(J.grad(lambda x: x if x > 0 else -x)(-2.0)) == -1.0


@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2, 3), (2, 4)), ((3,), (2, 4)),
                                    ((2, 3), (4,)), ((3, 1), (2, 4, 5))],
                         ids=["3+4", "2x3+2x4", "3+2x4", "2x3+4", "3x1+2x4x5"])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "arctan2"])
def test_broadcasting_mismatch_errors_match_jax(shapes, op):
    a, b = (np.ones(s, np.float32) for s in shapes)
    for how in ("eager", "jit"):
        raised = {}
        for J in (jax, minijax):
            f = getattr(J.numpy, op)
            with pytest.raises(Exception) as e:
                (J.jit(f) if how == "jit" else f)(J.numpy.asarray(a), J.numpy.asarray(b))
            raised[J.__name__] = e.value
        # equal ranks: the lax op's TypeError; ranks to promote: jnp's ValueError
        assert type(raised["minijax"]) is type(raised["jax"]), (how, raised)
        assert core.current_trace() is core.eval_trace


def test_lax_broadcasting_mismatch_is_a_type_error_as_in_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError, match="add"):
            J.lax.add(np.ones(3, np.float32), np.ones(4, np.float32))


# ---------------------------------------------------------------------------------------------
# The eager path: one cached callable per signature (minijax/dispatch.py)
# ---------------------------------------------------------------------------------------------

_DOT_CASES = {  # dimension numbers NumPy computes as they are (dot, matmul), and two it does not
    "2x3.3x4": ((2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    "2x2x3.3x4": ((2, 2, 3), (3, 4), (((2,), (0,)), ((), ()))),
    "2x3.3": ((2, 3), (3,), (((1,), (0,)), ((), ()))),
    "3.3": ((3,), (3,), (((0,), (0,)), ((), ()))),
    "batched": ((2, 2, 3), (2, 3, 4), (((2,), (1,)), ((0,), (0,)))),
    "contract-first": ((3, 2), (3, 4), (((0,), (0,)), ((), ()))),
    "batch-last": ((2, 3, 5), (3, 4, 5), (((1,), (0,)), ((2,), (2,)))),
}


@pytest.mark.parametrize("dtype,pet", [(np.float32, None), (np.int8, np.int32),
                                       (np.float16, np.float32)],
                         ids=["f32", "i8->i32", "f16->f32"])
@pytest.mark.parametrize("case", list(_DOT_CASES))
def test_eager_dot_general_products_match_jax(case, dtype, pet):
    sa, sb, dn = _DOT_CASES[case]
    rng = np.random.RandomState(0)
    a, b = (rng.randint(-3, 4, s).astype(dtype) for s in (sa, sb))
    want = jax.lax.dot_general(a, b, dn, preferred_element_type=pet)
    for _ in range(2):  # the second call runs the signature the first one cached
        got = minijax.lax.dot_general(mjnp.asarray(a), mjnp.asarray(b), dn,
                                      preferred_element_type=pet)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_dot_general_eager_function_is_numpys_own_product():
    from minijax import dispatch
    from minijax.lax import lax as lax_internal
    rule = dispatch.specialized_impls[lax_internal.dot_general_p]

    def picked(sa, sb, dn, dtype=np.float32, pet=np.float32):
        return rule(ShapedArray(sa, dtype), ShapedArray(sb, dtype), dimension_numbers=dn,
                    precision=None, preferred_element_type=np.dtype(pet), out_sharding=None)
    for case in ("2x3.3x4", "2x2x3.3x4", "2x3.3", "3.3"):
        assert picked(*_DOT_CASES[case]) is np.ndarray.dot, case
    assert picked(*_DOT_CASES["batched"]) is np.matmul
    assert picked(*_DOT_CASES["contract-first"]) is None  # the general impl (einsum)
    assert picked(*_DOT_CASES["2x3.3x4"], dtype=np.int8, pet=np.int32) is None  # converts
    assert picked(*_DOT_CASES["2x3.3x4"], dtype=dtypes.bfloat16, pet=dtypes.bfloat16) is None


def test_eager_cached_signature_keeps_flags_placement_and_errors_as_jax():
    from minijax.config import config
    x = np.array([-1.0, 1.0], np.float32)
    xm = mjnp.asarray(x)
    for _ in range(2):  # cached, then run from the primitive's last signature
        assert np.isnan(np.asarray(mjnp.log(xm))[0])
    with config.override("jax_debug_nans", True):
        with pytest.raises(FloatingPointError, match="nan.*log"):
            mjnp.log(xm)
    assert np.isnan(np.asarray(mjnp.log(xm))[0])  # off again: the same cached signature
    # committed operands give committed results, alternating with uncommitted ones
    for J in (jax, minijax):
        xc = J.device_put(x, J.devices()[0])
        got = [J.numpy.log(v).committed for v in (xc, J.numpy.asarray(x), xc)]
        assert got == [True, False, True], J.__name__
    # an operand held as a device buffer (a jitted result) under the same signature
    y = minijax.jit(lambda a: a * 2)(xm)
    np.testing.assert_array_equal(np.asarray(mjnp.multiply(y, xm)), x * 2 * x)
    # after a cached product, a bad one still raises JAX's error naming the sizes
    msgs = []
    for J in (jax, minijax):
        a = J.numpy.ones((2, 3), np.float32)
        J.numpy.dot(a, J.numpy.ones((3, 4), np.float32))
        for f in (J.numpy.dot, J.numpy.matmul, lambda p, q: p @ q):
            with pytest.raises(TypeError) as e:
                f(a, J.numpy.ones((4, 4), np.float32))
            msgs.append(str(e.value))
    assert msgs[:3] == msgs[3:] and "(3,) and (4,)" in msgs[0]
    assert core.current_trace() is core.eval_trace
