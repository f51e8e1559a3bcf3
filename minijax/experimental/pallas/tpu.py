"""minijax.experimental.pallas.tpu: the TPU half of Pallas' names, as in
jax.experimental.pallas.tpu: memory spaces (`VMEM`, `SMEM`, `ANY`/`HBM`), the scalar-prefetch
grid spec, `CompilerParams` (`dimension_semantics`, `vmem_limit_bytes`) and `InterpretParams`
(interpret mode with the TPU's semantics). Kernels are written once for both modules; in
interpret mode a memory space only labels a buffer. See chapters/16-pallas.md, "Pallas on a
TPU"."""

from __future__ import annotations

import dataclasses
import enum
from typing import Sequence

from minijax.experimental.pallas.pallas_call import GridSpec, MemoryRef


# JAX: jax/_src/pallas/mosaic/core.py MemorySpace
class MemorySpace(enum.Enum):
    """Where a TPU buffer lives. VMEM: the vector memory next to the cores (tens of MiB on a
    v5e), where blocks are loaded and computed on; SMEM: the small scalar memory (indices,
    offsets); HBM: the chip's main memory; SEMAPHORE: DMA semaphores. Calling one,
    `VMEM((8, 128), jnp.float32)`, makes a scratch buffer type for `scratch_shapes`."""

    VMEM = "vmem"
    SMEM = "smem"
    HBM = "hbm"
    SEMAPHORE = "semaphore"

    def __call__(self, shape, dtype) -> MemoryRef:
        return MemoryRef(shape, dtype, self)

    def __str__(self) -> str:
        return self.value


VMEM = MemorySpace.VMEM
SMEM = MemorySpace.SMEM
HBM = MemorySpace.HBM
SEMAPHORE = MemorySpace.SEMAPHORE


# JAX: jax/_src/pallas/mosaic/core.py GridDimensionSemantics
class GridDimensionSemantics(enum.Enum):
    """How Mosaic may run one grid axis: PARALLEL (iterations independent: it may split
    them across cores) or ARBITRARY (in order, e.g. a reduction carried in scratch)."""

    PARALLEL = "parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY


# JAX: jax/_src/pallas/mosaic/core.py CompilerParams — differs: the fields kernels here use
@dataclasses.dataclass(frozen=True)
class CompilerParams:
    """Mosaic's options for one pallas_call. `dimension_semantics`: one of "parallel" /
    "arbitrary" (or the enum) per grid axis; `vmem_limit_bytes`: the VMEM budget Mosaic may
    use (None: its default, 16 MiB on a v5e's scoped VMEM). Interpret mode ignores both."""

    dimension_semantics: Sequence[str | GridDimensionSemantics] | None = None
    allow_input_fusion: Sequence[bool] | None = None
    vmem_limit_bytes: int | None = None
    has_side_effects: bool = False

    def __post_init__(self):
        if self.dimension_semantics is not None:
            sems = tuple(s.value if isinstance(s, GridDimensionSemantics) else str(s)
                         for s in self.dimension_semantics)
            for s in sems:
                if s not in ("parallel", "arbitrary"):
                    raise ValueError(f"CompilerParams: dimension_semantics entries must be "
                                     f"'parallel' or 'arbitrary', got {s!r}")
            object.__setattr__(self, "dimension_semantics", sems)


# JAX: jax/_src/pallas/mosaic/interpret/params.py InterpretParams — differs: only the checks
# minijax models
@dataclasses.dataclass(frozen=True)
class InterpretParams:
    """`pallas_call(..., interpret=InterpretParams())`: interpret mode that models the TPU's
    pipeline instead of plain interpret mode's "every block is read and written in place".
    On a TPU an output block is copied back to HBM when the grid moves off it and is never
    read back, so a grid that leaves an output block and comes back to it later loses the
    first visit's writes; this mode refuses such a grid ("Revisited block ...", a
    ValueError), as JAX's does. minijax checks the whole grid's output block indices before
    the kernel runs; index maps that read scalar-prefetch values are checked on concrete
    values only (an eager call), and not under jit, where those values are traced.
    `uninitialized_memory`: "nan" (the default) or "zero", what fresh buffers hold."""

    uninitialized_memory: str = "nan"
    detect_races: bool = False

    def __post_init__(self):
        if self.uninitialized_memory not in ("nan", "zero"):
            raise ValueError("InterpretParams: uninitialized_memory must be 'nan' or 'zero', "
                             f"got {self.uninitialized_memory!r}")


# JAX: jax/_src/pallas/mosaic/core.py PrefetchScalarGridSpec
class PrefetchScalarGridSpec(GridSpec):
    """A GridSpec whose first `num_scalar_prefetch` inputs are prefetched whole (on a TPU,
    into scalar memory): the kernel gets them as its first refs and every index map gets
    them after the grid indices, `index_map(*grid_ids, *prefetched)`."""

    def __init__(self, num_scalar_prefetch: int, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()) -> None:
        super().__init__(grid, in_specs, out_specs, scratch_shapes)
        self.num_scalar_prefetch = int(num_scalar_prefetch)


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
