"""Compiling StableHLO with XLA (and the persistent compilation cache), and device buffers:
the values compiled programs take and return, placed on one device or cut into blocks over a
mesh.

With `interpreters/mlir.py`, `xla_bridge.py` and `interpreters/pxla.py`, one of the places
where minijax touches JAX: as the compiler backend, and for device buffers. Running a compiled
program is `minijax/interpreters/pxla.py`; which backend and devices, `minijax/xla_bridge.py`.
Mirrors jax/_src/compiler.py and the buffer half of jax/_src/interpreters/pxla.py.
Taught in chapters/07-jit.md and chapters/11-aot-async-benchmarking.md.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import time
import warnings
from typing import Any, Sequence

import numpy as np

from minijax import core
from minijax.array import Array
from minijax.config import config
from minijax.interpreters import mlir
from minijax.named_sharding import NamedSharding, Sharding
from minijax.sharding_impls import SingleDeviceSharding
from minijax.tree_util import tree_flatten, tree_unflatten
from minijax.xla_bridge import default_device, get_backend, runtime_error_type

# Counters tests read: persistent-cache hits and misses in this process.
persistent_cache_stats = {"hits": 0, "misses": 0}


# ---------------------------------------------------------------------------------------------
# Compiling, through the persistent cache
# ---------------------------------------------------------------------------------------------

def _check_tpu_kernels(text: str) -> None:
    """A Pallas kernel compiled for the TPU (`interpret=False`: a `tpu_custom_call`) runs on a
    TPU backend only; elsewhere XLA would fail on the unknown target, so name the kernel."""
    if "tpu_custom_call" in text and get_backend().platform != "tpu":
        names = ", ".join(re.findall(r'kernel_name = "([^"]*)"', text))
        raise ValueError(
            f"pallas_call of {names}: the kernel is compiled by Mosaic for a TPU "
            f"(interpret=False), but the backend is {get_backend().platform!r}. Run it on a TPU, "
            "or pass interpret=True. See chapters/16-pallas.md")


# JAX: jax/_src/callback.py _emit_tpu_python_callback (its host callback object)
class SendRecvCallback:
    """A host callback that a TPU module reaches through host sends (its operands, one channel
    each) and receives (its results): XLA's callback object for it is made by the backend that
    compiles the module (`for_backend`), so a module lowered for a TPU on a CPU machine can
    still be printed."""

    def __init__(self, callback, operand_avals, result_avals, send_channels, recv_channels):
        self.callback = callback
        self.operand_avals, self.result_avals = tuple(operand_avals), tuple(result_avals)
        self.send_channels, self.recv_channels = tuple(send_channels), tuple(recv_channels)

    def for_backend(self, client):
        import pickle

        from jaxlib import xla_client

        def shapes(avals):
            return [xla_client.Shape.array_shape(np.dtype(a.dtype), a.shape) for a in avals]
        return client.make_python_callback_from_host_send_and_recv(
            self.callback, shapes(self.operand_avals), shapes(self.result_avals),
            list(self.send_channels), list(self.recv_channels), pickle.dumps)


# JAX: jax/_src/compiler.py use_detailed_logging: XLA logs details of compiling only the
# "interesting" modules, of more than jax_compiler_detailed_logging_min_ops (10) operations
def _has_ops(op, n: int) -> bool:
    todo, seen = [op], 0
    while todo and seen < n:
        todo += [o.operation for r in todo.pop().regions for b in r.blocks for o in b.operations]
        seen += 1
    return seen >= n


# JAX: jax/_src/interpreters/pxla.py _cached_compilation — differs: a module and devices in
def compile(module, devices: Sequence[Any] | None = None,
            host_callbacks: Sequence[Any] = (),
            compiler_options: dict[str, Any] | None = None) -> Any:
    """Compile a StableHLO module (an `ir.Module` or its text) for the default device (or the
    one device in `devices`), or partitioned over several `devices` (a mesh's, row-major) by
    the Shardy partitioner reading the module's `sdy` annotations.

    `compiler_options`: XLA debug options for this executable only ({"xla_disable_hlo_passes":
    "fusion"}), as JAX's `compile(compiler_options=...)` (chapters/22-precision-xla-flags.md);
    an unknown name raises XLA's error. `host_callbacks`: the Python callables the module's
    host custom calls name by index (`mlir.ModuleContext`); such a module is never cached on
    disk (a callable cannot be serialized), as in JAX; others go through the persistent cache
    (`compile_or_get_cached`). Returns a loaded XLA executable (`execute_sharded`,
    `get_hlo_text`, `cost_analysis`...). Raises XLA's error (a RuntimeError subclass) for an
    invalid module."""
    # with the ops' locations: XLA makes their name stacks the HLO op_name metadata
    text = module if isinstance(module, str) else module.operation.get_asm(enable_debug_info=True)
    _check_tpu_kernels(text)
    detailed = isinstance(module, str) or _has_ops(module.operation, 11)  # more than 10
    options, devices = get_compile_options(devices, detailed, compiler_options)
    if host_callbacks:
        # jaxlib takes the callables only with the module object, not its text
        if isinstance(module, str):
            with mlir.make_ir_context():
                module = mlir.ir.Module.parse(text)
        host_callbacks = [c.for_backend(get_backend()) if isinstance(c, SendRecvCallback) else c
                          for c in host_callbacks]
        return get_backend().compile_and_load(module, devices, options,
                                          host_callbacks=list(host_callbacks))
    return compile_or_get_cached(text, devices, options)


# JAX: jax/_src/compiler.py get_compile_options
def get_compile_options(devices: Sequence[Any] | None, detailed: bool,
                        compiler_options: dict[str, Any] | None) -> tuple[Any, Any]:
    """(XLA's compile options, a jaxlib DeviceList) for `devices` (None: the default one),
    several partitioned by Shardy; `compiler_options` as debug option overrides."""
    import jax.extend.backend as jeb
    from jaxlib._jax import DeviceList
    devices = (default_device(),) if devices is None else tuple(devices)
    options = jeb.get_compile_options(  # on those devices (XLA's default: the first)
        num_replicas=1, num_partitions=len(devices),
        device_assignment=np.array([[d.id for d in devices]]), detailed_logging=detailed)
    if len(devices) > 1:
        build = options.executable_build_options
        build.use_spmd_partitioning = True   # XLA splits the program into per-device parts
        build.use_shardy_partitioner = True  # ... reading Shardy's sdy.* annotations
    if compiler_options:  # JAX: jax/_src/compiler.py get_compile_options env_options_overrides
        options.env_option_overrides = list(compiler_options.items())
    return options, DeviceList(devices)


# JAX: jax/_src/compiler.py compile_or_get_cached
def compile_or_get_cached(text: str, devices, options) -> Any:
    """The executable of `text`: read from `jax_compilation_cache_dir` when set and there
    (`_cache_read`), else compiled, and written there when worth it (`_cache_write`)."""
    cache_dir = config.jax_compilation_cache_dir
    if cache_dir is None or not _usable_cache_dir(cache_dir, text):
        return get_backend().compile_and_load(text, devices, options)
    path = os.path.join(cache_dir, _cache_key(text, options, devices, len(devices)) + ".xla")
    exe = _cache_read(path, text, devices, options)
    if exe is not None:
        return exe
    persistent_cache_stats["misses"] += 1
    start = time.perf_counter()
    exe = get_backend().compile_and_load(text, devices, options)
    _cache_write(path, exe, time.perf_counter() - start, text, cache_dir)
    return exe


# JAX: jax/_src/compiler.py _cache_read
def _cache_read(path: str, text: str, devices, options) -> Any | None:
    """The executable stored at `path`, or None: absent, or unreadable (corrupt, truncated:
    a warning, as JAX's, and the module is compiled and the entry written again)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            exe = get_backend().deserialize_executable(f.read(), devices, options)
    except Exception as e:  # whatever the runtime raises for bytes it cannot load
        _cache_error(text, path, e)
        return None
    persistent_cache_stats["hits"] += 1
    return exe


# JAX: jax/_src/compiler.py _cache_write — only programs slow enough to compile and big
# enough to be worth a file
def _cache_write(path: str, exe, compile_secs: float, text: str, cache_dir: str) -> None:
    """Write `exe` to `path` if compiling took at least
    `jax_persistent_cache_min_compile_time_secs` and its bytes number at least
    `jax_persistent_cache_min_entry_size_bytes`; a directory that cannot be written warns
    once and is then left alone (`jax_raise_persistent_cache_errors`: raise)."""
    if compile_secs < config.jax_persistent_cache_min_compile_time_secs:
        return
    data = exe.serialize()
    if len(data) < config.jax_persistent_cache_min_entry_size_bytes:
        return
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
    except OSError as e:  # a directory that cannot be written: compile without it
        _cache_error(text, cache_dir, e)
        _unusable_cache_dirs.add(cache_dir)


# cache directories that could not be created or written: warned about once, then left alone
_unusable_cache_dirs: set = set()


def _usable_cache_dir(cache_dir: str, text: str) -> bool:
    if cache_dir in _unusable_cache_dirs:
        return False
    try:
        os.makedirs(cache_dir, exist_ok=True)
        return True
    except OSError as e:
        _cache_error(text, cache_dir, e)
        _unusable_cache_dirs.add(cache_dir)
        return False


def _cache_error(text: str, path: str, e: Exception) -> None:
    """A persistent-cache entry or directory that cannot be used: JAX's warning, or the error
    itself with jax_raise_persistent_cache_errors."""
    if config.jax_raise_persistent_cache_errors:
        raise e
    name = re.search(r"module @([\w.$-]+)", text)
    warnings.warn(f"Error reading persistent compilation cache entry for "
                  f"'{name.group(1) if name else path}': {type(e).__name__}: {e}", stacklevel=3)


# JAX: jax/_src/cache_key.py get
def _cache_key(module_text: str, options, devices, num_partitions: int) -> str:
    """What the executable depends on: the module, the compile options (serialized), the
    device assignment and the number of partitions, the backend and jaxlib's version."""
    import jaxlib
    h = hashlib.sha256()
    parts = (module_text, options.SerializeAsString(),
             ",".join(f"{d.platform}:{d.id}" for d in devices), str(num_partitions),
             get_backend().platform, get_backend().platform_version, jaxlib.__version__)
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Device buffers: one device, or blocks over a mesh
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/array.py (the aval a device Array carries) — differs: minijax's own ShapedArray
@functools.lru_cache(maxsize=4096)  # each NumPy argument of a call needs one
def buffer_type(shape: tuple, dtype) -> core.ShapedArray:
    """The type descriptor jaxlib's C++ buffer calls (`array_result_handler`,
    `batched_device_put`) take for a buffer of `shape` (ints) and `dtype` (a NumPy dtype):
    they read only its `shape`, `dtype` and `weak_type`, so minijax's own `core.ShapedArray`
    serves, and nothing of JAX's is borrowed. Raises what `core.ShapedArray` raises for a bad
    shape or dtype."""
    return core.ShapedArray(shape, dtype)


def block_until_ready(buffers: Sequence[Any]) -> None:
    """Wait until every device buffer in `buffers` holds its value (one call into XLA)."""
    if len(buffers) == 1:
        buffers[0].block_until_ready()
        return
    from jaxlib import _jax
    _jax.batched_block_until_ready(list(buffers))


# JAX: jax/_src/api.py device_put (the sharded case) and pxla.py _shard_np_array
def device_put_sharded_tree(x, sharding: Sharding):
    """`device_put(x, sharding)` for a pytree `x`: every leaf is checked against `sharding`
    first (rank, divisibility), then each is cut into blocks and placed (committed)."""
    leaves, tree = tree_flatten(x)
    avals = [leaf.aval if isinstance(leaf, Array) else core.get_aval(leaf) for leaf in leaves]
    for aval in avals:  # all checks before any placement: nothing is left half-placed
        if not isinstance(sharding, NamedSharding):  # one device (in some memory kind)
            continue
        try:
            sharding.spec._check_compatible_wrt_shape(aval.shape)
        except ValueError as e:
            raise ValueError(f"One of device_put args is incompatible with its sharding "
                             f"annotation {sharding}: {e}") from None
        sharding.check_compatible_aval(aval.shape)
    out = []
    for leaf, aval in zip(leaves, avals):
        if isinstance(leaf, Array) and leaf._sharding == sharding:
            out.append(leaf)
            continue
        buf = copy_buffer(leaf, sharding) if isinstance(leaf, Array) else None
        if buf is None:  # a host value, or other blocks: cut on the host and placed
            if not isinstance(leaf, Array):
                guard_host_to_device(aval, sharding, explicit=True)
            val = leaf._value() if isinstance(leaf, Array) else core.to_numpy(leaf, aval)
            buf = device_put_sharded(np.asarray(val), sharding)
        out.append(Array(aval.update(sharding=None), None, buf, True, sharding))  # new type
    return tree_unflatten(tree, out)


def device_put_arg(x, aval: core.ShapedArray, index: int):
    """The device buffer for argument `index`, a value that is not a minijax Array."""
    if isinstance(x, (core.ShapedArray, core.ShapeDtypeStruct)):
        raise TypeError(f"{x!r} is abstract (a type, no value): it can be passed to "
                        "jit(f).trace(...) or .lower(...), not to a call")
    guard_host_to_device(aval, None, explicit=False)
    return device_put(core.to_numpy(x, aval))


# JAX: jax/_src/config.py transfer_guard (its checks run in jaxlib's guard_lib)
def guard_host_to_device(aval: core.ShapedArray, sharding, explicit: bool) -> None:
    """What `jax_transfer_guard` (or `_host_to_device`) says of copying a host value of type
    `aval` to the device: "log" warns and "disallow" raises JaxRuntimeError for an implicit
    transfer (a NumPy value or Python scalar passed to a jitted function), "log_explicit" /
    "disallow_explicit" for explicit ones (`device_put`) too."""
    level = config.jax_transfer_guard_host_to_device or config.jax_transfer_guard
    if level is None or level == "allow" or (explicit and not level.endswith("_explicit")):
        return
    dst = sharding or SingleDeviceSharding(default_device())
    what = (f"host-to-device transfer: aval=ShapedArray({aval.dtype.name}"
            f"[{','.join(map(str, aval.shape))}]{', weak_type=True' if aval.weak_type else ''}"
            f"), dst_sharding={dst}")
    if level.startswith("log"):
        logging.getLogger("minijax").warning(what)
        return
    raise runtime_error_type()(f"INVALID_ARGUMENT: Disallowed {what}")


# JAX: jax/_src/interpreters/pxla.py batched_device_put
def device_put(value: np.ndarray):
    """Put a numpy array on the default device; returns the device buffer (uncommitted).

    The transfer is asynchronous; the runtime may alias 64-byte-aligned host memory instead of
    copying it (on CPU). The dtype is kept as given: minijax canonicalizes 64-bit values with
    its own x64 flag before they get here. Like `pxla.result_handlers`, this is buffer plumbing
    that borrows JAX's ShapedArray as the buffer's type descriptor."""
    import jax  # device buffers are the one part of JAX's runtime minijax uses
    if value.dtype.names is not None:  # float0 (a structured dtype): JAX's own conversion
        return jax.device_put(value, default_device())
    from jaxlib import _jax
    device = default_device()
    return _jax.batched_device_put(buffer_type(value.shape, value.dtype),
                                   single_device_sharding(device), [value], [device],
                                   False, enable_x64=True)


@functools.cache
def single_device_sharding(device):
    from jax.sharding import SingleDeviceSharding
    return SingleDeviceSharding(device)


def on_default_device(x):
    """The device buffer of the plain Array `x`, moved to the default device if it was made
    under another default (`jax_default_device` changed since): uncommitted arrays follow the
    default, as in JAX."""
    buf = x.device_buffer()
    if config._default_device_set and buf.devices() != {default_device()}:
        return device_put(np.asarray(buf))  # a copy: `x` itself stays where it is
    return buf


def release_host_copy(buffer) -> None:
    """Wait until `buffer`'s host-to-device transfer is done and let the runtime drop its
    reference to the host array now. (jaxlib releases Python objects its threads held in
    batches, normally at the next garbage collection; for a big array that would keep the
    host copy alive next to the device copy.)"""
    from jaxlib import _jax
    buffer.block_until_ready()
    _jax.collect_garbage()


@functools.lru_cache(maxsize=256)
def buffer_sharding(sharding):
    """The descriptor jaxlib needs to hold a global buffer of minijax `sharding`: JAX's
    NamedSharding over the same devices, names and spec. Buffer plumbing, like `buffer_type`:
    which device holds which slice is decided by minijax
    (`NamedSharding.devices_indices_map`), and the shards are cut by minijax."""
    import jax
    kind = sharding.__dict__.get("_memory_kind")  # the buffers live in that memory
    if isinstance(sharding, SingleDeviceSharding):
        return jax.sharding.SingleDeviceSharding(sharding._device, memory_kind=kind)
    mesh = jax.sharding.Mesh(sharding.mesh.devices, sharding.mesh.axis_names)
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*sharding.spec),
                                      memory_kind=kind)


# JAX: jax/_src/array.py _array_shard_arg (same blocks: batched_copy_array_to_devices_with_sharding)
def copy_buffer(x, sharding):
    """The value of Array `x`, whose buffer is on its devices, copied buffer to buffer (no trip
    through a host NumPy array) into the devices and memory kind of `sharding`: how JAX moves an
    array between memories (device <-> pinned_host) or single devices. None when `sharding`
    cuts `x` into other blocks than those its buffers hold, or `x` has no buffer."""
    from jaxlib import _jax
    buf = x._buf
    if buf is None or not sharding.is_fully_addressable:
        return None
    src = x.sharding.devices_indices_map(x.shape)
    dst = sharding.devices_indices_map(x.shape)
    devices = [d for d in sharding._device_assignment if d in sharding.addressable_devices]
    shards = buf._arrays  # one single-device buffer per device, in the buffer's order
    if len(shards) != len(devices) or any(src.get(next(iter(b.devices()))) != dst[d]
                                          for b, d in zip(shards, devices)):
        return None
    return _jax.batched_copy_array_to_devices_with_sharding(  # a copy, as minijax's before
        [buf], [_jax.DeviceList(tuple(devices))], [buffer_sharding(sharding)],
        [_jax.ArrayCopySemantics.ALWAYS_COPY])[0]


# JAX: jax/_src/interpreters/pxla.py _shard_np_array
def device_put_sharded(value: np.ndarray, sharding) -> Any:
    """Cut `value` into the blocks `sharding` assigns to each device and put each block on
    its device; returns one global buffer (committed). Raises what
    `NamedSharding.check_compatible_aval` raises, before anything is placed."""
    from jaxlib import _jax
    index_map = sharding.devices_indices_map(value.shape)  # checks rank and divisibility
    local = sharding.addressable_devices  # with several processes, each places its own
    devices = [d for d in sharding._device_assignment if d in local]
    # np.asarray, not np.ascontiguousarray: that makes a 0-d block 1-d
    shards = [np.asarray(value[index_map[d]], order="C") for d in devices]
    want = sharding.shard_shape(value.shape)
    for d, b in zip(devices, shards):  # the runtime trusts these shapes: check them here
        if b.shape != want:
            raise ValueError(f"device_put: the block for {d} has shape {b.shape}, the "
                             f"sharding {sharding} of {value.shape} asks for {want}")
    return _jax.batched_device_put(buffer_type(value.shape, value.dtype),
                                   buffer_sharding(sharding), shards, devices, True,
                                   enable_x64=True)
