"""Approximate top-k: `approx_max_k` and `approx_min_k`, the `approx_top_k` primitive.

On TPU, XLA's ApproxTopK keeps the best of small bins and so may miss a few of the true top
k (its `recall_target`); on CPU, as here, XLA computes it exactly, as a sort. minijax lowers
it the same way, so the results are those of `top_k` (for min_k, of the smallest values,
ascending). Mirrors jax/_src/lax/ann.py. Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import numpy as np

from minijax import core, dtypes
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir
from minijax.lax import lax
from minijax.util import canonicalize_axis


def _approx_top_k_abstract_eval(operand, *, k, reduction_dimension, recall_target, is_max_k,
                                reduction_input_size_override, aggregate_to_topk):
    if operand.ndim == 0 or not 0 < k <= operand.shape[reduction_dimension]:
        raise ValueError(f"approx_top_k: k={k} must be in (0, size of dimension "
                         f"{reduction_dimension}] of {operand.str_short()}")
    if not dtypes.is_float(operand.dtype):
        raise ValueError(f"approx_top_k: operand must be a floating type, got "
                         f"{operand.str_short()}")
    shape = list(operand.shape)
    shape[reduction_dimension] = k
    return [ShapedArray(tuple(shape), operand.dtype), ShapedArray(tuple(shape), np.int32)]


def _exact(operand, *, k, reduction_dimension, is_max_k, **_):
    # top_k on the last axis; for min_k, of the negated values
    x = lax.transpose(operand, _swap(core.get_aval(operand).ndim, reduction_dimension))
    values, idx = lax.top_k(x if is_max_k else lax.neg(x), k)
    if not is_max_k:
        values = lax.neg(values)
    perm = _swap(core.get_aval(values).ndim, reduction_dimension)
    return [lax.transpose(values, perm), lax.transpose(idx, perm)]


def _swap(ndim: int, axis: int) -> tuple[int, ...]:
    perm = list(range(ndim))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return tuple(perm)


def _approx_top_k_jvp(primals, tangents, **params):
    # the tangents at the chosen positions, picked by the same indices
    (x,), (t,) = primals, tangents
    values, idx = approx_top_k_p.bind(x, **params)
    if type(t) is Zero:
        return [values, idx], [Zero.from_primal_value(values), Zero.from_primal_value(idx)]
    axis = params["reduction_dimension"]
    n = core.get_aval(x).shape[axis]
    onehot = lax.eq(lax.expand_dims(idx, (axis + 1,)),
                    lax.broadcasted_iota(np.int32, core.get_aval(idx).shape[:axis + 1] + (n,)
                                         + core.get_aval(idx).shape[axis + 1:], axis + 1))
    t_wide = lax.expand_dims(t, (axis,))
    picked = lax.select(onehot, lax.broadcast_in_dim(t_wide, core.get_aval(onehot).shape,
                                                     tuple(range(core.get_aval(onehot).ndim))),
                        lax.full_like(onehot, 0, core.get_aval(t).dtype))
    return [values, idx], [lax.reduce_sum(picked, (axis + 1,)), Zero.from_primal_value(idx)]


def _approx_top_k_batch_rule(vals, dims, *, axis_size, reduction_dimension, **params):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    outs = approx_top_k_p.bind(x, reduction_dimension=reduction_dimension + 1, **params)
    return outs, [0, 0]


approx_top_k_p = Primitive("approx_top_k")
approx_top_k_p.multiple_results = True
approx_top_k_p.def_impl(lambda x, **params: [np.asarray(v) for v in _exact(x, **params)])
approx_top_k_p.def_abstract_eval(_approx_top_k_abstract_eval)
ad.primitive_jvps[approx_top_k_p] = _approx_top_k_jvp
batching.primitive_batchers[approx_top_k_p] = _approx_top_k_batch_rule
mlir.register_lowering(approx_top_k_p, mlir.lower_fun(_exact))


def _bind(operand, k, reduction_dimension, recall_target, is_max_k,
          reduction_input_size_override, aggregate_to_topk):
    ndim = core.get_aval(operand).ndim
    return tuple(approx_top_k_p.bind(
        operand, k=int(k), reduction_dimension=canonicalize_axis(reduction_dimension, ndim),
        recall_target=float(recall_target), is_max_k=is_max_k,
        reduction_input_size_override=int(reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk)))


# JAX: jax/_src/lax/ann.py approx_max_k
def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """`(values, indices)`: the k largest entries along `reduction_dimension`, largest first,
    indices i32; `operand`'s shape with k there. Exact here (XLA's CPU behaviour);
    `recall_target` and the other knobs matter only on TPU. ValueError unless 0 < k <= the
    dimension's size."""
    return _bind(operand, k, reduction_dimension, recall_target, True,
                 reduction_input_size_override, aggregate_to_topk)


# JAX: jax/_src/lax/ann.py approx_min_k
def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """`(values, indices)`: the k smallest entries along `reduction_dimension`, smallest
    first; otherwise as `approx_max_k`."""
    return _bind(operand, k, reduction_dimension, recall_target, False,
                 reduction_input_size_override, aggregate_to_topk)
