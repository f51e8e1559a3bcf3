"""Exercise: dropout with explicit PRNG keys (chapter 18).

Batch norm's running statistics are state the step returns; dropout's randomness is state the
step is *given*: a PRNG key, split fresh for every step and every layer, never a global seed.
Write, against a module alias `J` (`jax` or `minijax`, so the same code runs in both):

* `dropout(J, key, x, rate, train)`: in train mode keep each element with probability
  `1 - rate`, drawn as `J.random.bernoulli(key, 1 - rate, x.shape)`, and scale the kept ones by
  `1 / (1 - rate)` so the expected value is unchanged; zeros elsewhere (`J.numpy.where`). In
  eval mode (`train=False`) return `x` unchanged. `rate == 0` returns `x` in both modes.
* `keys_for_step(J, key, n_layers)`: `(next_key, layer_keys)`: split `key` into
  `n_layers + 1` keys (`J.random.split`), the first carried to the next step, one per layer.

The tests check against real JAX: the same key gives the same mask in both modules, the
gradient of a dropped-out sum is the scaled mask, eval mode is the identity, and it all runs
under `jit`.
"""

from __future__ import annotations


def dropout(J, key, x, rate: float, train: bool):
    """x: f32[...]; key: a PRNG key. Returns f32[...] of x's shape."""
    raise NotImplementedError("dropout")


def keys_for_step(J, key, n_layers: int):
    """Returns (next_key, [key for each of the n_layers layers])."""
    raise NotImplementedError("keys_for_step")
