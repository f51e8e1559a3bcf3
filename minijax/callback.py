"""Host callbacks: calling Python from inside a traced (and compiled) program.

`pure_callback` binds `pure_callback_p`, a primitive with no effects: it may be removed when its
result is unused, and under `vmap` it follows the `vmap_method` the caller chose.
`io_callback` binds `io_callback_p`, whose effect (`IOEffect`, or `OrderedIOEffect` with
`ordered=True`) keeps it alive and, when ordered, sequences it with runtime tokens.

Eagerly the primitive calls the function on NumPy arrays. Under `jit` it lowers to a
`stablehlo.custom_call` to XLA's CPU Python-callback target, `xla_ffi_python_cpu_callback`,
whose `index` attribute names one of the module's host callbacks: the Python callables XLA
receives when the module is compiled (`emit_python_callback`, `compiler.compile`). At run
time XLA calls back into Python with NumPy views of the operands and copies the results back.
An exception inside the callback surfaces as XLA's runtime error, which carries the
callback's traceback.
Mirrors jax/_src/callback.py. Taught in chapters/14-callbacks-effects.md.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Sequence

import numpy as np

from minijax import compiler, core, dtypes, effects, errors, lax, numpy as jnp
from minijax.array import Array, read_only
from minijax.interpreters import ad, batching, mlir
from minijax.lax import parallel
from minijax.lax.control_flow.loops import map as lax_map
from minijax.sharding_impls import SingleDeviceSharding
from minijax.tree_util import tree_flatten, tree_unflatten


# JAX: jax/_src/callback.py _FlatCallback
class _FlatCallback:
    """The user's callback as a function of flat NumPy arguments returning a flat tuple,
    with each result checked against the declared avals (`_check_results`)."""

    __slots__ = ("callback_func", "in_tree", "result_avals", "api")

    def __init__(self, callback_func: Callable, in_tree, result_avals, api: str) -> None:
        self.callback_func = callback_func
        self.in_tree = in_tree
        self.result_avals = tuple(result_avals)
        self.api = api

    def __repr__(self) -> str:
        return f"_FlatCallback(callback_func={self.callback_func!r}, in_tree={self.in_tree})"

    def __call__(self, *flat_args) -> tuple:
        args, kwargs = tree_unflatten(self.in_tree, [np.asarray(a) for a in flat_args])
        out = self.callback_func(*args, **kwargs)
        return _check_results(self, tree_flatten(out)[0])


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _check_results(cb: _FlatCallback, outs: list) -> tuple:
    """Results as NumPy arrays of the declared avals (64-bit values narrowed as minijax
    narrows them); RuntimeError naming the callback, what it returned and what was declared."""
    want = cb.result_avals
    declared = ", ".join(a.str_short() for a in want) or "nothing"
    if len(outs) != len(want):
        raise RuntimeError(f"{cb.api} callback {_name(cb.callback_func)} returned "
                           f"{len(outs)} values, but result_shape_dtypes declares "
                           f"{len(want)} ({declared})")
    vals = []
    for i, (x, aval) in enumerate(zip(outs, want)):
        x = np.asarray(x)
        x = x.astype(dtypes.canonicalize_dtype(x.dtype), copy=False)
        if x.shape != aval.shape or x.dtype != aval.dtype:
            got = core.ShapedArray(x.shape, x.dtype).str_short()
            raise RuntimeError(f"{cb.api} callback {_name(cb.callback_func)} returned {got} "
                               f"for result {i}, but result_shape_dtypes declares "
                               f"{aval.str_short()} (all declared: {declared})")
        vals.append(x)
    return tuple(vals)


def _flat_callback(api: str, callback: Callable, result_shape_dtypes, args, kwargs):
    if not callable(callback):
        raise TypeError(f"{api}: callback must be callable, got {type(callback)}")
    flat_args, in_tree = tree_flatten((args, kwargs))
    result_leaves, out_tree = tree_flatten(result_shape_dtypes)
    try:
        result_avals = [core.ShapedArray(np.shape(r) if not hasattr(r, "shape") else r.shape,
                                         dtypes.canonicalize_dtype(r.dtype))
                        for r in result_leaves]
    except AttributeError:
        raise TypeError(f"{api}: result_shape_dtypes must be a pytree of values with .shape "
                        f"and .dtype (e.g. ShapeDtypeStruct), got {result_shape_dtypes!r}"
                        ) from None
    for r in result_leaves:  # JAX: jax/_src/callback.py _check_shape_dtype
        if dtypes.canonicalize_dtype(r.dtype) != np.dtype(r.dtype):
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
    return _FlatCallback(callback, in_tree, result_avals, api), flat_args, out_tree


def _callback_impl(*args, callback: _FlatCallback, **_):
    # eagerly too, an exception in the callback surfaces as XLA's runtime error wrapping its
    # traceback, as JAX (which runs the eager call as a compiled program) raises it
    try:
        # read-only, as JAX hands a callback its arguments: it must not change the Arrays
        return list(callback(*[read_only(x._value()) if type(x) is Array else
                               core.to_numpy(x) for x in args]))
    except Exception as e:
        raise errors.JaxRuntimeError("INTERNAL: CpuCallback error calling callback: "
                              + "".join(traceback.format_exception(e))) from None


def _callback_abstract_eval(*avals, callback: _FlatCallback, **_):
    return list(callback.result_avals)


def _pp_avals(avals) -> str:  # JAX prints them as `(ShapedArray(float32[3]),)`
    items = [f"ShapedArray({a.dtype.name}[{','.join(map(str, a.shape))}])" for a in avals]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _batched_by_map(prim: core.Primitive, vals, dims, axis_size: int, params: dict):
    """One host call per batch element, in a `lax.map` (a scan): JAX's "sequential"."""
    batched = [batching.moveaxis(x, d, 0) for x, d in zip(vals, dims) if d is not None]

    def one(xs):
        it = iter(xs)
        return prim.bind(*[next(it) if d is not None else x for x, d in zip(vals, dims)],
                         **params)

    outs = lax_map(one, batched)
    return outs, [0] * len(outs)


# JAX: jax/_src/callback.py emit_python_callback — differs: no GPU path
def emit_python_callback(ctx: mlir.LoweringRuleContext, callback: Callable,
                         operands: Sequence[Any], result_avals: Sequence[core.ShapedArray], *,
                         has_side_effect: bool, ordered_effect: effects.Effect | None = None,
                         sharding=None, partitioned: bool = False,
                         returns_token: bool = False) -> list:
    """Emit a custom call to `xla_ffi_python_cpu_callback` running `callback(*numpy_args)`
    (which returns a tuple of NumPy arrays of `result_avals`); register the callable with the
    module. With `ordered_effect`, the call consumes that effect's current token and produces
    the next one. In a module partitioned over a mesh the call runs once, on the whole values,
    on the mesh's first device or `sharding`'s (a SingleDeviceSharding); inside `shard_map`
    once per device on its shards; `partitioned` (debug callbacks, no results): once per
    device on its shards (`xla_ffi_partitioned_python_cpu_callback`). Lowered for a TPU:
    host sends and receives instead (`_emit_tpu_python_callback`; `returns_token`: wait for
    the host to answer even with no results, as debug callbacks do). Returns the results."""
    platforms = ctx.platforms
    if len(ctx.module_context.platforms) > 1:
        raise NotImplementedError("multi-platform lowering for python_callback")
    if platforms[0] == "tpu":
        if partitioned:
            raise NotImplementedError("Partitioned callback not implemented on tpu backend.")
        return _emit_tpu_python_callback(ctx, callback, operands, result_avals,
                                         ordered_effect, returns_token or bool(ordered_effect))
    if platforms[0] != "cpu":
        raise NotImplementedError(f"host callbacks: minijax has no path for {platforms[0]}")
    ir, hlo = mlir.ir, mlir.hlo
    module_ctx = ctx.module_context
    avals_in = list(ctx.avals_in)
    operands, result_types = list(operands), [mlir.aval_to_ir_type(a) for a in result_avals]
    layouts_in = [tuple(range(a.ndim - 1, -1, -1)) for a in avals_in]
    layouts_out = [tuple(range(a.ndim - 1, -1, -1)) for a in result_avals]
    if ordered_effect is not None:
        untokened = callback

        def callback(token, *args):
            return (token, *untokened(*args))

        operands = [*mlir.get_tokens([ordered_effect]), *operands]
        result_types = [mlir.token_type(), *result_types]
        layouts_in, layouts_out = [(), *layouts_in], [(), *layouts_out]
    index = module_ctx.add_host_callback(callback)

    def layouts(ls):
        return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(
            np.asarray(lay, np.int64), type=ir.IndexType.get()) for lay in ls])

    target = f"xla_ffi{'_partitioned' if partitioned else ''}_python_cpu_callback"
    attributes = dict(
        call_target_name=ir.StringAttr.get(target),
        has_side_effect=ir.BoolAttr.get(has_side_effect),
        backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        operand_layouts=layouts(layouts_in),
        result_layouts=layouts(layouts_out),
    )
    op = hlo.CustomCallOp.build_generic(results=result_types, operands=operands,
                                        attributes=attributes)
    op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(
        {"index": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), index)})
    _callback_op_sharding(op.operation, module_ctx, sharding, list(result_avals))
    results = list(op.results)
    if ordered_effect is not None:
        mlir.set_tokens([ordered_effect], results[:1])
        results = results[1:]
    return results


# JAX: jax/_src/callback.py _emit_tpu_python_callback — differs: no sharding annotations
def _emit_tpu_python_callback(ctx, callback, operands, result_avals, ordered_effect,
                              returns_token: bool) -> list:
    """The TPU's path to the host: each operand sent on its own channel, each result received
    on its own, all threaded on one token (the effect's, when ordered); the callable, with the
    channels, becomes XLA's host callback when the module is compiled
    (`compiler.SendRecvCallback`). As JAX: a callback with no operands sends a dummy `f32[1]`
    (or it would never run), one that must return a token and has no results receives a
    dummy `f32[]`, and empty results are made here as constants, never received."""
    hlo, module_ctx = mlir.hlo, ctx.module_context
    avals_in = list(ctx.avals_in)
    token = mlir.get_tokens([ordered_effect])[0] if ordered_effect else hlo.create_token()
    wanted = [a for a in result_avals if 0 not in a.shape]
    host = _tpu_host_function(callback, result_avals, bool(operands),
                              returns_token and not wanted)
    if not operands:
        operands, avals_in = [mlir.ir_constant(np.zeros(1, np.float32))], [
            core.ShapedArray((1,), np.float32)]
    sends = []
    for x in operands:
        sends.append(module_ctx.new_channel())
        token = _host_transfer(hlo.SendOp([x], token, hlo.ChannelHandle.get(sends[-1], 2),
                                          is_host_transfer=mlir.ir.BoolAttr.get(True)),
                               sends[-1]).result
    recvs, received = [], []
    recv_avals = wanted or ([core.ShapedArray((), np.float32)] if returns_token else [])
    for aval in recv_avals:
        recvs.append(module_ctx.new_channel())
        op = _host_transfer(hlo.RecvOp([mlir.aval_to_ir_type(aval), hlo.TokenType.get()],
                                       token, hlo.ChannelHandle.get(recvs[-1], 3),
                                       is_host_transfer=mlir.ir.BoolAttr.get(True)), recvs[-1])
        received.append(op.results[0])
        token = op.results[1]
    module_ctx.add_host_callback(compiler.SendRecvCallback(host, avals_in, recv_avals,
                                                           sends, recvs))
    if ordered_effect is not None:
        mlir.set_tokens([ordered_effect], [token])
    it = iter(received)
    return [next(it) if 0 not in a.shape else mlir.ir_constant(np.zeros(a.shape, a.dtype))
            for a in result_avals]


def _tpu_host_function(callback, result_avals, has_operands: bool, dummy_result: bool):
    """`callback` as the TPU's host side calls it: with the dummy operand dropped when there
    are no operands, returning only its non-empty results (the TPU cannot receive empty
    arrays), or the dummy `0.0` when it must answer and has none."""
    def host(*args):
        outs = callback(*(args if has_operands else ()))
        if dummy_result:
            return (np.zeros((), np.float32),)
        return tuple(o for o, a in zip(outs, result_avals) if 0 not in a.shape)
    return host


def _host_transfer(op, channel: int):
    """`op` (a send or receive) marked as a transfer the runtime's rendezvous handles."""
    op.attributes["mhlo.frontend_attributes"] = mlir.ir.DictAttr.get({
        "_xla_host_transfer_handler_name": mlir.ir.StringAttr.get("pjrt_rendezvous"),
        "_xla_host_transfer_rendezvous": mlir.ir.StringAttr.get(str(channel))})
    return op


# JAX: jax/_src/callback.py _callback_op_sharding
def _callback_op_sharding(op, module_ctx, sharding, result_avals) -> None:
    """Where the callback runs once the module is partitioned: inside a `shard_map` over all
    of the mesh's axes, on each device (its values replicated over `@empty_mesh`); in the
    bulk program, on one device (`mlir.ModuleContext.maximal_callbacks`, annotated at the end
    of lowering, once the mesh is known: `minijax/interpreters/mlir.py: _place_callbacks`)."""
    if parallel.ctx.meshes:
        mesh, manual = parallel.ctx.meshes[-1]
        if manual != frozenset(mesh.axis_names):
            raise NotImplementedError(
                "callbacks are only supported in spmd computations when all mesh axes are "
                "partitioned manually (no partial automatic sharding).")
        if sharding is not None:
            raise NotImplementedError("callbacks do not support specifying sharding inside "
                                      "spmd computations")
        module_ctx.empty_mesh = True
        per = [f"<@empty_mesh, [{', '.join(['{}'] * a.ndim)}]>" for a in result_avals]
        if len(op.results) > len(result_avals) or not per:  # the token, or no results
            per = ["<@empty_mesh, []>", *per]
        op.attributes["sdy.sharding"] = mlir.ir.Attribute.parse(
            "#sdy.sharding_per_value<[" + ", ".join(per) + "]>")
        return
    if sharding is not None and not isinstance(sharding, SingleDeviceSharding):
        raise NotImplementedError("pure_callback only supports SingleDeviceSharding, but got "
                                  f"{type(sharding)}")
    module_ctx.maximal_callbacks.append(
        (op, None if sharding is None else sharding._device))


# ---------------------------------------------------------------------------------------------
# pure_callback
# ---------------------------------------------------------------------------------------------

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None)


# JAX: jax/_src/callback.py pure_callback
def pure_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                  vmap_method: str | None = None, **kwargs):
    """Call the side-effect-free host function `callback(*args, **kwargs)` from traced code.

    Args:
      callback: a Python function of NumPy arrays (the leaves of `args`/`kwargs`, in their
        pytree) returning arrays matching `result_shape_dtypes`.
      result_shape_dtypes: a pytree of `ShapeDtypeStruct`s (anything with .shape and .dtype),
        e.g. `ShapeDtypeStruct((3,), float32)` for one `f32[3]` result.
      vmap_method: how `vmap` batches it: "sequential" (one call per example, in a loop),
        "sequential_unrolled" (the same, unrolled), "expand_dims" (one call; unbatched
        arguments get a leading axis of size 1), "broadcast_all" (one call; every argument
        has the full batch axis), "legacy_vectorized" (one call, unbatched arguments left
        as they are). None: vmap raises.
      sharding: a SingleDeviceSharding: in a program partitioned over a mesh, the device
        the callback runs on (default: the mesh's first); it gets the whole arrays there.
    Returns: the results, in `result_shape_dtypes`'s pytree.
    Raises: ValueError for an unknown vmap_method, and under `jvp`/`grad` (wrap it in
    `custom_jvp`/`custom_vjp`); NotImplementedError under `vmap` without a vmap_method;
    RuntimeError (XLA's runtime error under jit) when the callback returns something else.
    The function may run fewer times than written (dead-code elimination) or more.
    """
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    flat_cb, flat_args, out_tree = _flat_callback("pure_callback", callback,
                                                  result_shape_dtypes, args, kwargs)
    outs = pure_callback_p.bind(*flat_args, callback=flat_cb,
                                result_avals=flat_cb.result_avals, sharding=sharding,
                                vmap_method=vmap_method)
    return tree_unflatten(out_tree, outs)


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


# JAX: jax/_src/ffi.py ffi_batching_rule (what pure_callback_p uses)
def _pure_callback_batch_rule(vals, dims, *, axis_size, callback, result_avals, sharding,
                              vmap_method):
    params = dict(callback=callback, result_avals=result_avals, sharding=sharding,
                  vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        if vmap_method == "sequential":
            return _batched_by_map(pure_callback_p, vals, dims, axis_size, params)
        per_example = [pure_callback_p.bind(
            *[x if d is None else index_in_dim(x, i, d) for x, d in zip(vals, dims)], **params)
            for i in range(axis_size)]
        outs = [jnp.stack(col) for col in zip(*per_example)]
        return outs, [0] * len(outs)
    if vmap_method is None:
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one "
            "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method}.")
    new_vals = []
    for x, d in zip(vals, dims):
        if d is not None:
            new_vals.append(batching.moveaxis(x, d, 0))
        elif vmap_method == "expand_dims":
            new_vals.append(lax.expand_dims(x, (0,)))
        elif vmap_method == "broadcast_all":
            new_vals.append(batching.bdim_at_front(x, None, axis_size))
        else:  # legacy_vectorized: unbatched arguments as they are
            new_vals.append(x)
    b_avals = tuple(a.update(shape=(axis_size, *a.shape)) for a in result_avals)
    b_cb = _FlatCallback(callback.callback_func, callback.in_tree, b_avals, callback.api)
    outs = pure_callback_p.bind(*new_vals, **dict(params, callback=b_cb, result_avals=b_avals))
    return outs, [0] * len(outs)


def index_in_dim(x, i: int, d: int):
    """Example `i` of `x` batched at axis `d` (JAX: jax/_src/lax/slicing.py index_in_dim)."""
    return lax.dynamic_index_in_dim(x, i, axis=d, keepdims=False)


def _pure_callback_lowering(ctx, *args, callback, result_avals, sharding, vmap_method):
    return emit_python_callback(ctx, callback, args, result_avals, has_side_effect=False,
                                sharding=sharding)


pure_callback_p = core.Primitive("pure_callback")
pure_callback_p.multiple_results = True
pure_callback_p.pp_param_formatters = {"result_avals": _pp_avals}
pure_callback_p.def_impl(_callback_impl)
pure_callback_p.def_abstract_eval(_callback_abstract_eval)
ad.primitive_jvps[pure_callback_p] = _pure_callback_jvp
batching.primitive_batchers[pure_callback_p] = _pure_callback_batch_rule
mlir.register_lowering(pure_callback_p, _pure_callback_lowering)


# ---------------------------------------------------------------------------------------------
# io_callback
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/callback.py IOEffect
class IOEffect(effects.Effect):
    """The effect of an `io_callback(..., ordered=False)`: never removed, in no fixed order."""

    def __str__(self) -> str:
        return "IO"


# JAX: jax/_src/callback.py OrderedIOEffect
class OrderedIOEffect(effects.Effect):
    """The effect of an `io_callback(..., ordered=True)`: sequenced by a runtime token."""

    def __str__(self) -> str:
        return "OrderedIO"


_IOEffect = IOEffect()
_OrderedIOEffect = OrderedIOEffect()
effects.ordered_effects.add_type(OrderedIOEffect)
effects.shardable_ordered_effects.add_type(OrderedIOEffect)


# JAX: jax/_src/callback.py io_callback
def io_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                ordered: bool = False, **kwargs):
    """Call the host function `callback(*args, **kwargs)`, which may have side effects.

    Like `pure_callback` (same `callback` and `result_shape_dtypes`), but the call is never
    removed, and with `ordered=True` calls happen in program order (inside loops, branches
    and across jitted calls too: runtime tokens). Under `vmap` an unordered call runs once
    per example; an ordered one raises ValueError, as do `jvp`/`grad`. `sharding`: as for
    `pure_callback`, the device a program partitioned over a mesh calls it from.
    Returns the results in `result_shape_dtypes`'s pytree.
    """
    flat_cb, flat_args, out_tree = _flat_callback("io_callback", callback,
                                                  result_shape_dtypes, args, kwargs)
    outs = io_callback_p.bind(*flat_args, callback=flat_cb, ordered=ordered,
                              result_avals=flat_cb.result_avals, sharding=sharding)
    return tree_unflatten(out_tree, outs)


def _io_callback_abstract_eval(*avals, callback, ordered, result_avals, sharding):
    return list(result_avals), {_OrderedIOEffect if ordered else _IOEffect}


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


# JAX: jax/_src/callback.py io_callback_batching_rule
def _io_callback_batch_rule(vals, dims, *, axis_size, callback, ordered, result_avals,
                            sharding):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    params = dict(callback=callback, ordered=ordered, result_avals=result_avals,
                  sharding=sharding)
    return _batched_by_map(io_callback_p, vals, dims, axis_size, params)


def _io_callback_lowering(ctx, *args, callback, ordered, result_avals, sharding):
    return emit_python_callback(ctx, callback, args, result_avals, has_side_effect=True,
                                ordered_effect=_OrderedIOEffect if ordered else None,
                                sharding=sharding)


io_callback_p = core.Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.pp_param_formatters = {"result_avals": _pp_avals}
io_callback_p.def_impl(_callback_impl)
io_callback_p.def_effectful_abstract_eval(_io_callback_abstract_eval)
ad.primitive_jvps[io_callback_p] = _io_callback_jvp
batching.primitive_batchers[io_callback_p] = _io_callback_batch_rule
mlir.register_lowering(io_callback_p, _io_callback_lowering)
