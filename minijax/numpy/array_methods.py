"""Operators and methods of arrays and tracers: `x + y`, `x @ w`, `x[1:]`, `x.sum()`, `x.T`...

Both `minijax.Array` and `core.Tracer` get the same methods, each forwarding to a
`minijax.numpy` function, so a traced value behaves like an array. Mirrors
jax/_src/numpy/array_methods.py (`_set_tracer_aval_forwarding`, `_set_array_base_attributes`).
"""

from __future__ import annotations

from typing import Any

from minijax import core, numpy as jnp
from minijax.array import Array
from minijax.lax import slicing
from minijax.numpy import indexing


def _defer_to_unrecognized(binary):
    # let other types (e.g. a JAX array in a comparison) try their reflected operator
    def op(self, other):
        if type(other) is not Array and not _accepted(other):
            return NotImplemented
        return binary(self, other)
    return op


def _accepted(x) -> bool:
    if isinstance(x, (core.Tracer, Array, int, float, complex, bool)):
        return True
    try:
        core.get_aval(x)
        return True
    except TypeError:
        return False


def _swap(f):
    return lambda self, other: f(other, self)


# JAX: jax/_src/core.py ShapedArray._len — differs: installed here for Array and Tracer alike
def _len(self) -> int:
    if not self.shape:
        raise TypeError("len() of unsized object")
    return self.shape[0]


# JAX: jax/_src/numpy/array_methods.py _chunk_iter — differs: one row at a time
def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))


def _set_methods(cls) -> None:
    cls.__len__, cls.__iter__ = _len, _iter
    binops = {
        "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "truediv": jnp.true_divide,
        "floordiv": jnp.floor_divide, "mod": jnp.remainder, "pow": jnp.power,
        "matmul": jnp.matmul, "and": jnp.bitwise_and, "or": jnp.bitwise_or,
    }
    for name, f in binops.items():
        setattr(cls, f"__{name}__", _defer_to_unrecognized(f))
        setattr(cls, f"__r{name}__", _defer_to_unrecognized(_swap(f)))
    for name, f in {"eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal,
                    "gt": jnp.greater, "ge": jnp.greater_equal}.items():
        setattr(cls, f"__{name}__", _defer_to_unrecognized(f))
    cls.__neg__ = lambda self: jnp.negative(self)
    cls.__pos__ = lambda self: self
    cls.__abs__ = lambda self: jnp.abs(self)
    cls.__invert__ = lambda self: jnp.invert(self)
    cls.__getitem__ = lambda self, idx: indexing.rewriting_take(self, idx)
    cls.at = property(lambda self: _IndexUpdateHelper(self))
    cls.T = property(lambda self: jnp.transpose(self))
    cls.reshape = lambda self, *shape, order="C", out_sharding=None: jnp.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape,
        out_sharding=out_sharding)
    cls.transpose = lambda self, *axes: jnp.transpose(
        self, None if not axes else axes[0] if len(axes) == 1 and not isinstance(axes[0], int)
        else axes)
    cls.astype = lambda self, dtype: jnp.astype(self, dtype)
    cls.sum = lambda self, axis=None, dtype=None, keepdims=False: jnp.sum(self, axis, dtype,
                                                                          keepdims=keepdims)
    cls.mean = lambda self, *args, **kwargs: jnp.mean(self, *args, **kwargs)
    cls.max = lambda self, axis=None, keepdims=False: jnp.max(self, axis, keepdims=keepdims)
    cls.min = lambda self, axis=None, keepdims=False: jnp.min(self, axis, keepdims=keepdims)
    cls.argmax = lambda self, axis=None: jnp.argmax(self, axis)
    cls.argmin = lambda self, axis=None: jnp.argmin(self, axis)
    cls.var = lambda self, *args, **kwargs: jnp.var(self, *args, **kwargs)
    cls.std = lambda self, *args, **kwargs: jnp.std(self, *args, **kwargs)
    cls.squeeze = lambda self, axis=None: jnp.squeeze(self, axis)
    cls.dot = lambda self, other: jnp.dot(self, other)
    cls.ravel = lambda self: jnp.ravel(self)
    cls.flatten = lambda self: jnp.ravel(self)
    cls.clip = lambda self, min=None, max=None: jnp.clip(self, min, max)
    # methods with the same signature as the jnp function of that name
    for name in ("prod", "any", "all", "cumsum", "cumprod", "sort", "argsort", "round", "take",
                 "repeat", "nonzero", "diagonal", "trace", "ptp", "conj", "conjugate",
                 "searchsorted"):
        setattr(cls, name, getattr(jnp, name))
    cls.real = property(lambda self: jnp.real(self))
    cls.imag = property(lambda self: jnp.imag(self))


# JAX: jax/_src/numpy/array_methods.py _IndexUpdateHelper
class _IndexUpdateHelper:
    """`x.at`: `x.at[idx]` gives an `_IndexUpdateRef` for functional indexed updates."""

    __slots__ = ("array",)

    def __init__(self, array) -> None:
        self.array = array

    def __getitem__(self, index) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


# JAX: jax/_src/numpy/array_methods.py _IndexUpdateRef
class _IndexUpdateRef:
    """`x.at[idx]`. Each method returns a new array (x itself never changes).

    `get(mode=None, fill_value=None)` is `x[idx]` (mode "fill" gives `fill_value` out of range).
    `set/add/mul/multiply/min/max(values, mode=None)`: `values` (cast to x's dtype, broadcast to
    the shape of `x[idx]`) combined into x at idx. mode None/"fill"/"drop" skip out-of-range
    indices (JAX's default for updates), "clip"/"promise_in_bounds" clamp them. With repeated
    indices `add/mul/min/max` accumulate; `set` keeps one of the writes (and its gradient
    assumes unique indices).
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index) -> None:
        self.array = array
        self.index = index

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None) -> Any:
        return indexing.rewriting_take(self.array, self.index, mode=mode, fill_value=fill_value,
                                       indices_are_sorted=indices_are_sorted,
                                       unique_indices=unique_indices)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return indexing.scatter_update(self.array, self.index, values, slicing.scatter, mode,
                                       indices_are_sorted, unique_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return indexing.scatter_update(self.array, self.index, values, slicing.scatter_add, mode,
                                       indices_are_sorted, unique_indices)

    def mul(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return indexing.scatter_update(self.array, self.index, values, slicing.scatter_mul, mode,
                                       indices_are_sorted, unique_indices)

    multiply = mul

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return indexing.scatter_update(self.array, self.index, values, slicing.scatter_min, mode,
                                       indices_are_sorted, unique_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return indexing.scatter_update(self.array, self.index, values, slicing.scatter_max, mode,
                                       indices_are_sorted, unique_indices)


def _setitem_immutable(self, idx, value):
    raise TypeError(f"'{type(self).__name__}' object does not support item assignment. JAX "
                    "arrays are immutable. Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)``"
                    " or another .at[] method")


def install() -> None:
    _set_methods(core.Tracer)
    _set_methods(Array)
    # A tracer is indexed through its aval, so a traced ref (minijax/state) reads and writes
    # where a traced array gathers. JAX: jax/_src/core.py Tracer.__getitem__ (aval forwarding)
    core.ShapedArray._getitem = lambda aval, tracer, idx: indexing.rewriting_take(tracer, idx)
    core.ShapedArray._setitem = lambda aval, tracer, idx, value: _setitem_immutable(
        tracer, idx, value)
    core.Tracer.__getitem__ = lambda self, idx: self.aval._getitem(self, idx)
    core.Tracer.__setitem__ = lambda self, idx, value: self.aval._setitem(self, idx, value)
    Array.__setitem__ = _setitem_immutable
