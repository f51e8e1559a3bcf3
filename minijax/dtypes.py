"""Dtypes, weak types and type promotion, following JAX's promotion lattice.

A Python scalar is *weakly typed*: `f32_array * 2.0` stays float32, because a weak float sits
below every float dtype in the lattice. With x64 off (the default), 64-bit dtypes are narrowed to
32 bits ("canonicalized"). Mirrors jax/_src/dtypes.py (`_type_promotion_lattice`,
`promote_types`, `result_type`, `canonicalize_dtype`). Taught in chapters/02-tracing.md.
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np

from minijax.config import config

bfloat16 = np.dtype(ml_dtypes.bfloat16)
bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# JAX: jax/_src/dtypes.py float0 — the dtype of tangents of integer and boolean values
float0 = np.dtype([("float0", np.void, 0)])


# JAX: jax/_src/dtypes.py short_dtype_name — differs: float0 is named here too
def short_dtype_name(dtype) -> str:
    """The name the jaxpr printer uses: f32, i32, u8, bf16, c64, bool, float0."""
    dtype = np.dtype(dtype)
    if dtype == float0:
        return "float0"
    return (dtype.name.replace("float", "f").replace("uint", "u").replace("int", "i")
            .replace("complex", "c"))


# The three weak "types" of Python scalars, as lattice nodes.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"

# JAX: jax/_src/dtypes.py _type_promotion_lattice — each node lists the nodes just above it.
_LATTICE: dict[Any, tuple] = {
    bool_: (_WEAK_INT,),
    _WEAK_INT: (uint8, int8),
    uint8: (int16, uint16), uint16: (int32, uint32), uint32: (int64, uint64),
    uint64: (_WEAK_FLOAT,),
    int8: (int16,), int16: (int32,), int32: (int64,), int64: (_WEAK_FLOAT,),
    _WEAK_FLOAT: (bfloat16, float16, _WEAK_COMPLEX),
    bfloat16: (float32,), float16: (float32,), float32: (float64, complex64),
    float64: (complex128,),
    _WEAK_COMPLEX: (complex64,), complex64: (complex128,), complex128: (),
}


@functools.cache
def _upper_set(node, x64: bool) -> frozenset:
    ups = _LATTICE[node]
    if node == uint32 and not x64:
        # JAX's x32 lattice: u32 x i32 -> i32, so no 64-bit type forms from 32-bit inputs
        ups = (int32, uint64)
    out = {node}
    for up in ups:
        out |= _upper_set(up, x64)
    return frozenset(out)


def _join(a, b):
    if config.jax_numpy_dtype_promotion == "strict":
        return _join_strict(a, b)
    return _join_in(a, b, x64_enabled())


# JAX: jax/_src/dtypes.py TypePromotionError
class TypePromotionError(ValueError):
    """Raised when two dtypes have no implicit promotion (jax_numpy_dtype_promotion=strict)."""


_WEAK_KIND = {_WEAK_INT: "iub", _WEAK_FLOAT: "f", _WEAK_COMPLEX: "c"}


# JAX: jax/_src/dtypes.py _type_promotion_lattice(strict=True): a weak type promotes to every
# strong dtype of its kind and to the next weak kind; strong dtypes promote to nothing
def _strict_upper_set(node) -> set:
    weak = (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX)
    if node not in weak:
        return {node}
    ups = set(weak[weak.index(node):])
    for kind_node in ups.copy():
        ups |= {n for n in _LATTICE if n not in weak and n != bool_
                and np.dtype(n).kind in _WEAK_KIND[kind_node].replace("b", "")}
    return ups


def _join_strict(a, b):
    common = _strict_upper_set(a) & _strict_upper_set(b)
    for n in common:
        if _strict_upper_set(n) >= common:
            return n
    name = lambda n: f"<class '{ {_WEAK_INT: 'int', _WEAK_FLOAT: 'float'}.get(n, 'complex')}'>" \
        if n in _WEAK_KIND else str(n)
    raise TypePromotionError(
        f"Input dtypes {(name(a), name(b))} have no available implicit dtype promotion path "
        "when jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
        "output type, or set jax_numpy_dtype_promotion=standard.")


@functools.cache
def _join_in(a, b, x64: bool):
    common = _upper_set(a, x64) & _upper_set(b, x64)
    # the least upper bound is the common node whose upper set is all of `common`
    for n in common:
        if _upper_set(n, x64) == common:
            return n
    raise TypeError(f"no type promotion for {a} and {b}")


def x64_enabled() -> bool:
    return bool(config.jax_enable_x64)


_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


# JAX: jax/_src/dtypes.py canonicalize_dtype (also cached on the dtype and the x64 flag)
def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype minijax actually uses for `dtype`: 64-bit types narrow to 32 bits unless x64.
    Raises TypeError for a non-native byte order (`>f4` on this machine), as JAX's
    check_valid_dtype does."""
    try:
        hash(dtype)
    except TypeError:  # unhashable: an array passed as a dtype (JAX refuses), or numpy decides
        if hasattr(dtype, "shape") and not isinstance(dtype, np.ndarray):  # numpy reads .dtype
            raise ValueError("Passing an array as a dtype argument is no longer supported; "
                             "instead of dtype=arr use dtype=arr.dtype.") from None
        return _canonicalize.__wrapped__(dtype, config.jax_enable_x64)
    return _canonicalize(dtype, config.jax_enable_x64)


@functools.lru_cache(maxsize=512)
def _canonicalize(dtype, x64: bool) -> np.dtype:
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(f"Dtype {dtype.str} is not a valid minijax array type: only native byte "
                        "order is supported (convert with x.astype(x.dtype.newbyteorder('=')))")
    return dtype if x64 else _NARROW.get(dtype, dtype)


def default_int_dtype() -> np.dtype:
    return canonicalize_dtype(int64)


def default_float_dtype() -> np.dtype:
    return canonicalize_dtype(float64)


def default_complex_dtype() -> np.dtype:
    return canonicalize_dtype(complex128)


def _weak_node_dtype(node) -> np.dtype:
    return {_WEAK_INT: default_int_dtype(), _WEAK_FLOAT: default_float_dtype(),
            _WEAK_COMPLEX: default_complex_dtype()}[node]


def _node(dtype: np.dtype, weak: bool):
    if not weak:
        return np.dtype(dtype)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return bool_
    return {"i": _WEAK_INT, "u": _WEAK_INT, "f": _WEAK_FLOAT, "c": _WEAK_COMPLEX}[kind]


def is_python_scalar(x) -> bool:
    return type(x) in (bool, int, float, complex)


def python_scalar_dtype(x) -> np.dtype:
    """The dtype JAX gives a Python scalar: bool, default int, default float or default complex."""
    t = type(x)
    if t is bool:
        return bool_
    if t is int:
        return default_int_dtype()
    if t is float:
        return default_float_dtype()
    if t is complex:
        return default_complex_dtype()
    raise TypeError(f"not a Python scalar: {x!r}")


# JAX: jax/_src/dtypes.py dtype
def dtype_and_weak(x) -> tuple[np.dtype, bool]:
    """(canonical dtype, weak_type) of a value: Python scalars are weak (bools are not)."""
    if is_python_scalar(x):
        return python_scalar_dtype(x), type(x) is not bool
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    return canonicalize_dtype(np.result_type(x)), False


_PY_WEAK_NODES = {int: _WEAK_INT, float: _WEAK_FLOAT, complex: _WEAK_COMPLEX}


# JAX: jax/_src/dtypes.py promote_types
def promote_types(a, b) -> np.dtype:
    """The dtype both `a` and `b` promote to. Like JAX's, the result is *not* canonicalized
    (`promote_types(int64, bool)` is int64 even with x64 off), and the Python types `int`,
    `float`, `complex` stand for the weak types (`promote_types(int, int8)` is int8)."""
    # identity, not `in`: np.dtype("int64") == int is True
    node = lambda t: next((n for p, n in _PY_WEAK_NODES.items() if t is p), None) or np.dtype(t)
    out = _join(node(a), node(b))
    return np.dtype({_WEAK_INT: int64, _WEAK_FLOAT: float64,
                     _WEAK_COMPLEX: complex128}.get(out, out))


# JAX: jax/_src/dtypes.py lattice_result_type
def result_type_weak(*dtypes_and_weak: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote (dtype, weak_type) pairs; returns (canonical dtype, weak_type of the result).
    Cached on the pairs, the x64 flag and the promotion mode, as JAX caches its lattice
    joins."""
    return _result_type_weak(dtypes_and_weak, config.jax_enable_x64,
                             config.jax_numpy_dtype_promotion == "strict")


@functools.lru_cache(maxsize=1024)
def _result_type_weak(dtypes_and_weak: tuple, x64: bool, strict: bool
                      ) -> tuple[np.dtype, bool]:
    nodes = [_node(d, w) for d, w in dtypes_and_weak]
    out = nodes[0]
    for n in nodes[1:]:
        out = _join_strict(out, n) if strict else _join_in(out, n, x64)
    if out in (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX):
        return _weak_node_dtype(out), True
    return canonicalize_dtype(out), False


# JAX: jax/_src/dtypes.py result_type
def result_type(*args) -> np.dtype:
    """The dtype of `jnp` arithmetic on `args` (arrays, tracers, dtypes or Python scalars)."""
    pairs = []
    for a in args:
        weak_node = next((n for p, n in _PY_WEAK_NODES.items() if a is p), None)
        if weak_node is not None:  # the Python types int, float, complex are weak, like values
            pairs.append((_weak_node_dtype(weak_node), True))
        elif isinstance(a, (np.dtype, type, str)):
            # canonicalized first, as JAX does: with x64 off, int8 with uint64 is int32
            pairs.append((canonicalize_dtype(a), False))
        else:
            pairs.append(dtype_and_weak(a))
    return result_type_weak(*pairs)[0]


def issubdtype(a, b) -> bool:
    if a == bfloat16 or np.dtype(a) == bfloat16:
        return b in (np.floating, np.inexact, np.number, np.generic, bfloat16)
    return np.issubdtype(a, b)


@functools.lru_cache(maxsize=256)
def is_float(dtype) -> bool:
    return issubdtype(np.dtype(dtype), np.inexact)


def finfo(dtype):
    return ml_dtypes.finfo(dtype) if np.dtype(dtype) == bfloat16 else np.finfo(dtype)


def iinfo(dtype):
    return np.iinfo(dtype)
