"""Collectives: operations over named axes, bound by `shard_map` (devices) or `vmap(axis_name=)`.

Inside `shard_map` a program sees one block per device; a collective is the only way values
move between devices. Each collective is a primitive with rules that pair up under
transposition: psum <-> pvary, all_gather <-> psum_scatter, ppermute <-> the inverse
permutation, all_to_all <-> all_to_all with split and concat axes swapped. Under `vmap` with an
axis name, the same collectives act on the batch axis (`psum` sums over the examples).

Avals inside shard_map carry `vma`, the manual axes a value varies along: a psum result is
invariant (the same on every device), a ppermute result varies. Mirrors
jax/_src/lax/parallel.py. Taught in chapters/13-shard-map.md.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from minijax import core
from minijax.core import Primitive, ShapedArray, pvary, pvary_p
from minijax.interpreters import ad, batching, mlir
from minijax.interpreters.batching import not_mapped
from minijax.lax import lax, slicing
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import PartitionSpec
from minijax.tree_util import tree_leaves, tree_map

_CHAPTER = "chapters/13-shard-map.md"


class _Context(threading.local):
    def __init__(self) -> None:
        self.check_vma = False  # set while shard_map traces a body with check_vma=True
        self.meshes: list = []  # (mesh, manual axes) of the shard_map bodies being lowered
        self.bodies: list = []  # (mesh, manual axes, check_vma) of those being traced


ctx = _Context()


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _size(axes: tuple) -> int:
    return math.prod(core.axis_size(a) for a in axes)


def _check_varying(name: str, aval: ShapedArray, axes: tuple) -> None:
    """JAX's error for a collective that needs its operand to vary along `axes`."""
    if ctx.check_vma and not set(axes) <= aval.vma:
        raise ValueError(f"{name} over axes {axes} needs an operand that varies along them, "
                         f"but its type is {aval.str_short()}; call `jax.lax.pvary(x, "
                         f"{axes})` first — see {_CHAPTER}")


def _vary(x, axes: tuple):
    """`x` made varying along those of `axes` it does not vary along yet (check_vma only)."""
    missing = tuple(a for a in axes if a not in core.get_aval(x).vma)
    return pvary(x, missing) if ctx.check_vma and missing else x


# ---------------------------------------------------------------------------------------------
# Lowering helpers: replica groups over the mesh of the enclosing shard_map
# ---------------------------------------------------------------------------------------------

def _mesh(name: str):
    if not ctx.meshes:
        raise NotImplementedError(f"'{name}' can only be compiled inside shard_map (under vmap "
                                  f"its axis is a batch axis) — see {_CHAPTER}")
    return ctx.meshes[-1][0]


def _group_ids(mesh, axes: tuple) -> np.ndarray:
    """Partition ids (mesh positions, row major) grouped: one row per group of devices that
    differ only along `axes`, in the order of `axes` (major to minor)."""
    ids = np.arange(mesh.size).reshape(mesh.axis_sizes)
    pos = [mesh.axis_names.index(a) for a in axes]
    rest = [i for i in range(ids.ndim) if i not in pos]
    return ids.transpose(rest + pos).reshape(-1, math.prod(mesh.axis_sizes[i] for i in pos))


def _replica_groups(name: str, axes: tuple):
    groups = np.ascontiguousarray(_group_ids(_mesh(name), axes), np.int64)
    return mlir.ir.DenseIntElementsAttr.get(groups)


def _channel():
    return mlir.hlo.ChannelHandle.get(handle=1, type=1)


def _reducer_region(op, dtype, op_name: str) -> None:
    scalar = mlir.aval_to_ir_type(ShapedArray((), dtype))
    block = op.regions[0].blocks.append(scalar, scalar)
    with mlir.ir.InsertionPoint(block):
        mlir.hlo.return_([getattr(mlir.hlo, op_name)(*block.arguments)])


def _reshape(x, aval: ShapedArray):
    return mlir.hlo.reshape(mlir.aval_to_ir_type(aval), x)


# ---------------------------------------------------------------------------------------------
# psum, pmax, pmin (all_reduce); pmean
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py psum
def psum(x, axis_name, *, axis_index_groups=None):
    """Sum `x` (a pytree of arrays) over the named axes `axis_name` (a name or a tuple).

    Returns the same shapes; inside shard_map the result is invariant along those axes.
    Booleans are counted: a bool leaf is summed as int32, as in JAX.
    Raises NameError for an axis name no shard_map or vmap binds.
    JAX: jax/_src/lax/parallel.py psum — differs: no axis_index_groups.
    """
    for v in tree_leaves(x):
        _check_one_state(core.get_aval(v), _names(axis_name), "psum")
    x = tree_map(lambda v: lax.convert_element_type(v, np.int32)
                 if core.get_aval(v).dtype == np.bool_ else v, x)
    return _allreduce(psum_invariant_p, x, axis_name, axis_index_groups)


# JAX: jax/_src/lax/parallel.py _get_from
def _check_one_state(aval: ShapedArray, axes: tuple, name: str) -> None:
    """psum (psum_scatter) sums over axes the operand varies along, or over axes it is the
    same along (each device then adds its copy n times), never over a mix: ValueError as
    JAX's."""
    states = {"varying" if a in aval.vma else "invarying" for a in axes}
    if len(states) > 1:
        raise ValueError(f"jax.lax.{name} can only accept axis_name which corresponds to one of "
                         f"varying, unreduced, reduced or invarying state of the input. Got "
                         f"input type: {aval.str_short()}, "
                         f"axes: {axes} and input state: {states}")


def pmax(x, axis_name, *, axis_index_groups=None):
    """Elementwise maximum of `x` over the named axes. JAX: jax/_src/lax/parallel.py pmax."""
    return _allreduce(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Elementwise minimum of `x` over the named axes. JAX: jax/_src/lax/parallel.py pmin."""
    return _allreduce(pmin_p, x, axis_name, axis_index_groups)


# JAX: jax/_src/lax/parallel.py pmean
def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of `x` over the named axes: psum divided (true division, so integers give
    floats, as in JAX) by the product of their sizes."""
    n = _size(_names(axis_name))
    return tree_map(lambda s: s / n, psum(x, axis_name, axis_index_groups=axis_index_groups))


def _allreduce(prim, x, axis_name, axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError(f"{prim.name}: axis_index_groups is not supported")
    axes = _names(axis_name)
    _size(axes)  # NameError for an unbound name, before anything is traced
    return tree_map(lambda v: prim.bind(_vary(v, axes), axes=axes), x)


def _allreduce_abstract_eval(name):
    def rule(aval, *, axes):
        _size(axes)
        _check_varying(name, aval, axes)
        return aval.update(vma=aval.vma - set(axes))
    return rule


def _allreduce_batch_rule(prim):
    def rule(vals, dims, *, axis_size, axes):
        return prim.bind(vals[0], axes=axes), dims[0]
    return rule


def _allreduce_vmap_axis_rule(reducer, unbatched):
    def rule(vname, vsize, vals, dims, *, axes, prim):
        (x,), (d,) = vals, dims
        x = unbatched(x, vsize) if d is not_mapped else reducer(x, (d,))
        rest = tuple(a for a in axes if a != vname)
        return (prim.bind(x, axes=rest) if rest else x), not_mapped
    return rule


def _allreduce_lowering(op_name: str):
    def rule(ctx_, x, *, axes):
        aval = ctx_.avals_in[0]
        op = mlir.hlo.AllReduceOp([mlir.aval_to_ir_type(aval)], [x],
                                  _replica_groups("psum", axes), channel_handle=_channel(),
                                  use_global_device_ids=True)
        _reducer_region(op, aval.dtype, op_name)
        return op.results[0]
    rule.__name__ = f"_all_reduce_{op_name}_lowering"
    return rule


def _psum_transpose(ct, x, *, axes):
    # with check_vma: hand the invariant cotangent to every device (pvary moves nothing);
    # without, shard_map's transpose has scaled the cotangents so that a psum is right
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [pvary(ct, axes) if ctx.check_vma else psum_invariant_p.bind(ct, axes=axes)]


def _times_size(x, n):
    return lax.mul(x, lax.convert_element_type(n, core.get_aval(x).dtype))


psum_invariant_p = Primitive("psum_invariant")
psum_invariant_p.def_abstract_eval(_allreduce_abstract_eval("psum"))
ad.deflinear(psum_invariant_p, _psum_transpose)
batching.primitive_batchers[psum_invariant_p] = _allreduce_batch_rule(psum_invariant_p)
mlir.register_lowering(psum_invariant_p, _allreduce_lowering("add"))


def _reduce_max(x, axes):
    return lax.reduce_max(x, axes)


def _reduce_min(x, axes):
    return lax.reduce_min(x, axes)


def _reduce_sum(x, axes):
    return lax.reduce_sum(x, axes)


pmax_p = Primitive("pmax")
pmax_p.def_abstract_eval(_allreduce_abstract_eval("pmax"))
batching.primitive_batchers[pmax_p] = _allreduce_batch_rule(pmax_p)
mlir.register_lowering(pmax_p, _allreduce_lowering("maximum"))

pmin_p = Primitive("pmin")
pmin_p.def_abstract_eval(_allreduce_abstract_eval("pmin"))
batching.primitive_batchers[pmin_p] = _allreduce_batch_rule(pmin_p)
mlir.register_lowering(pmin_p, _allreduce_lowering("minimum"))


# ---------------------------------------------------------------------------------------------
# pvary: an invariant value, typed as varying (the transpose of psum); `pvary` and `pvary_p`
# are core's, as in JAX, and their rules are here
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py pcast — differs: only to='varying' (minijax has no
# reduced/unreduced types)
def pcast(x, axis_name, *, to: str):
    """Change how `x` (a pytree) is typed along the named manual axes; to='varying' is `pvary`.
    Shapes and dtypes are unchanged. Raises TypeError for a set of names,
    NotImplementedError for another `to`. Mirrors jax/_src/lax/parallel.py: pcast."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if to != "varying":
        raise NotImplementedError(f"pcast(..., to={to!r}): minijax supports only "
                                  f"to='varying' (no reduced or unreduced types)")
    return pvary(x, axis_name)


def _pvary_abstract_eval(aval, *, axes):
    return aval.update(vma=aval.vma | set(axes)) if ctx.check_vma or aval.vma else aval


def _pvary_transpose(ct, x, *, axes):
    # (a cotangent typed as invariant holds the same value everywhere: pvary it first)
    return [ad.Zero(x.aval) if type(ct) is ad.Zero else
            psum_invariant_p.bind(_vary(ct, axes), axes=axes)]


def _pvary_vmap_axis_rule(vname, vsize, vals, dims, *, axes, prim):
    rest = tuple(a for a in axes if a != vname)
    return (pvary_p.bind(vals[0], axes=rest) if rest else vals[0]), dims[0]


pvary_p.def_abstract_eval(_pvary_abstract_eval)
ad.deflinear(pvary_p, _pvary_transpose)
batching.primitive_batchers[pvary_p] = _allreduce_batch_rule(pvary_p)
mlir.register_lowering(pvary_p, lambda ctx_, x, *, axes: x)


# ---------------------------------------------------------------------------------------------
# all_gather <-> psum_scatter (reduce_scatter)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py all_gather
def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False,
               to: str = "varying"):
    """Gather the blocks of `x` from every device along the named axes.

    `x`: f32[a,b] per device. tiled=False: a new axis of size n (the axes' total size) at
    `axis` (f32[n,a,b] for axis=0); tiled=True: dimension `axis` is concatenated (f32[n*a,b]).
    to='varying' (default): the result is still typed as varying along the axes, and the
    transpose is `psum_scatter`; to='invarying' (`all_gather_invariant`): typed as the same on
    every device, and the transpose slices this device's block. Raises ValueError for an axis
    out of range or another `to`.
    """
    if axis_index_groups is not None:
        raise NotImplementedError("all_gather: axis_index_groups is not supported")
    if to not in ("varying", "invarying"):
        raise ValueError(f"Got unexpected `to` value for `jax.lax.all_gather`: {to!r}. "
                         f"minijax allows 'varying' and 'invarying'")
    prim = all_gather_p if to == "varying" else all_gather_invariant_p
    axes = _names(axis_name)

    def bind(v):
        nd = core.get_aval(v).ndim
        ax = axis + nd + (not tiled) if axis < 0 else axis
        if not 0 <= ax <= nd - tiled:
            raise ValueError(f"all_gather: axis {axis} is out of bounds for an operand of "
                             f"rank {nd}")
        v = _vary(v, axes)
        return prim.bind(v, all_gather_dimension=ax, axis_name=axes, tiled=bool(tiled))
    return tree_map(bind, x)


# JAX: jax/_src/lax/parallel.py all_gather_invariant
def all_gather_invariant(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """`all_gather(x, axis_name, axis=axis, tiled=tiled, to='invarying')`."""
    return all_gather(x, axis_name, axis=axis, tiled=tiled, to="invarying")


def _all_gather_abstract_eval(aval, *, all_gather_dimension, axis_name, tiled):
    _check_varying("all_gather", aval, axis_name)
    axis_size = _size(axis_name)
    shape = list(aval.shape)
    if tiled:
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return aval.update(shape=tuple(shape))


def _all_gather_transpose(ct, x, *, all_gather_dimension, axis_name, tiled):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [reduce_scatter_p.bind(_vary(ct, axis_name), scatter_dimension=all_gather_dimension,
                                  axis_name=axis_name, tiled=tiled)]


def _all_gather_batch_rule(vals, dims, *, axis_size, all_gather_dimension, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return all_gather_p.bind(x, all_gather_dimension=all_gather_dimension + 1, **params), 0


def _all_gather_vmap_axis_rule(vname, vsize, vals, dims, *, prim, all_gather_dimension,
                               tiled, **params):
    if params["axis_name"] != (vname,):
        raise NotImplementedError("all_gather over a vmapped axis and other axes at once")
    x = batching.bdim_at_front(vals[0], dims[0], vsize)
    x = batching.moveaxis(x, 0, all_gather_dimension)
    if tiled:
        shape = list(core.get_aval(x).shape)
        shape[all_gather_dimension:all_gather_dimension + 2] = [
            shape[all_gather_dimension] * shape[all_gather_dimension + 1]]
        x = lax.reshape(x, tuple(shape))
    return x, not_mapped


def _all_gather_lowering(ctx_, x, *, all_gather_dimension, axis_name, tiled):
    aval_in, aval_out = ctx_.avals_in[0], ctx_.avals_out[0]
    if not tiled:  # gather along a new axis of size 1
        shape = list(aval_in.shape)
        shape.insert(all_gather_dimension, 1)
        x = _reshape(x, aval_in.update(shape=tuple(shape)))
    op = mlir.hlo.AllGatherOp([mlir.aval_to_ir_type(aval_out)], [x], all_gather_dimension,
                              _replica_groups("all_gather", axis_name),
                              channel_handle=_channel(), use_global_device_ids=True)
    return op.results[0]


all_gather_p = Primitive("all_gather")
all_gather_p.def_abstract_eval(_all_gather_abstract_eval)
ad.deflinear(all_gather_p, _all_gather_transpose)
batching.primitive_batchers[all_gather_p] = _all_gather_batch_rule
mlir.register_lowering(all_gather_p, _all_gather_lowering)


def _all_gather_invariant_abstract_eval(aval, *, all_gather_dimension, axis_name, tiled):
    out = _all_gather_abstract_eval(aval, all_gather_dimension=all_gather_dimension,
                                    axis_name=axis_name, tiled=tiled)
    return out.update(vma=out.vma - set(axis_name))


def _all_gather_invariant_transpose(ct, x, *, all_gather_dimension, axis_name, tiled):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    ct = _vary(ct, axis_name)  # the same cotangent everywhere; each device keeps its block
    j = axis_index(axis_name)
    if tiled:
        b = x.aval.shape[all_gather_dimension]
        return [slicing.dynamic_slice_in_dim(ct, j * b, b, axis=all_gather_dimension)]
    return [slicing.dynamic_index_in_dim(ct, j, axis=all_gather_dimension, keepdims=False)]


def _all_gather_invariant_batch_rule(vals, dims, *, axis_size, all_gather_dimension, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return all_gather_invariant_p.bind(x, all_gather_dimension=all_gather_dimension + 1,
                                       **params), 0


all_gather_invariant_p = Primitive("all_gather_invariant")
all_gather_invariant_p.def_abstract_eval(_all_gather_invariant_abstract_eval)
ad.deflinear(all_gather_invariant_p, _all_gather_invariant_transpose)
batching.primitive_batchers[all_gather_invariant_p] = _all_gather_invariant_batch_rule
mlir.register_lowering(all_gather_invariant_p, _all_gather_lowering)


# JAX: jax/_src/lax/parallel.py psum_scatter
def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """Sum `x` over the named axes and keep this device's block of the sum.

    `x`: f32[n*a,b] per device (n: the axes' total size). tiled=True: f32[a,b], block j of
    dimension `scatter_dimension` on device j; tiled=False: that dimension must have size n
    and is removed (f32[b] for a = 1). Its transpose is `all_gather`. Raises ValueError when
    the dimension does not divide into n blocks.
    """
    if axis_index_groups is not None:
        raise NotImplementedError("psum_scatter: axis_index_groups is not supported")
    axes = _names(axis_name)
    n = _size(axes)

    def bind(v):
        aval = core.get_aval(v)
        _check_one_state(aval, axes, "psum_scatter")
        d = scatter_dimension + aval.ndim if scatter_dimension < 0 else scatter_dimension
        if not 0 <= d < aval.ndim or (aval.shape[d] % n if tiled else aval.shape[d] != n):
            want = f"a multiple of {n}" if tiled else f"equal to {n}"
            raise ValueError(f"psum_scatter: dimension {scatter_dimension} of the operand "
                             f"{aval.str_short()} must have a size {want} (the size of axes "
                             f"{axes})")
        return reduce_scatter_p.bind(_vary(v, axes), scatter_dimension=d, axis_name=axes,
                                     tiled=bool(tiled))
    return tree_map(bind, x)


def _reduce_scatter_abstract_eval(aval, *, scatter_dimension, axis_name, tiled):
    _check_varying("psum_scatter", aval, axis_name)
    axis_size = _size(axis_name)
    shape = list(aval.shape)
    if tiled:
        shape[scatter_dimension] //= axis_size
    else:
        del shape[scatter_dimension]
    return aval.update(shape=tuple(shape))


def _reduce_scatter_transpose(ct, x, *, scatter_dimension, axis_name, tiled):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [all_gather_p.bind(_vary(ct, axis_name), all_gather_dimension=scatter_dimension,
                              axis_name=axis_name, tiled=tiled)]


def _reduce_scatter_batch_rule(vals, dims, *, axis_size, scatter_dimension, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension + 1, **params), 0


def _reduce_scatter_vmap_axis_rule(vname, vsize, vals, dims, *, prim,
                                   scatter_dimension, tiled, **params):
    if params["axis_name"] != (vname,):
        raise NotImplementedError("psum_scatter over a vmapped axis and other axes at once")
    x = vals[0]
    s = _times_size(x, vsize) if dims[0] is not_mapped else _reduce_sum(x, (dims[0],))
    if tiled:  # split the dimension into (vsize, block): example j keeps block j
        shape = list(core.get_aval(s).shape)
        shape[scatter_dimension:scatter_dimension + 1] = [vsize,
                                                          shape[scatter_dimension] // vsize]
        s = lax.reshape(s, tuple(shape))
    return batching.moveaxis(s, scatter_dimension, 0), 0


def _reduce_scatter_lowering(ctx_, x, *, scatter_dimension, axis_name, tiled):
    aval_in, aval_out = ctx_.avals_in[0], ctx_.avals_out[0]
    axis_size = math.prod(_mesh("psum_scatter").shape[a] for a in axis_name)
    shape = list(aval_in.shape)
    shape[scatter_dimension] //= axis_size
    tiled_aval = aval_in.update(shape=tuple(shape))
    op = mlir.hlo.ReduceScatterOp(mlir.aval_to_ir_type(tiled_aval), x, scatter_dimension,
                                  _replica_groups("psum_scatter", axis_name),
                                  channel_handle=_channel(), use_global_device_ids=True)
    _reducer_region(op, aval_in.dtype, "add")
    return op.result if tiled else _reshape(op.result, aval_out)


reduce_scatter_p = Primitive("reduce_scatter")
reduce_scatter_p.def_abstract_eval(_reduce_scatter_abstract_eval)
ad.deflinear(reduce_scatter_p, _reduce_scatter_transpose)
batching.primitive_batchers[reduce_scatter_p] = _reduce_scatter_batch_rule
mlir.register_lowering(reduce_scatter_p, _reduce_scatter_lowering)


# ---------------------------------------------------------------------------------------------
# ppermute (collective_permute)
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py ppermute
def ppermute(x, axis_name, perm):
    """Send this device's `x` along the named axes: `perm` is a sequence of (source, dest)
    positions along them; a device no pair sends to receives zeros. Its transpose is the
    inverse permutation. Raises ValueError if `perm` is not a permutation (a repeated source
    or destination, or a position outside the axis)."""
    axes = _names(axis_name)
    n = _size(axes)
    perm = tuple((int(s), int(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    if any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute: every position in perm {perm} must be in [0, {n}) for "
                         f"axes {axes} of size {n}")
    return tree_map(lambda v: ppermute_p.bind(_vary(v, axes), axis_name=axes, perm=perm), x)


def _ppermute_abstract_eval(aval, *, axis_name, perm):
    _size(axis_name)
    _check_varying("ppermute", aval, axis_name)
    return aval


def _ppermute_transpose(ct, x, *, axis_name, perm):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [ppermute_p.bind(_vary(ct, axis_name), axis_name=axis_name,
                            perm=tuple((d, s) for s, d in perm))]


def _ppermute_batch_rule(vals, dims, *, axis_size, axis_name, perm):
    return ppermute_p.bind(vals[0], axis_name=axis_name, perm=perm), dims[0]


def _ppermute_vmap_axis_rule(vname, vsize, vals, dims, *, prim, perm, **params):
    if params["axis_name"] != (vname,):
        raise NotImplementedError("ppermute over a vmapped axis and other axes at once")
    x = batching.bdim_at_front(vals[0], dims[0], vsize)
    src_of = {d: s for s, d in perm}
    shape = core.get_aval(x).shape
    zero = lax.full((1, *shape[1:]), 0, core.get_aval(x).dtype)
    rows = [lax.slice(x, (src_of[j], *[0] * (len(shape) - 1)), (src_of[j] + 1, *shape[1:]))
            if j in src_of else zero for j in range(vsize)]
    return lax.concatenate(rows, 0), 0


def _ppermute_lowering(ctx_, x, *, axis_name, perm):
    groups = _group_ids(_mesh("ppermute"), axis_name)
    pairs = np.array([[g[s], g[d]] for g in groups for s, d in perm], np.int64)
    op = mlir.hlo.CollectivePermuteOp(x, mlir.ir.DenseIntElementsAttr.get(pairs.reshape(-1, 2)),
                                      channel_handle=_channel())
    return op.result


ppermute_p = Primitive("ppermute")
ppermute_p.def_abstract_eval(_ppermute_abstract_eval)
ad.deflinear(ppermute_p, _ppermute_transpose)
batching.primitive_batchers[ppermute_p] = _ppermute_batch_rule
mlir.register_lowering(ppermute_p, _ppermute_lowering)


# ---------------------------------------------------------------------------------------------
# all_to_all
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py all_to_all — differs: tiled=False binds the tiled primitive
# between a reshape and a squeeze
def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Split dimension `split_axis` of `x` into n chunks (n: the size of the named axis),
    send chunk j to device j, and concatenate what arrives along `concat_axis`.

    tiled=True: f32[n*a,b] -> f32[a,n*b] for split 0, concat 1. tiled=False: the split
    dimension must have size n and is removed, and a new axis of size n appears at
    `concat_axis`. Its transpose is all_to_all with the two axes swapped. Raises ValueError
    when the split dimension does not divide into n chunks.
    """
    if axis_index_groups is not None:
        raise NotImplementedError("all_to_all: axis_index_groups is not supported")
    axes = _names(axis_name)
    n = _size(axes)

    def bind(v):
        aval = core.get_aval(v)
        if aval.shape[split_axis] % n if tiled else aval.shape[split_axis] != n:
            raise ValueError(f"all_to_all: dimension {split_axis} of {aval.str_short()} must "
                             f"be {'divisible by' if tiled else 'equal to'} the size {n} of "
                             f"axis {axis_name}")
        v = _vary(v, axes)
        if tiled:
            return all_to_all_p.bind(v, axis_name=axis_name, split_axis=split_axis,
                                     concat_axis=concat_axis, tiled=True)
        # a size-1 axis placed so that, once the split axis is squeezed out, it sits at
        # concat_axis; the tiled all_to_all then fills it with one chunk per device
        c, s = ((concat_axis, split_axis + 1) if concat_axis <= split_axis else
                (concat_axis + 1, split_axis))
        out = all_to_all_p.bind(lax.expand_dims(v, (c,)), axis_name=axis_name, split_axis=s,
                                concat_axis=c, tiled=True)
        return lax.squeeze(out, (s,))
    return tree_map(bind, x)


def _all_to_all_abstract_eval(aval, *, axis_name, split_axis, concat_axis, tiled):
    axes = _names(axis_name)
    _check_varying("all_to_all", aval, axes)
    n = _size(axes)
    shape = list(aval.shape)
    shape[split_axis] //= n
    shape[concat_axis] *= n
    return aval.update(shape=tuple(shape))


def _all_to_all_transpose(ct, x, *, axis_name, split_axis, concat_axis, tiled):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [all_to_all_p.bind(_vary(ct, _names(axis_name)), axis_name=axis_name,
                              split_axis=concat_axis,
                              concat_axis=split_axis, tiled=tiled)]


def _all_to_all_batch_rule(vals, dims, *, axis_size, split_axis, concat_axis, **params):
    x = batching.moveaxis(vals[0], dims[0], 0)
    return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                             **params), 0


def _all_to_all_vmap_axis_rule(vname, vsize, vals, dims, *, prim, split_axis,
                               concat_axis, **params):
    if _names(params["axis_name"]) != (vname,):
        raise NotImplementedError("all_to_all over a vmapped axis and other axes at once")
    n = vsize
    x = batching.bdim_at_front(vals[0], dims[0], n)  # [k, ...]: example k's value
    shape = list(core.get_aval(x).shape)
    s, c = split_axis + 1, concat_axis + 1
    # split dimension s into (chunk j, block): [k, ..., j, blk, ...]
    shape[s:s + 1] = [n, shape[s] // n]
    x = lax.reshape(x, tuple(shape))
    x = batching.moveaxis(x, s, 0)      # [j, k, ...]: example j receives chunk j from every k
    c = c + (c > s)                     # position of the concat dim in x (after the split)
    x = batching.moveaxis(x, 1, c)      # put the source index k just before the concat dim
    shape = list(core.get_aval(x).shape)
    shape[c:c + 2] = [shape[c] * shape[c + 1]]
    return lax.reshape(x, tuple(shape)), 0


def _all_to_all_lowering(ctx_, x, *, axis_name, split_axis, concat_axis, tiled):
    axes = _names(axis_name)
    n = math.prod(_mesh("all_to_all").shape[a] for a in axes)
    op = mlir.hlo.AllToAllOp([x], split_axis, concat_axis, n,
                             _replica_groups("all_to_all", axes), channel_handle=_channel(),
                             results=[mlir.aval_to_ir_type(ctx_.avals_out[0])])
    return op.results[0]


all_to_all_p = Primitive("all_to_all")
all_to_all_p.def_abstract_eval(_all_to_all_abstract_eval)
ad.deflinear(all_to_all_p, _all_to_all_transpose)
batching.primitive_batchers[all_to_all_p] = _all_to_all_batch_rule
mlir.register_lowering(all_to_all_p, _all_to_all_lowering)


# ---------------------------------------------------------------------------------------------
# axis_index, axis_size
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py axis_index
def axis_index(axis_name):
    """This device's position along the named axis (a tuple: the row-major position over
    them), as i32[] varying along it. Raises NameError for an unbound name."""
    axes = _names(axis_name)
    _size(axes)
    return axis_index_p.bind(axis_name=axis_name)


# JAX: jax/_src/lax/parallel.py axis_size
def axis_size(axis_name) -> int:
    """The size of the named axis (the product for a tuple), a Python int."""
    return _size(_names(axis_name))


def _axis_index_abstract_eval(*, axis_name):
    axes = _names(axis_name)
    _size(axes)
    return ShapedArray((), np.int32, False,
                       vma=frozenset(axes) if ctx.check_vma else frozenset())


def _axis_index_vmap_axis_rule(vname, vsize, vals, dims, *, prim, **params):
    if _names(params["axis_name"]) != (vname,):
        raise NotImplementedError("axis_index over a vmapped axis and other axes at once")
    return lax.iota(np.int32, vsize), 0


def _axis_index_lowering(ctx_, *, axis_name):
    mesh, manual = ctx.meshes[-1] if ctx.meshes else (_mesh("axis_index"), None)
    if manual != frozenset(mesh.axis_names):
        # partial-manual body: partition_id is read in a region manual along the other axes
        # too (JAX does the same), so that the partitioner leaves it alone
        sdy = mlir.sdy
        rest = [a for a in mesh.axis_names if a not in manual]
        mlir.sharding_attr(_replicated(mesh), 0)  # the module's mesh
        none = mlir.ir.Attribute.parse("#sdy.sharding_per_value<[]>")
        rep = mlir.ir.Attribute.parse("#sdy.sharding_per_value<[<@mesh, []>]>")
        op = sdy.ManualComputationOp(
            [mlir.aval_to_ir_type(ctx_.avals_out[0])], [], none, rep,
            sdy.ManualAxesAttr.get([mlir.ir.StringAttr.get(a) for a in rest]))
        block = mlir.ir.Block.create_at_start(op.body, [])
        with mlir.ir.InsertionPoint(block):
            sdy.ReturnOp([_axis_index_value(ctx_, mesh, axis_name)])
        return op.results[0]
    return _axis_index_value(ctx_, mesh, axis_name)


def _replicated(mesh):
    return NamedSharding(mesh, PartitionSpec())


def _axis_index_value(ctx_, mesh, axis_name):
    pid = mlir.hlo.PartitionIdOp().result
    out = None
    for a in _names(axis_name):
        i = mesh.axis_names.index(a)
        stride = math.prod(mesh.axis_sizes[i + 1:])
        pos = mlir.hlo.remainder(mlir.hlo.divide(pid, mlir.ir_constant(np.uint32(stride))),
                                 mlir.ir_constant(np.uint32(mesh.axis_sizes[i])))
        out = pos if out is None else mlir.hlo.add(
            mlir.hlo.multiply(out, mlir.ir_constant(np.uint32(mesh.axis_sizes[i]))), pos)
    return mlir.hlo.convert(mlir.aval_to_ir_type(ctx_.avals_out[0]), out)


axis_index_p = Primitive("axis_index")
axis_index_p.def_abstract_eval(_axis_index_abstract_eval)
mlir.register_lowering(axis_index_p, _axis_index_lowering)


# ---------------------------------------------------------------------------------------------
# Named vmap axes: the rules that run when a collective names the vmapped axis
# ---------------------------------------------------------------------------------------------

def _with_prim(prim, rule):
    return lambda vname, vsize, vals, dims, **params: rule(vname, vsize, vals, dims, prim=prim,
                                                           **params)


batching.axis_primitive_batchers.update({
    psum_invariant_p: _with_prim(psum_invariant_p, _allreduce_vmap_axis_rule(
        _reduce_sum, _times_size)),
    pmax_p: _with_prim(pmax_p, _allreduce_vmap_axis_rule(_reduce_max, lambda x, n: x)),
    pmin_p: _with_prim(pmin_p, _allreduce_vmap_axis_rule(_reduce_min, lambda x, n: x)),
    pvary_p: _with_prim(pvary_p, _pvary_vmap_axis_rule),
    all_gather_p: _with_prim(all_gather_p, _all_gather_vmap_axis_rule),
    all_gather_invariant_p: _with_prim(all_gather_invariant_p, _all_gather_vmap_axis_rule),
    reduce_scatter_p: _with_prim(reduce_scatter_p, _reduce_scatter_vmap_axis_rule),
    ppermute_p: _with_prim(ppermute_p, _ppermute_vmap_axis_rule),
    all_to_all_p: _with_prim(all_to_all_p, _all_to_all_vmap_axis_rule),
    axis_index_p: _with_prim(axis_index_p, _axis_index_vmap_axis_rule),
})

core.vma_primitives.update({psum_invariant_p, pmax_p, pmin_p, pvary_p, all_gather_p,
                            all_gather_invariant_p,
                            reduce_scatter_p, ppermute_p, all_to_all_p, axis_index_p})


# ---------------------------------------------------------------------------------------------
# pshuffle, pswapaxes, pbroadcast: collectives spelt with the ones above
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/lax/parallel.py pshuffle
def pshuffle(x, axis_name, perm):
    """Device i along `axis_name` receives the `x` of device `perm[i]` (a permutation of
    range(n)): `ppermute` with the pairs (perm[i], i). ValueError if `perm` is not one."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


# JAX: jax/_src/lax/parallel.py pswapaxes
def pswapaxes(x, axis_name, axis: int, *, axis_index_groups=None):
    """Swap the named axis with positional `axis` of `x`: `all_to_all(x, axis_name, axis,
    axis)`, so `x.shape[axis]` must equal the named axis' size."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


# JAX: jax/_src/lax/parallel.py pbroadcast — differs: an all_gather and a pick (JAX lowers
# to XLA's CollectiveBroadcast, which sends one copy)
def pbroadcast(x, axis_name, source: int):
    """Every device along `axis_name` gets the `x` (a pytree) of device `source`."""
    def one(v):
        gathered = all_gather(v, axis_name)
        nd = core.get_aval(gathered).ndim
        starts = [int(source)] + [0] * (nd - 1)
        limits = [int(source) + 1] + list(core.get_aval(gathered).shape[1:])
        return lax.squeeze(lax.slice(gathered, starts, limits), (0,))
    return tree_map(one, x)
