"""`minijax.errors`: the tracer errors, under the same module name as `jax.errors`, and the
runtime error of compiled programs (`JaxRuntimeError`, jaxlib's class, imported on first use).

The tracer errors are defined in minijax/core.py; explained in chapters/02-tracing.md.
"""

import numpy as np

from minijax import xla_bridge
from minijax.core import (  # noqa: F401
    ConcretizationTypeError,
    JaxprTypeError,
    NonConcreteBooleanIndexError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)


def __getattr__(name: str):
    # JAX: jax/errors.py JaxRuntimeError — jaxlib's class, what XLA's failures raise
    if name == "JaxRuntimeError":
        # on first use: `import minijax` needs no jaxlib until an error is made
        return xla_bridge.runtime_error_type()
    raise AttributeError(f"module 'minijax.errors' has no attribute {name!r}")


def resource_exhausted(e: MemoryError) -> Exception:
    """NumPy's MemoryError `e` as the error XLA raises for an allocation that cannot fit."""
    JaxRuntimeError = __getattr__("JaxRuntimeError")
    shape, dtype = getattr(e, "shape", None), getattr(e, "dtype", None)
    what = "" if shape is None else f" {int(np.prod(shape, dtype=object)) * dtype.itemsize} bytes"
    return JaxRuntimeError(f"RESOURCE_EXHAUSTED: Out of memory allocating{what}.")
