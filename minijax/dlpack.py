"""Arrays in and out through DLPack, the protocol array libraries share buffers with:
`from_dlpack(x)` takes any producer (`__dlpack__`: NumPy, JAX, PyTorch on CPU...), and a minijax
Array is a producer itself (`np.from_dlpack(a)`). Mirrors jax/_src/dlpack.py (re-exported as
jax/dlpack.py) — differs: the buffer goes through NumPy, on the host (minijax runs on CPU).
"""

from __future__ import annotations

import numpy as np

from minijax import dtypes, numpy as jnp
from minijax.api import device_put

# JAX: jax/_src/dlpack.py SUPPORTED_DTYPES
SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128, np.bool_))


# JAX: jax/_src/dlpack.py is_supported_dtype
def is_supported_dtype(dtype) -> bool:
    """Can an array of `dtype` pass through DLPack? Raises TypeError for None (JAX's)."""
    if dtype is None:
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return np.dtype(dtype) in SUPPORTED_DTYPES


# JAX: jax/_src/dlpack.py from_dlpack
def from_dlpack(external_array, device=None, copy: bool | None = None):
    """A minijax Array of the producer's values (its dtype canonicalized, as `jnp.asarray`
    does: float64 becomes float32 without x64), placed on `device` if given (a device or a
    sharding, as `device_put`). Raises TypeError for an object without `__dlpack__`."""
    if not hasattr(external_array, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(external_array).__name__} does not implement "
                        "__dlpack__")
    host = np.from_dlpack(external_array, copy=copy)
    out = jnp.array(host) if copy else jnp.asarray(host)
    return out if device is None else device_put(out, device)
