"""`compute_on`: mark the operations traced inside a block (or a decorated function) to run on
the host, or on the device. Mirrors jax/_src/compute_on.py (the context-manager form, which
JAX's lowering carries on every op as the frontend attribute `_xla_compute_type`). Taught in
chapters/24-memory-offloading.md.

Each equation records the compute type in force when it was traced (`JaxprEqn.ctx`, see
minijax/core.py JaxprEqnContext); transformations rebind an equation under its context, so the
equations `grad`, `vmap` and `jit` derive from it keep it; `jit` keys its caches on it, and the
lowering (minijax/interpreters/mlir.py wrap_compute_type_in_place) writes it on each op.
"""

from __future__ import annotations

import contextlib

from minijax import api, tree_util
from minijax.config import config
from minijax.dispatch import MemorySpace

_VALID = ("device_host", "device", "tpu_sparsecore")


# JAX: jax/_src/compute_on.py extend_compute_type
@contextlib.contextmanager
def extend_compute_type(c_type: str | None):
    """Put the compute type `c_type` in force inside the block (None: leave it as it is)."""
    if c_type is None:
        yield
        return
    with config.trace_state("compute_on_context_manager", c_type):
        yield c_type


# JAX: jax/_src/compute_on.py compute_on
@contextlib.contextmanager
def compute_on(compute_type: str):
    """`with compute_on('device_host'):` or `@compute_on('device_host')`: the operations traced
    inside run where `compute_type` says: 'device_host' (XLA's `_xla_compute_type = "host"`),
    'device' ("dense"), 'tpu_sparsecore' ("sparseoffload"), or 'gpu_stream:N' (a GPU stream,
    `_xla_stream_annotation = "N"`). It takes effect through tracing, so use it inside `jit`
    or on a jitted function; the innermost block wins. On the CPU backend host and device are
    one processor and XLA runs the program as it would without the marks.

    Raises TypeError if `compute_type` is not a string, ValueError if it is none of these
    (both when the block is entered, or when the decorated function is called, as in JAX)."""
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    _check_valid(compute_type)
    with extend_compute_type(compute_type):
        yield


# JAX: jax/_src/compute_on.py compute_on2 — differs: no `compute_on` primitive: `f` is staged
# as a `jit` traced under the compute type (its ops carry the same marks) and each output is
# put in its memory space with `device_put`; no compiler options
def compute_on2(f=None, *, compute_type: str, out_memory_spaces, compiler_options=None):
    """`compute_on2(f, compute_type='device_host', out_memory_spaces=memory.Space.Device)` (or
    as a decorator): `f` staged as one `jit` whose operations run where `compute_type` says,
    its outputs placed in `out_memory_spaces` (a `memory.Space`, or a tree of them that is a
    prefix of `f`'s outputs). Raises TypeError / ValueError for a bad compute type as
    `compute_on` does, NotImplementedError for `compiler_options`."""
    if f is None:
        return lambda g: compute_on2(g, compute_type=compute_type,
                                     out_memory_spaces=out_memory_spaces,
                                     compiler_options=compiler_options)
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    _check_valid(compute_type)
    if compiler_options is not None:
        raise NotImplementedError("compute_on2: minijax passes no compiler_options to XLA")
    staged = api.jit(f)

    def wrapped(*args):
        with extend_compute_type(compute_type):
            outs = staged(*args)
        spaces = tree_util.tree_broadcast(out_memory_spaces, outs)
        return tree_util.tree_map(
            lambda x, s: x if s is MemorySpace.Device else api.device_put(x, s), outs, spaces)
    return wrapped


# JAX: jax/_src/compute_on.py _check_valid
def _check_valid(c_type: str) -> None:
    if c_type not in _VALID and not c_type.startswith("gpu_stream:"):
        raise ValueError(f"Invalid compute type {c_type}. Current supported values are "
                         "`device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.")
