"""`minijax.random`: keys, split/fold_in and samplers, bit for bit those of `jax.random`.

Every sampler turns random *bits* (minijax/prng.py) into numbers with ordinary primitives:
`uniform` puts 23 random bits in the mantissa of a float in [1, 2) and subtracts 1; `normal`
is `sqrt(2) * erf_inv(u)`; `randint` reduces two words modulo the range; `permutation` sorts
by random keys; `gamma` (and beta, dirichlet, chisquare, f, t, ball...) runs Marsaglia and
Tsang's rejection loop per element in a `while_loop`, inside its own primitive `random_gamma`;
`poisson` and `binomial` loop until every element is accepted. As in JAX, the samplers are
`jit`-compiled functions (with the shape and dtype static), so their float arithmetic is XLA's
whether they are called eagerly or not, and their results equal JAX's. Keys may be typed
(`key`) or raw u32[2] arrays (`PRNGKey`).

Defaults as in JAX 0.10 with x64 off: float32/int32/uint32 results, the threefry2x32
implementation, `jax_threefry_partitionable=True`. Mirrors jax/_src/random/core.py.
Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from minijax import config, core, dtypes, numpy as jnp, prng
from minijax.api import vmap
from minijax.interpreters import ad, batching, mlir
from minijax.lax import lax
from minijax.lax.control_flow.loops import cumsum, map as lax_map, scan, while_loop
from minijax.lax.lax import _const
from minijax.lax.special import erf, erf_inv, lgamma, random_gamma_grad
from minijax.numpy.util import check_arraylike, promote_args_inexact, promote_dtypes
from minijax.pjit import jit
from minijax.prng import PRNGKeyArray

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "split", "fold_in",
           "bits", "uniform", "normal", "truncated_normal", "bernoulli", "randint",
           "permutation", "choice", "gumbel", "categorical", "exponential", "laplace",
           "logistic", "cauchy", "rademacher", "maxwell", "double_sided_maxwell",
           "weibull_min", "pareto", "lognormal", "rayleigh", "wald", "geometric", "triangular",
           "multivariate_normal", "orthogonal", "clone", "key_dtype", "gamma", "loggamma",
           "beta", "dirichlet", "chisquare", "f", "t", "generalized_normal", "ball", "poisson",
           "binomial", "multinomial", "random_gamma_p"]

# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------


def _check_prng_key(name: str, key, allow_batched: bool = False) -> tuple[PRNGKeyArray, bool]:
    """Typed keys for `key`, and whether it came in raw (so results go back out raw)."""
    if isinstance(key, PRNGKeyArray):
        typed, wrapped = key, False
    else:
        try:
            core.get_aval(key)
        except TypeError:
            raise TypeError(f"unexpected PRNG key type {type(key)}") from None
        typed, wrapped = prng.random_wrap(key, _resolve_impl(None)), True
    if not allow_batched and typed.ndim:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{typed.shape} != (). Use minijax.vmap for batching.")
    return typed, wrapped


def _return_prng_keys(wrapped: bool, keys: PRNGKeyArray):
    return prng.random_unwrap(keys) if wrapped else keys


def _raw(name: str, key) -> PRNGKeyArray:
    """A single key (typed or raw) as a typed key: the samplers' jitted bodies take it whole
    (a pytree over its words), so they draw bits with its implementation."""
    return _check_prng_key(name, key)[0]


# JAX: jax/_src/random/core.py resolve_prng_impl
def _resolve_impl(impl) -> prng.PRNGImpl:
    if impl is None:
        return prng.prngs[config.default_prng_impl.value]
    if isinstance(impl, prng.PRNGImpl):
        return impl
    if impl in prng.prngs:
        return prng.prngs[impl]
    raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                     f'{", ".join(prng.prngs)}?')


def _seed_key(ctor_name: str, seed, impl) -> PRNGKeyArray:
    impl = _resolve_impl(impl)
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, int):
        # as JAX: a Python int is taken as int64 first, so with x64 off a large seed wraps to
        # its low 32 bits instead of overflowing
        seed = np.int64(seed)
    seed = jnp.asarray(seed)
    if jnp.ndim(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given an array of shape "
                        f"{jnp.shape(seed)} != (). Use minijax.vmap for batching")
    return PRNGKeyArray(impl, impl.seed(seed))


# JAX: jax/_src/random/core.py key
def key(seed, *, impl=None) -> PRNGKeyArray:
    """A typed PRNG key (shape `()`, dtype `key<fry>`) from an integer seed.

    Args:
      seed: a Python int or integer scalar; its low 32 bits with x64 off.
    Returns: a key for `split`, `fold_in` and the samplers; `key_data` gives its u32[2].
    Raises TypeError for array or non-integer seeds.
    """
    return _seed_key("key", seed, impl)


# JAX: jax/_src/random/core.py PRNGKey
def PRNGKey(seed, *, impl=None):  # JAX's name
    """A legacy raw key: u32[2] `[seed >> 32, seed & 0xFFFFFFFF]`."""
    return prng.random_unwrap(_seed_key("PRNGKey", seed, impl))


# JAX: jax/_src/random/core.py key_data
def key_data(keys):
    """The raw u32[..., 2] words under typed keys (raw keys are returned as they are)."""
    return prng.random_unwrap(_check_prng_key("key_data", keys, allow_batched=True)[0])


# JAX: jax/_src/random/core.py wrap_key_data
def wrap_key_data(key_bits_array, *, impl=None) -> PRNGKeyArray:
    """Typed keys over raw u32[..., 2] words."""
    return prng.random_wrap(jnp.asarray(key_bits_array), _resolve_impl(impl))


# JAX: jax/_src/random/core.py key_impl
def key_impl(keys) -> str:
    return _check_prng_key("key_impl", keys, allow_batched=True)[0]._impl.name


# JAX: jax/_src/random/core.py split
def split(key, num: int | Sequence[int] = 2):
    """`num` new keys (or a `num`-shaped array of keys) from one key; raw in, raw out.

    Returns: keys of shape `(num,)` (typed) or u32[num, 2] (raw).
    """
    typed, wrapped = _check_prng_key("split", key)
    shape = _shape(num)
    out = typed._impl.split(prng.random_unwrap(typed), shape)
    return _return_prng_keys(wrapped, PRNGKeyArray(typed._impl, out))


# JAX: jax/_src/random/core.py fold_in
def fold_in(key, data):
    """A new key from `key` and a 32-bit integer `data` (e.g. a step number)."""
    typed, wrapped = _check_prng_key("fold_in", key)
    if jnp.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{jnp.shape(data)} != (). Use minijax.vmap for batching.")
    out = typed._impl.fold_in(prng.random_unwrap(typed), jnp.asarray(data, dtype=np.uint32))
    return _return_prng_keys(wrapped, PRNGKeyArray(typed._impl, out))


def _split2(key: PRNGKeyArray):
    """Two typed keys from a typed key (what samplers use inside)."""
    keys = prng.random_split(key, (2,))
    return keys[0], keys[1]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _shape(shape) -> tuple[int, ...]:
    return core.canonicalize_shape((shape,) if np.ndim(shape) == 0 else shape)


def _float_dtype(name: str, dtype) -> np.dtype:
    dtype = dtypes.canonicalize_dtype(np.float64 if dtype is None else dtype)
    if not dtypes.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dtype}")
    return dtype


def _check_shape(name: str, shape: tuple, *param_shapes) -> None:
    if param_shapes:
        shape_ = np.broadcast_shapes(shape, *param_shapes)
        if shape != shape_:
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result {shape_} for shape argument "
                             f"{shape}.")


def _broadcast_to_rank(x, rank: int):
    shape = jnp.shape(x)
    if len(shape) >= rank:
        return x
    pad = rank - len(shape)
    return lax.broadcast_in_dim(x, (1,) * pad + shape, tuple(range(pad, rank)))


def _top_k_indices(x, k: int):
    """Indices of the `k` largest entries along the last axis, largest first, ties to the
    lower index. (JAX calls lax.top_k; minijax sorts -x stably, which orders the same.)"""
    shape = jnp.shape(x)
    iota = lax.broadcasted_iota(np.int32, shape, len(shape) - 1)
    _, idx = lax.sort_key_val(lax.neg(x), iota, len(shape) - 1)
    return lax.slice(idx, (0,) * len(shape), shape[:-1] + (k,))


def _take(arr, ind, axis: int):
    """`jnp.take(arr, ind, axis)` for in-range integer `ind` of any shape (through
    take_along_axis: minijax has no gather primitive yet)."""
    shape = jnp.shape(arr)
    ind_shape = jnp.shape(ind)
    flat = jnp.ravel(ind)
    k = math.prod(ind_shape)
    wide = shape[:axis] + (k,) + shape[axis + 1:]
    out = jnp.take_along_axis(arr, lax.broadcast_in_dim(flat, wide, (axis,)), axis)
    return jnp.reshape(out, shape[:axis] + ind_shape + shape[axis + 1:])


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/random/core.py bits
def bits(key, shape: Sequence[int] = (), dtype=None):
    """Uniform random bits u32[*shape] (or the unsigned `dtype` given)."""
    raw = _raw("bits", key)
    dtype = dtypes.canonicalize_dtype(np.uint64 if dtype is None else dtype)
    if np.dtype(dtype).kind != "u":
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return prng.random_bits(raw, np.dtype(dtype).itemsize * 8, _shape(shape))


# JAX: jax/_src/random/core.py uniform
def uniform(key, shape: Sequence[int] = (), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) of `shape` and float `dtype` (default float32).

    minval/maxval may be arrays broadcasting to `shape`. Raises ValueError for non-float dtypes.
    """
    raw = _raw("uniform", key)
    return _uniform(raw, minval, maxval, _shape(shape), _float_dtype("uniform", dtype))


@functools.partial(jit, static_argnums=(3, 4))
def _uniform(key, minval, maxval, shape, dtype):
    minval = _broadcast_to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = _broadcast_to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    # bfloat16 (7 mantissa bits) draws 8 random bits per value, as JAX does
    rng_bits = nbits if nmant >= 8 else 8
    bits_ = prng.random_bits(key, rng_bits, shape)
    uint_dtype = prng.UINT_DTYPES[nbits]
    if rng_bits != nbits:
        bits_ = lax.convert_element_type(bits_, uint_dtype)
    # random mantissa bits under the exponent of 1.0: a float uniform in [1, 2)
    float_bits = lax.shift_right_logical(bits_, np.array(rng_bits - nmant, uint_dtype))
    float_bits = lax.bitwise_or(float_bits, np.array(1.0, dtype).view(uint_dtype))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), np.array(1.0, dtype))
    scaled = lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval)
    return lax.max(minval, lax.reshape(scaled, shape))


# JAX: jax/_src/random/core.py normal
def normal(key, shape: Sequence[int] = (), dtype=None):
    """Standard normal floats of `shape` and float `dtype` (default float32)."""
    raw = _raw("normal", key)
    dtype = dtypes.canonicalize_dtype(np.float64 if dtype is None else dtype)
    if not dtypes.issubdtype(dtype, np.inexact):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, "
                         f"got {dtype}")
    if np.dtype(dtype).kind == "c":
        raise NotImplementedError("complex normal samples are not in minijax yet")
    return _normal(raw, _shape(shape), dtype)


@functools.partial(jit, static_argnums=(1, 2))
def _normal(key, shape, dtype):
    # the open interval (-1, 1): erf_inv(-1) would be -inf
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = _uniform(key, lo, np.array(1.0, dtype), shape, dtype)
    return lax.mul(np.array(np.sqrt(2), dtype), erf_inv(u))


# JAX: jax/_src/random/core.py truncated_normal
def truncated_normal(key, lower, upper, shape: Sequence[int] | None = None, dtype=None):
    """Standard normal floats conditioned on lower < x < upper (bounds broadcast to `shape`;
    shape None: their broadcast shape). Uses the inverse CDF: erf_inv of a uniform in
    [erf(lower/sqrt2), erf(upper/sqrt2)), then clamps into the open interval."""
    raw = _raw("truncated_normal", key)
    shape = None if shape is None else _shape(shape)
    return _truncated_normal(raw, lower, upper, shape, _float_dtype("truncated_normal", dtype))


@functools.partial(jit, static_argnums=(3, 4))
def _truncated_normal(key, lower, upper, shape, dtype):
    if shape is None:
        shape = np.broadcast_shapes(jnp.shape(lower), jnp.shape(upper))
    else:
        _check_shape("truncated_normal", shape, jnp.shape(lower), jnp.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = erf(lax.div(lower, sqrt2))
    b = erf(lax.div(upper, sqrt2))
    u = _uniform(key, a, b, shape, dtype)
    out = lax.mul(sqrt2, erf_inv(u))
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(upper, np.array(-np.inf, dtype)))


# JAX: jax/_src/random/core.py bernoulli
def bernoulli(key, p=0.5, shape: Sequence[int] | None = None, mode: str = "low"):
    """Booleans that are True with probability `p` (float, broadcast to `shape`; shape None:
    p's shape). mode="high" spends two uniforms per value, for tiny p."""
    raw = _raw("bernoulli", key)
    shape = None if shape is None else _shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    dtype = dtypes.dtype_and_weak(p)[0]
    if not dtypes.issubdtype(dtype, np.floating):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    return _bernoulli(raw, lax.convert_element_type(p, dtype), shape=shape, mode=mode)


@functools.partial(jit, static_argnames=("shape", "mode"))
def _bernoulli(key, p, shape, mode):
    if shape is None:
        shape = jnp.shape(p)
    else:
        _check_shape("bernoulli", shape, jnp.shape(p))
    dtype = core.get_aval(p).dtype
    if mode == "high":
        u = _uniform(key, 0.0, 1.0, (2, *shape), dtype)
        u1, u2 = u[0], u[1] * 2.0 ** -dtypes.finfo(dtype).nmant  # the resolution of u1
        return u2 < p - u1
    return _uniform(key, 0.0, 1.0, shape, dtype) < p


def _convert_and_clip_integer(val, dtype):
    """`val` converted to integer `dtype`, clipped to its range instead of wrapping."""
    val_dtype = core.get_aval(val).dtype
    lo = np.array(max(dtypes.iinfo(dtype).min, dtypes.iinfo(val_dtype).min), val_dtype)
    hi = np.array(min(dtypes.iinfo(dtype).max, dtypes.iinfo(val_dtype).max), val_dtype)
    return lax.convert_element_type(jnp.clip(val, lo, hi), dtype)


# JAX: jax/_src/random/core.py randint
def randint(key, shape: Sequence[int], minval, maxval, dtype=None):
    """Uniform integers in [minval, maxval) of `shape` and integer `dtype` (default int32).

    Like JAX, reduces 2 x nbits random bits modulo the range: slightly biased unless the range
    is a power of 2. 8- and 16-bit dtypes are sampled in 32 bits. Raises TypeError for
    non-integer dtypes.
    """
    raw = _raw("randint", key)
    dtype = dtypes.canonicalize_dtype(np.int64 if dtype is None else dtype)
    if np.dtype(dtype).kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    shape = _shape(shape)
    info = dtypes.iinfo(dtype)
    sample_dtype = dtype
    if info.bits < 32:
        sample_dtype = np.dtype(np.int32)
        minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min),
                          int(info.max) + 1)
    return _randint(raw, minval, maxval, shape, sample_dtype).astype(dtype)


@functools.partial(jit, static_argnums=(3, 4))
def _randint(key, minval, maxval, shape, dtype):
    _check_shape("randint", shape, jnp.shape(minval), jnp.shape(maxval))
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if core.get_aval(minval).dtype.kind not in "iu":
        minval = minval.astype(dtypes.default_int_dtype())
    if core.get_aval(maxval).dtype.kind not in "iu":
        maxval = maxval.astype(dtypes.default_int_dtype())
    # a maxval past the dtype's max (randint(key, s, 0, 256, uint8)) needs a span one larger
    top = _convert_and_clip_integer(np.array(dtypes.iinfo(dtype).max, dtype),
                                    core.get_aval(maxval).dtype)
    maxval_out_of_range = lax.gt(maxval, top)
    minval = _broadcast_to_rank(_convert_and_clip_integer(minval, dtype), len(shape))
    maxval = _broadcast_to_rank(_convert_and_clip_integer(maxval, dtype), len(shape))
    nbits = dtypes.iinfo(dtype).bits
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"randint only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}")

    k1, k2 = _split2(key)
    higher_bits = prng.random_bits(k1, nbits, shape)
    lower_bits = prng.random_bits(k2, nbits, shape)
    unsigned = prng.UINT_DTYPES[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), unsigned)
    # maxval <= minval gives span 1, so minval is returned
    span = lax.select(lax.le(maxval, minval), lax.full_like(span, 1), span)
    span = lax.select(jnp.logical_and(maxval_out_of_range, lax.gt(maxval, minval)),
                      lax.add(span, np.array(1, unsigned)), span)
    # (higher * 2**nbits + lower) % span, without overflow: 2**nbits % span is the square of
    # 2**(nbits/2) % span, reduced again
    multiplier = lax.rem(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    random_offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier),
                            lax.rem(lower_bits, span))
    random_offset = lax.rem(random_offset, span)
    return lax.add(minval, lax.convert_element_type(random_offset, dtype))


# JAX: jax/_src/random/core.py permutation
def permutation(key, x, axis: int = 0, independent: bool = False):
    """A random permutation of `arange(x)` (int x) or of `x` along `axis` (every slice
    shuffled alike, or each on its own with independent=True)."""
    raw = _raw("permutation", key)
    nd = jnp.ndim(x)
    axis = int(axis) % (nd or 1)
    if not nd:
        if core.get_aval(x).dtype.kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(raw, jnp.arange(int(x)), axis)
    x = jnp.asarray(x)
    if independent or nd == 1:
        return _shuffle(raw, x, axis)
    ind = _shuffle(raw, jnp.arange(jnp.shape(x)[axis]), 0)
    return _take_permutation(x, ind, axis)


def _take_permutation(x, perm, axis: int):
    """`x` taken at the permutation `perm` along `axis` (JAX gathers): sort `x` by the
    inverse permutation, which puts x[perm[i]] at position i."""
    n = jnp.shape(perm)[0]
    _, inverse = lax.sort_key_val(perm, lax.iota(np.int32, n), 0)
    keys = lax.broadcast_in_dim(inverse, jnp.shape(x), (axis,))
    return lax.sort_key_val(keys, x, axis)[1]


@functools.partial(jit, static_argnums=(2,))
def _shuffle(key, x, axis):
    # Sorting by random 32-bit keys is a uniform shuffle when no two keys collide; repeating
    # with fresh keys makes collisions negligible (JAX's heuristic: exponent 3).
    exponent = 3
    size = math.prod(jnp.shape(x))
    num_rounds = int(np.ceil(exponent * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        key, subkey = _split2(key)
        sort_keys = prng.random_bits(subkey, 32, jnp.shape(x))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


# JAX: jax/_src/random/core.py choice
def choice(key, a, shape: Sequence[int] = (), replace: bool = True, p=None, axis: int = 0,
           mode: str | None = None):
    """Random draws of `shape` from `a` (an int n means arange(n)) along `axis`, with or
    without replacement, uniformly or with probabilities `p`. Raises ValueError when more
    draws than entries are asked without replacement."""
    raw = _raw("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of minijax.random.choice must be a sequence, got "
                        f"{shape}")
    check_arraylike("choice", a)
    arr = jnp.asarray(a)
    nd = jnp.ndim(arr)
    if nd == 0:
        n_inputs = int(a)
    else:
        axis = int(axis) % nd
        n_inputs = jnp.shape(arr)[axis]
    shape = _shape(shape)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, core.get_aval(arr).dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(raw, shape, 0, n_inputs)
            result = ind if nd == 0 else _take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(raw, n_inputs if nd == 0 else arr, axis)[slices]
    else:
        (p_arr,) = promote_args_inexact("choice", p)
        if jnp.shape(p_arr) != (n_inputs,):
            raise ValueError(
                "p must be None or a 1D vector with the same size as a.shape[axis]. "
                f"p has shape {jnp.shape(p_arr)} and a.shape[axis] is {n_inputs}.")
        mode = _gumbel_mode(mode)
        ind = _choice_with_p(raw, p_arr, shape, bool(replace), mode)
        result = ind if nd == 0 else _take(arr, ind, axis)
    out_shape = shape if nd == 0 else jnp.shape(arr)[:axis] + shape + jnp.shape(arr)[axis + 1:]
    return jnp.reshape(result, out_shape)


@functools.partial(jit, static_argnums=(2, 3, 4))
def _choice_with_p(key, p_arr, shape, replace, mode):
    # JAX runs these steps eagerly, each op compiled by XLA; jit here gives the same floats
    if replace:
        # inverse CDF: the first index whose running total reaches r
        p_cuml = cumsum(p_arr)
        total = p_cuml[-1]
        r = total * (1 - _uniform(key, 0.0, 1.0, shape, core.get_aval(p_cuml).dtype))
        below = jnp.expand_dims(p_cuml, tuple(range(len(shape)))) < jnp.expand_dims(r, -1)
        return jnp.sum(below, axis=-1, dtype=dtypes.default_int_dtype())
    # Gumbel top-k: the k largest of log(p) + Gumbel noise are a sample without replacement
    n_inputs = jnp.shape(p_arr)[0]
    g = _gumbel(key, (n_inputs,), core.get_aval(p_arr).dtype, mode) + jnp.log(p_arr)
    return _top_k_indices(g, math.prod(shape))


def _gumbel_mode(mode):
    mode = "low" if mode is None else mode  # JAX: config use_high_dynamic_range_gumbel
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return mode


# JAX: jax/_src/random/core.py gumbel
def gumbel(key, shape: Sequence[int] = (), dtype=None, mode: str | None = None):
    """Standard Gumbel floats, -log(-log(u)). mode="high" uses two uniforms per value for a
    wider range."""
    raw = _raw("gumbel", key)
    return _gumbel(raw, _shape(shape), _float_dtype("gumbel", dtype), _gumbel_mode(mode))


@functools.partial(jit, static_argnums=(1, 2, 3))
def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        raise NotImplementedError("gumbel mode='highest' needs the clz primitive, not yet in "
                                  "minijax")
    if mode in ("high", "highest"):
        u = _uniform(key, 0.0, 1.0, (2,) + shape, dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + 2 ** -info.nmant * low + info.tiny)
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, info.tiny, 1.0, shape, dtype)))


# JAX: jax/_src/random/core.py categorical
def categorical(key, logits, axis: int = -1, shape: Sequence[int] | None = None,
                replace: bool = True, mode: str | None = None):
    """Indices drawn from the categorical distributions `softmax(logits, axis)` (the Gumbel-max
    trick; without replacement, Gumbel top-k). Result shape: `shape`, or logits' shape
    without `axis`."""
    raw = _raw("categorical", key)
    logits = jnp.asarray(logits)
    lshape = jnp.shape(logits)
    nd = len(lshape)
    batch_shape = tuple(np.delete(lshape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = _shape(shape)
        _check_shape("categorical", shape, batch_shape)
    mode = _gumbel_mode(mode)
    dtype = core.get_aval(logits).dtype
    shape_prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        axis = int(axis) - nd if axis >= 0 else int(axis)
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % nd, lshape[axis])
        noise = gumbel(raw, (*shape_prefix, *logits_shape), dtype, mode)
        return jnp.argmax(noise + lax.expand_dims(logits, tuple(range(len(shape_prefix)))),
                          axis=axis)
    logits = logits + gumbel(raw, lshape, dtype, mode)
    k = math.prod(shape_prefix)
    if k > lshape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({lshape[axis]}).")
    indices = _top_k_indices(jnp.moveaxis(logits, axis, -1), k)
    perm = (len(batch_shape),) + tuple(range(len(batch_shape)))
    return lax.reshape(lax.transpose(indices, perm), shape)


# ---------------------------------------------------------------------------------------------
# Distributions built on uniform and normal: the same transformations as JAX's, in the same
# order, so that one key gives the same bits
# ---------------------------------------------------------------------------------------------

def _param_shape(name: str, shape, *params) -> tuple[int, ...]:
    """The result shape: `shape`, or the parameters' broadcast shape when it is None."""
    pshapes = [jnp.shape(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*pshapes)) if pshapes else ()
    shape = _shape(shape)
    _check_shape(name, shape, *pshapes)
    return shape


# JAX: jax/_src/random/core.py exponential
def exponential(key, shape: Sequence[int] = (), dtype=None):
    """Standard exponential floats (rate 1) of `shape`: -log(1 - u)."""
    raw = _raw("exponential", key)
    return _exponential(raw, _shape(shape), _float_dtype("exponential", dtype))


@functools.partial(jit, static_argnums=(1, 2))
def _exponential(key, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))  # 1 - u lies in (0, 1]: log never sees 0


# JAX: jax/_src/random/core.py laplace
def laplace(key, shape: Sequence[int] = (), dtype=None):
    """Standard Laplace floats (density exp(-|x|) / 2) of `shape`."""
    raw = _raw("laplace", key)
    return _laplace(raw, _shape(shape), _float_dtype("laplace", dtype))


@functools.partial(jit, static_argnums=(1, 2))
def _laplace(key, shape, dtype):
    u = _uniform(key, -1.0 + dtypes.finfo(dtype).epsneg, 1.0, shape, dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


# JAX: jax/_src/random/core.py logistic
def logistic(key, shape: Sequence[int] = (), dtype=None):
    """Standard logistic floats of `shape`: log(u) - log(1 - u)."""
    raw = _raw("logistic", key)
    return _logistic(raw, _shape(shape), _float_dtype("logistic", dtype))


@functools.partial(jit, static_argnums=(1, 2))
def _logistic(key, shape, dtype):
    u = _uniform(key, dtypes.finfo(dtype).tiny, 1.0, shape, dtype)
    return lax.sub(lax.log(u), lax.log1p(lax.neg(u)))


# JAX: jax/_src/random/core.py cauchy
def cauchy(key, shape: Sequence[int] = (), dtype=None):
    """Standard Cauchy floats of `shape`: tan(pi (u - 1/2))."""
    raw = _raw("cauchy", key)
    return _cauchy(raw, _shape(shape), _float_dtype("cauchy", dtype))


@functools.partial(jit, static_argnums=(1, 2))
def _cauchy(key, shape, dtype):
    u = _uniform(key, dtypes.finfo(dtype).eps, 1.0, shape, dtype)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


# JAX: jax/_src/random/core.py rademacher
def rademacher(key, shape: Sequence[int] = (), dtype=np.int32):
    """-1 or +1 with probability 1/2 each, of `shape` and `dtype` (default int32)."""
    raw = _raw("rademacher", key)
    return _rademacher(raw, _shape(shape), np.dtype(dtypes.canonicalize_dtype(dtype)))


@functools.partial(jit, static_argnums=(1, 2))
def _rademacher(key, shape, dtype):
    b = _bernoulli(key, np.float32(0.5), shape=shape, mode="low").astype(dtype)
    return (2 * b - 1).astype(dtype)


# JAX: jax/_src/random/core.py maxwell
def maxwell(key, shape: Sequence[int] = (), dtype=None):
    """One-sided Maxwell floats of `shape`: the length of a standard normal 3-vector."""
    raw = _raw("maxwell", key)
    return _maxwell(raw, _shape(shape), _float_dtype("maxwell", dtype))


@functools.partial(jit, static_argnums=(1, 2))
def _maxwell(key, shape, dtype):
    return jnp.linalg.norm(_normal(key, shape + (3,), dtype), axis=-1)


# JAX: jax/_src/random/core.py double_sided_maxwell
def double_sided_maxwell(key, loc, scale, shape: Sequence[int] = (), dtype=None):
    """Maxwell floats with a random sign, times `scale` plus `loc`; the result shape is
    `shape + broadcast(loc, scale).shape`."""
    raw = _raw("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    pshape = tuple(np.broadcast_shapes(jnp.shape(loc), jnp.shape(scale)))
    shape = (_shape(shape) or pshape) + pshape
    return _double_sided_maxwell(raw, loc, scale, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _double_sided_maxwell(key, loc, scale, *, shape, dtype):
    k_maxwell, k_sign = _split2(key)
    sign = _rademacher(k_sign, shape, dtype)
    return sign * _maxwell(k_maxwell, shape, dtype) * scale + loc


# JAX: jax/_src/random/core.py weibull_min
def weibull_min(key, scale, concentration, shape: Sequence[int] = (), dtype=None):
    """Weibull floats: scale * (-log(1 - u)) ** (1 / concentration), of `shape`."""
    raw = _raw("weibull_min", key)
    return _weibull_min(raw, scale, concentration, shape=_shape(shape),
                        dtype=_float_dtype("weibull_min", dtype))


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _weibull_min(key, scale, concentration, *, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


# JAX: jax/_src/random/core.py pareto
def pareto(key, b, shape: Sequence[int] | None = None, dtype=None):
    """Pareto floats with shape parameter `b` (> 0) on [1, inf): exp(exponential / b)."""
    raw = _raw("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    return _pareto(raw, b, shape=_param_shape("pareto", shape, b), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _pareto(key, b, *, shape, dtype):
    return lax.exp(_exponential(key, shape, dtype) / lax.convert_element_type(b, dtype))


# JAX: jax/_src/random/core.py lognormal
def lognormal(key, sigma=1.0, shape: Sequence[int] | None = None, dtype=None):
    """Log-normal floats: exp(sigma * normal), of `shape` (None: sigma's shape)."""
    raw = _raw("lognormal", key)
    dtype = _float_dtype("lognormal", dtype)
    return _lognormal(raw, sigma, shape=_param_shape("lognormal", shape, sigma), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _lognormal(key, sigma, *, shape, dtype):
    return lax.exp(_normal(key, shape, dtype) * lax.convert_element_type(sigma, dtype))


# JAX: jax/_src/random/core.py rayleigh
def rayleigh(key, scale, shape: Sequence[int] | None = None, dtype=None):
    """Rayleigh floats: scale * sqrt(-2 log u), of `shape` (None: scale's shape)."""
    raw = _raw("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    return _rayleigh(raw, scale, shape=_param_shape("rayleigh", shape, scale), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _rayleigh(key, scale, *, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))


# JAX: jax/_src/random/core.py wald
def wald(key, mean, shape: Sequence[int] | None = None, dtype=None):
    """Wald (inverse Gaussian) floats with `mean` (> 0), of `shape` (None: mean's shape)."""
    raw = _raw("wald", key)
    dtype = _float_dtype("wald", dtype)
    return _wald(raw, mean, shape=_param_shape("wald", shape, mean), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _wald(key, mean, *, shape, dtype):
    k1, k2 = _split2(key)
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = _normal(k1, shape, dtype)
    z = _uniform(k2, 0.0, 1.0, shape, dtype)
    y = lax.integer_pow(v, 2)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * lax.integer_pow(y, 2))
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


# JAX: jax/_src/random/core.py geometric
def geometric(key, p, shape: Sequence[int] | None = None, dtype=np.int32):
    """The number of Bernoulli(p) trials up to the first success (>= 1), as `dtype`
    (default int32), of `shape` (None: p's shape)."""
    raw = _raw("geometric", key)
    (p,) = promote_args_inexact("geometric", p)
    return _geometric(raw, p, shape=_param_shape("geometric", shape, p),
                      dtype=np.dtype(dtypes.canonicalize_dtype(dtype)))


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _geometric(key, p, *, shape, dtype):
    u = _uniform(key, 0.0, 1.0, shape, core.get_aval(p).dtype)
    u = jnp.where(u == 0, 1, u)  # as JAX: u = 0 counts as 1, so log never sees 0
    log_q = jnp.broadcast_to(lax.log1p(-p), shape)
    return (lax.floor(lax.div(lax.log(u), log_q)) + 1).astype(dtype)


# JAX: jax/_src/random/core.py triangular
def triangular(key, left, mode, right, shape: Sequence[int] | None = None, dtype=None):
    """Triangular floats on [left, right] with its peak at `mode`, of `shape` (None: the
    parameters' broadcast shape), by inverting the CDF."""
    raw = _raw("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    return _triangular(raw, left, mode, right, shape=_param_shape(
        "triangular", shape, left, mode, right), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _triangular(key, left, mode, right, *, shape, dtype):
    left, mode, right = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape)
                         for v in (left, mode, right))
    u = _uniform(key, 0.0, 1.0, shape, dtype)
    below = left + lax.sqrt(u * (right - left) * (mode - left))
    above = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < (mode - left) / (right - left), below, above)


# JAX: jax/_src/random/core.py multivariate_normal
def multivariate_normal(key, mean, cov, shape: Sequence[int] | None = None, dtype=None,
                        method: str = "cholesky"):
    """Normal vectors f[*shape, n] with `mean` f[..., n] and covariance `cov` f[..., n, n]:
    mean + factor @ normal, the factor from `method` ('cholesky', 'eigh' or 'svd').
    ValueError for a mean of rank 0, a cov of rank < 2 or mismatched n."""
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    raw = _raw("multivariate_normal", key)
    dtype = _float_dtype("multivariate_normal", dtype)
    # the dtypes promoted, not the shapes (JAX: promote_dtypes_inexact)
    mean, cov = (jnp.asarray(v, dtypes.canonicalize_dtype(np.float64))
                 if not dtypes.issubdtype(jnp.result_type(v), np.inexact) else jnp.asarray(v)
                 for v in promote_dtypes(mean, cov))
    if jnp.ndim(mean) < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{jnp.ndim(mean)}")
    if jnp.ndim(cov) < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{jnp.ndim(cov)}")
    n = jnp.shape(mean)[-1]
    if jnp.shape(cov)[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {jnp.shape(cov)}.")
    batch = (jnp.shape(mean)[:-1], jnp.shape(cov)[:-2])
    if shape is None:
        shape = tuple(np.broadcast_shapes(*batch))
    else:
        shape = _shape(shape)
        _check_shape("normal", shape, *batch)
    return _multivariate_normal(raw, mean, cov, shape=shape, dtype=dtype, method=method)


@functools.partial(jit, static_argnames=("shape", "dtype", "method"))
def _multivariate_normal(key, mean, cov, *, shape, dtype, method):
    n = jnp.shape(mean)[-1]
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    z = _normal(key, shape + (n,), dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


# JAX: jax/_src/random/core.py orthogonal
def orthogonal(key, n: int, shape: Sequence[int] = (), dtype=None, m: int | None = None):
    """Haar-random orthogonal matrices f[*shape, n, m] (m defaults to n; for n != m the
    rows or the columns are orthonormal): the Q of a normal matrix's QR, signs fixed by R's
    diagonal."""
    raw = _raw("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype)
    return _orthogonal(raw, n=int(n), m=int(n if m is None else m), shape=_shape(shape),
                       dtype=dtype)


@functools.partial(jit, static_argnames=("n", "m", "shape", "dtype"))
def _orthogonal(key, *, n, m, shape, dtype):
    z = _normal(key, shape + (max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    x = q * jnp.expand_dims(jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1)), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


# ---------------------------------------------------------------------------------------------
# Gamma and the distributions built on it: Marsaglia-Tsang rejection in a while_loop, one
# sample (and one key) per element, as JAX's random_gamma primitive
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/random/core.py _gamma_one
def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) sample (or its log) for a scalar `alpha` and a raw key. alpha < 1 is
    boosted to alpha + 1 and the sample times u ** (1 / alpha) (Marsaglia and Tsang, "A simple
    method for generating gamma variables", 2000)."""
    dtype = core.get_aval(alpha).dtype
    zero, one, two, minus_one = (np.array(v, dtype) for v in (0, 1, 2, -1))
    half, third, squeeze = (np.array(v, dtype) for v in (0.5, 1 / 3, 0.0331))
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, third)
    c = lax.div(third, lax.sqrt(d))

    def rejected(state):  # not (the squeeze test or the log test): draw again
        _, x2, v, u = state
        return lax.bitwise_and(
            lax.ge(u, lax.sub(one, lax.mul(squeeze, lax.mul(x2, x2)))),
            lax.ge(lax.log(u), lax.add(lax.mul(x2, half),
                                       lax.mul(d, lax.add(lax.sub(one, v), lax.log(v))))))

    def next_x_v(kxv):  # a normal x with v = 1 + c x > 0
        k, subkey = _split2(kxv[0])
        x = _normal(subkey, (), dtype)
        return k, x, lax.add(one, lax.mul(x, c))

    def draw(state):
        keys = prng.random_split(state[0], (3,))
        _, x, v = while_loop(lambda kxv: lax.le(kxv[2], zero), next_x_v,
                             (keys[1], zero, minus_one))
        u = _uniform(keys[2], 0.0, 1.0, (), dtype)
        return keys[0], lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    key, subkey = _split2(key)
    v = while_loop(rejected, draw, (key, zero, one, two))[2]
    if log_space:
        log_u = lax.neg(_exponential(subkey, (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    u = lax.sub(one, _uniform(subkey, 0.0, 1.0, (), dtype))
    boost = lax.select(boost_mask, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost)


# JAX: jax/_src/random/core.py _gamma_impl
def _gamma_impl(key, a, *, log_space):
    # one key per element of `a`, split from its (possibly batched) key, then one vmapped
    # rejection loop: JAX lowers random_gamma this way (use_vmap=True; other impls loop)
    # the raw words name their implementation by their count (unsafe_rbg is refused by gamma)
    a_shape, n = jnp.shape(a), jnp.shape(key)[-1]
    impl = prng.threefry_prng_impl if n == 2 else prng.rbg_prng_impl
    key_batch = jnp.ndim(key) - 1
    keys = PRNGKeyArray(impl, jnp.reshape(key, (-1, n)))
    count = math.prod(a_shape[key_batch:])
    keys = vmap(lambda k: prng.random_split(k, (count,)))(keys)
    keys = PRNGKeyArray(impl, jnp.reshape(prng.random_unwrap(keys), (-1, n)))
    one = functools.partial(_gamma_one, log_space=log_space)
    if impl is prng.threefry_prng_impl:
        samples = vmap(one)(keys, jnp.ravel(a))
    else:  # as JAX: a loop, since the batched bit generator would draw from the first key
        samples = lax_map(lambda ka: one(*ka), (keys, jnp.ravel(a)))
    return jnp.reshape(samples, a_shape)


def _random_gamma_abstract_eval(key, a, *, log_space):
    if key.dtype != np.uint32 or key.shape[-1:] not in ((2,), (4,)) or key.shape[
            :-1] != a.shape[:key.ndim - 1]:
        raise TypeError(f"random_gamma: expected raw keys u32[..., 2 or 4] batching a's leading "
                        f"axes, got key {key.str_short()} and a {a.str_short()}")
    if not dtypes.issubdtype(a.dtype, np.floating):
        raise TypeError(f"random_gamma: a must be a float array, got {a.str_short()}")
    return core.ShapedArray(a.shape, a.dtype)


def _random_gamma_batch_rule(vals, dims, *, axis_size, log_space):
    key, a = (batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims))
    return random_gamma_p.bind(key, a, log_space=log_space), 0


# JAX: jax/_src/random/core.py _gamma_grad
def _gamma_grad(sample, a, *, log_space):
    """d sample / d a by implicit reparameterization (the CDF held fixed); in log space
    d log(sample) / d a, with a sample that underflowed to 0 taken as the smallest float."""
    if not log_space:
        return random_gamma_grad(a, sample)
    sample = lax.exp(sample)
    sample = lax.select(lax.eq(sample, _const(sample, 0)),
                        lax.full_like(sample, dtypes.finfo(core.get_aval(sample).dtype).tiny),
                        sample)
    return random_gamma_grad(a, sample) / sample


random_gamma_p = core.Primitive("random_gamma")
random_gamma_p.def_impl(jit(_gamma_impl, static_argnames=("log_space",)))
random_gamma_p.def_abstract_eval(_random_gamma_abstract_eval)
ad.defjvp2(random_gamma_p, None, lambda t, ans, key, a, *, log_space: lax.mul(
    t, _gamma_grad(ans, a, log_space=log_space)))
batching.primitive_batchers[random_gamma_p] = _random_gamma_batch_rule
mlir.register_lowering(random_gamma_p, mlir.lower_fun(_gamma_impl, multiple_results=False))


def _float_sampler_args(name: str, key, dtype, shape, *params):
    """The raw key, float dtype and result shape of a sampler with float parameters."""
    return _raw(name, key), _float_dtype(name, dtype), _param_shape(name, shape, *params)


# JAX: jax/_src/random/core.py gamma
def gamma(key, a, shape: Sequence[int] | None = None, dtype=None):
    """Standard Gamma(a) floats (density x**(a-1) e**-x / Gamma(a), a > 0) of `shape`
    (None: a's shape); divide by a rate to change the scale. Differentiable in `a`: the
    implicit reparameterization gradient `lax.random_gamma_grad`, as JAX's."""
    raw, dtype, shape = _float_sampler_args("gamma", key, dtype, shape, a)
    return _gamma(raw, a, shape=shape, dtype=dtype)


# JAX: jax/_src/random/core.py loggamma
def loggamma(key, a, shape: Sequence[int] | None = None, dtype=None):
    """log of Gamma(a) samples, computed in log space (accurate for tiny a); equals
    `log(gamma(key, a, ...))` up to rounding."""
    raw, dtype, shape = _float_sampler_args("loggamma", key, dtype, shape, a)
    return _gamma(raw, a, shape=shape, dtype=dtype, log_space=True)


@functools.partial(jit, static_argnames=("shape", "dtype", "log_space"))
def _gamma(key, a, *, shape, dtype, log_space=False):
    if key._impl is prng.unsafe_rbg_prng_impl:
        raise NotImplementedError("gamma (and the samplers built on it) of unsafe_rbg keys: "
                                  "minijax's random_gamma takes threefry2x32 and rbg keys")
    a = jnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    return random_gamma_p.bind(prng.random_unwrap(key), a, log_space=log_space)


# JAX: jax/_src/random/core.py beta
def beta(key, a, b, shape: Sequence[int] | None = None, dtype=None):
    """Beta(a, b) floats in [0, 1] of `shape` (None: the broadcast of a and b):
    G_a / (G_a + G_b) from two log-gamma samples, scaled by their max to keep precision."""
    raw, dtype, shape = _float_sampler_args("beta", key, dtype, shape, a, b)
    return _beta(raw, a, b, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _beta(key, a, b, *, shape, dtype):
    key_a, key_b = _split2(key)
    log_a = _gamma(key_a, a, shape=shape, dtype=dtype, log_space=True)
    log_b = _gamma(key_b, b, shape=shape, dtype=dtype, log_space=True)
    log_max = lax.max(log_a, log_b)
    scaled_a, scaled_b = jnp.exp(log_a - log_max), jnp.exp(log_b - log_max)
    return scaled_a / (scaled_a + scaled_b)


# JAX: jax/_src/random/core.py dirichlet
def dirichlet(key, alpha, shape: Sequence[int] | None = None, dtype=None):
    """Dirichlet(alpha) floats f[*shape, n] (alpha: f[..., n]; shape None: alpha's batch
    shape), each row summing to 1: the softmax of n log-gamma samples. ValueError for a
    rank-0 alpha."""
    raw, dtype = _raw("dirichlet", key), _float_dtype("dirichlet", dtype)
    if jnp.ndim(alpha) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{jnp.ndim(alpha)}")
    shape = _param_shape("dirichlet", shape, jnp.zeros(jnp.shape(alpha)[:-1]))
    return _dirichlet(raw, alpha, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _dirichlet(key, alpha, *, shape, dtype):
    log_g = _gamma(key, alpha, shape=shape + jnp.shape(alpha)[-1:], dtype=dtype,
                   log_space=True)
    # softmax as jax.nn.softmax computes it
    unnormalized = jnp.exp(log_g - lax.stop_gradient(jnp.max(log_g, -1, keepdims=True)))
    return unnormalized / jnp.sum(unnormalized, -1, keepdims=True)


# JAX: jax/_src/random/core.py chisquare
def chisquare(key, df, shape: Sequence[int] | None = None, dtype=None):
    """Chi-square(df) floats of `shape` (None: df's shape): 2 Gamma(df / 2)."""
    raw, dtype, shape = _float_sampler_args("chisquare", key, dtype, shape, df)
    return _chisquare(raw, df, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _chisquare(key, df, *, shape, dtype):
    two = np.array(2, dtype)
    half_df = lax.div(lax.convert_element_type(df, dtype), two)
    return lax.mul(jnp.exp(_gamma(key, half_df, shape=shape, dtype=dtype, log_space=True)),
                   two)


# JAX: jax/_src/random/core.py f
def f(key, dfnum, dfden, shape: Sequence[int] | None = None, dtype=None):
    """F(dfnum, dfden) floats of `shape` (None: the parameters' broadcast shape): the ratio
    of two chi-squares, each over its degrees of freedom."""
    raw, dtype, shape = _float_sampler_args("f", key, dtype, shape, dfnum, dfden)
    return _f(raw, dfnum, dfden, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _f(key, dfnum, dfden, *, shape, dtype):
    dfden, dfnum = (lax.convert_element_type(v, dtype) for v in (dfden, dfnum))
    key_dfd, key_dfn = _split2(key)
    num = lax.div(_chisquare(key_dfn, dfnum, shape=shape, dtype=dtype), dfnum)
    den = lax.div(_chisquare(key_dfd, dfden, shape=shape, dtype=dtype), dfden)
    return lax.div(num, den)


# JAX: jax/_src/random/core.py t
def t(key, df, shape: Sequence[int] | None = None, dtype=None):
    """Student's t(df) floats of `shape` (None: df's shape): normal * sqrt((df/2) / G)
    with G ~ Gamma(df / 2)."""
    raw, dtype, shape = _float_sampler_args("t", key, dtype, shape, df)
    return _t(raw, df, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _t(key, df, *, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = _split2(key)
    n = _normal(key_n, shape, dtype)
    half_df = lax.div(df, np.array(2, dtype))
    g = _gamma(key_g, half_df, shape=shape, dtype=dtype)
    return n * jnp.sqrt(half_df / g)


# JAX: jax/_src/random/core.py generalized_normal
def generalized_normal(key, p, shape: Sequence[int] = (), dtype=None):
    """Generalized normal floats of `shape` (density prop. to exp(-|x| ** p)): a random sign
    times Gamma(1 / p) ** (1 / p). p = 2 is a normal with variance 1/2, p = 1 Laplace."""
    raw, dtype = _raw("generalized_normal", key), _float_dtype("generalized_normal", dtype)
    return _generalized_normal(raw, p, shape=_shape(shape), dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _generalized_normal(key, p, *, shape, dtype):
    k_gamma, k_sign = _split2(key)
    g = _gamma(k_gamma, 1 / p, shape=shape, dtype=dtype)
    return _rademacher(k_sign, shape, dtype) * g ** (1 / p)


# JAX: jax/_src/random/core.py ball
def ball(key, d: int, p: float = 2, shape: Sequence[int] = (), dtype=None):
    """Points f[*shape, d] uniform in the unit p-norm ball of R^d (Barthe et al., 2005):
    generalized normals over (their p-norm ** p plus an exponential) ** (1 / p)."""
    raw, dtype = _raw("ball", key), _float_dtype("ball", dtype)
    return _ball(raw, p, d=int(d), shape=_shape(shape), dtype=dtype)


@functools.partial(jit, static_argnames=("d", "shape", "dtype"))
def _ball(key, p, *, d, shape, dtype):
    k1, k2 = _split2(key)
    g = _generalized_normal(k1, p, shape=(*shape, d), dtype=dtype)
    e = _exponential(k2, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


# ---------------------------------------------------------------------------------------------
# Counts: Poisson and binomial (inversion for small means, transformed rejection above) and
# multinomial as a scan of binomials. Each loop runs until every element is done.
# ---------------------------------------------------------------------------------------------

def _isnan(x):
    return lax.ne(x, x)


# JAX: jax/_src/random/core.py poisson
def poisson(key, lam, shape: Sequence[int] | None = None, dtype=None):
    """Poisson(lam) counts (lam >= 0) of `shape` (None: lam's shape) and integer `dtype`
    (default int32): Knuth's product of uniforms for lam < 10, Hormann's transformed
    rejection above."""
    raw = _raw("poisson", key)
    dtype = np.dtype(dtypes.canonicalize_dtype(np.int64 if dtype is None else dtype))
    shape = jnp.shape(lam) if shape is None else _shape(shape)
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), np.float32)
    return _poisson(raw, lam, shape=shape, dtype=dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _poisson(key, lam, *, shape, dtype):
    use_knuth = lax.bitwise_or(_isnan(lam), lam < 10)
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0.0))
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    max_iters = dtype.type(dtypes.iinfo(dtype).max)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                        _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


# JAX: jax/_src/random/core.py _poisson_knuth
@functools.partial(jit, static_argnums=(2, 3, 4))
def _poisson_knuth(key, lam, shape, dtype, max_iters):
    def body(carry):  # multiply uniforms until the product falls below exp(-lam)
        i, k, rng, log_prod = carry
        rng, subkey = _split2(rng)
        k = lax.select(log_prod > -lam, k + 1, k)
        u = _uniform(subkey, 0.0, 1.0, shape, np.dtype(np.float32))
        return i + 1, k, rng, log_prod + jnp.log(u)

    def cond(carry):
        return jnp.logical_and(jnp.any(carry[3] > -lam), carry[0] < max_iters)

    k_init = jnp.zeros(shape, dtype)
    k = while_loop(cond, body, (0, k_init, key, jnp.zeros(shape, np.float32)))[1]
    return (k - 1).astype(dtype)


# JAX: jax/_src/random/core.py _poisson_rejection
@functools.partial(jit, static_argnums=(2, 3, 4))
def _poisson_rejection(key, lam, shape, dtype, max_iters):
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        keys = prng.random_split(key, (3,))
        u = _uniform(keys[1], 0.0, 1.0, shape, lam.dtype) - 0.5
        v = _uniform(keys[2], 0.0, 1.0, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        return jnp.logical_and(jnp.any(~carry[2]), carry[0] < max_iters)

    init = (0, jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return while_loop(cond, body, init)[1].astype(dtype)


# JAX: jax/_src/random/core.py binomial
def binomial(key, n, p, shape: Sequence[int] | None = None, dtype=None):
    """Binomial(n, p) counts as floats of `shape` (None: the broadcast of n and p): NaN for
    n < 0 or p outside [0, 1] (p > 1/2 is sampled as n - Binomial(n, 1 - p)), inf for n =
    inf. Inversion of geometric waits for n q <= 10, Hormann's BTRS above."""
    raw = _raw("binomial", key)
    dtype = _float_dtype("binomial", dtype)
    shape = _param_shape("binomial", shape, n, p)
    return _binomial(raw, n, p, shape=shape, dtype=dtype)


def _stirling_approx_tail(k):
    # log k! minus Stirling's approximation: a table for k <= 9, a series above
    table = jnp.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                       0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                       0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                       0.00833056343336287], dtype=core.get_aval(k).dtype)
    use_table = k <= 9
    k = lax.clamp(_const(k, 0.0), k, _const(k, 9.0))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(use_table, table[jnp.floor(k).astype(np.int32)], approx)


@functools.partial(jit, static_argnums=(3, 4, 5))
def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    log1minusprob = jnp.log1p(-prob)

    def body(carry):  # count geometric waits until they pass `count`
        i, num_geom, geom_sum, key = carry
        keys = prng.random_split(key, (2,))
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(keys[0], 0.0, 1.0, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, keys[1]

    def cond(carry):
        return jnp.logical_and(jnp.any(carry[2] <= count), carry[0] < max_iters)

    zeros = jnp.zeros(shape, prob.dtype)
    k = while_loop(cond, body, (0, zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


@functools.partial(jit, static_argnums=(3, 4, 5))
def _btrs(key, count, prob, shape, dtype, max_iters):
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        keys = prng.random_split(key, (3,))
        u = _uniform(keys[1], 0.0, 1.0, shape, prob.dtype)
        v = _uniform(keys[2], 0.0, 1.0, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        return jnp.logical_and(jnp.any(~carry[2]), carry[0] < max_iters)

    init = (0, jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return while_loop(cond, body, init)[1].astype(dtype)


@functools.partial(jit, static_argnames=("shape", "dtype"))
def _binomial(key, count, prob, *, shape, dtype):
    (prob,) = promote_args_inexact("binomial", prob)
    count = jnp.broadcast_to(lax.convert_element_type(count, core.get_aval(prob).dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = _isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan, q_l_0 = _isnan(q), q < 0.0
    q = lax.select(q_is_nan | q_l_0, lax.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    max_iters = dtype.type(dtypes.finfo(dtype).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


# JAX: jax/_src/random/core.py multinomial
def multinomial(key, n, p, *, shape: Sequence[int] | None = None, dtype=None,
                unroll: int | bool = 1):
    """Multinomial(n, p) counts as floats of `shape` (None: p's shape; p: f[..., k], the
    outcome probabilities on the last axis): one binomial per outcome, of what the earlier
    outcomes left, in a scan."""
    raw = _raw("multinomial", key)
    dtype = _float_dtype("multinomial", dtype)
    n, p = promote_args_inexact("multinomial", n, p)
    shape = jnp.shape(p) if shape is None else _shape(shape)
    n, p = jnp.broadcast_to(n, shape[:-1]), jnp.broadcast_to(p, shape)

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = _binomial(k, remainder, jnp.clip(ratio, 0, 1), shape=jnp.shape(remainder),
                          dtype=core.get_aval(remainder).dtype)
        return remainder - count, count

    p = jnp.moveaxis(p, -1, 0)
    remaining = cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = prng.random_split(raw, (jnp.shape(ratios)[0],))
    _, counts = scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)


# JAX: jax/_src/random/core.py clone — differs: keys are values, so a clone is the key itself
def clone(key):
    """The same key (JAX clones keys for its key-reuse checker, which minijax does not
    have)."""
    return key


# JAX: jax/_src/random/core.py key_dtype
def key_dtype(impl=None):
    """The dtype of typed keys made with `impl` (default threefry2x32)."""
    return key(0, impl=impl).dtype


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
