"""`minijax.tree`: the short names of the pytree functions (`tree.map` is `tree_util.tree_map`).

Mirrors jax/tree.py (jax/_src/tree.py), which re-exports jax/_src/tree_util.py the same way.
Taught in chapters/10-pytrees-prng.md.
"""

import dataclasses

from minijax.tree_util import (  # noqa: F401
    tree_all as all,
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)


# JAX: jax/_src/tree.py static
def static(**kwargs):
    """A `dataclasses.field` marked static: `tree_util.register_dataclass` makes it aux data
    (part of the structure, hashable) instead of a child."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


def __getattr__(name):  # a JAX public name minijax lacks: say so (docs/public_surface.md)
    from minijax._unimplemented import missing  # not at the top: only a missing name needs it
    raise missing(__name__, name)
