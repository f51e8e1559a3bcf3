"""Solution: a float32 matmul from bfloat16 passes, as TPU matrix units compute it (chapter 22).

A TPU multiplies bfloat16 values (8 significant bits) and accumulates in float32. `Precision`
DEFAULT is one pass over bfloat16 roundings of the inputs; HIGH ("bf16_3x") splits each
float32 input into a bfloat16 high part and a bfloat16 remainder and adds the three largest
cross products. Write both with minijax's `lax.dot_general` (which takes
`preferred_element_type`): the tests measure their error against float64 and compare the
results with the same computation in real JAX.
"""

from __future__ import annotations

import numpy as np

import minijax
from minijax import lax

DN = (((1,), (0,)), ((), ()))  # the dimension numbers of a matrix product


def split_bf16(x):
    """(hi, lo): bfloat16 arrays with hi + lo ≈ x to about 16 significant bits; hi is x
    rounded to bfloat16, lo the rounding of what is left."""
    hi = x.astype(minijax.numpy.bfloat16)
    lo = (x - hi.astype(np.float32)).astype(minijax.numpy.bfloat16)
    return hi, lo


def matmul_bf16(a, b, passes: int):
    """a @ b (float32, 2-D) from bfloat16 products accumulated in float32: passes=1 uses the
    rounded inputs only, passes=3 adds the hi·lo and lo·hi cross products. Returns float32."""
    dot = lambda u, v: lax.dot_general(u, v, DN, preferred_element_type=np.float32)
    a_hi, a_lo = split_bf16(a)
    b_hi, b_lo = split_bf16(b)
    if passes == 1:
        return dot(a_hi, b_hi)
    if passes == 3:
        return dot(a_hi, b_hi) + dot(a_hi, b_lo) + dot(a_lo, b_hi)
    raise ValueError(f"matmul_bf16: passes must be 1 or 3, got {passes}")
