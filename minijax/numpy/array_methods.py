"""Operators and methods of arrays and tracers: `x + y`, `x @ w`, `x[1:]`, `x.sum()`, `x.T`...

Both `minijax.Array` and `core.Tracer` get the same methods, each forwarding to a
`minijax.numpy` function, so a traced value behaves like an array. Mirrors
jax/_src/numpy/array_methods.py (`_set_tracer_aval_forwarding`, `_set_array_base_attributes`).
"""

from __future__ import annotations

from minijax import core
from minijax.array import Array
from minijax.numpy.indexing import _IndexUpdateHelper


def _defer_to_unrecognized(binary):
    # let other types (e.g. a JAX array in a comparison) try their reflected operator
    def op(self, other):
        if not _accepted(other):
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


def _set_methods(cls) -> None:
    from minijax import numpy as jnp
    binops = {
        "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "truediv": jnp.true_divide,
        "floordiv": jnp.floor_divide, "mod": jnp.remainder, "pow": jnp.power,
        "matmul": jnp.matmul, "and": jnp.logical_and_or_bitwise_and,
        "or": jnp.logical_or_or_bitwise_or,
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
    cls.__getitem__ = lambda self, idx: jnp._rewriting_take(self, idx)
    cls.at = property(lambda self: _IndexUpdateHelper(self))
    cls.T = property(lambda self: jnp.transpose(self))
    cls.reshape = lambda self, *shape, order="C": jnp.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
    cls.transpose = lambda self, *axes: jnp.transpose(
        self, None if not axes else axes[0] if len(axes) == 1 and not isinstance(axes[0], int)
        else axes)
    cls.astype = lambda self, dtype: jnp._astype(self, dtype)
    cls.sum = lambda self, axis=None, dtype=None, keepdims=False: jnp.sum(self, axis, dtype,
                                                                          keepdims=keepdims)
    cls.mean = lambda self, axis=None, dtype=None, keepdims=False: jnp.mean(self, axis, dtype,
                                                                            keepdims=keepdims)
    cls.max = lambda self, axis=None, keepdims=False: jnp.max(self, axis, keepdims=keepdims)
    cls.min = lambda self, axis=None, keepdims=False: jnp.min(self, axis, keepdims=keepdims)
    cls.argmax = lambda self, axis=None: jnp.argmax(self, axis)
    cls.argmin = lambda self, axis=None: jnp.argmin(self, axis)
    cls.var = lambda self, axis=None, ddof=0, keepdims=False: jnp.var(self, axis, ddof=ddof,
                                                                      keepdims=keepdims)
    cls.std = lambda self, axis=None, ddof=0, keepdims=False: jnp.std(self, axis, ddof=ddof,
                                                                      keepdims=keepdims)
    cls.squeeze = lambda self, axis=None: jnp.squeeze(self, axis)
    cls.dot = lambda self, other: jnp.dot(self, other)
    cls.ravel = lambda self: jnp.ravel(self)
    cls.flatten = lambda self: jnp.ravel(self)
    cls.clip = lambda self, min=None, max=None: jnp.clip(self, min, max)
    # methods forwarding to minijax/numpy/extra.py, same keywords as the functions
    for name in ("prod", "any", "all", "cumsum", "cumprod", "sort", "argsort", "round", "take",
                 "repeat", "nonzero", "diagonal", "trace", "ptp", "conj", "conjugate",
                 "searchsorted"):
        setattr(cls, name, getattr(jnp, name))
    cls.real = property(lambda self: jnp.real(self))
    cls.imag = property(lambda self: jnp.imag(self))


def install() -> None:
    _set_methods(core.Tracer)
    _set_methods(Array)
