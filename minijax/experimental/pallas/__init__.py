"""minijax.experimental.pallas: write kernels against refs, run them over a grid (interpret
mode). The names are those of jax.experimental.pallas. See chapters/16-pallas.md."""

from minijax.experimental.pallas.blocks import (  # noqa: F401
    BlockDim, Blocked, BoundedSlice, Buffered, CompilerParams, CostEstimate, Element, Indirect,
    RevisitMode, Squeezed, no_block_spec, squeezed,
)
from minijax.experimental.pallas.cost_estimate import estimate_cost  # noqa: F401
from minijax.experimental.pallas.pallas_call import (  # noqa: F401
    ANY, HOST, BlockSpec, GridSpec, MemoryRef, MemorySpace, cdiv, num_programs, pallas_call,
    pallas_call_p, program_id, program_id_p, when,
)
from minijax.experimental.pallas.primitives import (  # noqa: F401
    DeviceIdType, align_to, broadcast_to, debug_print, delay, empty, empty_like, loop,
    multiple_of, next_power_of_2, reciprocal, run_scoped, run_state, semaphore_read,
    semaphore_signal, semaphore_wait, strides_from_shape, with_scoped,
)
from minijax.experimental.pallas.mosaic import pallas_call_registration  # noqa: F401
from minijax.state.types import Slice, ds, dslice  # noqa: F401


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
