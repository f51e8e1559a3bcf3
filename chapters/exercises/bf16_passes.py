"""Exercise: a float32 matmul from bfloat16 passes, as TPU matrix units compute it (chapter 22).

A TPU multiplies bfloat16 values (8 significant bits) and accumulates in float32. `Precision`
DEFAULT is one pass over bfloat16 roundings of the inputs; HIGH ("bf16_3x") splits each
float32 input into a bfloat16 high part and a bfloat16 remainder and adds the three largest
cross products. Write both with minijax's `lax.dot_general` (which takes
`preferred_element_type`): the tests measure their error against float64 and compare the
results with the same computation in real JAX.
"""

from __future__ import annotations

import numpy as np  # noqa: F401 (for your code)

import minijax  # noqa: F401 (for your code)
from minijax import lax  # noqa: F401 (for your code)

DN = (((1,), (0,)), ((), ()))  # the dimension numbers of a matrix product


def split_bf16(x):
    """(hi, lo): bfloat16 arrays with hi + lo ≈ x to about 16 significant bits; hi is x
    rounded to bfloat16, lo the rounding of what is left."""
    raise NotImplementedError


def matmul_bf16(a, b, passes: int):
    """a @ b (float32, 2-D) from bfloat16 products accumulated in float32: passes=1 uses the
    rounded inputs only, passes=3 adds the hi·lo and lo·hi cross products. Returns float32."""
    raise NotImplementedError
