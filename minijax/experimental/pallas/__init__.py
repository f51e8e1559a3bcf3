"""minijax.experimental.pallas: write kernels against refs, run them over a grid (interpret
mode). The names are those of jax.experimental.pallas. See chapters/16-pallas.md."""

from minijax.experimental.pallas.pallas_call import (  # noqa: F401
    ANY, BlockSpec, GridSpec, MemoryRef, MemorySpace, cdiv, num_programs, pallas_call,
    pallas_call_p, program_id, program_id_p, when,
)
from minijax.experimental.pallas.mosaic import pallas_call_registration  # noqa: F401
from minijax.state.types import ds, dslice  # noqa: F401


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
