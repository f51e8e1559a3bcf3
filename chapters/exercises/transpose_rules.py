"""Exercise: transpose rules (chapter 06).

Reverse mode runs the linear jaxpr of `linearize` backwards. A transpose rule gets the output
cotangent `ct` and the operands, where each operand the program is linear in is an
`UndefinedPrimal` (`ad.is_undefined_primal(x)`; its aval is `x.aval`) and the others are known
values; it returns one cotangent per operand: an array for each undefined one, `None` for each
known one. `ct` may be a symbolic `Zero`: then return `Zero(x.aval)` for the undefined operands.

Write the rules below with `minijax.lax` operations. The tests install them in
`minijax.interpreters.ad.primitive_transposes` in place of minijax's own and compare
`minijax.grad` and `minijax.vjp` with JAX's. JAX's rules: jax/_src/lax/lax.py
(`_mul_transpose`, `_reduce_sum_transpose_rule`, `_broadcast_in_dim_transpose_rule`).
"""

from __future__ import annotations

from minijax import core, lax
from minijax.ad_util import Zero  # noqa: F401
from minijax.interpreters import ad  # noqa: F401


def sum_to_shape(x, aval):
    """`x` summed down to `aval`'s shape (for `mul` by a broadcast scalar)."""
    extra = core.get_aval(x).ndim - aval.ndim
    return lax.reduce_sum(x, tuple(range(extra))) if extra else x


def neg_transpose(ct, x):
    raise NotImplementedError("neg_transpose")


def mul_transpose(ct, x, y):
    """`mul` is linear in one operand at a time; the other one is a known value."""
    raise NotImplementedError("mul_transpose")


def reduce_sum_transpose(ct, x, *, axes, out_sharding=None):
    """The transpose of summing over `axes` puts the cotangent back on every summed position."""
    raise NotImplementedError("reduce_sum_transpose")


def broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions, sharding=None):
    """The transpose of broadcasting sums over the dimensions the broadcast added (assume the
    operand has no size-1 dimensions that were stretched)."""
    raise NotImplementedError("broadcast_in_dim_transpose")


RULES = {"neg": neg_transpose, "mul": mul_transpose, "reduce_sum": reduce_sum_transpose,
         "broadcast_in_dim": broadcast_in_dim_transpose}
