"""Reference solution: Threefry-2x32 and JAX's keys, bits, split, fold_in and uniform, in NumPy
(chapter 10)."""

from __future__ import annotations

import math

import numpy as np

U32 = np.uint32
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # the rotation distances of the two round kinds
PARITY = U32(0x1BD11BDA)                           # the key schedule's constant


def rotate_left(x: np.ndarray, d: int) -> np.ndarray:
    """x: u32[...] rotated left by d bits (0 < d < 32)."""
    return (x << U32(d)) | (x >> U32(32 - d))


def threefry2x32(key: np.ndarray, x0: np.ndarray, x1: np.ndarray):
    """The Threefry-2x32 hash of the counter pairs (x0, x1) under key: u32[2]. x0, x1:
    u32[...] of one shape; returns (y0, y1) of that shape."""
    shape = np.shape(x0)
    ks = [U32(key[0]), U32(key[1])]
    ks.append(ks[0] ^ ks[1] ^ PARITY)
    # flat arrays: uint32 arithmetic wraps around at 2**32 silently on arrays (NumPy warns
    # about it on 0-d scalars)
    x0 = np.asarray(x0, U32).reshape(-1) + ks[0]
    x1 = np.asarray(x1, U32).reshape(-1) + ks[1]
    for i in range(5):  # five groups of four rounds, a key injection after each
        for r in ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + U32(i + 1)
    return x0.reshape(shape), x1.reshape(shape)


def threefry_seed(seed: int) -> np.ndarray:
    """The key data u32[2] of `jax.random.key(seed)` for a 32-bit seed (64-bit mode off): the
    high word (0) and the low word of the seed's two's complement."""
    return np.array([0, seed & 0xFFFFFFFF], U32)


def iota_2x32_shape(shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The row-major index of every element of an array of `shape`, as a 64-bit count split
    into (high word, low word), each u32[*shape]."""
    count = np.arange(math.prod(shape), dtype=np.uint64).reshape(shape)
    return (count >> np.uint64(32)).astype(U32), (count & np.uint64(0xFFFFFFFF)).astype(U32)


def random_bits(key: np.ndarray, shape: tuple, bit_width: int = 32) -> np.ndarray:
    """`jax.random.bits(key, shape, uint{bit_width})` for bit_width 8, 16 or 32: the hash of
    each element's index, its two words xor-ed (then truncated to the narrower width)."""
    y0, y1 = threefry2x32(key, *iota_2x32_shape(tuple(shape)))
    return (y0 ^ y1).astype({8: np.uint8, 16: np.uint16, 32: U32}[bit_width])


def split(key: np.ndarray, shape=2) -> np.ndarray:
    """The key data u32[*shape, 2] of `jax.random.split(key, shape)`: both words of the hash
    of each new key's index."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return np.stack(threefry2x32(key, *iota_2x32_shape(shape)), axis=-1)


def fold_in(key: np.ndarray, data: int) -> np.ndarray:
    """The key data u32[2] of `jax.random.fold_in(key, data)`: the hash of `data`'s seed key,
    taken as one counter pair."""
    hi, lo = threefry_seed(data)
    y0, y1 = threefry2x32(key, np.array([hi], U32), np.array([lo], U32))
    return np.concatenate([y0, y1])


def uniform(key: np.ndarray, shape: tuple) -> np.ndarray:
    """`jax.random.uniform(key, shape)`: f32[*shape] in [0, 1), from 23 random bits placed in
    the mantissa of a float32 whose exponent is that of 1.0 (a float in [1, 2)), minus 1."""
    bits = random_bits(key, shape)
    one = np.array(1.0, np.float32).view(U32)
    return ((bits >> U32(9)) | one).view(np.float32) - np.float32(1.0)
