"""Solution: collectives from ppermute, and a transpose rule (chapter 13)."""

from __future__ import annotations

from minijax import lax
from minijax.interpreters import ad
from minijax.lax import parallel


def all_gather_from_ppermute(x, axis_name):
    """`lax.all_gather(x, axis_name, tiled=True)` for x f32[b,...]: f32[n*b,...]."""
    n = lax.axis_size(axis_name)
    j = lax.axis_index(axis_name)
    b = x.shape[0]
    right = [(k, (k + 1) % n) for k in range(n)]  # after s steps j holds block (j - s) mod n
    out = lax.full((n * b, *x.shape[1:]), 0, x.dtype)
    out = lax.dynamic_update_slice_in_dim(out, x, j * b, axis=0)
    block = x
    for s in range(1, n):
        block = lax.ppermute(block, axis_name, right)
        out = lax.dynamic_update_slice_in_dim(out, block, ((j - s) % n) * b, axis=0)
    return out


def psum_scatter_transpose(ct, x, *, scatter_dimension, axis_name, tiled):
    """The cotangent of reduce_scatter's input, from the cotangent `ct` of its output.

    Every device's input contributes to every block of the sum, and block j lands on device
    j; so the cotangent of any device's input is all the blocks' cotangents, in order: an
    all_gather along the scattered dimension."""
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [parallel.all_gather_p.bind(ct, all_gather_dimension=scatter_dimension,
                                       axis_name=axis_name, tiled=tiled)]
