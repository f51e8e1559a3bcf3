"""Reference solution: dropout with explicit PRNG keys (chapter 18)."""

from __future__ import annotations


def dropout(J, key, x, rate: float, train: bool):
    """x: f32[...]; key: a PRNG key. Returns f32[...] of x's shape."""
    if not train or rate == 0.0:
        return x
    keep = J.random.bernoulli(key, 1.0 - rate, x.shape)
    return J.numpy.where(keep, x / (1.0 - rate), 0.0)


def keys_for_step(J, key, n_layers: int):
    """Returns (next_key, [key for each of the n_layers layers])."""
    keys = J.random.split(key, n_layers + 1)
    return keys[0], [keys[i] for i in range(1, n_layers + 1)]
