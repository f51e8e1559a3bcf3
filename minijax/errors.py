"""`minijax.errors`: the tracer errors, under the same module name as `jax.errors`.

Defined in minijax/core.py; explained in chapters/02-tracing.md.
"""

from minijax.core import (  # noqa: F401
    ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
    TracerBoolConversionError, TracerIntegerConversionError, UnexpectedTracerError,
)
