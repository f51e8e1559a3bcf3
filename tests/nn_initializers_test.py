"""minijax.nn.initializers against jax.nn.initializers: the same key gives the same bits.

Mirrors tests/nn_test.py (its initializer tests) in JAX.
"""

import jax
import numpy as np
import pytest
from random_test import BF16, assert_bits_equal

import minijax

VARIANCE_SCALING = ["glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
                    "lecun_normal", "lecun_uniform", "xavier_normal", "xavier_uniform",
                    "kaiming_normal", "kaiming_uniform"]


@pytest.mark.parametrize("name", VARIANCE_SCALING)
def test_variance_scaling_family(name):
    for seed in [0, 9]:
        got = getattr(minijax.nn.initializers, name)()(minijax.random.key(seed), (4, 5))
        want = getattr(jax.nn.initializers, name)()(jax.random.key(seed), (4, 5))
        assert_bits_equal(got, want, f"{name} seed {seed}")


@pytest.mark.parametrize("dtype", [BF16, np.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", ["glorot_normal", "he_uniform"])
def test_half_precision(name, dtype):
    got = getattr(minijax.nn.initializers, name)()(minijax.random.PRNGKey(1), (4, 5), dtype)
    want = getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(1), (4, 5), dtype)
    assert_bits_equal(got, want)


@pytest.mark.parametrize("args,kwargs", [
    ((2.0, "fan_out", "normal"), {}),
    ((0.5, "fan_geo_avg", "uniform"), {}),
    ((1.0, "fan_in", "truncated_normal"), dict(in_axis=1, out_axis=0)),  # a conv kernel OIHW
    ((2.0, "fan_avg", "uniform"), dict(batch_axis=0)),
], ids=["fan_out", "fan_geo_avg", "conv_axes", "batch_axis"])
def test_variance_scaling_modes_and_axes(args, kwargs):
    shape = (3, 4, 2, 2) if "in_axis" in kwargs else (2, 4, 5) if kwargs else (4, 5)
    got = minijax.nn.initializers.variance_scaling(*args, **kwargs)(
        minijax.random.PRNGKey(4), shape)
    want = jax.nn.initializers.variance_scaling(*args, **kwargs)(jax.random.PRNGKey(4), shape)
    assert_bits_equal(got, want)


@pytest.mark.parametrize("name", ["normal", "uniform", "truncated_normal"])
def test_simple_builders(name):
    for args in [(), (0.3,)]:
        got = getattr(minijax.nn.initializers, name)(*args)(minijax.random.key(2), (4, 5))
        want = getattr(jax.nn.initializers, name)(*args)(jax.random.key(2), (4, 5))
        assert_bits_equal(got, want, f"{name}{args}")


def test_constant_initializers():
    mi, ji = minijax.nn.initializers, jax.nn.initializers
    assert_bits_equal(mi.zeros(None, (2, 3)), ji.zeros(None, (2, 3)))
    assert_bits_equal(mi.ones(None, (2, 3), np.float16), ji.ones(None, (2, 3), np.float16))
    assert_bits_equal(mi.constant(1.5)(None, (2,)), ji.constant(1.5)(None, (2,)))


def test_under_jit():
    init = lambda I: lambda k: (I.glorot_normal()(k, (4, 5)), I.he_uniform()(k, (4, 5)))
    got = minijax.jit(init(minijax.nn.initializers))(minijax.random.key(3))
    want = jax.jit(init(jax.nn.initializers))(jax.random.key(3))
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def test_errors():
    with pytest.raises(ValueError, match="at least 2D"):
        minijax.nn.initializers.glorot_normal()(minijax.random.key(0), (3,))
    with pytest.raises(ValueError, match="invalid mode"):
        minijax.nn.initializers.variance_scaling(1.0, "fan_median", "normal")(
            minijax.random.key(0), (3, 3))
