"""Products of arrays: `matmul`, `dot`, `vdot`, `outer`, `tensordot`, `inner`, `kron`, each
one `dot_general` (or a broadcast multiply).

Mirrors jax/_src/numpy/tensor_contractions.py. Taught in chapters/01-numpy.md.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from minijax import core, lax
from minijax.array import Array
from minijax.named_sharding import NamedSharding
from minijax.numpy import lax_numpy, ufuncs
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import canonicalize_axis, dtype_of, promote_dtypes, shape_of
from minijax.numpy.vectorize import vectorize
from minijax.partition_spec import P
from minijax.sharding_impls import canonicalize_out_sharding


def _promote_pair(a, b):
    """a and b as arrays (or tracers) of their common dtype; no conversion (and no call) when
    they already are (two Arrays of one dtype: the eager hot path)."""
    if type(a) is not Array:
        a = asarray(a)
    if type(b) is not Array:
        b = asarray(b)
    a_aval, b_aval = a.aval, b.aval
    if a_aval.dtype is not b_aval.dtype or a_aval.weak_type is not b_aval.weak_type:
        a, b = promote_dtypes(a, b)  # (which also sees equal dtypes that are not one object)
    return a, b


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product with numpy's rules: a 1-D operand acts as a row (a) or column (b)
    vector whose axis is not in the result; leading (batch) dimensions broadcast.
    `preferred_element_type`: the result's dtype (accumulated in it; not weakly typed);
    `precision`: passed to dot_general as in JAX (minijax does not lower it).
    `out_sharding` (a NamedSharding, or a PartitionSpec under `set_mesh`): the result's
    sharding, needed when both operands split the contracted dimension
    (minijax/lax/utils.py: dot_general_sharding_rule). Raises ValueError for 0-d operands or
    leading dimensions that do not broadcast, TypeError for mismatched contracting sizes.
    Mirrors jax/_src/numpy/tensor_contractions.py: matmul."""
    a, b = _promote_pair(a, b)
    a_aval, b_aval = a.aval, b.aval
    if not a_aval.shape or not b_aval.shape:
        raise ValueError(f"matmul: operands must be at least 1-D, got {a_aval.str_short()} "
                         f"and {b_aval.str_short()}")
    a_drop, b_drop, dims, perm, both = _matmul_plan(a_aval.shape, b_aval.shape)
    if a_drop:
        a = lax.squeeze(a, a_drop)
    if b_drop:
        b = lax.squeeze(b, b_drop)
    out = lax.dot_general(a, b, dims, precision=precision,
                          preferred_element_type=_result_dtype(a_aval, preferred_element_type),
                          out_sharding=None if out_sharding is None else
                          _emitted_order(out_sharding, perm))
    if perm is not None:
        out = lax.transpose(out, perm)
    return lax.expand_dims(out, both) if both else out


@functools.lru_cache(maxsize=256)
def _matmul_plan(a_shape: tuple, b_shape: tuple) -> tuple:
    """How matmul of operands of these shapes (at least 1-D) is one dot_general: the size-1
    leading axes to squeeze from each operand, the dimension numbers, the permutation
    from dot_general's result to matmul's (None: none needed), and the leading axes of
    size 1 in both operands (squeezed from both, put back in the result, as JAX's).
    Depends on the shapes only, so it is cached."""
    a_mat, b_mat = len(a_shape) > 1, len(b_shape) > 1
    if a_shape[-1] != b_shape[-2 if b_mat else 0]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(a_shape[-1],)} and {(b_shape[-2 if b_mat else 0],)}.")
    # A leading dimension is a batch dimension of dot_general only where both operands have it
    # with the same size; where one lacks it (or has size 1) it is a free dimension of the
    # other, so [B,T,d] @ [d,n] contracts d without broadcasting the weight to [B,d,n] (whose
    # gradient would be a batched product and then a sum over B). 1-D operands are contracted
    # as they are, with no axis added and removed.
    a_lead, b_lead = a_shape[:-2] if a_mat else (), b_shape[:-2] if b_mat else ()
    nb = max(len(a_lead), len(b_lead))
    a_lead = (None,) * (nb - len(a_lead)) + a_lead
    b_lead = (None,) * (nb - len(b_lead)) + b_lead
    batch, a_free, b_free, a_drop, b_drop, both = [], [], [], [], [], []
    for i, (m, n) in enumerate(zip(a_lead, b_lead)):
        if m is not None and n is not None and m == n and m != 1:
            batch.append(i)
        elif m == 1 and n == 1:  # as JAX: squeezed from both, put back in the result
            a_drop.append(i)
            b_drop.append(i)
            both.append(i)
        elif n is None or (n == 1 and m is not None):
            a_free.append(i)
            b_drop += [i] if n == 1 else []
        elif m is None or m == 1:
            b_free.append(i)
            a_drop += [i] if m == 1 else []
        else:
            raise ValueError(f"matmul: incompatible shapes {a_shape} and {b_shape}: leading "
                             f"dimensions {m} and {n} neither match nor broadcast")
    a_kept = [i for i in range(nb) if a_lead[i] is not None and i not in a_drop]
    b_kept = [i for i in range(nb) if b_lead[i] is not None and i not in b_drop]
    dims = _interned((((len(a_kept) + a_mat,), (len(b_kept) if b_mat else 0,)),
                      (tuple(a_kept.index(i) for i in batch),
                       tuple(b_kept.index(i) for i in batch))))
    # dot_general emits batch, then a's free dims and rows, then b's free dims and columns;
    # result dim i is emitted dim order[i] (the out_sharding is given in emitted order).
    emitted = batch + a_free + [nb] * a_mat + b_free + [nb + a_mat] * b_mat
    order = tuple(int(k) for k in np.argsort(emitted))
    return (tuple(i - (nb - len(a_shape) + 2) for i in a_drop),
            tuple(i - (nb - len(b_shape) + 2) for i in b_drop), dims,
            None if order == tuple(sorted(order)) else order, tuple(both))


def _emitted_order(out_sharding, order):
    """matmul's out_sharding for dot_general's result, whose dim order[i] is result dim i
    (`order` None: the same order)."""
    s = canonicalize_out_sharding(out_sharding, "matmul")
    if s is None or order is None:
        return s
    spec = list(s.spec) + [None] * (len(order) - len(s.spec))
    emitted = [None] * len(order)
    for i, j in enumerate(order):
        emitted[j] = spec[i]
    return NamedSharding(s.mesh, P(*emitted))


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """numpy.dot: scalars multiply (a dot_general contracting nothing, as JAX's), 1-D·1-D is
    the inner product, otherwise a contraction of a's last axis with b's second-to-last (or
    only) axis. `precision`, `preferred_element_type`, `out_sharding`: as in `matmul`.
    Raises TypeError for mismatched contracting sizes."""
    a, b = _promote_pair(a, b)
    a_aval = a.aval
    dn = _dot_dimension_numbers(a_aval.shape, b.aval.shape)
    out = lax.dot_general(a, b, dn, precision=precision,
                          preferred_element_type=_result_dtype(a_aval, preferred_element_type),
                          out_sharding=out_sharding)
    # as JAX's: weakly typed only when both operands are and no dtype was asked for
    weak = a_aval.weak_type and preferred_element_type is None
    return out if out.aval.weak_type == weak else \
        lax.convert_element_type(out, out.aval.dtype, weak_type=weak)


def _result_dtype(aval, preferred_element_type):
    # JAX: jax/_src/numpy/tensor_contractions.py matmul — the promoted dtype unless one is given
    return aval.dtype if preferred_element_type is None else preferred_element_type


@functools.lru_cache(maxsize=256)
def _dot_dimension_numbers(a_shape: tuple, b_shape: tuple) -> tuple:
    # as JAX's: nothing contracted when an operand is a scalar (a dot_general all the same)
    if not a_shape or not b_shape:
        return (((), ()), ((), ()))
    contract_b = 0 if len(b_shape) == 1 else len(b_shape) - 2
    if a_shape[-1] != b_shape[contract_b]:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {(a_shape[-1],)} and {(b_shape[contract_b],)}.")
    return _interned((((len(a_shape) - 1,), (contract_b,)), ((), ())))


# Equal dimension numbers as one object, whichever shapes they were computed for: then
# lax.dot_general's check against the last dimension numbers it canonicalized (by identity)
# hits across call sites, e.g. all the 2-D products of a model.
_INTERNED: dict = {}


def _interned(dimension_numbers: tuple) -> tuple:
    return _INTERNED.setdefault(dimension_numbers, dimension_numbers)


def vdot(a, b):
    return dot(lax_numpy.ravel(a), lax_numpy.ravel(b))


# JAX: jax/_src/numpy/tensor_contractions.py outer
def outer(a, b):
    """`T[a.size, b.size]`: every entry of flattened `a` times every entry of flattened `b`,
    as `ravel(a)[:, None] * ravel(b)[None, :]` (a 1-D operand is not reshaped)."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    column = lax.expand_dims(lax_numpy.ravel(a), (1,))  # in JAX's order of equations
    return ufuncs.multiply(column, lax.expand_dims(lax_numpy.ravel(b), (0,)))


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


# JAX: jax/_src/numpy/tensor_contractions.py matvec
def matvec(x1, x2, /):
    """Matrix-vector products over broadcast batches: `T[..., m, n] x T[..., n] ->
    T[..., m]`, the gufunc `(n,m),(m)->(n)` (ValueError, as JAX's, for a 1-D matrix)."""
    return vectorize(matmul, signature="(n,m),(m)->(n)")(x1, x2)


# JAX: jax/_src/numpy/tensor_contractions.py vecmat
def vecmat(x1, x2, /):
    """Vector-matrix products over broadcast batches: `T[..., n] x T[..., n, m] ->
    T[..., m]`, with x1 conjugated (as the array API's vecmat): the gufunc `(n),(n,m)->(m)`."""
    return vectorize(matmul, signature="(n),(n,m)->(m)")(ufuncs.conj(asarray(x1)), x2)
