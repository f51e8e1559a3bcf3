"""minijax.experimental.pallas.triton: the GPU-flavoured `load`/`store` with masks, as in
jax.experimental.pallas.triton (JAX 0.10 moved `pl.load`/`pl.store` here). In interpret mode
they are a read plus a select, and a select plus a write."""

from minijax.experimental.pallas.pallas_call import load as _load, store as _store


# JAX: jax/_src/pallas/triton/primitives.py load
def load(ref, *, mask=None, other=None, cache_modifier=None, eviction_policy=None,
         volatile: bool = False):
    """The whole of `ref`, with positions where `mask` is False replaced by `other` (0)."""
    del cache_modifier, eviction_policy, volatile
    return _load(ref, (), mask=mask, other=other)


# JAX: jax/_src/pallas/triton/primitives.py store
def store(ref, val, *, mask=None, eviction_policy=None) -> None:
    """Write `val` into all of `ref`, leaving positions where `mask` is False unchanged."""
    del eviction_policy
    _store(ref, (), val, mask=mask)
