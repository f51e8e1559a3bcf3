"""Windowed reductions: `reduce_window` with add (sum pooling) or max/min (max pooling).

Each primitive slides a window over the (padded, optionally dilated) operand and reduces it.
reduce_window_sum is linear; its transpose pads the cotangent (strides become interior
padding) and sums it with the same window again. reduce_window_max/min differentiate by
picking, per window, the tangent at the (first) extreme element: minijax writes that as a
chain of strided slices and selects, one per window offset, where JAX uses the
`select_and_gather_add` primitive. Mirrors jax/_src/lax/windowed_reductions.py.
Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from minijax import core
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir
from minijax.lax import lax
from minijax.lax.convolution import (_conv_general_vjp_lhs_padding, _dilate_shape,
                                     padtype_to_pads)


def _init(name: str, dtype):
    return {"sum": 0, "max": lax._lowest(dtype), "min": lax._highest(dtype)}[name]


def _reduce_window_impl(name: str):
    ufunc = {"sum": np.sum, "max": np.max, "min": np.min}[name]

    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        init = np.array(_init(name, x.dtype), x.dtype)
        if any(d > 1 for d in base_dilation):
            dilated = np.full(_dilate_shape(x.shape, base_dilation), init, x.dtype)
            dilated[tuple(slice(None, None, d) for d in base_dilation)] = x
            x = dilated
        x = np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=init)
        x = x[tuple(slice(-min(lo, 0), x.shape[k] + min(hi, 0))
                    for k, (lo, hi) in enumerate(padding))]
        window = _dilate_shape(window_dimensions, window_dilation)
        win = np.lib.stride_tricks.sliding_window_view(x, window)
        nd = x.ndim
        win = win[tuple(slice(None, None, s) for s in window_strides)
                  + tuple(slice(None, None, d) for d in window_dilation)]
        return ufunc(win, axis=tuple(range(nd, 2 * nd))).astype(x.dtype)
    return impl


def _reduce_window_abstract_eval(name: str):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        if not (len(window_dimensions) == len(window_strides) == len(padding) == x.ndim):
            raise TypeError(f"reduce_window_{name}: window_dimensions, window_strides and "
                            f"padding need one entry per dim of {x.str_short()}")
        base = _dilate_shape(x.shape, base_dilation)
        window = _dilate_shape(window_dimensions, window_dilation)
        shape = tuple(max((d + lo + hi - w) // s + 1, 0) if d + lo + hi >= w else 0
                      for d, (lo, hi), w, s in zip(base, padding, window, window_strides))
        return x.update(shape=shape)
    return rule


def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    in_shape = x.aval.shape
    pads = _conv_general_vjp_lhs_padding(in_shape, window_dimensions, window_strides,
                                         core.get_aval(ct).shape, padding, base_dilation,
                                         window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = lax.pad(ct, lax._const(ct, 0), config)
    return [reduce_window_sum_p.bind(
        padded, window_dimensions=window_dimensions, window_strides=base_dilation,
        padding=((0, 0),) * len(in_shape), base_dilation=(1,) * len(in_shape),
        window_dilation=window_dilation)]


def _window_slices(x, fill, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    """One strided slice of the padded operand per window offset, each of the output shape."""
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)]
    xp = lax.pad(x, lax._const(x, fill), config)
    shape = core.get_aval(xp).shape
    out_shape = _reduce_window_abstract_eval("sum")(
        core.get_aval(x), window_dimensions=window_dimensions, window_strides=window_strides,
        padding=padding, base_dilation=base_dilation, window_dilation=window_dilation).shape
    for offset in itertools.product(*(range(w) for w in window_dimensions)):
        start = [k * d for k, d in zip(offset, window_dilation)]
        limit = [min(s + (o - 1) * st + 1, n) if o else s
                 for s, o, st, n in zip(start, out_shape, window_strides, shape)]
        yield lax.slice(xp, start, limit, window_strides)


def _reduce_window_chooser_jvp(name: str):
    better = lax.gt if name == "max" else lax.lt

    def jvp(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = (reduce_window_max_p if name == "max" else reduce_window_min_p).bind(x, **params)
        init = _init(name, core.get_aval(x).dtype)
        best_x = best_t = None
        for x_k, t_k in zip(_window_slices(x, init, **params),
                            _window_slices(ad.instantiate_zeros(t), 0, **params)):
            if best_x is None:
                best_x, best_t = x_k, t_k
                continue
            take = better(x_k, best_x)  # ties keep the earlier element
            best_x = lax.select(take, x_k, best_x)
            best_t = lax.select(take, t_k, best_t)
        return out, best_t
    return jvp


def _reduce_window_batch_rule(prim):
    def rule(vals, dims, *, axis_size, window_dimensions, window_strides, padding,
             base_dilation, window_dilation):
        (x,), (d,) = vals, dims
        x = batching.moveaxis(x, d, 0)
        return prim.bind(x, window_dimensions=(1,) + window_dimensions,
                         window_strides=(1,) + window_strides, padding=((0, 0),) + padding,
                         base_dilation=(1,) + base_dilation,
                         window_dilation=(1,) + window_dilation), 0
    return rule


def _reduce_window_lowering(name: str):
    op_name = {"sum": "add", "max": "maximum", "min": "minimum"}[name]

    def rule(ctx, x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        aval_out = ctx.avals_out[0]
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval_out.dtype))
        init = mlir.ir_constant(np.array(_init(name, aval_out.dtype), aval_out.dtype))
        pads = mlir.ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(-1, 2))
        op = mlir.hlo.ReduceWindowOp(
            [mlir.aval_to_ir_type(aval_out)], [x], [init], list(window_dimensions),
            window_strides=list(window_strides), base_dilations=list(base_dilation),
            window_dilations=list(window_dilation), padding=pads)
        block = op.regions[0].blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            mlir.hlo.return_([getattr(mlir.hlo, op_name)(*block.arguments)])
        return op.result
    rule.__name__ = f"_reduce_window_{name}_lowering"
    return rule


def _reduce_window_primitive(name: str) -> Primitive:
    prim = Primitive(f"reduce_window_{name}")
    prim.def_impl(_reduce_window_impl(name))
    prim.def_abstract_eval(_reduce_window_abstract_eval(name))
    return prim


reduce_window_sum_p = _reduce_window_primitive("sum")
ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)
batching.primitive_batchers[reduce_window_sum_p] = _reduce_window_batch_rule(reduce_window_sum_p)
mlir.register_lowering(reduce_window_sum_p, _reduce_window_lowering("sum"))

reduce_window_max_p = _reduce_window_primitive("max")
ad.primitive_jvps[reduce_window_max_p] = _reduce_window_chooser_jvp("max")
batching.primitive_batchers[reduce_window_max_p] = _reduce_window_batch_rule(reduce_window_max_p)
mlir.register_lowering(reduce_window_max_p, _reduce_window_lowering("max"))

reduce_window_min_p = _reduce_window_primitive("min")
ad.primitive_jvps[reduce_window_min_p] = _reduce_window_chooser_jvp("min")
batching.primitive_batchers[reduce_window_min_p] = _reduce_window_batch_rule(reduce_window_min_p)
mlir.register_lowering(reduce_window_min_p, _reduce_window_lowering("min"))


# JAX: jax/_src/lax/windowed_reductions.py reduce_window
def reduce_window(operand, init_value, computation, window_dimensions: Sequence[int],
                  window_strides: Sequence[int], padding, base_dilation=None,
                  window_dilation=None):
    """Reduce each window of `operand` with `computation`.

    Args:
      operand: `T[d0,...,dn]`.
      init_value: the identity of `computation`: 0 for `lax.add`, -inf (or the dtype's
        minimum) for `lax.max`, +inf (or the maximum) for `lax.min`.
      computation: `lax.add`, `lax.max` or `lax.min` (minijax's; no other reducers).
      window_dimensions / window_strides: one per dim of `operand`.
      padding: 'SAME', 'VALID' or one `(lo, hi)` pair per dim (padded with `init_value`).
      base_dilation / window_dilation: operand and window dilations (default 1).
    Returns: `T[...]` with `floor((dilated_d + lo + hi - dilated_window) / stride) + 1` per dim.
    Raises NotImplementedError for another computation or a non-identity init_value.
    """
    name = {lax.add: "sum", lax.max: "max", lax.min: "min"}.get(computation)
    aval = core.get_aval(operand)
    if name is None or np.asarray(init_value) != _init(name, aval.dtype):
        raise NotImplementedError(
            "minijax's reduce_window supports computation lax.add (init 0), lax.max (init "
            "-inf) and lax.min (init +inf) only")
    nd = aval.ndim
    base_dilation = tuple(int(d) for d in base_dilation or (1,) * nd)
    window_dilation = tuple(int(d) for d in window_dilation or (1,) * nd)
    window_dimensions = tuple(int(w) for w in window_dimensions)
    window_strides = tuple(int(s) for s in window_strides)
    if isinstance(padding, str):
        padding = padtype_to_pads(_dilate_shape(aval.shape, base_dilation),
                                  _dilate_shape(window_dimensions, window_dilation),
                                  window_strides, padding)
    prim = {"sum": reduce_window_sum_p, "max": reduce_window_max_p,
            "min": reduce_window_min_p}[name]
    return prim.bind(operand, window_dimensions=window_dimensions,
                     window_strides=window_strides,
                     padding=tuple((int(lo), int(hi)) for lo, hi in padding),
                     base_dilation=base_dilation, window_dilation=window_dilation)
