"""`minijax.Array`: a concrete array, held as a numpy array (eager results) or as an XLA device
buffer (results of `jit`), converted between the two only when needed.

Chained jitted calls pass device buffers along without a host round-trip; `np.asarray(x)` or an
eager operation fetches the value to the host once and caches it. Mirrors jax/_src/array.py
(ArrayImpl). Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import numpy as np

from minijax import core
from minijax.config import config
from minijax.named_sharding import NamedSharding
from minijax.sharding_impls import SingleDeviceSharding, aval_sharding
from minijax.xla_bridge import default_device

# Set once an Array with a sharding exists: from then on jit's dispatch cache keys include the
# arguments' shardings (before, every Array is on the default device and the avals suffice).
sharded_arrays_made = False

_BIG = 16 << 20  # bytes: above this, moving a host array to the device frees it at once


# JAX: jax/_src/array.py ArrayImpl._value — differs: locked on the way out, not from the start
def read_only(v: np.ndarray) -> np.ndarray:
    """A read-only view (same shape, dtype) of an Array's host value `v` for code outside minijax
    (`__array__`, callbacks); `v` is locked too, so neither the view's flags nor its `.base` let
    the caller change the Array: a write raises NumPy's ValueError ("...is read-only")."""
    v.flags.writeable = False
    view = v.view()
    view.flags.writeable = False
    return view


# JAX: jax/_src/array.py ArrayImpl — differs: numpy-backed when eager; the sharding is a
# minijax object kept beside the buffer (the aval carries its Explicit part, as in JAX)
class Array:
    """A concrete value with an aval. Attributes: `shape`, `dtype` (numpy dtype), `ndim`, `size`,
    `weak_type`, `sharding`. Operators and methods (`+`, `@`, `.sum()`, indexing...) are those
    of `minijax.numpy` (attached by minijax/numpy/array_methods.py).

    An Array placed with a `NamedSharding` (`device_put(x, sharding)`, or a jitted result on a
    mesh) holds one buffer per device of the mesh, all inside one XLA array `_buf`;
    `_sharding` is then that sharding (None: the whole array on the default device)."""

    __slots__ = ("aval", "_npy", "_buf", "_deleted", "_committed", "_sharding", "_literal",
                 "_execution", "__weakref__")
    __array_priority__ = 100

    def __init__(self, aval: core.ShapedArray, npy: np.ndarray | None = None, buf=None,
                 committed: bool = False, sharding=None) -> None:
        self.aval = aval
        self._npy = npy
        self._buf = buf
        self._deleted = False
        self._committed = committed
        self._sharding = sharding
        # [whether waited for], shared by the outputs of one execution (execution_results)
        self._execution = None
        # a scalar made from a Python or NumPy scalar: jaxprs write it inline, as JAX's typed
        # literals (jax/_src/literals.py); other eager results become constvars
        self._literal = False
        if sharding is not None:
            global sharded_arrays_made
            if not sharded_arrays_made:  # (storing a global each time slows every lookup)
                sharded_arrays_made = True
            # sharding in types: on an Explicit mesh, the aval says (asked inline, not by a
            # call: every sharded result passes here)
            if (aval.sharding is None and isinstance(sharding, NamedSharding)
                    and sharding.mesh.explicit_axes):
                self.aval = aval.update(sharding=aval_sharding(sharding, aval.ndim))

    def __getstate__(self):
        # a copy or an unpickled Array does not share the flag of the execution that made
        # this one: unpickled, its buffer is a transfer of its own
        state, slots = object.__getstate__(self)
        slots["_execution"] = None
        return state, slots

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
        """The set of devices holding (a shard of) this array."""
        return self.sharding.device_set

    # JAX: jax/_src/array.py ArrayImpl.sharding
    @property
    def sharding(self):
        """How the array is laid out: a `NamedSharding`, or a `SingleDeviceSharding` of the
        default device for arrays never placed on a mesh."""
        if self._sharding is not None:
            return self._sharding
        if config._default_device_set and self._buf is not None:
            # placed while `jax_default_device` named another device: it stays there
            return SingleDeviceSharding(next(iter(self._buf.devices())))
        return SingleDeviceSharding(default_device())

    @property
    def is_fully_replicated(self) -> bool:
        return self.sharding.is_fully_replicated

    @property
    def is_fully_addressable(self) -> bool:
        return self.sharding.is_fully_addressable

    # JAX: jax/_src/array.py ArrayImpl.addressable_shards
    @property
    def addressable_shards(self) -> list["Shard"]:
        """One `Shard` per device of this process (all of them, in one process), in the order
        of the sharding's devices (the mesh's, row major): its `device`, `index` (the slices of
        the global array it holds), `replica_id` and `data` (a single-device Array)."""
        self._check_alive()
        s = self.sharding
        index_map = s.devices_indices_map(self.shape)
        bufs = self._device_buffers()
        out, seen = [], {}
        for d in s._device_assignment:  # replica ids count every device, local or not
            idx = index_map[d]
            key = tuple((sl.start, sl.stop) for sl in idx)
            replica = seen[key] = seen.get(key, -1) + 1
            if d in bufs:
                b = bufs[d]
                aval = core.ShapedArray(b.shape, self.dtype, self.weak_type)
                where = None if d == default_device() and s.memory_kind == "device" else \
                    SingleDeviceSharding(d, memory_kind=s.memory_kind)  # as JAX's shards say
                out.append(Shard(d, idx, replica, Array(aval, None, b, self._committed, where)))
        return out

    def _device_buffers(self) -> dict:
        """device -> single-device buffer, for the devices of this process that hold a shard
        (with several processes, the other processes' shards are not ours to read)."""
        if self._sharding is None:
            return {default_device(): self.device_buffer()}
        buf = self.device_buffer()
        return {next(iter(b.devices())): b for b in buf._arrays}  # devices() may be cached: no pop

    def _check_alive(self) -> None:
        if self._deleted:
            raise RuntimeError(f"Array has been deleted (donated to a jitted computation) "
                               f"with aval {self.aval.str_short()}")

    def _value(self) -> np.ndarray:
        """The value as numpy, fetched from the device (and cached: on CPU a view of the
        device buffer) if needed."""
        self._check_alive()
        if self._npy is None and self._sharding is not None:
            self._npy = _assemble(self)
        elif self._npy is None:
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
            from minijax import compiler  # not at the top: compiler imports this module
            npy, self._npy = self._npy, None
            if self._sharding is not None:
                self._buf = compiler.device_put_sharded(npy, self._sharding)
                self._npy = npy  # the shards are copies: keep the host value too
                return self._buf
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
        """Wait until the value has been computed; returns self. The outputs of one execution
        are made ready together (XLA's runtime marks them done by one event): once one of
        them was waited for, the others return at once, XLA asked only whether the buffer
        was deleted. Blocking every leaf of a jitted function's result, one by one, then
        waits once. Raises XLA's JaxRuntimeError for a buffer donated through another
        reference, as JAX does."""
        buf = self._buf
        if buf is not None:
            execution = self._execution
            if execution is None:
                buf.block_until_ready()
            elif not execution[0] or buf.is_deleted():  # (deleted: XLA's error, as in JAX)
                buf.block_until_ready()
                execution[0] = True
        elif self._deleted:
            self._check_alive()  # raises
        return self

    # JAX: jax/_src/array.py ArrayImpl.__array__ — NumPy's `copy` is honoured: np.array(x)
    # gets a writable copy, np.asarray(x) a read-only view (an Array is immutable)
    def __array__(self, dtype=None, copy=None):
        return np.asarray(read_only(self._value()), dtype=dtype,
                          **({} if copy is None else {"copy": copy}))

    # JAX: jax/_src/array.py ArrayImpl.__dlpack__ — differs: the host copy's buffer (NumPy's)
    def __dlpack__(self, **kwargs):
        return self._value().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple:
        return self._value().__dlpack_device__()

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

    def __format__(self, spec):
        return format(self._value().item(), spec) if self.ndim == 0 else str(self)

    __hash__ = None

    def __repr__(self) -> str:
        if self._deleted:
            return f"Array(<deleted>, {self.aval.str_short()})"
        # JAX: jax/_src/array.py ArrayImpl.__repr__ — the dtype goes after the values,
        # separated by one space, or by the prefix's width of spaces where the last line is full
        dtype = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value(), separator=", ", prefix="Array(", suffix=",")
        width = np.get_printoptions()["linewidth"]
        last_line = len(body) - body.rfind("\n") + 1
        sep = " " if last_line + len(dtype) + 2 <= width else " " * len("Array(")
        return f"Array({body},{sep}{dtype})"

    def __str__(self) -> str:
        return str(self._value())


# JAX: jax/_src/array.py Shard
class Shard:
    """One device's piece of an Array: `device`, `index` (tuple of slices into the global
    array), `replica_id` (0 for the first copy of a block), `data` (an Array)."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index, replica_id, data) -> None:
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self) -> str:
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


def _assemble(x: Array) -> np.ndarray:
    """The global value of a sharded Array: each block copied to the host from the first
    device holding it (replicas are not read twice)."""
    out = np.empty(x.shape, x.dtype)
    index_map = x._sharding.devices_indices_map(x.shape)
    done = set()
    bufs = x._device_buffers()
    for d in x._sharding._device_assignment:
        idx = index_map[d]
        key = tuple((sl.start, sl.stop) for sl in idx)
        if key not in done and d in bufs:
            done.add(key)
            out[idx] = np.asarray(bufs[d])
    if len(done) != len({tuple((sl.start, sl.stop) for sl in i) for i in index_map.values()}):
        raise RuntimeError("Fetching value for `jax.Array` that spans non-addressable "
                           "(non process local) devices is not possible. You can use "
                           "`jax.experimental.multihost_utils.process_allgather` to print "
                           "the global array or use `.addressable_shards` method of jax.Array "
                           "to inspect the addressable (process local) shards.")
    return out


def array_from_numpy(val: np.ndarray, weak_type: bool = False, literal: bool = False) -> Array:
    """Wrap a numpy array (not copied) as an uncommitted Array; `literal`: a scalar that
    jaxprs write inline, like the Python or NumPy scalar it was made from."""
    out = Array(core.ShapedArray(val.shape, val.dtype, weak_type), npy=val)
    out._literal = literal
    return out


# JAX: jaxlib's ExecuteResults.consume_with_handlers (the Arrays of one execution, in C++)
def execution_results(avals, bufs: list, committed: bool = False) -> list[Array]:
    """The Arrays of one execution's outputs on the default device: `bufs` (XLA arrays, one
    per output, of types `avals`), uncommitted unless `committed`, sharing one flag: once
    one was waited for, all were (`Array.block_until_ready`)."""
    execution = [False] if len(bufs) > 1 else None
    out = []
    for aval, buf in zip(avals, bufs):
        x = Array(aval, None, buf, committed)
        x._execution = execution
        out.append(x)
    return out

core.pytype_aval_mappings[Array] = lambda x: x.aval
