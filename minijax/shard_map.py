"""shard_map: write the program one device runs, with collectives between devices.

`shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(x)` splits `x` into blocks as the
spec says, runs `f` once per device on its block (the *per-device view*: `f` sees f32[2,4] for
an f32[8,4] input split 4 ways), and puts the output blocks back together as `out_specs` says.
Values move between devices only through the collectives of minijax/lax/parallel.py.

`check_vma=True` (the default) types every value in `f` with the manual axes it varies along
(`ShapedArray.vma`, printed `{V:x}`): inputs vary along the axes their spec names, psum results
are invariant, and an invariant value used with a varying one is first marked with `pvary`.
That typing is what makes `grad` right: the transpose of `pvary` is `psum`, so the gradient of
a replicated parameter is summed over the devices exactly once. It also catches an
`out_specs=P()` (replicated) for a value that differs between devices.

Lowered to `sdy.manual_computation` (Shardy): the body is per-device code over the manual
axes, with the in/out shardings on its boundary. Mirrors jax/_src/shard_map.py. Taught in
chapters/13-shard-map.md.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from typing import Callable

from minijax import api_util, core, pjit, traceback_util
from minijax.core import ClosedJaxpr, ShapedArray
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.lax import lax, parallel
from minijax.mesh import AbstractMesh, AxisType, Mesh, get_concrete_mesh
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import PartitionSpec, _axes_of
from minijax.sharding_impls import aval_sharding
from minijax.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten
from minijax.util import BoundedCache, safe_zip, split_list

_CHAPTER = "chapters/13-shard-map.md"


# ---------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------

class _Infer:
    def __repr__(self) -> str:
        return "Infer"


Infer = _Infer()


# JAX: jax/_src/shard_map.py shard_map — differs: in partial-manual mode specs may name
# only the manual axes
def shard_map(f: Callable | None = None, /, *, out_specs, in_specs=Infer, mesh=None,
              axis_names=frozenset(), check_vma: bool = True):
    """Map `f` over the blocks of its arguments, one call per device of `mesh`.

    Args:
      f: the per-device function (pytrees of arrays in and out).
      out_specs: a PartitionSpec (or a pytree prefix of the outputs of them): how the output
        blocks form the global result; an axis left out means "replicated along it".
      in_specs: a pytree prefix of the arguments of PartitionSpecs; left out, each argument's
        own sharding's spec is used (arguments laid out on `mesh`).
      mesh: the Mesh (default: the one set with `set_mesh`; inside another shard_map's body,
        which must leave it out, that body's mesh: a nested shard_map).
      axis_names: the mesh axes made manual (default all, or all not yet manual when nested).
        With a subset, the body is per-device along those axes only; the partitioner still
        splits it along the others.
      check_vma: track the manual axes each value varies along (see the module docstring).
    Returns: the mapped function. Global f32[8,4] with in_specs P("x") on a 4-device axis x:
      `f` sees f32[2,4]{V:x}.
    Raises ValueError for a spec longer than its value's rank, a dimension not divisible by
    its mesh axes, an out_specs that claims replication of a varying value, or a mesh given
    (or axes already manual) inside another shard_map's body; NameError for a collective
    over an axis that is not bound.
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    api_util.check_callable(f)
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map requires a `minijax.sharding.Mesh` instance for its "
                        f"second argument, but got {mesh} of type {type(mesh)}.")
    given_mesh = mesh
    name = api_util.fun_name(f)

    traced: dict = {}  # (in_tree, specs, avals, context) -> the traced body, when it closes
    #                    over no tracer

    @functools.wraps(f)
    @traceback_util.api_boundary
    def wrapped(*args):
        mesh, manual = _mesh_and_axes(given_mesh, axis_names, check_vma)
        leaves, in_tree = tree_flatten(args)
        specs = (_specs_from_args(leaves, mesh) if in_specs is Infer else
                 _broadcast_specs(in_specs, in_tree, len(leaves), "in_specs", name))
        avals = [core.get_aval(x) for x in leaves]
        key = (in_tree, tuple(specs), tuple(avals), mesh, _enclosing_manual(mesh), _staged())
        hit = traced.get(key)
        if hit is None:
            hit = _trace_mapped_fun(f, name, in_specs is Infer, out_specs, check_vma,
                                    in_tree, specs, avals, mesh, manual)
            if not any(isinstance(c, core.Tracer) for c in hit[1]):
                traced[key] = hit
        jaxpr, consts, out_tree, o_specs = hit
        outs = shard_map_p.bind(
            *consts, *leaves, jaxpr=jaxpr, mesh=mesh,
            in_specs=(PartitionSpec(),) * len(consts) + tuple(specs),
            out_specs=tuple(o_specs), check_vma=check_vma, newly_manual_axes=manual)
        return tree_unflatten(out_tree, outs)

    return wrapped


# JAX: jax/_src/shard_map.py _axes_to_pspec
def _axes_to_pspec(axis_name, axis: int | None) -> PartitionSpec:
    return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)


# JAX: jax/_src/shard_map.py smap
def smap(f: Callable | None = None, /, *, in_axes=Infer, out_axes, axis_name):
    """`shard_map` over one mesh axis, `axis_name`, of the mesh in context (`set_mesh`), with
    `vmap`-style axes: in_axes (an int, None, Infer or a tuple per positional argument) and
    out_axes say which array axis is split along `axis_name` (None: not split). The other
    mesh axes stay automatic. Raises TypeError for a list/tuple `axis_name` or axes that are
    not ints/None (JAX's messages)."""
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
    if in_axes is not Infer and not all(isinstance(a, int) for a in tree_leaves(in_axes)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) "
                        f"container with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with "
                        f"those types as leaves, but got {out_axes}.")
    to_spec = functools.partial(_axes_to_pspec, axis_name)
    in_specs = (Infer if in_axes is Infer else
                tree_map(to_spec, in_axes, is_leaf=lambda x: x is None))
    return shard_map(f, in_specs=in_specs, out_specs=tree_map(
        to_spec, out_axes, is_leaf=lambda x: x is None), axis_names={axis_name})


# JAX: jax/_src/shard_map.py _check_specs_vs_args
def _check_specs_vs_args(name: str, in_tree, avals, specs, mesh: Mesh, manual: frozenset,
                         inferred: bool) -> None:
    """Each argument against its spec: rank and divisibility (`_check_spec`), the spec's axes
    among the manual ones, and, with sharding in types (every mesh axis Explicit and manual),
    a given spec equal to the argument's own layout. ValueError naming the argument."""
    typed = manual == frozenset(mesh.axis_names) and \
        all(a in mesh.explicit_axes for a in manual)
    for i, (a, s) in enumerate(safe_zip(avals, specs)):
        _check_spec(name, f"args{_leaf_path(in_tree, i)}", a, s, mesh, "in_specs")
        have = a.sharding.spec if a.sharding is not None else PartitionSpec(*[None] * a.ndim)
        if typed and not inferred and s._normalized_spec_for_aval(a.ndim) != have:
            # sharding in types: the layout is in the argument's type; reshard changes it
            raise ValueError(f"in_specs passed to shard_map: "
                             f"{s._normalized_spec_for_aval(a.ndim)} does not match the "
                             f"specs of the input: {have} for arg: {a}. `in_specs` is an "
                             "optional argument so you can omit specifying it and "
                             "shard_map will infer the in_specs from the arguments. If you "
                             "want to reshard your inputs, you can use `jax.reshard` on the "
                             "arguments and then pass those args to shard_map.")
        if not _spec_axes(s) <= manual:
            raise ValueError(f"shard_map applied to the function '{name}': in_specs {s} "
                             f"names mesh axes {set(_spec_axes(s) - manual)} that are not "
                             f"in axis_names {set(manual)}")


# JAX: jax/_src/shard_map.py _shard_map_staging — differs: traced when the mapped function is
# called (and cached there), not in shard_map_p's staging rule
def _trace_mapped_fun(f: Callable, name: str, inferred: bool, out_specs, check_vma: bool,
                      in_tree, specs, avals, mesh: Mesh, manual: frozenset) -> tuple:
    """Trace the user's `f` on the per-device blocks of the arguments: (the body's jaxpr with
    its consts as leading inputs, the consts, the output tree, one out spec per output). The
    rules below trace their bodies with `_trace_body`; this one takes and returns the user's
    pytrees, whose out specs are known only once `f` has returned."""
    _check_specs_vs_args(name, in_tree, avals, specs, mesh, manual, inferred)
    local = [_local_aval(a, s, mesh, check_vma) for a, s in safe_zip(avals, specs)]
    if _staged() and manual != frozenset(mesh.axis_names) - _enclosing_manual(mesh):
        local = [_with_auto_axes_typed(loc, a, mesh, manual) for loc, a in zip(local, avals)]
    store: list = []

    def body(*xs):
        outs = f(*tree_unflatten(in_tree, xs))
        out_leaves, out_tree = tree_flatten(outs)
        o_specs = _broadcast_specs(out_specs, out_tree, len(out_leaves), "out_specs", name)
        store[:] = [out_tree, o_specs]
        return _fit_outputs(name, out_leaves, o_specs, mesh, manual, check_vma,
                            isinstance(out_specs, PartitionSpec) and len(out_leaves) == 1)

    with _body_context(mesh, manual, check_vma):
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(body, local, fun_name=name,
                                                     purpose="shard_map")
    out_tree, o_specs = store
    return pe.convert_constvars_jaxpr(jaxpr), consts, out_tree, o_specs


def _mesh_and_axes(mesh: Mesh | None, axis_names, check_vma: bool) -> tuple:
    """The mesh and the newly manual axes of a shard_map call. Inside another shard_map's body
    the mesh is that body's (JAX's context mesh, whose manual axes stay manual) and the axes
    default to the mesh axes not yet manual: a nested shard_map over the others."""
    outer = parallel.ctx.bodies[-1] if parallel.ctx.bodies else None
    if outer is not None and mesh is not None:
        raise ValueError(f"The context mesh {outer[0]}, manual along {set(outer[1])}, should "
                         f"match the mesh passed to shard_map {mesh}: inside a shard_map, "
                         f"leave mesh= out (a nested shard_map uses the enclosing one's mesh)")
    if outer is not None:
        mesh = outer[0]
        if check_vma != outer[2]:
            raise NotImplementedError(f"a shard_map with check_vma={check_vma} nested in one "
                                      f"with check_vma={outer[2]} — see {_CHAPTER}")
    if mesh is None:
        mesh = get_concrete_mesh()
    if mesh is None:
        raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                         "enter into a mesh context, or pass mesh= to shard_map")
    enclosing = _enclosing_manual(mesh)
    manual = frozenset(axis_names) or frozenset(mesh.axis_names) - enclosing
    if not manual <= frozenset(mesh.axis_names):
        raise ValueError(f"shard_map: axis_names {set(axis_names)} must be axes of the mesh "
                         f"{mesh.axis_names}")
    if manual & enclosing or not manual:
        raise ValueError(f"shard_map: axis_names {set(manual)} must be mesh axes that the "
                         f"enclosing shard_map has not made manual already ({set(enclosing)})")
    return mesh, manual


def _enclosing_manual(mesh: Mesh) -> frozenset:
    """The axes of `mesh` made manual by the shard_map bodies being traced around this one."""
    return frozenset().union(*(m for b, m, _ in parallel.ctx.bodies if b == mesh))


@contextlib.contextmanager
def _body_context(mesh: Mesh, manual: frozenset, check_vma: bool):
    """While tracing a body: the manual axes are bound names, vma is tracked or not, and the
    body is the context of any shard_map nested in it."""
    prev = parallel.ctx.check_vma
    parallel.ctx.check_vma = check_vma
    parallel.ctx.bodies.append((mesh, manual, check_vma))
    try:
        with core.extend_axis_env_nd([(a, mesh.shape[a]) for a in mesh.axis_names
                                      if a in manual]):
            yield
    finally:
        parallel.ctx.bodies.pop()
        parallel.ctx.check_vma = prev


def _leaf_path(tree, i: int) -> str:
    return f"[{i}]" if tree.num_leaves > 1 else "[0]"


def _specs_from_args(leaves, mesh: Mesh) -> list:
    out = []
    for i, x in enumerate(leaves):
        s = getattr(x, "_sharding", None)
        if not isinstance(s, NamedSharding) or s.mesh != mesh:
            raise ValueError(f"shard_map: in_specs were not given, so argument {i} must be "
                             f"laid out on the mesh {mesh}; it is {core.get_aval(x).str_short()}"
                             f" with sharding {s}. Pass in_specs=...")
        out.append(s.spec)
    return out


def _broadcast_specs(specs, tree, n: int, what: str, name: str) -> list:
    """One PartitionSpec per leaf of `tree`, from `specs`, a pytree prefix of it."""
    if isinstance(specs, PartitionSpec):
        return [specs] * n
    positions = tree_unflatten(tree, list(range(n)))
    out: list = [None] * n

    def walk(prefix, sub):
        if isinstance(prefix, PartitionSpec):
            for i in tree_flatten(sub)[0]:
                out[i] = prefix
        elif isinstance(prefix, (tuple, list)) and isinstance(sub, (tuple, list)) and \
                len(prefix) == len(sub):
            for p, s in zip(prefix, sub):
                walk(p, s)
        elif isinstance(prefix, dict) and isinstance(sub, dict) and prefix.keys() == sub.keys():
            for k in prefix:
                walk(prefix[k], sub[k])
        else:
            raise ValueError(f"shard_map applied to the function '{name}' was given {what} "
                             f"{specs!r}, which is not a pytree prefix of the "
                             f"{'arguments' if what == 'in_specs' else 'outputs'} "
                             f"(structure {tree}). Each leaf of {what} must be a "
                             f"PartitionSpec.")
    walk(specs, positions)
    return out


def _check_spec(name: str, where: str, aval: ShapedArray, spec: PartitionSpec, mesh: Mesh,
                what: str) -> None:
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"shard_map {what}: expected a PartitionSpec, got {spec!r}")
    for p in spec:
        for a in _axes_of(p):
            if a not in mesh.axis_names:
                raise ValueError(f"shard_map {what} {spec} names axis {a!r}, which is not in "
                                 f"the mesh axes {mesh.axis_names}")
    if len(spec) > aval.ndim:
        raise ValueError(
            f"shard_map applied to the function '{name}' was given {what} {spec} of length "
            f"{len(spec)} for {where} of type {aval.str_short()}, which has rank {aval.ndim} "
            f"(and {aval.ndim} < {len(spec)}). Entries in {what} must be of length no greater "
            f"than the number of axes in the corresponding value.")
    if what == "in_specs":
        for d, p in enumerate(spec):
            n = math.prod(mesh.shape[a] for a in _axes_of(p))
            if aval.shape[d] % n:
                raise ValueError(
                    f"shard_map applied to the function '{name}' was given argument arrays "
                    f"with axis sizes that are not evenly divisible by the corresponding mesh "
                    f"axis sizes: {where} of shape {aval.str_short()} has in_specs {spec}, "
                    f"and dimension {d} (size {aval.shape[d]}) is split over mesh axes "
                    f"{_axes_of(p)} of total size {n}, which does not evenly divide it.")


def _spec_axes(spec: PartitionSpec) -> frozenset:
    return frozenset(a for p in spec for a in _axes_of(p))


# (the vma of a value outside a nested shard_map, along the enclosing one's axes, is kept)
def _local_aval(aval: ShapedArray, spec: PartitionSpec, mesh: Mesh, check_vma: bool):
    shape = list(aval.shape)
    for d, p in enumerate(spec):
        shape[d] //= math.prod(mesh.shape[a] for a in _axes_of(p))
    return aval.update(shape=tuple(shape),
                       vma=aval.vma | _spec_axes(spec) if check_vma else frozenset())


def _staged() -> bool:
    """Whether the shard_map being called is staged into a jaxpr (under jit, also through
    jvp, vmap or linearize of a jitted function), not run now: JAX then types the body
    (`_shard_map_staging`), where an eager call runs it per device (`_shard_map_impl`)."""
    t = core.trace_ctx.trace
    while t is not None:
        if type(t) is pe.DynamicJaxprTrace:
            return True
        t = getattr(t, "parent_trace", None)
    return False


# JAX: jax/_src/shard_map.py _shard_shaped_array (its sharding: modify_spec_for_auto_manual)
def _with_auto_axes_typed(local: ShapedArray, aval: ShapedArray, mesh: Mesh,
                          manual: frozenset) -> ShapedArray:
    """A partly manual shard_map, staged: the body's block keeps the Explicit axes of the
    argument's type that stay automatic, over the mesh with the manual axes Manual. ValueError,
    as JAX's, when a block does not divide over them."""
    if aval.sharding is None:
        return local
    all_manual = manual | _enclosing_manual(mesh)
    inner = AbstractMesh(mesh.axis_sizes, mesh.axis_names, axis_types=tuple(
        AxisType.Manual if a in all_manual else t
        for a, t in zip(mesh.axis_names, mesh.axis_types)))
    spec = []
    for p in aval.sharding.spec:
        axes = tuple(a for a in _axes_of(p) if a in inner.explicit_axes)
        spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    sharding = NamedSharding(inner, PartitionSpec(*spec))
    for d, (n, p) in enumerate(zip(local.shape, spec)):
        if n % math.prod(mesh.shape[a] for a in _axes_of(p)):
            raise ValueError(
                f"Sharding spec {_axes_of(p)} implies that array axis {d} is partitioned "
                f"{math.prod(mesh.shape[a] for a in _axes_of(p))} times, but does not evenly "
                f"divide the dimension size {n}. Got shape: {local.shape} and sharding "
                f"{sharding}")
    return local.update(sharding=sharding)


# JAX: jax/_src/shard_map.py _unshard_shaped_array
def _global_aval(aval: ShapedArray, spec: PartitionSpec, mesh: Mesh,
                 manual: frozenset) -> ShapedArray:
    """An output's type from its block's: out_specs gives the layout on Explicit axes (with
    sharding in types), joined, in a partly manual shard_map, with the axes the block's type
    is split over (they stay automatic, after the out_specs axes in each dimension)."""
    shape = list(aval.shape)
    for d, p in enumerate(spec):
        shape[d] *= math.prod(mesh.shape[a] for a in _axes_of(p))
    typed = aval.sharding
    if typed is not None and AxisType.Manual in typed.mesh.axis_types:
        given = spec._normalized_spec_for_aval(aval.ndim)
        parts = [(*_axes_of(g), *_axes_of(t)) for g, t in zip(given, typed.spec)]
        typed = aval_sharding(NamedSharding(mesh, PartitionSpec(
            *[None if not p else p[0] if len(p) == 1 else p for p in parts])), len(shape))
    elif typed is None and mesh.explicit_axes and not manual & _enclosing_manual(mesh):
        typed = aval_sharding(NamedSharding(mesh, spec), len(shape))
    return aval.update(shape=tuple(shape), vma=aval.vma - manual, sharding=typed)


def _fit_outputs(name: str, outs, specs, mesh: Mesh, manual: frozenset, check_vma: bool,
                 single: bool = False) -> list:
    """Check each output of a body against its out_spec (rank; with check_vma, that it varies
    only along axes the spec names) and make it vary along all of them (`pvary`). `single`:
    out_specs was one PartitionSpec for one output (how the error message names it)."""
    fitted = []
    for i, (x, spec) in enumerate(safe_zip(outs, specs)):
        aval = core.get_aval(x)
        where = f"{name}(*args)[{i}]"
        _check_spec(name, where, aval, spec, mesh, "out_specs")
        axes = _spec_axes(spec)
        if check_vma and not aval.vma & manual <= axes:
            raise ValueError(_vma_error(name, mesh, spec, aval.vma & manual,
                                        "" if single else f"[{i}]"))
        if check_vma and axes - aval.vma:
            x = parallel.pvary(x, tuple(a for a in mesh.axis_names if a in axes - aval.vma))
        fitted.append(x)
    return fitted


# JAX: jax/_src/shard_map.py _inout_vma_error
def _vma_error(name: str, mesh: Mesh, spec: PartitionSpec, vma: frozenset, key: str) -> str:
    unmentioned = [a for a in mesh.axis_names if a not in _spec_axes(spec)]
    if len(unmentioned) > 1:
        order = lambda names: ",".join(a for a in mesh.axis_names if a in names)
        what = (f"only varying across mesh axes {{{order(_spec_axes(spec))}}} and not "
                f"{{{order(set(unmentioned) & vma)}}}, but it was inferred to be possibly "
                f"varying over {{{order(vma)}}}")
    else:
        what = (f"replicated across mesh axis '{unmentioned[0]}', but could not infer "
                f"replication over any axes")
    return (f"shard_map applied to the function '{name}' was given out_specs which require "
            f"replication which can't be statically inferred given the mesh:\n\n"
            f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names "
            f"{mesh.axis_names}.\n\nout_specs{key} is {spec} which implies that the "
            f"corresponding output value is {what}\n\nCheck if these output values are meant "
            f"to be replicated over those mesh axes. If not, consider revising the "
            f"corresponding out_specs entries. If so, consider disabling the check by passing "
            f"the check_vma=False argument to `jax.shard_map`.")


def _trace_body(fn: Callable, local_avals, out_specs, mesh: Mesh, manual, check_vma,
                name: str = "shard_map") -> tuple[core.Jaxpr, list]:
    """Trace `fn` as a shard_map body on `local_avals`, fitting its outputs to `out_specs`
    (a list, or a callable of the outputs giving it). Returns the jaxpr (consts as leading
    invars) and the consts."""
    def body(*xs):
        outs = list(fn(*xs))
        specs = out_specs(outs) if callable(out_specs) else out_specs
        return _fit_outputs(name, outs, specs, mesh, manual, check_vma)
    with _body_context(mesh, manual, check_vma):
        jaxpr, consts, _ = pe.trace_to_jaxpr_dynamic(body, local_avals, purpose="shard_map")
    return pe.convert_constvars_jaxpr(jaxpr), consts


def _bind(args, consts, *, jaxpr, in_specs, **params) -> list:
    return shard_map_p.bind(*consts, *args, jaxpr=jaxpr,
                            in_specs=(PartitionSpec(),) * len(consts) + tuple(in_specs),
                            **params)


# ---------------------------------------------------------------------------------------------
# shard_map_p and its rules
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/shard_map.py _shard_map_impl — differs: always compiled (as one jit call)
def _shard_map_impl(*args, jaxpr, mesh, in_specs, out_specs, check_vma, newly_manual_axes):
    params = dict(jaxpr=jaxpr, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                  check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    avals = tuple(core.get_aval(x).strip_weak_type() for x in args)
    key = (id(jaxpr), *params.values(), avals)
    hit = _eager_cache.get(key)
    if hit is None or hit[0] is not jaxpr:
        j, consts, _ = pe.trace_to_jaxpr_dynamic(lambda *xs: shard_map_p.bind(*xs, **params),
                                                 list(avals), purpose="shard_map")
        hit = _eager_cache.put(key, (jaxpr, ClosedJaxpr(j, consts)))
    return pjit.bind_jit(hit[1], args, "shard_map")


# (id of the body, params, avals) -> (body, the one-equation jaxpr jit compiles); the body is
# kept so that its id stays its own. Eager calls of one shard_map reuse one executable.
_eager_cache: BoundedCache = BoundedCache(256)


def _shard_map_abstract_eval(*avals, jaxpr, mesh, in_specs, out_specs, check_vma,
                             newly_manual_axes):
    return [_global_aval(v.aval, s, mesh, newly_manual_axes)
            for v, s in safe_zip(jaxpr.outvars, out_specs)]


# JAX: jax/_src/shard_map.py _shard_map_jvp
def _shard_map_jvp(primals, tangents, *, jaxpr, mesh, in_specs, out_specs, check_vma,
                   newly_manual_axes):
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    with _body_context(mesh, newly_manual_axes, check_vma):
        jvp_closed, out_nz = ad.jvp_jaxpr(ClosedJaxpr(jaxpr, []), nonzeros, instantiate=False)
    t_specs = [s for s, nz in safe_zip(in_specs, nonzeros) if nz]
    o_specs = list(out_specs) + [s for s, nz in safe_zip(out_specs, out_nz) if nz]
    body, consts = _trace_body(functools.partial(core.eval_jaxpr, jvp_closed.jaxpr,
                                                 jvp_closed.consts),
                               jvp_closed.in_avals, o_specs, mesh, newly_manual_axes, check_vma)
    nz_tangents = [t for t in tangents if type(t) is not ad.Zero]
    outs = _bind([*primals, *nz_tangents], consts, jaxpr=body, mesh=mesh,
                 in_specs=[*in_specs, *t_specs], out_specs=tuple(o_specs),
                 check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    primals_out, nz_out = split_list(outs, [len(out_specs)])
    it = iter(nz_out)
    return primals_out, [next(it) if nz else ad.Zero(p.aval.to_tangent_aval())
                         for nz, p in safe_zip(out_nz, primals_out)]


def _residual_spec(aval: ShapedArray, mesh: Mesh, check_vma: bool,
                   manual: frozenset) -> PartitionSpec:
    # residuals are per-device values: promoted to rank >= 1, stacked along dim 0 over the
    # axes they vary along (all manual axes without check_vma, which cannot tell)
    axes = tuple(a for a in mesh.axis_names if a in manual and (a in aval.vma or not check_vma))
    return PartitionSpec(axes) if axes else PartitionSpec()


# JAX: jax/_src/shard_map.py _shard_map_linearize (and _shard_map_partial_eval, with
# _promote_scalar_residuals) — differs: reached through jvp + partial evaluation
def _shard_map_partial_eval(trace, *tracers, jaxpr, mesh, in_specs, out_specs, check_vma,
                            newly_manual_axes):
    """Split a shard_map into a known one (the primal work, run now) and an unknown one (the
    tangent work, recorded), laid out as JAX's linearize rule lays them out: the known call
    returns the residuals first, then its outputs; a residual that is a known input or a known
    output is passed straight to the unknown call instead of being returned again."""
    unknowns = [trace.is_own(t) for t in tracers]
    with _body_context(mesh, newly_manual_axes, check_vma):
        jk, ju, out_unk, num_res = pe.partial_eval_jaxpr_nounits(ClosedJaxpr(jaxpr, []),
                                                                 unknowns)
    n_known_out = len(jk.out_avals) - num_res
    known_specs = [s for s, u in safe_zip(in_specs, unknowns) if not u]
    ko_specs = [s for s, u in safe_zip(out_specs, out_unk) if not u]
    known_outvars, res_vars = split_list(jk.jaxpr.outvars, [n_known_out])
    # where each residual comes from: a known input (in_fwd), a known output (out_fwd), or
    # neither (returned by the known call, promoted to rank >= 1 and stacked over devices)
    in_pos = {v: i for i, v in enumerate(jk.jaxpr.invars)}
    out_pos = {v: i for i, v in enumerate(known_outvars) if isinstance(v, core.Var)}
    in_fwd = [in_pos.get(v) if isinstance(v, core.Var) else None for v in res_vars]
    out_fwd = [out_pos.get(v) if f1 is None and isinstance(v, core.Var) else None
               for v, f1 in safe_zip(res_vars, in_fwd)]
    out_fwd = [f2 if f2 is not None and ko_specs[f2] == _residual_spec(
        v.aval, mesh, check_vma, newly_manual_axes) else None  # same blocks, same spec
        for v, f2 in safe_zip(res_vars, out_fwd)]
    returned = [f1 is None and f2 is None for f1, f2 in safe_zip(in_fwd, out_fwd)]
    res_avals = [v.aval for v, r in safe_zip(res_vars, returned) if r]
    res_specs = [_residual_spec(a, mesh, check_vma, newly_manual_axes) for a in res_avals]

    def known_body(*xs):
        outs, res = split_list(core.eval_jaxpr(jk.jaxpr, jk.consts, *xs), [n_known_out])
        res = [r for r, keep in safe_zip(res, returned) if keep]
        return [lax.broadcast(r, (1,)) if not a.shape else r
                for r, a in safe_zip(res, res_avals)] + outs
    kbody, kconsts = _trace_body(known_body, jk.in_avals, res_specs + ko_specs, mesh,
                                 newly_manual_axes, check_vma)
    known_in = [t for t, u in safe_zip(tracers, unknowns) if not u]
    params = dict(mesh=mesh, check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    outs = _bind(known_in, kconsts, jaxpr=kbody, in_specs=known_specs,
                 out_specs=tuple(res_specs + ko_specs), **params)
    returned_res, known_out = split_list(outs, [len(res_specs)])
    rit, sit = iter(returned_res), iter(res_specs)
    residuals, all_res_specs, promoted = [], [], []
    for f1, f2, v in safe_zip(in_fwd, out_fwd, res_vars):
        if f1 is not None:
            r, spec = known_in[f1], known_specs[f1]
        elif f2 is not None:
            r, spec = known_out[f2], ko_specs[f2]
        else:
            r, spec = next(rit), next(sit)
        residuals.append(r)
        all_res_specs.append(spec)
        promoted.append(f1 is None and f2 is None and not v.aval.shape)

    def unknown_body(*xs):
        res, rest = split_list(list(xs), [num_res])
        res = [lax.squeeze(r, (0,)) if p else r for r, p in safe_zip(res, promoted)]
        return core.eval_jaxpr(ju.jaxpr, ju.consts, *res, *rest)
    u_specs = [s for s, u in safe_zip(in_specs, unknowns) if u]
    uo_specs = [s for s, u in safe_zip(out_specs, out_unk) if u]
    res_local = [_local_aval(core.get_aval(r), s, mesh, check_vma)
                 for r, s in safe_zip(residuals, all_res_specs)]
    ubody, uconsts = _trace_body(unknown_body, res_local + ju.in_avals[num_res:], uo_specs,
                                 mesh, newly_manual_axes, check_vma)
    unknown_in = [t for t, u in safe_zip(tracers, unknowns) if u]
    uparams = dict(params, jaxpr=ubody, in_specs=(PartitionSpec(),) * len(uconsts) +
                   tuple(all_res_specs + u_specs), out_specs=tuple(uo_specs))
    unknown_out = trace.default_process_primitive(
        shard_map_p, [*uconsts, *residuals, *unknown_in], uparams)
    ki, ui = iter(known_out), iter(unknown_out)
    return [next(ui) if u else next(ki) for u in out_unk]


def _unmentioned(mesh: Mesh, spec: PartitionSpec, manual: frozenset) -> tuple:
    return tuple(a for a in mesh.axis_names if a in manual and a not in _spec_axes(spec))


def _unmentioned_size(mesh: Mesh, spec: PartitionSpec, manual: frozenset) -> int:
    return math.prod(mesh.shape[a] for a in _unmentioned(mesh, spec, manual))


# JAX: jax/_src/shard_map.py _shard_map_transpose
def _shard_map_transpose(cts, *args, jaxpr, mesh, in_specs, out_specs, check_vma,
                         newly_manual_axes):
    undefined = [ad.is_undefined_primal(x) for x in args]
    nz_cts = [type(c) is not ad.Zero for c in cts]
    res = [x for x, u in safe_zip(args, undefined) if not u]
    res_specs = [s for s, u in safe_zip(in_specs, undefined) if not u]
    ct_specs = [s for s, nz in safe_zip(out_specs, nz_cts) if nz]
    lin_specs = [s for s, u in safe_zip(in_specs, undefined) if u]

    def body(*xs):  # (cotangents, residuals), in JAX's order
        c, r = split_list(list(xs), [sum(nz_cts)])
        ri, ci = iter(r), iter(c)
        primals = [ad.UndefinedPrimal(v.aval) if u else next(ri)
                   for v, u in safe_zip(jaxpr.invars, undefined)]
        cts_in = [next(ci) if nz else ad.Zero(v.aval)
                  for v, nz in safe_zip(jaxpr.outvars, nz_cts)]
        if not check_vma:  # JAX's rule without types: an output replicated along n devices
            cts_in = [ct if type(ct) is ad.Zero else  # gets 1/n of the cotangent on each ...
                      ct * (1.0 / _unmentioned_size(mesh, s, newly_manual_axes))
                      if _unmentioned_size(mesh, s, newly_manual_axes) > 1
                      else ct for ct, s in safe_zip(cts_in, out_specs)]
        outs = ad.backward_pass(jaxpr, (), primals, cts_in)
        outs = [ad.instantiate_zeros(ct) for ct, u in safe_zip(outs, undefined) if u]
        if not check_vma:  # ... and a replicated input's cotangent is summed over its copies
            outs = [parallel.psum(ct, _unmentioned(mesh, s, newly_manual_axes))
                    if _unmentioned(mesh, s, newly_manual_axes) else ct
                    for ct, s in safe_zip(outs, lin_specs)]
        return outs
    local = ([v.aval for v, nz in safe_zip(jaxpr.outvars, nz_cts) if nz] +
             [v.aval for v, u in safe_zip(jaxpr.invars, undefined) if not u])
    tbody, consts = _trace_body(body, local, lin_specs, mesh, newly_manual_axes, check_vma)
    outs = _bind([*[c for c in cts if type(c) is not ad.Zero], *res], consts, jaxpr=tbody,
                 mesh=mesh, in_specs=ct_specs + res_specs, out_specs=tuple(lin_specs),
                 check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    it = iter(outs)
    return [next(it) if u else None for u in undefined]


# JAX: jax/_src/shard_map.py _shard_map_batch — the vmapped axis is a new dimension, unsplit
# or split over vmap's spmd_axis_name (then each shard's body batches its part of it)
def _shard_map_batch_rule(vals, dims, *, axis_size, jaxpr, mesh, in_specs, out_specs,
                          check_vma, newly_manual_axes):
    vals = [v if d is batching.not_mapped else batching.moveaxis(v, d, 0)
            for v, d in safe_zip(vals, dims)]
    dims = [d if d is batching.not_mapped else 0 for d in dims]
    spmd = batching.spmd_axis_name()
    batch = None if spmd is None else spmd[0] if len(spmd) == 1 else spmd
    for what, specs in (("in_specs", in_specs), ("out_specs", out_specs)):
        if spmd is not None and set(spmd) & {a for s in specs for p in s for a in _axes_of(p)}:
            raise ValueError(f"vmap spmd_axis_name cannot appear in shard_map {what}")
    if spmd is not None:
        axis_size //= math.prod(mesh.shape[n] for n in spmd)
    with _body_context(mesh, newly_manual_axes, check_vma):
        batched, out_dims = batching.batch_jaxpr(ClosedJaxpr(jaxpr, []), dims, axis_size)
    b_in = [s if d is batching.not_mapped else PartitionSpec(batch, *s)
            for s, d in safe_zip(in_specs, dims)]
    b_out = [s if d is batching.not_mapped else PartitionSpec(batch, *s)
             for s, d in safe_zip(out_specs, out_dims)]
    body, consts = _trace_body(functools.partial(core.eval_jaxpr, batched.jaxpr,
                                                 batched.consts),
                               batched.in_avals, b_out, mesh, newly_manual_axes, check_vma)
    outs = _bind(vals, consts, jaxpr=body, mesh=mesh, in_specs=b_in, out_specs=tuple(b_out),
                 check_vma=check_vma, newly_manual_axes=newly_manual_axes)
    return outs, out_dims


# JAX: jax/_src/shard_map.py _shard_map_lowering_shardy
def _shard_map_lowering(ctx, *args, jaxpr, mesh, in_specs, out_specs, check_vma,
                        newly_manual_axes):
    sdy = mlir.sdy
    ir = mlir.ir

    partial = newly_manual_axes != frozenset(mesh.axis_names)

    def per_value(specs, avals):
        attrs = [str(mlir.sharding_attr(NamedSharding(mesh, s), a.ndim))[len("#sdy.sharding"):]
                 for s, a in safe_zip(specs, avals)]
        if partial:  # the other axes are the partitioner's: every dimension is left open
            attrs = [re.sub(r"\{([^}]*)\}", lambda m: "{" + (m.group(1) + ", ?" if m.group(1)
                                                              else "?") + "}", a)
                     for a in attrs]
        # the ordered effects' tokens go in and out first, replicated (JAX: _get_token_sharding)
        attrs = ["<@mesh, []>"] * len(effs) + attrs
        return ir.Attribute.parse("#sdy.sharding_per_value<[" + ", ".join(attrs) + "]>")
    effs = mlir.ordered_effects_of(jaxpr)
    tok = [mlir.token_type()] * len(effs)
    in_sh = per_value(in_specs, ctx.avals_in)
    out_sh = per_value(out_specs, ctx.avals_out)
    axes = [a for a in mesh.axis_names if a in newly_manual_axes]
    op = sdy.ManualComputationOp([*tok, *[mlir.aval_to_ir_type(a) for a in ctx.avals_out]],
                                 [*mlir.get_tokens(effs), *args], in_sh, out_sh,
                                 sdy.ManualAxesAttr.get([ir.StringAttr.get(a) for a in axes]))
    block = ir.Block.create_at_start(op.body, [*tok, *[mlir.aval_to_ir_type(v.aval)
                                                       for v in jaxpr.invars]])
    # the region is manual along these axes and those of the regions around it (nested)
    enclosing = parallel.ctx.meshes[-1][1] if parallel.ctx.meshes else frozenset()
    parallel.ctx.meshes.append((mesh, enclosing | newly_manual_axes))
    try:
        with ir.InsertionPoint(block):
            mlir.set_tokens(effs, list(block.arguments)[:len(effs)])
            outs = mlir.lower_jaxpr(jaxpr, (), list(block.arguments)[len(effs):])
            sdy.ReturnOp([*mlir.get_tokens(effs), *outs])
    finally:
        parallel.ctx.meshes.pop()
    results = list(op.results)
    mlir.set_tokens(effs, results[:len(effs)])
    return results[len(effs):]


# JAX: jax/_src/shard_map.py _shard_map_typecheck
def _shard_map_typecheck(*avals, jaxpr, mesh, in_specs, out_specs, check_vma,
                         newly_manual_axes):
    for i, (a, s, v) in enumerate(safe_zip(avals, in_specs, jaxpr.invars)):
        if not core.typematch(_local_aval(a, s, mesh, check_vma), v.aval):
            raise core.JaxprTypeError(f"shard_map: argument {i} of type {a.str_short()} with "
                                      f"in_specs {s} does not match the body's input "
                                      f"{v.aval.str_short()}")
    with _body_context(mesh, newly_manual_axes, check_vma):
        core.check_jaxpr(jaxpr)
    return _shard_map_abstract_eval(*avals, jaxpr=jaxpr, mesh=mesh, in_specs=in_specs,
                                    out_specs=out_specs, check_vma=check_vma,
                                    newly_manual_axes=newly_manual_axes)


shard_map_p = core.Primitive("shard_map")
shard_map_p.multiple_results = True
shard_map_p.pp_param_formatters = {
    "newly_manual_axes": lambda v: "frozenset({" + ", ".join(map(repr, sorted(v))) + "})"}
shard_map_p.def_impl(_shard_map_impl)
shard_map_p.def_abstract_eval(_shard_map_abstract_eval)
ad.primitive_jvps[shard_map_p] = _shard_map_jvp
pe.custom_partial_eval_rules[shard_map_p] = _shard_map_partial_eval
ad.primitive_transposes[shard_map_p] = _shard_map_transpose
batching.primitive_batchers[shard_map_p] = _shard_map_batch_rule
mlir.register_lowering(shard_map_p, _shard_map_lowering)
mlir._lays_out_itself.add(shard_map_p)  # its out_specs say the layout, in the Auto axes too
core.custom_typechecks[shard_map_p] = _shard_map_typecheck


def _register_vma_primitives() -> None:
    core.vma_primitives.update({shard_map_p, pjit.jit_p})


_register_vma_primitives()
