"""Products of arrays: `matmul`, `dot`, `vdot`, `outer`, `tensordot`, `inner`, `kron`, each
one `dot_general` (or a broadcast multiply).

Mirrors jax/_src/numpy/tensor_contractions.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins

import numpy as np

from minijax import core
from minijax import lax
from minijax import sharding as msh
from minijax.numpy import lax_numpy
from minijax.numpy import ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis, dtype_of, promote_dtypes, shape_of


def _dot_dtype(a, b):
    a, b = promote_dtypes(a, b)  # Arrays or tracers (a, b are asarray'd)
    return a, b, a.aval.dtype


def matmul(a, b, *, out_sharding=None):
    """Matrix product with numpy's rules: 1-D operands are promoted and their axis removed;
    leading (batch) dimensions broadcast. `out_sharding` (a NamedSharding, or a
    PartitionSpec under `set_mesh`): the result's sharding, needed when both operands split
    the contracted dimension (minijax/sharding.py: dot_general_sharding_rule)."""
    a, b, d = _dot_dtype(asarray(a), asarray(b))
    a_aval, b_aval = core.get_aval(a), core.get_aval(b)
    if a_aval.ndim == 0 or b_aval.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got {a_aval.str_short()} "
                         f"and {b_aval.str_short()}")
    a_vec, b_vec = a_aval.ndim == 1, b_aval.ndim == 1
    if a_vec:
        a = lax.expand_dims(a, (0,))
    if b_vec:
        b = lax.expand_dims(b, (1,))
    a_shape, b_shape = core.get_aval(a).shape, core.get_aval(b).shape
    if a_shape[-1] != b_shape[-2]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(a_shape[-1],)} and {(b_shape[-2],)}.")
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    nb = len(batch)
    if nb:
        a = lax_numpy.broadcast_to(a, batch + a_shape[-2:])
        b = lax_numpy.broadcast_to(b, batch + b_shape[-2:])
    dims = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    out = lax.dot_general(a, b, dims, preferred_element_type=d,
                          out_sharding=_unsqueezed(out_sharding, a_vec and nb, b_vec))
    if a_vec:
        out = lax.squeeze(out, (nb,))
    if b_vec:
        out = lax.squeeze(out, (lax_numpy.ndim(out) - 1,))
    return out


def _unsqueezed(out_sharding, a_axis, b_vec):
    """The out_sharding of matmul's result before its vector axes are squeezed out."""
    s = msh.canonicalize_out_sharding(out_sharding, "matmul")
    if s is None or (a_axis is False and not b_vec):
        return s
    spec = list(s.spec)
    if a_axis is not False:
        spec.insert(a_axis, None)
    if b_vec:
        spec.append(None)
    return msh.NamedSharding(s.mesh, msh.P(*spec))


def dot(a, b, *, out_sharding=None):
    """numpy.dot: scalars multiply, 1-D·1-D is the inner product, otherwise a contraction of
    a's last axis with b's second-to-last (or only) axis. `out_sharding`: as in `matmul`."""
    a, b, d = _dot_dtype(asarray(a), asarray(b))
    a_shape, b_shape = a.aval.shape, b.aval.shape
    na, nb = len(a_shape), len(b_shape)
    if na == 0 or nb == 0:
        return ufuncs.multiply(a, b)
    contract_b = 0 if nb == 1 else nb - 2
    if a_shape[-1] != b_shape[contract_b]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(a_shape[-1],)} and {(b_shape[contract_b],)}.")
    out = lax.dot_general(a, b, (((na - 1,), (contract_b,)), ((), ())),
                          preferred_element_type=d, out_sharding=out_sharding)
    return out


def vdot(a, b):
    return dot(lax_numpy.ravel(a), lax_numpy.ravel(b))


def outer(a, b):
    return ufuncs.multiply(lax_numpy.reshape(a, (-1, 1)), lax_numpy.reshape(b, (1, -1)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sum over the last `axes` dims of a and the first of b (an int), or over the paired
    axes `(a_axes, b_axes)`. Result: a's free dims then b's free dims. One dot_general."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    na, nb = core.get_aval(a).ndim, core.get_aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        k = int(axes)
        if k < 0 or k > builtins.min(na, nb):
            raise TypeError(f"Number of tensordot axes (axes {k}) exceeds input ranks ({na} and "
                            f"{nb})")
        ca, cb = tuple(range(na - k, na)), tuple(range(k))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        if len(ax_a) != len(ax_b):
            raise TypeError("tensordot requires axes lists to have equal length")
        ca = tuple(canonicalize_axis(i, na) for i in ax_a)
        cb = tuple(canonicalize_axis(i, nb) for i in ax_b)
    d = dtype_of(a) if preferred_element_type is None else preferred_element_type
    return lax.dot_general(a, b, ((ca, cb), ((), ())), preferred_element_type=d)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Sum over the last axes of a and b (scalars multiply)."""
    a, b = asarray(a), asarray(b)
    if core.get_aval(a).ndim == 0 or core.get_aval(b).ndim == 0:
        return ufuncs.multiply(a, b)
    return tensordot(a, b, (-1, -1), preferred_element_type=preferred_element_type)


def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b (inputs given the same rank first)."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    nd = builtins.max(core.get_aval(a).ndim, core.get_aval(b).ndim)
    a = lax.reshape(a, (1,) * (nd - core.get_aval(a).ndim) + shape_of(a))
    b = lax.reshape(b, (1,) * (nd - core.get_aval(b).ndim) + shape_of(b))
    a_e = lax.reshape(a, tuple(x for s in shape_of(a) for x in (s, 1)))
    b_e = lax.reshape(b, tuple(x for s in shape_of(b) for x in (1, s)))
    prod_ = lax.mul(a_e, b_e)  # as JAX: lax.mul, so bool operands are a TypeError
    return lax.reshape(prod_, tuple(p * q for p, q in zip(shape_of(a), shape_of(b))))



def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """The dot product of `x1` and `x2` along `axis` (the other dimensions broadcast):
    `sum(conj(x1) * x2, axis)`. Raises ValueError if the axis sizes differ."""
    x1, x2 = promote_dtypes(asarray(x1), asarray(x2))
    n1 = shape_of(x1)[canonicalize_axis(axis, core.get_aval(x1).ndim)]
    n2 = shape_of(x2)[canonicalize_axis(axis, core.get_aval(x2).ndim)]
    if n1 != n2:
        raise ValueError(f"axes must match; got shapes {shape_of(x1)} and {shape_of(x2)} with "
                         f"{axis=}")
    x1, x2 = lax_numpy.moveaxis(x1, axis, -1), lax_numpy.moveaxis(x2, axis, -1)
    x1, x2 = lax_numpy.broadcast_arrays(x1, x2)
    nd = core.get_aval(x1).ndim
    batch = tuple(range(nd - 1))
    d = dtype_of(x1) if preferred_element_type is None else preferred_element_type
    return lax.dot_general(x1, x2, (((nd - 1,), (nd - 1,)), (batch, batch)),
                           preferred_element_type=d)
