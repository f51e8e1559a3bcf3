"""minijax.experimental.pallas.tpu: the TPU half of Pallas' names, as in
jax.experimental.pallas.tpu: memory spaces (`VMEM`, `SMEM`, `ANY`/`HBM`), the scalar-prefetch
grid spec, `CompilerParams` (`dimension_semantics`, `vmem_limit_bytes`) and `InterpretParams`
(interpret mode with the TPU's semantics). Kernels are written once for both modules; in
interpret mode a memory space only labels a buffer. See chapters/16-pallas.md, "Pallas on a
TPU"."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from typing import Sequence

import numpy as np

from minijax import core, lax, numpy as jnp, xla_bridge
from minijax.experimental.pallas import blocks, tpu_primitives as _tpu_primitives
from minijax.experimental.pallas.mosaic.lowering import LoweringException  # noqa: F401
from minijax.experimental.pallas.pallas_call import (
    GridSpec,
    MemoryRef,
    _forced,
    _forced_global,
    when,
)
from minijax.experimental.pallas.primitives import (
    DeviceIdType,
    _check_semaphore,
    run_scoped,
    semaphore_signal,
    semaphore_wait,
)
from minijax.experimental.pallas.tpu_info import (  # noqa: F401
    ChipVersion,
    Tiling,
    TpuInfo,
    get_tpu_info,
    get_tpu_info_for_chip,
    is_tpu_device,
)
from minijax.experimental.pallas.tpu_pipeline import (  # noqa: F401
    BufferedRef,
    BufferedRefBase,
    BufferType,
    emit_pipeline,
    emit_pipeline_with_allocations,
)
from minijax.experimental.pallas.tpu_primitives import (  # noqa: F401
    einshape,
    matmul_acc_lhs,
    matmul_pop,
    matmul_push_rhs,
    pack_elementwise,
    prng_random_bits,
    prng_seed,
    stateful_bernoulli,
    stateful_bits,
    stateful_normal,
    stateful_uniform,
    stochastic_round,
    touch,
    trace_value,
    unpack_elementwise,
)
from minijax.tree_util import tree_leaves


# JAX: jax/_src/pallas/mosaic/core.py MemorySpace
class MemorySpace(enum.Enum):
    """Where a TPU buffer lives. VMEM: the vector memory next to the cores (tens of MiB on a
    v5e), where blocks are loaded and computed on; SMEM: the small scalar memory (indices,
    offsets); HBM: the chip's main memory; SEMAPHORE: DMA semaphores. Calling one,
    `VMEM((8, 128), jnp.float32)`, makes a scratch buffer type for `scratch_shapes`."""

    VMEM = "vmem"
    VMEM_SHARED = "vmem_shared"
    SMEM = "smem"
    CMEM = "cmem"
    HBM = "hbm"
    SEMAPHORE = "semaphore"

    def __call__(self, shape, dtype) -> MemoryRef:
        return MemoryRef(shape, dtype, self)

    def __str__(self) -> str:
        return self.value


VMEM = MemorySpace.VMEM
VMEM_SHARED = MemorySpace.VMEM_SHARED
SMEM = MemorySpace.SMEM
CMEM = MemorySpace.CMEM
HBM = MemorySpace.HBM
SEMAPHORE = MemorySpace.SEMAPHORE


# JAX: jax/_src/pallas/mosaic/core.py GridDimensionSemantics
class GridDimensionSemantics(enum.Enum):
    """How Mosaic may run one grid axis: PARALLEL (iterations independent: it may split
    them across cores), ARBITRARY (in order, e.g. a reduction carried in scratch),
    CORE_PARALLEL / SUBCORE_PARALLEL (split across a chip's TensorCores / subcores)."""

    PARALLEL = "parallel"
    CORE_PARALLEL = "core_parallel"
    SUBCORE_PARALLEL = "subcore_parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
CORE_PARALLEL = GridDimensionSemantics.CORE_PARALLEL
SUBCORE_PARALLEL = GridDimensionSemantics.SUBCORE_PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY


# JAX: jax/_src/pallas/mosaic/core.py CoreType
class CoreType(enum.Enum):
    """The kind of core a kernel runs on: a TensorCore (TC), or a SparseCore's scalar or
    vector subcore."""

    TC = "tc"
    SC_SCALAR_SUBCORE = "sc_scalar_subcore"
    SC_VECTOR_SUBCORE = "sc_vector_subcore"

    def __str__(self) -> str:
        return self.value


# JAX: jax/_src/pallas/mosaic/core.py TensorCoreMesh
@dataclasses.dataclass(frozen=True)
class TensorCoreMesh:
    """A mesh of a device's TensorCores along one axis: `devices` (an array of core ids),
    `axis_names`, and `shape` ({axis name: number of cores})."""

    devices: np.ndarray
    axis_names: Sequence[str]

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def backend(self) -> str:
        return "mosaic_tpu"


# JAX: jax/_src/pallas/mosaic/core.py create_tensorcore_mesh — differs: a device without a
# `num_cores` attribute (a CPU) counts as one core, where JAX raises AttributeError
def create_tensorcore_mesh(axis_name: str, devices=None, num_cores: int | None = None
                           ) -> TensorCoreMesh:
    """The mesh of `num_cores` TensorCores (default: the first device's) named `axis_name`.
    ValueError if both `devices` and `num_cores` are given."""
    if devices is not None and num_cores is not None:
        raise ValueError("cannot specify both devices and num_cores")
    if num_cores is None:
        dev = (devices or xla_bridge.get_backend().local_devices())[0]
        num_cores = getattr(dev, "num_cores", None) or 1
    return TensorCoreMesh(np.arange(num_cores), [axis_name])


# JAX: jax/_src/pallas/mosaic/core.py dma_semaphore
class dma_semaphore:  # JAX's name
    """The dtype of a DMA semaphore, as `pl.semaphore` is a regular one's: interpret mode
    stores either as int16 (`SemaphoreType.DMA((2,))` makes an array of them)."""

    name = "dma_sem"
    dtype = np.dtype(np.int16)


# JAX: jax/_src/pallas/mosaic/core.py SideEffectType
class SideEffectType(enum.Enum):
    """`CompilerParams(has_side_effects=...)`: PURE (may be deduplicated or removed),
    DATAFLOW_SIDE_EFFECTING (may be removed if unused, not deduplicated), SIDE_EFFECTING
    (neither; what `True` means)."""

    PURE = "pure"
    DATAFLOW_SIDE_EFFECTING = "dataflow_side_effecting"
    SIDE_EFFECTING = "side_effecting"


# JAX: jax/_src/pallas/mosaic/core.py CompilerParams — differs: the fields kernels here use
@dataclasses.dataclass(frozen=True)
class CompilerParams(blocks.CompilerParams):
    """Mosaic's options for one pallas_call. `dimension_semantics`: one of "parallel" /
    "arbitrary" (or the enum) per grid axis; `vmem_limit_bytes`: the VMEM budget Mosaic may
    use (None: its default, 16 MiB on a v5e's scoped VMEM). Interpret mode ignores both."""

    dimension_semantics: Sequence[str | GridDimensionSemantics] | None = None
    allow_input_fusion: Sequence[bool] | None = None
    vmem_limit_bytes: int | None = None
    has_side_effects: bool | SideEffectType = False

    def __post_init__(self):
        if self.dimension_semantics is not None:
            sems = tuple(s.value if isinstance(s, GridDimensionSemantics) else str(s)
                         for s in self.dimension_semantics)
            for s in sems:
                if s not in ("parallel", "arbitrary", "core_parallel", "subcore_parallel"):
                    raise ValueError(f"CompilerParams: dimension_semantics entries must be "
                                     "'parallel', 'arbitrary', 'core_parallel' or "
                                     f"'subcore_parallel', got {s!r}")
            object.__setattr__(self, "dimension_semantics", sems)
        if not isinstance(self.has_side_effects, (bool, SideEffectType)):
            raise ValueError(f"Invalid side effect type: {self.has_side_effects}")


# JAX: jax/_src/pallas/mosaic/interpret/params.py InterpretParams — differs: only the checks
# minijax models
@dataclasses.dataclass(frozen=True)
class InterpretParams:
    """`pallas_call(..., interpret=InterpretParams())`: interpret mode that models the TPU's
    pipeline instead of plain interpret mode's "every block is read and written in place".
    On a TPU an output block is copied back to HBM when the grid moves off it and is never
    read back, so a grid that leaves an output block and comes back to it later loses the
    first visit's writes; this mode refuses such a grid ("Revisited block ...", a
    ValueError), as JAX's does. minijax checks the whole grid's output block indices before
    the kernel runs; index maps that read scalar-prefetch values are checked on concrete
    values only (an eager call), and not under jit, where those values are traced.
    `uninitialized_memory`: "nan" (the default) or "zero", what fresh buffers hold."""

    uninitialized_memory: str = "nan"
    detect_races: bool = False

    def __post_init__(self):
        if self.uninitialized_memory not in ("nan", "zero"):
            raise ValueError("InterpretParams: uninitialized_memory must be 'nan' or 'zero', "
                             f"got {self.uninitialized_memory!r}")


# JAX: jax/_src/pallas/mosaic/core.py PrefetchScalarGridSpec
class PrefetchScalarGridSpec(GridSpec):
    """A GridSpec whose first `num_scalar_prefetch` inputs are prefetched whole (on a TPU,
    into scalar memory): the kernel gets them as its first refs and every index map gets
    them after the grid indices, `index_map(*grid_ids, *prefetched)`."""

    def __init__(self, num_scalar_prefetch: int, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()) -> None:
        super().__init__(grid, in_specs, out_specs, scratch_shapes)
        self.num_scalar_prefetch = int(num_scalar_prefetch)


# JAX: jax/_src/pallas/mosaic/core.py SemaphoreType — differs: a semaphore is an int16 ref in
# the SEMAPHORE memory space (interpret mode's representation), not an extended dtype
class SemaphoreType(enum.Enum):
    """A semaphore scratch buffer: `scratch_shapes=[pltpu.SemaphoreType.DMA]` (one) or
    `SemaphoreType.REGULAR((2,))` (an array of them). REGULAR ones are signalled and waited
    on by the kernel (`pl.semaphore_signal`/`_wait`); DMA ones by copies (`async_copy`)."""

    REGULAR = "regular"
    DMA = "dma"
    BARRIER = "barrier"

    def __call__(self, shape=()) -> MemoryRef:
        return MemoryRef(tuple(shape), np.int16, SEMAPHORE)

    def get_ref_aval(self):
        return self(()).get_ref_aval()


# JAX: jax/_src/pallas/mosaic/primitives.py AsyncCopyDescriptor — differs: interpret mode's
# semantics written with ref reads and writes, not dma_start/dma_wait primitives
class AsyncCopyDescriptor:
    """A copy of all of `src_ref` into `dst_ref` that signals `sem`. `start()`: the copy
    (interpret mode does it at once) and the semaphore incremented by the number of elements
    copied (at most 32767); `wait()`: the semaphore decremented by as much (the copy is done)."""

    def __init__(self, src_ref, dst_ref, sem, send_sem=None, device_id=None,
                 device_id_type=DeviceIdType.MESH) -> None:
        src, dst = core.get_aval(src_ref), core.get_aval(dst_ref)
        _check_semaphore("async_copy", sem)
        if (send_sem is None) != (device_id is None):
            raise ValueError("Either both or neither `src_sem` and `device_id` can be set.")
        if send_sem is not None:
            _check_semaphore("make_async_remote_copy", send_sem)
            _check_own_device(device_id)
        self.src_sem, self.device_id, self.device_id_type = send_sem, device_id, device_id_type
        if tuple(src.shape) != tuple(dst.shape) or src.dtype != dst.dtype:
            raise ValueError(f"pltpu.async_copy: the source {src.str_short()} and destination "
                             f"{dst.str_short()} must have the same shape and dtype")
        self.src_ref, self.dst_ref, self.dst_sem = src_ref, dst_ref, sem
        self._size = min(int(np.prod(dst.shape, dtype=np.int64)), np.iinfo(np.int16).max)

    def start(self, priority: int = 0, *, add: bool = False) -> None:
        del priority
        val = self.src_ref[...]
        self.dst_ref[...] = self.dst_ref[...] + val if add else val
        self.dst_sem[...] = self.dst_sem[...] + np.int16(self._size)
        if self.src_sem is not None:
            self.src_sem[...] = self.src_sem[...] + np.int16(self._size)

    def wait(self) -> None:
        if self.src_sem is not None:
            self.wait_send()
        self.wait_recv()

    def wait_recv(self) -> None:
        """Wait for the copy to arrive: the destination's semaphore decremented."""
        self.dst_sem[...] = self.dst_sem[...] - np.int16(self._size)

    def wait_send(self) -> None:
        """Wait for a remote copy to leave: the source's semaphore decremented. ValueError for
        a local copy."""
        if self.src_sem is None:
            raise ValueError("Cannot `wait_send` on a local copy.")
        self.src_sem[...] = self.src_sem[...] - np.int16(self._size)


def _check_own_device(device_id) -> None:
    # one device: the only destination is this device, id 0 along every mesh axis
    for d in tree_leaves(device_id):
        if not isinstance(d, core.Tracer) and int(np.asarray(d)) != 0:
            raise NotImplementedError(f"pltpu.make_async_remote_copy: device {device_id} is "
                                      "not this device (minijax's interpret mode runs one)")


# JAX: jax/_src/pallas/mosaic/primitives.py make_async_remote_copy — differs: one device, so
# the destination is this device (a copy that signals both semaphores)
def make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                           device_id_type=DeviceIdType.MESH) -> AsyncCopyDescriptor:
    """A copy of `src_ref` into `dst_ref` on device `device_id` that signals `send_sem`
    here and `recv_sem` there; `.start()`, then `.wait_send()` / `.wait_recv()` (or `.wait()`,
    both). minijax runs one device: NotImplementedError for a device id other than 0."""
    return AsyncCopyDescriptor(src_ref, dst_ref, recv_sem, send_sem, device_id, device_id_type)


# JAX: jax/_src/pallas/mosaic/primitives.py async_remote_copy
def async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                      device_id_type=DeviceIdType.MESH) -> AsyncCopyDescriptor:
    """`make_async_remote_copy(...)`, started."""
    desc = make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                                  device_id_type)
    desc.start()
    return desc


# JAX: jax/_src/pallas/mosaic/helpers.py run_on_first_core
def run_on_first_core(core_axis_name: str):
    """A decorator: `run_on_first_core("core")(f)` runs `f()` only on core 0 of the axis
    (with one core: `f()`, its result returned)."""
    if lax.axis_size(core_axis_name) == 1:
        return lambda f: f()

    def wrapped(f):
        when(lax.axis_index(core_axis_name) == 0)(f)
    return wrapped


# JAX: jax/_src/pallas/mosaic/helpers.py core_barrier
def core_barrier(sem, *, core_axis_name: str) -> None:
    """Wait until every core of `core_axis_name` reaches this point: each signals `sem` on
    every other core, then waits for the others' signals. With one core, nothing."""
    num_cores = lax.axis_size(core_axis_name)
    if num_cores == 1:
        return
    core_id = lax.axis_index(core_axis_name)
    for i in range(num_cores):
        when(core_id != i)(lambda i=i: semaphore_signal(sem, 1, core_index=i))
    semaphore_wait(sem, num_cores - 1)


# JAX: jax/_src/pallas/mosaic/interpret/interpret_pallas_call.py force_tpu_interpret_mode
@contextlib.contextmanager
def force_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()):
    """Within the `with`, every pallas_call traced without `interpret=` on this thread runs
    with `interpret=params` (None: as it asks)."""
    missing = object()
    prev = getattr(_forced, "params", missing)
    _forced.params = params
    try:
        yield
    finally:
        if prev is missing:
            del _forced.params
        else:
            _forced.params = prev


# JAX: jax/_src/pallas/mosaic/interpret/interpret_pallas_call.py set_tpu_interpret_mode
def set_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()) -> None:
    """From now on, every pallas_call traced without `interpret=` (on any thread outside a
    `force_tpu_interpret_mode`) runs with `interpret=params`; None turns this off."""
    _forced_global[0] = params


# JAX: jax/_src/pallas/mosaic/interpret/interpret_pallas_call.py reset_tpu_interpret_mode_state
def reset_tpu_interpret_mode_state() -> None:
    """Drop the state TPU interpret mode keeps between kernels (JAX: its simulated memories,
    left for inspection after a failing kernel). minijax's interpret mode keeps one piece: the
    MXU state a failing kernel may leave behind (`matmul_push_rhs`...), cleared here."""
    _tpu_primitives._mxu.__dict__.clear()


# JAX: jax/_src/pallas/mosaic/primitives.py make_async_copy
def make_async_copy(src_ref, dst_ref, sem) -> AsyncCopyDescriptor:
    """A copy from `src_ref` to `dst_ref` (same shape and dtype, else ValueError) signalling
    the DMA semaphore `sem`; `.start()` and `.wait()` it."""
    return AsyncCopyDescriptor(src_ref, dst_ref, sem)


# JAX: jax/_src/pallas/mosaic/primitives.py async_copy
def async_copy(src_ref, dst_ref, sem, *, priority: int = 0, add: bool = False
               ) -> AsyncCopyDescriptor:
    """`make_async_copy(...)`, started (`add=True`: the destination accumulates)."""
    desc = make_async_copy(src_ref, dst_ref, sem)
    desc.start(priority=priority, add=add)
    return desc


# JAX: jax/_src/pallas/mosaic/helpers.py sync_copy
def sync_copy(src_ref, dst_ref, *, add: bool = False) -> None:
    """Copy `src_ref` into `dst_ref` (pytrees of refs) and wait: a DMA with its own scoped
    semaphore."""
    srcs, dsts = tree_leaves(src_ref), tree_leaves(dst_ref)
    if not srcs:
        return

    def body(sem):
        descs = [async_copy(s, d, sem, add=add) for s, d in zip(srcs, dsts)]
        for d in descs:
            d.wait()
    run_scoped(body, SemaphoreType.DMA(()))


# JAX: jax/_src/pallas/mosaic/primitives.py bitcast — differs: bitcast_convert_type and
# reshapes (JAX's own lowering of it outside Mosaic), not a primitive
def bitcast(x, ty):
    """`x`'s bits read as dtype `ty`; the second-minor dimension is scaled by the ratio of
    bit widths (4 rows of int8 become 1 row of int32). ValueError for a 1-D `x` or a
    second-minor dimension that does not pack evenly. Differs: minijax's
    `bitcast_convert_type` keeps the bit width, so a width change raises its TypeError."""
    ty = np.dtype(ty)
    if len(x.shape) < 2:
        raise ValueError("Not implemented: bitcast 1D")
    src, dst = np.dtype(x.dtype).itemsize * 8, ty.itemsize * 8
    if x.shape[-2] * src % dst:
        raise ValueError("Not implemented: the 2nd minor dim can not be perfectly packed or "
                         "unpacked")
    if src < dst:
        *lead, m, n = x.shape
        x = jnp.swapaxes(x.reshape(*lead, m // (dst // src), dst // src, n), -1, -2)
        return lax.bitcast_convert_type(x, ty)
    if src > dst:
        y = lax.bitcast_convert_type(x, ty)
        *lead, m, n, packing = y.shape
        return jnp.swapaxes(y, -1, -2).reshape(*lead, m * packing, n)
    return lax.bitcast_convert_type(x, ty)


# JAX: jax/_src/pallas/mosaic/primitives.py roll — differs: jnp.roll (JAX's lowering outside
# Mosaic), not a primitive
def roll(x, shift, axis: int, *, stride: int | None = None, stride_axis: int | None = None):
    """`jnp.roll(x, shift, axis)`, the TPU's lane/sublane rotation; with `stride`, slice k
    along `stride_axis` is rolled by `shift + k * stride`. ValueError for a negative static
    shift, an axis out of range, or only one of stride/stride_axis."""
    if isinstance(shift, int) and shift < 0:
        raise ValueError("shift must be non-negative.")
    if axis < 0 or axis >= len(x.shape):
        raise ValueError("axis is out of range.")
    if (stride is None) != (stride_axis is None):
        raise ValueError("stride and stride_axis must be both specified or not.")
    if stride is None:
        return jnp.roll(x, shift, axis)
    if stride < 0:
        raise ValueError("stride must be non-negative.")
    if stride_axis < 0 or stride_axis >= len(x.shape):
        raise ValueError("stride_axis is out of range")
    if axis == stride_axis:
        raise ValueError("expected axis and stride_axis are different.")
    parts = jnp.split(x, x.shape[stride_axis], stride_axis)
    return jnp.concatenate([jnp.roll(p, shift + i * stride, axis) for i, p in enumerate(parts)],
                           stride_axis)


# JAX: jax/_src/pallas/mosaic/primitives.py load
def load(ref, *, mask=None):
    """All of `ref`. Where `mask` is False the TPU leaves the values unspecified; interpret
    mode gives what the ref holds there, as JAX's."""
    del mask
    return ref[...]


# JAX: jax/_src/pallas/mosaic/primitives.py store
def store(ref, val, *, mask=None) -> None:
    """Write `val` into all of `ref`, where `mask` is True (everywhere without a mask)."""
    if mask is not None:
        val = jnp.where(mask, val, ref[...])
    ref[...] = val


# JAX: jax/_src/pallas/mosaic/primitives.py with_memory_space_constraint — differs: a no-op
# (minijax's pallas_call does not place its operands by it)
def with_memory_space_constraint(x, memory_space):
    """`x`, asking that a pallas_call given it reads it from `memory_space` (HBM, VMEM or
    SMEM; NotImplementedError for others)."""
    if memory_space not in (HBM, VMEM, SMEM):
        raise NotImplementedError("with_memory_space_constraint only supports HBM, VMEM and "
                                  "SMEM.")
    return x


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
