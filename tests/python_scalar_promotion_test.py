"""An array with a Python scalar (`x * 0.5`) takes promote_args's short path
(minijax/numpy/util.py: _with_python_scalar): it must give what the lattice gives, and what
JAX gives, for every dtype, both operand orders, eagerly and under jit."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import minijax
import minijax.numpy as mnp
from minijax import dtypes
from minijax.config import config
from minijax.numpy import util

DTYPES = ["float16", "float32", "complex64", "int8", "int32", "uint8", "bool", "bfloat16"]
SCALARS = [0.5, 3, True, 2j, -1]


def _slow(*args):
    util.check_arraylike("t", *args)
    return util.promote_shapes("t", *util.promote_dtypes(*args))


def _describe(v):
    aval = minijax.core.get_aval(v)
    return (aval.dtype, aval.weak_type, aval.shape)


@pytest.mark.parametrize("dtype,scalar,swap",
                         list(itertools.product(DTYPES, SCALARS, [False, True])))
def test_short_path_gives_the_lattice(dtype, scalar, swap):
    x = mnp.asarray(np.arange(1, 4).astype(dtypes.canonicalize_dtype(dtype)))
    args = (scalar, x) if swap else (x, scalar)
    fast = util.promote_args("t", *args)
    slow = _slow(*args)
    assert [_describe(v) for v in fast] == [_describe(v) for v in slow]
    for f, s in zip(fast, slow):
        np.testing.assert_array_equal(np.asarray(f), np.asarray(s))

    def traced(x):
        out = util.promote_args("t", *((scalar, x) if swap else (x, scalar)))
        return [minijax.numpy.asarray(v) for v in out]
    assert str(minijax.make_jaxpr(traced)(x)) == str(minijax.make_jaxpr(
        lambda x: [minijax.numpy.asarray(v) for v in _slow(*((scalar, x) if swap else
                                                            (x, scalar)))])(x))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float16"])
@pytest.mark.parametrize("scalar", [0.5, 3, -2])
def test_arithmetic_with_a_python_scalar_is_jax(dtype, scalar):
    for op in (lambda a, b: a * b, lambda a, b: a + b, lambda a, b: a - b):
        x = np.arange(1, 5).astype(dtype)
        for args in ((x, scalar), (scalar, x)):
            m = [mnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
            j = [jjnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
            got, want = op(*m), op(*j)
            assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            jgot = minijax.jit(op)(*m)
            assert jgot.dtype == jax.jit(op)(*j).dtype


def test_short_path_under_x64():
    with config.override("jax_enable_x64", True):
        x = mnp.asarray(np.ones(3, np.float32))
        assert [_describe(v) for v in util.promote_args("t", x, 0.5)] == \
            [_describe(v) for v in _slow(x, 0.5)]
        assert (x * 0.5).dtype == np.float32
