from minijax import numpy as jnp

"""minijax.experimental.pallas.triton: `load`/`store` with masks, as in
jax.experimental.pallas.triton (JAX 0.10 moved them here from `pl`). In interpret mode a
masked load is a read plus a select, and a masked store a read, a select and a write."""


# JAX: jax/_src/pallas/triton/primitives.py load — differs: a get and a select, not a
# masked-load primitive
def load(ref, *, mask=None, other=None, cache_modifier=None, eviction_policy=None,
         volatile: bool = False):
    """The whole of `ref`, with positions where `mask` is False replaced by `other` (0 if
    None)."""
    del cache_modifier, eviction_policy, volatile
    val = ref[...]
    if mask is None:
        return val
    return jnp.where(mask, val, jnp.zeros_like(val) if other is None else other)


# JAX: jax/_src/pallas/triton/primitives.py store — differs: a get, a select and a swap
def store(ref, val, *, mask=None, eviction_policy=None) -> None:
    """Write `val` into all of `ref`, leaving positions where `mask` is False unchanged."""
    del eviction_policy
    if mask is not None:
        val = jnp.where(mask, val, ref[...])
    ref[...] = val
