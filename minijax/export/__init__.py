"""`minijax.export`: export a jitted function, serialize it in jax.export's format, and call
it back, here or in JAX (chapters/31-export.md). Mirrors jax/export.py (re-exports only)."""

from minijax.export._export import (DisabledSafetyCheck, Exported, default_export_platform,
                                    deserialize, export,
                                    maximum_supported_calling_convention_version,
                                    minimum_supported_calling_convention_version,
                                    register_namedtuple_serialization,
                                    register_pytree_node_serialization)
from minijax.export.shape_poly import (InconclusiveDimensionOperation, SymbolicScope,
                                       is_symbolic_dim, symbolic_args_specs, symbolic_shape)

__all__ = ["DisabledSafetyCheck", "Exported", "export", "deserialize",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "default_export_platform",
           "register_pytree_node_serialization", "register_namedtuple_serialization",
           "SymbolicScope", "is_symbolic_dim", "symbolic_shape", "symbolic_args_specs",
           "InconclusiveDimensionOperation"]
