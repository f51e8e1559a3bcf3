"""Rung 12, the summit: an MLP trained with everything below it: pytree parameters,
value_and_grad (jvp + partial evaluation + transpose) and jit (StableHLO on XLA)."""

from __future__ import annotations

import numpy as np

from . import core as c
from .jit import jit
from .tree import tree_map, value_and_grad


def init(key: int, sizes):
    rng = np.random.RandomState(key)
    return [{"w": (rng.randn(m, n) / np.sqrt(m)).astype(np.float32),
             "b": np.zeros(n, np.float32)} for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for i, layer in enumerate(params):
        batch, n = c.shape_dtype(x)[0][0], c.shape_dtype(layer["b"])[0][0]
        x = c.add(c.dot(x, layer["w"]), c.broadcast_in_dim(layer["b"], (batch, n), (1,)))
        if i < len(params) - 1:
            x = c.maximum(x, np.zeros((batch, n), np.float32))
    return x


def loss(params, x, y):
    """Mean squared error."""
    err = c.add(predict(params, x), c.neg(y))
    return c.mul(c.reduce_sum(c.mul(err, err), (0, 1)),
                 np.float32(1.0 / np.prod(c.shape_dtype(y)[0])))


def train(x, y, sizes, steps=100, lr=0.1, key=0):
    """Plain gradient descent; returns (params, losses)."""
    params = init(key, sizes)
    leaves_like = params
    # BUILD rung 12: one jitted step: loss and gradients, then the update
    def step(*args):  # jit takes arrays: the parameters' leaves, then x and y
        *flat_params, x, y = args
        p = _unflat(leaves_like, flat_params)
        value, grads = value_and_grad(loss)(p, x, y)
        new = tree_map(lambda w, g: c.add(w, c.mul(g, np.full(w.shape, -lr, np.float32))),
                       p, grads)
        return [value] + _flat(new)
    step = jit(step)
    losses = []
    for _ in range(steps):
        value, *flat = step(*_flat(params), x, y)
        params = _unflat(leaves_like, flat)
        losses.append(float(value))
    return params, losses
    # END BUILD


def _flat(params):
    from .tree import tree_flatten
    return tree_flatten(params)[0]


def _unflat(like, leaves):
    from .tree import tree_flatten, tree_unflatten
    return tree_unflatten(tree_flatten(like)[1], leaves)
