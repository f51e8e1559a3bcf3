"""Tests for minijax.numpy and minijax.nn against jax.numpy and jax.nn.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree. A few gradients, and hypothesis over shapes/axes.
"""

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minijax
import minijax.test_util
from minijax.array import Array

RNG = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


A = _rand(2, 3)
B = _rand(3, 4)
V = _rand(3)
P = np.abs(_rand(2, 3)) + 0.5            # positive values for log/sqrt
I = np.array([[3, -7, 2], [-4, 5, 9]], np.int32)
J2 = np.array([[2, 3, -2], [3, -3, 4]], np.int32)  # nonzero divisors
BATCH = _rand(2, 3, 4)
C45, C245, C255, C42, C4 = _rand(4, 5), _rand(2, 4, 5), _rand(2, 5, 4), _rand(4, 2), _rand(4)
C123, C432, C34 = _rand(1, 2, 3), _rand(4, 3, 2), _rand(3, 4)
X432 = _rand(4, 3, 2)
_SORTED_NAN = np.array([-np.inf, -1, 0, 1, 2, 2, np.inf, np.nan, np.nan], np.float32)
_NEEDLES_NAN = np.array([np.nan, 1.5, 3, -np.inf, np.inf, 2, -0.0, -5], np.float32)


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    g_leaves, g_tree = minijax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert len(g_leaves) == len(w_leaves), (g_tree, w_tree)
    for g, w in zip(g_leaves, w_leaves):
        assert isinstance(g, Array), type(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        # (JAX returns e.g. jnp.reshape of a numpy array as numpy: not weak)
        assert g.weak_type == getattr(w, "weak_type", False), ("weak_type", g.weak_type, w)
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        else:
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=rtol, atol=atol)


def check(program, rtol=1e-5, atol=1e-6):
    """minijax runs `program` eagerly; the JAX reference runs it under `jax.jit` (same values,
    dtypes and weak types, and one XLA compilation per case instead of one per operation)."""
    assert_same(program(minijax), jax.jit(lambda: program(jax))(), rtol=rtol, atol=atol)


def cases(table):
    return pytest.mark.parametrize("name", sorted(table))


# ---------------------------------------------------------------------------------------------
# Array creation
# ---------------------------------------------------------------------------------------------

CREATION = {
    "array_list_float": lambda jnp: jnp.array([1.0, 2.0]),
    "array_list_int": lambda jnp: jnp.array([[1, 2], [3, 4]]),
    "array_nested_bool": lambda jnp: jnp.array([True, False]),
    "array_np_f64": lambda jnp: jnp.array(np.arange(3.0)),
    "array_dtype": lambda jnp: jnp.array([1, 2], dtype=jnp.float16),
    "array_py_scalar": lambda jnp: jnp.array(3.0),
    "asarray_np": lambda jnp: jnp.asarray(A),
    "asarray_int_scalar": lambda jnp: jnp.asarray(4),
    "asarray_dtype": lambda jnp: jnp.asarray(I, dtype=jnp.float32),
    "zeros": lambda jnp: jnp.zeros((2, 3)),
    "zeros_int": lambda jnp: jnp.zeros(4, jnp.int32),
    "ones": lambda jnp: jnp.ones((3,)),
    "ones_bf16": lambda jnp: jnp.ones(2, jnp.bfloat16),
    "zeros_like": lambda jnp: jnp.zeros_like(I),
    "ones_like": lambda jnp: jnp.ones_like(A),
    "ones_like_dtype": lambda jnp: jnp.ones_like(A, dtype=jnp.int32),
    "full": lambda jnp: jnp.full((2, 2), 7.0),
    "full_int": lambda jnp: jnp.full((3,), 2),
    "full_dtype": lambda jnp: jnp.full((2,), 1.5, jnp.float16),
    "arange_int": lambda jnp: jnp.arange(5),
    "arange_start_stop": lambda jnp: jnp.arange(2, 9, 3),
    "arange_float": lambda jnp: jnp.arange(0.0, 1.0, 0.25),
    "arange_dtype": lambda jnp: jnp.arange(4, dtype=jnp.float32),
    "linspace": lambda jnp: jnp.linspace(0.0, 1.0, 5),
    "linspace_no_endpoint": lambda jnp: jnp.linspace(-1, 1, 4, endpoint=False),
    # array bounds (broadcast together), the samples along `axis`; retstep; one sample; ints
    "linspace_array_bounds_axis": lambda jnp: jnp.linspace(
        jnp.array([0.0, 1.0]), jnp.array([[1.0], [3.0]]), 4, axis=-1),
    "linspace_retstep": lambda jnp: jnp.linspace(jnp.array([0.0, 1.0]), 4.0, 3, retstep=True),
    "linspace_one_sample": lambda jnp: jnp.linspace(
        jnp.array([0.0, 1.0]), 4.0, 1, endpoint=False, retstep=True),
    "linspace_int_dtype": lambda jnp: jnp.linspace(np.array([0, 3]), 10, 4, dtype=jnp.int32),
    "logspace_array_bounds": lambda jnp: jnp.logspace(jnp.array([0.0, 1.0]), 2.0, 3, axis=1),
    "geomspace_array_bounds": lambda jnp: jnp.geomspace(
        jnp.array([1.0, -2.0, 2.0]), jnp.array([100.0, -8.0, -8.0]), 3, axis=1),
    "eye": lambda jnp: jnp.eye(3),
    "eye_rect_k": lambda jnp: jnp.eye(2, 4, k=1),
    "eye_int": lambda jnp: jnp.eye(2, dtype=jnp.int32),
    "zeros_like_shape": lambda jnp: jnp.zeros_like(A, shape=4),
    "ones_like_shape_dtype": lambda jnp: jnp.ones_like(A, jnp.int32, (3, 1)),
    "full_like_array_fill": lambda jnp: jnp.full_like(A, np.array([1, 2, 3])),
    "full_like_array_fill_shape": lambda jnp: jnp.full_like(V, V[:, None], shape=(3, 3)),
    "zeros_shape_of_0d_arrays": lambda jnp: jnp.zeros((np.array(2), np.int64(3))),
}


@cases(CREATION)
def test_creation(name):
    check(lambda J: CREATION[name](J.numpy))


# ---------------------------------------------------------------------------------------------
# Elementwise math and operators
# ---------------------------------------------------------------------------------------------

ELEMENTWISE = {
    "sin": lambda jnp: jnp.sin(A),
    "cos": lambda jnp: jnp.cos(A),
    "tanh": lambda jnp: jnp.tanh(A),
    "exp": lambda jnp: jnp.exp(A),
    "log": lambda jnp: jnp.log(P),
    "log1p": lambda jnp: jnp.log1p(P),
    "sqrt": lambda jnp: jnp.sqrt(P),
    "abs": lambda jnp: jnp.abs(A),
    "abs_int": lambda jnp: jnp.abs(I),
    "sign": lambda jnp: jnp.sign(A),
    "floor": lambda jnp: jnp.floor(A * 3),
    "ceil": lambda jnp: jnp.ceil(A * 3),
    "square": lambda jnp: jnp.square(A),
    "reciprocal": lambda jnp: jnp.reciprocal(P),
    "negative_int": lambda jnp: jnp.negative(I),
    "sin_int": lambda jnp: jnp.sin(I),
    "exp_py_scalar": lambda jnp: jnp.exp(1.0),
    "maximum": lambda jnp: jnp.maximum(A, 0.0),
    "minimum_arrays": lambda jnp: jnp.minimum(A, A[::-1]),
    "maximum_int_float": lambda jnp: jnp.maximum(I, 0.5),
    "where": lambda jnp: jnp.where(A > 0, A, -1.0),
    "where_broadcast": lambda jnp: jnp.where(V > 0, A, 0),
    "where_int_float": lambda jnp: jnp.where(I > 0, I, 2.5),
    "clip": lambda jnp: jnp.clip(A, -0.5, 0.5),
    "clip_min_only": lambda jnp: jnp.clip(I, 0),
    "clip_max_only": lambda jnp: jnp.clip(A, max=0.1),
    "isfinite": lambda jnp: jnp.isfinite(jnp.array([1.0, np.inf, np.nan])),
    "isnan": lambda jnp: jnp.isnan(jnp.array([1.0, np.nan])),
    "logical_not": lambda jnp: jnp.logical_not(A > 0),
    "logical_and_or": lambda jnp: (jnp.logical_and(A > 0, A < 1), jnp.logical_or(A > 0, I > 0)),
    "power_float": lambda jnp: jnp.power(P, 1.5),
    "power_int_exponent": lambda jnp: jnp.power(A, 3),
    "add_broadcast": lambda jnp: jnp.add(A, V),
    "multiply_bool_int": lambda jnp: jnp.multiply(A > 0, I),
    "divide_ints": lambda jnp: jnp.divide(I, 2),
    "i8_plus_f16": lambda jnp: jnp.add(np.int8(3) * jnp.ones(2, jnp.int8),
                                       jnp.ones(2, jnp.float16)),
}


@cases(ELEMENTWISE)
def test_elementwise(name):
    check(lambda J: ELEMENTWISE[name](J.numpy))


OPERATORS = {
    "add": lambda x: x + 1,
    "radd": lambda x: 2.0 + x,
    "sub": lambda x: x - x[::-1],
    "rsub": lambda x: 1 - x,
    "mul": lambda x: x * 3,
    "truediv": lambda x: x / 4,
    "rtruediv": lambda x: 1.0 / (x + 10),
    "floordiv": lambda x: x // 2,
    "rfloordiv": lambda x: 7 // (x + 20),
    "mod": lambda x: x % 3,
    "rmod": lambda x: 7 % (x + 20),
    "pow_int": lambda x: x ** 2,
    "pow_3": lambda x: x ** 3,
    "neg": lambda x: -x,
    "abs": lambda x: abs(x),
    "eq": lambda x: x == x[::-1],
    "ne": lambda x: x != 2,
    "lt": lambda x: x < 0,
    "le": lambda x: x <= 1,
    "gt": lambda x: x > 0,
    "ge": lambda x: 0 >= x,
}


@cases(OPERATORS)
@pytest.mark.parametrize("which", ["float", "int"])
def test_operators(name, which):
    x = A * 5 if which == "float" else I
    check(lambda J: OPERATORS[name](J.numpy.asarray(x)))


def test_integer_floordiv_and_mod_signs():
    check(lambda J: (J.numpy.asarray(I) // J2, J.numpy.asarray(I) % J2,
                     J.numpy.floor_divide(I, J2), J.numpy.remainder(I, -3)))


def test_integer_floordiv_by_zero_and_its_jaxpr_as_jaxs():
    # XLA's integer division by zero gives -1 and its remainder the dividend; JAX's floor
    # correction (signs differ and the remainder is nonzero) then applies to those
    x = np.array([0, 1, -3, 7, -7, 5], np.int32)
    y = np.array([0, 0, 0, -2, 2, 5], np.int32)
    for a, b in ((x, y), (x.astype(np.uint8) % 8, np.array([0, 2, 3, 1, 0, 5], np.uint8))):
        check(lambda J, a=a, b=b: (J.numpy.floor_divide(J.numpy.asarray(a), b),
                                   J.jit(J.numpy.floor_divide)(a, b)))
        inner = jax.make_jaxpr(jax.numpy.floor_divide)(a, b).jaxpr.eqns[0].params["jaxpr"]
        jax_prims = [e.primitive.name for e in inner.eqns]
        mini_prims = [e.primitive.name for e in
                      minijax.make_jaxpr(minijax.numpy.floor_divide)(a, b).jaxpr.eqns]
        assert mini_prims == [p if p != "jit" else "select_n" for p in jax_prims]


def test_integer_to_negative_power_is_jaxs_type_error():
    for J in (jax, minijax):
        for f in (lambda J=J: J.numpy.asarray(I) ** -1, lambda J=J: J.jit(lambda x: x ** -2)(I)):
            with pytest.raises(TypeError, match="integer_pow"):
                f()


def test_matmul_operator():
    check(lambda J: (J.numpy.asarray(A) @ B, V @ J.numpy.asarray(B), J.numpy.asarray(A) @ V))


def test_matmul_dot_precision_and_preferred_element_type():
    """The keywords JAX's jnp.matmul / jnp.dot and lax.dot take (ints accumulated as floats,
    a result that is not weakly typed), and lax.dot's default dimension numbers."""
    Ib = I.T.copy()
    f32 = np.float32
    check(lambda J: (J.numpy.matmul(A, B, precision="highest"),
                     J.numpy.matmul(I, Ib, preferred_element_type=f32),
                     J.numpy.dot(I, Ib, precision="highest",
                                 preferred_element_type=f32),
                     J.numpy.dot(2.0, I, preferred_element_type=f32),
                     J.lax.dot(A, B), J.lax.dot(V, V, precision="highest"),
                     J.lax.dot(I, Ib, preferred_element_type=f32),
                     J.lax.dot(A, A, dimension_numbers=(((1,), (1,)), ((), ())))))
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="dimension_numbers must be specified"):
            J.lax.dot(np.ones((2, 2, 3), f32), B)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 5)),
                                   ((2, 1, 3, 4), (1, 5, 4, 2))])
def test_matmul_broadcasting_jaxpr_and_grads_match_jax(sa, sb):
    # A leading dimension only one operand has is a free dimension of that operand, not a
    # broadcast batch dimension: the weight of x[B,T,d] @ w[d,n] gets a plain contraction as
    # its gradient (a GPT step ran 2x slower with the broadcast form).
    rng = np.random.RandomState(0)
    a, b = rng.randn(*sa).astype(np.float32), rng.randn(*sb).astype(np.float32)
    loss = lambda J: lambda a, b: (J.numpy.matmul(a, b) ** 2).sum()
    assert str(minijax.make_jaxpr(loss(minijax))(a, b)) == str(jax.make_jaxpr(loss(jax))(a, b))
    check(lambda J: (J.numpy.matmul(a, b), J.grad(loss(J), (0, 1))(a, b)), rtol=1e-4)


def test_bitwise_operators_on_bools():
    check(lambda J: ((J.numpy.asarray(A) > 0) & (J.numpy.asarray(A) < 1),
                     (J.numpy.asarray(A) > 0) | (J.numpy.asarray(I) > 0),
                     ~(J.numpy.asarray(A) > 0)))


# ---------------------------------------------------------------------------------------------
# Linear algebra: dot, matmul, einsum
# ---------------------------------------------------------------------------------------------

LINALG = {
    "dot_vv": lambda jnp: jnp.dot(V, V),
    "dot_mv": lambda jnp: jnp.dot(A, V),
    "dot_mm": lambda jnp: jnp.dot(A, B),
    "dot_scalar": lambda jnp: jnp.dot(2.0, V),
    "dot_3d_2d": lambda jnp: jnp.dot(BATCH, np.ones((4, 2), np.float32)),
    "dot_int": lambda jnp: jnp.dot(I, I.T),
    "matmul_batch": lambda jnp: jnp.matmul(BATCH, C45),
    "matmul_broadcast_batch": lambda jnp: jnp.matmul(C123, C432),
    "matmul_vec_mat": lambda jnp: jnp.matmul(V, B),
    "matmul_int_float": lambda jnp: jnp.matmul(I, B),
    "einsum_matmul": lambda jnp: jnp.einsum("ij,jk->ik", A, B),
    "einsum_batch": lambda jnp: jnp.einsum("bij,bjk->bik", BATCH, C245),
    "einsum_implicit": lambda jnp: jnp.einsum("ij,jk", A, B),
    "einsum_implicit_sorted": lambda jnp: jnp.einsum("ba,ac", A, C34),
    "einsum_transpose": lambda jnp: jnp.einsum("ij->ji", A),
    "einsum_sum": lambda jnp: jnp.einsum("ij->", A),
    "einsum_row_sum": lambda jnp: jnp.einsum("ij->i", A),
    "einsum_outer": lambda jnp: jnp.einsum("i,j->ij", V, V),
    "einsum_inner": lambda jnp: jnp.einsum("i,i->", V, V),
    "einsum_ellipsis": lambda jnp: jnp.einsum("...ij,jk->...ik", BATCH, C42),
    "einsum_ellipsis_implicit": lambda jnp: jnp.einsum("...j,j", BATCH, C4),
    "einsum_three_operands": lambda jnp: jnp.einsum("ij,jk,k->i", A, B, C4),
    "einsum_attention": lambda jnp: jnp.einsum("bqd,bkd->bqk", BATCH, C255),
}


@cases(LINALG)
def test_linalg(name):
    check(lambda J: LINALG[name](J.numpy), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

REDUCTIONS = ["sum", "mean", "max", "min", "argmax", "argmin", "var", "std"]
AXES = [(None, False), (None, True), (0, False), (1, True), (-1, False), ((0, 1), False),
        ((0, 1), True)]


# argmax/argmin take a single axis (as in JAX)
@pytest.mark.parametrize("fn,axis,keepdims", [
    (fn, axis, keepdims) for fn in REDUCTIONS for axis, keepdims in AXES
    if not (fn.startswith("arg") and isinstance(axis, tuple))], ids=str)
def test_reductions(fn, axis, keepdims):
    check(lambda J: getattr(J.numpy, fn)(A, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "argmax"])
def test_reductions_of_ints_and_bools(fn):
    check(lambda J: (getattr(J.numpy, fn)(I), getattr(J.numpy, fn)(I, axis=0),
                     getattr(J.numpy, fn)(A > 0)))


def test_reduction_options():
    check(lambda J: (J.numpy.sum(I, dtype=J.numpy.float32), J.numpy.var(A, ddof=1),
                     J.numpy.std(A, axis=0, ddof=1), J.numpy.mean(I > 0),
                     J.numpy.sum(J.numpy.ones(3, J.numpy.uint8)),
                     J.numpy.sum(J.numpy.ones(3, J.numpy.int8))))


# ---------------------------------------------------------------------------------------------
# Shapes and indexing
# ---------------------------------------------------------------------------------------------

SHAPES = {
    "reshape_minus_one": lambda jnp: jnp.reshape(A, -1),
    "reshape_shape": lambda jnp: jnp.reshape(A, (3, -1)),
    "transpose": lambda jnp: jnp.transpose(BATCH),
    "transpose_axes": lambda jnp: jnp.transpose(BATCH, (1, 0, 2)),
    "transpose_negative_axes": lambda jnp: jnp.transpose(BATCH, (-1, 0, 1)),
    "swapaxes": lambda jnp: jnp.swapaxes(BATCH, 0, 2),
    "moveaxis": lambda jnp: jnp.moveaxis(BATCH, 0, -1),
    "concatenate": lambda jnp: jnp.concatenate([A, A * 2], axis=0),
    "concatenate_axis1_promote": lambda jnp: jnp.concatenate([A, I], axis=1),
    "concatenate_neg_axis": lambda jnp: jnp.concatenate([BATCH, BATCH], axis=-1),
    "stack": lambda jnp: jnp.stack([V, V + 1]),
    "stack_axis1": lambda jnp: jnp.stack([A, A, A], axis=1),
    "stack_neg_axis": lambda jnp: jnp.stack([A, A], axis=-1),
    "squeeze": lambda jnp: jnp.squeeze(np.ones((1, 3, 1), np.float32)),
    "squeeze_axis": lambda jnp: jnp.squeeze(np.ones((1, 3, 1), np.float32), axis=-1),
    "expand_dims": lambda jnp: jnp.expand_dims(A, 1),
    "expand_dims_neg": lambda jnp: jnp.expand_dims(A, -1),
    "expand_dims_tuple": lambda jnp: jnp.expand_dims(V, (0, 2)),
    "take_along_axis": lambda jnp: jnp.take_along_axis(A, np.array([[2, 0], [1, 1]]), axis=1),
    "take_along_axis_0": lambda jnp: jnp.take_along_axis(A, np.array([[1, 0, 1]]), axis=0),
    "take_along_axis_argsort_like": lambda jnp: jnp.take_along_axis(
        A, jnp.expand_dims(jnp.argmax(A, axis=1), 1), axis=1),
    "broadcast_to": lambda jnp: jnp.broadcast_to(V, (2, 3)),
    "ravel": lambda jnp: jnp.ravel(BATCH),
    "outer": lambda jnp: jnp.outer(V, V[:2]),
    # a float number of sections is int()'d, as JAX does (2.7 -> 2 sections, not index 2)
    "split_float_sections": lambda jnp: jnp.split(jnp.arange(6.0), 2.7),
    "array_split_float_sections": lambda jnp: jnp.array_split(jnp.arange(7.0), 3.0),
    "matvec_batched": lambda jnp: jnp.matvec(BATCH, C4),
    # NaN sorts last, as lax.sort's comparator says (issue 45)
    "searchsorted_nan_left": lambda jnp: jnp.searchsorted(_SORTED_NAN, _NEEDLES_NAN),
    "searchsorted_nan_right": lambda jnp: jnp.searchsorted(_SORTED_NAN, _NEEDLES_NAN, "right"),
    "vecmat_batched": lambda jnp: jnp.vecmat(V, BATCH[:, :, :2]),
}


@cases(SHAPES)
def test_shapes(name):
    check(lambda J: SHAPES[name](J.numpy))


INDEXING = {
    "int": lambda x: x[1],
    "neg_int": lambda x: x[-1],
    "slice": lambda x: x[1:3],
    "reverse": lambda x: x[::-1],
    "step": lambda x: x[::2],
    "neg_step_bounds": lambda x: x[3:0:-2],
    "newaxis": lambda x: x[:, None],
    "newaxis_front": lambda x: x[None],
    "ellipsis": lambda x: x[..., 0],
    "ellipsis_middle": lambda x: x[0, ..., 1],
    "tuple": lambda x: x[1, 2],
    "mixed": lambda x: x[1:, None, ::-1],
    "empty_slice": lambda x: x[2:2],
    "np_int": lambda x: x[np.int32(2)],
}


@cases(INDEXING)
def test_indexing(name):
    check(lambda J: INDEXING[name](J.numpy.asarray(X432)))


# ---------------------------------------------------------------------------------------------
# Attributes and methods
# ---------------------------------------------------------------------------------------------

def test_attributes():
    for J in (jax, minijax):
        x = J.numpy.asarray(BATCH)
        assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
        assert x.dtype == np.float32
        assert x.T.shape == (4, 3, 2)
        assert len(x) == 2
        assert J.numpy.shape(x) == (2, 3, 4) and J.numpy.ndim(x) == 3 and J.numpy.size(x) == 24


METHODS = {
    "T": lambda x: x.T,
    "reshape_tuple": lambda x: x.reshape((6, 4)),
    "reshape_args": lambda x: x.reshape(4, -1),
    "reshape_minus_one": lambda x: x.reshape(-1),
    "transpose": lambda x: x.transpose(2, 0, 1),
    "sum": lambda x: x.sum(),
    "sum_axis": lambda x: x.sum(axis=1),
    "sum_keepdims": lambda x: x.sum(axis=(0, 2), keepdims=True),
    "mean": lambda x: x.mean(0),
    "max": lambda x: x.max(),
    "max_axis": lambda x: x.max(axis=-1),
    "min": lambda x: x.min(axis=1),
    "argmax": lambda x: x.argmax(axis=2),
    "astype_int": lambda x: x.astype(np.int32),
    "astype_f16": lambda x: x.astype("float16"),
    "astype_bool": lambda x: x.astype(bool),
    "var_std": lambda x: (x.var(), x.std(axis=0)),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "ravel": lambda x: x.ravel(),
    "clip": lambda x: x.clip(-0.1, 0.1),
    "dot": lambda x: x[0].dot(x[1].T),
}


@cases(METHODS)
def test_methods(name):
    check(lambda J: METHODS[name](J.numpy.asarray(BATCH)))


def test_scalar_conversions():
    x = minijax.numpy.asarray(np.float32(2.5))
    assert float(x) == 2.5 and int(x) == 2 and bool(x)
    assert minijax.numpy.arange(3)[1].item() == 1
    assert minijax.numpy.asarray(A).tolist() == jax.numpy.asarray(A).tolist()


# ---------------------------------------------------------------------------------------------
# minijax.nn
# ---------------------------------------------------------------------------------------------

NN = {
    "relu": lambda J: J.nn.relu(A),
    "relu_int": lambda J: J.nn.relu(I),
    "gelu": lambda J: J.nn.gelu(A),
    "sigmoid": lambda J: J.nn.sigmoid(A),
    "softmax": lambda J: J.nn.softmax(A),
    "softmax_axis0": lambda J: J.nn.softmax(BATCH, axis=0),
    "log_softmax": lambda J: J.nn.log_softmax(A * 10),
    "log_softmax_axis1": lambda J: J.nn.log_softmax(BATCH, axis=1),
    "logsumexp": lambda J: J.nn.logsumexp(A),
    "logsumexp_axis_keepdims": lambda J: J.nn.logsumexp(BATCH, axis=1, keepdims=True),
    "logsumexp_large": lambda J: J.nn.logsumexp(J.numpy.array([1000.0, 1000.0])),
    "logsumexp_neg_inf": lambda J: J.nn.logsumexp(J.numpy.array([-np.inf, -np.inf]), axis=0),
    "one_hot": lambda J: J.nn.one_hot(np.array([0, 2, 1, 5]), 3),
    "one_hot_dtype_axis": lambda J: J.nn.one_hot(np.array([[0, 1], [2, 0]]), 3,
                                                 dtype=J.numpy.int32, axis=0),
}


@cases(NN)
def test_nn(name):
    check(lambda J: NN[name](J), rtol=2e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Gradients through jnp and nn (vs JAX, and finite differences)
# ---------------------------------------------------------------------------------------------

GRADS = {
    "mean_of_square": lambda J: lambda x: J.numpy.mean(x ** 2),
    "var": lambda J: lambda x: J.numpy.var(x),
    "std_axis": lambda J: lambda x: J.numpy.sum(J.numpy.std(x, axis=0)),
    "max": lambda J: lambda x: J.numpy.max(x),
    "where_clip": lambda J: lambda x: J.numpy.sum(J.numpy.where(x > 0, x, 0.1 * x)
                                                  + J.numpy.clip(x, -0.3, 0.3)),
    "einsum": lambda J: lambda x: J.numpy.einsum("ij,jk->", x, B),
    "indexing": lambda J: lambda x: (x[1, ::-1] * x[:, None][0, 0]).sum(),
    "concat_stack": lambda J: lambda x: J.numpy.sum(J.numpy.concatenate([x, x ** 2]) *
                                                    J.numpy.stack([x, x])[0].sum()),
    "softmax": lambda J: lambda x: J.nn.softmax(x)[0, 1],
    "log_softmax": lambda J: lambda x: J.nn.log_softmax(x, axis=0).sum(),
    "logsumexp": lambda J: lambda x: J.nn.logsumexp(x),
    "gelu_sigmoid_relu": lambda J: lambda x: J.numpy.sum(J.nn.gelu(x) * J.nn.sigmoid(x)
                                                         + J.nn.relu(x)),
    "take_along_axis": lambda J: lambda x: J.numpy.take_along_axis(
        x, np.array([[2], [0]]), axis=1).sum(),
}


@cases(GRADS)
def test_grads(name):
    check(lambda J: J.grad(GRADS[name](J))(A), rtol=1e-4, atol=1e-5)
    minijax.test_util.check_grads(GRADS[name](minijax), (A.astype(np.float32),), order=1,
                                  modes=("rev",), atol=5e-2, rtol=5e-2)


# ---------------------------------------------------------------------------------------------
# Hypothesis: shapes and axes
# ---------------------------------------------------------------------------------------------

_shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


@settings(max_examples=10, deadline=None)
@given(shape=_shapes, data=st.data())
def test_hypothesis_reductions(shape, data):
    x = RNG.standard_normal(shape).astype(np.float32)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdims = data.draw(st.booleans())
    fn = data.draw(st.sampled_from(["sum", "mean", "max", "var", "argmin"]))
    check(lambda J: getattr(J.numpy, fn)(x, axis=axis, keepdims=keepdims), rtol=1e-4,
          atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(shape=_shapes, data=st.data())
def test_hypothesis_binary_broadcasting(shape, data):
    other = tuple(data.draw(st.sampled_from([d, 1])) for d in shape)[
        data.draw(st.integers(0, len(shape) - 1)):]
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.standard_normal(other).astype(data.draw(st.sampled_from([np.float32, np.int32])))
    op = data.draw(st.sampled_from(["add", "multiply", "maximum", "subtract", "greater"]))
    check(lambda J: getattr(J.numpy, op)(x, y))


def test_errors_match_jax_kind():
    for J in (jax, minijax):
        jnp = J.numpy
        with pytest.raises((TypeError, ValueError)):
            jnp.reshape(A, (4, 2))
        with pytest.raises(ValueError):
            jnp.add(A, np.ones(4, np.float32))
        with pytest.raises(TypeError):
            jnp.matmul(A, A)
        with pytest.raises(ValueError):
            jnp.concatenate([])
        with pytest.raises((TypeError, ValueError)):
            jnp.sin("abc")
        with pytest.raises(TypeError):
            J.nn.sigmoid(I)  # logistic accepts floating dtypes only


# ---------------------------------------------------------------------------------------------
# Scalar types are constructors (also of traced values); convolve, rot90
# ---------------------------------------------------------------------------------------------

SCALAR_TYPES = ["bool_", "int8", "int16", "int32", "uint8", "uint32", "float16", "float32",
                "bfloat16"]


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_type_constructors(name):
    def program(J):
        t = getattr(J.numpy, name)
        traced = J.jit(lambda x: t(x) * 1)(np.float32(2.7))
        return t(3), t(np.array([1.5, -2.0], np.float32)), t(True), traced, \
            J.vmap(t)(np.array([0.0, 1.25], np.float32))
    assert_same(program(minijax), program(jax))


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_types_are_dtypes(name):
    mt, jt = getattr(minijax.numpy, name), getattr(jax.numpy, name)
    assert np.dtype(mt) == np.dtype(jt)
    assert mt == jt.dtype.type and hash(mt) == hash(jt.dtype.type)
    assert minijax.numpy.zeros(2, mt).dtype == jax.numpy.zeros(2, jt).dtype
    assert minijax.numpy.dtype(mt) == jax.numpy.dtype(jt)
    assert isinstance(np.zeros((), np.dtype(jt))[()], mt) == isinstance(
        np.zeros((), np.dtype(jt))[()], jt)
    assert repr(mt) == repr(jt).replace("jax.numpy", "minijax.numpy")


CONV = np.array([1.0, -2.0, 0.5], np.float32)
CONV_CASES = {
    f"{fn}_{mode}_{n}": (lambda J, fn=fn, mode=mode, n=n: getattr(J.numpy, fn)(
        np.arange(n, dtype=np.float32) - 2, CONV, mode=mode))
    for fn in ("convolve", "correlate") for mode in ("full", "same", "valid") for n in (2, 5)
}
CONV_CASES.update({
    "convolve_int": lambda J: J.numpy.convolve(np.array([1, 2, 3]), np.array([0, 1])),
    "convolve_preferred": lambda J: J.numpy.convolve(np.array([1, 2, 3]), np.array([1, 1]),
                                                     preferred_element_type=np.int32),
    "rot90": lambda J: J.numpy.rot90(A),
    "rot90_k2": lambda J: J.numpy.rot90(BATCH, k=2, axes=(1, 2)),
    "rot90_k3": lambda J: J.numpy.rot90(BATCH, k=-1, axes=(2, 0)),
    "rot90_k4": lambda J: J.numpy.rot90(I, k=4),
})


@cases(CONV_CASES)
def test_convolve_rot90(name):
    check(CONV_CASES[name])


def test_convolve_rot90_errors_and_grad():
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            J.numpy.convolve(A, V)
        with pytest.raises(ValueError):
            J.numpy.convolve(V, V, mode="bad")
        with pytest.raises(ValueError):
            J.numpy.rot90(V)
        with pytest.raises(ValueError):
            J.numpy.rot90(A, axes=(1, 1))
    grad = lambda J: J.grad(lambda v: J.numpy.convolve(v, CONV, mode="same").sum() +
                            J.numpy.rot90(J.numpy.outer(v, v))[0, 1])(V)
    np.testing.assert_allclose(grad(minijax), grad(jax), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Eager arithmetic is silent about inf/nan, as XLA is
# ---------------------------------------------------------------------------------------------

SILENT = {
    "one_over_zero": lambda jnp: jnp.array(1.0) / 0,
    "zero_over_zero": lambda jnp: jnp.array(0.0) / 0,
    "log_zero": lambda jnp: jnp.log(jnp.zeros(2)),
    "sqrt_negative": lambda jnp: jnp.sqrt(-jnp.ones(3)),
    "float16_overflow": lambda jnp: jnp.array(60000, jnp.float16) * jnp.array(2, jnp.float16),
    "float32_exp_overflow": lambda jnp: jnp.exp(jnp.array([100.0, 1.0])),
    "mean_of_empty": lambda jnp: jnp.mean(jnp.zeros((0,))),
    "int_mod_zero": lambda jnp: jnp.array([3, 4]) % 0,
    "int_floordiv_zero": lambda jnp: jnp.array([3, 4]) // 0,
    "inf_minus_inf": lambda jnp: jnp.array([jnp.inf]) - jnp.inf,
    "nan_to_int": lambda jnp: jnp.array([jnp.nan]).astype(jnp.int32),
    "float32_to_float16_overflow": lambda jnp: jnp.array([70000.0]).astype(jnp.float16),
}


@cases(SILENT)
def test_eager_arithmetic_emits_no_numpy_warnings_as_jax(name):
    # under `python -W error` a NumPy RuntimeWarning would be an exception; JAX's eager ops
    # return inf/nan silently, and so must minijax's (values compared with JAX's)
    import warnings
    results = []
    for J in (jax, minijax):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            results.append(SILENT[name](J.numpy))
    assert_same(results[1], results[0])


# ---------------------------------------------------------------------------------------------
# Creation errors JAX raises: None in an array, Python ints out of range, allocations too big
# ---------------------------------------------------------------------------------------------

CREATION_ERRORS = {
    "none_in_a_list": lambda jnp: jnp.asarray([1.0, None]),
    "none": lambda jnp: jnp.array(None),
    "none_nested": lambda jnp: jnp.array([[1], [None]]),
    "int_scalar_too_large": lambda jnp: jnp.array(2**40),
    "int_in_a_list_too_large": lambda jnp: jnp.array([1, 2**40]),
    "negative_to_uint32": lambda jnp: jnp.asarray(-1, jnp.uint32),
    "int_to_uint8": lambda jnp: jnp.array([300], jnp.uint8),
    # 4 PiB: more than any address space, so no machine has it to give
    "eager_ones": lambda jnp: jnp.ones((2**25, 2**25)),
    "eager_broadcast_add": lambda jnp: jnp.ones(3) + jnp.zeros((2**48, 1)),
}


@cases(CREATION_ERRORS)
def test_creation_errors_match_jax(name):
    with pytest.raises(Exception) as want:
        CREATION_ERRORS[name](jax.numpy)
    with pytest.raises(Exception) as got:
        CREATION_ERRORS[name](minijax.numpy)
    assert type(got.value).__mro__[:2] == type(want.value).__mro__[:2], (got.value, want.value)
    assert str(got.value) == str(want.value)


def test_linspace_of_traced_array_bounds_as_jax():
    # bounds traced under jit and differentiated, as JAX's (its linspace is a jitted program)
    a = np.array([1.0, 2.0], np.float32)
    check(lambda J: J.jit(lambda a: J.numpy.linspace(a, 2 * a, 3))(a))
    check(lambda J: J.grad(lambda a: J.numpy.geomspace(a, 4 * a, 3).sum())(a))
    check(lambda J: J.grad(lambda a: J.numpy.logspace(a, 3.0, 4, base=2.0).sum())(a))


def test_python_ints_at_the_edges_of_their_dtype_match_jax():
    for value, dtype in ((2**31 - 1, None), (-2**31, None), (2**32 - 1, np.uint32),
                         ([0, 255], np.uint8), (1, np.float32), ([2**40], np.float32)):
        check(lambda J, value=value, dtype=dtype: J.numpy.asarray(value, dtype))


@pytest.mark.parametrize("case", ["ints", "mixed", "nested", "long", "dtype"])
def test_array_of_tracers_stages_jaxs_equations(case):
    # each element converted to the leaves' promoted dtype and given its axis in turn, then
    # concatenated in a tree of 16, as JAX's jnp.array stages them
    programs = {
        "ints": (lambda J: lambda *x: J.numpy.array(x).sum(), tuple(range(10))),
        "mixed": (lambda J: lambda x, y: J.numpy.array([x, y, 2.0]), (1.0, np.float32(2))),
        "nested": (lambda J: lambda x, y: J.numpy.array([[x, 1], [y, 2]]), (1, np.int8(2))),
        "long": (lambda J: lambda *x: J.numpy.array(x), (1.0,) * 20),
        "dtype": (lambda J: lambda x: J.numpy.array([x, x], dtype=J.numpy.float16),
                  (np.ones(2, np.float32),)),
    }
    make, args = programs[case]
    assert str(minijax.make_jaxpr(make(minijax))(*args)) == str(jax.make_jaxpr(make(jax))(*args))


def test_isclose_and_isinf_of_complex_values_as_jax():
    # tolerances in the real dtype; a complex value is infinite where either part is
    def program(J):
        jnp = J.numpy
        a = jnp.array([1 + 2j, 3 - 1j, complex(np.inf, 1), complex(1, -np.inf)], jnp.complex64)
        return [np.asarray(jnp.isclose(a, a + 1e-7)).tolist(),
                bool(jnp.allclose(a[:2], a[:2] * (1 + 1e-6))), bool(jnp.allclose(a, a + 0.1)),
                np.asarray(jnp.isinf(a)).tolist(), np.asarray(J.jit(jnp.isinf)(a)).tolist(),
                bool(jnp.allclose(jnp.ones(2), jnp.ones(2) + 1e-6j))]
    assert program(minijax) == program(jax)


def test_traced_shape_raises_jaxs_type_error():
    # a size known only at run time cannot make a shape: JAX's TypeError and first line
    for J in (jax, minijax):
        for make in (lambda n, J=J: J.numpy.ones((n,)), lambda n, J=J: J.numpy.zeros(n),
                     lambda n, J=J: J.lax.full((n, 2), 1.0)):
            with pytest.raises(TypeError) as e:
                J.jit(make)(3)
            assert type(e.value) is TypeError
            assert str(e.value).startswith(
                "Shapes must be 1D sequences of concrete values of integer type, got ("), J


def test_arctanh_is_lax_atanh_as_jax():
    # one `atanh` equation (the custom-interpreter tutorial inverts tanh with it), JAX's values
    x = np.array([-0.5, 0.0, 0.3, 0.9], np.float32)
    assert str(minijax.make_jaxpr(minijax.numpy.arctanh)(x)) == str(
        jax.make_jaxpr(jax.numpy.arctanh)(x))
    np.testing.assert_array_equal(np.asarray(minijax.jit(minijax.numpy.arctanh)(x)),
                                  np.asarray(jax.jit(jax.numpy.arctanh)(x)))
