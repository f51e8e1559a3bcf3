"""The kernel language beyond refs and `program_id`, as in jax/_src/pallas/primitives.py,
helpers.py and utils.py: `run_scoped` (scratch refs for a region of the kernel), `loop`,
`multiple_of`, `reciprocal`, `delay`, `debug_print`, semaphores (`semaphore_signal`/`_wait`/
`_read`, with interpret mode's single-threaded semaphore semantics), `empty`, and the integer
helpers (`align_to`, `next_power_of_2`, `strides_from_shape`). See chapters/16-pallas.md."""

from __future__ import annotations

import enum
from typing import Any, Callable

import numpy as np

from minijax import core, effects, lax, numpy as jnp
from minijax.core import ClosedJaxpr
from minijax.debugging import debug_print as _debug_print
from minijax.experimental.pallas.pallas_call import _scratch_aval, cdiv, uninitialized_value
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.state.discharge import (
    _eval_discharged,
    always_discharge,
    discharge_rules,
    run_state,  # noqa: F401 (pl.run_state)
)
from minijax.state.types import AbstractRef
from minijax.tree_util import tree_flatten, tree_map, tree_unflatten

# ---------------------------------------------------------------------------------------------
# Integer helpers
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/utils.py align_to
def align_to(a, alignment):
    """`a` rounded up to a multiple of `alignment` (ints, or integer arrays)."""
    return cdiv(a, alignment) * alignment


# JAX: jax/_src/pallas/utils.py next_power_of_2
def next_power_of_2(x: int) -> int:
    """The smallest power of two >= `x` (1 for 0). ValueError for a negative `x`."""
    if x < 0:
        raise ValueError("`next_power_of_2` requires a non-negative integer.")
    return 1 if x == 0 else 2 ** (x - 1).bit_length()


# JAX: jax/_src/pallas/utils.py strides_from_shape
def strides_from_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The row-major strides, in elements, of an array of `shape`."""
    size, strides = int(np.prod(shape)), []
    for s in shape:
        size //= s
        strides.append(int(size))
    return tuple(strides)


# ---------------------------------------------------------------------------------------------
# Values: empty, multiple_of, reciprocal, broadcast_to
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/helpers.py empty (lax.empty) — differs: zeros, as minijax's lax.empty
def empty(shape, dtype):
    """An array of `shape` and `dtype` whose values no one should read."""
    return lax.empty(shape, dtype)


# JAX: jax/_src/pallas/helpers.py empty_like
def empty_like(x):
    """`empty` for each leaf of the pytree `x` (leaves with `.shape` and `.dtype`)."""
    return tree_map(lambda leaf: empty(leaf.shape, leaf.dtype), x)


# JAX: jax/_src/state/primitives.py broadcast_to — differs: jnp.broadcast_to's equations
def broadcast_to(a, shape):
    """`a` broadcast to `shape` (NumPy's rules; ValueError if it cannot be)."""
    return jnp.broadcast_to(a, shape)


# JAX: jax/_src/pallas/primitives.py multiple_of_p
multiple_of_p = core.Primitive("multiple_of")
multiple_of_p.def_impl(lambda x, *, values: x)
multiple_of_p.def_abstract_eval(lambda aval, *, values: aval)
mlir.register_lowering(multiple_of_p, lambda ctx, x, *, values: [x])
ad.primitive_jvps[multiple_of_p] = lambda p, t, *, values: (
    multiple_of_p.bind(p[0], values=values), t[0])
batching.primitive_batchers[multiple_of_p] = lambda v, d, *, axis_size, values: (
    multiple_of_p.bind(v[0], values=values), d[0])


# JAX: jax/_src/pallas/primitives.py multiple_of
def multiple_of(x, values):
    """`x`, with the promise to the compiler that it is a multiple of each of `values` (an int
    or a sequence of ints): Mosaic then knows, e.g., that a dynamic offset is aligned
    (`tpu.assume_multiple`). A false promise is undefined behaviour on a TPU; the value is
    unchanged everywhere."""
    values = (values,) if isinstance(values, (int, np.integer)) else tuple(values)
    return multiple_of_p.bind(x, values=tuple(int(v) for v in values))


# JAX: jax/_src/pallas/primitives.py reciprocal — differs: a division, not a primitive (the
# TPU's approximate reciprocal is not modelled: `approx=True` gives the exact value)
def reciprocal(x, *, approx: bool = False, full_range: bool = True):
    """1 / x, elementwise (a float array)."""
    del approx, full_range
    return lax.div(lax.full_like(x, 1), x)


# ---------------------------------------------------------------------------------------------
# Control: loop, run_scoped, with_scoped, delay, debug_print
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/helpers.py loop
def loop(lower, upper, *, init_carry=None, step=1, unroll=None):
    """`@pl.loop(lo, hi, step=s)` runs the decorated `body(i)` for i = lo, lo+s, ... < hi (a
    `fori_loop` over cdiv(hi - lo, s) iterations); with `init_carry`, `body(i, carry)` returns
    the new carry and the decorator returns the last one."""
    concrete = all(isinstance(v, (int, np.integer)) for v in (lower, upper, step))
    if not concrete:
        idx_type = jnp.result_type(lower, upper, step)
        lower, upper, step = (lax.convert_element_type(v, idx_type)
                              for v in (lower, upper, step))
    zero = 0 if concrete else jnp.array(0, dtype=idx_type)

    def decorator(body):
        if init_carry is None:
            def body_fn(i, _):
                body(lower + i * step)
        else:
            def body_fn(i, carry):
                return body(lower + i * step, carry)
        kw = {} if unroll is None else {"unroll": unroll}
        return lax.fori_loop(zero, cdiv(upper - lower, step), body_fn, init_carry, **kw)
    return decorator


# JAX: jax/_src/pallas/primitives.py run_scoped_p — its jaxpr's invars are the refs and
# values it closes over, then the scoped refs
run_scoped_p = core.Primitive("run_scoped")
run_scoped_p.multiple_results = True
run_scoped_p.def_abstract_eval(lambda *avals, jaxpr, num_scoped: list(jaxpr.out_avals))


def _run_scoped_discharge(in_vals, is_ref, *, jaxpr, num_scoped):
    """The body on the outer refs' values and fresh buffers (interpret mode's uninitialised
    value); the outer refs get the body's final values."""
    scoped = [v.aval for v in jaxpr.jaxpr.invars[len(in_vals):]]
    fresh = [jnp.full(a.shape, uninitialized_value(a.dtype)) for a in scoped]
    outs = _eval_discharged(jaxpr.jaxpr, jaxpr.consts, [*in_vals, *fresh])
    n_out = len(jaxpr.out_avals)
    finals = iter(outs[n_out:])  # one per ref invar, in order: outer refs first
    return outs[:n_out], [next(finals) if isinstance(v.aval, AbstractRef) else None
                          for v in jaxpr.jaxpr.invars[:len(in_vals)]]


discharge_rules[run_scoped_p] = _run_scoped_discharge
always_discharge.add(run_scoped_p)
run_scoped_p.def_impl(lambda *args, **params: _run_scoped_discharge(
    args, [False] * len(args), **params)[0])


# JAX: jax/_src/pallas/primitives.py run_scoped
def run_scoped(f: Callable, *types, collective_axes=(), **kw_types) -> Any:
    """Call `f` with new refs of the given types (`pltpu.VMEM((8, 128), jnp.float32)`,
    `pltpu.SemaphoreType.DMA`, ShapeDtypeStructs...) as positional and keyword arguments, and
    return what it returns. The refs live only during the call: scratch memory for one region
    of a kernel. `f` may read and write refs of the enclosing kernel. `collective_axes`
    (sharing the allocation across cores) raises NotImplementedError: one core here."""
    if collective_axes not in ((), None):
        raise NotImplementedError("pl.run_scoped: collective_axes is not supported (minijax "
                                  "runs one core)")
    flat_types, in_tree = tree_flatten((types, kw_types), is_leaf=lambda t: not isinstance(
        t, (tuple, list, dict)))
    avals = [_scratch_aval("run_scoped", t) for t in flat_types]
    out_trees = []

    def flat_f(*refs):
        args, kwargs = tree_unflatten(in_tree, list(refs))
        flat, tree = tree_flatten(f(*args, **kwargs))
        out_trees.append(tree)
        return flat

    jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(
        flat_f, avals, fun_name=getattr(f, "__name__", "run_scoped"), purpose="pl.run_scoped")
    jaxpr = pe.convert_constvars_jaxpr(jaxpr)  # the closed-over refs and values become invars
    outs = run_scoped_p.bind(*consts, jaxpr=ClosedJaxpr(jaxpr, []), num_scoped=len(avals))
    return tree_unflatten(out_trees[0], outs)


# JAX: jax/_src/pallas/helpers.py with_scoped
def with_scoped(*types, collective_axes=(), **kw_types):
    """`@pl.with_scoped(types...)` makes `f(*args)` call `f(*args, *scoped_refs)` inside a
    `run_scoped` with those types."""
    def decorator(f):
        def inner(*args):
            return run_scoped(lambda *refs, **kw: f(*args, *refs, **kw), *types,
                              collective_axes=collective_axes, **kw_types)
        return inner
    return decorator


class DelayEffect(effects.Effect):
    """`pl.delay`: keeps the equation alive where nothing reads its (absent) results."""


delay_effect = DelayEffect()

# JAX: jax/_src/pallas/primitives.py delay_p
delay_p = core.Primitive("delay")
delay_p.multiple_results = True
delay_p.def_effectful_abstract_eval(lambda nanos: ([], {delay_effect}))
discharge_rules[delay_p] = lambda in_vals, is_ref: ([], [None])  # interpret mode: no wait
always_discharge.add(delay_p)


# JAX: jax/_src/pallas/primitives.py delay
def delay(nanos) -> None:
    """Wait `nanos` nanoseconds (an int or an int32 scalar); nothing, in interpret mode."""
    delay_p.bind(nanos)


# JAX: jax/_src/pallas/primitives.py debug_print
def debug_print(fmt: str, *args) -> None:
    """Print `fmt.format(*args)` from inside a kernel, each time the kernel instance runs
    (interpret mode: a `jax.debug.print` in the grid loop)."""
    _debug_print(fmt, *args)


# ---------------------------------------------------------------------------------------------
# Semaphores
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/pallas/primitives.py DeviceIdType
class DeviceIdType(enum.Enum):
    """How `device_id` of a remote signal or copy is given: a position on the mesh, or a
    logical device id."""

    MESH = "mesh"
    LOGICAL = "logical"


def _check_semaphore(what: str, sem) -> AbstractRef:
    aval = core.get_aval(sem)
    if not isinstance(aval, AbstractRef) or str(aval.memory_space) != "semaphore":
        raise TypeError(f"pl.{what}: expected a semaphore ref (a pltpu.SemaphoreType scratch "
                        f"buffer), got {getattr(aval, 'str_short', lambda: aval)()}")
    return aval


# JAX: jax/_src/pallas/primitives.py semaphore_read — differs: a ref read, not a primitive
def semaphore_read(sem):
    """The semaphore's value (an int32 scalar; an array for an array of semaphores)."""
    _check_semaphore("semaphore_read", sem)
    return lax.convert_element_type(sem[...], np.int32)


# JAX: jax/_src/pallas/primitives.py semaphore_signal — differs: a read and a write of the
# semaphore ref (interpret mode's semantics), not a primitive
def semaphore_signal(sem, inc=1, *, device_id=None, device_id_type=DeviceIdType.MESH,
                     core_index=None) -> None:
    """Add `inc` to the semaphore. Signalling another device's (`device_id`) or core's
    semaphore raises NotImplementedError: one device, one core here."""
    aval = _check_semaphore("semaphore_signal", sem)
    if not isinstance(device_id_type, DeviceIdType):
        raise TypeError(f"pl.semaphore_signal: device_id_type must be a pl.DeviceIdType, got "
                        f"{device_id_type!r}")
    if device_id is not None:
        raise NotImplementedError("Remote signal not implemented.")
    if core_index is not None:
        raise NotImplementedError("Multiple core support not implemented.")
    sem[...] = sem[...] + lax.convert_element_type(inc, aval.dtype)


# JAX: jax/_src/pallas/primitives.py semaphore_wait — differs as semaphore_signal
def semaphore_wait(sem, value=1, *, decrement: bool = True) -> None:
    """Wait until the semaphore reaches `value`, then (`decrement`) subtract it. Interpret
    mode runs one kernel instance at a time, so there is nothing to wait for: it subtracts,
    as JAX's interpret mode does."""
    aval = _check_semaphore("semaphore_wait", sem)
    if decrement:
        sem[...] = sem[...] - lax.convert_element_type(value, aval.dtype)
