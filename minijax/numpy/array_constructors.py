"""`jnp.array` and `jnp.asarray`: minijax arrays from Python scalars, lists and NumPy arrays.

Mirrors jax/_src/numpy/array_constructors.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minijax import core, dtypes, lax, prng
from minijax.array import Array, array_from_numpy
from minijax.core import Tracer
from minijax.lax import lax as lax_internal


# JAX: jax/_src/numpy/array_constructors.py array
def array(object, dtype=None, copy=True) -> Any:
    """A minijax array from array-like `object` (nested lists may hold tracers).

    Python floats give float32 (with x64 off), ints int32, as in JAX; without `dtype`, a Python
    scalar or a weakly typed array gives a weakly typed result (JAX: `dtypes.is_weakly_typed`).
    Raises TypeError for non-numeric input."""
    weak = dtype is None and (dtypes.is_python_scalar(object) or isinstance(
        object, (Tracer, Array))) and dtypes.dtype_and_weak(object)[1]
    if isinstance(object, (Tracer, Array)):
        out = object
    elif isinstance(object, (list, tuple)) and any(
            isinstance(leaf, (Tracer, Array)) for leaf in _iter_leaves(object)):
        # as JAX: every element converted to the leaves' promoted dtype, given a leading
        # axis, and concatenated (in a tree of concatenates of 16, as JAX forms them)
        if dtype is None:
            dtype = dtypes.result_type(*_iter_leaves(object))
        parts = [lax.expand_dims(array(o, dtype, copy=False), (0,)) for o in object]
        if len({core.get_aval(e).shape for e in parts}) != 1:
            raise ValueError("All input arrays must have the same shape.")
        while len(parts) > 16:
            parts = [lax.concatenate(parts[i:i + 16], 0) for i in range(0, len(parts), 16)]
        out = lax.concatenate(parts, 0)
    else:
        if object is None or isinstance(object, (list, tuple)) and any(
                leaf is None for leaf in _iter_leaves(object)):
            raise ValueError("None is not a valid value for jnp.array")
        if type(object) is int and dtype is None:  # JAX: jax/_src/dtypes.py coerce_to_array
            canon = dtypes.python_scalar_dtype(object)
            if not np.iinfo(canon).min <= object <= np.iinfo(canon).max:
                raise OverflowError(f"Python int {object} too large to convert to {canon}")
        val = np.asarray(object)
        if val.dtype.kind not in "biufc" and val.dtype != dtypes.bfloat16:
            raise TypeError(f"array: unsupported value of dtype {val.dtype} ({object!r})")
        canon = dtypes.canonicalize_dtype(val.dtype if dtype is None else dtype)
        if val.dtype.kind in "iu" and canon.kind in "iu" and canon != val.dtype and \
                isinstance(object, (int, list, tuple)):
            val = np.asarray(object, dtype=canon)  # NumPy's OverflowError for a Python int
            # out of the target's range, as JAX raises it
        # a NumPy array is copied even by asarray, as JAX copies it to the device: the Array
        # must not change when the caller writes into their array afterwards
        copy = copy or isinstance(object, np.ndarray)
        # a scalar made while tracing is a literal of the jaxpr, as in JAX (lax.staged_literals)
        return array_from_numpy(val.astype(canon, copy=copy), weak,
                                literal=val.ndim == 0 and lax_internal.staged_literals())
    if dtype is not None:
        return lax.convert_element_type(out, dtype)
    return lax.convert_element_type(out, core.get_aval(out).dtype, weak)


def _iter_leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _iter_leaves(y)
    else:
        yield x


# JAX: jax/_src/numpy/array_constructors.py asarray
def asarray(a, dtype=None) -> Any:
    """Like `array`, but returns minijax arrays and tracers unchanged when no dtype is given."""
    if isinstance(a, (Tracer, Array, prng.PRNGKeyArray)) and dtype is None:
        return a
    if isinstance(a, prng.PRNGKeyArray):  # JAX: convert_element_type's refusal
        raise ValueError(f"Cannot convert_element_type from {a.dtype.name} to "
                         f"{dtypes.canonicalize_dtype(dtype).name}")
    return array(a, dtype, copy=False)  # (a NumPy array is still copied: see `array`)



# ---------------------------------------------------------------------------------------------
# Arrays from host data: buffers, strings, files, DLPack, functions of the indices
# ---------------------------------------------------------------------------------------------

def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """A 1-D array of the bytes in `buffer` read as `dtype` (NumPy's frombuffer, then
    transferred)."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count: int = -1, *, sep: str):
    """A 1-D array of the numbers in a text `string` separated by `sep`."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args, **kwargs):
    """Not supported, as in JAX: reading a file is a side effect a traced function must not
    have. Raises NotImplementedError; use `asarray(np.fromfile(...))` outside."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be non-pure "
                              "and thus unsafe for use with JIT and other JAX transformations; "
                              "use jnp.asarray(np.fromfile(...)) instead")


def fromiter(*args, **kwargs):
    """Not supported, as in JAX (an iterator is consumed as a side effect). Raises
    NotImplementedError; use `asarray(np.fromiter(...))` outside."""
    raise NotImplementedError("jnp.fromiter() is not implemented because it may be non-pure "
                              "and thus unsafe for use with JIT and other JAX transformations; "
                              "use jnp.asarray(np.fromiter(...)) instead")


def load(file, *args, **kwargs):
    """`np.load`, with an array result made a minijax array (other results as NumPy gives
    them: .npz archives stay lazy NpzFile objects)."""
    out = np.load(file, *args, **kwargs)
    return asarray(out) if isinstance(out, np.ndarray) and out.dtype != object else out


def from_dlpack(x, /, *, device=None, copy=None):
    """An array from an object with `__dlpack__` (a NumPy array, a host tensor of another
    library): read on the host through NumPy's DLPack support, then transferred. Device
    (GPU) tensors raise NumPy's error, as NumPy reads host memory only."""
    return asarray(np.from_dlpack(x))


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """`function(i, j, ...)` evaluated on the index grid of `shape`; it is `vmap`ped once per
    dimension, so it sees scalar indices (as JAX's)."""
    from minijax import api  # not at the top: minijax.api imports minijax.numpy
    shape = tuple(int(d) for d in shape)
    fn = lambda *idx: function(*idx, **kwargs)
    for i in range(len(shape)):
        fn = api.vmap(fn, in_axes=tuple(0 if j == len(shape) - 1 - i else None
                                        for j in range(len(shape))))
    dtype = np.dtype(dtype)
    ranges = [lax.iota(dtypes.canonicalize_dtype(dtype), d) for d in shape]
    return fn(*ranges)
