"""Exercise: `scan` as a `while_loop` over dynamic slices (chapters 08 and 09).

XLA has no scan instruction. JAX runs a scan as a while loop whose carry holds a counter `i`,
the scan's carry, and the stacked outputs written so far: each iteration reads `xs[i]` with a
dynamic slice, runs the body, and writes `ys[i]` with a dynamic update slice
(jax/_src/lax/control_flow/loops.py `_scan_impl`; scan's lowering rule there is
`mlir.lower_fun(_scan_impl)`: that function, traced and lowered, is what XLA receives).
Write that lowering with minijax's `lax.while_loop`, `lax.dynamic_index_in_dim` and
`lax.dynamic_update_index_in_dim`.

Here the carry, `xs` and `ys` are single arrays (no pytrees). The output buffer must exist
before the loop starts, so you need the type of `ys[i]` first: `minijax.make_jaxpr` of the body
on the carry and `xs[0]` tells you (its `out_avals`). The tests compare with `jax.lax.scan`,
also reversed, under `jit` and under `jvp` (not `grad`: a `while_loop` has no reverse mode,
because its number of iterations is not known when the program is traced — which is why JAX
keeps `scan` as its own primitive until lowering).
"""

from __future__ import annotations

import numpy as np  # noqa: F401 (for your code)

import minijax  # noqa: F401
from minijax import lax  # noqa: F401


def scan_via_while(f, init, xs, reverse: bool = False):
    """Like `lax.scan(f, init, xs, reverse=reverse)` for array carry, xs and ys:
    `f(carry, x) -> (carry, y)`; returns `(final carry, ys)` with `ys` stacked on axis 0."""
    raise NotImplementedError("scan_via_while")


