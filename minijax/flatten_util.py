"""`minijax.flatten_util.ravel_pytree`: a pytree of arrays as one flat vector, and back.

Mirrors jax/_src/flatten_util.py (exported as jax/flatten_util.py). Taught with pytrees in
chapters/10-pytrees-prng.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from minijax import lax, numpy as jnp
from minijax.tree_util import tree_flatten, tree_unflatten


# JAX: jax/_src/flatten_util.py ravel_pytree
def ravel_pytree(pytree: Any) -> tuple[Any, Callable]:
    """Flatten the leaves of `pytree` (arrays and scalars) into one vector.

    Returns (flat, unravel): `flat` is `T[n]` with `T` the leaves' promoted dtype (`f32[0]`
    for a tree without leaves, as JAX), and `unravel(flat)` rebuilds the tree, each leaf
    with its shape and dtype (leaves of one dtype take the vector's). `unravel` raises
    ValueError for a vector of another size, TypeError for one of another dtype (when the
    leaves had several dtypes).
    """
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, np.float32), lambda flat: tree_unflatten(treedef, [])
    leaves = [jnp.asarray(x) for x in leaves]
    from_dtypes = [x.dtype for x in leaves]
    to_dtype = jnp.result_type(*leaves)
    flat = lax.concatenate([lax.convert_element_type(x, to_dtype).ravel() for x in leaves], 0)
    return flat, functools.partial(_unravel, treedef, [x.shape for x in leaves], from_dtypes,
                                   to_dtype, flat.shape[0])


def _unravel(treedef, shapes, from_dtypes, to_dtype, size, flat):
    if np.shape(flat) != (size,):
        # JAX: jax/_src/lax/lax.py split (what JAX's unravel calls) words it so
        raise ValueError(f"Sum of sizes {size} must be equal to dimension 0 of the operand "
                         f"shape {list(np.shape(flat))}")
    if len(set(from_dtypes)) > 1 and jnp.asarray(flat).dtype != to_dtype:
        raise TypeError(f"unravel function given array of dtype {jnp.asarray(flat).dtype}, "
                        f"but expected dtype {to_dtype}")
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    chunks = jnp.split(flat, cuts) if len(shapes) > 1 else [flat]
    if len(set(from_dtypes)) == 1:  # one dtype: `unravel` keeps the vector's, as in JAX
        return tree_unflatten(treedef, [c.reshape(s) for c, s in zip(chunks, shapes)])
    leaves = [lax.convert_element_type(c.reshape(s), d)
              for c, s, d in zip(chunks, shapes, from_dtypes)]
    return tree_unflatten(treedef, leaves)
