"""Reference solution: the dispatch and combine tensors of a mixture-of-experts layer, top-k
routing with a capacity (chapter 21)."""

from __future__ import annotations

import numpy as np


def dispatch_tensors(J, gates, experts, n_experts: int, capacity: int):
    """gates: f32[G,S,k], experts: int32[G,S,k] (token s's k choices, distinct) ->
    (combine f32[G,S,E,C], dispatch f32[G,S,E,C], dropped int32[])."""
    jnp = J.numpy
    k = experts.shape[-1]
    combine = dispatch = jnp.zeros(experts.shape[:2] + (n_experts, capacity), np.float32)
    dropped = jnp.zeros((), np.int32)
    filled = jnp.zeros((experts.shape[0], 1, n_experts), np.int32)  # slots taken, per expert
    for j in range(k):  # all first choices, then all second choices, ...
        chose = J.nn.one_hot(experts[..., j], n_experts, dtype=np.int32)   # [G,S,E]
        pos = (jnp.cumsum(chose, axis=1) - 1 + filled) * chose             # the token's slot
        keep = chose * (pos < capacity)
        dropped = dropped + jnp.sum(chose - keep)
        filled = filled + jnp.sum(chose, axis=1, keepdims=True)
        slot = J.nn.one_hot(pos, capacity, dtype=np.float32) * keep[..., None]  # [G,S,E,C]
        dispatch = dispatch + slot
        combine = combine + gates[..., j, None, None] * slot
    return combine, dispatch, dropped


def to_expert_slots(J, dispatch, h):
    """dispatch: f32[G,S,E,C], h: f32[G,S,d] -> f32[E,G,C,d]: each slot holds its token."""
    return J.numpy.einsum("gsec,gsd->egcd", dispatch, h)


def from_expert_slots(J, combine, y):
    """combine: f32[G,S,E,C], y: f32[E,G,C,d] -> f32[G,S,d]: each token's kept experts'
    outputs, weighted by their gates."""
    return J.numpy.einsum("gsec,egcd->gsd", combine, y)
