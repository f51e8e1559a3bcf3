"""`minijax.nn`: activations and helpers written with `minijax.numpy`, as `jax.nn`.

Mirrors jax/_src/nn/functions.py; `minijax.nn.initializers` (minijax/nn/initializers.py)
mirrors jax/_src/nn/initializers.py.
"""

from __future__ import annotations

import dataclasses
import warnings

import ml_dtypes
import numpy as np

from minijax import lax
from minijax.custom_derivatives import custom_jvp
from minijax import numpy as jnp
from minijax.nn import initializers  # noqa: F401
from minijax.numpy.util import jit_when_traced as _jit_when_traced, promote_args_inexact




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


# JAX: jax/_src/nn/functions.py one_hot (its body `_one_hot` under jit, as JAX's)
def one_hot(x, num_classes: int, dtype=jnp.float32, axis: int = -1):
    """`x[..., None] == arange(num_classes)` as `dtype` (the class axis at `axis`): shape
    `x.shape` with `num_classes` inserted; out-of-range values give all zeros."""
    x = jnp.asarray(x)
    return _one_hot(x, num_classes=num_classes, dtype=dtype, axis=axis)


@_jit_when_traced(static_argnames=("num_classes", "dtype", "axis"))
def _one_hot(x, *, num_classes, dtype, axis):
    pos = axis % (jnp.ndim(x) + 1)
    lhs = lax.expand_dims(x, (axis,))
    classes_shape = [1] * jnp.ndim(x)
    classes_shape.insert(pos, num_classes)
    rhs = lax.broadcasted_iota(jnp.asarray(x).dtype, tuple(classes_shape), pos)
    return (lhs == rhs).astype(dtype)


# JAX: jax/_src/nn/functions.py relu (a custom_jvp of a jitted function, as JAX's: one max
# forward, one select of the tangent where x > 0 backward, op for op JAX's program)
@custom_jvp
@_jit_when_traced()
def relu(x):
    """max(x, 0), shape and dtype of `x`. Derivative 0 at 0 as in JAX (lax.max splits ties)."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: lax.select(x > 0, g, lax.full_like(g, 0)))


# JAX: jax/_src/nn/functions.py relu6 (a custom_jvp of a jitted function, as JAX's)
@custom_jvp
@_jit_when_traced()
def relu6(x):
    """min(max(x, 0), 6), shape and dtype of `x`. Its derivative is 0 at x == 0 and x == 6, as
    in JAX: a custom_jvp whose rule selects the tangent strictly inside (0, 6)."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, ans, x: lax.select((x > 0) & (x < 6), g, lax.full_like(g, 0)))


# JAX: jax/_src/nn/functions.py silu (under jit, as JAX's)
@_jit_when_traced()
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


# ---------------------------------------------------------------------------------------------
# More activations (each under jit when traced, as JAX's `@jax.jit` ones)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/nn/functions.py identity
@_jit_when_traced()
def identity(x):
    """x itself (an activation slot that does nothing)."""
    return jnp.asarray(x)


tanh = jnp.tanh


# JAX: jax/_src/nn/functions.py elu
@_jit_when_traced()
def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise; the exp sees only x <= 0, so large x
    cannot overflow into the unused branch's gradient."""
    x = jnp.asarray(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


# JAX: jax/_src/nn/functions.py celu
@_jit_when_traced()
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1): elu made differentiable at 0 for
    any alpha."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


# JAX: jax/_src/nn/functions.py selu
@_jit_when_traced()
def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants alpha ~ 1.6733 and
    scale ~ 1.0507."""
    return 1.0507009873554804934193349852946 * elu(x, 1.6732632423543772848170429916717)


# JAX: jax/_src/nn/functions.py leaky_relu
@_jit_when_traced()
def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x below."""
    x = jnp.asarray(x)
    return jnp.where(x >= 0, x, negative_slope * x)


# JAX: jax/_src/nn/functions.py hard_tanh
@_jit_when_traced()
def hard_tanh(x):
    """x clipped to [-1, 1]."""
    x = jnp.asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


# JAX: jax/_src/nn/functions.py hard_sigmoid
@_jit_when_traced()
def hard_sigmoid(x):
    """relu6(x + 3) / 6: a piecewise-linear sigmoid."""
    return relu6(x + 3.0) / 6.0


# JAX: jax/_src/nn/functions.py hard_silu
@_jit_when_traced()
def hard_silu(x):
    """x * hard_sigmoid(x). Also named `hard_swish`."""
    return x * hard_sigmoid(x)


hard_swish = hard_silu


# JAX: jax/_src/nn/functions.py mish
@_jit_when_traced()
def mish(x):
    """x * tanh(softplus(x))."""
    x = jnp.asarray(x)
    return x * jnp.tanh(softplus(x))


# JAX: jax/_src/nn/functions.py soft_sign
@_jit_when_traced()
def soft_sign(x):
    """x / (|x| + 1)."""
    x = jnp.asarray(x)
    return x / (jnp.abs(x) + 1)


# JAX: jax/_src/nn/functions.py squareplus
@_jit_when_traced()
def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2: a smooth relu built from a square root."""
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


# JAX: jax/_src/nn/functions.py sparse_plus
@_jit_when_traced()
def sparse_plus(x):
    """0 below -1, x above 1, (x + 1)**2 / 4 between: a softplus with exact zeros."""
    x = jnp.asarray(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


# JAX: jax/_src/nn/functions.py sparse_sigmoid
@_jit_when_traced()
def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2, the derivative of sparse_plus."""
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


# JAX: jax/_src/nn/functions.py glu
@_jit_when_traced(static_argnames=("axis",))
def glu(x, axis: int = -1):
    """The gated linear unit: the two halves a, b of `x` along `axis` give a * sigmoid(b).
    ValueError when that axis has odd length."""
    x = jnp.asarray(x)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: axis {axis} of x with shape {x.shape} must have even length")
    a, b = jnp.split(x, 2, axis)
    return a * sigmoid(b)


# JAX: jax/_src/nn/functions.py log1mexp — differs: a where instead of a custom_jvp
@_jit_when_traced()
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, accurate on both sides of log 2 (log(-expm1(-x)) below,
    log1p(-exp(-x)) above)."""
    (x,) = promote_args_inexact("log1mexp", x)
    return jnp.where(x < np.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


# JAX: jax/_src/nn/functions.py logmeanexp
@_jit_when_traced(static_argnames=("axis", "keepdims"))
def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) over `axis`, stably: logsumexp minus the log of the count (of the
    entries `where` selects)."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = jnp.ones_like(x) if where is None else jnp.where(where, 1.0, 0.0)
    count = jnp.sum(ones, axis=axis, keepdims=keepdims).astype(lse.dtype)
    return lse - jnp.log(count)


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------

def _attention_mask(logits_shape, mask, is_causal, q_len, kv_len, window):
    """The boolean mask (broadcastable to B, K, G, T, S) of the logits to keep, or None."""
    T, S = logits_shape[-2:]
    keep = None

    def both(m):
        return m if keep is None else jnp.logical_and(keep, m)
    if mask is not None:
        keep = both(mask)
    q_pos, k_pos = jnp.arange(T)[:, None], jnp.arange(S)[None, :]
    if is_causal:
        keep = both(q_pos >= k_pos)
    if window is not None:
        left, right = window
        keep = both(jnp.logical_and(q_pos <= k_pos + left, q_pos >= k_pos - right))
    if q_len is not None:
        keep = both((jnp.arange(T)[None, :, None] < q_len[:, None, None])[:, None, None])
    if kv_len is not None:
        keep = both((jnp.arange(S)[None, None, :] < kv_len[:, None, None])[:, None, None])
    return keep


# JAX: jax/_src/nn/functions.py dot_product_attention — differs: the XLA implementation only
def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """softmax(q k^T * scale + bias, masked) v for query f[B, T, N, H], key and value
    f[B, S, K, H] (or the same without B), with N a multiple of K (grouped-query attention:
    each K head serves N / K query heads). `bias` and the boolean `mask` broadcast to
    [B, N, T, S]; `is_causal` keeps s <= t; `query_seq_lengths` / `key_value_seq_lengths`
    (i32[B]) mask padding; `local_window_size` (int or (left, right)) keeps
    t - left <= s <= t + right. `scale` defaults to 1 / sqrt(H). Masked logits become a large
    negative number, and the softmax runs in float32. Returns f[B, T, N, H] (and, with
    `return_residual`, the logsumexp f[B, T, N]). ValueError for mismatched shapes or dtypes,
    NotImplementedError for implementation='cudnn' (a GPU kernel)."""
    out_shape = jnp.shape(query)

    def as_4d(t):
        t = jnp.asarray(t)
        return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t
    q, k, v = as_4d(query), as_4d(key), as_4d(value)
    bias = None if bias is None else as_4d(bias)
    mask = None if mask is None else as_4d(mask)
    B, S, K, H = k.shape
    for name, t, want, dtype in (("value", v, (B, S, K, H), k.dtype),
                                 ("query", q, (B, -1, -1, H), k.dtype),
                                 ("mask", mask, (-1,) * 4, np.dtype(bool)),
                                 ("bias", bias, (-1,) * 4, None)):
        if t is None:
            continue
        if dtype is not None and t.dtype != dtype:
            raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
        if any(w != -1 and d != w for d, w in zip(t.shape, want)) or t.ndim != 4:
            raise ValueError(f"{name} shape should be {list(want)}: but got {t.shape}")
    N = q.shape[2]
    if N % K:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    if implementation == "cudnn":
        raise NotImplementedError("dot_product_attention(implementation='cudnn') is cuDNN's "
                                  "GPU kernel; minijax has the 'xla' implementation")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation}")
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    q_len = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    G, T = N // K, q.shape[1]

    def grouped(t):  # [B, N or 1, T, S] -> [B, K or 1, G or 1, T, S]
        if t is None or t.shape[1] == 1:
            return None if t is None else t[:, :, None]
        return jnp.reshape(t, (t.shape[0], K, G) + t.shape[2:])
    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", jnp.reshape(q, (B, T, K, G, H)), k,
                        preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + grouped(bias)).astype(logits.dtype)
    keep = _attention_mask(logits.shape, grouped(mask), is_causal, q_len, kv_len,
                           local_window_size)
    if keep is not None:
        big_negative = -0.7 * min(float(jnp.finfo(logits.dtype).max),
                                  float(np.finfo(np.float32).max))
        logits = jnp.where(keep, logits, jnp.array(big_negative, logits.dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)
    out = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_len is not None:
        out = out * (jnp.arange(T)[None, :] < q_len[:, None])[:, :, None, None, None].astype(
            out.dtype)
    out = jnp.reshape(out, out_shape)
    if return_residual:
        lse = logsumexp(logits, axis=-1).astype(k.dtype)  # [B, K, G, T]
        lse = lax.stop_gradient(jnp.reshape(jnp.moveaxis(lse, -1, 1), (B, T, N)))
        return out, jnp.reshape(lse, out_shape[:-1])
    return out


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)


# ---------------------------------------------------------------------------------------------
# Block-scaled matmul
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/cudnn/scaled_matmul_stablehlo.py BlockScaleConfig
@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How `scaled_dot_general` quantizes an operand: blocks of `block_size` elements along
    the contracting axis stored as `data_type`, each with one scale of `scale_type`."""
    mode: str
    block_size: int
    data_type: object
    scale_type: object
    global_scale: object
    infer_only: bool


# JAX: jax/_src/nn/functions.py scaled_matmul — differs: computed as its definition, in
# float32 (JAX calls cuDNN's fused kernel, which it lowers on NVIDIA GPUs only, not on CPU)
def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """Block-scaled batched matmul: lhs f32[B,M,K] and rhs f32[B,N,K], each multiplied by its
    scales (f32[B,M,K_a] / f32[B,N,K_b], one per block of K // K_a elements along K), then
    contracted along K: f32[B,M,N] (of `preferred_element_type`).
    Raises ValueError for operands that are not 3-D, or batch / contracting / kept
    dimensions that do not match (JAX's messages), or a K not divisible into the blocks."""
    a, b, sa, sb = (jnp.asarray(v) for v in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(v.ndim == 3 for v in (a, b, sa, sb)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    if a.shape[2] != b.shape[2] or a.shape[0] != b.shape[0]:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                         "and contract (K) dimensions, but got shapes "
                         f"{a.shape} and {b.shape}")
    if sa.shape[2] != sb.shape[2] or sa.shape[0] != sb.shape[0]:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {sa.shape} and {sb.shape}")
    if sa.shape[1] != a.shape[1] or sb.shape[1] != b.shape[1]:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of "
                         f"inputs, but got shapes a: {a.shape}, b: {b.shape}, a_scales: "
                         f"{sa.shape}, b_scales: {sb.shape}")
    if a.shape[2] % sa.shape[2]:
        raise ValueError(f"scaled_matmul: the contracting dimension {a.shape[2]} does not "
                         f"split into {sa.shape[2]} blocks")

    def scaled(x, s):
        f32 = np.float32
        return x.astype(f32) * jnp.repeat(s.astype(f32), x.shape[2] // s.shape[2], axis=2)
    out = lax.dot_general(scaled(a, sa), scaled(b, sb), (((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=np.float32)
    return out.astype(preferred_element_type)


# JAX: jax/_src/nn/functions.py get_scaled_dot_general_config
def get_scaled_dot_general_config(mode: str, global_scale=None) -> BlockScaleConfig:
    """JAX's two block-scaling recipes: 'mxfp8' (blocks of 32 float8_e4m3fn values, one
    float8_e8m0fnu scale each) and 'nvfp4' (blocks of 16 float4_e2m1fn values, float8_e4m3fn
    scales, and a global f32[1] scale, default 1). Raises ValueError for another mode."""
    if mode == "nvfp4":
        one = jnp.ones((1,), np.float32) if global_scale is None else global_scale
        return BlockScaleConfig("nvfp4", 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn,
                                one, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu,
                                None, False)
    raise ValueError(f"Unsupported mode: {mode}")


# JAX: jax/_src/nn/functions.py scaled_dot_general — differs: without `configs` only (the
# quantized path is cuDNN's, on NVIDIA GPUs)
def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """`lax.dot_general(lhs, rhs, dimension_numbers)` giving `preferred_element_type`, as JAX
    computes it when `configs` is None. Raises NotImplementedError for `configs` (block-scaled
    fp8/fp4 quantization, which minijax does not model)."""
    if implementation is not None:  # JAX's warning
        warnings.warn("Backend selector, now ignored. The system chooses the backend "
                      "automatically.", DeprecationWarning, stacklevel=2)
    if configs is not None:
        raise NotImplementedError("scaled_dot_general: minijax does not model block-scaled "
                                  f"quantization ({configs[0].mode}); pass configs=None")
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)
