"""Counter-based random numbers: the Threefry-2x32 hash, and keys laid out as JAX lays them out.

JAX has no hidden random state. A *key* is two uint32 words; random bits are a pure function
`threefry2x32(key, counter)` of the key and a counter (0, 1, 2, ... for each output element),
so the same key always gives the same numbers, in eager code, under `jit` (where the hash is
plain integer ops that XLA compiles) and under `vmap` (where a batch of keys is just batched
operands of those ops). `split` and `fold_in` are the same hash applied to small counters.

Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) is 20
rounds of add / rotate / xor on two 32-bit words, with the key added every 4 rounds.

Mirrors jax/_src/random/prng.py (keys, `iota_2x32_shape`) and jax/_src/random/threefry2x32.py
(the hash, seed, split, fold_in, random_bits), with `jax_threefry_partitionable=True` (the
default in JAX 0.10). Taught in chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from minijax import core, dtypes
from minijax.lax import lax
from minijax.lax.control_flow import fori_loop
from minijax.tree_util import register_pytree_node

_u32 = np.uint32

# ---------------------------------------------------------------------------------------------
# The Threefry-2x32 hash
# ---------------------------------------------------------------------------------------------

# The rotation distances of Threefry-2x32; the two rows alternate every 4 rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# Threefish's key-schedule parity constant: the third key word is k0 ^ k1 ^ this.
_KS_PARITY = _u32(0x1BD11BDA)


def _rotate_left(x, d):
    return lax.bitwise_or(lax.shift_left(x, d), lax.shift_right_logical(x, lax.sub(_u32(32), d)))


def _apply_round(x1, x2, rot):
    x1 = lax.add(x1, x2)
    x2 = lax.bitwise_xor(x1, _rotate_left(x2, rot))
    return x1, x2


def _four_rounds(i, state):
    """One trip of the loop: 4 rounds with the first row of rotations, then inject the next
    key word pair and the trip count; the key words and the rotation rows turn by one."""
    (x1, x2), ks, rotations = state
    for j in range(4):
        rot = lax.squeeze(lax.slice(rotations[0], (j,), (j + 1,)), (0,))
        x1, x2 = _apply_round(x1, x2, rot)
    x1 = lax.add(x1, ks[0])
    x2 = lax.add(lax.add(x2, ks[1]), lax.convert_element_type(lax.add(i, 1), np.uint32))
    return (x1, x2), ks[1:] + ks[:1], rotations[1:] + rotations[:1]


# JAX: jax/_src/random/threefry2x32.py _threefry2x32_lowering — differs: a function of lax
# ops (JAX binds a threefry2x32 primitive whose lowering is this function)
def threefry2x32(key1, key2, x1, x2):
    """The Threefry-2x32 hash of the word pairs `(x1, x2)` under the key `(key1, key2)`.

    20 rounds, written as a `fori_loop` of 5 trips of 4 rounds, as JAX lowers it on CPU: the
    same bits as 20 unrolled rounds, but XLA compiles the loop about twice as fast.

    Args:
      key1, key2: u32[] (or any shape broadcasting with the counts, e.g. under vmap).
      x1, x2: u32[...] of one shape: the counters.
    Returns: `(y1, y2)`, two u32 arrays of the counters' shape.
    Raises TypeError if an operand is not uint32.
    """
    for v in (key1, key2, x1, x2):
        if core.get_aval(v).dtype != np.uint32:
            raise TypeError(f"threefry2x32 requires uint32 arguments, got "
                            f"{[core.get_aval(a).str_short() for a in (key1, key2, x1, x2)]}")
    ks = [key1, key2, lax.bitwise_xor(lax.bitwise_xor(key1, key2), _KS_PARITY)]
    x1, x2 = lax.add(x1, ks[0]), lax.add(x2, ks[1])
    rotations = [np.array(r, np.uint32) for r in _ROTATIONS]
    (x1, x2), _, _ = fori_loop(0, 5, _four_rounds, ((x1, x2), ks[1:] + ks[:1], rotations))
    return x1, x2


def _key_words(key):
    """The two words of a raw key u32[2] as u32[] values."""
    return (lax.squeeze(lax.slice(key, (0,), (1,)), (0,)),
            lax.squeeze(lax.slice(key, (1,), (2,)), (0,)))


# JAX: jax/_src/random/threefry2x32.py threefry_2x32
def threefry_2x32(keypair, count):
    """Hash a whole u32 array `count` with the key u32[2]: its flat elements are cut in two
    halves (zero-padded to even length) that form the word pairs. Returns u32 of count's
    shape. This is the original (non-partitionable) layout; `fold_in` still uses it."""
    key1, key2 = _key_words(keypair)
    shape = core.get_aval(count).shape
    flat = lax.reshape(count, (math.prod(shape),))
    odd = flat.shape[0] % 2
    if odd:
        flat = lax.concatenate([flat, np.zeros((1,), np.uint32)], 0)
    half = flat.shape[0] // 2
    y1, y2 = threefry2x32(key1, key2, lax.slice(flat, (0,), (half,)),
                          lax.slice(flat, (half,), (2 * half,)))
    out = lax.concatenate([y1, y2], 0)
    if odd:
        out = lax.slice(out, (0,), (2 * half - 1,))
    return lax.reshape(out, shape)


# ---------------------------------------------------------------------------------------------
# Seed, split, fold_in, random bits
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/random/prng.py iota_2x32_shape — differs: sizes of 2**32 and more unsupported
def iota_2x32_shape(shape: Sequence[int]):
    """The row-major index of every element of `shape` as a 64-bit count split into two u32
    arrays `(hi, lo)`. minijax handles fewer than 2**32 elements, where `hi` is 0, so no
    uint64 is needed (it would not exist with x64 off)."""
    shape = tuple(shape)
    if not shape:
        return np.zeros((), np.uint32), np.zeros((), np.uint32)
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise NotImplementedError(f"random arrays of 2**32 or more elements ({shape})")
    lo = lax.reshape(lax.iota(np.uint32, size), shape)
    return lax.full(shape, 0, np.uint32), lo


# JAX: jax/_src/random/threefry2x32.py threefry_seed
def threefry_seed(seed):
    """The raw key u32[2] of an integer seed: `[high 32 bits, low 32 bits]` of the seed. With
    x64 off the seed is 32-bit, so the high word is 0 (a logical shift by 32 gives 0)."""
    aval = core.get_aval(seed)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got {aval.str_short()}.")
    if aval.dtype.kind not in "iu":
        raise TypeError(f"PRNG key seed must be an integer; got {aval.str_short()}")
    hi = lax.shift_right_logical(seed, np.array(32, aval.dtype))
    # the low word: converting to uint32 keeps the low 32 bits (JAX masks with 0xFFFFFFFF)
    words = [lax.convert_element_type(w, np.uint32) for w in (hi, seed)]
    return lax.concatenate([lax.reshape(w, (1,)) for w in words], 0)


# JAX: jax/_src/random/threefry2x32.py _threefry_split_foldlike
def threefry_split(key, shape: Sequence[int]):
    """New raw keys u32[*shape, 2]: the hash of the counters 0, 1, ... (as 64-bit pairs)."""
    key1, key2 = _key_words(key)
    hi, lo = iota_2x32_shape(shape)
    bits1, bits2 = threefry2x32(key1, key2, hi, lo)
    shape = tuple(shape)
    both = [lax.reshape(b, shape + (1,)) for b in (bits1, bits2)]
    return lax.concatenate(both, len(shape))


# JAX: jax/_src/random/threefry2x32.py threefry_fold_in
def threefry_fold_in(key, data):
    """A new raw key from `key` and a u32[] `data`: the hash of the seed key of `data`."""
    return threefry_2x32(key, threefry_seed(data))


# JAX: jax/_src/random/threefry2x32.py _threefry_random_bits_partitionable
def threefry_random_bits(key, bit_width: int, shape: Sequence[int]):
    """Uniform random bits u{bit_width}[*shape] from a raw key: element i is the xor of the two
    words of the hash of counter i (8 and 16 bits keep the low bits; 64 joins the words)."""
    if bit_width not in (8, 16, 32, 64):
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    key1, key2 = _key_words(key)
    hi, lo = iota_2x32_shape(shape)
    bits1, bits2 = threefry2x32(key1, key2, hi, lo)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        if not dtypes.x64_enabled():
            raise TypeError("64-bit random bits need jax_enable_x64")
        hi64 = lax.convert_element_type(bits1, dtype)
        return lax.bitwise_or(lax.shift_left(hi64, np.array(32, dtype)),
                              lax.convert_element_type(bits2, dtype))
    out = lax.bitwise_xor(bits1, bits2)
    return out if bit_width == 32 else lax.convert_element_type(out, dtype)


UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
               64: np.dtype(np.uint64)}


# ---------------------------------------------------------------------------------------------
# PRNG implementations and typed keys
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/random/prng.py PRNGImpl
class PRNGImpl(NamedTuple):
    """A PRNG: the shape of its raw keys and its four functions on raw keys."""
    key_shape: tuple[int, ...]
    seed: Callable
    split: Callable
    random_bits: Callable
    fold_in: Callable
    name: str
    tag: str

    def __str__(self) -> str:
        return self.tag


threefry_prng_impl = PRNGImpl(key_shape=(2,), seed=threefry_seed, split=threefry_split,
                              random_bits=threefry_random_bits, fold_in=threefry_fold_in,
                              name="threefry2x32", tag="fry")


# ---------------------------------------------------------------------------------------------
# RBG: XLA's own bit generator (`lax.rng_bit_generator`) behind a u32[4] key
# ---------------------------------------------------------------------------------------------
# A key is two threefry keys side by side. `split` and `fold_in` apply threefry to each half
# (so they are as safe as threefry's); the bits come from XLA's RngBitGenerator seeded with
# the four words, whose algorithm is the backend's and may change with XLA's version.

# JAX: jax/_src/random/rbg.py _rbg_seed
def rbg_seed(seed):
    """The raw u32[4] key of an integer seed: threefry's u32[2] key, twice."""
    half = threefry_seed(seed)
    return lax.concatenate([half, half], 0)


def _halves(key):
    return lax.slice(key, (0,), (2,)), lax.slice(key, (2,), (4,))


# JAX: jax/_src/random/rbg.py _rbg_split — differs: the two halves hashed one after the
# other and joined (JAX vmaps threefry's split over them), the same words
def rbg_split(key, shape: Sequence[int]):
    """New raw keys u32[*shape, 4]: each half split as a threefry key."""
    shape = tuple(shape)
    return lax.concatenate([threefry_split(h, shape) for h in _halves(key)], len(shape))


# JAX: jax/_src/random/rbg.py _rbg_fold_in
def rbg_fold_in(key, data):
    """A new raw key u32[4]: `data` folded into each half as into a threefry key."""
    return lax.concatenate([threefry_fold_in(h, data) for h in _halves(key)], 0)


# JAX: jax/_src/random/rbg.py _rbg_random_bits
def rbg_random_bits(key, bit_width: int, shape: Sequence[int]):
    """Random bits u{bit_width}[*shape] of XLA's RngBitGenerator with the key as its state."""
    if bit_width not in (8, 16, 32, 64):
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    if bit_width == 64 and not dtypes.x64_enabled():
        raise TypeError("64-bit random bits need jax_enable_x64")
    return lax.rng_bit_generator(key, tuple(shape), dtype=UINT_DTYPES[bit_width])[1]


# JAX: jax/_src/random/rbg.py _unsafe_rbg_split
def unsafe_rbg_split(key, shape: Sequence[int]):
    """New raw keys u32[*shape, 4]: every tenth row of 10 * n rows of RngBitGenerator words
    (ten draws taken as a hash: fast, with no proof of independence)."""
    num = math.prod(shape)
    words = lax.rng_bit_generator(key, (10 * num, 4), dtype=np.uint32)[1]
    return lax.reshape(lax.slice(words, (0, 0), (10 * num, 4), (10, 1)), tuple(shape) + (4,))


# JAX: jax/_src/random/rbg.py _unsafe_rbg_fold_in
def unsafe_rbg_fold_in(key, data):
    """A new raw key u32[4]: the key xor the last of ten rows drawn from `data`'s seed key."""
    words = lax.rng_bit_generator(rbg_seed(data), (10, 4), dtype=np.uint32)[1]
    return lax.bitwise_xor(key, lax.reshape(lax.slice(words, (9, 0), (10, 4)), (4,)))


rbg_prng_impl = PRNGImpl(key_shape=(4,), seed=rbg_seed, split=rbg_split,
                         random_bits=rbg_random_bits, fold_in=rbg_fold_in, name="rbg",
                         tag="rbg")
unsafe_rbg_prng_impl = PRNGImpl(key_shape=(4,), seed=rbg_seed, split=unsafe_rbg_split,
                                random_bits=rbg_random_bits, fold_in=unsafe_rbg_fold_in,
                                name="unsafe_rbg", tag="urbg")
prngs: dict[str, PRNGImpl] = {i.name: i for i in (threefry_prng_impl, rbg_prng_impl,
                                                   unsafe_rbg_prng_impl)}


# JAX: jax/_src/random/prng.py KeyTy
class KeyTy:
    """The dtype of typed keys, printed `key<fry>`."""

    def __init__(self, impl: PRNGImpl) -> None:
        self._impl = impl

    name = property(lambda self: f"key<{self._impl.tag}>")

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        return type(other) is KeyTy and other._impl == self._impl

    def __hash__(self) -> int:
        return hash(self._impl)


# JAX: jax/_src/random/prng.py PRNGKeyArray — differs: a pytree holding the raw key data (so
# jit and vmap see a u32[..., 2] leaf), not an array with an extended dtype
class PRNGKeyArray:
    """An array of typed keys (what `random.key` returns): `shape` counts keys, not words.

    The raw words are `random.key_data(keys)`, u32[*shape, 2]. Index it, unpack it
    (`k1, k2 = random.split(key)`) and pass it through `jit` and `vmap` like an array."""

    __slots__ = ("_impl", "_base_array")

    def __init__(self, impl: PRNGImpl, key_data) -> None:
        self._impl = impl
        self._base_array = key_data

    @property
    def shape(self) -> tuple[int, ...]:
        n = len(self._impl.key_shape)
        return core.get_aval(self._base_array).shape[:-n]

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: KeyTy(self._impl))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx) -> "PRNGKeyArray":
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            raise NotImplementedError("Ellipsis indexing of key arrays")
        full = idx + (slice(None),) * (self.ndim - len(idx) + len(self._impl.key_shape))
        return PRNGKeyArray(self._impl, self._base_array[full])

    def __array__(self, dtype=None, copy=None):  # JAX's refusal, word for word
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use jax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")

    def astype(self, dtype):  # (JAX: NotImplementedError from its abstract method)
        raise NotImplementedError(f"astype of a key array ({self.dtype.name}): keys convert "
                                  f"to no dtype; random.key_data gives their words")

    def __repr__(self) -> str:
        data = self._base_array
        body = np.asarray(data) if core.is_concrete(data) else data
        return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n{body}"


register_pytree_node(PRNGKeyArray, lambda k: ([k._base_array], k._impl),
                     lambda impl, xs: PRNGKeyArray(impl, xs[0]))


# JAX: jax/_src/random/prng.py random_wrap
def random_wrap(key_data, impl: PRNGImpl) -> PRNGKeyArray:
    """Typed keys over raw key data u32[..., *key_shape]. Raises TypeError on bad data."""
    aval = core.get_aval(key_data)
    n = len(impl.key_shape)
    if aval.dtype != np.uint32 or aval.shape[len(aval.shape) - n:] != impl.key_shape:
        raise TypeError(f"random_wrap: expected uint32 key data of trailing shape "
                        f"{impl.key_shape} for {impl.name}, got {aval.str_short()}")
    return PRNGKeyArray(impl, key_data)


# JAX: jax/_src/random/prng.py random_unwrap
def random_unwrap(keys: PRNGKeyArray) -> Any:
    """The raw key data u32[*keys.shape, 2] of typed keys."""
    return keys._base_array


# JAX: jax/_src/random/prng.py random_split
def random_split(keys: PRNGKeyArray, shape: Sequence[int]) -> PRNGKeyArray:
    """Typed keys of shape `shape` split from one typed key, by its implementation."""
    return PRNGKeyArray(keys._impl, keys._impl.split(keys._base_array, tuple(shape)))


# JAX: jax/_src/random/prng.py random_bits
def random_bits(keys: PRNGKeyArray, bit_width: int, shape: Sequence[int]):
    """Random bits u{bit_width}[*shape] from one typed key, by its implementation."""
    return keys._impl.random_bits(keys._base_array, bit_width, tuple(shape))
