"""`jnp.float32`, `jnp.int32`, ...: scalar types that are also array constructors.

NumPy's scalar types make NumPy scalars (and cannot take a tracer); JAX's make 0-d arrays:
`jnp.float32(x)` is `asarray(x, dtype=float32)`, so it works on traced values, while
`jnp.float32` still serves as a dtype (`np.dtype(jnp.float32)`, `x.astype(jnp.float32)`,
`jnp.float32 == np.float32`). Mirrors jax/_src/numpy/scalar_types.py.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from minijax import dtypes
from minijax.numpy.array_constructors import asarray

_PUBLIC_MODULE_NAME = "minijax.numpy"


# JAX: jax/_src/numpy/scalar_types.py _ScalarMeta
class _ScalarMeta(type):
    """The type of `jnp.float32` & co.: hashes and compares equal to the NumPy scalar type."""

    dtype: np.dtype

    @property
    def __numpy_dtype__(cls) -> np.dtype:
        return cls.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other: Any) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other: Any) -> bool:
        return not cls == other

    def __call__(cls, x: Any):
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)


def _make_scalar_type(np_scalar_type: type) -> _ScalarMeta:
    meta = _ScalarMeta(np_scalar_type.__name__, (object,), {"dtype": np.dtype(np_scalar_type)})
    meta.__module__ = _PUBLIC_MODULE_NAME
    meta.__doc__ = (f"A minijax scalar constructor of type {np_scalar_type.__name__}: "
                    "`T(x)` is `asarray(x, dtype=T)`, a 0-d (or shaped) array.")
    return meta


bool_ = _make_scalar_type(np.bool_)
int8 = _make_scalar_type(np.int8)
int16 = _make_scalar_type(np.int16)
int32 = _make_scalar_type(np.int32)
int64 = _make_scalar_type(np.int64)
uint8 = _make_scalar_type(np.uint8)
uint16 = _make_scalar_type(np.uint16)
uint32 = _make_scalar_type(np.uint32)
uint64 = _make_scalar_type(np.uint64)
float16 = _make_scalar_type(np.float16)
float32 = _make_scalar_type(np.float32)
float64 = _make_scalar_type(np.float64)
bfloat16 = _make_scalar_type(dtypes.bfloat16.type)
complex64 = _make_scalar_type(np.complex64)
complex128 = _make_scalar_type(np.complex128)
bool = bool_  # NumPy 2's name, as jnp.bool
# NumPy's C-style aliases: the same objects as the sized types, as in JAX
single, double, float_ = float32, float64, float64
csingle, cdouble, complex_ = complex64, complex128, complex128
int_, uint = int64, uint64

# The narrow floats and integers of ml_dtypes: names for dtypes and constructors of eager
# arrays (`jnp.float8_e5m2(1.3)`, NumPy's impls convert); minijax's abstract evaluation takes
# number and bool dtypes only, so converting to one of these under tracing or jit raises
# convert_element_type's TypeError (JAX lowers them to XLA's f8/f4/i4 types)
float8_e3m4 = _make_scalar_type(ml_dtypes.float8_e3m4)
float8_e4m3 = _make_scalar_type(ml_dtypes.float8_e4m3)
float8_e4m3b11fnuz = _make_scalar_type(ml_dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = _make_scalar_type(ml_dtypes.float8_e4m3fn)
float8_e4m3fnuz = _make_scalar_type(ml_dtypes.float8_e4m3fnuz)
float8_e5m2 = _make_scalar_type(ml_dtypes.float8_e5m2)
float8_e5m2fnuz = _make_scalar_type(ml_dtypes.float8_e5m2fnuz)
float8_e8m0fnu = _make_scalar_type(ml_dtypes.float8_e8m0fnu)
float6_e2m3fn = _make_scalar_type(ml_dtypes.float6_e2m3fn)
float6_e3m2fn = _make_scalar_type(ml_dtypes.float6_e3m2fn)
float4_e2m1fn = _make_scalar_type(ml_dtypes.float4_e2m1fn)
int1, int2, int4 = (_make_scalar_type(t) for t in (ml_dtypes.int1, ml_dtypes.int2, ml_dtypes.int4))
uint1, uint2, uint4 = (_make_scalar_type(t) for t in (ml_dtypes.uint1, ml_dtypes.uint2,
                                                      ml_dtypes.uint4))
