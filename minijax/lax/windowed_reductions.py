"""Windowed reductions: `reduce_window` with add (sum pooling) or max/min (max pooling).

Each primitive slides a window over the (padded, optionally dilated) operand and reduces it.
reduce_window_sum is linear; its transpose pads the cotangent (strides become interior
padding) and sums it with the same window again. reduce_window_max/min differentiate by
picking, per window, the tangent at the extreme element: `select_and_gather_add`, as JAX
does, whose transpose is `select_and_scatter_add` (the cotangent added at each window's
winner). minijax's earlier rule, a chain of strided slices and selects, one per window
offset, stays available (`chooser_jvp("unrolled")`). Mirrors
jax/_src/lax/windowed_reductions.py.
Taught in chapters/09-primitives.md.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Sequence

import numpy as np

from minijax import core
from minijax.ad_util import Zero
from minijax.core import Primitive, ShapedArray
from minijax.interpreters import ad, batching, mlir
from minijax.lax import lax
from minijax.lax.convolution import _conv_general_vjp_lhs_padding, _dilate_shape, padtype_to_pads


def _init(name: str, dtype):
    return {"sum": 0, "max": lax._lowest(dtype), "min": lax._highest(dtype)}[name]


def _reduce_window_impl(name: str):
    ufunc = {"sum": np.sum, "max": np.max, "min": np.min}[name]

    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        init = np.array(_init(name, x.dtype), x.dtype)
        win = _windows(x, init, window_dimensions, window_strides, padding, base_dilation,
                       window_dilation)
        return ufunc(win, axis=tuple(range(x.ndim, 2 * x.ndim))).astype(x.dtype)
    return impl


def _windows(x, fill, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
    """NumPy: a view of shape `out_shape + window_dimensions`, each window of the dilated
    operand padded with `fill` (negative padding crops)."""
    if any(d > 1 for d in base_dilation):
        dilated = np.full(_dilate_shape(x.shape, base_dilation), fill, x.dtype)
        dilated[tuple(slice(None, None, d) for d in base_dilation)] = x
        x = dilated
    x = np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=fill)
    x = x[tuple(slice(-min(lo, 0), x.shape[k] + min(hi, 0))
                for k, (lo, hi) in enumerate(padding))]
    window = _dilate_shape(window_dimensions, window_dilation)
    win = np.lib.stride_tricks.sliding_window_view(x, window)
    return win[tuple(slice(None, None, s) for s in window_strides)
               + tuple(slice(None, None, d) for d in window_dilation)]


def _chosen(x, select_prim, *params):
    """NumPy: per window, the flat position (within the window) of its first largest (`ge`)
    or smallest (`le`) element of `x`."""
    fill = np.array(_init("max" if select_prim is lax.ge_p else "min", x.dtype), x.dtype)
    win = _windows(x, fill, *params)
    flat = win.reshape(win.shape[:x.ndim] + (-1,))
    return (np.argmax if select_prim is lax.ge_p else np.argmin)(flat, axis=-1)[..., None]


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


def _reduce_window_chooser_jvp_unrolled(name: str):
    """max/min pooling's jvp written with ordinary primitives: one strided slice of the
    operand and of the tangent per window offset, and a chain of `gt`/`select_n` keeping the
    tangent of the best element so far. minijax's own rule, kept as an alternative to JAX's
    `select_and_gather_add` (`chooser_jvp("unrolled")`; chapters/18-cnn-batchnorm.md times
    both)."""
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
        # the init value broadcast to its own scalar shape, as JAX's mlir.full_like_aval
        init = mlir.hlo.broadcast_in_dim(scalar, mlir.ir_constant(
            np.array(_init(name, aval_out.dtype), aval_out.dtype)), [])
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


# ---------------------------------------------------------------------------------------------
# select_and_gather_add / select_and_scatter_add: max pooling's derivative as JAX writes it
# ---------------------------------------------------------------------------------------------

def _select_and_gather_add_impl(tangents, operand, *, select_prim, window_dimensions,
                                window_strides, padding, base_dilation, window_dilation):
    params = (window_dimensions, window_strides, padding, base_dilation, window_dilation)
    win = _windows(tangents, np.zeros((), tangents.dtype), *params)
    flat = win.reshape(win.shape[:tangents.ndim] + (-1,))
    return np.take_along_axis(flat, _chosen(operand, select_prim, *params), -1)[..., 0]


def _select_and_gather_add_abstract_eval(tangents, operand, *, select_prim, **params):
    if tangents.shape != operand.shape or tangents.dtype != operand.dtype:
        raise TypeError(f"select_and_gather_add: tangents {tangents.str_short()} and operand "
                        f"{operand.str_short()} must have the same shape and dtype")
    return _reduce_window_abstract_eval("sum")(operand, **params)


def _select_and_gather_add_jvp(primals, tangents, *, select_prim, **params):
    (t, x), (g_t, _) = primals, tangents  # linear in `t`; `x` only decides where to look
    out = select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)
    if type(g_t) is Zero:
        return out, Zero.from_primal_value(out)
    return out, select_and_gather_add_p.bind(g_t, x, select_prim=select_prim, **params)


def _select_and_gather_add_transpose(ct, t, x, *, select_prim, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation):
    if any(d != 1 for d in window_dilation):
        raise NotImplementedError(f"select_and_gather_add: no transpose with window dilation "
                                  f"{window_dilation} (as in JAX)")
    if type(ct) is Zero:
        return [Zero(t.aval), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:  # the holes of the dilated operand never win
        fill = _init("max" if select_prim is lax.ge_p else "min", core.get_aval(x).dtype)
        x = lax.pad(x, lax._const(x, fill), [(0, 0, d - 1) for d in base_dilation])
    out = select_and_scatter_add_p.bind(ct, x, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=padding)
    if dilated:
        out = lax.slice(out, (0,) * len(base_dilation), core.get_aval(out).shape, base_dilation)
    return [out, None]


def _select_and_gather_add_batch_rule(vals, dims, *, axis_size, select_prim, window_dimensions,
                                      window_strides, padding, base_dilation, window_dilation):
    t, x = (batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims))
    return select_and_gather_add_p.bind(
        t, x, select_prim=select_prim, window_dimensions=(1,) + window_dimensions,
        window_strides=(1,) + window_strides, padding=((0, 0),) + padding,
        base_dilation=(1,) + base_dilation, window_dilation=(1,) + window_dilation), 0


def _pair_select_body(op, dtype, select_prim, n_pairs: int):
    """The reducer of a variadic reduce_window (or select of select_and_scatter): compare the
    operand values with `ge`/`le` and keep the winner (and its tangent)."""
    scalar = mlir.aval_to_ir_type(ShapedArray((), dtype))
    hlo = mlir.hlo
    block = op.regions[0].blocks.append(*[scalar] * (2 * n_pairs))
    with mlir.ir.InsertionPoint(block):
        args = block.arguments
        ctype = hlo.ComparisonTypeAttr.get("FLOAT" if np.issubdtype(dtype, np.floating) else
                                           "UNSIGNED" if dtype.kind in "ub" else "SIGNED")
        which = hlo.compare(args[0], args[n_pairs],
                            hlo.ComparisonDirectionAttr.get(
                                "GE" if select_prim is lax.ge_p else "LE"),
                            compare_type=ctype)
        if n_pairs == 1:
            hlo.return_([which])
        else:
            hlo.return_([hlo.select(which, args[i], args[n_pairs + i]) for i in range(n_pairs)])


def _select_and_gather_add_lowering(ctx, t, x, *, select_prim, window_dimensions,
                                    window_strides, padding, base_dilation, window_dilation):
    # JAX's _select_and_gather_add_using_variadic_reducewindow: one reduce_window over
    # (value, tangent) pairs; the pair whose value wins carries its tangent along
    aval = ctx.avals_in[1]
    out = mlir.aval_to_ir_type(ctx.avals_out[0])
    init = _init("max" if select_prim is lax.ge_p else "min", aval.dtype)
    pads = mlir.ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(-1, 2))
    op = mlir.hlo.ReduceWindowOp(
        [out, out], [x, t], [mlir.ir_constant(np.array(init, aval.dtype)),
                             mlir.ir_constant(np.zeros((), aval.dtype))],
        list(window_dimensions), window_strides=list(window_strides),
        base_dilations=list(base_dilation), window_dilations=list(window_dilation),
        padding=pads)
    _pair_select_body(op, aval.dtype, select_prim, 2)
    return op.results[1]


# JAX: jax/_src/lax/windowed_reductions.py select_and_gather_add_p
select_and_gather_add_p = Primitive("select_and_gather_add")
select_and_gather_add_p.def_impl(_select_and_gather_add_impl)
select_and_gather_add_p.def_abstract_eval(_select_and_gather_add_abstract_eval)
ad.primitive_jvps[select_and_gather_add_p] = _select_and_gather_add_jvp
ad.primitive_transposes[select_and_gather_add_p] = _select_and_gather_add_transpose
batching.primitive_batchers[select_and_gather_add_p] = _select_and_gather_add_batch_rule
mlir.register_lowering(select_and_gather_add_p, _select_and_gather_add_lowering)


def _select_and_scatter_add_impl(source, operand, *, select_prim, window_dimensions,
                                 window_strides, padding):
    ones = (1,) * operand.ndim
    params = (window_dimensions, window_strides, padding, ones, ones)
    where = np.arange(operand.size).reshape(operand.shape)  # -1: a padding position
    win = _windows(where, np.array(-1), *params)
    flat = win.reshape(win.shape[:operand.ndim] + (-1,))
    target = np.take_along_axis(flat, _chosen(operand, select_prim, *params), -1)[..., 0]
    out = np.zeros(operand.size, source.dtype)
    keep = target >= 0
    np.add.at(out, target[keep], source[keep])
    return out.reshape(operand.shape)


def _select_and_scatter_add_abstract_eval(source, operand, *, select_prim, window_dimensions,
                                          window_strides, padding):
    ones = (1,) * operand.ndim
    windowed = _reduce_window_abstract_eval("sum")(
        operand, window_dimensions=window_dimensions, window_strides=window_strides,
        padding=padding, base_dilation=ones, window_dilation=ones)
    if source.shape != windowed.shape or source.dtype != operand.dtype:
        raise TypeError(f"select_and_scatter_add: source {source.str_short()} must have the "
                        f"windowed shape {windowed.str_short()} of operand "
                        f"{operand.str_short()}")
    return operand.update(weak_type=source.weak_type)


def _select_and_scatter_add_jvp(primals, tangents, *, select_prim, **params):
    (s, x), (g_s, _) = primals, tangents  # linear in `s`
    out = select_and_scatter_add_p.bind(s, x, select_prim=select_prim, **params)
    if type(g_s) is Zero:
        return out, Zero.from_primal_value(out)
    return out, select_and_scatter_add_p.bind(g_s, x, select_prim=select_prim, **params)


def _select_and_scatter_add_transpose(ct, s, x, *, select_prim, window_dimensions,
                                      window_strides, padding):
    if type(ct) is Zero:
        return [Zero(s.aval), None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add_p.bind(
        ct, x, select_prim=select_prim, window_dimensions=window_dimensions,
        window_strides=window_strides, padding=padding, base_dilation=ones,
        window_dilation=ones), None]


def _select_and_scatter_add_batch_rule(vals, dims, *, axis_size, select_prim,
                                       window_dimensions, window_strides, padding):
    s, x = (batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims))
    return select_and_scatter_add_p.bind(
        s, x, select_prim=select_prim, window_dimensions=(1,) + window_dimensions,
        window_strides=(1,) + window_strides, padding=((0, 0),) + padding), 0


def _select_and_scatter_add_lowering(expand_padding: bool):
    # XLA's select_and_scatter: per window, `select` picks a position, `scatter` adds the
    # source value there. JAX's rule for every platform hands the padding to the op; its CPU
    # and GPU rules (expand_padding, a workaround for XLA crashes there) pad the operand first
    # (with values that never win) and crop the result afterwards, even for zero padding.
    def rule(ctx, s, x, *, select_prim, window_dimensions, window_strides, padding):
        aval = ctx.avals_in[1]
        hlo = mlir.hlo
        out_aval = aval
        if expand_padding:
            fill = _init("max" if select_prim is lax.ge_p else "min", aval.dtype)
            out_aval = ShapedArray(tuple(d + lo + hi for d, (lo, hi) in zip(aval.shape, padding)),
                                   aval.dtype)
            x = hlo.pad(x, mlir.ir_constant(np.array(fill, aval.dtype)),
                        [lo for lo, _ in padding], [hi for _, hi in padding], [0] * aval.ndim)
        pads = padding if not expand_padding else [(0, 0)] * aval.ndim
        op = hlo.SelectAndScatterOp(
            mlir.aval_to_ir_type(out_aval), x, s, mlir.ir_constant(np.zeros((), aval.dtype)),
            window_dimensions=list(window_dimensions), window_strides=list(window_strides),
            padding=mlir.ir.DenseIntElementsAttr.get(np.asarray(pads, np.int64).reshape(-1, 2)))
        _pair_select_body(op, aval.dtype, select_prim, 1)
        scalar = mlir.aval_to_ir_type(ShapedArray((), aval.dtype))
        block = op.regions[1].blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            hlo.return_([hlo.add(*block.arguments)])
        if not expand_padding:
            return op.result
        return hlo.slice(op.result, [lo for lo, _ in padding],
                         [lo + d for d, (lo, _) in zip(aval.shape, padding)], [1] * aval.ndim)
    rule.__name__ = "_select_and_scatter_add_lowering" + ("_expanded" if expand_padding else "")
    return rule


# JAX: jax/_src/lax/windowed_reductions.py select_and_scatter_add_p
select_and_scatter_add_p = Primitive("select_and_scatter_add")
select_and_scatter_add_p.def_impl(_select_and_scatter_add_impl)
select_and_scatter_add_p.def_abstract_eval(_select_and_scatter_add_abstract_eval)
ad.primitive_jvps[select_and_scatter_add_p] = _select_and_scatter_add_jvp
ad.primitive_transposes[select_and_scatter_add_p] = _select_and_scatter_add_transpose
batching.primitive_batchers[select_and_scatter_add_p] = _select_and_scatter_add_batch_rule
mlir.register_lowering(select_and_scatter_add_p, _select_and_scatter_add_lowering(False))
# JAX: expand_padding=True on the CPU and GPUs
mlir.register_lowering(select_and_scatter_add_p, _select_and_scatter_add_lowering(True), "cpu")
mlir.register_lowering(select_and_scatter_add_p, _select_and_scatter_add_lowering(True), "gpu")


# JAX: jax/_src/lax/windowed_reductions.py _reduce_window_chooser_jvp_rule
def _reduce_window_chooser_jvp(name: str):
    select_prim = lax.ge_p if name == "max" else lax.le_p

    def rule(g, operand, **params):
        return select_and_gather_add_p.bind(ad.instantiate_zeros(g), operand,
                                            select_prim=select_prim, **params)
    return rule


_CHOOSER_JVPS = {"select_and_gather_add": _reduce_window_chooser_jvp,
                 "unrolled": _reduce_window_chooser_jvp_unrolled}


@contextlib.contextmanager
def chooser_jvp(kind: str):
    """Within the block, differentiate reduce_window_max/min with `kind`'s rule:
    "select_and_gather_add" (JAX's, the default) or "unrolled" (slices and selects).
    Programs traced inside keep the rule they were traced with. minijax only; JAX has one.
    Raises ValueError for another kind."""
    if kind not in _CHOOSER_JVPS:
        raise ValueError(f"chooser_jvp: kind must be one of {sorted(_CHOOSER_JVPS)}, got "
                         f"{kind!r}")
    saved = {p: ad.primitive_jvps[p] for p in (reduce_window_max_p, reduce_window_min_p)}
    try:
        _register_chooser_jvps(kind)
        yield
    finally:
        ad.primitive_jvps.update(saved)


def _register_chooser_jvps(kind: str) -> None:
    if kind == "unrolled":
        ad.primitive_jvps[reduce_window_max_p] = _reduce_window_chooser_jvp_unrolled("max")
        ad.primitive_jvps[reduce_window_min_p] = _reduce_window_chooser_jvp_unrolled("min")
    else:
        ad.defjvp(reduce_window_max_p, _reduce_window_chooser_jvp("max"))
        ad.defjvp(reduce_window_min_p, _reduce_window_chooser_jvp("min"))


reduce_window_sum_p = _reduce_window_primitive("sum")
ad.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)
batching.primitive_batchers[reduce_window_sum_p] = _reduce_window_batch_rule(reduce_window_sum_p)
mlir.register_lowering(reduce_window_sum_p, _reduce_window_lowering("sum"))

reduce_window_max_p = _reduce_window_primitive("max")
batching.primitive_batchers[reduce_window_max_p] = _reduce_window_batch_rule(reduce_window_max_p)
mlir.register_lowering(reduce_window_max_p, _reduce_window_lowering("max"))

reduce_window_min_p = _reduce_window_primitive("min")
batching.primitive_batchers[reduce_window_min_p] = _reduce_window_batch_rule(reduce_window_min_p)
mlir.register_lowering(reduce_window_min_p, _reduce_window_lowering("min"))
_register_chooser_jvps("select_and_gather_add")  # their jvp rules, as JAX's


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


# JAX: jax/_src/lax/windowed_reductions.py reduce_window_shape_tuple
def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of `reduce_window` with these windows ((lo, hi) padding pairs)."""
    if base_dilation is not None:
        operand_shape = _dilate_shape(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate_shape(window_dimensions, window_dilation)
    padded = [d + lo + hi for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(max(0, (p - w) // s + 1)
                 for p, w, s in zip(padded, window_dimensions, window_strides))
