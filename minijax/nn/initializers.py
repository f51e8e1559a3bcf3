"""`minijax.nn.initializers`: the weight initializers of `jax.nn.initializers`.

Each builder (`glorot_normal()`, `he_uniform()`, ...) returns `init(key, shape, dtype)`. They
are all `variance_scaling`: draw from a (truncated) normal or a uniform distribution and scale
so the variance is `scale / n`, where n counts the layer's inputs, outputs or their mean
(from `_compute_fans`). Given the same key, the values equal JAX's bit for bit.
Mirrors jax/_src/nn/initializers.py. Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from minijax import dtypes, numpy as jnp, random


def _float_dtype(dtype) -> np.dtype:
    return dtypes.default_float_dtype() if dtype is None else np.dtype(dtype)


def _real_only(dtype, name: str) -> None:
    if np.dtype(dtype).kind == "c":
        raise NotImplementedError(f"nn.initializers.{name}: complex dtypes are not in minijax "
                                  "yet")


# JAX: jax/_src/nn/initializers.py zeros
def zeros(key, shape: Sequence[int], dtype=None):
    """An array of zeros (`key` is ignored)."""
    return jnp.zeros(shape, _float_dtype(dtype))


# JAX: jax/_src/nn/initializers.py ones
def ones(key, shape: Sequence[int], dtype=None):
    """An array of ones (`key` is ignored)."""
    return jnp.ones(shape, _float_dtype(dtype))


# JAX: jax/_src/nn/initializers.py constant
def constant(value, dtype=None):
    """An initializer of arrays full of `value`."""
    def init(key, shape, dtype=dtype):
        return jnp.full(shape, value, dtype=_float_dtype(dtype))
    return init


# JAX: jax/_src/nn/initializers.py uniform
def uniform(scale=1e-2, dtype=None):
    """An initializer of uniform values in [0, scale)."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype)
        return random.uniform(key, shape, dtype) * jnp.array(scale, dtype)
    return init


# JAX: jax/_src/nn/initializers.py normal
def normal(stddev=1e-2, dtype=None):
    """An initializer of normal values with mean 0 and standard deviation `stddev`."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype)
        return random.normal(key, shape, dtype) * jnp.array(stddev, dtype)
    return init


# JAX: jax/_src/nn/initializers.py truncated_normal
def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer of normal values truncated to (lower, upper), then times `stddev` (no
    correction for the variance lost by truncating)."""
    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype) * jnp.array(stddev,
                                                                                    dtype)
    return init


# JAX: jax/_src/nn/initializers.py _compute_fans
def _compute_fans(shape: Sequence[int], in_axis=-2, out_axis=-1, batch_axis=()):
    """(fan_in, fan_out) of a weight shape: the input / output sizes times the receptive field
    (the product of the axes that are neither in, out nor batch, e.g. a conv kernel's)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    size = lambda axes: shape[axes] if isinstance(axes, int) else math.prod(shape[i]
                                                                            for i in axes)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


# JAX: jax/_src/nn/initializers.py variance_scaling
def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1,
                     batch_axis=(), dtype=None):
    """An initializer with variance `scale / n`, n given by `mode`: "fan_in", "fan_out",
    "fan_avg" (their mean) or "fan_geo_avg" (their geometric mean).

    distribution: "truncated_normal" (truncated at 2 standard deviations, rescaled to keep the
    variance), "normal" or "uniform". Raises ValueError for other modes or distributions.
    """
    def init(key, shape, dtype=dtype):
        shape = tuple(int(d) for d in shape)
        dtype = _float_dtype(dtype)
        _real_only(dtype, "variance_scaling")
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        if distribution == "truncated_normal":
            # .8796... is the standard deviation of a standard normal truncated to (-2, 2)
            stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
            return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            # uniform on (-1, 1) has variance 1/3
            return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


# JAX: jax/_src/nn/initializers.py glorot_uniform
def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """Glorot (Xavier) uniform: variance_scaling(1.0, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


# JAX: jax/_src/nn/initializers.py glorot_normal
def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """Glorot (Xavier) normal: variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


# JAX: jax/_src/nn/initializers.py lecun_uniform
def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """LeCun uniform: variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


# JAX: jax/_src/nn/initializers.py lecun_normal
def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """LeCun normal: variance_scaling(1.0, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


# JAX: jax/_src/nn/initializers.py he_uniform
def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """He (Kaiming) uniform: variance_scaling(2.0, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


# JAX: jax/_src/nn/initializers.py he_normal
def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """He (Kaiming) normal: variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal
