"""The sharding rules lax's primitives share: how each result's layout follows its operands'.

Each rule takes the operands' avals (their `sharding`: minijax/sharding_impls.py) and returns
the result's sharding, or raises `ShardingTypeError` when the layout is ambiguous and the
caller must say (`out_sharding=`). Registered per primitive with `Primitive.def_sharding_rule`
in minijax/lax/lax.py. Mirrors the rules of jax/_src/lax/lax.py and the helpers of
jax/_src/lax/utils.py. Taught in chapters/12-sharding.md.
"""

from __future__ import annotations

import math

from minijax import core
from minijax.mesh import AbstractMesh, get_abstract_mesh
from minijax.named_sharding import NamedSharding
from minijax.partition_spec import PartitionSpec, _axes_of
from minijax.sharding_impls import ShardingTypeError, _spec_of


def _spec_size(mesh, p) -> int:
    return math.prod(mesh.shape[a] for a in _axes_of(p))


def _one_mesh(name: str, avals) -> "AbstractMesh | None":
    mesh = None
    for a in avals:
        if a.sharding is not None:
            if mesh is not None and a.sharding.mesh != mesh:
                raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: "
                                        f"{mesh} and another mesh: {a.sharding.mesh}")
            mesh = a.sharding.mesh
    return mesh


# JAX: jax/_src/lax/utils.py call_sharding_rule (its rules fall back to get_abstract_mesh)
def context_mesh() -> "AbstractMesh | None":
    """The mesh a result made only of untyped operands is typed over (replicated): the mesh
    in context (`set_mesh`) when it has Explicit axes, as in JAX, where `x * 3.0` of a
    `pure_callback`'s result inside `jit` is `f32[8,16]` over that mesh, so the jit's result
    is laid out replicated, not as a constraint further on would have it. Only while a
    jaxpr is traced: eagerly minijax computes such a value on one device (JAX places it on
    the mesh); not in a rule's `lower_fun`, nor in a shard_map body (JAX's context there is
    the mesh with its manual axes Manual)."""
    mesh = get_abstract_mesh()  # first: without a mesh in context (the usual case) no more
    if not mesh.explicit_axes:
        return None
    # not at the top: lax.parallel imports lax.lax, which imports this module
    from minijax.lax import parallel
    purpose = getattr(core.trace_ctx.trace, "purpose", "lower_fun")
    return None if purpose == "lower_fun" or parallel.ctx.bodies else mesh


def _with_spec(mesh, spec) -> "NamedSharding | None":
    return None if mesh is None else NamedSharding(mesh, PartitionSpec(*spec))


# JAX: jax/_src/lax/lax.py broadcasting_sharding_rule
def broadcasting_sharding_rule(name: str, *avals):
    """Elementwise ops: per dimension, the one layout the operands agree on (rank-0 operands
    and unsplit size-1 dimensions do not count); ShardingTypeError if two disagree."""
    mesh = _one_mesh(name, avals)
    mesh = context_mesh() if mesh is None else mesh
    if mesh is None:  # untyped operands, no mesh in context: the usual case
        return None
    ranked = [a for a in avals if a.ndim]
    if not ranked:
        return _with_spec(mesh, ())
    specs = [_spec_of(a) for a in ranked]
    out = []
    for i, column in enumerate(zip(*specs)):
        kept = {s for s, a in zip(column, ranked) if not (s is None and a.shape[i] == 1)}
        kept.discard(None) if len(kept) > 1 else None
        if len(kept) > 1:
            raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                    f"{', '.join(str(s) for s in specs)}.")
        out.append(kept.pop() if kept else None)
    used = [a for p in out for a in _axes_of(p)]
    if len(used) != len(set(used)):  # two dimensions over one mesh axis
        raise ShardingTypeError(f"{name} operation with inputs: "
                                f"{', '.join(a.str_short() for a in avals)} produces an "
                                f"illegally sharded result: spec {tuple(out)}")
    return _with_spec(mesh, out)


def same_sharding_rule(name: str, *avals):
    """Ops whose operands must all be laid out alike (select_n's cases, concatenate)."""
    mesh = _one_mesh(name, avals)
    mesh = context_mesh() if mesh is None else mesh
    given = [a.sharding for a in avals if a.sharding is not None and a.ndim]
    if any(s != given[0] for s in given[1:]):
        raise ShardingTypeError(f"{name}: all operands should have the same sharding. Got "
                                f"shardings {', '.join(str(a.sharding) for a in avals)}")
    return given[0] if given else _with_spec(mesh, (None,) * max(a.ndim for a in avals))


def varying_shape_sharding_rule(name: str, aval, out_shape):
    """Slicing and padding: a dimension whose size changes keeps its layout only if the new
    size still splits evenly over its mesh axes (JAX:
    jax/_src/lax/slicing.py _get_sharding_for_varying_out_shape)."""
    if aval.sharding is None:
        return None
    mesh = aval.sharding.mesh
    for n_in, n_out, p in zip(aval.shape, out_shape, aval.sharding.spec):
        if n_in != n_out and p is not None and n_out % _spec_size(mesh, p):
            raise ShardingTypeError(
                f"{name} on sharded dims where out dim ({n_out}) is not divisible by mesh "
                f"axes ({_spec_size(mesh, p)}) with spec ({p}) is not implemented. Got input "
                f"type={aval.str_short()} and output shape={tuple(out_shape)}")
    return aval.sharding


# JAX: jax/_src/lax/lax.py _dot_general_sharding_rule
def dot_general_sharding_rule(lhs, rhs, dimension_numbers, out_sharding):
    """batch dims + lhs free dims + rhs free dims, each keeping its operand's layout; a
    contracting dimension split on both sides leaves the result's layout open (a reduce-
    scatter or an all-reduce?), so it asks for `out_sharding`."""
    mesh = _one_mesh("dot_general", (lhs, rhs))
    if out_sharding is not None:
        return out_sharding
    if mesh is None:
        return None
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = _spec_of(lhs), _spec_of(rhs)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    if any(a != b and a is not None and b is not None for a, b in zip(lbs, rbs)):
        raise ShardingTypeError(f"dot_general requires lhs batch dimensions and rhs batch "
                                f"dimensions to have the consistent sharding, got {lbs} and "
                                f"{rbs}.")
    for a, b in zip(lcs, rcs):
        if a is not None and b is not None:
            if a != b:
                raise ShardingTypeError(f"dot_general requires contracting dimensions to "
                                        f"have consistent sharding, got {lcs} and {rcs}.")
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output "
                "should be sharded. Please specify the output sharding via the "
                f"`out_sharding` parameter. Got lhs_contracting_spec={lcs} and "
                f"rhs_contracting_spec={rcs}")
    batch = [a if a is not None else b for a, b in zip(lbs, rbs)]
    l_free = [s for i, s in enumerate(ls) if i not in lc and i not in lb]
    r_free = [s for i, s in enumerate(rs) if i not in rc and i not in rb]
    out = batch + l_free + r_free
    used = [a for p in out for a in _axes_of(p)]
    if len(used) != len(set(used)):
        raise ShardingTypeError(f"dot_general: the result would be split over one mesh axis "
                                f"twice ({out}); pass `out_sharding`")
    return _with_spec(mesh, out)


# JAX: jax/_src/lax/lax.py _reshape_sharding_rule — differs: one grouping walk instead of
# JAX's split/merge special cases (same answers for splitting and merging dimensions)
def reshape_sharding_rule(aval, new_sizes, sharding):
    """Group the old and new dimensions into runs of equal product; a run keeps its layout
    when only its first old dimension is split and that split still divides the first new
    dimension. Anything else asks for the `sharding` (out_sharding) argument."""
    if sharding is not None or aval.sharding is None:
        return sharding
    if 0 in aval.shape:
        return _with_spec(aval.sharding.mesh, (None,) * len(new_sizes))
    mesh, spec = aval.sharding.mesh, _spec_of(aval)
    old, new, out = list(aval.shape), list(new_sizes), []
    i = j = 0
    while i < len(old) or j < len(new):
        gi, gj, po, pn = [i], [j], old[i] if i < len(old) else 1, new[j] if j < len(new) else 1
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn:
                gi.append(i)
                po *= old[i]
                i += 1
            else:
                gj.append(j)
                pn *= new[j]
                j += 1
        gi, gj = [k for k in gi if k < len(old)], [k for k in gj if k < len(new)]
        # size-1 dimensions, added or removed, carry no layout: (8@i,) -> (1, 8@i)
        ps = [spec[k] for k in gi if old[k] != 1 or spec[k] is not None]
        to = [k for k in gj if new[k] != 1] or gj
        first = ps[0] if ps else None
        ok = all(p is None for p in ps[1:]) and (
            first is None or (to and new[to[0]] % _spec_size(mesh, first) == 0))
        if not ok:
            raise ShardingTypeError(
                f"This reshape is not supported. Please specify the sharding of the output "
                f"via the `out_sharding` argument of jax.lax.reshape. Got operand shape: "
                f"{tuple(aval.shape)}, new sizes: {tuple(new_sizes)} and operand spec: "
                f"{aval.sharding.spec}")
        out.extend(first if to and k == to[0] else None for k in gj)
    return _with_spec(mesh, out)
