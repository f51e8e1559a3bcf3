"""Solution: the sharding rules of `transpose`, `cumsum` and 2-D `dot_general`."""

from __future__ import annotations

from minijax.sharding import NamedSharding, PartitionSpec, ShardingTypeError


def transpose_sharding_rule(x, *, permutation):
    spec = x.sharding.spec
    return NamedSharding(x.sharding.mesh, PartitionSpec(*[spec[p] for p in permutation]))


def cumsum_sharding_rule(x, *, axis, reverse):
    if x.sharding.spec[axis] is not None:
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got "
                                f"input type={x} and axis={axis}")
    return x.sharding


def matmul_sharding_rule(lhs, rhs, *, dimension_numbers, out_sharding, **_):
    if out_sharding is not None:
        return out_sharding
    ls = lhs.sharding.spec if lhs.sharding is not None else (None, None)
    rs = rhs.sharding.spec if rhs.sharding is not None else (None, None)
    if ls[1] is not None and rs[0] is not None:
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be "
            "sharded. Please specify the output sharding via the `out_sharding` parameter. "
            f"Got lhs_contracting_spec={(ls[1],)} and rhs_contracting_spec={(rs[0],)}")
    mesh = (lhs.sharding or rhs.sharding).mesh
    return NamedSharding(mesh, PartitionSpec(ls[0], rs[1]))
