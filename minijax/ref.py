"""Mutable arrays outside kernels: `new_ref(x)` gives a `Ref`; `ref[idx]` reads it,
`ref[idx] = v` writes it, `freeze(ref)` gives its final value back as an array.

Mirrors jax/_src/ref.py and JAX's `Ref` (jax/_src/core.py) — differs: a minijax Ref is
functional underneath. It holds its current value; a write replaces that value with
`value.at[idx].set(v)`, recorded by whatever trace is current (eager, `jit`, `grad`, `vmap`), so
a ref created, written and frozen inside one traced function gives JAX's values, and its jaxpr
shows the `scatter`/`select` the writes became instead of JAX's `new_ref`, `<-` and `freeze`.
JAX also threads refs through `jit` arguments and through `scan`/`cond` bodies as effects;
minijax does not: a Ref is not a valid `jit` argument, and writing a ref under a trace other
than the one that created it raises ValueError. Inside Pallas kernels and `run_state`, refs
are `state.AbstractRef` tracers with real effects (minijax/state/, chapters/17-pallas.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minijax import core, numpy as jnp
from minijax.interpreters.batching import BatchTracer, not_mapped
from minijax.state.types import AbstractRef  # jax.ref.AbstractRef


# JAX: jax/_src/core.py Ref — differs: a functional value holder (see the module docstring)
class Ref:
    """A mutable array: `ref[...]`, `ref[i]`, `ref[a:b]` read it; `ref[idx] = v` writes it
    (`v` cast to the ref's dtype and broadcast to the indexed shape). Attributes `shape`,
    `dtype`, `ndim`, `size`, `aval` (an `AbstractRef`, printed `Ref{f32[3]}`).
    Raises ValueError for any use after `freeze`/`free_ref`, and for a write under a trace
    other than the one the ref was created under."""

    __slots__ = ("_value", "_trace", "_dead")

    def __init__(self, value, trace) -> None:
        self._value, self._trace, self._dead = value, trace, None

    shape = property(lambda self: self._live().shape)
    dtype = property(lambda self: self._live().dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    aval = property(lambda self: AbstractRef(core.get_aval(self._live())))

    def _live(self):
        if self._dead is not None:
            raise ValueError(f"a Ref used after {self._dead}(ref)")
        return self._value

    def __getitem__(self, idx):
        value = self._live()
        return value if idx is Ellipsis or idx == () else value[idx]

    def __setitem__(self, idx, new) -> None:
        value = self._live()
        if core.trace_ctx.trace is not self._trace:
            if (type(new) is BatchTracer and new._trace is core.trace_ctx.trace
                    and new.batch_dim is not not_mapped):  # JAX's error, in its family
                raise Exception(  # JAX raises a plain Exception here
                    "performing a set/swap operation with vmapped value on an unbatched array "
                    f"reference of type Ref{{{value.dtype.name}"
                    f"{str(list(value.shape)).replace(' ', '')}}}. Move the array reference "
                    "to be an argument to the vmapped function?")
            made, now = type(self._trace).__name__, type(core.trace_ctx.trace).__name__
            raise ValueError(
                f"a Ref{{{core.get_aval(value).str_short()}}} made under {made} was written "
                f"under {now}: minijax's refs are written only inside the function (and "
                "transformation) that made them; JAX also threads them through jit arguments "
                "and scan/cond bodies (minijax/ref.py)")
        new = jnp.asarray(new, dtype=value.dtype)
        if idx is Ellipsis or idx == ():
            self._value = jnp.broadcast_to(new, value.shape)
        else:
            self._value = value.at[idx].set(new)

    def __repr__(self) -> str:
        text = repr(self._live())
        return "Ref" + text[len("Array"):] if text.startswith("Array") else f"Ref({text})"


# JAX: jax/_src/ref.py new_ref
def new_ref(init_val: Any, *, memory_space: Any = None, kind: Any = None) -> Ref:
    """A new Ref holding `init_val` (an array or scalar; f32[n] in, a Ref{f32[n]} out)."""
    if memory_space is not None:
        raise NotImplementedError("new_ref: minijax has one memory space (memory_space=None)")
    return Ref(jnp.asarray(init_val), core.trace_ctx.trace)


# JAX: jax/_src/core.py empty_ref — differs: the contents are zeros (JAX leaves them
# undefined, and cannot make one eagerly)
def empty_ref(ty, memory_space: Any = None) -> Ref:
    """A new Ref of `ty`'s shape and dtype (a ShapeDtypeStruct or an aval)."""
    return new_ref(jnp.zeros(ty.shape, ty.dtype), memory_space=memory_space)


# JAX: jax/_src/core.py freeze
def freeze(ref: Ref):
    """The ref's value as an array; the ref may not be used afterwards."""
    value = ref._live()
    ref._dead = "freeze"
    return value


# JAX: jax/_src/core.py free_ref
def free_ref(ref: Ref) -> None:
    """Release the ref; it may not be used afterwards."""
    ref._live()
    ref._dead = "free_ref"


# JAX: jax/_src/state/primitives.py ref_get
def get(ref: Ref, idx=()):
    """`ref[idx]`."""
    return ref[idx]


# JAX: jax/_src/state/primitives.py ref_swap
def swap(ref: Ref, idx, value):
    """Write `value` at `idx` and return what was there."""
    old = ref[idx]
    ref[idx] = value
    return old


# JAX: jax/_src/state/primitives.py ref_set
def set(ref: Ref, idx, value) -> None:  # JAX's name
    """`ref[idx] = value`."""
    ref[idx] = value


# JAX: jax/_src/state/primitives.py ref_addupdate
def addupdate(ref: Ref, idx, value) -> None:
    """`ref[idx] += value`."""
    ref[idx] = ref[idx] + value
