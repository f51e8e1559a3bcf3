"""`jnp.ufunc`: a NumPy-style universal function made from a scalar Python function, with
`reduce`, `accumulate`, `outer`, `at` and `reduceat`; `frompyfunc` builds one.

The call is `vectorize(func)`; `reduce` and `accumulate` fold `func` along an axis with
`lax.scan`, so any binary function works (JAX's ufuncs can also be given faster primitives,
as `call=` / `reduce=` here). minijax's own `jnp.add` & co. stay plain functions.
Mirrors jax/_src/numpy/ufunc_api.py.
"""

from __future__ import annotations

from typing import Callable

from minijax import lax
from minijax.numpy import lax_numpy
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis, shape_of
from minijax.numpy.vectorize import vectorize


# JAX: jax/_src/numpy/ufunc_api.py ufunc
class ufunc:
    """A universal function of `nin` inputs and `nout` outputs around the scalar `func`.

    Args:
      func: the scalar function (traced on 0-d arrays).
      nin, nout: its numbers of inputs and outputs (reduce & co. need nin=2, nout=1).
      name: the name shown in errors and reprs (default: func's).
      identity: the reduction's starting value, if the function has one.
      call, reduce, accumulate, at, reduceat: faster implementations of those methods.
    Raises: ValueError from a method for the wrong number of inputs or outputs.
    """

    def __init__(self, func: Callable, /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity=None, call=None, reduce=None,
                 accumulate=None, at=None, reduceat=None):
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = self.nin if nargs is None else int(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call = call or vectorize(func)
        self._reduce, self._accumulate, self._at, self._reduceat = (reduce, accumulate, at,
                                                                    reduceat)

    def __repr__(self) -> str:
        return f"<minijax.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args):
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional arguments, got "
                            f"{len(args)}")
        return self._call(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{method}: only binary functions with one "
                             f"output support it (nin={self.nin}, nout={self.nout})")

    def _fold(self, a, axis, initial, keep_all: bool):
        a = lax_numpy.moveaxis(a, axis, 0)
        if initial is None:
            if shape_of(a)[0] == 0:
                raise ValueError(f"{self.__name__}.reduce: zero-size array with no identity "
                                 "and no initial value")
            init, rest = a[0], a[1:]
        else:
            init, rest = lax_numpy.full(shape_of(a)[1:], initial, a.dtype), a
        step = lambda c, x: (self._call(c, x).astype(a.dtype),) * 2
        last, carries = lax.scan(step, init, rest)
        if keep_all:
            return carries if initial is not None else \
                lax_numpy.concatenate([init[None], carries], 0)
        return last

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None,
               where=None):
        """`func` folded along `axis` (None: all axes, flattened), left to right."""
        self._binary("reduce")
        if out is not None or where is not None:
            raise NotImplementedError(f"{self.__name__}.reduce: out and where are not "
                                      "supported")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial)
        a = asarray(a) if dtype is None else asarray(a, dtype)
        initial = self.identity if initial is None else initial  # as JAX's reduce
        if axis is None:
            result = self._fold(lax_numpy.ravel(a), 0, initial, False)
            return lax_numpy.reshape(result, (1,) * a.ndim) if keepdims else result
        axis = canonicalize_axis(axis, a.ndim)
        result = self._fold(a, axis, initial, False)
        return lax_numpy.expand_dims(result, axis) if keepdims else result

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running `reduce` along `axis` (same shape as `a`)."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.accumulate: out is not supported")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = asarray(a) if dtype is None else asarray(a, dtype)
        axis = canonicalize_axis(axis, a.ndim)
        return lax_numpy.moveaxis(self._fold(a, axis, None, True), 0, axis)

    def outer(self, A, B, /):
        """`func(A[i...], B[j...])` for every pair: shape A.shape + B.shape."""
        self._binary("outer")
        A, B = asarray(A), asarray(B)
        return self._call(lax_numpy.reshape(A, shape_of(A) + (1,) * B.ndim), B)

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """A copy of `a` with `a[i] = func(a[i], b)` applied for each index in turn (repeated
        indices apply repeatedly). Needs inplace=False (minijax arrays are immutable)."""
        if inplace:
            raise NotImplementedError(f"{self.__name__}.at: minijax arrays are immutable: "
                                      "pass inplace=False")
        if self._at is not None:
            return self._at(a, indices, b)
        a = asarray(a)
        idx = lax_numpy.ravel(asarray(indices))
        n = shape_of(idx)[0]
        if (b is None) != (self.nin == 1):
            raise ValueError(f"{self.__name__}.at: a function of {self.nin} inputs takes "
                             f"{'no' if self.nin == 1 else 'a'} second operand b")
        vals = None if b is None else lax_numpy.broadcast_to(asarray(b, a.dtype),
                                                             (n,) + shape_of(a)[1:])

        def step(arr, i):
            new = self._call(arr[idx[i]]) if vals is None else self._call(arr[idx[i]], vals[i])
            return arr.at[idx[i]].set(asarray(new).astype(a.dtype)), None

        return lax.scan(step, a, lax_numpy.arange(n))[0]

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """`reduce` over each slice `a[indices[i]:indices[i+1]]` along `axis` (the last to the
        end; a non-increasing pair gives a[indices[i]]). Needs concrete indices."""
        self._binary("reduceat")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        a = asarray(a) if dtype is None else asarray(a, dtype)
        axis = canonicalize_axis(axis, a.ndim)
        idx = [int(i) for i in lax_numpy.ravel(asarray(indices)).tolist()]
        n = shape_of(a)[axis]
        pieces = []
        for j, start in enumerate(idx):
            stop = idx[j + 1] if j + 1 < len(idx) else n
            seg = lax_numpy.slice_axis(a, axis, start, max(stop, start + 1))
            pieces.append(self._fold(seg, axis, None, False))  # no identity, as JAX's
        return lax_numpy.stack(pieces, axis)


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity=None) -> ufunc:
    """A `ufunc` around the Python function `func` (traced, so built from jnp operations)."""
    return ufunc(func, nin, nout, identity=identity)
