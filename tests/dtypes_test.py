"""Type promotion against JAX's lattice: every binary `jnp` op on every pair of dtypes (and
Python scalars), eagerly, in both modules. Booleans take part as JAX lets them: `bool + bool`
is a logical or, `bool * bool` a logical and, `bool + int` and `bool * float` promote.
Mirrors tests/dtypes_test.py in JAX."""

import warnings

import jax
import ml_dtypes
import numpy as np
import pytest

import minijax
from minijax import dtypes

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16,
          ml_dtypes.bfloat16, np.float32]
SCALARS = [True, 2, 2.5]
BINARY_OPS = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "power", "mod",
    "remainder", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift", "arctan2", "hypot", "fmod", "copysign",
    "logaddexp", "float_power", "heaviside",
]


def _operand(d):
    if not isinstance(d, type):
        return d
    return np.array([1, 0, 1], d) if d is np.bool_ else np.array([3, 2, 1], d)


def _result(J, op, a, b):
    """("ok", dtype) or ("raises", exception name). JAX's side is traced only (eval_shape: no
    compilation per dtype pair), minijax's runs eagerly."""
    fn = getattr(J.numpy, op)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = jax.eval_shape(fn, a, b) if J is jax else fn(a, b)
        return "ok", np.dtype(r.dtype)
    except (TypeError, ValueError) as e:
        return "raises", type(e).__name__


@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_op_on_every_dtype_pair_matches_jax(op):
    bad = []
    for da in DTYPES:
        for db in DTYPES + SCALARS:
            for a, b in [(_operand(da), _operand(db)), (_operand(db), _operand(da))]:
                want, got = _result(jax, op, a, b), _result(minijax, op, a, b)
                if want != got:
                    bad.append((np.asarray(a).dtype.name, np.asarray(b).dtype.name, want, got))
    assert not bad, bad[:8]


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "floor_divide", "mod",
                                "power", "maximum", "true_divide"])
def test_binary_op_values_with_bools_match_jax(op):
    for db in [np.bool_, np.int8, np.uint8, np.float32, True, 2, 2.5]:
        a, b = _operand(np.bool_), _operand(db)
        if _result(jax, op, a, b)[0] == "raises":
            continue
        want = getattr(jax.numpy, op)(a, b)
        got = getattr(minijax.numpy, op)(a, b)
        assert got.dtype == want.dtype, (op, db)
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("a,b", [(np.bool_, np.bool_), (np.bool_, np.int8),
                                 (np.bool_, np.float16), (np.bool_, ml_dtypes.bfloat16),
                                 (np.int8, np.uint8), (np.uint32, np.int32),
                                 (np.float16, ml_dtypes.bfloat16), (np.int32, np.float16)])
def test_promote_types_matches_jax(a, b):
    assert dtypes.promote_types(a, b) == jax.numpy.promote_types(a, b)
    assert dtypes.result_type(a, b) == jax.numpy.result_type(a, b)


def test_bool_arithmetic_matches_jax():
    t = np.array([True, False, True])
    for f in (lambda J: J.numpy.asarray(t) + t, lambda J: J.numpy.asarray(t) * t,
              lambda J: J.numpy.asarray(t) + 1, lambda J: J.numpy.asarray(t) * 2.5,
              lambda J: J.numpy.asarray(t) + np.int8(3), lambda J: True + J.numpy.asarray(t)):
        want, got = f(jax), f(minijax)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
