"""The TPU's own kernel operations in interpret mode (jax.experimental.pallas.tpu's `einshape`,
`pack_elementwise`, `matmul_push_rhs`, `prng_seed`, `stateful_uniform`, `touch`...). Each is
what JAX's TPU interpret mode computes, or, where JAX's interpret mode has no rule for an
operation, what its docstring defines, written with minijax's lax. See chapters/16-pallas.md,
"Pallas on a TPU"."""

from __future__ import annotations

import re
import threading

import ml_dtypes
import numpy as np

from minijax import core, lax, numpy as jnp
from minijax.state.types import AbstractRef
from minijax.tree_util import tree_leaves

_UNPACKABLE = {ml_dtypes.int4: 4, ml_dtypes.uint4: 4, ml_dtypes.int2: 2, ml_dtypes.uint2: 2}


def _bits(dtype) -> int:
    dtype = np.dtype(dtype)
    return _UNPACKABLE.get(dtype.type, dtype.itemsize * 8)


# JAX: jax/_src/pallas/einshape.py einshape — differs: one reshape, transpose, reshape always
# (JAX's Mosaic rule picks tile-preserving forms; `assert_is_tile_preserving` is not checked)
def einshape(equation: str, x, assert_is_tile_preserving: bool = False, **sizes: int):
    """Reshape and transpose `x` by `equation`: one letter per dimension, "(cd)" on the left
    splits a dimension into c and d (sizes not inferable come from `sizes`), "(ab)" on the
    right merges a and b. `einshape("a(bc)->bac", x, b=2)` on (4, 6) gives (2, 4, 3).
    ValueError for a malformed equation, a rank or size mismatch, or names that differ."""
    del assert_is_tile_preserving
    if equation.count("->") != 1:
        raise ValueError(f"einshape: the equation must have one '->', got {equation!r}")
    lhs, rhs = (re.findall(r"\(\w*\)|\w", side) for side in equation.split("->"))
    lhs = [list(g.strip("()")) for g in lhs]
    rhs = [list(g.strip("()")) for g in rhs]
    names = [n for g in lhs for n in g]
    if sorted(names) != sorted(n for g in rhs for n in g) or len(set(names)) != len(names):
        raise ValueError(f"einshape: {equation!r} must name each dimension once on each side")
    if len(lhs) != x.ndim:
        raise ValueError(f"einshape: {equation!r} has {len(lhs)} input dimensions, the operand "
                         f"has shape {tuple(x.shape)}")
    size = dict(sizes)
    for group, dim in zip(lhs, x.shape):
        unknown = [n for n in group if n not in size]
        known = int(np.prod([size[n] for n in group if n in size], dtype=np.int64))
        if len(unknown) > 1 or (unknown and dim % known) or (not unknown and known != dim):
            raise ValueError(f"einshape: cannot split a dimension of size {dim} into {group} "
                             f"with sizes {sizes}")
        if unknown:
            size[unknown[0]] = dim // known
    flat = jnp.reshape(x, [size[n] for n in names])
    out = jnp.transpose(flat, [names.index(n) for g in rhs for n in g])
    return jnp.reshape(out, [int(np.prod([size[n] for n in g], dtype=np.int64)) for g in rhs])


# JAX: jax/_src/pallas/mosaic/primitives.py touch — differs: nothing to bind (interpret mode
# orders ref effects as written)
def touch(ref) -> None:
    """Mark `ref` (a pytree of refs) as read and written here, so a compiler keeps what uses
    it in order; in interpret mode operations already run in program order. TypeError for a
    value that is not a ref."""
    for leaf in tree_leaves(ref):
        leaf = getattr(leaf, "ref", leaf)  # a transformed ref: its underlying ref
        if not isinstance(core.get_aval(leaf), AbstractRef):
            raise TypeError(f"pltpu.touch: expected a ref, got {core.get_aval(leaf)}")


# JAX: jax/_src/pallas/mosaic/primitives.py trace_value — differs: interpret mode has no
# profiler trace to append to
def trace_value(label: str, value) -> None:
    """Attach the scalar `value` (int32 or float32) to the profiler's current trace region
    under `label`; ValueError for another shape or dtype. Nothing to record in interpret
    mode."""
    aval = core.get_aval(value)
    if aval.shape:
        raise ValueError(f"trace_value requires a scalar value, got shape {aval.shape}")
    if aval.dtype not in (np.int32, np.float32):
        raise ValueError(f"trace_value requires i32 or f32, got {aval.dtype}")


def _packing(unpacked, packed) -> int:
    ub, pb = _bits(unpacked), _bits(packed)
    if ub % pb:
        raise ValueError(f"Unpacked bitwidth must be a multiple of packed bitwidth, got {ub} "
                         f"and {pb}")
    return ub // pb


# JAX: jax/_src/pallas/mosaic/primitives.py pack_elementwise — differs: shifts and ors (JAX's
# interpret mode has no rule for it)
def pack_elementwise(xs, *, packed_dtype):
    """Pack the arrays `xs` (same shape and dtype; float32 into bfloat16, or integers into a
    narrower integer) element by element into one unsigned array as wide as `xs`' dtype: the
    k-th array in bits [k*w, (k+1)*w) of each word, w the packed width (integers truncated).
    ValueError if the number of arrays is not the packing factor, or for other dtypes."""
    if not xs:
        raise ValueError("At least one source is required")
    first = core.get_aval(xs[0])
    if any(core.get_aval(x).shape != first.shape for x in xs):
        raise ValueError("All sources must have the same shape")
    if any(core.get_aval(x).dtype != first.dtype for x in xs):
        raise ValueError("All sources must have the same dtype")
    packed = np.dtype(packed_dtype)
    is_int = np.issubdtype(first.dtype, np.integer) and (
        np.issubdtype(packed, np.integer) or packed.type in _UNPACKABLE)
    if not (first.dtype == np.float32 and packed == ml_dtypes.bfloat16) and not is_int:
        raise ValueError(f"Only f32 -> bf16 and int -> int are supported. Got {first.dtype} "
                         f"and {packed}")
    factor = _packing(first.dtype, packed)
    if len(xs) != factor:
        raise ValueError(f"The number of sources must match the packing factor ({factor}), "
                         f"got {len(xs)}")
    out_dtype = np.dtype(f"uint{_bits(first.dtype)}")
    width = _bits(packed)
    out = jnp.zeros(first.shape, out_dtype)
    for k, x in enumerate(xs):
        if not is_int:
            x = lax.bitcast_convert_type(lax.convert_element_type(x, packed), np.uint16)
        word = lax.convert_element_type(
            lax.bitcast_convert_type(x, np.dtype(f"uint{_bits(first.dtype)}")) if is_int
            else x, out_dtype)
        out = out | ((word & out_dtype.type((1 << width) - 1)) << out_dtype.type(k * width))
    return out


# JAX: jax/_src/pallas/mosaic/primitives.py unpack_elementwise — differs: shifts (JAX's
# interpret mode has no rule for it)
def unpack_elementwise(x, *, index, packed_dtype, unpacked_dtype):
    """The `index`-th `packed_dtype` value packed in each element of `x` (bits
    [index*w, (index+1)*w)), widened to `unpacked_dtype` (sign-extended for a signed integer):
    the inverse of `pack_elementwise`. ValueError if `x`'s width is not `unpacked_dtype`'s or
    `index` is out of range."""
    aval = core.get_aval(x)
    if _bits(aval.dtype) != _bits(unpacked_dtype):
        raise ValueError("The bitwidth of `x` must match the bitwidth of `unpacked_dtype` for "
                         f"unpack_elementwise, but got {aval.dtype} and "
                         f"{np.dtype(unpacked_dtype)}")
    factor = _packing(unpacked_dtype, packed_dtype)
    if index < 0 or index >= factor:
        raise ValueError(f"Index {index} is out of bounds for packing factor {factor}")
    bits, width = _bits(aval.dtype), _bits(packed_dtype)
    word = lax.bitcast_convert_type(x, np.dtype(f"int{bits}"))
    # the field moved to the top of the word, then an arithmetic shift back down sign-extends
    field = (word << np.dtype(f"int{bits}").type(bits - width * (index + 1)))
    if np.dtype(packed_dtype) == ml_dtypes.bfloat16:
        half = lax.convert_element_type(lax.shift_right_logical(
            field, np.dtype(f"int{bits}").type(bits - width)), np.uint16)
        return lax.convert_element_type(lax.bitcast_convert_type(half, ml_dtypes.bfloat16),
                                        unpacked_dtype)
    shift = np.dtype(f"int{bits}").type(bits - width)
    signed = np.issubdtype(np.dtype(packed_dtype), np.signedinteger)
    value = (lax.shift_right_arithmetic if signed else lax.shift_right_logical)(field, shift)
    return lax.convert_element_type(value, unpacked_dtype)


# The MXUs' staging registers, loaded right-hand sides and accumulators while one kernel is
# traced: kernel operations run once, in program order, so the state lives in Python
_mxu = threading.local()


def _mxu_state() -> dict:
    if not hasattr(_mxu, "state"):
        _mxu.state = {"staged": {}, "rhs": {}, "acc": {}}
    return _mxu.state


# JAX: jax/_src/pallas/mosaic/primitives.py matmul_push_rhs — differs: the MXU modelled as
# traced values (JAX's interpret mode has no rule for it)
def matmul_push_rhs(rhs, staging_register: int, mxu_index: int, *, transpose: bool = False
                    ) -> None:
    """Stage `rhs` (transposed if asked) in staging register `staging_register` of MXU
    `mxu_index`, for a later `matmul_acc_lhs(..., load_staged_rhs=staging_register)`.
    ValueError if that register already holds one."""
    key = (mxu_index, staging_register)
    if key in _mxu_state()["staged"]:
        raise ValueError(f"pltpu.matmul_push_rhs: staging register {staging_register} of MXU "
                         f"{mxu_index} already holds a right-hand side")
    _mxu_state()["staged"][key] = jnp.transpose(rhs) if transpose else rhs


# JAX: jax/_src/pallas/mosaic/primitives.py matmul_acc_lhs
def matmul_acc_lhs(acc_addr: int, lhs, mxu_index: int, load_staged_rhs: int | None = None
                   ) -> None:
    """Add `lhs @ rhs` (in float32, int32 for integers) to MXU `mxu_index`'s accumulator at
    `acc_addr`; `load_staged_rhs`: first load the right-hand side staged in that register
    (else the MXU's current one). TypeError for a bool register, ValueError when nothing is
    staged or loaded."""
    if isinstance(load_staged_rhs, bool):
        raise TypeError("load_staged_rhs must be an integer or None.")
    st = _mxu_state()
    if load_staged_rhs is not None:
        if (mxu_index, load_staged_rhs) not in st["staged"]:
            raise ValueError(f"pltpu.matmul_acc_lhs: nothing staged in register "
                             f"{load_staged_rhs} of MXU {mxu_index}")
        st["rhs"][mxu_index] = st["staged"].pop((mxu_index, load_staged_rhs))
    if mxu_index not in st["rhs"]:
        raise ValueError(f"pltpu.matmul_acc_lhs: MXU {mxu_index} holds no right-hand side")
    acc_t = np.int32 if np.issubdtype(core.get_aval(lhs).dtype, np.integer) else np.float32
    prod = lax.dot(lhs, st["rhs"][mxu_index], preferred_element_type=acc_t)
    key = (mxu_index, acc_addr)
    st["acc"][key] = prod if key not in st["acc"] else st["acc"][key] + prod


# JAX: jax/_src/pallas/mosaic/primitives.py matmul_pop
def matmul_pop(acc_addr: int, shape, dtype, mxu_index: int):
    """The accumulator at `acc_addr` of MXU `mxu_index` as `dtype` (float32 or int32) and
    `shape`, which then reads zero. ValueError for another dtype or a shape that differs."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.int32):
        raise ValueError(f"Only float32 and int32 accumulators are supported, got {dtype}")
    acc = _mxu_state()["acc"].pop((mxu_index, acc_addr), None)
    if acc is None:
        return jnp.zeros(shape, dtype)
    if tuple(acc.shape) != tuple(shape):
        raise ValueError(f"pltpu.matmul_pop: the accumulator holds {tuple(acc.shape)}, asked "
                         f"for {tuple(shape)}")
    return lax.convert_element_type(acc, dtype)


# JAX: jax/_src/pallas/mosaic/primitives.py prng_seed — differs: as JAX's TPU interpret mode,
# a no-op (the hardware PRNG is not modelled)
def prng_seed(*seeds) -> None:
    """Seed the core's hardware random number generator with one or more integers. Interpret
    mode, as JAX's, has no generator: the seed is checked (integer scalars, else TypeError)
    and dropped."""
    for s in seeds:
        aval = core.get_aval(s)
        if aval.shape or not np.issubdtype(aval.dtype, np.integer):
            raise TypeError(f"pltpu.prng_seed: seeds must be integer scalars, got {aval}")


# JAX: jax/_src/pallas/mosaic/primitives.py prng_random_bits — differs: as JAX's TPU
# interpret mode, zeros
def prng_random_bits(shape):
    """int32 random bits of `shape` from the hardware generator; interpret mode, as JAX's,
    gives zeros."""
    return jnp.zeros(tuple(shape), np.int32)


def _uniform_from_bits(bits, dtype, minval, maxval):
    # jax.random.uniform's construction: the top mantissa bits under the exponent of 1.0 give
    # a float in [1, 2); minus 1, scaled into [minval, maxval)
    dtype = np.dtype(dtype)
    nbits, nmant = dtype.itemsize * 8, np.finfo(dtype).nmant
    udt = np.dtype(f"uint{nbits}")
    one = lax.bitcast_convert_type(np.array(1.0, dtype), udt)
    word = lax.shift_right_logical(bits, udt.type(nbits - nmant)) | one
    u = lax.bitcast_convert_type(word, dtype) - dtype.type(1)
    minval, maxval = jnp.asarray(minval, dtype), jnp.asarray(maxval, dtype)
    return lax.max(minval, lax.reshape(u * (maxval - minval) + minval, bits.shape))


def _bits32(shape):
    return lax.bitcast_convert_type(prng_random_bits(tuple(shape)), np.uint32)


# JAX: jax/_src/pallas/mosaic/random.py stateful_bits
def stateful_bits(shape=(), dtype=None):
    """`jax.random.bits` drawn from the core's generator (`prng_random_bits`): uint32 of
    `shape`; interpret mode's bits are zeros, as JAX's."""
    if dtype is not None and np.dtype(dtype) != np.uint32:
        raise ValueError(f"pltpu.stateful_bits: only uint32 bits, got {np.dtype(dtype)}")
    return _bits32(shape)


# JAX: jax/_src/pallas/mosaic/random.py stateful_uniform
def stateful_uniform(shape=(), dtype=np.float32, minval=0.0, maxval=1.0):
    """`jax.random.uniform` over the core's generator: floats in [minval, maxval)."""
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"pltpu.stateful_uniform: 32-bit floats only, got {np.dtype(dtype)}")
    return _uniform_from_bits(_bits32(shape), dtype, minval, maxval)


# JAX: jax/_src/pallas/mosaic/random.py stateful_normal
def stateful_normal(shape=(), dtype=np.float32):
    """`jax.random.normal` over the core's generator: sqrt(2) erfinv(u), u uniform in
    (-1, 1)."""
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"pltpu.stateful_normal: 32-bit floats only, got {np.dtype(dtype)}")
    lo = np.nextafter(np.float32(-1), np.float32(0))
    u = _uniform_from_bits(_bits32(shape), dtype, lo, 1.0)
    return np.float32(np.sqrt(2)) * lax.erf_inv(u)


# JAX: jax/_src/pallas/mosaic/random.py stateful_bernoulli
def stateful_bernoulli(p=0.5, shape=None):
    """`jax.random.bernoulli` over the core's generator: True with probability `p`."""
    p = jnp.asarray(p, np.float32)
    shape = p.shape if shape is None else tuple(shape)
    return stateful_uniform(shape) < p


# JAX: jax/_src/pallas/mosaic/primitives.py stochastic_round — differs: written with bit
# operations (JAX's interpret mode has no rule for it); bfloat16 targets only
def stochastic_round(x, random_bits, *, target_dtype):
    """float32 `x` rounded to bfloat16 up or down at random: the low 16 bits of
    `random_bits` (uint32, `x`'s shape) are added to the 16 bits bfloat16 drops, and the sum
    truncated, so a value rounds away from zero with probability equal to the dropped
    fraction. ValueError for bits of another shape or dtype; NotImplementedError for another
    target dtype."""
    xa, ba = core.get_aval(x), core.get_aval(random_bits)
    if tuple(ba.shape) != tuple(xa.shape):
        raise ValueError("The shape of `random_bits` must match the shape of `x` for "
                         f"stochastic_round, but got {ba.shape} and {xa.shape}")
    if ba.dtype != np.uint32:
        raise ValueError("The dtype of `random_bits` must be uint32 for stochastic_round, "
                         f"but got {ba.dtype}")
    if xa.dtype != np.float32 or np.dtype(target_dtype) != ml_dtypes.bfloat16:
        raise NotImplementedError(f"pltpu.stochastic_round: float32 to bfloat16 only, got "
                                  f"{xa.dtype} to {np.dtype(target_dtype)}")
    word = lax.bitcast_convert_type(x, np.uint32)
    finite = lax.is_finite(x)
    word = lax.select(finite, word + (random_bits & np.uint32(0xFFFF)), word)
    top = lax.shift_right_logical(word, np.uint32(16)).astype(np.uint16)
    return lax.bitcast_convert_type(top, ml_dtypes.bfloat16)
