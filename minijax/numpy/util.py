"""Helpers the jnp modules share: dtype promotion, broadcasting, axes, and avals.

`promote_args` and friends apply JAX's promotion lattice (weak types included, see
minijax/dtypes.py) and NumPy's rank promotion before a function calls lax; `where` and
`broadcast_to` here work on arrays already converted (the public jnp functions of the same names
in lax_numpy.py accept any array-like). Mirrors jax/_src/numpy/util.py. Taught in
chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import functools
import warnings

import numpy as np

from minijax import core, dtypes, lax, tree_util
from minijax.array import Array
from minijax.config import config
from minijax.core import Tracer
from minijax.lax.utils import broadcasting_sharding_rule
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import P
from minijax.pjit import jit

# ---------------------------------------------------------------------------------------------
# Promotion and broadcasting
# ---------------------------------------------------------------------------------------------

_PYTHON_SCALARS = (bool, int, float, complex)


def check_arraylike(name: str, *args) -> None:
    for i, a in enumerate(args):
        if type(a) in _PYTHON_SCALARS:  # (valid: no aval to make)
            continue
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got "
                            f"{type(a)} at position {i}.")
        core.get_aval(a)  # raises a clear TypeError for strings, functions, ...


# JAX: jax/_src/numpy/util.py promote_dtypes
def promote_dtypes(*args):
    """Convert all args to their common dtype (JAX's lattice; weak types respected)."""
    if _one_dtype(args):
        return list(args)  # nothing to convert (jnp.dot of two f32 arrays)
    pairs = [dtypes.dtype_and_weak(a) for a in args]
    to_dtype, weak = dtypes.result_type_weak(*pairs)
    return [lax.convert_element_type(a, to_dtype, weak) for a in args]


# JAX: jax/_src/numpy/util.py promote_shapes
def promote_shapes(name: str, *args):
    """Give non-scalar args a common rank by adding leading size-1 dimensions (lax broadcasts
    size-1 and rank-0 operands itself). Incompatible shapes: as in JAX, the lax op raises
    TypeError when no rank is added, else this raises ValueError."""
    shapes = [core.get_aval(a).shape for a in args]
    ranks = {len(s) for s in shapes if len(s)}
    if len(ranks) < 2:
        return list(args)
    try:
        broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{name}: Incompatible shapes for broadcasting: shapes="
                         f"{[tuple(s) for s in shapes]}") from None
    _check_rank_promotion(name, shapes)
    rank = builtins.max(ranks)
    out = []
    for a, s in zip(args, shapes):
        if len(s) and len(s) < rank:
            pad = rank - len(s)
            a = lax.broadcast_in_dim(a, (1,) * pad + s, tuple(range(pad, rank)))
        out.append(a)
    return out


# JAX: jax/_src/numpy/util.py _rank_promotion_warning_or_error
def _check_rank_promotion(name: str, shapes) -> None:
    """Under jax_numpy_rank_promotion='warn' or 'raise', adding leading axes to broadcast
    operands of different ranks warns (UserWarning) or raises ValueError, in JAX's words."""
    mode = config.jax_numpy_rank_promotion
    if mode == "allow":
        return
    shown = " ".join(str(tuple(s)) for s in shapes)
    link = "https://docs.jax.dev/en/latest/rank_promotion_warning.html."
    if mode == "warn":
        warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {shown}. "
                      "Set the jax_numpy_rank_promotion config option to 'allow' to disable "
                      f"this warning; for more information, see {link}", stacklevel=3)
    else:
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes "
                         f"{shown} and with the config option jax_numpy_rank_promotion="
                         f"'raise'. For more information, see {link}")


def _one_dtype(args) -> bool:
    """Are all `args` Arrays or tracers of one dtype and weak type?"""
    first = None
    for a in args:
        if type(a) is not Array and not isinstance(a, (Array, Tracer)):
            return False
        aval = a.aval
        if first is None:
            first = aval
        elif aval.dtype != first.dtype or aval.weak_type != first.weak_type:
            return False
    return True


def promote_args(name: str, *args):
    # the common case, Arrays or tracers of one aval: nothing to promote or broadcast (tested
    # inline, `type(a) is Array` first: this is on every eager jnp call)
    first = None
    for a in args:
        if type(a) is not Array and not isinstance(a, (Array, Tracer)):
            break
        if first is None:
            first = a.aval
        elif a.aval is not first and a.aval != first:
            break
    else:
        return args
    if len(args) == 2 and config.jax_numpy_dtype_promotion == "standard":
        with_scalar = _with_python_scalar(*args)
        if with_scalar is not None:
            return with_scalar
    check_arraylike(name, *args)
    return promote_shapes(name, *promote_dtypes(*args))


# The array dtype kinds whose dtype a weak Python scalar takes on (bfloat16 is kind "V")
_TAKES_ON = {float: "fc", int: "iufc"}


# JAX: jax/_src/numpy/util.py promote_dtypes — differs: this short path for one array and one
# Python scalar is minijax's; JAX's lattice (jax/_src/dtypes.py) gives the same result
def _with_python_scalar(x, y):
    # `x * 0.5`: a strongly typed array with a Python scalar promotes to the array's dtype,
    # so the scalar alone is converted (what promote_dtypes does, without the lattice)
    if type(x) in _TAKES_ON:
        x, y, swapped = y, x, True
    elif type(y) in _TAKES_ON:
        swapped = False
    else:
        return None
    if not (type(x) is Array or isinstance(x, (Array, Tracer))):
        return None
    aval = x.aval
    if aval.weak_type or aval.dtype.kind not in _TAKES_ON[type(y)]:
        return None
    y = lax.convert_element_type(y, aval.dtype, False)
    return [y, x] if swapped else [x, y]


# JAX: jax/_src/numpy/util.py promote_args_numeric
def promote_args_numeric(name: str, *args):
    """Like promote_args, but bools promote to the default int (floor_divide of two bools)."""
    check_arraylike(name, *args)
    to_dtype, weak = dtypes.result_type_weak(*[dtypes.dtype_and_weak(a) for a in args])
    if to_dtype == np.bool_:
        to_dtype = dtypes.default_int_dtype()
    return promote_shapes(name, *[lax.convert_element_type(a, to_dtype, weak) for a in args])


def promote_args_inexact(name: str, *args):
    """Like promote_args, then to a float dtype (ints -> default float), as jnp.sin does."""
    check_arraylike(name, *args)
    args = promote_dtypes(*args)
    d, weak = dtypes.dtype_and_weak(args[0])
    if not dtypes.is_float(d):
        args = [lax.convert_element_type(a, dtypes.default_float_dtype(), weak) for a in args]
    return promote_shapes(name, *args)


# ---------------------------------------------------------------------------------------------
# Axes and shapes
# ---------------------------------------------------------------------------------------------

def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    axis = int(axis)
    if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        # numpy's AxisError, a ValueError and an IndexError (JAX raises one or the other)
        raise np.exceptions.AxisError(f"{name} {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    return axis % ndim if ndim else 0


def reduction_axes(a, axis) -> tuple[int, ...]:
    nd = core.get_aval(a).ndim
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted({canonicalize_axis(x, nd) for x in axes}))


# JAX: jax/_src/numpy/array_creation.py canonicalize_shape
def canonicalize_shape(shape, context: str = "") -> tuple[int, ...]:
    """A user's shape (a scalar size or a sequence of sizes) as core's tuple of dimensions:
    TypeError for a size that is not an integer (minijax/core.py: canonicalize_shape)."""
    if not isinstance(shape, (tuple, list)) and np.ndim(shape) == 0:
        return core.canonicalize_shape((shape,), context)
    return core.canonicalize_shape(shape, context)


# JAX: jax/_src/numpy/util.py _broadcast_to
def broadcast_to(a, shape, out_sharding=None):
    """`a` (an array, tracer or NumPy value) broadcast to `shape` by numpy's rules (ValueError if
    incompatible); `out_sharding`: the sharding of a broadcast result (sharding in types)."""
    aval = core.get_aval(a)
    shape = canonicalize_shape(shape)
    if aval.shape == shape:
        return a
    if len(shape) < aval.ndim or any(s not in (1, t) for s, t in
                                     zip(aval.shape[::-1], shape[::-1])):
        raise ValueError(f"Incompatible shapes for broadcasting: {aval.shape} and requested "
                         f"shape {shape}")
    # JAX: jax/_src/lax/lax.py broadcast_to — one broadcast_in_dim (size-1 dims grow in place)
    lead = len(shape) - aval.ndim
    return lax.broadcast_in_dim(a, shape, tuple(range(lead, len(shape))),
                                out_sharding=out_sharding)


# JAX: jax/_src/numpy/util.py _broadcast_arrays (the sharding of the broadcast result)
def _broadcast_sharding(avals, shape):
    """The sharding arrays broadcast together to `shape` get: each dimension's one layout
    (minijax/lax/utils.py: broadcasting_sharding_rule, after rank promotion)."""
    if all(a.sharding is None for a in avals):
        return None
    padded = []
    for a in avals:
        lead = len(shape) - a.ndim
        sh = None if a.sharding is None else NamedSharding(
            a.sharding.mesh, P(*(None,) * lead, *a.sharding.spec))
        padded.append(core.ShapedArray((1,) * lead + a.shape, a.dtype, sharding=sh))
    return broadcasting_sharding_rule("broadcast_arrays", *padded)


def broadcast_shapes(*shapes):
    """The numpy broadcast of `shapes` (ValueError if incompatible): aligned on the right,
    each dimension equal or 1; a symbolic dimension (chapters/31-export.md) broadcasts only
    against 1 or itself."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    rank = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + s for s in shapes]):
        sizes = {core.canonicalize_dim(d) for d in dims if not (type(d) is int and d == 1)}
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# JAX: jax/_src/numpy/util.py _broadcast_arrays
def broadcast_arrays(*args):
    """All `args` (arrays or tracers) broadcast to their common shape (a list)."""
    shape = broadcast_shapes(*(shape_of(a) for a in args))
    s = _broadcast_sharding([core.get_aval(a) for a in args], shape)
    return [broadcast_to(a, shape, s) for a in args]


def slice_axis(a, axis: int, start: int, stop: int, stride: int = 1):
    shape = shape_of(a)
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, stop, stride
    return lax.slice(a, starts, limits, None if stride == 1 else strides)


# ---------------------------------------------------------------------------------------------
# Avals and weak types
# ---------------------------------------------------------------------------------------------

def dtype_kind(x) -> str:
    return np.dtype(core.get_aval(x).dtype).kind


def shape_of(x) -> tuple[int, ...]:
    return core.get_aval(x).shape


def dtype_of(x) -> np.dtype:
    return np.dtype(core.get_aval(x).dtype)


def is_floating(x) -> bool:
    return dtypes.is_float(dtype_of(x))


def keep_weak(out, like):
    """`out` weakly typed if `like` is: the lax compositions here mix in strong numpy constants,
    while JAX computes these with one primitive that keeps a Python scalar's weak type."""
    if core.get_aval(like).weak_type and not core.get_aval(out).weak_type:
        return lax.convert_element_type(out, dtype_of(out), True)
    return out


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------

def jit_when_traced(**jit_kwargs):
    """A decorator: call `fun` under `jit(fun, **jit_kwargs)` when an argument is traced, so
    a jaxpr shows `jit[name=fun]` as JAX's `@jax.jit` functions do (also when a trace is
    active); eagerly call it directly
    (the same values, without a compilation per new shape). As `where`'s `_where`."""
    def wrap(fun):
        jitted = jit(fun, **jit_kwargs)

        @functools.wraps(fun)
        def wrapper(*args, **kwargs):
            if core.trace_ctx.trace is not core.eval_trace or builtins.any(
                    isinstance(leaf, Tracer) for leaf in tree_util.tree_leaves((args, kwargs))):
                return jitted(*args, **kwargs)
            return fun(*args, **kwargs)
        return wrapper
    return wrap


# JAX: jax/_src/numpy/util.py _where
def where(condition, x, y):
    """`x` where `condition` else `y`, all three broadcast (the three-argument `jnp.where`)."""
    # JAX runs this under jit, so a jaxpr shows `jit[name=_where]`; eagerly minijax calls it
    # directly (the same values, without a compilation per new shape)
    if any(isinstance(a, Tracer) for a in (condition, x, y)):
        return _where_jit(condition, x, y)
    return _where(condition, x, y)


# JAX: jax/_src/numpy/util.py _where
def _where(condition, x, y):
    if dtypes.dtype_and_weak(condition)[0] != np.bool_:
        condition = lax.ne(condition, lax.full_like(condition, 0, shape=()))
    x, y = promote_dtypes(x, y)
    args = (x, y) if not core.get_aval(condition).shape else (condition, x, y)
    try:
        out_shape = broadcast_shapes(*(core.get_aval(a).shape for a in args))
    except ValueError:
        raise ValueError(f"where: Incompatible shapes for broadcasting: shapes="
                         f"{[core.get_aval(a).shape for a in (condition, x, y)]}") from None
    s = _broadcast_sharding([core.get_aval(a) for a in args], out_shape)
    if core.get_aval(condition).shape:
        condition = broadcast_to(condition, out_shape, s)
    return lax.select(condition, broadcast_to(x, out_shape, s), broadcast_to(y, out_shape, s))


_where_jit = jit(_where)


# ---------------------------------------------------------------------------------------------
# Value-dependent shapes
# ---------------------------------------------------------------------------------------------

def concrete_or_none(x, name: str):
    """The numpy value of `x` if known, else None (a tracer without a concrete value)."""
    if isinstance(x, Tracer):
        return x.to_concrete_value()
    return np.asarray(x)


def size_error(name: str, x):
    return core.ConcretizationTypeError(
        f"Abstract tracer value encountered where concrete value is expected: the size "
        f"argument of jnp.{name} must be statically specified to use jnp.{name} within JAX "
        f"transformations (the output shape depends on the values of "
        f"{core.get_aval(x).str_short()}). Pass size= (and fill_value=).")

