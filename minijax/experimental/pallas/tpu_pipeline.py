"""`emit_pipeline`: a grid loop inside a kernel that copies blocks of HBM refs into VMEM
buffers, runs a body on them, and copies output blocks back (jax.experimental.pallas.tpu's
`emit_pipeline`, `BufferedRef`, `BufferType`). On a TPU the copies of the next step overlap
the body of this one; in interpret mode they run in order, which computes the same values.
See chapters/16-pallas.md, "Pallas on a TPU"."""

from __future__ import annotations

import dataclasses
import enum
import itertools

import numpy as np

from minijax import core, lax
from minijax.experimental.pallas.pallas_call import BlockSpec, MemoryRef
from minijax.experimental.pallas.primitives import run_scoped
from minijax.state.types import Slice
from minijax.tree_util import tree_flatten


# JAX: jax/_src/pallas/mosaic/pipeline.py BufferType
class BufferType(enum.Enum):
    """What a pipeline does with a buffer: copies blocks in (INPUT), out (OUTPUT), both
    (INPUT_OUTPUT), or neither (MANUAL: the body copies)."""

    INPUT = 1
    OUTPUT = 2
    INPUT_OUTPUT = 3
    MANUAL = 4

    @property
    def is_input(self) -> bool:
        return self in (BufferType.INPUT, BufferType.INPUT_OUTPUT)

    @property
    def is_output(self) -> bool:
        return self in (BufferType.OUTPUT, BufferType.INPUT_OUTPUT)


# JAX: jax/_src/pallas/mosaic/pipeline.py BufferedRefBase
class BufferedRefBase:
    """A pipeline's view of one operand: its block spec and buffer type."""

    block_spec: BlockSpec
    buffer_type: BufferType

    @property
    def is_input(self) -> bool:
        return self.buffer_type.is_input

    @property
    def is_output(self) -> bool:
        return self.buffer_type.is_output


# JAX: jax/_src/pallas/mosaic/pipeline.py BufferedRef — differs: one VMEM buffer per operand
# (interpret mode does not overlap copies, so a second would only hold the same block)
@dataclasses.dataclass(frozen=True)
class BufferedRef(BufferedRefBase):
    """One operand of a pipeline: `block_spec`, `dtype`, `buffer_type`, and the VMEM scratch
    type of its block buffer (`buffer_type` MANUAL: none)."""

    block_spec: BlockSpec
    dtype: np.dtype
    buffer_type: BufferType
    block_shape: tuple

    @classmethod
    def create(cls, block_spec: BlockSpec, dtype, buffer_type: BufferType,
               buffer_count: int = 2) -> BufferedRef:
        """The BufferedRef of an operand of `dtype` with blocks by `block_spec`."""
        del buffer_count
        shape = tuple(1 if d is None else d for d in block_spec.block_shape)
        return cls(block_spec, np.dtype(dtype), buffer_type, shape)

    @classmethod
    def input(cls, block_spec, dtype, buffer_count: int = 2) -> BufferedRef:
        return cls.create(block_spec, dtype, BufferType.INPUT, buffer_count)

    @classmethod
    def output(cls, block_spec, dtype, buffer_count: int = 2) -> BufferedRef:
        return cls.create(block_spec, dtype, BufferType.OUTPUT, buffer_count)

    @property
    def buffer_shape(self) -> MemoryRef:
        """The scratch type of the block buffer (VMEM)."""
        return MemoryRef(self.block_shape, self.dtype, "vmem")


def _block_index(spec: BlockSpec, ids) -> tuple:
    # a ref index for the block at grid point `ids`: a slice per blocked dimension, the
    # index itself for a squeezed (None) one
    idx = spec.index_map(*ids)
    idx = idx if isinstance(idx, tuple) else (idx,)
    if len(idx) != len(spec.block_shape):
        raise ValueError(f"emit_pipeline: an index map returned {len(idx)} indices for a "
                         f"block of rank {len(spec.block_shape)}")
    return tuple(i if d is None else Slice(i * d, d) for i, d in zip(idx, spec.block_shape))


def _unravel(k, grid):
    ids = []
    for g in reversed(grid):
        ids.append(k % g)
        k = k // g
    return ids[::-1]


def _run(body, grid, in_specs, out_specs, refs, buffers):
    in_refs, out_refs = refs[:len(in_specs)], refs[len(in_specs):]
    kinds = [BufferType.INPUT] * len(in_specs) + [BufferType.OUTPUT] * len(out_specs)
    specs = list(in_specs) + list(out_specs)

    def step(k, carry):
        ids = _unravel(k, grid)
        blocks = [_block_index(s, ids) for s in specs]
        for ref, buf, kind, blk in zip([*in_refs, *out_refs], buffers, kinds, blocks):
            if kind.is_input:
                buf[...] = ref[blk].reshape(buf.shape)
        body(*buffers[:len(in_specs)], *buffers[len(in_specs):])
        for ref, buf, kind, blk in zip([*in_refs, *out_refs], buffers, kinds, blocks):
            if kind.is_output:
                ref[blk] = buf[...].reshape(ref[blk].shape)
        return carry
    total = int(np.prod(grid, dtype=np.int64))
    lax.fori_loop(0, total, step, 0)


def _check_grid(grid) -> tuple:
    grid = tuple(grid)
    if any(isinstance(g, (int, np.integer)) and g <= 0 for g in grid):
        raise ValueError(f"All elements in the grid must be strictly positive, but got "
                         f"grid={grid}")
    return grid


# JAX: jax/_src/pallas/mosaic/pipeline.py emit_pipeline — differs: copies and body in order,
# one buffer per operand; `tiling`, `core_axis`, `dimension_semantics` only accepted
def emit_pipeline(body, *, grid, in_specs=(), out_specs=(), tiling=None, core_axis=None,
                  core_axis_name=None, dimension_semantics=None, trace_scopes: bool = True,
                  no_pipelining: bool = False):
    """`pipeline = emit_pipeline(body, grid=..., in_specs=..., out_specs=...)`, then
    `pipeline(*in_refs, *out_refs)` inside a kernel: for every point of `grid` (row-major),
    the block of each input ref chosen by its BlockSpec's index map is copied into a VMEM
    buffer, `body(*in_blocks, *out_blocks)` runs, and the output buffers are copied back.
    ValueError for a grid entry that is not positive."""
    del tiling, core_axis, core_axis_name, dimension_semantics, trace_scopes, no_pipelining
    grid = _check_grid(grid)
    in_specs, out_specs = _as_list(in_specs), _as_list(out_specs)

    def pipeline(*refs, allocations=None, scratches=None, first_cycle=None, last_cycle=None,
                 init_accumulators=None, prefetch=None, postyeet=None, schedule=None):
        flat, _ = tree_flatten(refs)
        if len(flat) != len(in_specs) + len(out_specs):
            raise ValueError(f"emit_pipeline: {len(in_specs)} inputs and {len(out_specs)} "
                             f"outputs expected, got {len(flat)} refs")
        if allocations is None:
            allocations = [BufferedRef.create(s, core.get_aval(r).dtype, t) for s, r, t in zip(
                in_specs + out_specs, flat, itertools.chain(
                    [BufferType.INPUT] * len(in_specs), [BufferType.OUTPUT] * len(out_specs)))]
        shapes = [a.buffer_shape for a in tree_flatten(allocations)[0]]
        run_scoped(lambda *bufs: _run(body, grid, in_specs, out_specs, flat, list(bufs)),
                   *shapes)
    return pipeline


def _as_list(specs) -> list:
    leaves, _ = tree_flatten(specs, is_leaf=lambda s: isinstance(s, BlockSpec))
    return list(leaves)


# JAX: jax/_src/pallas/mosaic/pipeline.py emit_pipeline_with_allocations
def emit_pipeline_with_allocations(body, *, grid, in_specs=(), out_specs=(),
                                   should_accumulate_out=False):
    """`(pipeline, make_allocations)`: `make_allocations(*refs)` gives the operands'
    `BufferedRef`s (their buffer types say which to allocate), and `pipeline(*refs,
    allocations=...)` runs as `emit_pipeline`'s pipeline with them."""
    del should_accumulate_out
    pipeline = emit_pipeline(body, grid=grid, in_specs=in_specs, out_specs=out_specs)
    ins, outs = _as_list(in_specs), _as_list(out_specs)

    def make_allocations(*refs):
        flat, tree = tree_flatten(refs)
        kinds = [BufferType.INPUT] * len(ins) + [BufferType.OUTPUT] * len(outs)
        return [BufferedRef.create(s, core.get_aval(r).dtype, k)
                for s, r, k in zip(ins + outs, flat, kinds)]
    return pipeline, make_allocations


