"""`minijax.nn`: activations and helpers written with `minijax.numpy`, as `jax.nn`.

Mirrors jax/_src/nn/functions.py; `minijax.nn.initializers` (minijax/nn/initializers.py)
mirrors jax/_src/nn/initializers.py.
"""

from __future__ import annotations

import numpy as np

from minijax import lax
from minijax import numpy as jnp
from minijax.nn import initializers  # noqa: F401


def relu(x):
    """max(x, 0). Its derivative at 0 is 0, as in JAX."""
    # jnp.maximum alone would split the derivative at the tie x == 0 (0.5, as lax.max does);
    # JAX's relu is a custom_jvp with derivative 0 there, which this select reproduces
    return jnp.where(x > 0, x, lax.stop_gradient(jnp.maximum(x, 0)))


def sigmoid(x):
    """1 / (1 + exp(-x)), the `logistic` primitive. As in JAX there is no promotion: integer
    inputs raise TypeError."""
    return lax.logistic(x)


def _inexact(name, *args):
    from minijax.numpy.util import promote_args_inexact
    return promote_args_inexact(name, *args)


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit. With approximate=True (JAX's default) the tanh form
    `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))`; with approximate=False the exact
    `x/2 * (1 + erf(x / sqrt(2)))` (JAX writes it with erfc, which minijax lacks). Integer
    inputs are promoted to float."""
    (x,) = _inexact("gelu", x)
    if not approximate:
        sqrt_half = np.sqrt(0.5).astype(x.dtype)
        return 0.5 * x * (1.0 + lax.erf(x * sqrt_half))
    c = np.sqrt(2 / np.pi).astype(x.dtype)
    cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3))))
    return x * cdf


def softmax(x, axis: int = -1):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the (gradient-stopped) max for stability."""
    x_max = jnp.max(x, axis, keepdims=True)
    unnormalized = jnp.exp(x - lax.stop_gradient(x_max))
    return unnormalized / jnp.sum(unnormalized, axis, keepdims=True)


def log_softmax(x, axis: int = -1):
    """x - logsumexp(x) along `axis`, computed stably."""
    x_max = jnp.max(x, axis, keepdims=True)
    shifted = x - lax.stop_gradient(x_max)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis, keepdims=True))


def logsumexp(a, axis=None, keepdims: bool = False):
    """log(sum(exp(a))) over `axis`, stable for large values; -inf entries are handled."""
    a = jnp.asarray(a)
    amax = jnp.max(a, axis, keepdims=True)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, jnp.zeros_like(amax)))
    out = jnp.log(jnp.sum(jnp.exp(a - amax), axis, keepdims=True)) + amax
    if not keepdims:
        axes = tuple(range(jnp.ndim(a))) if axis is None else (
            (axis,) if isinstance(axis, int) else tuple(axis))
        out = jnp.squeeze(out, axes)
    return out


def one_hot(x, num_classes: int, dtype=jnp.float32, axis: int = -1):
    """`x[..., None] == arange(num_classes)` as `dtype`; out-of-range values give all zeros."""
    x = jnp.asarray(x)
    pos = axis % (jnp.ndim(x) + 1)
    classes_shape = [1] * (jnp.ndim(x) + 1)
    classes_shape[pos] = num_classes
    classes = lax.broadcasted_iota(np.int32, tuple(classes_shape), pos)
    return (jnp.expand_dims(x, pos) == classes).astype(dtype)


# JAX: jax/_src/nn/functions.py relu6 — differs: a select instead of a custom_jvp
def relu6(x):
    """min(max(x, 0), 6). Its derivative is 0 at x == 0 and x == 6, as in JAX."""
    # as in relu: the select keeps the kinks' derivative 0 (jnp.minimum/maximum split ties)
    inside = (x > 0) & (x < 6)
    return jnp.where(inside, x, lax.stop_gradient(jnp.minimum(jnp.maximum(x, 0), 6.0)))


# JAX: jax/_src/nn/functions.py silu
def silu(x):
    """x * sigmoid(x) (float dtypes; integers raise TypeError, as sigmoid's do). Also named
    `swish`."""
    return x * sigmoid(x)


swish = silu


# JAX: jax/_src/nn/functions.py softplus
def softplus(x):
    """log(1 + exp(x)), computed as logaddexp(x, 0) so large x do not overflow."""
    return jnp.logaddexp(x, 0)


# JAX: jax/_src/nn/functions.py log_sigmoid
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return -softplus(-x)


# JAX: jax/_src/nn/functions.py standardize — differs: no `where` mask
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) over `axis` (an int or tuple). `mean` and
    `variance` are computed when not given (keepdims shapes); algorithm "fast" uses
    E[x**2] - E[x]**2 clipped at 0, "stable" E[(x - mean)**2]. ValueError for another
    algorithm."""
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True) - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)
