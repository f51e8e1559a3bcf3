"""Running compiled programs: the executors (one device, outputs in another memory, a
committed device, a mesh), the runtime tokens of ordered effects, the C++ result handlers that
make the outputs Arrays, and the layouts the partitioner chose.

Compiling is `minijax/compiler.py`, whose device buffers are these programs' inputs and outputs.
Mirrors the executable half of jax/_src/interpreters/pxla.py (and dispatch.py's runtime tokens).
Taught in chapters/07-jit.md.
"""

from __future__ import annotations

import atexit
import functools
import threading
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from minijax import compiler, core
from minijax.array import Array, execution_results
from minijax.config import config
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import P
from minijax.sharding_impls import SingleDeviceSharding, aval_sharding, spec_for_device_map
from minijax.xla_bridge import default_device

# ---------------------------------------------------------------------------------------------
# Running a program on one device: result handlers, runtime tokens, the executors
# ---------------------------------------------------------------------------------------------

def execute(executable, buffers: Sequence[Any], handlers: list | None = None) -> list:
    """Run `executable` on device buffers; returns one device buffer per output, without
    waiting for the computation to finish (XLA dispatches asynchronously).

    `handlers` (from `result_handlers`) make the output buffers in C++; without them jaxlib's
    `execute` builds each one through Python (~8 us per output).
    """
    if handlers is None:
        return executable.execute(buffers)
    return executable.execute_sharded(buffers).consume_with_handlers(handlers)


# JAX: jax/_src/array.py _array_global_result_handler — differs: one device, uncommitted
def result_handlers(avals) -> list | None:
    """One C++ result handler per output aval (what JAX's dispatch uses), or None where an
    aval has no plain XLA type (float0), for which `execute` takes jaxlib's generic path.

    This is device-buffer plumbing, not tracing: jaxlib's handler wraps each output buffer as
    a device array; its type descriptor comes from `compiler.buffer_type`."""
    from jaxlib import _jax
    if any(a.dtype.names is not None for a in avals):  # float0 is a structured dtype
        return None
    sharding = compiler.single_device_sharding(default_device())
    return [_jax.array_result_handler(compiler.buffer_type(a.shape, a.dtype), sharding,
                                      committed=False, _skip_checks=True) for a in avals]


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
            tok = (compiler.device_put(zeros) if sharding is None
                   else compiler.device_put_sharded(zeros, sharding))
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


# JAX: jax/_src/interpreters/pxla.py MeshExecutableFastpathData — differs: one device, no
# shardings; read by minijax/pjit.py JitWrapped.__call__ where JAX's is read by C++
class MeshExecutableFastpathData(NamedTuple):
    """What a cached top-level `jit` call needs to run a plain `ExecuteReplicated` program
    (one device, no effects, donation or closed-over arrays) on device Arrays without its
    executor: the XLA executable, the outputs' result handlers and avals, and the function
    rebuilding the output pytree from its leaves (None: the output is one leaf), and the
    positions of the argument leaves the executable takes (None: all; JAX's kept_var_idx)."""
    xla_executable: Any
    handlers: list
    out_avals: tuple
    unflatten: Callable | None
    kept: tuple | None = None


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
        handlers = self.handlers  # execute(), inline
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
                bufs.append(compiler.on_default_device(x) if config._default_device_set
                            else x._buf)
                if x._committed:
                    committed = True
            elif type(x) is Array:
                bufs.append(x.device_buffer())
                committed = committed or x._committed
            else:
                i = len(bufs) - n
                bufs.append(compiler.device_put_arg(x, self.in_avals[n + i], i))
        return bufs, committed

    def _output_arrays(self, outs: list, committed: bool) -> list[Array]:
        return execution_results(self.out_avals, outs, committed)

    def _delete_donated(self, args: Sequence[Any], n_consts: int) -> None:
        # A reused buffer now holds an output: the input Array must not be read again. As in
        # JAX, an input whose donation no output could use stays alive.
        for x, d in zip(args, (self.donated or ())[n_consts:]):
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
                    compiler.buffer_type(a.shape, a.dtype), compiler.buffer_sharding(s),
                    committed=True, _skip_checks=True)

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
            want = compiler.buffer_sharding(sharding)
            self.handlers = [_jax.array_result_handler(h_aval, want, committed=True,
                                                       _skip_checks=True)
                             for h_aval in [compiler.buffer_type((0,), np.bool_)] *
                             len(self.ordered_effects) + [compiler.buffer_type(a.shape, a.dtype)
                                                          for a in out_avals]]

    def __call__(self, args, consts=()):
        bufs = []
        for x in [*consts, *args]:
            if type(x) is Array and x._sharding == self.sharding:
                bufs.append(x.device_buffer())
            else:
                if type(x) is not Array:
                    compiler.guard_host_to_device(core.get_aval(x), self.sharding, explicit=False)
                val = x._value() if type(x) is Array else core.to_numpy(x, core.get_aval(x))
                bufs.append(compiler.device_put_sharded(np.asarray(val), self.sharding))
        if self.has_effects:
            outs = self._execute_with_tokens(bufs)
        else:
            outs = execute(self.executable, bufs, self.handlers)
        if self.donated is not None:
            self._delete_donated(args, len(consts))
        return [Array(a, None, b, True, self.sharding) for a, b in zip(self.out_avals, outs)]


# ---------------------------------------------------------------------------------------------
# Many devices: the partitioner's layouts and the sharded executor
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _same_layout(have, want, ndim: int) -> bool:
    """Do two shardings put the same slices on the same devices (P() and P(None,) do)? Cached:
    a sharded call asks it of every argument, every call."""
    return have is not None and want is not None and have.is_equivalent_to(want, ndim)


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
    `want`: `compiler.buffer_sharding` of the Array's sharding (the caller has it at hand)."""
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
        self._in_buffer_shardings = tuple(None if s is None else compiler.buffer_sharding(s)
                                          for s in in_shardings)
        from jaxlib import _jax
        self.token_sharding = None if mesh is None else NamedSharding(mesh, P())
        token_sh = [self.token_sharding] * len(self.ordered_effects)
        # an output on one device comes back as the mesh's buffer: its copy there is taken
        whole = [NamedSharding(mesh, P()) if isinstance(s, SingleDeviceSharding)
                 else s for s in out_shardings]
        self.handlers = [_jax.array_result_handler(compiler.buffer_type(a.shape, a.dtype),
                                                   compiler.buffer_sharding(s), committed=True,
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
                _check_buffer(buf, x, compiler.buffer_sharding(x._sharding))
                bufs.append(buf)
                if x._sharding == s:  # an equal value: the Array keeps the executor's object,
                    x._sharding = s   # and its next call here is checked by identity
            else:
                if type(x) is not Array:
                    compiler.guard_host_to_device(core.get_aval(x), s, explicit=False)
                val = x._value() if type(x) is Array else core.to_numpy(x, core.get_aval(x))
                bufs.append(compiler.device_put_sharded(np.asarray(val), s))
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
