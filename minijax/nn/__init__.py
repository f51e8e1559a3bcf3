"""`minijax.nn`: activations and helpers written with `minijax.numpy`, as `jax.nn`.

Mirrors jax/_src/nn/functions.py; `minijax.nn.initializers` (minijax/nn/initializers.py)
mirrors jax/_src/nn/initializers.py.
"""

from __future__ import annotations

import numpy as np

import functools

from minijax import core, lax, tree_util
from minijax import numpy as jnp
from minijax.pjit import jit
from minijax.nn import initializers  # noqa: F401
from minijax.numpy.util import promote_args_inexact


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


# JAX: jax/_src/nn/functions.py softmax (_softmax_deprecated: JAX's default, no custom_jvp)
def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis` (an int or a tuple), shifted by the gradient-stopped
    max (taken with `initial=-inf`, as JAX). `where` masks entries: they get 0."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


def _jit_when_traced(**jit_kwargs):
    """A decorator: call `fun` under `jit(fun, **jit_kwargs)` when an argument is traced, so
    a jaxpr shows `jit[name=fun]` as JAX's `@jax.jit` functions do; eagerly call it directly
    (the same values, without a compilation per new shape). As `jnp.where`'s `_where`."""
    def wrap(fun):
        jitted = jit(fun, **jit_kwargs)

        @functools.wraps(fun)
        def wrapper(*args, **kwargs):
            if any(isinstance(leaf, core.Tracer)
                   for leaf in tree_util.tree_leaves((args, kwargs))):
                return jitted(*args, **kwargs)
            return fun(*args, **kwargs)
        return wrapper
    return wrap


# JAX: jax/_src/nn/functions.py log_softmax (under jit, static axis, as JAX's)
@_jit_when_traced(static_argnames=("axis",))
def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis`, computed stably. `where` masks entries: they get -inf."""
    x = jnp.asarray(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_logsumexp = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_logsumexp
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


# JAX: jax/_src/ops/special.py logsumexp — differs: no complex inputs
def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
    """log(sum(b * exp(a))) over `axis` (None: all), stable for large values: the finite max
    is subtracted first (gradient-stopped); -inf entries are handled. With `return_sign`,
    returns `(log|sum|, sign(sum))`; otherwise a negative sum gives NaN.
    Raises ValueError for a repeated axis."""
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = jnp.broadcast_arrays(*promote_args_inexact("logsumexp", a, b))
        a = jnp.where(b != 0, a, -np.inf)
    else:
        (a,) = promote_args_inexact("logsumexp", a)
    if axis is None:
        dims = tuple(range(a.ndim))
    else:
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        dims = tuple(int(d) % a.ndim if a.ndim else int(d) for d in axes)
        if len(set(dims)) != len(dims):
            raise ValueError(f"logsumexp: duplicate value in 'axis': {axis}")
    amax = jnp.max(a, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(lax.select(jnp.isfinite(amax), amax, lax.full_like(amax, 0)))
    amax_with_dims = amax if keepdims else lax.expand_dims(amax, dims)
    exp_a = lax.exp(lax.sub(a, amax_with_dims))
    if b is not None:
        exp_a = lax.mul(exp_a, b)
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    out = lax.add(lax.log(lax.abs(sumexp)), amax)
    if return_sign:
        return out, sign
    if b is not None:
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
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


# JAX: jax/_src/nn/functions.py softplus (under jit, as JAX's)
@_jit_when_traced()
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


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing
    raise missing(__name__, name)
