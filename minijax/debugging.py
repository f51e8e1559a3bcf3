"""Debugging callbacks: `debug.callback` and `debug.print`, which look at runtime values.

Both bind a primitive with no outputs and a `DebugEffect` (or `OrderedDebugEffect` with
`ordered=True`), so dead-code elimination keeps them. Eagerly they call the host function at
once; under `jit` they lower to a host callback (`minijax/callback.py:
emit_python_callback`) that runs each time the compiled program does; under `vmap` they run
once per example; under `jvp`/`grad` they see the primal values, and the backward pass adds
no calls (their transpose does nothing).
Mirrors jax/_src/debugging.py. Taught in chapters/14-callbacks-effects.md and
chapters/15-debugging.md.
"""

from __future__ import annotations

import string
import sys
from functools import partial
from typing import Any, Callable

import numpy as np

from minijax import core, effects
from minijax.array import array_from_numpy
from minijax.callback import emit_python_callback, index_in_dim
from minijax.interpreters import ad, batching, mlir, partial_eval as pe
from minijax.lax import parallel
from minijax.mesh import AxisType
from minijax.named_sharding import Sharding
from minijax.tree_util import tree_flatten, tree_unflatten


# JAX: jax/_src/debugging.py DebugEffect
class DebugEffect(effects.Effect):
    """The effect of an unordered debug callback."""

    def __str__(self) -> str:
        return "Debug"


# JAX: jax/_src/debugging.py OrderedDebugEffect
class OrderedDebugEffect(effects.Effect):
    """The effect of `debug.callback`/`debug.print(..., ordered=True)`: a runtime token
    sequences these calls with each other."""

    def __str__(self) -> str:
        return "OrderedDebug"


debug_effect = DebugEffect()
ordered_debug_effect = OrderedDebugEffect()
effects.ordered_effects.add_type(OrderedDebugEffect)


# JAX: jax/_src/debugging.py _split_callback_args
def _split_callback_args(args, kwargs):
    """(in_tree, array leaves, {position: other leaf}): only arrays are traced; the rest
    (strings, None, ...) are handed to the callback as they are."""
    flat, in_tree = tree_flatten((args, kwargs))
    static_args, dyn_args = {}, []
    for i, a in enumerate(flat):
        try:
            core.get_aval(a)
            dyn_args.append(a)
        except TypeError:
            static_args[i] = a
    return in_tree, dyn_args, static_args


# JAX: jax/_src/debugging.py merge_callback_args
def merge_callback_args(in_tree, dyn_args, static_args):
    static = dict(static_args)
    di = iter(dyn_args)
    flat = [static[i] if i in static else next(di)
            for i in range(len(static) + len(dyn_args))]
    return tree_unflatten(in_tree, flat)


def _make_flat_callback(in_tree, callback: Callable, static_args) -> Callable:
    def _flat_callback(*dyn_args):
        args, kwargs = merge_callback_args(in_tree, dyn_args, static_args)
        callback(*args, **kwargs)
        return ()
    return _flat_callback


# ---------------------------------------------------------------------------------------------
# debug_callback
# ---------------------------------------------------------------------------------------------

def _debug_callback_impl(*args, callback: Callable, effect, partitioned: bool):
    # the host function gets Arrays, as JAX's gets jax.Arrays
    callback(*[array_from_numpy(np.asarray(a)) for a in args])
    return []


def _debug_callback_abstract_eval(*avals, callback, effect, partitioned):
    return [], {effect}


# JAX: jax/_src/debugging.py debug_batching_rule
def _debug_batch_rule(vals, dims, *, axis_size, primitive, **params):
    """One call per example, unrolled (example 0 first)."""
    for i in range(axis_size):
        primitive.bind(*[x if d is None else index_in_dim(x, i, d) for x, d in zip(vals, dims)],
                       **params)
    return [], []


def _debug_jvp(primals, tangents, *, primitive, **params):
    return primitive.bind(*primals, **params), []


def _debug_transpose(cts, *args, **params):
    return [None] * len(args)


# JAX: jax/_src/debugging.py debug_callback_lowering
def _debug_callback_lowering(ctx, *args, callback, effect, partitioned):
    def host(*flat):
        _debug_callback_impl(*flat, callback=callback, effect=effect, partitioned=partitioned)
        return ()
    if parallel.ctx.meshes:
        mesh, manual = parallel.ctx.meshes[-1]
        if manual != frozenset(mesh.axis_names):
            _debug_callback_partial_auto(ctx, mesh, manual, args, host, partitioned)
            return []
    ordered = effect if effects.ordered_effects.contains(effect) else None
    emit_python_callback(ctx, host, args, [], has_side_effect=True, ordered_effect=ordered,
                         partitioned=partitioned, returns_token=True)
    return []


# JAX: jax/_src/debugging.py _debug_callback_partial_auto — differs: emits the nested manual
# computation and the branch directly instead of lowering a traced shard_map of a cond;
# JAX 0.10.2 raises TypeError (`axis_index` given two names) with two or more automatic axes
def _debug_callback_partial_auto(ctx, mesh, manual, args, host, partitioned) -> None:
    """A debug callback inside a shard_map manual along only some of the mesh axes: its
    operands are gathered along the other axes (a nested `sdy.manual_computation` over them,
    the operands replicated along them) and it runs where their index is 0: once per shard
    of the manual axes. With an Explicit axis among the others, NotImplementedError for a
    value of the body (JAX refuses to close a shard_map over it; constants are fine)."""
    sdy = mlir.sdy
    ir, hlo = mlir.ir, mlir.hlo
    rest = tuple(a for a in mesh.axis_names if a not in manual)
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    if any(types[a] is AxisType.Explicit for a in rest):
        body_values = [a for a, v in zip(ctx.avals_in, args)
                       if getattr(v.owner, "name", None) != "stablehlo.constant"]
        if body_values:
            by_type: dict = {}
            for a in mesh.axis_names:
                by_type.setdefault(AxisType.Manual if a in manual else types[a], []).append(a)
            raise NotImplementedError(
                "Closing over inputs to shard_map where the input is sharded on `Explicit` "
                "axes is not implemented. As a workaround, please pass those inputs as an "
                "argument to shard_map. Got input with shape "
                f"{body_values[0].str_short()}({ {t: tuple(n) for t, n in by_type.items()} })")
    mlir.sharding_attr(parallel._replicated(mesh), 0)  # declares the module's mesh
    in_sh = ir.Attribute.parse("#sdy.sharding_per_value<[" + ", ".join(
        f"<@mesh, [{', '.join(['{?}'] * a.ndim)}]>" for a in ctx.avals_in) + "]>")
    op = sdy.ManualComputationOp([], list(args), in_sh,
                                 ir.Attribute.parse("#sdy.sharding_per_value<[]>"),
                                 sdy.ManualAxesAttr.get([ir.StringAttr.get(a) for a in rest]))
    block = ir.Block.create_at_start(op.body, [v.type for v in args])
    parallel.ctx.meshes.append((mesh, frozenset(mesh.axis_names)))
    try:
        with ir.InsertionPoint(block):
            i32 = core.ShapedArray((), np.int32)
            idx = parallel._axis_index_value(mlir.LoweringRuleContext([], [i32]), mesh, rest)
            first = mlir.compare_hlo(idx, mlir.ir_constant(np.int32(0)), "EQ")
            case = hlo.CaseOp([], hlo.convert(mlir.aval_to_ir_type(i32), first), 2)
            with ir.InsertionPoint(case.regions[0].blocks.append()):
                hlo.return_([])
            with ir.InsertionPoint(case.regions[1].blocks.append()):
                # unordered: stages.Lowered refuses ordered debug effects on a mesh
                emit_python_callback(mlir.LoweringRuleContext(ctx.avals_in, []), host,
                                     list(block.arguments), [], has_side_effect=True,
                                     partitioned=partitioned)
                hlo.return_([])
            sdy.ReturnOp([])
    finally:
        parallel.ctx.meshes.pop()


# JAX: jax/_src/debugging.py _debug_partial_eval_custom
def _debug_partial_eval_custom(saveable, unks_in, inst_in, eqn, *, primitive):
    # Under checkpoint an effectful equation is normally only run forward; a debug callback is
    # also staged (it runs again in the recomputation) unless the policy saves it and some of
    # its inputs would have to become residuals for it, as in JAX.
    if any(unks_in):
        return None, eqn, [], [], [v for v, inst in zip(eqn.invars, inst_in) if not inst]
    if saveable(primitive, *[v.aval for v in eqn.invars], **eqn.params) and not all(inst_in):
        return eqn, None, [], [], []
    return eqn, eqn, [], [], []


debug_callback_p = core.Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.pp_param_formatters = {"callback": lambda f: core.mask_addresses(repr(f))}
debug_callback_p.def_impl(_debug_callback_impl)
debug_callback_p.def_effectful_abstract_eval(_debug_callback_abstract_eval)
ad.primitive_jvps[debug_callback_p] = partial(_debug_jvp, primitive=debug_callback_p)
ad.primitive_transposes[debug_callback_p] = _debug_transpose
batching.primitive_batchers[debug_callback_p] = partial(_debug_batch_rule,
                                                        primitive=debug_callback_p)
mlir.register_lowering(debug_callback_p, _debug_callback_lowering)
pe.partial_eval_jaxpr_custom_rules[debug_callback_p] = partial(_debug_partial_eval_custom,
                                                               primitive=debug_callback_p)


# JAX: jax/_src/debugging.py debug_callback
def debug_callback(callback: Callable[..., None] | None = None, *args: Any,
                   ordered: bool = False, partitioned: bool = False, **kwargs: Any):
    """Call `callback(*args, **kwargs)` with the runtime values of `args`, from traced code.

    Array leaves of `args`/`kwargs` arrive as Arrays; other leaves (strings, ...) as given.
    Returns None. With `ordered=True` the ordered debug callbacks of a program, and of
    successive jitted calls, run in program order. Two-call form: `debug_callback(ordered=
    True)(callback, *args)`. Raises TypeError if `callback` is not callable.
    """
    def _debug_callback(callback, *c_args, **c_kwargs):
        if not callable(callback):
            raise TypeError("first argument to jax.debug.callback must be callable, but got "
                            f"an object of type {type(callback)}")
        in_tree, dyn_args, static_args = _split_callback_args(c_args, c_kwargs)

        def _flat_callback(*dyn_args_flat):  # defined here: jaxprs name it as JAX's do
            args_, kwargs_ = merge_callback_args(in_tree, dyn_args_flat, static_args)
            callback(*args_, **kwargs_)
            return ()

        debug_callback_p.bind(
            *dyn_args, callback=_flat_callback,
            effect=ordered_debug_effect if ordered else debug_effect, partitioned=partitioned)

    if callback is not None:
        _debug_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_callback


# ---------------------------------------------------------------------------------------------
# debug_print
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/debugging.py _DebugPrintFormatChecker
class _DebugPrintFormatChecker(string.Formatter):
    """Checks a format string against its arguments at trace time, formatting nothing."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused_args = [a for i, a in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused_args}")
        if unused_kwargs:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kwargs}. You may be "
                "passing an f-string (i.e, `f\"{x}\"`) into `jax.debug.print` and instead "
                "should pass in a regular string.")


_formatter = _DebugPrintFormatChecker()


# JAX: jax/_src/debugging.py _format_print_callback — differs: no logging records
def _format_print_callback(fmt: str, np_printoptions, has_placeholders: bool, *args,
                           **kwargs):
    if has_placeholders:
        with np.printoptions(**np_printoptions):
            msg = fmt.format(*args, **kwargs)
    else:
        msg = " ".join((fmt, *(str(a) for a in args)))
    sys.stdout.write(msg + "\n")


def _print_callback(fmt, in_tree, static_args, np_printoptions, has_placeholders) -> Callable:
    callback = partial(_format_print_callback, fmt, dict(np_printoptions), has_placeholders)
    return _make_flat_callback(in_tree, callback, static_args)


def _debug_print_impl(*args, fmt, ordered, partitioned, in_tree, static_args, np_printoptions,
                      has_placeholders, logging_record):
    return _debug_callback_impl(
        *args, callback=_print_callback(fmt, in_tree, static_args, np_printoptions,
                                        has_placeholders),
        effect=None, partitioned=partitioned)


def _debug_print_abstract_eval(*avals, ordered, **params):
    return [], {ordered_debug_effect if ordered else debug_effect}


def _debug_print_lowering(ctx, *args, fmt, ordered, partitioned, in_tree, static_args,
                          np_printoptions, has_placeholders, logging_record):
    return _debug_callback_lowering(
        ctx, *args, callback=_print_callback(fmt, in_tree, static_args, np_printoptions,
                                             has_placeholders),
        effect=ordered_debug_effect if ordered else debug_effect, partitioned=partitioned)


debug_print_p = core.Primitive("debug_print")
debug_print_p.multiple_results = True
debug_print_p.def_impl(_debug_print_impl)
debug_print_p.def_effectful_abstract_eval(_debug_print_abstract_eval)
ad.primitive_jvps[debug_print_p] = partial(_debug_jvp, primitive=debug_print_p)
ad.primitive_transposes[debug_print_p] = _debug_transpose
batching.primitive_batchers[debug_print_p] = partial(_debug_batch_rule, primitive=debug_print_p)
mlir.register_lowering(debug_print_p, _debug_print_lowering)
pe.partial_eval_jaxpr_custom_rules[debug_print_p] = partial(_debug_partial_eval_custom,
                                                            primitive=debug_print_p)


# JAX: jax/_src/debugging.py debug_print
def debug_print(fmt: str | None = None, *args, ordered: bool = False,
                partitioned: bool = False, skip_format_check: bool = False, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the runtime values, from traced code.

    Use `{}`/`{name}` placeholders, not an f-string (formatting happens when the program
    runs). Arrays print as NumPy prints them, under the print options current at trace
    time. Without placeholders the arguments follow `fmt`, space separated. With
    `ordered=True` ordered prints come out in program order. Two-call form:
    `debug_print(ordered=True)("x={x}", x=x)`. Returns None.
    Raises ValueError for arguments the format does not use, and what `str.format` raises
    for missing ones (at trace time).
    """
    def _debug_print(fmt: str, *c_args, **c_kwargs):
        if not skip_format_check:
            _formatter.format(fmt, *c_args, **c_kwargs)
        has_placeholders = False
        if fmt:
            _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field_name is not None
        in_tree, dyn_args, static_args = _split_callback_args(c_args, c_kwargs)
        debug_print_p.bind(
            *dyn_args, fmt=fmt, ordered=ordered, partitioned=partitioned, in_tree=in_tree,
            static_args=tuple(static_args.items()),
            np_printoptions=tuple(np.get_printoptions().items()),
            has_placeholders=has_placeholders, logging_record=None)

    if fmt is not None:
        _debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_print


# ---------------------------------------------------------------------------------------------
# A picture of an array on the mesh
# ---------------------------------------------------------------------------------------------

# JAX: jax/_src/debugging.py visualize_sharding — differs: draws the uncoloured table (what JAX
# prints when the output is not a colour terminal), never the coloured one, as text even in
# a notebook
def visualize_sharding(shape, sharding: Sharding, *, use_color: bool = False,
                       scale: float = 1.0, min_width: int = 9, max_width: int = 80) -> None:
    """Print the blocks of an array of `shape` (rank 1 or 2) laid out by `sharding` as a
    table: one cell per distinct block, labelled with the devices that hold it ("CPU 0,1"
    for a block held twice), cell sizes proportional to the block sizes.
    Raises ValueError for other ranks."""
    import rich.align
    import rich.box
    import rich.console
    import rich.padding
    import rich.table
    del use_color  # accepted as JAX's signature; minijax always draws the plain table
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 dimensions.")
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    kind = sharding._device_assignment[0].platform.upper()
    cells: dict = {}  # (row, col) -> [height fraction or None, width fraction, device ids]
    for dev, idx in sharding.devices_indices_map(shape).items():
        spans = [(s.start or 0, n if s.stop is None else s.stop) for s, n in zip(idx, shape)]
        pos = tuple(a // (b - a) if b > a else 0 for a, b in spans)
        if len(shape) == 1:
            pos, height = (0, *pos), None
        else:
            height = (spans[0][1] - spans[0][0]) / shape[0]
        cell = cells.setdefault(pos, [height, (spans[-1][1] - spans[-1][0]) / shape[-1], []])
        cell[2].append(dev.id)
    rows = 1 + max(p[0] for p in cells)
    cols = 1 + max(p[1] for p in cells)
    table = rich.table.Table(show_header=False, show_lines=True, padding=0, highlight=True,
                             pad_edge=False, box=rich.box.SQUARE)
    for i in range(rows):
        row = []
        for j in range(cols):
            height, width, ids = cells[i, j]
            text = f"{kind} " + ",".join(str(d) for d in sorted(ids))
            w = min(max(int(width * base_width * 2.5), min_width), max_width)
            h = 1 if height is None else int(height * base_height)
            left, extra = divmod(w - len(text) - 2, 2)
            top, extra_h = divmod(h - 2, 2)
            pad = (max(top, 0), max(left + extra, 0), max(top + extra_h, 0), max(left, 0))
            row.append(rich.padding.Padding(
                rich.align.Align(text, "center", vertical="middle"), pad))
        table.add_row(*row)
    # plain text in notebooks too (rich would render HTML there): what chapter 12 prints
    rich.console.Console(width=max_width, force_jupyter=False, color_system=None).print(
        table, end="\n\n")


# JAX: jax/_src/debugging.py visualize_array_sharding
def visualize_array_sharding(arr, **kwargs) -> None:
    """`visualize_sharding(arr.shape, arr.sharding)` for a minijax Array of rank 1 or 2 (a
    rank-1 picture for a scalar, as JAX draws it)."""
    shape = arr.shape if arr.ndim else (1,)
    visualize_sharding(shape, arr.sharding, **kwargs)
