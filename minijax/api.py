"""The user-facing transformations: jvp, vmap, linearize, vjp, grad, jacobians, make_jaxpr.

Each flattens its pytree arguments, runs the flat interpreter (interpreters/ad.py,
batching.py, partial_eval.py) and rebuilds the output pytrees. Mirrors jax/_src/api.py.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from minijax import (
    api_util,
    compiler,
    core,
    dispatch,
    dtypes,
    numpy as jnp,
    pjit,
    traceback_util,
    xla_bridge,
)
from minijax.api_util import flatten_fun_nokwargs, flatten_fun_nokwargs_aux, fun_name
from minijax.array import Array, array_from_numpy
from minijax.config import config
from minijax.core import ClosedJaxpr, ShapedArray, ShapeDtypeStruct
from minijax.dispatch import MemorySpace, device_put_p
from minijax.interpreters import ad, batching, partial_eval as pe, pxla
from minijax.lax import lax as lax_internal
from minijax.mesh import get_abstract_mesh, get_concrete_mesh
from minijax.named_sharding import NamedSharding, Sharding
from minijax.partition_spec import PartitionSpec, _axes_of
from minijax.pjit import jit  # re-exported
from minijax.sharding_impls import SingleDeviceSharding, aval_sharding, canonicalize_sharding
from minijax.tree_util import (
    Partial,
    PyTreeDef,
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_unflatten,
)


def _as_arrays(xs: list) -> list:
    """Outputs of a transformation as minijax Arrays (or tracers of an outer one), never bare
    numpy values or Python scalars — e.g. `vmap(lambda x, c: c * 2, (0, None))` or an output
    that is an input passed through untouched. (float0 tangents stay numpy, as in JAX.)"""
    def as_array(x):
        if isinstance(x, (core.Tracer, Array)):
            return x
        aval = core.get_aval(x)
        if aval.dtype == dtypes.float0:
            return x
        return array_from_numpy(core.to_numpy(x, aval), aval.weak_type)
    return [as_array(x) for x in xs]


# ---------------------------------------------------------------------------------------------
# make_jaxpr
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/api.py make_jaxpr
def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = ()) -> Callable:
    """`make_jaxpr(f)(*args)` traces `f` on the avals of `args` (pytrees) and returns the
    `ClosedJaxpr`; print it to read the program.

    Example: `make_jaxpr(jnp.sin)(jnp.ones(3))` prints
    `{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }`.
    """
    static_argnums = api_util.ensure_index_tuple(static_argnums)

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def make(*args, **kwargs):
        statics, _, dyn, kwargs = api_util.split_static(args, kwargs, static_argnums, ())
        flat, in_tree = tree_flatten((dyn, kwargs))

        def f(*leaves):
            d, kw = tree_unflatten(in_tree, leaves)
            return tree_flatten(fun(*api_util.merge_static(statics, d), **kw))[0]

        avals = [core.get_aval(x) for x in flat]
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(f, avals, fun_name=fun_name(fun))
        return ClosedJaxpr(jaxpr, consts)
    return make


# JAX: jax/_src/api.py eval_shape
@traceback_util.api_boundary
def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes `fun(*args, **kwargs)` would return, computed by tracing alone
    (no FLOPs, nothing compiled).

    `args`/`kwargs` are pytrees whose leaves are arrays, Python or NumPy scalars,
    `ShapeDtypeStruct`s, or any object with `shape` and `dtype` attributes (a duck-typed
    array: its `weak_type` attribute is read if it has one). Returns the output pytree with a
    `ShapeDtypeStruct` (shape, dtype, weak_type) for each leaf; raises what tracing `fun`
    raises (e.g. TypeError for incompatible shapes), leaving no trace state behind.
    As in JAX, every argument is dynamic (close over static ones with functools.partial).
    """
    def as_struct(x):
        if isinstance(x, (Array, core.Tracer, ShapeDtypeStruct)) or type(x) in (int, float,
                                                                                  bool, complex):
            return x
        if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__array__"):
            return ShapeDtypeStruct(x.shape, x.dtype, getattr(x, "weak_type", False))
        return x
    args, kwargs = tree_map(as_struct, (args, kwargs))
    try:
        hash(fun)
    except TypeError:  # jit keys its cache on the function, as JAX's does
        fun = functools.partial(fun)
    return jit(fun).trace(*args, **kwargs).out_info


# ---------------------------------------------------------------------------------------------
# Forward mode
# ---------------------------------------------------------------------------------------------

def _check_tangent(p, t, i):
    pa, ta = core.get_aval(p), core.get_aval(t)
    want = pa.to_tangent_aval()
    # as JAX: a shape mismatch is a ValueError, a dtype mismatch a TypeError
    cls = ValueError if pa.shape != ta.shape else TypeError
    if pa.shape != ta.shape or (want.dtype != ta.dtype and not (
            want.dtype == dtypes.float0 or dtypes.is_float(ta.dtype) == dtypes.is_float(pa.dtype)
            and ta.dtype == pa.dtype)):
        raise cls(f"jvp: primal and tangent arguments must have equal shapes and "
                  f"dtypes; primal {i} is {pa.str_short()} but its tangent is "
                  f"{ta.str_short()}")


# JAX: jax/_src/api.py jvp
@traceback_util.api_boundary
def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False):
    """Forward-mode derivative: returns `(fun(*primals), J @ tangents)` (and aux).

    `primals` and `tangents` are tuples/lists of pytrees with equal structure, shapes and
    dtypes (ValueError/TypeError otherwise). Mirrors jax/_src/api.py jvp.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primal and tangent arguments must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    flat_p, tree_p = tree_flatten(tuple(primals))
    flat_t, tree_t = tree_flatten(tuple(tangents))
    if tree_p != tree_t:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree "
                        f"structure; got {tree_p} and {tree_t}")
    for i, (p, t) in enumerate(zip(flat_p, flat_t)):
        _check_tangent(p, t, i)
    store: list = []
    flat_fun = (flatten_fun_nokwargs_aux if has_aux else flatten_fun_nokwargs)(fun, tree_p, store)
    outs_p, outs_t, *aux = ad.jvp_flat(flat_fun, flat_p, flat_t, fun_name(fun), has_aux)
    outs_p = _as_arrays(outs_p)
    outs_t = _as_arrays([ad.instantiate_zeros(t) for t in outs_t])
    out = tree_unflatten(store[0], outs_p), tree_unflatten(store[0], outs_t)
    return (*out, tree_unflatten(store[1], aux[0])) if has_aux else out


# JAX: jax/_src/api.py linearize
@traceback_util.api_boundary
def linearize(fun: Callable, *primals, has_aux: bool = False):
    """Returns `(fun(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates the linear map
    recorded once (a jaxpr of tangent operations whose consts are the residuals). With
    `has_aux` (`fun` returns `(out, aux)`): `(out, f_jvp, aux)`, as JAX's."""
    flat_p, in_tree = tree_flatten(primals)
    store: list = []
    flat_fun = (flatten_fun_nokwargs_aux if has_aux else flatten_fun_nokwargs)(fun, in_tree, store)
    outs, lin, *aux = ad.linearize_flat(flat_fun, flat_p, fun_name(fun), has_aux)
    # A pytree whose leaves are the residuals, so it can leave a jit (JAX: Partial too)
    f_jvp = Partial(_LinearizedJVP(lin.jaxpr, in_tree, store[0]), lin.consts)
    f_jvp.jaxpr = lin
    out = tree_unflatten(store[0], _as_arrays(outs))
    return (out, f_jvp, tree_unflatten(store[1], aux[0])) if has_aux else (out, f_jvp)


class _LinearizedJVP:
    """The function inside linearize's Partial: (residuals, *tangents) -> output tangents."""

    def __init__(self, jaxpr: core.Jaxpr, in_tree: PyTreeDef, out_tree: PyTreeDef) -> None:
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree

    def __call__(self, residuals, *tangents):
        flat_t, t_tree = tree_flatten(tangents)
        if t_tree != self.in_tree:
            raise TypeError(f"linearize: tangents must have structure {self.in_tree}, got "
                            f"{t_tree}")
        return tree_unflatten(self.out_tree,
                              _as_arrays(core.eval_jaxpr(self.jaxpr, residuals, *flat_t)))


# ---------------------------------------------------------------------------------------------
# Reverse mode
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/api.py vjp
@traceback_util.api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False):
    """Returns `(fun(*primals), f_vjp)` (plus aux) where `f_vjp(ct)` maps an output cotangent
    (a pytree like the output) to a tuple of input cotangents, one per primal.

    Built as linearize + transpose (`ad.backward_pass`). Mirrors jax/_src/api.py vjp.
    """
    flat_p, in_tree = tree_flatten(primals)
    store: list = []
    flat_fun = (flatten_fun_nokwargs_aux if has_aux else flatten_fun_nokwargs)(fun, in_tree, store)
    outs, _, lin, *aux = ad.vjp_flat(flat_fun, flat_p, fun_name(fun), has_aux)
    out_tree = store[0]
    f_vjp = VJP(lin.jaxpr, in_tree, out_tree, tuple(core.get_aval(o) for o in outs), lin.consts)
    primal_out = tree_unflatten(out_tree, _as_arrays(outs))
    if has_aux:
        return primal_out, f_vjp, tree_unflatten(store[1], aux[0])
    return primal_out, f_vjp


# JAX: jax/_src/api.py VJP — differs: one list of residuals (JAX also keeps opaque ones)
class VJP:
    """The function `vjp` returns: `f_vjp(ct)` maps an output cotangent to the input
    cotangents by transposing the linear jaxpr (`ad.backward_pass`). A pytree whose leaves are
    the residuals, so it can be returned from `jit` or passed into it."""

    def __init__(self, jaxpr: core.Jaxpr, in_tree: PyTreeDef, out_tree: PyTreeDef,
                 out_avals: tuple[ShapedArray, ...], residuals: list) -> None:
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree
        self.out_avals, self.residuals = out_avals, list(residuals)

    def __call__(self, ct):
        flat_ct, ct_tree = tree_flatten(ct)
        if ct_tree != self.out_tree:
            raise ValueError(f"vjp: cotangent must have the output's structure "
                             f"{self.out_tree}, got {ct_tree}")
        for c, a in zip(flat_ct, self.out_avals):
            ca = core.get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"vjp: cotangent of shape {ca.str_short()} does not match "
                                 f"the output {a.str_short()}")
        undef = [ad.UndefinedPrimal(a) for a in self.jaxpr.in_avals]
        cts = ad.backward_pass(self.jaxpr, self.residuals, undef, flat_ct)
        return tree_unflatten(self.in_tree, _as_arrays([ad.instantiate_zeros(c) for c in cts]))


register_pytree_node(
    VJP, lambda v: ((v.residuals,), (v.jaxpr, v.in_tree, v.out_tree, v.out_avals)),
    lambda meta, children: VJP(*meta, children[0]))


def _is_complex(dtype) -> bool:
    return dtypes.issubdtype(dtype, np.complexfloating)


# JAX: jax/_src/api.py _check_input_dtype_revderiv
def _check_input_dtype_revderiv(name: str, holomorphic: bool, allow_int: bool, x) -> None:
    dtype = core.get_aval(x).dtype
    if holomorphic and not _is_complex(dtype):
        raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {dtype.name}.")
    if not dtypes.is_float(dtype) and not allow_int:
        raise TypeError(
            f"{name} requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of np.inexact), but got {dtype.name}. If you want to use Boolean- or "
            "integer-valued inputs, use vjp or set allow_int to True.")


# JAX: jax/_src/api.py _check_output_dtype_revderiv
def _check_output_dtype_revderiv(name: str, holomorphic: bool, x) -> None:
    dtype = core.get_aval(x).dtype
    if holomorphic:
        if not _is_complex(dtype):
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex "
                            f"dtype, but got {dtype.name}.")
    elif _is_complex(dtype):
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {dtype.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex outputs, use "
                        "minijax.vjp directly.")
    elif not dtypes.is_float(dtype):
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {dtype.name}. For "
                        "differentiation of functions with integer outputs, use minijax.vjp "
                        "directly.")


# JAX: jax/_src/api.py _check_input_dtype_jacfwd
def _check_input_dtype_jacfwd(holomorphic: bool, x) -> None:
    dtype = core.get_aval(x).dtype
    if holomorphic:
        if not _is_complex(dtype):
            raise TypeError("jacfwd with holomorphic=True requires inputs with complex dtype, "
                            f"but got {dtype.name}.")
    elif not dtypes.is_float(dtype) or _is_complex(dtype):
        raise TypeError("jacfwd requires real-valued inputs (input dtype that is a sub-dtype "
                        f"of np.floating), but got {dtype.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex inputs or integer "
                        "inputs, use minijax.jvp directly.")


# JAX: jax/_src/api.py _check_output_dtype_jacfwd
def _check_output_dtype_jacfwd(holomorphic: bool, x) -> None:
    dtype = core.get_aval(x).dtype
    if holomorphic and not _is_complex(dtype):
        raise TypeError("jacfwd with holomorphic=True requires outputs with complex dtype, "
                        f"but got {dtype.name}.")


# JAX: jax/_src/api.py value_and_grad
def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """A function returning `(fun(*args), gradient)` (with aux: `((value, aux), gradient)`).

    `fun` must return a real scalar (TypeError otherwise). `argnums` picks the differentiated
    positional arguments (int: one gradient; tuple: a tuple of gradients), each a pytree of
    float arrays (TypeError for integer inputs unless allow_int). With `holomorphic=True`
    inputs and output must be complex and the result is df/dz; for a real function of
    complex inputs the gradient is conjugated (JAX's convention: df/dx - i df/dy).
    """
    int_argnums = isinstance(argnums, int)
    nums = (argnums,) if int_argnums else tuple(argnums)

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def value_and_grad_f(*args, **kwargs):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise TypeError(f"differentiating with respect to argnums={argnums} requires "
                                f"at least {max(nums) + 1} positional arguments, got "
                                f"{len(args)}")
        nums_ = tuple(i % len(args) for i in nums)
        partial_fun, dyn = api_util.argnums_partial(fun, nums_, args, kwargs)
        for leaf in tree_flatten(dyn)[0]:
            _check_input_dtype_revderiv("grad", holomorphic, allow_int, leaf)

        if has_aux:
            ans, f_vjp, aux = vjp(partial_fun, *dyn, has_aux=True)
        else:
            ans, f_vjp = vjp(partial_fun, *dyn)
        aval = core.get_aval(ans) if not isinstance(ans, (tuple, list, dict)) else None
        if aval is None or aval.shape != ():
            shape = None if aval is None else aval.shape
            raise TypeError("Gradient only defined for scalar-output functions. Output "
                            + (f"had shape: {shape}." if aval is not None else
                               f"was a {type(ans).__name__}."))
        _check_output_dtype_revderiv("grad", holomorphic, ans)
        # JAX: `lax_internal._one(ans)`, a 1 with the output's weak_type, so that e.g.
        # grad(f)(1.0) comes back weakly typed like its input
        one = array_from_numpy(np.ones((), aval.dtype), aval.weak_type,
                               literal=lax_internal.staged_literals())
        if aval.sharding is not None and core.trace_ctx.trace is not core.eval_trace:
            one = lax_internal._replicated_scalar(one, aval.sharding.mesh)  # as JAX's _one
        elif type(ans) is Array and isinstance(ans._sharding, NamedSharding):
            # eagerly, JAX's _one is replicated over the mesh in context, so the cotangents
            # are computed on it; on an Explicit mesh with none set JAX 0.10.2 fails
            # (docs/conformance.md), minijax takes the output's mesh
            mesh = get_concrete_mesh() or (ans._sharding.mesh if aval.sharding else None)
            if mesh is not None:
                one = Array(one.aval, one._npy, None, True, NamedSharding(mesh, PartitionSpec()))
        g = f_vjp(one)
        g = g[0] if int_argnums else tuple(g)
        return ((ans, aux), g) if has_aux else (ans, g)

    return value_and_grad_f


# JAX: jax/_src/api.py _mapped_axis_spec
# JAX: jax/_src/api.py _mapped_axis_spec, _check_ema_unmapped_args
def _check_mapped_specs(flat, dims) -> tuple | None:
    """Sharding in types: the mapped dimensions of the arguments must be split alike over
    the Explicit mesh axes (one batch, one layout), and no unmapped argument may be split
    over those axes; ValueError otherwise. Returns those axes (None: the batch is unsplit)."""
    seen = []
    for x, d in zip(flat, dims):
        if d is not None:
            s = getattr(core.get_aval(x), "sharding", None)  # a Ref's aval has none
            spec = s.spec[d] if s is not None and d < len(s.spec) else None
            if seen and seen[0] != spec:
                raise ValueError(f"Mapped away dimension of inputs passed to vmap should be "
                                 f"sharded the same. Got inconsistent axis specs: {seen[0]} "
                                 f"vs {spec}")
            seen.append(spec)
    axes = _axes_of(seen[0]) if seen else ()
    for x, d in zip(flat, dims):
        aval = core.get_aval(x)
        s = getattr(aval, "sharding", None)
        if d is None and s is not None and \
                any(a in axes for p in s.spec for a in _axes_of(p)):
            raise ValueError("Unmapped values passed to vmap cannot be sharded along the mesh"
                             f" axis you are vmapping over. Got type: {aval.str_short()},"
                             f" in_axes: None and vmapped mesh axis: {axes}")
    return axes or None


def _spmd_axis_name(spmd_axis_name: tuple | None, mapped_axes: tuple | None):
    """vmap's `spmd_axis_name` beside arguments whose batch is split over Explicit axes: the
    same axes (the type says it already: None), or JAX's ValueError."""
    if spmd_axis_name is None or mapped_axes is None:
        return spmd_axis_name
    mesh = get_abstract_mesh()
    spmd_axis_name = tuple(n for n in spmd_axis_name if mesh.shape.get(n) != 1)
    if spmd_axis_name != mapped_axes:
        raise ValueError("Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis "
                         f"type is allowed. Got spmd_axis_name={spmd_axis_name!r} and arrays "
                         f"sharded on explicit_mesh_axis={mapped_axes!r}")
    return None


# JAX: jax/_src/api.py grad
def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The gradient of a real scalar function (see value_and_grad for arguments and errors).
    Returns a function giving the gradient (a pytree like the argument), plus aux if has_aux."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def grad_f(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_f


# ---------------------------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/tree_util.py broadcast_prefix
def _broadcast_prefix(prefix, tree, what: str) -> list:
    """One entry of `prefix` (a pytree prefix of `tree`, ints/None at its leaves) per leaf of
    `tree`. The node types must match down to the prefix's leaves, as in JAX (an OrderedDict
    is matched in its own key order). Raises ValueError otherwise."""
    entries, prefix_tree = tree_flatten(prefix, is_leaf=lambda x: x is None)
    try:
        subtrees = prefix_tree.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                         f"corresponding value, got specification {prefix!r} for value tree "
                         f"{tree_flatten(tree)[1]}: {e}") from None
    return [d for d, sub in zip(entries, subtrees) for d in [d] * len(tree_flatten(sub)[0])]


# JAX: jax/_src/api.py _mapped_axis_size
def _mapped_axes_and_size(flat: list, dims: list, axis_size: int | None
                          ) -> tuple[list[int | None], int]:
    """Each flat argument's mapped axis made non-negative (None: not mapped), and the one size
    of those axes. ValueError for an axis out of range, no mapped argument without
    `axis_size`, or inconsistent sizes."""
    sizes = []
    norm_dims = []
    for i, (x, d) in enumerate(zip(flat, dims)):
        if d is None:
            norm_dims.append(None)
            continue
        aval = core.get_aval(x)
        if not -aval.ndim <= d < aval.ndim:
            raise ValueError(f"vmap was requested to map its argument along axis {d}, "
                             "which implies that its rank should be at least "
                             f"{d + 1 if d >= 0 else -d}, "
                             f"but is only {aval.ndim} (its shape is {aval.shape})")
        d = d % aval.ndim
        norm_dims.append(d)
        sizes.append((aval.shape[d], i, aval))
    if not sizes and axis_size is None:
        raise ValueError("vmap must have at least one non-None value in in_axes")
    size = axis_size if axis_size is not None else sizes[0][0]
    if any(s != size for s, _, _ in sizes):
        lines = "\n".join(f"  * argument leaf {i} of type {a.str_short()} has size {s} "
                          f"along its mapped axis" for s, i, a in sizes)
        raise ValueError(f"vmap got inconsistent sizes for array axes to be mapped:\n"
                         f"{lines}")
    return norm_dims, size


# JAX: jax/_src/api.py vmap
def vmap(fun: Callable, in_axes=0, out_axes=0, axis_name=None, axis_size: int | None = None,
         spmd_axis_name=None):
    """Vectorize `fun` over a new leading (or `in_axes`) axis.

    Args:
      in_axes: int, None, or a pytree prefix of the positional arguments (a tuple with one
        entry per argument); negative ints count from the end; None means not mapped.
      out_axes: the same for the outputs.
      spmd_axis_name: a mesh axis name (or a tuple of them) the batch dimension is split
        over: sharding constraints, a nested jit's shardings and shard_map specs inside get
        it at the batch dimension.
    Raises ValueError for inconsistent mapped sizes, bad axes, or no mapped input without
    `axis_size`. Mirrors jax/_src/api.py vmap.
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple)):  # as JAX's check
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries "
                        "corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes}.")
    spmd_names = (spmd_axis_name if spmd_axis_name is None or isinstance(spmd_axis_name, tuple)
                  else (spmd_axis_name,))

    @functools.wraps(fun)
    @traceback_util.api_boundary
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes specification must be a tree prefix of the "
                             f"corresponding value, got specification {in_axes} for value "
                             f"tree of {len(args)} positional arguments")
        flat, in_tree = tree_flatten(args)
        dims = _broadcast_prefix(in_axes if isinstance(in_axes, tuple) else in_axes, args,
                                 "in_axes")
        norm_dims, size = _mapped_axes_and_size(flat, dims, axis_size)
        spmd = _spmd_axis_name(spmd_names, _check_mapped_specs(flat, norm_dims))
        store: list = []
        flat_fun = flatten_fun_nokwargs(lambda *a: fun(*a, **kwargs), in_tree, store)

        def out_dims_wanted(n):
            out_tree = store[0]
            example = tree_unflatten(out_tree, [0] * n)
            return _broadcast_prefix(out_axes, example, "out_axes")

        outs = batching.vmap_flat(flat_fun, flat, norm_dims, size, out_dims_wanted, axis_name,
                                  fun_name(fun), spmd)
        # An unbatched output with out_axes=None comes back as it came (a Python float stays
        # a float), as in JAX; the others are arrays.
        for o in outs:
            if not isinstance(o, core.Tracer):
                try:
                    core.get_aval(o)
                except TypeError:
                    raise TypeError(f"Output from batched function {o!r} with type "
                                    f"{type(o)} is not a valid minijax type") from None
        wanted = out_dims_wanted(len(outs))
        outs = [o if d is None and not isinstance(o, core.Tracer) else _as_arrays([o])[0]
                for o, d in zip(outs, wanted)]
        return tree_unflatten(store[0], outs)

    return vmap_f


# ---------------------------------------------------------------------------------------------
# Jacobians
# ---------------------------------------------------------------------------------------------

def _std_basis(flat_leaves) -> tuple[Any, list[int]]:
    sizes = [int(np.prod(core.get_aval(x).shape, dtype=np.int64)) for x in flat_leaves]
    dtype = dtypes.result_type(*[core.get_aval(x).dtype for x in flat_leaves])
    return np.eye(sum(sizes), dtype=dtype), sizes


def _split_basis(basis_rows, leaves, sizes):
    """Cut a (k, total) batch of flat vectors into per-leaf arrays of shape leaf.shape."""
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        aval = core.get_aval(x)
        piece = basis_rows[..., start:start + n]
        out.append(jnp.reshape(piece, piece.shape[:-1] + aval.shape).astype(aval.dtype))
        start += n
    return out


def _argnums_partial(fun, args, argnums):
    int_argnums = isinstance(argnums, int)
    f, dyn = api_util.argnums_partial(fun, api_util.ensure_index_tuple(argnums), args)
    return f, dyn, int_argnums


# JAX: jax/_src/api.py jacfwd
def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian by forward mode: one jvp per input element, batched with vmap.

    For an input leaf of shape `in` and an output leaf of shape `out`, the Jacobian leaf has
    shape `out + in` (pytrees: output structure on the outside, then input structure).
    Inputs must be real floats, or complex with `holomorphic=True` (TypeError otherwise)."""
    @traceback_util.api_boundary
    def jac(*args):
        f, dyn, int_argnums = _argnums_partial(fun, args, argnums)
        for leaf in tree_flatten(dyn)[0]:
            _check_input_dtype_jacfwd(holomorphic, leaf)
        flat_in, in_tree = tree_flatten(dyn)
        basis, sizes = _std_basis(flat_in)

        def push(row):
            tangents = tree_unflatten(in_tree, _split_basis(row, flat_in, sizes))
            if has_aux:
                y, t, aux = jvp(f, dyn, tangents, has_aux=True)
                return t, (y, aux)
            y, t = jvp(f, dyn, tangents)
            return t, y

        jac_t, rest = vmap(push, out_axes=(-1, None))(basis)
        out_flat, out_tree = tree_flatten(jac_t)
        for o in out_flat:
            _check_output_dtype_jacfwd(holomorphic, o)
        per_out = []
        for o in out_flat:
            pieces = _split_last(o, flat_in, sizes)
            tree = tree_unflatten(in_tree, pieces)
            per_out.append(tree[0] if int_argnums else tree)
        result = tree_unflatten(out_tree, per_out)
        return (result, rest[1]) if has_aux else result
    return jac


def _split_last(o, flat_in, sizes):
    out, start = [], 0
    lead = o.shape[:-1]
    for x, n in zip(flat_in, sizes):
        piece = o[..., start:start + n]
        out.append(jnp.reshape(piece, lead + core.get_aval(x).shape))
        start += n
    return out


# JAX: jax/_src/api.py jacrev
def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian by reverse mode: one vjp per output element, batched with vmap.
    Shapes as in jacfwd (`out + in` per leaf pair). Outputs must be real floats, or complex
    with `holomorphic=True` (TypeError otherwise)."""
    @traceback_util.api_boundary
    def jac(*args):
        f, dyn, int_argnums = _argnums_partial(fun, args, argnums)
        for leaf in tree_flatten(dyn)[0]:
            _check_input_dtype_revderiv("jacrev", holomorphic, allow_int, leaf)
        if has_aux:
            y, f_vjp, aux = vjp(f, *dyn, has_aux=True)
        else:
            y, f_vjp = vjp(f, *dyn)
        flat_out, out_tree = tree_flatten(y)
        for o in flat_out:
            _check_output_dtype_revderiv("jacrev", holomorphic, o)
        basis, sizes = _std_basis(flat_out)
        rows = vmap(lambda row: f_vjp(tree_unflatten(out_tree,
                                                     _split_basis(row, flat_out, sizes))))(basis)
        # rows: a tuple (one per dyn arg) of pytrees whose leaves have shape (total_out,) + in
        flat_rows, rows_tree = tree_flatten(rows)
        per_in = []
        for r in flat_rows:
            pieces, start = [], 0
            for yl, n in zip(flat_out, sizes):
                piece = r[start:start + n]
                pieces.append(jnp.reshape(piece, core.get_aval(yl).shape + r.shape[1:]))
                start += n
            per_in.append(pieces)
        # regroup: output structure outside, input structure inside
        n_out = len(flat_out)
        outs = []
        for k in range(n_out):
            tree = tree_unflatten(rows_tree, [p[k] for p in per_in])
            outs.append(tree[0] if int_argnums else tuple(tree))
        result = tree_unflatten(out_tree, outs)
        return (result, aux) if has_aux else result
    return jac


# JAX: jax/_src/api.py hessian
def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """`jacfwd(jacrev(fun))`: for an input of shape `in` and scalar output, shape `in + in`."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


# JAX: jax/_src/api.py jacobian
def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """Alias of `jacrev`."""
    return jacrev(fun, argnums, has_aux, holomorphic, allow_int)


# ---------------------------------------------------------------------------------------------
# Arrays and devices
# ---------------------------------------------------------------------------------------------

def block_until_ready(x):
    """Wait for every array in the pytree `x` to be computed; returns `x`.

    Raises RuntimeError for a deleted (donated) Array. Mirrors jax/_src/api.py
    block_until_ready, which also waits on all device buffers in one call."""
    if type(x) is Array and x._buf is not None and not x._deleted:  # one array: no loop
        x._buf.block_until_ready()
        return x
    bufs = []
    for leaf in tree_leaves(x):
        if isinstance(leaf, Array):
            leaf._check_alive()
            if leaf._buf is not None:
                bufs.append(leaf._buf)
    if bufs:
        compiler.block_until_ready(bufs)
    return x


# JAX: jax/_src/api.py disable_jit
def disable_jit(disable: bool = True):
    """A context manager inside which `jit(f)(...)` calls `f` directly, eagerly: prints and
    breakpoints in `f` see concrete values (chapters/15-debugging.md)."""
    return config.override("jax_disable_jit", disable)


# JAX: jax/_src/api.py effects_barrier
def effects_barrier() -> None:
    """Wait until the effects (host callbacks, `debug.print`s) of every computation this
    thread has dispatched have happened (chapters/14-callbacks-effects.md)."""
    pxla.runtime_tokens.block_until_ready()


# JAX: jax/_src/array.py make_array_from_callback
def make_array_from_callback(shape, sharding: Sharding, data_callback, dtype=None):
    """An Array of global `shape` laid out by `sharding`, whose block on each device is
    `data_callback(index)` (index: a tuple of slices into the global array). As in JAX the
    callback is called once per device (a block several devices hold, once for each), or
    once in all for a replicated layout; its results must have the block's shape.
    Raises ValueError for a block of the wrong shape or a sharding that does not fit."""
    shape = tuple(shape)
    index_map = sharding.devices_indices_map(shape)
    devices = sharding._device_assignment
    if all(all(sl == slice(None) or (sl.start in (0, None) and sl.stop in (n, None))
               for sl, n in zip(index_map[d], shape)) for d in devices):  # replicated
        devices = devices[:1]
    out = None
    for d in devices:
        idx = index_map[d]
        b = np.asarray(data_callback(idx), dtype=dtype)
        if out is None:
            out = np.empty(shape, b.dtype)
        want = out[idx].shape
        if b.shape != want:  # JAX's message, the array's type included
            aval = core.ShapedArray(shape, dtypes.canonicalize_dtype(b.dtype),
                                    sharding=aval_sharding(sharding, len(shape)))
            raise ValueError(f"Expected shard shape {want} doesn't match the single device "
                             f"array shape {b.shape}. Shape of Array is {aval} with sharding "
                             f"{sharding}")
        out[idx] = b
    aval = core.ShapedArray(shape, out.dtype)
    if isinstance(sharding, SingleDeviceSharding):
        return Array(aval, out, None, True)
    return Array(aval, None, compiler.device_put_sharded(out, sharding), True, sharding)


# JAX: jax/_src/api.py device_put — differs: single devices other than the default one and
# memory kinds are not supported
def device_put(x, device=None):
    """Put the arrays of pytree `x` on the device, or lay them out with a sharding; returns
    minijax Arrays.

    Args:
      x: a pytree of arrays, numpy values or Python scalars (which stay weakly typed).
      device: None, a device (any of `minijax.devices()`) or its `SingleDeviceSharding`, a
        `memory.Space` (each array stays on its device, in that memory), a
        `NamedSharding` (each device of its mesh gets its block: minijax/named_sharding.py), or
        a `PartitionSpec` over the mesh in context (`set_mesh`), or a pytree of these, a prefix
        of `x`'s (each for its subtree). With a device or sharding the
        results are *committed* (`Array.committed`): computations on them run there (on
        arrays committed elsewhere: ValueError, as in JAX). Without one, a minijax Array is
        returned as it is, and other values become uncommitted Arrays.
    Raises for a sharding ValueError if its spec is longer
    than a leaf's rank and IndivisibleError (a ValueError) if a dimension does not divide
    into its shards: then nothing is placed.
    """
    if isinstance(device, (list, tuple, dict)) and not isinstance(device, PartitionSpec):
        # a pytree of devices or shardings, a prefix of x's: each its subtree (as in JAX)
        return tree_map(lambda d, v: device_put(v, d), device, x,
                        is_leaf=lambda d: d is None or isinstance(d, PartitionSpec))
    device = canonicalize_sharding(device, "device_put")
    if isinstance(device, MemorySpace) or any(  # a memory space: per leaf, by its rule
            isinstance(leaf, core.Tracer) for leaf in tree_flatten(x)[0]):
        leaves, tree = tree_flatten(x)
        outs = device_put_p.bind(*leaves, devices=(device,) * len(leaves),
                                 srcs=(None,) * len(leaves))
        return tree_unflatten(tree, outs)
    return dispatch.place(x, device)


# JAX: jax/_src/xla_bridge.py devices
def devices() -> list:
    """The XLA backend's devices (8 CPU devices with
    XLA_FLAGS=--xla_force_host_platform_device_count=8). Unsharded computations run on the
    first; a mesh can use them all."""
    return list(xla_bridge.get_backend().devices())


def local_devices() -> list:
    """The devices of this process: all of them (minijax runs one process)."""
    return list(xla_bridge.get_backend().local_devices())


def device_count() -> int:
    return len(xla_bridge.get_backend().devices())




# JAX: jax/_src/api.py device_get
def device_get(x):
    """The pytree `x` with each Array replaced by a NumPy array of its value (copied to the
    host); other leaves are returned as they are. Raises RuntimeError for a deleted Array."""
    copy_to_host_async(x)
    return tree_map(lambda v: np.asarray(v) if isinstance(v, Array) else v, x)


# JAX: jax/_src/api.py copy_to_host_async
def copy_to_host_async(x):
    """Start copying every Array of the pytree `x` to the host without waiting (a later
    `device_get` or `np.asarray` finds it there); returns `x`."""
    for leaf in tree_flatten(x)[0]:
        if isinstance(leaf, Array) and leaf._npy is None and leaf._buf is not None:
            leaf._check_alive()
            leaf._buf.copy_to_host_async()
    return x


# JAX: jax/_src/api.py live_arrays — differs: found by scanning the garbage collector's
# objects (an eager minijax Array may hold only a NumPy value, which the backend does not see)
def live_arrays(platform=None) -> list:
    """Every minijax Array alive and not deleted (`platform`: None or 'cpu')."""
    import gc  # only here: no other function needs the collector
    return [a for a in gc.get_objects() if type(a) is Array and not a._deleted]


# JAX: jax/_src/api.py clear_caches
def clear_caches() -> None:
    """Empty `jit`'s caches of traced jaxprs, lowerings and executables: the next call of a
    jitted function traces and compiles it again."""
    for per_fun in list(pjit._jit_caches.values()):
        for caches in per_fun.values():
            for cache in caches:
                cache.clear()
    for cache in api_util.identity_caches:
        cache.clear()
    # an equal trace context, but a new object: each jit wrapper refetches its caches (and
    # drops the executable it kept from its last call) on its next call
    config.__dict__["trace_context"] = tuple(list(config.trace_context))


# JAX: jax/_src/api.py linear_transpose — differs: no reduce_axes
def linear_transpose(fun: Callable, *primals, reduce_axes=()) -> Callable:
    """The transpose of the linear function `fun`, traced at the avals of `primals` (their
    values are not used): `f_t(ct)` maps an output cotangent to a tuple of input cotangents,
    one per primal. Raises TypeError for a cotangent of the wrong structure, shape or dtype,
    and NotImplementedError naming the primitive when `fun` is not linear."""
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported")
    flat, in_tree = tree_flatten(primals)
    in_avals = [core.get_aval(x) for x in flat]
    store: list = []
    jaxpr, consts, out_avals = pe.trace_to_jaxpr_dynamic(
        flatten_fun_nokwargs(fun, in_tree, store), in_avals, fun_name=fun_name(fun),
        purpose="linear_transpose")
    out_tree = store[0]

    def transposed(out_cotangent):
        flat_ct, ct_tree = tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"cotangent tree does not match function output, expected "
                            f"{out_tree} but got {ct_tree}")
        for c, a in zip(flat_ct, out_avals):
            ca = core.get_aval(c)
            if ca.shape != a.shape or ca.dtype != a.dtype:
                raise TypeError(f"cotangent type does not match function output, expected "
                                f"{a.str_short()} but got {ca.str_short()}")
        cts = ad.backward_pass(jaxpr, consts, [ad.UndefinedPrimal(a) for a in in_avals],
                               flat_ct)
        return tree_unflatten(in_tree, _as_arrays([ad.instantiate_zeros(c) for c in cts]))

    return transposed


# JAX: jax/_src/api.py named_call
def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """`fun` with its operations under the scope `name` (default `fun.__name__`): the same
    values and jaxpr; the lowered ops are named `jit(f)/name/...` (HLO op_name metadata), as
    under `named_scope(name)`. Raises TypeError for a name that is not a string."""
    if name is None:
        name = getattr(fun, "__name__", "named_call")
    if not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {name!r}")
    return core.extend_name_stack(name)(fun)


# JAX: jax/_src/api.py fwd_and_bwd
def fwd_and_bwd(f: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """`(fwd, bwd)`: `fwd(*args)` returns `(f(*args), f_vjp)` (plus aux) differentiating the
    arguments in `argnums`; `bwd(f_vjp, ct)` returns their cotangents (one, or a tuple for a
    tuple of argnums). With `jitted` both are `jit`ted (`f_vjp` is a pytree of residuals)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def fwd(*args):
        dyn = [args[i] for i in nums]

        def g(*d):
            full = list(args)
            for i, v in zip(nums, d):
                full[i] = v
            return f(*full)
        return vjp(g, *dyn, has_aux=has_aux)

    def bwd(f_vjp, ct):
        cts = f_vjp(ct)
        return cts[0] if isinstance(argnums, int) else cts

    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)


# JAX: jax/_src/array.py make_array_from_single_device_arrays
def make_array_from_single_device_arrays(shape, sharding: Sharding, arrays,
                                         dtype=None) -> Array:
    """An Array of global `shape` laid out by `sharding`, from one array per addressable
    device (in `sharding`'s device order, each the block that device holds). Raises
    ValueError for a wrong number of arrays or a block of the wrong shape."""
    arrays = list(arrays)
    devs = list(sharding._device_assignment)
    if len(arrays) != len(devs):
        raise ValueError(f"make_array_from_single_device_arrays: expected {len(devs)} arrays "
                         f"(one per device of the sharding), got {len(arrays)}")
    index_map = sharding.devices_indices_map(tuple(shape))
    blocks = {_block_key(index_map[d]): np.asarray(a) for d, a in zip(devs, arrays)}
    return make_array_from_callback(shape, sharding, lambda idx: blocks[_block_key(idx)], dtype)


def _block_key(idx) -> tuple:
    return tuple((s.start, s.stop) for s in idx)


# JAX: jax/_src/array.py make_array_from_process_local_data — differs: one process, so the
# local data is the global array
def make_array_from_process_local_data(sharding: Sharding, local_data, global_shape=None):
    """An Array laid out by `sharding` from this process's data; with one process the data is
    the whole array. Raises ValueError when `global_shape` differs from the data's shape."""
    local = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != local.shape:
        raise ValueError(f"make_array_from_process_local_data: with one process the local "
                         f"data {local.shape} is the global array, not {tuple(global_shape)}")
    return make_array_from_callback(local.shape, sharding, lambda idx: local[idx])


# JAX: jax/_src/api.py named_scope
def named_scope(name: str):
    """A context manager (or decorator) naming the operations traced inside it: each equation
    records the scope (`outer/inner` when nested), which the lowering makes the op's location
    `loc("jit(f)/outer/inner/sin")` and XLA the op_name metadata a profile shows. Values and
    printed jaxprs are as without it. Raises TypeError for a name that is not a string (JAX's
    message)."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    return core.extend_name_stack(name)
