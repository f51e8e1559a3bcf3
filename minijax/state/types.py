"""Mutable references: the `AbstractRef` aval and the indexers that pick a window of a ref.

A ref is a mutable array that exists only while tracing: a kernel (or a stateful function)
receives refs, reads them with `ref[idx]` (the `get` primitive) and writes them with
`ref[idx] = v` (`swap`). `discharge_state` (minijax/state/discharge.py) turns such a jaxpr
back into a pure one. Mirrors jax/_src/state/types.py and jax/_src/indexing.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minijax import core, effects


# JAX: jax/_src/state/types.py RefEffect — differs: the text is plain (JAX colours the name)
class RefEffect(effects.JaxprInputEffect):
    """Reading, writing or accumulating into one ref input (`input`: its position in the
    primitive's operands, or its Var once the equation is formed). Prints `Read<a>`."""

    name: str = ""

    def _pretty_print(self, names) -> str:
        ref = names(self.input) if isinstance(self.input, core.Var) else str(self.input)
        return f"{self.name}<{ref}>"

    def __str__(self) -> str:
        return f"{self.name}<{self.input}>"


# JAX: jax/_src/state/types.py ReadEffect, WriteEffect, AccumEffect
class ReadEffect(RefEffect):
    name = "Read"


class WriteEffect(RefEffect):
    name = "Write"


class AccumEffect(RefEffect):
    name = "Accum"


# An unused read can be dropped; a write or an accumulation cannot (as in JAX)
effects.dceable_effects.add_type(ReadEffect)


# JAX: jax/_src/state/types.py AbstractRef — differs: no transforms; the memory space is
# not printed
class AbstractRef:
    """The aval of a mutable reference to an array of `inner_aval`'s shape and dtype.

    Printed `Ref{f32[8,8]}` in jaxprs, as JAX does. `shape`, `dtype` and `ndim` are those of
    the array the ref holds, so `jnp.zeros_like(ref)` and `ref.shape` work while tracing.
    `memory_space`: where a kernel's scratch buffer lives (`pltpu.VMEM`, `pltpu.SMEM`), None
    for the default; only the Mosaic lowering reads it.
    """

    __slots__ = ("inner_aval", "memory_space")

    def __init__(self, inner_aval: core.ShapedArray, memory_space: Any = None) -> None:
        self.inner_aval = inner_aval
        self.memory_space = memory_space

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: self.inner_aval.ndim)
    size = property(lambda self: self.inner_aval.size)
    weak_type = property(lambda self: False)
    vma = property(lambda self: self.inner_aval.vma)  # varying manual axes (shard_map)

    def update(self, shape=None, dtype=None, weak_type=None) -> "AbstractRef":
        return AbstractRef(self.inner_aval.update(shape, dtype, False), self.memory_space)

    def strip_weak_type(self) -> "AbstractRef":
        return self

    # JAX: jax/_src/state/types.py AbstractRef.to_tangent_aval — the tangent of a ref is a
    # ref to the tangent (forward mode of a kernel reads and writes both)
    def to_tangent_aval(self) -> "AbstractRef":
        return AbstractRef(self.inner_aval.to_tangent_aval(), self.memory_space)

    def str_short(self) -> str:
        return f"Ref{{{self.inner_aval.str_short()}}}"

    # A traced ref is indexed through its aval (core.Tracer forwards `t[idx]` and
    # `t[idx] = v` to `t.aval._getitem` / `_setitem`), as JAX's AbstractRef is.
    # JAX: jax/_src/state/types.py AbstractRef._getitem, AbstractRef._setitem
    def _getitem(self, tracer, idx):
        # not at the top: state.primitives imports this module
        from minijax.state.primitives import ref_get
        return ref_get(tracer, idx)

    def _setitem(self, tracer, idx, value) -> None:
        # not at the top: state.primitives imports this module
        from minijax.state.primitives import ref_set
        return ref_set(tracer, idx, value)

    def __eq__(self, other) -> bool:
        return (type(other) is AbstractRef and self.inner_aval == other.inner_aval
                and self.memory_space == other.memory_space)

    def __hash__(self) -> int:
        return hash(("Ref", self.inner_aval, self.memory_space))

    def __repr__(self) -> str:
        return f"Ref{{{self.dtype.name}[{','.join(map(str, self.shape))}]}}"


def is_ref(x) -> bool:
    """Is `x` (a value or an aval) a ref?"""
    aval = x if isinstance(x, (AbstractRef, core.ShapedArray)) else getattr(x, "aval", None)
    return isinstance(aval, AbstractRef)


# JAX: jax/_src/indexing.py Slice
class Slice:
    """`size` elements starting at `start` (an int or a traced integer scalar), `stride`
    apart (a static int >= 1)."""

    __slots__ = ("start", "size", "stride")

    def __init__(self, start, size: int, stride: int = 1) -> None:
        if not isinstance(size, (int, np.integer)):
            raise TypeError(f"pl.ds: the size must be a static int, got {size!r}")
        if not isinstance(stride, (int, np.integer)) or stride < 1:
            raise ValueError(f"pl.ds: the stride must be a static int >= 1, got {stride!r}")
        self.start = start
        self.size = int(size)
        self.stride = int(stride)

    def __repr__(self) -> str:
        return f"Slice(start={self.start!r}, size={self.size}, stride={self.stride})"


# JAX: jax/_src/indexing.py dslice
def ds(start, size: int | None = None, stride: int | None = None) -> Slice:
    """`pl.ds(start, size, stride)`: a dynamic slice of `size` elements from `start`,
    `stride` apart (default 1). With one argument, `pl.ds(n)` is `pl.ds(0, n)`."""
    if size is None:
        return Slice(0, start)
    return Slice(start, size, 1 if stride is None else stride)


dslice = ds


# JAX: jax/_src/state/indexing.py NDIndexer.from_indices_shape — differs: returns the static
# structure (one entry per dimension) and the start indices separately
def make_indexer(idx: Any, shape: tuple[int, ...], what: str = "ref[...]"):
    """Normalise `idx` (ints, traced ints, `:`, static slices, `pl.ds`, `...`) for an array of
    `shape`. Returns (spec, starts): `spec[d]` is `("slice", size)` or `("index",)`, and
    `starts[d]` the start index of dimension d (an int or a traced integer scalar).

    Raises IndexError for too many indices or an out-of-range static index, TypeError for
    array indices or strided slices (not supported here).
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_ell = sum(i is Ellipsis for i in idx)
    if n_ell > 1:
        raise IndexError(f"{what}: an index can only have a single ellipsis ('...')")
    if n_ell:
        k = idx.index(Ellipsis)
        fill = len(shape) - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * max(fill, 0) + idx[k + 1:]
    if len(idx) > len(shape):
        raise IndexError(f"{what}: too many indices for a ref of shape {shape}: "
                         f"{len(idx)} given")
    idx = idx + (slice(None),) * (len(shape) - len(idx))
    spec, starts = [], []
    for d, (i, n) in enumerate(zip(idx, shape)):
        if isinstance(i, Slice):
            _check_slice_bounds(i, n)
            # a strided slice says its stride: ("slice", size, stride)
            spec.append(("slice", i.size) if i.stride == 1 else ("slice", i.size, i.stride))
            starts.append(i.start)
        elif isinstance(i, slice):
            if i.step not in (None, 1):
                raise TypeError(f"{what}: strided slices are not supported (dimension {d})")
            lo, hi, _ = i.indices(n)
            spec.append(("slice", max(hi - lo, 0)))
            starts.append(lo)
        elif isinstance(i, (int, np.integer)):
            if not -n <= int(i) < n:
                raise IndexError(f"{what}: index {int(i)} is out of bounds for dimension {d} "
                                 f"of size {n}")
            spec.append(("index",))
            starts.append(int(i) % n)
        else:
            aval = core.get_aval(i)
            if aval.shape != () or not np.issubdtype(aval.dtype, np.integer):
                raise TypeError(f"{what}: indices must be integer scalars, pl.ds slices or "
                                f"':', got {aval.str_short()} for dimension {d}")
            spec.append(("index",))
            starts.append(i)
    return tuple(spec), starts


# JAX: jax/_src/state/indexing.py NDIndexer.__post_init__ (validate=True; its words, and
# like it no check for a start of 0 or one known only at run time)
def _check_slice_bounds(sl: Slice, dim: int) -> None:
    start = sl.start.to_concrete_value() if isinstance(sl.start, core.Tracer) else sl.start
    if start is None or not int(start):
        return
    start = int(start)
    if start >= dim:
        raise ValueError(f"Out of bound slice: start={start}, dim={dim}.")
    if sl.size and start + (sl.size - 1) * sl.stride >= dim:
        raise ValueError(f"Out of bound slice: start={start}, size={sl.size}, "
                         f"stride={sl.stride}, dim={dim}.")


def pp_indexer(spec) -> str:
    """Text for an indexer spec: `[:8,i]` is a slice of 8 elements, then one integer index
    (the start indices are the equation's operands after the ref)."""
    return "[" + ",".join((f":{s[1]}" + (f":{s[2]}" if len(s) > 2 else ""))
                          if s[0] == "slice" else "i" for s in spec) + "]"


def indexed_shape(spec) -> tuple[int, ...]:
    return tuple(s[1] for s in spec if s[0] == "slice")


# `make_jaxpr(f)(AbstractRef(...))` traces `f` on a ref, as in JAX's state tests: an
# AbstractRef passed as an argument stands for itself.
core.pytype_aval_mappings[AbstractRef] = lambda a: a
