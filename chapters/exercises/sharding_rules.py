"""Exercise: sharding rules, the type system of sharded programs (chapter 12).

With sharding in types, an aval carries its layout: `f32[8@x,4]` is an 8 x 4 array whose rows
are split over mesh axis `x`. Every primitive then needs a *sharding rule*: given the
operands' avals (`x.sharding` is a `NamedSharding` over an `AbstractMesh`, `x.sharding.spec`
has one entry per dimension: None, an axis name, or a tuple of names), return the result's
`NamedSharding`, or raise `ShardingTypeError` when no layout follows without moving data.
minijax applies the rule after the shape rule (`minijax/core.py: Primitive.def_sharding_rule`)
and lowers the result's type to an `sdy.sharding_constraint`.

Write the three rules marked `NotImplementedError`. The tests install each one in minijax
and compare the jaxprs (types included) and the errors with what real JAX prints.
"""

from __future__ import annotations

from minijax.sharding import NamedSharding, PartitionSpec, ShardingTypeError  # noqa: F401


def transpose_sharding_rule(x, *, permutation):
    """`transpose`: output dimension i is operand dimension permutation[i], and it keeps that
    dimension's layout. E.g. f32[8@x,4@y] with permutation (1, 0) -> f32[4@y,8@x]."""
    raise NotImplementedError("transpose_sharding_rule")


def cumsum_sharding_rule(x, *, axis, reverse):
    """`cumsum` along `axis`: elementwise in every other dimension, so the result is laid out
    as the operand. Along a *split* `axis`, each device would need the totals of the devices
    before it: JAX refuses, with ShardingTypeError(f"Input should be unsharded over the axis
    being reduced. Got input type={x} and axis={axis}") (`{x}` prints as float32[8@x,4@y])."""
    raise NotImplementedError("cumsum_sharding_rule")


def matmul_sharding_rule(lhs, rhs, *, dimension_numbers, out_sharding, **_):
    """`dot_general` for a 2-D matmul, `dimension_numbers == (((1,), (0,)), ((), ()))`: the
    result f32[m,n] takes lhs's layout of m and rhs's layout of n. Given `out_sharding`, that
    is the answer. If the contracted dimension is split on both sides, each device holds a
    partial sum, and whether to all-reduce it or reduce-scatter it is the user's call: raise
    ShardingTypeError with JAX's message, "Contracting dimensions are sharded and it is
    ambiguous how the output should be sharded. Please specify the output sharding via the
    `out_sharding` parameter. Got lhs_contracting_spec=('y',) and
    rhs_contracting_spec=('y',)" (the contracted entries as 1-tuples)."""
    raise NotImplementedError("matmul_sharding_rule")
