"""`minijax.sharding`: the public names of sharding, as `jax.sharding`.

Re-exports only. Where each lives, as in JAX: `Mesh`, `AbstractMesh`, `AxisType` and `set_mesh`
in minijax/mesh.py; `PartitionSpec` in minijax/partition_spec.py; `Sharding` and
`NamedSharding` in minijax/named_sharding.py; `SingleDeviceSharding` and sharding in types in
minijax/sharding_impls.py; each primitive's sharding rule in minijax/lax/utils.py; `reshard`,
`auto_axes` and `explicit_axes` in minijax/pjit.py; placing arrays on devices in
minijax/compiler.py (`device_put_sharded_tree`); pictures (`visualize_sharding`) in
minijax/debugging.py. Mirrors jax/sharding.py. Taught in chapters/12-sharding.md.
"""

# ruff: noqa: F401
from minijax.mesh import (
    AbstractDevice,
    AbstractMesh,
    AxisType,
    ManualAxisType,
    Mesh,
    get_abstract_mesh,
    get_concrete_mesh,
    make_mesh,
    set_mesh,
    use_abstract_mesh,
)
from minijax.named_sharding import DuplicateSpecError, IndivisibleError, NamedSharding, Sharding
from minijax.partition_spec import P, PartitionSpec
from minijax.pjit import auto_axes, explicit_axes, reshard
from minijax.sharding_impls import (
    ShardingTypeError,
    SingleDeviceSharding,
    get_mesh,
    make_single_device_sharding,
)


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
