"""Solution: a remat policy that offloads only the big matmul results (chapter 24).

A `checkpoint` policy is called once per equation of the checkpointed function, as
`policy(prim, *input_avals, **params)`, and answers for the equation's outputs: False
(recompute them in the backward pass), True (save them on the device), or
`Offloadable(src, dst)` (save them in memory `dst`, e.g. "pinned_host", and bring them back to
`src` for the backward pass). Offloading only large residuals keeps the many small transfers
off the bus. The tests count the residuals each module saves and offloads, and compare the
gradients with real JAX's.
"""

from __future__ import annotations

import math

from minijax.ad_checkpoint import Offloadable


def dot_output_shape(lhs_shape, rhs_shape, dimension_numbers) -> tuple:
    """The shape of `dot_general`'s result: batch dims, then lhs free dims, then rhs free."""
    (lc, rc), (lb, rb) = dimension_numbers
    free_l = [n for i, n in enumerate(lhs_shape) if i not in lc and i not in lb]
    free_r = [n for i, n in enumerate(rhs_shape) if i not in rc and i not in rb]
    return tuple([lhs_shape[i] for i in lb] + free_l + free_r)


def offload_big_dots(min_size: int, offloadable=Offloadable):
    """A policy offloading (`offloadable("device", "pinned_host")`) each `dot_general` result
    with at least `min_size` elements and recomputing everything else. `offloadable` is the
    class to answer with (minijax's by default; pass `jax.ad_checkpoint.Offloadable` to use
    the policy in JAX)."""
    def policy(prim, *avals, **params):
        if prim.name != "dot_general":
            return False
        shape = dot_output_shape(avals[0].shape, avals[1].shape, params["dimension_numbers"])
        if math.prod(shape) >= min_size:
            return offloadable("device", "pinned_host")
        return False
    return policy
