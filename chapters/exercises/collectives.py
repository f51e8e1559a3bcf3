"""Exercise: collectives from ppermute, and a transpose rule (chapter 13).

1. `all_gather_from_ppermute(x, axis_name)`: inside `shard_map`, return what
   `lax.all_gather(x, axis_name, tiled=True)` returns (every device's block, concatenated
   along axis 0 in device order), using only `lax.ppermute`, `lax.axis_index`,
   `lax.axis_size` and local operations. Pass the blocks round a ring: after s steps device j
   holds the block of device (j - s) mod n (or (j + s), your choice), and writes it at its
   place with `lax.dynamic_update_slice_in_dim`.

2. `psum_scatter_transpose(ct, x, *, scatter_dimension, axis_name, tiled)`: the transpose rule
   of `reduce_scatter_p` (what `psum_scatter` binds). Device j's output is block j of the sum
   over devices; which linear map takes a cotangent of that block back to every device's
   whole input? Express it with one collective from `minijax.lax.parallel` (bind the
   primitive, as the other transpose rules do). Return a list with one cotangent.

The tests run 1. inside `minijax.shard_map` and compare with `jax.lax.all_gather` inside
`jax.shard_map`; for 2. they install the rule in `ad.primitive_transposes` and compare
`minijax.grad` through `psum_scatter` with `jax.grad`. JAX: jax/_src/lax/parallel.py
(`_all_gather_transpose_rule`, `_reduce_scatter_transpose_rule`).
"""

from __future__ import annotations

from minijax import lax  # noqa: F401 (for your code)
from minijax.interpreters import ad  # noqa: F401 (ad.Zero: a symbolic zero cotangent)
from minijax.lax import parallel  # noqa: F401 (the primitives, e.g. parallel.all_gather_p)


def all_gather_from_ppermute(x, axis_name):
    """`lax.all_gather(x, axis_name, tiled=True)` for x f32[b,...]: f32[n*b,...]."""
    raise NotImplementedError("all_gather_from_ppermute")


def psum_scatter_transpose(ct, x, *, scatter_dimension, axis_name, tiled):
    """The cotangent of reduce_scatter's input, from the cotangent `ct` of its output."""
    raise NotImplementedError("psum_scatter_transpose")
