"""`minijax.Array`: a concrete array, held as a numpy array (eager results) or as an XLA device
buffer (results of `jit`), converted between the two only when needed.

Chained jitted calls pass device buffers along without a host round-trip; `np.asarray(x)` or an
eager operation fetches the value to the host once and caches it. Mirrors jax/_src/array.py
(ArrayImpl). Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import numpy as np

from minijax import core

_BIG = 16 << 20  # bytes: above this, moving a host array to the device frees it at once


# JAX: jax/_src/array.py ArrayImpl — differs: one device only; numpy-backed when eager
class Array:
    """A concrete value with an aval. Attributes: `shape`, `dtype` (numpy dtype), `ndim`, `size`,
    `weak_type`. Operators and methods (`+`, `@`, `.sum()`, indexing...) are those of
    `minijax.numpy` (attached by minijax/numpy/array_methods.py)."""

    __slots__ = ("aval", "_npy", "_buf", "_deleted", "_committed", "__weakref__")
    __array_priority__ = 100

    def __init__(self, aval: core.ShapedArray, npy: np.ndarray | None = None, buf=None,
                 committed: bool = False) -> None:
        self.aval = aval
        self._npy = npy
        self._buf = buf
        self._deleted = False
        self._committed = committed

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    # JAX: jax/_src/array.py ArrayImpl.committed — differs: one device, so only the flag remains
    @property
    def committed(self) -> bool:
        """Whether the user fixed this array's device (`device_put(x, device)`), or it was
        computed from such an array. JAX places a computation on the devices of its committed
        arguments; uncommitted arrays (eager results, `device_put(x)`) may be moved freely."""
        return self._committed

    def devices(self) -> set:
        """The set of devices holding this array: minijax's one device."""
        from minijax import compiler
        return {compiler.default_device()}

    def _check_alive(self) -> None:
        if self._deleted:
            raise RuntimeError(f"Array has been deleted (donated to a jitted computation) "
                               f"with aval {self.aval.str_short()}")

    def _value(self) -> np.ndarray:
        """The value as numpy, fetched from the device (and cached: on CPU a view of the
        device buffer) if needed."""
        self._check_alive()
        if self._npy is None:
            self._npy = np.asarray(self._buf)
            if self._npy.dtype != self.aval.dtype:
                self._npy = self._npy.astype(self.aval.dtype)
        return self._npy

    def device_buffer(self):
        """The value as an XLA device buffer, transferred if needed.

        The value then lives in one place: the host array is dropped (JAX's `device_put`
        likewise aliases aligned host memory instead of copying it). On CPU, `np.asarray` of
        the buffer, which eager operations use afterwards, is a view of it, not a copy."""
        self._check_alive()
        if self._buf is None:
            from minijax import compiler
            npy, self._npy = self._npy, None
            self._buf = compiler.device_put(npy)
            if npy.nbytes >= _BIG:
                compiler.release_host_copy(self._buf)  # the host copy is freed now, not later
        return self._buf

    def delete(self) -> None:
        self._deleted = True
        self._npy = self._buf = None

    def is_deleted(self) -> bool:
        return self._deleted

    # JAX: jax/_src/array.py ArrayImpl.block_until_ready
    def block_until_ready(self) -> "Array":
        """Wait until the value has been computed; returns self."""
        buf = self._buf
        if buf is not None:
            buf.block_until_ready()
        elif self._deleted:
            self._check_alive()  # raises
        return self

    def __array__(self, dtype=None, copy=None):
        v = self._value()
        return v if dtype is None else v.astype(dtype, copy=False)

    def item(self):
        return self._value().item()

    def tolist(self):
        return self._value().tolist()

    def __bool__(self):
        return bool(self._value())

    def __int__(self):
        return int(self._value())

    def __float__(self):
        return float(self._value())

    def __complex__(self):
        return complex(self._value())

    def __index__(self):
        return int(self._value().__index__())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __format__(self, spec):
        return format(self._value().item(), spec) if self.ndim == 0 else str(self)

    __hash__ = None

    def __repr__(self) -> str:
        if self._deleted:
            return f"Array(<deleted>, {self.aval.str_short()})"
        body = np.array2string(self._value(), separator=", ", prefix="Array(")
        extra = f", dtype={self.dtype.name}"
        if self.weak_type:
            extra += ", weak_type=True"
        return f"Array({body}{extra})"

    def __str__(self) -> str:
        return str(self._value())


def array_from_numpy(val: np.ndarray, weak_type: bool = False) -> Array:
    """Wrap a numpy array (not copied) as an uncommitted Array."""
    return Array(core.ShapedArray(val.shape, val.dtype, weak_type), npy=val)


core.pytype_aval_mappings[Array] = lambda x: x.aval
