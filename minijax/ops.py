"""`minijax.ops`: reductions over segments of an array (`segment_sum`, `segment_max`, ...).

Each is one scatter (`x.at[ids].add/mul/min/max`) into an array filled with the reduction's
identity, with out-of-range ids dropped. Mirrors jax/_src/ops/scatter.py (exported as
jax/ops/__init__.py). Taught with scatter in chapters/01-numpy.md.
"""

from __future__ import annotations

import numpy as np

from minijax import core, dtypes, numpy as jnp


def _identity(op: str, dtype):
    if op in ("add", "mul"):
        return 0 if op == "add" else 1
    if dtype == np.bool_:
        return op == "min"
    if dtypes.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.max if op == "min" else info.min
    return np.inf if op == "min" else -np.inf


# JAX: jax/_src/ops/scatter.py _segment_update
def _segment_update(name, op, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode):
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    if num_segments is None:
        if isinstance(segment_ids, core.Tracer):
            raise core.ConcretizationTypeError(
                f"{name}: `num_segments` must be given when segment_ids are traced "
                f"({core.get_aval(segment_ids).str_short()})")
        num_segments = int(np.max(np.asarray(segment_ids))) + 1
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    # negative ids are dropped, not counted from the end (JAX: normalize_indices=False)
    ids = jnp.where(segment_ids < 0, num_segments, segment_ids)
    mode = "drop" if mode is None else mode
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    fill = _identity(op, data.dtype)
    if bucket_size is None:
        out = jnp.full((num_segments,) + data.shape[1:], fill, data.dtype)
        return getattr(out.at[ids], op)(data, **kw)
    buckets = -(-ids.shape[0] // bucket_size)
    out = jnp.full((buckets, num_segments) + data.shape[1:], fill, data.dtype)
    out = getattr(out.at[jnp.arange(ids.shape[0]) // bucket_size, ids], op)(data, **kw)
    reduce = {"add": jnp.sum, "mul": jnp.prod, "min": jnp.min, "max": jnp.max}[op]
    return reduce(out, axis=0).astype(data.dtype)


def _segment_op(name: str, op: str, what: str):
    def segment(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
        return _segment_update(name, op, data, segment_ids, num_segments, indices_are_sorted,
                               unique_indices, bucket_size, mode)
    segment.__name__ = segment.__qualname__ = name
    segment.__doc__ = (
        f"The {what} of `data`'s rows within each segment: `out[k]` reduces the rows `i` "
        f"with `segment_ids[i] == k`.\n\n    Args: data `T[n,...]`; segment_ids `int[n]`; "
        f"num_segments (static; default max(segment_ids) + 1, which needs concrete ids);\n"
        f"    ids outside [0, num_segments) are dropped. Returns `T[num_segments,...]`, with "
        f"the reduction's identity\n    for empty segments. Raises ValueError for a negative "
        f"num_segments. Mirrors jax.ops.{name}.")
    return segment


# JAX: jax/_src/ops/scatter.py segment_sum
segment_sum = _segment_op("segment_sum", "add", "sum")
# JAX: jax/_src/ops/scatter.py segment_prod
segment_prod = _segment_op("segment_prod", "mul", "product")
# JAX: jax/_src/ops/scatter.py segment_max
segment_max = _segment_op("segment_max", "max", "maximum")
# JAX: jax/_src/ops/scatter.py segment_min
segment_min = _segment_op("segment_min", "min", "minimum")
