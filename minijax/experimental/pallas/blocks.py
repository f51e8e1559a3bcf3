"""The small types a `pallas_call` is described with, as in jax/_src/pallas/core.py: the kinds
of block dimension a `BlockSpec` may have (`Blocked`, `Element`, `Squeezed`, `BoundedSlice`,
`Indirect`), its pipeline mode (`Buffered`, `RevisitMode`), `no_block_spec`, the base class
of compiler parameters and a kernel's `CostEstimate`. See chapters/16-pallas.md."""

from __future__ import annotations

import dataclasses
import enum
from typing import Union

import numpy as np


# JAX: jax/_src/pallas/core.py Blocked
@dataclasses.dataclass(frozen=True)
class Blocked:
    """A dimension cut in blocks of `block_size` (what a plain int means): the index map
    returns the *block* index, the block starts at `index * block_size`."""

    block_size: int

    def __str__(self) -> str:
        return f"Blocked({self.block_size})"


# JAX: jax/_src/pallas/core.py Element
@dataclasses.dataclass(frozen=True)
class Element:
    """A dimension of `block_size` elements whose index map returns the *element* offset of
    the block (any offset, not a multiple of the size). `padding=(low, high)`: the array is
    first padded by that many elements at each end (with interpret mode's uninitialised
    value), and offsets count in the padded array."""

    block_size: int
    padding: tuple[int, int] = (0, 0)

    def __str__(self) -> str:
        if self.padding == (0, 0):
            return f"Element({self.block_size})"
        return f"Element({self.block_size}, padding={self.padding})"


# JAX: jax/_src/pallas/core.py Squeezed
@dataclasses.dataclass(frozen=True)
class Squeezed:
    """A size-1 block dimension left out of the kernel's ref (what None means)."""


squeezed = Squeezed()


# JAX: jax/_src/pallas/core.py BoundedSlice
@dataclasses.dataclass(frozen=True)
class BoundedSlice:
    """A dimension whose index map returns a `pl.ds(start, size)` with `size <= block_size`.
    Only compiled kernels take it: interpret mode refuses it, as JAX's does."""

    block_size: int

    def __repr__(self) -> str:
        return f"BoundedSlice({self.block_size})"


# JAX: jax/_src/pallas/core.py Indirect
@dataclasses.dataclass(frozen=True)
class Indirect:
    """A dimension indexed by an array of indices (a gather for inputs, a scatter for
    outputs). Only compiled kernels take it: interpret mode refuses it, as JAX's does."""

    block_size: int

    def __repr__(self) -> str:
        return f"Indirect({self.block_size})"


BlockDim = Union[Element, Squeezed, Blocked, BoundedSlice, Indirect]


def canonical_block_dim(kernel_name: str, origin: str, dim):
    """`dim` as one of the BlockDim classes (None: Squeezed, an int: Blocked). Raises
    ValueError for anything else, or a size that is not a positive int."""
    if dim is None:
        return squeezed
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        dim = Blocked(int(dim))
    if isinstance(dim, Squeezed):
        return dim
    if not isinstance(dim, (Blocked, Element, BoundedSlice, Indirect)):
        raise ValueError(f"pallas_call of {kernel_name}: unsupported block dimension {dim!r} "
                         f"for {origin}. Allowed: pl.Squeezed, pl.Blocked, pl.Element, "
                         "pl.BoundedSlice, int, None")
    if not isinstance(dim.block_size, (int, np.integer)) or dim.block_size <= 0:
        raise ValueError(f"pallas_call of {kernel_name}: block dimension {dim!r} for {origin}: "
                         "the block size must be a positive int")
    if isinstance(dim, Element) and (len(dim.padding) != 2 or min(dim.padding) < 0):
        raise ValueError(f"pallas_call of {kernel_name}: {dim} for {origin}: padding must be "
                         "a pair of non-negative ints")
    return dim


def block_dim_size(dim) -> int:
    return 1 if isinstance(dim, Squeezed) else int(dim.block_size)


# JAX: jax/_src/pallas/core.py NoBlockSpec
class NoBlockSpec:
    """`in_specs=no_block_spec` (or one entry of it): no blocking, the whole array, as if no
    spec were given."""

    def __repr__(self) -> str:
        return "no_block_spec"


no_block_spec = NoBlockSpec()


# JAX: jax/_src/pallas/core.py RevisitMode
@enum.unique
class RevisitMode(enum.Enum):
    """May an output block be visited again later in the grid? IMMEDIATE (the default): only
    on consecutive iterations; ANY: at any iteration (the pipeline reloads it)."""

    IMMEDIATE = "immediate"
    ANY = "any"


# JAX: jax/_src/pallas/core.py Buffered
@dataclasses.dataclass(frozen=True)
class Buffered:
    """`BlockSpec(..., pipeline_mode=Buffered(n))`: how many buffers the TPU pipeline keeps for
    the operand (2, double buffering, by default). Values are unchanged by it: interpret mode
    (JAX's too, `InterpretParams` included) ignores the pipeline mode. Raises ValueError for
    a `buffer_count` below 1."""

    buffer_count: int
    use_lookahead: bool = False
    revisit: RevisitMode | None = None

    def __post_init__(self):
        if not isinstance(self.buffer_count, (int, np.integer)) or self.buffer_count < 1:
            raise ValueError(f"Buffered: buffer_count must be an int >= 1, got "
                             f"{self.buffer_count!r}")
        if self.revisit is not None and not isinstance(self.revisit, RevisitMode):
            raise TypeError(f"Buffered: revisit must be a pl.RevisitMode, got {self.revisit!r}")


# JAX: jax/_src/pallas/core.py CompilerParams — differs: a base class, not a Protocol
class CompilerParams:
    """The base class of each backend's compiler parameters (`pltpu.CompilerParams`);
    `pallas_call(compiler_params=...)` takes an instance of a subclass."""


# JAX: jax/_src/pallas/core.py CostEstimate
@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """`pallas_call(..., cost_estimate=CostEstimate(flops, transcendentals, bytes_accessed))`:
    what XLA should assume the kernel costs when it schedules around it (it cannot see inside).
    Every field must be a Python int (ValueError otherwise). It travels in the TPU custom
    call's backend config; interpret mode ignores it."""

    flops: int
    transcendentals: int
    bytes_accessed: int
    remote_bytes_transferred: int = 0

    def __post_init__(self):
        for k, v in dataclasses.asdict(self).items():
            if not isinstance(v, int):
                raise ValueError(f"All fields in CostEstimate must be ints. {k} is not an int: "
                                 f"{type(v)}({v})")

    def to_json(self) -> bytes:
        return (f'{{"flops": {self.flops}, "transcendentals": {self.transcendentals}, '
                f'"bytes_accessed": {self.bytes_accessed}, '
                f'"remote_bytes_transferred": {self.remote_bytes_transferred}}}').encode("ascii")
