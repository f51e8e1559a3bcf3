"""Values of every minijax.lax primitive against jax.lax: eager (numpy impls) and under jit (the
StableHLO lowerings), dtypes and shapes included, plus lax's error behaviour.

Mirrors tests/lax_test.py in JAX. The op table is in tests/lax_test_util.py.
"""

import zlib

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from lax_test_util import (
    ALL_CASES,
    BINARY_CASES,
    F32,
    STRUCTURAL_CASES,
    UNARY_CASES,
    assert_close,
    rand,
)

import minijax
from minijax import core, lax as mlax
from minijax.public_test_util import check_grads


def _rng(name: str) -> np.random.RandomState:
    return np.random.RandomState(zlib.crc32(name.encode()))


# ---------------------------------------------------------------------------------------------
# Every case, eagerly and under jit
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ALL_CASES, ids=repr)
def test_op_eager_matches_jax(case):
    args = case.args(_rng(case.name))
    got = case(minijax, *args)
    want = case(jax, *args)
    # an Array exactly where JAX returns one (stop_gradient gives a numpy input back)
    assert isinstance(got, minijax.Array) == isinstance(want, jax.Array), (type(got), type(want))
    assert_close(got, want, case.name, case.tol)


def _program(cases, J):
    """One function running all `cases` on a flat argument list (one compile per group)."""
    counts = [len(c.specs) for c in cases]

    def prog(*flat):
        outs, i = [], 0
        for c, n in zip(cases, counts):
            outs.append(c(J, *flat[i:i + n]))
            i += n
        return outs
    return prog


@pytest.mark.parametrize("group", ["unary", "binary", "structural"])
def test_ops_jit_match_jax(group):
    cases = {"unary": UNARY_CASES, "binary": BINARY_CASES, "structural": STRUCTURAL_CASES}[group]
    flat = [a for c in cases for a in c.args(_rng(c.name))]
    got = minijax.jit(_program(cases, minijax))(*flat)
    want = jax.jit(_program(cases, jax))(*flat)
    assert len(got) == len(want)
    for c, g, w in zip(cases, got, want):
        assert isinstance(g, minijax.Array)
        assert_close(g, w, f"jit {c.name}", c.tol)


# ---------------------------------------------------------------------------------------------
# Property-based: shapes and values from hypothesis
# ---------------------------------------------------------------------------------------------

_UNARY = {"sin": "any", "cos": "any", "exp": "any", "log": "pos", "log1p": "gt-1",
          "tanh": "any", "logistic": "any", "sqrt": "pos", "rsqrt": "pos", "floor": "any",
          "neg": "any", "abs": "any", "sign": "any"}
_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(sorted(_UNARY)), shape=_shapes, seed=st.integers(0, 2**16),
       scale=st.sampled_from([1e-3, 1.0, 30.0]))
def test_unary_property(name, shape, seed, scale):
    rng = np.random.RandomState(seed)
    x = rand(rng, shape, F32, _UNARY[name])
    if _UNARY[name] == "any":
        x = np.asarray(x * scale, F32)
    assert_close(getattr(mlax, name)(x), getattr(jax.lax, name)(x), name)


@st.composite
def _broadcastable_pairs(draw):
    shape = draw(_shapes)
    kind = draw(st.sampled_from(["same", "scalar_lhs", "scalar_rhs", "ones"]))
    if kind == "scalar_lhs":
        return (), shape
    if kind == "scalar_rhs":
        return shape, ()
    if kind == "ones":
        mask = draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
        return tuple(1 if m else d for m, d in zip(mask, shape)), shape
    return shape, shape


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(["add", "sub", "mul", "div", "max", "min", "pow", "lt", "eq"]),
       pair=_broadcastable_pairs(), swap=st.booleans(), seed=st.integers(0, 2**16))
def test_binary_broadcasting_property(name, pair, swap, seed):
    sx, sy = pair[::-1] if swap else pair
    rng = np.random.RandomState(seed)
    x = rand(rng, sx, F32, "pos" if name == "pow" else "any")
    y = rand(rng, sy, F32, "nonzero" if name == "div" else "any")
    assert_close(getattr(mlax, name)(x, y), getattr(jax.lax, name)(x, y), name)


# ---------------------------------------------------------------------------------------------
# Semantics worth spelling out
# ---------------------------------------------------------------------------------------------

def _both(fun, *args):
    """fun(J, *args) eagerly and jitted for J=minijax, against jax eager and jitted."""
    want = fun(jax, *args)
    assert_close(fun(minijax, *args), want, "eager")
    assert_close(minijax.jit(lambda *a: fun(minijax, *a))(*args),
                 jax.jit(lambda *a: fun(jax, *a))(*args), "jit")
    return want


def test_python_scalar_operands_are_weak():
    x = np.arange(3, dtype=np.float32)
    for J in (jax, minijax):
        assert J.lax.add(x, 2.0).dtype == np.float32
    assert mlax.mul(2.0, x).weak_type == jax.lax.mul(2.0, x).weak_type
    got, want = mlax.mul(2.0, 3.0), jax.lax.mul(2.0, 3.0)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    assert_close(got, want)


def test_integer_div_rem_round_toward_zero():
    x = np.array([7, -7, 7, -7, 6, -6, 0, 1], np.int32)
    y = np.array([2, 2, -2, -2, 3, 3, 5, -4], np.int32)
    q = _both(lambda J, a, b: J.lax.div(a, b), x, y)
    r = _both(lambda J, a, b: J.lax.rem(a, b), x, y)
    np.testing.assert_array_equal(np.asarray(q) * y + np.asarray(r), x)  # C semantics
    xf, yf = x.astype(np.float32) + 0.5, y.astype(np.float32)
    _both(lambda J, a, b: J.lax.rem(a, b), xf, yf)


def test_argmax_argmin_nan_and_ties():
    x = np.array([[1., np.nan, 3., np.nan], [2., 5., 5., -1.], [0., 0., 0., 0.],
                  [-np.inf, -np.inf, np.inf, np.inf]], np.float32)
    for name in ["argmax", "argmin"]:
        for axis in [0, 1]:
            _both(lambda J, a, n=name, ax=axis: getattr(J.lax, n)(a, ax, np.int32), x)


def test_convert_float_to_int_saturates_and_nan_is_zero():
    x = np.array([-1.7, 2.5, 1e10, -1e10, np.nan, np.inf, -0.5], np.float32)
    _both(lambda J, a: J.lax.convert_element_type(a, np.int32), x)
    _both(lambda J, a: J.lax.convert_element_type(a, np.bool_), x)


def test_reduce_max_min_over_empty_axis():
    for dt in [np.float32, np.int32]:
        x = np.zeros((0, 3), dt)
        _both(lambda J, a: J.lax.reduce_max(a, (0,)), x)
        _both(lambda J, a: J.lax.reduce_min(a, (0,)), x)
        _both(lambda J, a: J.lax.reduce_sum(a, (0,)), x)


def test_sign_and_max_of_special_floats():
    x = np.array([-0.0, 0.0, np.nan, -np.inf, 3.0], np.float32)
    want = _both(lambda J, a: J.lax.sign(a), x)
    np.testing.assert_array_equal(np.signbit(np.asarray(mlax.sign(x))), np.signbit(want))
    y = np.array([1.0, np.nan, 0.0, 0.0, -1.0], np.float32)
    _both(lambda J, a, b: J.lax.max(a, b), x, y)
    _both(lambda J, a, b: J.lax.min(a, b), x, y)


def test_integer_overflow_wraps():
    x = np.array([2**31 - 1, -2**31, 3], np.int32)
    _both(lambda J, a: J.lax.add(a, a), x)
    _both(lambda J, a: J.lax.integer_pow(a, 3), x)
    _both(lambda J, a: J.lax.neg(a), x)


def test_dot_general_preferred_element_type_and_weak_type():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    _both(lambda J, a: J.lax.dot_general(a, a, (((1,), (1,)), ((), ())),
                                         preferred_element_type=np.float32), x)


def test_dot_general_float_operands_integer_result():
    """Float operands with an integer preferred_element_type: the product is computed in
    float and converted (XLA's), not computed on truncated operands."""
    rng = np.random.RandomState(0)
    x, y = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)) * 3
    _both(lambda J, a, b: J.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                            preferred_element_type=np.int32),
          x, y.astype(np.float32))


@pytest.mark.xfail(strict=True, reason="lax.dot_general with operands of different dtypes "
                   "(JAX promotes them): out of scope, minijax requires equal dtypes")
def test_dot_general_mixed_dtypes():
    x, y = np.ones((2, 3), np.float32), np.ones((3, 2), np.int32)
    dn = (((1,), (0,)), ((), ()))
    assert_close(mlax.dot_general(x, y, dn), jax.lax.dot_general(x, y, dn))


def test_full_and_iota_helpers():
    assert_close(mlax.full((2, 3), 1.5, np.float32), jax.lax.full((2, 3), 1.5, np.float32))
    assert_close(mlax.broadcasted_iota(np.int32, (2, 4), 0),
                 jax.lax.broadcasted_iota(np.int32, (2, 4), 0))
    assert_close(mlax.expand_dims(np.ones(3, np.float32), (0, 2)),
                 jax.lax.expand_dims(np.ones(3, np.float32), (0, 2)))


# ---------------------------------------------------------------------------------------------
# Errors: the same inputs make JAX and minijax raise; minijax names the operation
# ---------------------------------------------------------------------------------------------

_X = np.ones((3, 4), np.float32)
ERROR_CASES = [
    # (id, program, exception JAX raises, text minijax's message must contain)
    ("add_dtypes", lambda J: J.lax.add(_X, _X.astype(np.int32)), TypeError, "add"),
    ("mul_python_int", lambda J: J.lax.mul(_X, 2), TypeError, "mul"),
    ("add_f16_python_float", lambda J: J.lax.add(_X.astype(np.float16), 2.0), TypeError, "add"),
    ("reduce_sum_bool", lambda J: J.lax.reduce_sum(_X > 0, (0,)), TypeError, "reduce_sum"),
    ("add_ranks", lambda J: J.lax.add(_X, np.ones(4, np.float32)), TypeError, "add"),
    ("sub_shapes", lambda J: J.lax.sub(_X, np.ones((3, 5), np.float32)), TypeError, "sub"),
    ("sin_int", lambda J: J.lax.sin(np.int32(2)), TypeError, "sin"),
    ("pow_int", lambda J: J.lax.pow(np.int32(2), np.int32(2)), TypeError, "pow"),
    ("and_float", lambda J: J.lax.bitwise_and(_X, _X), TypeError, "and"),
    ("neg_bool", lambda J: J.lax.neg(np.bool_(True)), TypeError, "neg"),
    ("abs_uint", lambda J: J.lax.abs(np.uint32(3)), TypeError, "abs"),
    ("rem_bool", lambda J: J.lax.rem(np.bool_(True), np.bool_(True)), TypeError, "rem"),
    ("integer_pow_neg_int", lambda J: J.lax.integer_pow(np.int32(2), -1), TypeError,
     "integer_pow"),
    ("transpose_perm", lambda J: J.lax.transpose(_X, (0, 0)), TypeError, "transpose"),
    ("dot_general_sizes", lambda J: J.lax.dot_general(_X, _X, (((1,), (0,)), ((), ()))),
     TypeError, "dot_general"),
    ("concatenate_shapes", lambda J: J.lax.concatenate([_X, np.ones((2, 3), np.float32)], 0),
     TypeError, "concatenate"),
    ("slice_bounds", lambda J: J.lax.slice(_X, (0, 0), (4, 4)), TypeError, "slice"),
    ("select_n_which_shape", lambda J: J.lax.select_n(np.ones(3, bool), _X, _X), TypeError,
     "select_n"),
    ("select_n_case_dtypes", lambda J: J.lax.select_n(True, _X, _X.astype(np.int32)),
     TypeError, "select"),
    ("pad_dtype", lambda J: J.lax.pad(_X, np.int32(0), ((0, 0, 0), (0, 0, 0))), TypeError,
     "pad"),
    ("pad_negative_interior", lambda J: J.lax.pad(_X, np.float32(0), ((0, 0, -1), (0, 0, 0))),
     ValueError, "pad"),
    ("broadcast_in_dim_sizes", lambda J: J.lax.broadcast_in_dim(_X, (3, 5), (0, 1)), TypeError,
     "broadcast_in_dim"),
    ("squeeze_not_one", lambda J: J.lax.squeeze(_X, (0,)), ValueError, "squeeze"),
    ("reduce_sum_axis", lambda J: J.lax.reduce_sum(_X, (2,)), ValueError, "reduce_sum"),
    ("reduce_max_axis", lambda J: J.lax.reduce_max(_X, (-1,)), ValueError, "reduce_max"),
    ("argmax_empty", lambda J: J.lax.argmax(np.ones((0, 3), np.float32), 0, np.int32),
     ValueError, "argmax"),
]


@pytest.mark.parametrize("fun,exc,text", [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_errors_match_jax(fun, exc, text):
    with pytest.raises(exc):
        fun(jax)
    with pytest.raises(exc) as info:
        fun(minijax)
    assert text in str(info.value)


def test_reshape_size_mismatch_raises():
    # JAX raises (a ValueError from its MLIR verifier); minijax rejects it while tracing
    with pytest.raises((TypeError, ValueError)):
        jax.lax.reshape(_X, (5,))
    with pytest.raises(TypeError, match="reshape"):
        mlax.reshape(_X, (5,))
    with pytest.raises(TypeError, match="reshape"):
        minijax.make_jaxpr(lambda x: mlax.reshape(x, (5,)))(_X)


def test_errors_under_jit_name_the_op():
    with pytest.raises(TypeError, match="add"):
        minijax.jit(lambda x: mlax.add(x, x.astype(np.int32)))(_X)
    with pytest.raises(TypeError):
        jax.jit(lambda x: jax.lax.add(x, x.astype(np.int32)))(_X)


# ---------------------------------------------------------------------------------------------
# Errors leave no state behind: the eval trace is current again afterwards
# ---------------------------------------------------------------------------------------------

def _bad(x):
    return mlax.add(mlax.sin(x), x.astype(np.int32))


@pytest.mark.parametrize("transform", [
    lambda f: minijax.jit(f), lambda f: minijax.grad(lambda x: mlax.reduce_sum(f(x), (0, 1))),
    lambda f: minijax.vmap(f), lambda f: minijax.make_jaxpr(f),
    lambda f: (lambda x: minijax.jvp(f, (x,), (x,))),
    lambda f: (lambda x: minijax.vjp(f, x)),
    lambda f: minijax.jit(minijax.vmap(minijax.jit(f))),
    lambda f: minijax.vmap(lambda x: minijax.jvp(f, (x,), (x,))),
], ids=["jit", "grad", "vmap", "make_jaxpr", "jvp", "vjp", "jit_vmap_jit", "vmap_jvp"])
def test_error_inside_transformation_restores_eval_trace(transform):
    assert core.trace_ctx.trace is core.eval_trace
    with pytest.raises(TypeError, match="add"):
        transform(_bad)(_X)
    assert core.trace_ctx.trace is core.eval_trace
    # and the next computation runs normally
    assert_close(mlax.sin(_X), jax.lax.sin(_X))


def test_error_in_user_code_restores_eval_trace():
    def f(x):
        raise RuntimeError("boom")
    for t in (minijax.jit, minijax.vmap, minijax.grad):
        with pytest.raises(RuntimeError, match="boom"):
            t(f)(np.float32(1.0) if t is minijax.grad else _X)
        assert core.trace_ctx.trace is core.eval_trace


def test_escaped_tracer_after_error_is_detected():
    leaked = []

    def f(x):
        leaked.append(x)
        raise ValueError("stop")
    with pytest.raises(ValueError):
        minijax.jit(f)(_X)
    assert core.trace_ctx.trace is core.eval_trace
    with pytest.raises(minijax.UnexpectedTracerError):
        mlax.sin(leaked[0])


def test_every_primitive_is_public_under_jax_lax_name():
    # each primitive minijax defines that jax.lax exports is exported by minijax.lax too
    import importlib
    import pkgutil
    found = set()
    for info in pkgutil.walk_packages(minijax.__path__, "minijax."):
        module = importlib.import_module(info.name)
        found |= {n for n, v in vars(module).items() if isinstance(v, core.Primitive)}
    in_jax = {n for n in found if n.endswith("_p") and hasattr(jax.lax, n)}
    assert len(in_jax) > 60
    missing = [n for n in sorted(in_jax) if not isinstance(getattr(mlax, n, None), core.Primitive)]
    assert not missing, missing
    assert mlax.exp_p.name == jax.lax.exp_p.name == "exp"


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 0), (0, 2)]])
def test_conv_and_conv_with_general_padding(padding):
    rng = np.random.RandomState(0)
    lhs = rng.randn(2, 3, 6, 5).astype(np.float32)
    rhs = rng.randn(4, 3, 3, 2).astype(np.float32)
    for name, kw in [("conv", {}),
                     ("conv_with_general_padding", dict(lhs_dilation=(1, 2),
                                                        rhs_dilation=(2, 1)))]:
        if name == "conv_with_general_padding" and isinstance(padding, str):
            continue  # JAX needs explicit pads there
        want = getattr(jax.lax, name)(lhs, rhs, (1, 2), padding, **kw)
        got = getattr(mlax, name)(lhs, rhs, (1, 2), padding, **kw)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32])
def test_integer_div_rem_by_zero_as_xla(dtype):
    # XLA defines x / 0 as -1 (all bits set) and x % 0 as x; INT_MIN / -1 wraps
    signed = np.dtype(dtype).kind == "i"
    x = np.array([3, -2 if signed else 2, 1, np.iinfo(dtype).min], dtype)
    y = np.array([1, 0, 0, -1 if signed else 1], dtype)
    for name in ("div", "rem"):
        want = getattr(jax.lax, name)(x, y)
        got = getattr(mlax, name)(x, y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(getattr(mlax, name)(x[1], y[1]),
                                      getattr(jax.lax, name)(x[1], y[1]))



@pytest.mark.parametrize("arg,dtype", [
    (np.ones(3, np.float32), np.float32),   # same dtype, both strong: nothing bound
    (1.0, np.float32),                      # weak -> strong: one convert_element_type
    (np.int32(1), np.int32),
    (np.int32(1), np.float32),
    (np.ones(2, np.float16), np.float16),
])
def test_convert_element_type_to_same_type_binds_nothing_as_jax(arg, dtype):
    def text(J):
        return str(J.make_jaxpr(lambda x: J.lax.convert_element_type(x, dtype))(arg))
    assert text(minijax) == text(jax)


# ---------------------------------------------------------------------------------------------
# The rest of jax.lax's names: enums, shape arithmetic, composite, platform_dependent
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["RoundingMethod", "GatherScatterMode", "RandomAlgorithm",
                                  "AccuracyMode", "DotAlgorithmPreset"])
def test_enums_match_jax(name):
    mine, theirs = getattr(mlax, name), getattr(jax.lax, name)
    assert [m.name for m in mine] == [t.name for t in theirs]
    if issubclass(theirs, int):
        assert [int(m) for m in mine] == [int(t) for t in theirs]


def test_dot_algorithm_and_tolerance_fields_match_jax():
    import inspect
    for name in ["DotAlgorithm", "Tolerance"]:
        assert (list(inspect.signature(getattr(mlax, name)).parameters)
                == list(inspect.signature(getattr(jax.lax, name)).parameters))
    assert mlax.GatherScatterMode.from_any("clip") is mlax.GatherScatterMode.CLIP
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(
        mlax.dot(x, x.T, precision=mlax.DotAlgorithmPreset.DEFAULT),
        jax.lax.dot(x, x.T, precision=jax.lax.DotAlgorithmPreset.DEFAULT))


def _dot_with(J, L, x, y, precision, how):
    """(result, jaxpr text, the lowered program's dot_general/convert ops) or the error."""
    def f(x, y):
        return L.dot(x, y, precision=precision)
    try:
        out = f(x, y) if how == "eager" else J.jit(f)(x, y)
    except Exception as e:  # the family is compared with JAX's
        return type(e), None, None
    ops = [line.split("=", 1)[1].strip() for line in J.jit(f).lower(x, y).as_text().splitlines()
           if "dot_general" in line or "convert" in line]
    return np.asarray(out), str(J.make_jaxpr(f)(x, y)), ops


@pytest.mark.parametrize("name", [p.name for p in jax.lax.DotAlgorithmPreset])
def test_dot_algorithm_presets_match_jax(name):
    """Each preset, by enum and by name, on float32/bfloat16/float16 operands: the same
    values (bit-identical under jit), jaxpr, StableHLO (operand conversions and the
    `algorithm` attribute) and, for presets the CPU backend refuses, the same error family."""
    rng = np.random.RandomState(0)
    a, b = rng.randn(8, 16).astype(np.float32), rng.randn(16, 4).astype(np.float32)
    for dtype in (np.float32, jax.numpy.bfloat16, np.float16):
        x, y = a.astype(dtype), b.astype(dtype)
        for how, precision in (("jit", name), ("eager", getattr(mlax.DotAlgorithmPreset, name))):
            theirs_precision = precision if how == "jit" else getattr(jax.lax.DotAlgorithmPreset,
                                                                      name)
            mine = _dot_with(minijax, mlax, x, y, precision, how)
            theirs = _dot_with(jax, jax.lax, x, y, theirs_precision, how)
            where = f"{name} {np.dtype(dtype).name} {how}"
            if isinstance(theirs[0], type):
                assert mine[0] is theirs[0], where
                continue
            assert mine[0].dtype == theirs[0].dtype, where
            assert mine[1:] == theirs[1:], where
            if how == "jit":
                np.testing.assert_array_equal(mine[0], theirs[0], err_msg=where)
            else:  # NumPy's products against XLA's: float32 rounding apart
                np.testing.assert_allclose(mine[0].astype(np.float64),
                                           theirs[0].astype(np.float64), rtol=1e-5, atol=1e-5,
                                           err_msg=where)


def test_dot_algorithms_under_transforms_match_jax():
    """A preset survives grad, vmap and `default_matmul_precision`; a spelt-out DotAlgorithm
    prints as JAX's and is refused on CPU; bad names raise JAX's ValueError."""
    x, y = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)

    def jaxprs(J, L):
        alg = L.DotAlgorithm(np.float16, np.float16, np.float32)
        out = [str(J.make_jaxpr(lambda a, b: L.dot(a, b, precision=alg))(x, y)),
               str(J.make_jaxpr(J.grad(lambda a, b: L.dot(a, b, precision="BF16_BF16_F32_X3")
                                       .sum()))(x, y)),
               str(J.make_jaxpr(J.vmap(lambda a: L.dot(a, y, precision="F32_F32_F32")))(
                   np.ones((4, 2, 3), np.float32)))]
        with J.default_matmul_precision("BF16_BF16_F32_X6"):
            out.append(str(J.make_jaxpr(lambda a, b: a @ b)(x, y)))
        with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
            J.jit(lambda a, b: L.dot(a, b, precision=alg))(x, y)
        for bad in ("nonsense", "HIGHEST"):
            with pytest.raises(ValueError, match="DotAlgorithmPreset or the name"):
                L.dot(x, y, precision=bad)
        return out
    texts = [jaxprs(minijax, mlax), jaxprs(jax, jax.lax)]
    assert texts[0] == texts[1]


_CONV_SHAPES = [((2, 3, 9, 8), (4, 3, 3, 2), (2, 1)), ((1, 2, 5, 5), (3, 2, 2, 2), (1, 2))]


@pytest.mark.parametrize("pads", ["SAME", "VALID", [(1, 0), (0, 2)]])
def test_conv_shape_tuples_match_jax(pads):
    for lhs, rhs, strides in _CONV_SHAPES:
        assert mlax.conv_shape_tuple(lhs, rhs, strides, pads) == jax.lax.conv_shape_tuple(
            lhs, rhs, strides, pads)
        dn = ("NHWC", "OIHW", "NCHW")
        lhs_t = (lhs[0], lhs[2], lhs[3], lhs[1])
        assert (mlax.conv_general_shape_tuple(lhs_t, rhs, strides, pads, dn)
                == jax.lax.conv_general_shape_tuple(lhs_t, rhs, strides, pads, dn))
        assert (mlax.conv_transpose_shape_tuple(lhs_t, rhs, strides, pads, dn)
                == jax.lax.conv_transpose_shape_tuple(lhs_t, rhs, strides, pads, dn))
        assert mlax.conv_general_permutations(dn) == jax.lax.conv_general_permutations(dn)
    assert (mlax.conv_shape_tuple((4, 3, 8), (6, 3, 2), (1,), "VALID", batch_group_count=2)
            == jax.lax.conv_shape_tuple((4, 3, 8), (6, 3, 2), (1,), "VALID",
                                        batch_group_count=2))


def test_shape_helpers_match_jax():
    args = ((9, 8), (3, 2), (2, 1), ((1, 0), (0, 2)))
    assert mlax.reduce_window_shape_tuple(*args) == jax.lax.reduce_window_shape_tuple(*args)
    assert (mlax.reduce_window_shape_tuple(*args, (2, 1), (1, 3))
            == jax.lax.reduce_window_shape_tuple(*args, (2, 1), (1, 3)))
    for shapes in [((3, 1), (1, 4)), ((2, 3), (3,), ()), ((0, 1), (1, 5))]:
        assert mlax.broadcast_shapes(*shapes) == jax.lax.broadcast_shapes(*shapes)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        mlax.broadcast_shapes((2,), (3,))
    for v in [1.0, np.int8(3), np.ones(2, np.float64), True, np.uint16]:
        assert mlax.dtype(v) == jax.lax.dtype(v), v
    e, w = mlax.empty((2, 3), np.float32), jax.lax.empty((2, 3), np.float32)
    assert (e.shape, e.dtype) == (w.shape, w.dtype)


def test_composite_values_jaxpr_and_vmap():
    def tangent(J):
        return J.lax.composite(lambda v, *, scale: J.lax.sin(v) / J.lax.cos(v) * scale,
                               "my.tangent")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = tangent(jax)(x, scale=2.0)
    assert_close(tangent(minijax)(x, scale=2.0), want)
    assert_close(minijax.jit(lambda v: tangent(minijax)(v, scale=2.0))(x), want)
    jaxpr = str(minijax.make_jaxpr(lambda v: tangent(minijax)(v, scale=2.0))(x))
    assert "composite[" in jaxpr and "my.tangent" in jaxpr
    # JAX has no batching rule for composite; minijax's is checked against a loop
    got = minijax.vmap(lambda v: tangent(minijax)(v, scale=2.0))(x)
    assert_close(got, np.stack([np.asarray(tangent(jax)(r, scale=2.0)) for r in x]))


def test_platform_dependent_picks_the_cpu_branch_as_jax():
    x = np.arange(3, dtype=np.float32)
    for kw in [dict(cpu=lambda v: v * 2, default=lambda v: v * 3),
               dict(tpu=lambda v: v * 2, default=lambda v: v - 1)]:
        want = jax.lax.platform_dependent(x, **kw)
        assert_close(mlax.platform_dependent(x, **kw), want)
        assert_close(minijax.jit(lambda v, kw=kw: mlax.platform_dependent(v, **kw))(x), want)


def test_zeta_derivative_in_q_by_finite_differences():
    # JAX defines no derivative for zeta; minijax's d/dq = -x zeta(x + 1, q)
    x = np.array([2.0, 3.5], np.float32)
    check_grads(lambda q: mlax.zeta(x, q), (np.array([0.7, 1.9], np.float32),), order=1,
                modes=["fwd", "rev"], rtol=2e-2)
    with pytest.raises(ValueError, match="zeta"):
        minijax.grad(lambda v: mlax.zeta(v, np.float32(1.5)))(np.float32(2.0))


@pytest.mark.parametrize("kw", [{}, {"dtype": np.uint8, "algorithm": 1}, {"algorithm": 2}])
def test_rng_bit_generator_matches_xla_through_jax(kw):
    key = np.arange(4, dtype=np.uint32)
    for g, w in zip(mlax.rng_bit_generator(key, (2, 3), **kw),
                    jax.lax.rng_bit_generator(key, (2, 3), **kw)):
        assert_close(g, w)
    keys = np.arange(12, dtype=np.uint32).reshape(3, 4)
    f = lambda J: J.vmap(lambda k: J.lax.rng_bit_generator(k, (2,), **kw))
    for g, w in zip(f(minijax)(keys), f(jax)(keys)):
        assert_close(g, w)


def test_igamma_derivative_in_a_and_random_gamma_grad_match_jax():
    a = np.array([0.3, 1.0, 2.5, 7.0, 40.0], np.float32)
    x = np.array([0.1, 2.0, 2.5, 3.0, 45.0], np.float32)
    for name in ["igamma", "igammac"]:
        g = minijax.grad(lambda v, n=name: getattr(mlax, n)(v, x).sum())(a)
        assert_close(g, jax.grad(lambda v, n=name: getattr(jax.lax, n)(v, x).sum())(a),
                     name, tol=1e-4)
    assert_close(mlax.random_gamma_grad(a, x), jax.lax.random_gamma_grad(a, x), tol=1e-4)
    edges = (np.array([2.0, 2.0, -1.0], np.float32), np.array([0.0, np.inf, 1.0], np.float32))
    assert_close(mlax.igamma(*edges), jax.lax.igamma(*edges))
