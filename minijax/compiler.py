"""Compiling StableHLO with XLA and running executables, through `jax.extend.backend`.

This is the only place (with interpreters/mlir.py) where minijax touches JAX: as the compiler
backend, and for device buffers (the inputs and outputs of executables).
Mirrors jax/_src/compiler.py and the executable half of jax/_src/interpreters/pxla.py.
Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
from itertools import repeat
import os
import re
import threading
import time
import warnings
from typing import Any, Sequence

import numpy as np

from minijax import core
from minijax.array import Array
from minijax.config import config
from minijax.named_sharding import NamedSharding, Sharding
from minijax.partition_spec import P
from minijax.sharding_impls import SingleDeviceSharding, aval_sharding, spec_for_device_map
from minijax.interpreters import mlir
from minijax.tree_util import tree_flatten, tree_unflatten

# Counters tests read: persistent-cache hits and misses in this process.
persistent_cache_stats = {"hits": 0, "misses": 0}


@functools.cache
# JAX: jax/_src/lib xla_client.Device (`jax.Device`)
def device_class() -> type:
    """jaxlib's Device type: every device of `backend()` is one."""
    from jaxlib._jax import Device
    return Device


# JAX: jax/_src/profiler.py (which reads jaxlib's _profiler the same way)
def profiler_runtime():
    """jaxlib's profiler bindings: ProfilerSession, ProfileOptions, TraceMe."""
    from jaxlib import _profiler
    return _profiler


def backend():
    """XLA's client: JAX's default one, or with `jax_platforms` set (before the first
    compile) the first it lists; every platform listed must start, or RuntimeError, as in
    JAX."""
    import jax.extend.backend as jeb
    if not config.jax_platforms:
        return jeb.get_backend()
    return [jeb.get_backend(p) for p in config.jax_platforms.split(",")][0]


# JAX: jax/errors.py JaxRuntimeError
def runtime_error_type() -> type:
    """jaxlib's JaxRuntimeError, what XLA's failures raise (`minijax.errors.JaxRuntimeError`)."""
    from jaxlib._jax import JaxRuntimeError
    return JaxRuntimeError


# JAX: jax/_src/interpreters/pxla.py get_default_device
def default_device():
    """Where uncommitted arrays live and computations on them run: `jax_default_device` (a
    device, or a platform name for that backend's first device) or the backend's first."""
    device = config.jax_default_device
    if device is None:
        return _first_device()
    if isinstance(device, str):
        return _first_device(device)
    return device


@functools.cache
def _first_device(platform: str | None = None):
    if platform is None:
        return backend().local_devices()[0]
    import jax.extend.backend as jeb
    return jeb.get_backend(platform).local_devices()[0]


# JAX: jax/_src/ffi.py register_ffi_target
def register_custom_call_target(name: str, fn: Any, platform: str, api_version: int,
                                **kwargs: Any) -> None:
    """Hand the FFI handler `fn` (a PyCapsule) to XLA's `platform` backend as the
    custom-call target `name` (`minijax/ffi.py: register_ffi_target`)."""
    from jaxlib import xla_client
    xla_client.register_custom_call_target(name, fn, platform, api_version, **kwargs)


# JAX: jax/_src/ffi.py include_dir
def ffi_include_dir() -> str:
    """The `include/` folder of the installed jaxlib, which holds XLA's FFI headers."""
    import jaxlib
    return os.path.join(os.path.dirname(os.path.abspath(jaxlib.__file__)), "include")


# JAX: jax/_src/lax/linalg.py register_module_custom_calls
def lapack_target(fn_base: str, dtype) -> str:
    """The name of jaxlib's LAPACK kernel `fn_base` for `dtype` (`lapack_sgetrf_ffi`, ...),
    the target of a lowering's custom call. NotImplementedError if jaxlib has none."""
    # jaxlib's lapack module names the kernels and points them at scipy's LAPACK
    # (`prepare_lapack_call` initializes that); importing jax registered them with XLA
    from jaxlib import lapack
    name = lapack.prepare_lapack_call(fn_base, np.dtype(dtype))
    if name not in lapack._lapack.registrations():
        raise NotImplementedError(f"jaxlib does not provide the LAPACK kernel {name}")
    return name


def _check_tpu_kernels(text: str) -> None:
    """A Pallas kernel compiled for the TPU (`interpret=False`: a `tpu_custom_call`) runs on a
    TPU backend only; elsewhere XLA would fail on the unknown target, so name the kernel."""
    if "tpu_custom_call" in text and backend().platform != "tpu":
        names = ", ".join(re.findall(r'kernel_name = "([^"]*)"', text))
        raise ValueError(
            f"pallas_call of {names}: the kernel is compiled by Mosaic for a TPU "
            f"(interpret=False), but the backend is {backend().platform!r}. Run it on a TPU, "
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


# JAX: jax/_src/compiler.py compile_or_get_cached
# JAX: jax/_src/compiler.py use_detailed_logging: XLA logs details of compiling only the
# "interesting" modules, of more than jax_compiler_detailed_logging_min_ops (10) operations
def _has_ops(op, n: int) -> bool:
    todo, seen = [op], 0
    while todo and seen < n:
        todo += [o.operation for r in todo.pop().regions for b in r.blocks for o in b.operations]
        seen += 1
    return seen >= n


def compile(module, devices: Sequence[Any] | None = None,
            host_callbacks: Sequence[Any] = (),
            compiler_options: dict[str, Any] | None = None) -> Any:
    """Compile a StableHLO module (an `ir.Module` or its text) for the default device (or the
    one device in `devices`), or, given `devices` (a mesh's, in row-major order), partitioned
    over them: num_partitions =
    len(devices), with the Shardy partitioner reading the module's `sdy` annotations.

    `compiler_options`: XLA debug options for this executable only ({"xla_disable_hlo_passes":
    "fusion"}), as JAX's `compile(compiler_options=...)` passes them (chapters/22-precision-
    xla-flags.md); an unknown name raises XLA's error.
    Returns a loaded XLA executable (`execute_sharded`, `get_hlo_text`, `cost_analysis`...).
    Raises XLA's error (a RuntimeError subclass) if the module is invalid. With
    `jax_compilation_cache_dir` set, looks the executable up there first; an entry that cannot
    be read (corrupt, truncated) gives a warning, and the module is compiled and the entry
    written again, as JAX does; it is written only if compiling took at least
    `jax_persistent_cache_min_compile_time_secs` and its bytes number at least
    `jax_persistent_cache_min_entry_size_bytes`; a directory that cannot be created or
    written warns once and is then left alone (`jax_raise_persistent_cache_errors`: raise).
    `host_callbacks` are the Python callables the module's host
    custom calls name by index (`mlir.ModuleContext`); a module with them is never cached on
    disk (a callable cannot be serialized), as in JAX.
    """
    import jax.extend.backend as jeb
    from jaxlib._jax import DeviceList
    # with the ops' locations: XLA makes their name stacks the HLO op_name metadata
    text = module if isinstance(module, str) else module.operation.get_asm(enable_debug_info=True)
    _check_tpu_kernels(text)
    detailed = isinstance(module, str) or _has_ops(module.operation, 11)  # more than 10
    if devices is None or len(devices) == 1:
        num_partitions = 1
        devices = DeviceList((default_device(),) if devices is None else tuple(devices))
        options = jeb.get_compile_options(  # on that device (XLA's default: the first)
            num_replicas=1, num_partitions=num_partitions,
            device_assignment=np.array([[devices[0].id]]), detailed_logging=detailed)
    else:
        num_partitions = len(devices)
        options = jeb.get_compile_options(
            num_replicas=1, num_partitions=num_partitions,
            device_assignment=np.array([[d.id for d in devices]]), detailed_logging=detailed)
        build = options.executable_build_options
        build.use_spmd_partitioning = True   # XLA splits the program into per-device parts
        build.use_shardy_partitioner = True  # ... reading Shardy's sdy.* annotations
        devices = DeviceList(tuple(devices))
    if compiler_options:  # JAX: jax/_src/compiler.py get_compile_options env_options_overrides
        options.env_option_overrides = list(compiler_options.items())
    if host_callbacks:
        # jaxlib takes the callables only with the module object, not its text
        if isinstance(module, str):
            with mlir.make_ir_context():
                module = mlir.ir.Module.parse(text)
        host_callbacks = [c.for_backend(backend()) if isinstance(c, SendRecvCallback) else c
                          for c in host_callbacks]
        return backend().compile_and_load(module, devices, options,
                                          host_callbacks=list(host_callbacks))
    cache_dir = config.jax_compilation_cache_dir
    if cache_dir is None or not _usable_cache_dir(cache_dir, text):
        return backend().compile_and_load(text, devices, options)
    path = os.path.join(cache_dir, _cache_key(text, options, devices, num_partitions) + ".xla")
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                exe = backend().deserialize_executable(f.read(), devices, options)
            persistent_cache_stats["hits"] += 1
            return exe
        except Exception as e:  # whatever the runtime raises for bytes it cannot load
            _cache_error(text, path, e)
    persistent_cache_stats["misses"] += 1
    start = time.perf_counter()
    exe = backend().compile_and_load(text, devices, options)
    # JAX: jax/_src/compiler.py _cache_write — only programs slow enough to compile and big
    # enough to be worth a file
    if time.perf_counter() - start < config.jax_persistent_cache_min_compile_time_secs:
        return exe
    data = exe.serialize()
    if len(data) < config.jax_persistent_cache_min_entry_size_bytes:
        return exe
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
    except OSError as e:  # a directory that cannot be written: compile without it
        _cache_error(text, cache_dir, e)
        _unusable_cache_dirs.add(cache_dir)
    return exe


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
             backend().platform, backend().platform_version, jaxlib.__version__)
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()


def execute(executable, buffers: Sequence[Any], handlers: list | None = None) -> list:
    """Run `executable` on device buffers; returns one device buffer per output, without
    waiting for the computation to finish (XLA dispatches asynchronously).

    `handlers` (from `result_handlers`) make the output buffers in C++; without them jaxlib's
    `execute` builds each one through Python (~8 us per output).
    """
    if handlers is None:
        return executable.execute(buffers)
    return executable.execute_sharded(buffers).consume_with_handlers(handlers)


# JAX: jax/_src/array.py (the aval a device Array carries) — differs: minijax's own ShapedArray
@functools.lru_cache(maxsize=4096)  # each NumPy argument of a call needs one
def _buffer_type(shape: tuple, dtype) -> core.ShapedArray:
    """The type descriptor jaxlib's C++ buffer calls (`array_result_handler`,
    `batched_device_put`) take for a buffer of `shape` (ints) and `dtype` (a NumPy dtype):
    they read only its `shape`, `dtype` and `weak_type`, so minijax's own `core.ShapedArray`
    serves, and nothing of JAX's is borrowed. Raises what `core.ShapedArray` raises for a bad
    shape or dtype."""
    return core.ShapedArray(shape, dtype)


# JAX: jax/_src/array.py _array_global_result_handler — differs: one device, uncommitted
def result_handlers(avals) -> list | None:
    """One C++ result handler per output aval (what JAX's dispatch uses), or None where an
    aval has no plain XLA type (float0), for which `execute` takes jaxlib's generic path.

    This is device-buffer plumbing, not tracing: jaxlib's handler wraps each output buffer as
    a device array; its type descriptor comes from `_buffer_type`."""
    from jaxlib import _jax
    if any(a.dtype.names is not None for a in avals):  # float0 is a structured dtype
        return None
    sharding = _single_device_sharding(default_device())
    return [_jax.array_result_handler(_buffer_type(a.shape, a.dtype), sharding,
                                      committed=False, _skip_checks=True) for a in avals]


def block_until_ready(buffers: Sequence[Any]) -> None:
    """Wait until every device buffer in `buffers` holds its value (one call into XLA)."""
    if len(buffers) == 1:
        buffers[0].block_until_ready()
        return
    from jaxlib import _jax
    _jax.batched_block_until_ready(list(buffers))


# JAX: jax/_src/dispatch.py RuntimeTokenSet — differs: one device
class RuntimeTokenSet(threading.local):
    """Per thread: for each ordered effect, the token the last dispatched computation with
    that effect returned (a `bool[0]` device buffer, the next such computation's input: XLA
    then starts it only after that one's ordered effects are done); and the runtime token of
    the last computation with any effect (what `effects_barrier` waits for)."""

    def __init__(self) -> None:
        self.current_tokens: dict = {}
        self.output_runtime_token = None

    def get_token_input(self, eff, sharding=None):
        """The token to hand the next computation with `eff`: on the default device, or
        replicated over `sharding`'s devices (a program partitioned over a mesh). A token
        left on other devices is waited for first, so the order still holds."""
        tok = self.current_tokens.get(eff)
        want = {default_device()} if sharding is None else set(sharding._device_assignment)
        if tok is not None and set(tok.sharding.device_set) != want:
            tok.block_until_ready()
            tok = None
        if tok is None:
            zeros = np.zeros(0, np.bool_)
            tok = device_put(zeros) if sharding is None else device_put_sharded(zeros, sharding)
            self.current_tokens[eff] = tok
        return tok

    def set_token_result(self, eff, token) -> None:
        self.current_tokens[eff] = token

    def set_output_runtime_token(self, token) -> None:
        self.output_runtime_token = token

    def block_until_ready(self) -> None:
        for tok in self.current_tokens.values():
            tok.block_until_ready()
        if self.output_runtime_token is not None:
            self.output_runtime_token.block_until_ready()
        self.current_tokens, self.output_runtime_token = {}, None


runtime_tokens = RuntimeTokenSet()


# JAX: jax/_src/dispatch.py wait_for_tokens — a program still running a host callback when
# the interpreter exits would call into a Python already torn down (SIGABRT)
atexit.register(runtime_tokens.block_until_ready)


# JAX: jax/_src/interpreters/pxla.py ExecuteReplicated — differs: one class per kind of
# program (one device; one device with outputs in another memory; a mesh) where JAX has one
class ExecuteReplicated:
    """The one way a compiled program runs, built once per executable (the first call, later
    calls, `Compiled.__call__` and `jit_p`'s impl all call it). This class runs a program on
    one device; `ExecutePlaced` and `ExecuteSharded` below change only how the inputs become
    buffers (`_input_buffers`) and the outputs become Arrays (`_output_arrays`).

    Calling it with concrete arguments: takes each minijax Array's device buffer as it is (no
    copy), puts NumPy values and Python scalars on the device, runs the executable
    asynchronously, deletes the donated Arrays whose buffers an output reused, and returns the
    outputs as Arrays (built by C++ result handlers), committed if an argument was.
    A program with effects (`has_effects`) also takes and returns one token per ordered
    effect (`ordered_effects`, leading), handed on through `runtime_tokens`.
    """

    __slots__ = ("executable", "in_avals", "out_avals", "donated", "handlers",
                 "ordered_effects", "has_effects", "token_sharding", "jaxpr", "name")

    def __init__(self, executable, in_avals: Sequence[core.ShapedArray],
                 out_avals: Sequence[core.ShapedArray], donated: Sequence[bool],
                 ordered_effects: Sequence[Any] = (), has_effects: bool = False) -> None:
        self.executable = executable
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(out_avals)
        # per input: donated and reused for an output (only those Arrays are deleted)
        self.donated = tuple(donated) if any(donated) else None
        self.ordered_effects = tuple(ordered_effects)
        self.has_effects = has_effects
        self.token_sharding = None  # the tokens' devices: the default one (ExecuteSharded: all)
        token_avals = [core.ShapedArray((0,), np.bool_)] * len(self.ordered_effects)
        self.handlers = result_handlers([*token_avals, *out_avals])
        # what jax_debug_nans runs again op by op: a weak reference, as the caches of
        # minijax/pjit.py hold executors by their jaxpr, weakly
        self.jaxpr, self.name = None, "fun"

    def __call__(self, args: Sequence[Any], consts: Sequence[Array] = ()) -> list[Array]:
        """Run on `consts` (closed-over Arrays, leading inputs, never donated and not
        deciding commitment) followed by `args`."""
        bufs, committed = self._input_buffers(args, consts)
        handlers = self.handlers  # execute(), inline: this is every cached jit call
        if self.has_effects:
            outs = self._execute_with_tokens(bufs)
        elif handlers is not None:
            outs = self.executable.execute_sharded(bufs).consume_with_handlers(handlers)
        else:
            outs = self.executable.execute(bufs)
        if self.donated is not None:
            self._delete_donated(args, len(consts))
        outs = self._output_arrays(outs, committed)
        if config.jax_debug_nans or config.jax_debug_infs:
            self._check_special(outs, [*consts, *args])
        return outs

    def _input_buffers(self, args: Sequence[Any], consts: Sequence[Array]) -> tuple[list, bool]:
        """(the device buffers of consts + args, whether an argument was committed)."""
        bufs = [c.device_buffer() for c in consts] if consts else []
        n = len(bufs)
        committed = False
        for x in args:
            if type(x) is Array and x._buf is not None:  # the common case: on the device
                bufs.append(on_default_device(x) if config._default_device_set else x._buf)
                if x._committed:
                    committed = True
            elif type(x) is Array:
                bufs.append(x.device_buffer())
                committed = committed or x._committed
            else:
                i = len(bufs) - n
                bufs.append(device_put_arg(x, self.in_avals[n + i], i))
        return bufs, committed

    def _output_arrays(self, outs: list, committed: bool) -> list[Array]:
        return list(map(Array, self.out_avals, repeat(None), outs, repeat(committed)))

    def _delete_donated(self, args: Sequence[Any], n_consts: int) -> None:
        # A reused buffer now holds an output: the input Array must not be read again. As in
        # JAX, an input whose donation no output could use stays alive.
        for x, d in zip(args, self.donated[n_consts:]):
            if d and type(x) is Array:
                x.delete()

    # JAX: jax/_src/pjit.py _pjit_call_impl_python (its jax_debug_nans branch)
    def _check_special(self, outs: list, args: list) -> None:
        """A NaN/inf in the outputs: run the jaxpr again op by op, eagerly (each primitive's
        outputs are checked there, minijax/core.py: check_special), to name its source."""
        try:
            core.check_special(f"jit({self.name})", outs)
        except FloatingPointError as e:
            closed = self.jaxpr() if self.jaxpr is not None else None
            if closed is not None:
                kind = "nan" if "(nan)" in str(e) else "inf"
                print(f"Invalid {kind} value encountered in the output of a jax.jit function. "
                      "Calling the de-optimized version.")
                core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
            raise  # the op-by-op run found nothing: the value came in through the inputs

    # JAX: jax/_src/interpreters/pxla.py ExecuteReplicated._add_tokens_to_inputs
    def _execute_with_tokens(self, bufs: list) -> list:
        effs = self.ordered_effects
        tokens = [runtime_tokens.get_token_input(e, self.token_sharding) for e in effs]
        results = self.executable.execute_sharded([*tokens, *bufs], with_tokens=True)
        runtime_tokens.set_output_runtime_token(results.consume_token())
        if self.handlers is None:
            outs = [b[0] for b in results.disassemble_into_single_device_arrays()]
        else:
            outs = results.consume_with_handlers(self.handlers)
        for e, tok in zip(effs, outs):
            runtime_tokens.set_token_result(e, tok)
        return outs[len(effs):]


# JAX: jax/_src/interpreters/pxla.py ExecuteReplicated (outputs with a memory kind) — differs:
# a subclass, so the common path above stays as chapter 07 shows it
class ExecutePlaced(ExecuteReplicated):
    """ExecuteReplicated for a one-device program some of whose outputs `out_shardings` puts
    in another memory kind ("pinned_host"): those come back as Arrays carrying that sharding,
    their buffers in that memory (chapters/24-memory-offloading.md)."""

    __slots__ = ("placed",)

    def __init__(self, executable, in_avals, out_avals, donated, placed: Sequence,
                 ordered_effects: Sequence[Any] = (), has_effects: bool = False) -> None:
        super().__init__(executable, in_avals, out_avals, donated, ordered_effects, has_effects)
        self.placed = tuple(placed)  # per output: its sharding, or None (default memory)
        from jaxlib import _jax
        ntok = len(self.ordered_effects)  # the handlers of the leading tokens come first
        for i, (a, s) in enumerate(zip(out_avals, self.placed)):
            if s is not None and self.handlers is not None:  # None: float0, generic path
                self.handlers[ntok + i] = _jax.array_result_handler(
                    _buffer_type(a.shape, a.dtype), _buffer_sharding(s), committed=True,
                    _skip_checks=True)

    def _output_arrays(self, outs, committed):
        return [Array(a, None, b, committed) if s is None else Array(a, None, b, True, s)
                for a, b, s in zip(self.out_avals, outs, self.placed)]


# JAX: jax/_src/interpreters/pxla.py ExecuteReplicated (committed to one device) — differs: a
# subclass, so the common path above stays as chapter 07 shows it
class ExecuteOnDevice(ExecuteReplicated):
    """ExecuteReplicated for a program compiled for one device given by a committed argument
    (`device_put(x, device)`) or by `in_shardings`: an input held elsewhere is copied there
    first, and the outputs come back committed to it, carrying its SingleDeviceSharding."""

    __slots__ = ("sharding",)

    def __init__(self, executable, in_avals, out_avals, donated, sharding,
                 ordered_effects: Sequence[Any] = (), has_effects: bool = False) -> None:
        super().__init__(executable, in_avals, out_avals, donated, ordered_effects, has_effects)
        self.sharding = self.token_sharding = sharding
        from jaxlib import _jax
        if self.handlers is not None:
            self.handlers = [_jax.array_result_handler(h_aval, _buffer_sharding(sharding),
                                                       committed=True, _skip_checks=True)
                             for h_aval in [_buffer_type((0,), np.bool_)] *
                             len(self.ordered_effects) + [_buffer_type(a.shape, a.dtype)
                                                          for a in out_avals]]

    def __call__(self, args, consts=()):
        bufs = []
        for x in [*consts, *args]:
            if type(x) is Array and x._sharding == self.sharding:
                bufs.append(x.device_buffer())
            else:
                if type(x) is not Array:
                    guard_host_to_device(core.get_aval(x), self.sharding, explicit=False)
                val = x._value() if type(x) is Array else core.to_numpy(x, core.get_aval(x))
                bufs.append(device_put_sharded(np.asarray(val), self.sharding))
        if self.has_effects:
            outs = self._execute_with_tokens(bufs)
        else:
            outs = execute(self.executable, bufs, self.handlers)
        if self.donated is not None:
            self._delete_donated(args, len(consts))
        return [Array(a, None, b, True, self.sharding) for a, b in zip(self.out_avals, outs)]


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
    its own x64 flag before they get here. Like `result_handlers`, this is buffer plumbing
    that borrows JAX's ShapedArray as the buffer's type descriptor."""
    import jax  # device buffers are the one part of JAX's runtime minijax uses
    if value.dtype.names is not None:  # float0 (a structured dtype): JAX's own conversion
        return jax.device_put(value, default_device())
    from jaxlib import _jax
    device = default_device()
    return _jax.batched_device_put(_buffer_type(value.shape, value.dtype),
                                   _single_device_sharding(device), [value], [device],
                                   False, enable_x64=True)


@functools.cache
def _single_device_sharding(device):
    from jax.sharding import SingleDeviceSharding
    return SingleDeviceSharding(device)


def plain_default(device) -> bool:
    """Whether an array on `device` can be a plain Array (no sharding: on the default device):
    only while the default device is the backend's first. Once `jax_default_device` names
    another, arrays placed on a device record it, so that they stay there when it changes."""
    return device == _first_device() and config.jax_default_device is None


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


# ---------------------------------------------------------------------------------------------
# Many devices: sharded buffers and the sharded executor
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _buffer_sharding(sharding):
    """The descriptor jaxlib needs to hold a global buffer of minijax `sharding`: JAX's
    NamedSharding over the same devices, names and spec. Buffer plumbing, like the borrowed
    ShapedArray above: which device holds which slice is decided by minijax
    (`NamedSharding.devices_indices_map`), and the shards are cut by minijax."""
    import jax
    kind = sharding.__dict__.get("_memory_kind")  # the buffers live in that memory
    if isinstance(sharding, SingleDeviceSharding):
        return jax.sharding.SingleDeviceSharding(sharding._device, memory_kind=kind)
    mesh = jax.sharding.Mesh(sharding.mesh.devices, sharding.mesh.axis_names)
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*sharding.spec),
                                      memory_kind=kind)


@functools.lru_cache(maxsize=4096)
def _same_layout(have, want, ndim: int) -> bool:
    """Do two shardings put the same slices on the same devices (P() and P(None,) do)? Cached:
    a sharded call asks it of every argument, every call."""
    return have is not None and want is not None and have.is_equivalent_to(want, ndim)


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
    return _jax.batched_device_put(_buffer_type(value.shape, value.dtype),
                                   _buffer_sharding(sharding), shards, devices, True,
                                   enable_x64=True)


def _index_of_tiles(hlo_sharding, shape: tuple, num_devices: int) -> dict:
    """Device position -> ((start, stop) per dimension) for an XLA HloSharding (the layout
    the partitioner chose). Tiles are numbered row major over the tile grid; a trailing
    replication dimension (replicate_on_last_tile_dim) repeats each tile."""
    full = tuple((0, n) for n in shape)
    if hlo_sharding.is_replicated() or hlo_sharding.is_maximal():
        return {i: full for i in range(num_devices)}
    dims = list(hlo_sharding.tile_assignment_dimensions())
    devs = list(hlo_sharding.tile_assignment_devices())
    out = {}
    for flat, pos in enumerate(np.ndindex(*dims)):
        out[devs[flat]] = tuple((p * (n // t), (p + 1) * (n // t))
                                for p, n, t in zip(pos[:len(shape)], shape, dims))
    return out


# JAX: jax/_src/interpreters/pxla.py _get_out_sharding_from_orig_sharding
def output_shardings(executable, mesh, out_avals, ntok: int = 0) -> list:
    """The NamedSharding over `mesh` of each output, read from what the partitioner chose
    (`executable.get_output_shardings()`), after the `ntok` leading runtime tokens."""
    return _named_shardings(executable.get_output_shardings(), ntok, mesh, out_avals)


def parameter_shardings(executable, mesh, in_avals, ntok: int = 0) -> list:
    """The NamedSharding over `mesh` the executable expects for each input (after `ntok`
    tokens); an input read on one device only is given whole to every device."""
    return [NamedSharding(mesh, P()) if isinstance(s, SingleDeviceSharding) else s
            for s in _named_shardings(executable.get_parameter_shardings(), ntok, mesh,
                                      in_avals)]


def _named_shardings(protos, ntok: int, mesh, avals) -> list:
    from jaxlib import xla_client as xc
    if protos is None:  # a mesh of one device: nothing was partitioned, each value is whole
        return [NamedSharding(mesh, P()) for _ in avals]
    out = []
    for proto, aval in zip(protos[ntok:], avals):
        hlo = xc.HloSharding.from_proto(proto)
        if hlo.is_maximal() and not hlo.is_replicated() and mesh.size > 1:
            # on one device only: a host callback's result nothing else constrains (JAX's
            # GSPMDSharding {maximal device=k}); the other devices' copies are not computed
            k = hlo.tile_assignment_devices()[0]
            out.append(SingleDeviceSharding(mesh.devices.flat[k]))
            continue
        index_of = _index_of_tiles(hlo, aval.shape, mesh.size)
        out.append(NamedSharding(mesh, spec_for_device_map(mesh, aval.shape, index_of)))
    return out


def _check_buffer(buf, x, want) -> None:
    """The runtime trusts a buffer's shape and layout: a global buffer that is not what its
    Array says it is would be read out of bounds (a crash, not an error). AssertionError.
    `want`: `_buffer_sharding` of the Array's sharding (the caller has it at hand)."""
    have = buf.sharding
    if buf.shape != x.aval.shape or (have is not want and have != want):
        raise AssertionError(f"minijax: the buffer of an Array of type {x.aval.str_short()} "
                             f"laid out as {x._sharding} has shape {buf.shape} and sharding "
                             f"{have}")


# JAX: jax/_src/interpreters/pxla.py ExecuteReplicated (with shardings) — differs: arguments
# in another layout are re-placed through the host (JAX copies device to device)
class ExecuteSharded(ExecuteReplicated):
    """ExecuteReplicated for a program partitioned over a mesh: every input is handed to the
    executable as a global buffer in the layout it was compiled for (`in_shardings`), and the
    outputs come back as Arrays in the layouts the partitioner chose (`out_shardings`),
    committed. Runtime tokens of ordered effects are replicated over the mesh's devices."""

    __slots__ = ("in_shardings", "out_shardings", "_in_buffer_shardings")

    def __init__(self, executable, in_avals, out_avals, donated, in_shardings, out_shardings,
                 mesh=None, ordered_effects: Sequence[Any] = (), has_effects: bool = False):
        # One object per distinct sharding and per distinct aval among the inputs and the
        # outputs: a result fed back in (a training step's parameters and optimizer state)
        # then passes the checks of `_input_buffers` and `Compiled.__call__` by identity,
        # not by comparing specs, meshes and shapes (where a call of 100+ arguments would
        # spend most of its host time)
        one: dict = {}
        in_shardings = [s if s is None else one.setdefault(s, s) for s in in_shardings]
        out_shardings = [s if s is None else one.setdefault(s, s) for s in out_shardings]
        in_avals = [one.setdefault(a, a) for a in in_avals]
        out_avals = [one.setdefault(a, a) for a in _typed_avals(out_avals, out_shardings)]
        super().__init__(executable, in_avals, out_avals, donated, ordered_effects, has_effects)
        self.in_shardings = tuple(in_shardings)
        self.out_shardings = tuple(out_shardings)
        self._in_buffer_shardings = tuple(None if s is None else _buffer_sharding(s)
                                          for s in in_shardings)
        from jaxlib import _jax
        self.token_sharding = None if mesh is None else NamedSharding(mesh, P())
        token_sh = [self.token_sharding] * len(self.ordered_effects)
        # an output on one device comes back as the mesh's buffer: its copy there is taken
        whole = [NamedSharding(mesh, P()) if isinstance(s, SingleDeviceSharding)
                 else s for s in out_shardings]
        self.handlers = [_jax.array_result_handler(_buffer_type(a.shape, a.dtype),
                                                   _buffer_sharding(s), committed=True,
                                                   _skip_checks=True)
                         for a, s in zip([*[core.ShapedArray((0,), np.bool_)] * len(token_sh),
                                          *out_avals], [*token_sh, *whole])]

    def _input_buffers(self, args, consts):
        bufs = []
        for x, s, want in zip([*consts, *args], self.in_shardings, self._in_buffer_shardings):
            if type(x) is Array and x._sharding is s and x._buf is not None and not x._deleted:
                buf = x._buf  # the common case: an earlier output or device_put, fed back
                if buf.sharding is not want or buf.shape != x.aval.shape:
                    _check_buffer(buf, x, want)  # the buffer is the one its Array says
                bufs.append(buf)
            elif type(x) is Array and (x._sharding == s or _same_layout(x._sharding, s, x.ndim)):
                buf = x.device_buffer()
                _check_buffer(buf, x, _buffer_sharding(x._sharding))
                bufs.append(buf)
                if x._sharding == s:  # an equal value: the Array keeps the executor's object,
                    x._sharding = s   # and its next call here is checked by identity
            else:
                if type(x) is not Array:
                    guard_host_to_device(core.get_aval(x), s, explicit=False)
                val = x._value() if type(x) is Array else core.to_numpy(x, core.get_aval(x))
                bufs.append(device_put_sharded(np.asarray(val), s))
        return bufs, True  # a program on a mesh: its results are committed to its devices

    def _output_arrays(self, outs, committed):
        return [Array(a, None, _on_device(b, s._device) if isinstance(s, SingleDeviceSharding)
                      else b, True, s)
                for a, b, s in zip(self.out_avals, outs, self.out_shardings)]


def _typed_avals(avals, shardings) -> list:
    """Each aval as an Array laid out by its sharding types it (sharding in types: an
    Explicit mesh's axes in the aval), computed once per executor instead of per result."""
    out = []
    for a, s in zip(avals, shardings):
        t = aval_sharding(s, a.ndim) if a.sharding is None and s is not None else None
        out.append(a if t is None else a.update(sharding=t))
    return out


def _on_device(buf, device):
    """The copy of a global buffer held by `device` (one device's result of a program on a
    mesh: the other devices' copies are not computed)."""
    return next(b for b in buf._arrays if b.devices() == {device})
