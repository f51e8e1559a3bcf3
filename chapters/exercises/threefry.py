"""Exercise: Threefry-2x32 and JAX's keys, bits, split, fold_in and uniform, in NumPy
(chapter 10).

Every random number of `jax.random` comes from one hash, Threefry-2x32, applied to counters.
Write it, and the functions built on it, with NumPy `uint32` arithmetic (which wraps around at
2**32, as the hash needs; do it on arrays, since NumPy warns when 0-d scalars overflow). A key
here is its data, u32[2], the array `jax.random.key_data(key)` gives:

* `rotate_left(x, d)` and `threefry2x32(key, x0, x1)`: the hash (the chapter's toy shows its
  rounds): the key schedule ks = [k0, k1, k0 ^ k1 ^ PARITY]; x0 += ks[0], x1 += ks[1]; then
  five groups of four rounds `x0 += x1; x1 = rotate_left(x1, r) ^ x0` with the distances
  ROTATIONS[i % 2], each group followed by x0 += ks[(i+1) % 3], x1 += ks[(i+2) % 3] + i + 1.
* `threefry_seed(seed)`: the key of a 32-bit integer seed, `[0, seed mod 2**32]`.
* `iota_2x32_shape(shape)`: each element's row-major index as two words (high, low).
* `random_bits(key, shape, bit_width)`: hash the indices, xor the two output words, and
  truncate to 8 or 16 bits when asked (JAX's partitionable layout, the default in 0.10).
* `split(key, shape)`: the same hash of the indices, keeping both words: one new key each.
* `fold_in(key, data)`: the hash of `threefry_seed(data)` taken as one counter pair.
* `uniform(key, shape)`: floats in [0, 1) from bits, with no division.

The tests compare every function bit for bit with `jax.random` (`bits`, `key_data`, `split`,
`fold_in`, `uniform`) for several seeds, shapes and widths, and the hash with
`jax.extend.random.threefry_2x32`. In minijax these are `threefry2x32`, `threefry_seed`,
`iota_2x32_shape`, `threefry_random_bits`, `threefry_split` and `threefry_fold_in` in
minijax/prng.py, written with lax primitives so that they trace and compile; in JAX, the
same names in jax/_src/random/threefry2x32.py and jax/_src/random/prng.py.
"""

from __future__ import annotations

import math  # noqa: F401 (for your code)

import numpy as np

U32 = np.uint32
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # the rotation distances of the two round kinds
PARITY = U32(0x1BD11BDA)                           # the key schedule's constant


def rotate_left(x: np.ndarray, d: int) -> np.ndarray:
    """x: u32[...] rotated left by d bits (0 < d < 32)."""
    raise NotImplementedError("rotate_left: the bits shifted out on the left "
                              "come back on the right")


def threefry2x32(key: np.ndarray, x0: np.ndarray, x1: np.ndarray):
    """The Threefry-2x32 hash of the counter pairs (x0, x1) under key: u32[2]. x0, x1:
    u32[...] of one shape; returns (y0, y1) of that shape."""
    raise NotImplementedError("threefry2x32: the key schedule, then 5 groups of 4 "
                              "rounds, a key injection after each")


def threefry_seed(seed: int) -> np.ndarray:
    """The key data u32[2] of `jax.random.key(seed)` for a 32-bit seed (64-bit mode off): the
    high word (0) and the low word of the seed's two's complement."""
    raise NotImplementedError("threefry_seed: [0, seed mod 2**32] as uint32")


def iota_2x32_shape(shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The row-major index of every element of an array of `shape`, as a 64-bit count split
    into (high word, low word), each u32[*shape]."""
    raise NotImplementedError("iota_2x32_shape: np.arange over the elements, as "
                              "uint64, split in two uint32 words")


def random_bits(key: np.ndarray, shape: tuple, bit_width: int = 32) -> np.ndarray:
    """`jax.random.bits(key, shape, uint{bit_width})` for bit_width 8, 16 or 32: the hash of
    each element's index, its two words xor-ed (then truncated to the narrower width)."""
    raise NotImplementedError("random_bits: threefry2x32 of the indices, y0 ^ y1, then the width")


def split(key: np.ndarray, shape=2) -> np.ndarray:
    """The key data u32[*shape, 2] of `jax.random.split(key, shape)`: both words of the hash
    of each new key's index."""
    raise NotImplementedError("split: threefry2x32 of the new keys' indices, both "
                              "words stacked last")


def fold_in(key: np.ndarray, data: int) -> np.ndarray:
    """The key data u32[2] of `jax.random.fold_in(key, data)`: the hash of `data`'s seed key,
    taken as one counter pair."""
    raise NotImplementedError("fold_in: threefry2x32 of threefry_seed(data) as one counter pair")


def uniform(key: np.ndarray, shape: tuple) -> np.ndarray:
    """`jax.random.uniform(key, shape)`: f32[*shape] in [0, 1), from 23 random bits placed in
    the mantissa of a float32 whose exponent is that of 1.0 (a float in [1, 2)), minus 1."""
    raise NotImplementedError("uniform: (bits >> 9) | the bits of 1.0, viewed as float32, minus 1")
