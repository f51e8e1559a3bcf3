"""Rung 10: a `pallas_call` in interpret mode: a kernel runs once per point of a grid on
blocks of its operands, read and written through refs (minijax/experimental/pallas/;
jax/_src/pallas/pallas_call.py, whose interpret mode does the same with a loop)."""

from __future__ import annotations

import itertools

import numpy as np


class BlockSpec:
    """The block of an operand a grid point sees: `index_map(*grid point)` gives the block's
    index along each axis; the block starts at index * block_shape."""

    def __init__(self, block_shape, index_map):
        self.block_shape, self.index_map = tuple(block_shape), index_map

    def window(self, point):
        starts = [i * n for i, n in zip(self.index_map(*point), self.block_shape)]
        return tuple(slice(s, s + n) for s, n in zip(starts, self.block_shape))


class Ref:
    """A mutable view of one block: `ref[...]` reads a copy, `ref[...] = v` writes it back."""

    def __init__(self, array, window):
        self.array, self.window = array, window

    def __getitem__(self, idx):
        # BUILD rung 10: read the block (then index inside it)
        return np.array(self.array[self.window][idx])
        # END BUILD

    def __setitem__(self, idx, value):
        # BUILD rung 10: write into the block, which is a view of the output
        self.array[self.window][idx] = np.asarray(value)
        # END BUILD


_program_ids: list[tuple] = []


def program_id(axis: int) -> int:
    """This grid point's index along `axis` (only inside a kernel)."""
    if not _program_ids:
        raise RuntimeError("program_id outside a pallas_call kernel")
    return _program_ids[-1][axis]


def pallas_call(kernel, out_shape, *, grid, in_specs, out_specs):
    """`pallas_call(kernel, (shape, dtype), grid=..., in_specs=[...], out_specs=...)(*xs)`:
    a zero-filled output, then `kernel(*in_refs, out_ref)` at every grid point in row-major
    order. A point's refs are the blocks its specs select."""
    def run(*xs):
        xs = [np.asarray(x) for x in xs]
        out = np.zeros(*out_shape)
        # BUILD rung 10: loop over the grid, make each point's refs, call the kernel
        for point in itertools.product(*map(range, grid)):
            refs = [Ref(x, spec.window(point)) for x, spec in zip(xs, in_specs)]
            _program_ids.append(point)
            try:
                kernel(*refs, Ref(out, out_specs.window(point)))
            finally:
                _program_ids.pop()
        # END BUILD
        return out
    return run
