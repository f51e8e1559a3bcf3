"""`pallas_call`: run a kernel written against refs over a grid of blocks; here, interpret mode
(the TPU's compiled path is mosaic/pallas_call_registration.py).

The kernel is traced once, on refs of its *block* shapes, to a jaxpr (the param of the
`pallas_call` primitive). Interpret mode (what JAX's `interpret=True` does) then discharges
the kernel's state and runs the grid as a loop: at each grid point the BlockSpec index maps
give each operand's block index, the blocks are cut out with `dynamic_slice`, the pure kernel
computes the new contents of the output (and scratch) blocks, and `dynamic_update_slice`
writes them back. The whole thing is an ordinary minijax program, compiled through minijax's
own StableHLO lowering. Mirrors jax/_src/pallas/pallas_call.py and
jax/_src/pallas/hlo_interpreter.py.
"""

from __future__ import annotations

import enum
import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from minijax import core, effects, lax, numpy as jnp
from minijax.ad_util import Zero
from minijax.core import ClosedJaxpr, ShapedArray
from minijax.experimental.pallas.blocks import (
    Blocked,
    BoundedSlice,
    Buffered,
    CostEstimate,
    Element,
    Indirect,
    NoBlockSpec,
    Squeezed,
    block_dim_size,
    canonical_block_dim,
)
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.pjit import jit
from minijax.state.discharge import _eval_discharged, always_discharge, discharge_rules
from minijax.state.types import AbstractRef
from minijax.tree_util import tree_flatten, tree_unflatten
from minijax.util import split_list

_CHAPTER = "chapters/16-pallas.md"


# ---------------------------------------------------------------------------------------------
# The kernel language: program_id, num_programs, when, cdiv
# ---------------------------------------------------------------------------------------------

class _GridContext(threading.local):
    def __init__(self) -> None:
        self.stack: list[tuple[int, ...]] = []  # grids of the kernels being traced
        self.ids: list[list[Any]] = []  # grid indices of the loop iteration being traced


_grid_ctx = _GridContext()


def _current_grid(what: str) -> tuple[int, ...]:
    if not _grid_ctx.stack:
        raise ValueError(f"pl.{what} can only be called inside a kernel run by pallas_call")
    return _grid_ctx.stack[-1]


def _check_axis(what: str, axis: int, grid: tuple[int, ...]) -> None:
    if not 0 <= axis < len(grid):
        raise ValueError(f"pl.{what}: axis {axis} is out of range for a grid of rank "
                         f"{len(grid)}")


# JAX: jax/_src/pallas/primitives.py program_id_p
program_id_p = core.Primitive("program_id")
program_id_p.def_abstract_eval(lambda *, axis: ShapedArray((), np.int32))


@program_id_p.def_impl
def _program_id_impl(*, axis):
    raise ValueError("program_id: only meaningful inside a kernel run by pallas_call")


def _program_id_discharge(in_vals, is_ref, *, axis):
    # inside interpret mode's grid loop: the loop's index along `axis`; elsewhere (e.g.
    # discharge_state of a kernel jaxpr on its own) the equation stays as it is
    if _grid_ctx.ids:
        return _grid_ctx.ids[-1][axis], []
    return program_id_p.bind(axis=axis), []


discharge_rules[program_id_p] = _program_id_discharge
always_discharge.add(program_id_p)


# JAX: jax/_src/pallas/primitives.py program_id
def program_id(axis: int):
    """The index of this kernel instance along grid axis `axis` (an int32 scalar)."""
    _check_axis("program_id", axis, _current_grid("program_id"))
    return program_id_p.bind(axis=axis)


# JAX: jax/_src/pallas/primitives.py num_programs — differs: grids are static, so no primitive
def num_programs(axis: int) -> int:
    """The size of grid axis `axis` (a Python int: grids are static here)."""
    grid = _current_grid("num_programs")
    _check_axis("num_programs", axis, grid)
    return grid[axis]


# JAX: jax/_src/pallas/utils.py cdiv
def cdiv(a, b):
    """Ceiling division: `(a + b - 1) // b` for ints; for integer arrays (traced or not)
    `lax.div(a + (b - 1), b)`, which rounds toward zero, as JAX's."""
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return (int(a) + int(b) - 1) // int(b)
    return lax.div(a + (b - 1), b)


# JAX: jax/_src/pallas/helpers.py when
def when(condition):
    """`@pl.when(cond)` runs the decorated (argument-less) function only where `cond` holds:
    a `lax.cond` whose false branch does nothing."""

    def decorator(f: Callable):
        if isinstance(condition, (bool, np.bool_)):
            if condition:
                f()
            return None
        lax.cond(condition, lambda: (f(), None)[1], lambda: None)
        return None
    return decorator


# ---------------------------------------------------------------------------------------------
# BlockSpec and the grid mapping
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/core.py BlockSpec
class BlockSpec:
    """Which block of an array one kernel instance sees.

    `block_shape`: one entry per array dimension: an int block size (`pl.Blocked(n)`), None
    (`pl.squeezed`: a size-1 block whose dimension is left out of the kernel's ref), or
    `pl.Element(n, padding)` (the index map gives the element offset, not the block index).
    `index_map(*grid_indices)` returns one index per dimension (for a blocked dimension the
    element offset is block index * block size). Both None: the whole array, at every grid
    point. `memory_space`: where the operand lives (`pltpu.VMEM`, `pl.ANY`...);
    `pipeline_mode`: a `pl.Buffered(n)` (TypeError for anything else).
    """

    def __init__(self, block_shape: Sequence | None = None, index_map: Callable | None = None,
                 *, memory_space=None, pipeline_mode: Buffered | None = None) -> None:
        if pipeline_mode is not None and not isinstance(pipeline_mode, Buffered):
            raise TypeError(f"BlockSpec: pipeline_mode must be a pl.Buffered, got "
                            f"{pipeline_mode!r}")
        self.block_shape = None if block_shape is None else tuple(block_shape)
        self.index_map = index_map
        self.memory_space = memory_space
        self.pipeline_mode = pipeline_mode

    def __repr__(self) -> str:
        return f"BlockSpec(block_shape={self.block_shape}, index_map={self.index_map})"


# JAX: jax/_src/pallas/core.py GridSpec
class GridSpec:
    """The grid, the in/out BlockSpecs and the scratch shapes of a pallas_call in one object
    (`pallas_call(..., grid_spec=GridSpec(...))`). `num_scalar_prefetch` is 0 here; the
    subclass `tpu.PrefetchScalarGridSpec` sets it."""

    num_scalar_prefetch = 0

    def __init__(self, grid=(), in_specs=None, out_specs=None, scratch_shapes=()) -> None:
        self.grid, self.in_specs, self.out_specs = grid, in_specs, out_specs
        self.scratch_shapes = tuple(scratch_shapes)


# JAX: jax/_src/pallas/core.py MemoryRef
class MemoryRef:
    """The type of a scratch buffer: a shape, a dtype and a memory space (which interpret
    mode ignores: every buffer is an ordinary array)."""

    def __init__(self, shape, dtype, memory_space) -> None:
        self.shape, self.dtype, self.memory_space = tuple(shape), np.dtype(dtype), memory_space

    def get_ref_aval(self) -> AbstractRef:
        return AbstractRef(ShapedArray(self.shape, self.dtype), self.memory_space)

    def __repr__(self) -> str:
        return f"MemoryRef({self.get_ref_aval().str_short()}, {self.memory_space})"


# JAX: jax/_src/pallas/core.py MemorySpace
class MemorySpace(enum.Enum):
    """Device-agnostic memory spaces. `pl.ANY(shape, dtype)` makes a scratch buffer type."""

    ANY = "any"
    DEFAULT = "default"
    ERROR = "error"
    INDEX = "index"
    KEY = "key"
    HOST = "host"

    def __call__(self, shape, dtype) -> MemoryRef:
        return MemoryRef(shape, dtype, self)

    def __str__(self) -> str:
        return self.value


ANY = MemorySpace.ANY
HOST = MemorySpace.HOST


# JAX: jax/_src/pallas/core.py BlockMapping
class BlockMapping:
    """A BlockSpec resolved against one operand: its array aval, the block shape (None for
    squeezed dimensions), the index map traced to a jaxpr of the grid indices, the
    BlockSpec's memory space (None: the default, VMEM on a TPU) and the kind of each block
    dimension (`block_dims`: Blocked, Element, Squeezed...; None: Blocked or Squeezed, as
    `block_shape` says)."""

    __slots__ = ("origin", "array_aval", "block_shape", "index_map_jaxpr", "memory_space",
                 "block_dims")

    def __init__(self, origin: str, array_aval: ShapedArray, block_shape: tuple,
                 index_map_jaxpr: ClosedJaxpr, memory_space: Any = None,
                 block_dims: tuple | None = None) -> None:
        self.origin = origin
        self.array_aval = array_aval
        self.block_shape = block_shape
        self.index_map_jaxpr = index_map_jaxpr
        self.memory_space = memory_space
        self.block_dims = block_dims

    @property
    def element_dims(self) -> tuple:
        """Per dimension: its `Element` (the index map gives an element offset), or None."""
        dims = self.block_dims or (None,) * len(self.block_shape)
        return tuple(d if isinstance(d, Element) else None for d in dims)

    @property
    def block_sizes(self) -> tuple[int, ...]:
        return tuple(1 if b is None else b for b in self.block_shape)

    @property
    def ref_aval(self) -> AbstractRef:
        shape = tuple(b for b in self.block_shape if b is not None)
        return AbstractRef(ShapedArray(shape, self.array_aval.dtype), self.memory_space)

    def __repr__(self) -> str:
        return (f"BlockMapping({self.origin}: {self.array_aval.str_short()}, "
                f"block_shape={self.block_shape})")


def _block_mapping(kernel_name: str, origin: str, spec, aval: ShapedArray,
                   grid: tuple[int, ...], scalar_avals: Sequence[ShapedArray] = ()
                   ) -> BlockMapping:
    if isinstance(spec, NoBlockSpec):
        spec = None
    if spec is None or (spec.block_shape is None and spec.index_map is None):
        block_shape, index_map = aval.shape, (lambda *ids: (0,) * aval.ndim)
    elif not isinstance(spec, BlockSpec):
        raise TypeError(f"pallas_call of {kernel_name}: the spec for {origin} must be a "
                        f"pl.BlockSpec, got {spec!r}")
    else:
        block_shape = aval.shape if spec.block_shape is None else spec.block_shape
        index_map = spec.index_map or (lambda *ids: (0,) * len(block_shape))
    if len(block_shape) != aval.ndim:
        raise ValueError(
            f"pallas_call of {kernel_name}: the block shape {tuple(block_shape)} for {origin} "
            f"must have the same number of dimensions as the array shape {aval.shape}")
    dims = tuple(canonical_block_dim(kernel_name, origin, b) for b in block_shape)
    for d in dims:
        if isinstance(d, (BoundedSlice, Indirect)):  # JAX's interpreter refuses them too
            raise ValueError(f"pallas_call of {kernel_name}: Unsupported block dim type: "
                             f"{type(d)} for {origin} (neither interpret mode nor minijax's "
                             "Mosaic lowering takes it)")
    # the grid indices, then (scalar prefetch) refs to the whole prefetched operands, as in JAX
    # (on a TPU they sit in SMEM and `idx[i]` is a scalar load)
    idx_avals = [ShapedArray((), np.int32)] * len(grid) + _prefetch_refs(scalar_avals)

    def flat_index_map(*ids):
        out = index_map(*ids)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    jaxpr, consts, out_avals = pe.trace_to_jaxpr_dynamic(
        flat_index_map, idx_avals, fun_name=getattr(index_map, "__name__", "index_map"),
        purpose="a pallas_call index map")
    if len(out_avals) != len(block_shape):
        raise ValueError(
            f"pallas_call of {kernel_name}: the index_map for {origin} must return "
            f"{len(block_shape)} values to match block_shape={tuple(block_shape)}, but returns "
            f"{len(out_avals)} (it is called with {len(grid)} grid indices)")
    for a in out_avals:
        if a.shape != () or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"pallas_call of {kernel_name}: the index_map for {origin} must "
                            f"return integer scalars, got {a.str_short()}")
    if any(isinstance(c, core.Tracer) for c in consts):
        raise ValueError(f"pallas_call of {kernel_name}: the index_map for {origin} closes "
                         "over a traced value; index maps may only use the grid indices")
    plain = all(isinstance(d, (Blocked, Squeezed)) for d in dims)  # no block_dims needed
    return BlockMapping(origin, aval, tuple(None if isinstance(d, Squeezed) else
                                            block_dim_size(d) for d in dims),
                        ClosedJaxpr(jaxpr, consts), getattr(spec, "memory_space", None),
                        None if plain else dims)


def _prefetch_refs(avals) -> list[AbstractRef]:
    return [a if isinstance(a, AbstractRef) else AbstractRef(a) for a in avals]


def _scratch_aval(kernel_name: str, s) -> AbstractRef:
    if isinstance(s, AbstractRef):
        return s
    if hasattr(s, "get_ref_aval"):  # MemoryRef, pltpu.SemaphoreType
        return s.get_ref_aval()
    try:
        return AbstractRef(ShapedArray(tuple(s.shape), np.dtype(s.dtype)),
                           getattr(s, "memory_space", None))
    except (AttributeError, TypeError):
        raise TypeError(f"pallas_call of {kernel_name}: scratch_shapes entries need a shape "
                        f"and a dtype (e.g. ShapeDtypeStruct), got {s!r}") from None


def _as_aval(kernel_name: str, s) -> ShapedArray:
    try:
        return ShapedArray(tuple(s.shape), np.dtype(s.dtype))
    except (AttributeError, TypeError):
        raise TypeError(f"pallas_call of {kernel_name}: out_shape entries need a shape and a "
                        f"dtype (e.g. ShapeDtypeStruct), got {s!r}") from None


def _specs_list(kernel_name, what, specs, n):
    if specs is None or isinstance(specs, (BlockSpec, NoBlockSpec)):
        return [specs] * n
    flat, _ = tree_flatten(specs, is_leaf=lambda x: x is None or isinstance(
        x, (BlockSpec, NoBlockSpec)))
    if len(flat) != n:
        raise ValueError(f"pallas_call of {kernel_name}: {len(flat)} {what} for {n} "
                         f"{'inputs' if what == 'in_specs' else 'outputs'}")
    return flat


# ---------------------------------------------------------------------------------------------
# pallas_call and its primitive
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/pallas_call.py pallas_call
def pallas_call(kernel: Callable, out_shape, *, grid_spec: GridSpec | None = None, grid=(),
                in_specs=None, out_specs=None, scratch_shapes=(), input_output_aliases=None,
                interpret=False, name=None, compiler_params=None, debug: bool = False,
                cost_estimate: CostEstimate | None = None, **unused):
    """`pallas_call(kernel, out_shape, grid=..., in_specs=..., out_specs=...)(*inputs)`.

    `kernel(*in_refs, *out_refs, *scratch_refs)` writes its outputs through refs of the block
    shapes given by the BlockSpecs. `grid` (an int or a tuple of ints) says how many instances
    run; `out_shape` is a ShapeDtypeStruct or a pytree of them. `input_output_aliases` maps an
    input index to an output index whose initial contents it provides.

    `interpret=True` (or `pltpu.InterpretParams()`) runs the grid as a loop of ordinary ops on
    any backend. `interpret=False` compiles the kernel with Mosaic on a TPU (mosaic/
    pallas_call_registration.py) and raises ValueError on a CPU, as JAX does. Raises
    ValueError/TypeError for block shapes of the wrong rank, index maps returning the wrong
    number of values, or a kernel returning a value.

    `grid_spec` (a `GridSpec`, or `tpu.PrefetchScalarGridSpec(num_scalar_prefetch, ...)`)
    replaces `grid`/`in_specs`/`out_specs`/`scratch_shapes`. With scalar prefetch, the first
    `num_scalar_prefetch` inputs are passed whole: to the kernel as its first refs, and to
    every index map after the grid indices (`index_map(*ids, *prefetched)`), so a block's
    position may depend on data (the group of a row tile, say).

    `compiler_params`: an instance of a `pl.CompilerParams` subclass (`pltpu.CompilerParams`);
    `cost_estimate`: a `pl.CostEstimate` (else TypeError), passed to XLA in the TPU custom
    call.
    """
    del unused
    kernel_name = name or getattr(kernel, "__name__", None) or getattr(
        getattr(kernel, "func", None), "__name__", "kernel")
    if cost_estimate is not None and not isinstance(cost_estimate, CostEstimate):
        raise TypeError(f"pallas_call of {kernel_name}: cost_estimate must be a "
                        f"pl.CostEstimate, got {cost_estimate!r}")
    n_prefetch = 0
    if grid_spec is not None:
        if grid or in_specs is not None or out_specs is not None or scratch_shapes:
            raise ValueError(f"pallas_call of {kernel_name}: pass either grid_spec or "
                             "grid/in_specs/out_specs/scratch_shapes, not both")
        grid, in_specs, out_specs = grid_spec.grid, grid_spec.in_specs, grid_spec.out_specs
        scratch_shapes, n_prefetch = grid_spec.scratch_shapes, grid_spec.num_scalar_prefetch
    grid = (grid,) if isinstance(grid, (int, np.integer)) else tuple(int(g) for g in grid)
    out_flat, out_tree = tree_flatten(out_shape)
    out_avals = [_as_aval(kernel_name, s) for s in out_flat]
    aliases = tuple(sorted((input_output_aliases or {}).items()))

    def wrapped(*args):
        nonlocal interpret
        if not interpret and forced_interpret() is not None:  # pltpu.force_tpu_interpret_mode
            interpret = forced_interpret()
        args_flat, _ = tree_flatten(args)
        in_avals = [core.get_aval(x).strip_weak_type() for x in args_flat]
        if len(in_avals) < n_prefetch:
            raise ValueError(f"pallas_call of {kernel_name}: {n_prefetch} scalar prefetch "
                             f"operands expected, got {len(in_avals)} inputs")
        pre = in_avals[:n_prefetch]
        in_bms = [_block_mapping(kernel_name, f"args[{i}]", None, a, grid, pre)
                  for i, a in enumerate(pre)]
        in_bms += [_block_mapping(kernel_name, f"args[{i + n_prefetch}]", s, a, grid, pre)
                   for i, (s, a) in enumerate(zip(_specs_list(
                       kernel_name, "in_specs", in_specs, len(args_flat) - n_prefetch),
                       in_avals[n_prefetch:]))]
        out_bms = [_block_mapping(kernel_name, f"outputs[{i}]", s, a, grid, pre)
                   for i, (s, a) in enumerate(zip(_specs_list(
                       kernel_name, "out_specs", out_specs, len(out_avals)), out_avals))]
        for i, o in aliases:
            if not (0 <= i < len(in_avals) and 0 <= o < len(out_avals)) or not core.typematch(
                    in_avals[i], out_avals[o]):
                raise ValueError(f"pallas_call of {kernel_name}: input_output_aliases maps "
                                 f"input {i} to output {o}, which must exist and have the same "
                                 "shape and dtype")
        scratch = [_scratch_aval(kernel_name, s) for s in scratch_shapes]
        ref_avals = [bm.ref_aval for bm in in_bms + out_bms] + scratch
        jaxpr = _trace_kernel(kernel, kernel_name, grid, ref_avals)
        if _tpu_semantics(interpret):
            _check_no_revisits(kernel_name, grid, out_bms, args_flat[:n_prefetch])
        outs = pallas_call_p.bind(
            *args_flat, jaxpr=jaxpr, grid=grid, in_block_mappings=tuple(in_bms),
            out_block_mappings=tuple(out_bms), scratch_avals=tuple(scratch),
            input_output_aliases=aliases, name=kernel_name, vmapped_dims=0,
            num_scalar_prefetch=n_prefetch, interpret=interpret,
            compiler_params=compiler_params, cost_estimate=cost_estimate)
        if debug:
            print(f"The kernel jaxpr for pallas_call {kernel_name}:\n{jaxpr}")
        return tree_unflatten(out_tree, outs)
    return wrapped


def _trace_kernel(kernel, kernel_name, grid, ref_avals) -> ClosedJaxpr:
    trace = pe.DynamicJaxprTrace(kernel_name, "a pallas_call kernel")
    try:
        refs = [trace.new_arg(a) for a in ref_avals]
        _grid_ctx.stack.append(grid)
        try:
            with core.set_current_trace(trace), core.reset_name_stack():
                out = kernel(*refs)
        finally:
            _grid_ctx.stack.pop()
        if out is not None:
            raise ValueError(f"pallas_call of {kernel_name}: the kernel must return None (it "
                             "writes its outputs through refs), got a value")
        jaxpr, consts = trace.to_jaxpr([])
    finally:
        trace.invalidate()
    if any(isinstance(c, core.Tracer) for c in consts):
        raise ValueError(f"pallas_call of {kernel_name}: the kernel closes over a traced value "
                         "(e.g. an argument of an enclosing jit); pass it as an input instead")
    return ClosedJaxpr(_dce_kernel(jaxpr), consts)


# JAX: jax/_src/pallas/pallas_call.py _trace_kernel_to_jaxpr's dce_jaxpr — differs: an
# equation with inner jaxprs (`pl.when`, `fori_loop`) always stays, whole (minijax's do not
# carry their bodies' effects on refs)
def _dce_kernel(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """The kernel without what no ref write needs (e.g. block offsets computed for a causal
    mask that a kernel built non-causal never applies); a ref's write stays, an unused read
    goes, as in JAX."""
    live, eqns = set(), []
    for eqn in reversed(jaxpr.eqns):
        if not (any(v in live for v in eqn.outvars) or any(
                core.jaxprs_in_param(p) for p in eqn.params.values()) or
                effects.dceable_effects.filter_not_in(eqn.effects)):
            continue
        eqns.append(eqn)
        live.update(v for v in eqn.invars if isinstance(v, core.Var))
    return core.Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns[::-1])


# JAX: jax/_src/pallas/pallas_call.py pallas_call_p
pallas_call_p = core.Primitive("pallas_call")
pallas_call_p.multiple_results = True
pallas_call_p.pp_first_params = ("name",)
pe.dce_kept_whole.add(pallas_call_p)  # JAX: _pallas_call_dce_rule (a vjp's forward kernel runs)
pallas_call_p.pp_hidden_params = ("in_block_mappings", "out_block_mappings")
pallas_call_p.pp_hide_if_empty = ("scratch_avals", "input_output_aliases", "vmapped_dims",
                                  "num_scalar_prefetch", "compiler_params", "cost_estimate")


@pallas_call_p.def_abstract_eval
def _pallas_call_abstract_eval(*avals, out_block_mappings, **params):
    return [bm.array_aval for bm in out_block_mappings]


# ---------------------------------------------------------------------------------------------
# Interpret mode: the grid as a loop over blocks
# ---------------------------------------------------------------------------------------------

def _element_padding(bm: BlockMapping) -> list[tuple[int, int]]:
    return [(0, 0) if e is None else tuple(e.padding) for e in bm.element_dims]


def _padded_shape(bm: BlockMapping) -> tuple[int, ...]:
    # Blocks that run past the end of the array (a grid that does not divide it) read padding
    # and their writes there are dropped, as in JAX's interpret mode; an Element dimension's
    # own padding comes first.
    return tuple(cdiv(n + lo + hi, b) * b for n, (lo, hi), b in
                 zip(bm.array_aval.shape, _element_padding(bm), bm.block_sizes))


# JAX: jax/_src/pallas/primitives.py uninitialized_value
def uninitialized_value(dtype) -> np.ndarray:
    """What interpret mode puts where nothing was written: NaN for floats, the smallest
    integer for ints, False for bools (JAX's choice, so reading garbage shows up)."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        return np.array(np.nan, dtype)
    if np.issubdtype(dtype, np.integer):
        return np.array(np.iinfo(dtype).min, dtype)
    return np.zeros((), dtype)


# JAX: jax/_src/config.py pallas_tpu_interpret_mode_context_manager — the InterpretParams
# a pallas_call without `interpret=` runs with (pltpu.set_tpu_interpret_mode: all threads;
# pltpu.force_tpu_interpret_mode: this thread, within a `with`)
_forced = threading.local()
_forced_global: list = [None]


def forced_interpret():
    return getattr(_forced, "params", _forced_global[0])


def _tpu_semantics(interpret) -> bool:
    from minijax.experimental.pallas.tpu import InterpretParams  # tpu.py imports this module
    return isinstance(interpret, InterpretParams)


def _uninitialized_fill(interpret) -> Callable:
    """What fresh output and scratch buffers hold: `uninitialized_value`, or zeros under
    `InterpretParams(uninitialized_memory="zero")`."""
    if _tpu_semantics(interpret) and interpret.uninitialized_memory == "zero":
        return lambda dtype: np.zeros((), dtype)
    return uninitialized_value


# ---------------------------------------------------------------------------------------------
# InterpretParams: a revisited output block is an error, as on a TPU
# ---------------------------------------------------------------------------------------------

def _output_block_indices(grid, out_bms, prefetched) -> list[np.ndarray]:
    """Each output's block index at every grid point in the loop's order, as int arrays
    [steps, ndim]: the index maps run once, batched over the whole grid (a small eager
    program, even while an enclosing jit traces)."""
    from minijax.api import vmap  # api imports pallas through minijax.experimental
    ids = np.indices(grid, dtype=np.int32).reshape(len(grid), -1)

    def indices(*ids_and_pre):
        # the index maps read prefetched operands through refs: evaluate them discharged
        return [jnp.stack([lax.convert_element_type(i, np.int32) for i in _eval_discharged(
            bm.index_map_jaxpr.jaxpr, bm.index_map_jaxpr.consts, list(ids_and_pre))[
                :len(bm.block_shape)]]) for bm in out_bms]
    with core.ensure_compile_time_eval():
        outs = vmap(indices, in_axes=(0,) * len(grid) + (None,) * len(prefetched))(
            *ids, *prefetched)
    return [np.broadcast_to(np.asarray(o), (ids.shape[1], len(bm.block_shape)))
            for o, bm in zip(outs, out_bms)]


# JAX: jax/_src/pallas/mosaic/interpret/interpret_pallas_call.py _check_for_revisiting —
# differs: checked before the kernel runs, on the whole grid's block indices
def _check_no_revisits(kernel_name, grid, out_bms, prefetched) -> None:
    """A TPU keeps an output block in VMEM while the grid stays on it, copies it to HBM when
    the block index changes, and never reads it back: coming back to a block later starts
    from garbage and overwrites the first stay's writes. Raise ValueError (JAX's message) for
    a grid that does. With scalar prefetch the indices depend on data: the check runs on
    concrete prefetched values, and is skipped when they are traced (under jit)."""
    if not grid or any(isinstance(p, core.Tracer) for p in prefetched):
        return
    for o, (bm, idx) in enumerate(zip(out_bms, _output_block_indices(grid, out_bms,
                                                                      prefetched))):
        stays: dict[tuple, list[int]] = {}  # block -> [first, last] iteration on it
        prev = None
        for k, blk in enumerate(map(tuple, idx.tolist())):
            if blk != prev and blk in stays:
                rng = tuple(i if b is None else slice(i * b, (i + 1) * b, 1)
                            for i, b in zip(blk, bm.block_shape))
                first, last = (tuple(int(i) for i in np.unravel_index(j, grid))
                               for j in stays[blk])
                loop_idx = tuple(int(i) for i in np.unravel_index(k, grid))
                raise ValueError(
                    f"Revisited block {rng} of output {o} in iteration {loop_idx}. The block "
                    f"was previously visited in iterations {first} through {last} . "
                    f"(pallas_call of {kernel_name} with InterpretParams: on a TPU the grid "
                    "left this block, which was then written back and is never read back; "
                    f"order the grid so that each output block's visits are consecutive. See "
                    f"{_CHAPTER})")
            stays.setdefault(blk, [k, k])[1] = k
            prev = blk


def _pad(x, bm: BlockMapping):
    shape = _padded_shape(bm)
    if shape == tuple(bm.array_aval.shape):
        return x
    return lax.pad(x, uninitialized_value(x.dtype), [
        (lo, p - n - lo, 0) for p, n, (lo, _) in zip(shape, bm.array_aval.shape,
                                                     _element_padding(bm))])


def _unpad(x, bm: BlockMapping):
    if tuple(x.shape) == tuple(bm.array_aval.shape):
        return x
    lows = [lo for lo, _ in _element_padding(bm)]
    return lax.slice(x, lows, [lo + n for lo, n in zip(lows, bm.array_aval.shape)])


def _block_starts(bm: BlockMapping, ids, prefetched=()):
    # the index map reads the prefetched operands through refs: evaluate it discharged
    idx = _eval_discharged(bm.index_map_jaxpr.jaxpr, bm.index_map_jaxpr.consts,
                           [*ids, *prefetched])[:len(bm.block_shape)]
    return [lax.convert_element_type(i, np.int32) if e is not None else
            lax.mul(lax.convert_element_type(i, np.int32), np.int32(b))
            for i, b, e in zip(idx, bm.block_sizes, bm.element_dims)]


# JAX: jax/_src/pallas/hlo_interpreter.py _dynamic_slice, _dynamic_update_slice — a block
# start past the array is clamped, a negative one counted from the end first (lax's rule)
def _read_block(x, bm: BlockMapping, starts):
    blk = lax.dynamic_slice(x, starts, bm.block_sizes)
    shape = bm.ref_aval.shape
    return blk if tuple(blk.shape) == shape else lax.reshape(blk, shape)


def _write_block(x, blk, bm: BlockMapping, starts):
    if tuple(blk.shape) != bm.block_sizes:
        blk = lax.reshape(blk, bm.block_sizes)
    return lax.dynamic_update_slice(x, blk, starts)


def _unravel(k, grid):
    """Grid indices (int32 scalars) of the flat iteration `k`, the last axis fastest."""
    ids = []
    for g in reversed(grid):
        ids.append(lax.rem(k, np.int32(g)))
        k = lax.div(k, np.int32(g))
    return ids[::-1]


# JAX: jax/_src/pallas/hlo_interpreter.py pallas_call_hlo_interpret
def _pallas_call_interpret(*args, jaxpr, grid, in_block_mappings, out_block_mappings,
                           scratch_avals, input_output_aliases, name, vmapped_dims,
                           num_scalar_prefetch, interpret, compiler_params, cost_estimate):
    """The pallas_call as an ordinary minijax program: pad, loop over the grid, unpad."""
    del name, compiler_params, cost_estimate
    if alias_padding := [i for i, _ in input_output_aliases if any(
            p != (0, 0) for p in _element_padding(in_block_mappings[i]))]:
        raise NotImplementedError(f"Padding with aliasing not supported (input {alias_padding[0]}"
                                  " has an Element dimension with padding)")
    n_in, n_out = len(in_block_mappings), len(out_block_mappings)
    fresh = _uninitialized_fill(interpret)
    alias = dict(input_output_aliases)
    ins = [_pad(x, bm) for x, bm in zip(args, in_block_mappings)]
    outs = []
    for o, bm in enumerate(out_block_mappings):
        src = [i for i, oo in alias.items() if oo == o]
        init = args[src[0]] if src else jnp.full(bm.array_aval.shape,
                                                  fresh(bm.array_aval.dtype))
        outs.append(_pad(init, bm))
    # semaphores start at zero, as on a TPU and in JAX's interpret mode; other scratch holds
    # the uninitialised value
    scratch = [jnp.zeros(a.shape, a.dtype) if str(a.memory_space) == "semaphore" else
               jnp.full(a.shape, fresh(a.dtype)) for a in scratch_avals]
    steps = int(np.prod(grid, dtype=np.int64))

    def body(k, carry):
        outs, scratch = carry
        ids = _unravel(lax.convert_element_type(k, np.int32), grid)
        pre = args[:num_scalar_prefetch]
        in_starts = [_block_starts(bm, ids, pre) for bm in in_block_mappings]
        out_starts = [_block_starts(bm, ids, pre) for bm in out_block_mappings]
        in_blocks = [_read_block(x, bm, s) for x, bm, s in
                     zip(ins, in_block_mappings, in_starts)]
        out_blocks = [_read_block(x, bm, s) for x, bm, s in
                      zip(outs, out_block_mappings, out_starts)]
        # the kernel, discharged, with program_id reading this iteration's grid indices
        _grid_ctx.ids.append(ids[vmapped_dims:])
        try:
            finals = _eval_discharged(jaxpr.jaxpr, jaxpr.consts,
                                      [*in_blocks, *out_blocks, *scratch])
        finally:
            _grid_ctx.ids.pop()
        _, new_outs, new_scratch = finals[:n_in], finals[n_in:n_in + n_out], finals[n_in + n_out:]
        outs = [_write_block(x, blk, bm, s) for x, blk, bm, s in
                zip(outs, new_outs, out_block_mappings, out_starts)]
        return outs, list(new_scratch)

    if steps == 1:
        outs, _ = body(np.int32(0), (outs, scratch))
    else:
        outs, _ = lax.fori_loop(0, steps, body, (outs, scratch))
    return [_unpad(x, bm) for x, bm in zip(outs, out_block_mappings)]


# Registered (with the TPU's) in minijax/experimental/pallas/mosaic/pallas_call_registration.py
def _pallas_call_interpret_lowering(ctx, *args, **params):
    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
        lambda *xs: _pallas_call_interpret(*xs, **params), ctx.avals_in,
        fun_name=params["name"], purpose="pallas_call interpret mode")
    return mlir.lower_jaxpr(jaxpr, consts, args)



# JAX: jax/_src/pallas/pallas_call.py _pallas_call_impl — differs: always interpret mode
_impl_cache: dict[Any, Callable] = {}


def _consts_key(consts) -> tuple:
    return tuple((np.asarray(c).dtype.str, np.shape(c), np.asarray(c).tobytes()) for c in consts)


def _callables_key(jaxpr: core.Jaxpr) -> tuple:
    # the printer shows a callable param by its name only; tell same-named ones apart by id
    out = []
    for eqn in jaxpr.eqns:
        for v in eqn.params.values():
            for sub in core.jaxprs_in_param(v):
                out.extend(_callables_key(sub))
            if callable(v) and not isinstance(v, (core.Jaxpr, ClosedJaxpr, type)):
                out.append(id(v))
    return tuple(out)


def _params_key(params: dict) -> tuple:
    """A hashable key for a pallas_call's params: each retrace of a kernel makes new jaxpr
    objects, so equal programs are recognised by their text (and consts)."""
    def closed_key(c: ClosedJaxpr):
        return str(c.jaxpr), _consts_key(c.consts), _callables_key(c.jaxpr)
    key = []
    for k in sorted(params):
        v = params[k]
        if isinstance(v, ClosedJaxpr):
            key.append((k, closed_key(v)))
        elif k.endswith("block_mappings"):
            key.append((k, tuple((bm.origin, bm.array_aval, bm.block_shape, bm.block_dims,
                                  closed_key(bm.index_map_jaxpr)) for bm in v)))
        else:
            key.append((k, v))
    return tuple(key)


@pallas_call_p.def_impl
def _pallas_call_impl(*args, **params):
    """Eagerly, a pallas_call is `jit` of itself, compiled once per distinct kernel program
    (the same kernel called again with the same shapes reuses the executable)."""
    key = _params_key(params)
    fn = _impl_cache.get(key)
    if fn is None:
        fn = _impl_cache[key] = jit(functools.partial(pallas_call_p.bind, **params))
    return fn(*args)


# ---------------------------------------------------------------------------------------------
# vmap: one more grid axis; jvp: a kernel for primals and tangents
# ---------------------------------------------------------------------------------------------

def _batched_mapping(bm: BlockMapping, dim, axis_size: int, n_grid: int,
                     prefetch_avals: Sequence[ShapedArray] = ()) -> BlockMapping:
    """`bm` for the grid with the batch index in front; a batched operand (batch axis `dim`)
    gets a squeezed block dimension there, indexed by the batch index."""
    old = bm.index_map_jaxpr

    def index_map(b, *ids):
        idx = core.eval_jaxpr(old.jaxpr, old.consts, *ids)
        return idx if dim is batching.not_mapped else [*idx[:dim], b, *idx[dim:]]

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
        index_map, [ShapedArray((), np.int32)] * (n_grid + 1) + _prefetch_refs(prefetch_avals),
        fun_name="index_map",
        purpose="a batched pallas_call index map")
    if dim is batching.not_mapped:
        return BlockMapping(bm.origin, bm.array_aval, bm.block_shape, ClosedJaxpr(jaxpr, consts),
                            bm.memory_space, bm.block_dims)
    shape, block, dims = bm.array_aval.shape, bm.block_shape, bm.block_dims
    aval = bm.array_aval.update(shape=(*shape[:dim], axis_size, *shape[dim:]))
    return BlockMapping(bm.origin, aval, (*block[:dim], None, *block[dim:]),
                        ClosedJaxpr(jaxpr, consts), bm.memory_space,
                        dims and (*dims[:dim], Squeezed(), *dims[dim:]))


# JAX: jax/_src/pallas/pallas_call.py _pallas_call_batching_rule — the batch axis becomes a
# new leading grid axis; each instance sees one batch element (a squeezed block dimension at
# the operand's own batch axis, so no transpose is needed); an aliased input is moved (or
# broadcast) to axis 0 like the outputs it initialises
def _pallas_call_batch_rule(vals, dims, *, axis_size, jaxpr, grid, in_block_mappings,
                            out_block_mappings, scratch_avals, input_output_aliases, name,
                            vmapped_dims, num_scalar_prefetch, **backend_params):
    if any(d is not batching.not_mapped for d in dims[:num_scalar_prefetch]):
        raise NotImplementedError(f"vmap of pallas_call ({name}) over its scalar prefetch "
                                  "operands is not supported")
    vals, dims = list(vals), list(dims)
    for i, _ in input_output_aliases:
        vals[i], dims[i] = batching.bdim_at_front(vals[i], dims[i], axis_size), 0
    n_grid = len(grid)
    pre = [core.get_aval(v) for v in vals[:num_scalar_prefetch]]
    in_bms = tuple(_batched_mapping(bm, d, axis_size, n_grid, pre)
                   for bm, d in zip(in_block_mappings, dims))
    out_bms = tuple(_batched_mapping(bm, 0, axis_size, n_grid, pre)
                    for bm in out_block_mappings)
    outs = pallas_call_p.bind(*vals, jaxpr=jaxpr, grid=(axis_size,) + tuple(grid),
                              in_block_mappings=in_bms, out_block_mappings=out_bms,
                              scratch_avals=scratch_avals,
                              input_output_aliases=input_output_aliases, name=name,
                              vmapped_dims=vmapped_dims + 1,
                              num_scalar_prefetch=num_scalar_prefetch, **backend_params)
    return outs, [0] * len(outs)


batching.primitive_batchers[pallas_call_p] = _pallas_call_batch_rule


# JAX: jax/_src/pallas/pallas_call.py _pallas_call_jvp_rule — the kernel jaxpr itself is
# differentiated: one kernel with a tangent ref beside each ref, over the same grid
def _pallas_call_jvp(primals, tangents, *, jaxpr, grid, in_block_mappings,
                     out_block_mappings, scratch_avals, input_output_aliases, name,
                     vmapped_dims, num_scalar_prefetch, **backend_params):
    if input_output_aliases:
        raise NotImplementedError(f"jvp of pallas_call ({name}) with input_output_aliases is "
                                  "not supported (nor in JAX)")
    nz_in = [type(t) is not Zero for t in tangents]
    n_in, n_out, n_s = len(primals), len(out_block_mappings), len(scratch_avals)
    jvp_closed, _ = ad.jvp_jaxpr(jaxpr, nz_in + [True] * (n_out + n_s), instantiate=True)
    j = jvp_closed.jaxpr
    # jvp_jaxpr's inputs are (primal refs..., tangent refs...); pallas_call's must be
    # (inputs, outputs, scratch): put each tangent group beside its primal group
    p_in, p_out, p_s, t_in, t_out, t_s = split_list(
        j.invars, [n_in, n_out, n_s, sum(nz_in), n_out])
    j = core.Jaxpr(j.constvars, [*p_in, *t_in, *p_out, *t_out, *p_s, *t_s], j.outvars, j.eqns)
    t_bms = [bm for bm, nz in zip(in_block_mappings, nz_in) if nz]
    outs = pallas_call_p.bind(
        *primals, *[t for t in tangents if type(t) is not Zero],
        jaxpr=ClosedJaxpr(j, jvp_closed.consts), grid=grid,
        in_block_mappings=tuple(in_block_mappings) + tuple(t_bms),
        out_block_mappings=tuple(out_block_mappings) * 2,
        scratch_avals=tuple(scratch_avals) * 2, input_output_aliases=(), name=name,
        vmapped_dims=vmapped_dims, num_scalar_prefetch=num_scalar_prefetch, **backend_params)
    return outs[:n_out], outs[n_out:]


ad.primitive_jvps[pallas_call_p] = _pallas_call_jvp
