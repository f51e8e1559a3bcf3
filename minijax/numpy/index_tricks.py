"""Index tricks: `mgrid`, `ogrid` (grids from slices), `r_`, `c_` (concatenation by
indexing), `ix_` (open meshes of index arrays); `s_` and `index_exp` are NumPy's own.

Slices' steps are concrete (a complex step `5j` means 5 points, endpoints included, as
`linspace`). Mirrors jax/_src/numpy/index_tricks.py.
"""

from __future__ import annotations

import numpy as np

from minijax import core
from minijax.numpy import lax_numpy
from minijax.numpy.array_constructors import array, asarray
from minijax.numpy.util import promote_dtypes, shape_of

s_, index_exp = np.s_, np.index_exp


def _range_of(s: slice):
    """The points of one slice: arange, or linspace for a complex (number of points) step."""
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    for v in (start, s.stop, step):
        if isinstance(v, core.Tracer):
            raise core.ConcretizationTypeError(
                "jnp.mgrid/ogrid/r_: slice bounds and steps must be concrete, got a tracer")
    if isinstance(step, complex):
        return lax_numpy.linspace(start, s.stop, int(abs(step)), endpoint=True)
    return lax_numpy.arange(start, s.stop, step)


class _Grid:
    sparse: bool

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _range_of(key)
        ranges = promote_dtypes(*(_range_of(k) for k in key))
        if not ranges:
            return array([], dtype=np.int32)
        grids = lax_numpy.meshgrid(*ranges, indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else lax_numpy.stack(grids, 0)


# JAX: jax/_src/numpy/index_tricks.py _Mgrid
class _Mgrid(_Grid):
    """`mgrid[a:b:s, ...]`: a dense grid, the stacked `meshgrid(..., indexing="ij")`."""
    sparse = False


# JAX: jax/_src/numpy/index_tricks.py _Ogrid
class _Ogrid(_Grid):
    """`ogrid[a:b:s, ...]`: an open grid, a list of arrays broadcasting against each other."""
    sparse = True


mgrid, ogrid = _Mgrid(), _Ogrid()


# JAX: jax/_src/numpy/index_tricks.py _AxisConcat
class _AxisConcat:
    """`r_[...]` and `c_[...]`: concatenate slices (as arange/linspace), arrays and scalars.
    A leading string directive sets the axis, "axis,ndmin,trans1d" (NumPy's), or "r"/"c"
    (a row/column matrix)."""

    axis: int
    ndmin: int
    trans1d: int

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if key and isinstance(key[0], str):
            directive, key = key[0], key[1:]
            if directive in ("r", "c"):
                matrix = directive
            else:
                parts = [int(v) for v in directive.split(",")]
                axis = parts[0]
                ndmin = parts[1] if len(parts) > 1 else ndmin
                trans1d = parts[2] if len(parts) > 2 else trans1d
        items = []
        for item in key:
            if isinstance(item, slice):
                arr = _range_of(item)
            elif isinstance(item, str):
                raise ValueError("jnp.r_/c_: a string directive must come first")
            else:
                arr = asarray(item)
            if arr.ndim < ndmin:  # leading 1s, then (trans1d) the original axes moved
                k2 = ndmin - arr.ndim
                arr = lax_numpy.reshape(arr, (1,) * k2 + shape_of(arr))
                if trans1d != -1:
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    axes = list(range(ndmin))
                    arr = lax_numpy.transpose(arr, tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))
            items.append(arr)
        items = promote_dtypes(*items)
        out_ = lax_numpy.concatenate(items, axis=axis) if items else array([])
        if matrix is not None:
            out_ = lax_numpy.atleast_2d(out_)
            return out_.T if matrix == "c" else out_
        return out_


class RClass(_AxisConcat):
    """`jnp.r_`: concatenation along the first axis."""
    axis, ndmin, trans1d = 0, 1, -1


class CClass(_AxisConcat):
    """`jnp.c_`: concatenation along the last axis, 1-D pieces made columns."""
    axis, ndmin, trans1d = -1, 2, 0


r_, c_ = RClass(), CClass()


def ix_(*args):
    """Open-mesh index arrays from 1-D sequences: the i-th has shape (1, ..., n_i, ..., 1)."""
    n = len(args)
    out_ = []
    for i, a in enumerate(args):
        a = asarray(a)
        if a.ndim != 1:
            raise ValueError(f"jnp.ix_: arguments must be 1-D, got shape {shape_of(a)}")
        if a.dtype == np.bool_:
            raise NotImplementedError("jnp.ix_: boolean arguments are not supported")
        out_.append(lax_numpy.reshape(a, tuple(shape_of(a)[0] if j == i else 1
                                               for j in range(n))))
    return tuple(out_)
