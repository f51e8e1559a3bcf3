"""`minijax.random`: keys, split/fold_in and samplers, bit for bit those of `jax.random`.

Every sampler turns random *bits* (minijax/prng.py) into numbers with ordinary primitives:
`uniform` puts 23 random bits in the mantissa of a float in [1, 2) and subtracts 1; `normal`
is `sqrt(2) * erf_inv(u)`; `randint` reduces two words modulo the range; `permutation` sorts
by random keys. As in JAX, the samplers are `jit`-compiled functions (with the shape and dtype
static), so their float arithmetic is XLA's whether they are called eagerly or not, and their
results equal JAX's. Keys may be typed (`key`) or raw u32[2] arrays (`PRNGKey`).

Defaults as in JAX 0.10 with x64 off: float32/int32/uint32 results, the threefry2x32
implementation, `jax_threefry_partitionable=True`. Mirrors jax/_src/random/core.py.
Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from minijax import core, dtypes, prng
from minijax import numpy as jnp
from minijax.lax import lax
from minijax.lax.control_flow.loops import cumsum
from minijax.lax.special import erf, erf_inv
from minijax.pjit import jit
from minijax.prng import PRNGKeyArray
from minijax.numpy.util import promote_args_inexact, promote_dtypes

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "split", "fold_in",
           "bits", "uniform", "normal", "truncated_normal", "bernoulli", "randint",
           "permutation", "choice", "gumbel", "categorical", "exponential", "laplace",
           "logistic", "cauchy", "rademacher", "maxwell", "double_sided_maxwell",
           "weibull_min", "pareto", "lognormal", "rayleigh", "wald", "geometric", "triangular",
           "multivariate_normal", "orthogonal", "clone", "key_dtype"]

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
        typed, wrapped = prng.random_wrap(key), True
    if not allow_batched and typed.ndim:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{typed.shape} != (). Use minijax.vmap for batching.")
    return typed, wrapped


def _return_prng_keys(wrapped: bool, keys: PRNGKeyArray):
    return prng.random_unwrap(keys) if wrapped else keys


def _raw(name: str, key):
    """The raw u32[2] data of a single key (typed or raw)."""
    return prng.random_unwrap(_check_prng_key(name, key)[0])


def _resolve_impl(impl) -> prng.PRNGImpl:
    if impl is None or impl == "threefry2x32":
        return prng.threefry_prng_impl
    if isinstance(impl, prng.PRNGImpl):
        return impl
    raise ValueError(f'unrecognized PRNG implementation "{impl}"; minijax has only '
                     '"threefry2x32"')


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
def PRNGKey(seed, *, impl=None):  # noqa: N802 (JAX's name)
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
    shape = tuple(int(n) for n in num) if isinstance(num, Sequence) else (int(num),)
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


def _split2(key):
    """Two raw keys from a raw key (what samplers use inside)."""
    keys = prng.threefry_split(key, (2,))
    return keys[0], keys[1]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


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
    return prng.threefry_random_bits(raw, np.dtype(dtype).itemsize * 8, _shape(shape))


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
    bits_ = prng.threefry_random_bits(key, rng_bits, shape)
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
    higher_bits = prng.threefry_random_bits(k1, nbits, shape)
    lower_bits = prng.threefry_random_bits(k2, nbits, shape)
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
        sort_keys = prng.threefry_random_bits(subkey, 32, jnp.shape(x))
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
def rayleigh(key, scale=1.0, shape: Sequence[int] | None = None, dtype=None):
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
