"""Type annotations for code that takes arrays and dtypes: `ArrayLike`, `DTypeLike`.
Mirrors jax/_src/typing.py (re-exported as jax/typing.py).
"""

from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from minijax.array import Array
from minijax.core import Tracer


# JAX: jax/_src/typing.py SupportsDType
class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


# JAX: jax/_src/basearray.py ArrayLike — a minijax Array or tracer, or anything `jnp.asarray`
# takes as one value without a list: NumPy arrays and scalars, Python numbers
ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]

# JAX: jax/_src/typing.py DTypeLike — a dtype name, a scalar type, a dtype or a value with one
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
