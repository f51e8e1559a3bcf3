"""Exercise: the `vmap_method="expand_dims"` batching rule of `pure_callback` (chapter 14).

Under `vmap`, `pure_callback(fn, result_shape_dtypes, *args, vmap_method="expand_dims")` makes
ONE host call for the whole batch: each batched argument is passed with its batch axis moved
to the front, each unbatched one with a new leading axis of size 1 (so NumPy broadcasting in
`fn` lines it up), and every result is declared with the batch axis in front. Fill in
`expand_dims_rule`; the tests compare the shapes the host function sees, and the results,
with real JAX's.
"""

from __future__ import annotations

from minijax import lax  # noqa: F401 (for your code: lax.expand_dims)
from minijax.callback import _FlatCallback, pure_callback_p  # noqa: F401
from minijax.interpreters import batching  # noqa: F401 (batching.moveaxis)


def batched_callback(callback: _FlatCallback, batched_avals) -> _FlatCallback:
    """The same host function, declared to return `batched_avals`."""
    return _FlatCallback(callback.callback_func, callback.in_tree, batched_avals, callback.api)


def expand_dims_rule(vals, dims, *, axis_size, callback, result_avals, sharding, vmap_method):
    """Batch one `pure_callback` equation: `vals[i]` is batched at axis `dims[i]` (None: not
    batched). Bind `pure_callback_p` once on the rearranged operands, with
    `result_avals` (and the callback's declared avals) given a leading `axis_size`, and return
    (outputs, [0, ...]): every output batched at axis 0."""
    raise NotImplementedError("expand_dims_rule")
