"""`minijax.experimental.shard_map.shard_map`: the older spelling JAX 0.10 still ships (it
forwards to `jax.shard_map` with `check_rep` for `check_vma`). Mirrors
jax/experimental/shard_map.py."""

from minijax.shard_map import shard_map as _shard_map


# JAX: jax/experimental/shard_map.py shard_map
def shard_map(f, mesh, in_specs, out_specs, check_rep: bool = True):
    """`minijax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
    check_vma=check_rep)`, with the mesh and specs positional as in the old API."""
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                      check_vma=check_rep)
